"""Query embedding latency of each backend of one or more models, on one process, one after the
other: every dev question embedded alone, warm (5 first), as eval_embedder's embed_queries
does (tokenizing included). Wall and process CPU milliseconds.

    nice -n 10 .venv/bin/python scripts/mpnet_query_latency.py \
        --spec all-mpnet-base-v2 --spec all-mpnet-base-v2@openvino --spec all-mpnet-base-v2@openvino-int8 \
        --spec all-MiniLM-L6-v2 --spec all-MiniLM-L6-v2@openvino-int8 --out /work/bench-embed/results-query-latency.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eval_embedder as ee  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec", action="append", required=True, help="model[@backend], as eval_embedder's --model")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2, help="passes over the questions (the latency of the last)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    files = sorted((ee.REPO / "evals" / "questions").glob("*.jsonl"))
    qs = [q for f in files for q in ee.questions_mod.load_jsonl(f)]
    dev, _ = ee.questions_mod.split(qs)
    texts = [ee.embedded_text(ee.query_mod.parse(q.query)) for q in dev]
    out = {}
    for spec in args.spec:
        model = ee.load(spec, args.threads)
        for t in texts[:5]:
            ee.encode(model, [t], 1)
        for _ in range(args.rounds):
            ms, cpu = [], []
            la = os.getloadavg()[0]
            for t in texts:
                w, c = time.perf_counter(), time.process_time()
                ee.encode(model, [t], 1)
                ms.append((time.perf_counter() - w) * 1000)
                cpu.append((time.process_time() - c) * 1000)
        out[ee.model_name(spec)] = {"questions": len(texts), "p50": round(float(np.percentile(ms, 50)), 1),
                                    "p90": round(float(np.percentile(ms, 90)), 1),
                                    "cpu_p50": round(float(np.percentile(cpu, 50)), 1),
                                    "min": round(float(min(ms)), 1), "load": round(la, 2),
                                    "precision": str(getattr(model, "precision", "fp32"))}
        print(ee.model_name(spec), json.dumps(out[ee.model_name(spec)]), flush=True)
        del model
    if args.out:
        args.out.write_text(json.dumps({"threads": args.threads, "rounds": args.rounds, "latency": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
