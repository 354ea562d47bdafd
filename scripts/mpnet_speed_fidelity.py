"""Which fast backend of a model to embed the full corpus with: speed on ~200 real chunks and
fidelity against torch fp32 (sentence-transformers) on ~300 other real chunks and the dev
questions (issue #13; scripts/eval_embedder.py).

    nice -n 10 .venv/bin/python scripts/mpnet_speed_fidelity.py --model all-mpnet-base-v2 \
        --out /work/bench-embed/results-mpnet-backends.json

Chunks are drawn at random (seeded) from the distinct chunk texts of the real mailbox, as
eval_embedder forms them; the speed sample and the fidelity sample are disjoint. The torch fp32
reference vectors of the fidelity sample come from eval_embedder's cache of the whole corpus when
it is complete, else they are computed here. Speed: every backend embeds the same 200 texts in
one call (length-sorted batches), warm, with --threads threads; wall and process CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eval_embedder as ee  # noqa: E402
from eval_embedder_backends import BACKENDS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="all-mpnet-base-v2")
    p.add_argument("--backend", action="append", choices=BACKENDS)
    p.add_argument("--speed", type=int, default=200)
    p.add_argument("--fidelity", type=int, default=300)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--no-torch-speed", action="store_true", help="skip torch fp32 in the speed test")
    p.add_argument("--data", type=Path, default=ee.DEFAULT_DATA)
    p.add_argument("--cache", type=Path, default=ee.DEFAULT_CACHE)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)

    corpus = ee.read_corpus(args.data)
    rows = list(range(len(corpus.texts)))
    random.Random(7).shuffle(rows)
    speed_rows, fid_rows = rows[: args.speed], rows[args.speed: args.speed + args.fidelity]
    speed_texts = [corpus.texts[i] for i in speed_rows]
    fid_texts = [corpus.texts[i] for i in fid_rows]
    files = sorted((ee.REPO / "evals" / "questions").glob("*.jsonl"))
    qs = [q for f in files for q in ee.questions_mod.load_jsonl(f)]
    dev, _ = ee.questions_mod.split(qs)
    queries = [ee.embedded_text(ee.query_mod.parse(q.query)) for q in dev]

    name = args.model
    folder = args.cache / ee.model_name(name)
    final = folder / f"texts-{corpus.digest}.npy"
    torch_model = None
    if final.exists():
        ref = np.load(final)[fid_rows]
        ref_source = str(final)
    else:
        torch_model = ee.load(name, args.threads)
        ref = ee.encode(torch_model, fid_texts, args.batch)
        ref_source = "computed here (torch fp32)"
    tok = ee.load(name + "@onnx-fp32", args.threads, args.batch, args.cache).tokenizer
    lens = [len(x) for x in tok.encode(speed_texts)]
    out: dict = {"model": ee.model_name(name), "threads": args.threads, "batch": args.batch,
                 "speed_texts": len(speed_texts), "speed_tokens_mean": round(float(np.mean(lens)), 1),
                 "speed_tokens_total": int(sum(lens)), "fidelity_texts": len(fid_texts),
                 "fidelity_reference": ref_source, "backends": {}}
    print(f"speed sample: {len(speed_texts)} texts, {np.mean(lens):.0f} tokens mean; fidelity sample "
          f"{len(fid_texts)} texts, reference {ref_source}", flush=True)

    backends = args.backend or list(BACKENDS)
    order = ([] if args.no_torch_speed else ["torch-fp32"]) + backends
    qref = None
    for b in order:
        spec = name if b == "torch-fp32" else f"{name}@{b}"
        t = time.perf_counter()
        if b == "torch-fp32":
            model = torch_model or ee.load(name, args.threads)
        else:
            model = ee.load(spec, args.threads, args.batch, args.cache)
        load_s = time.perf_counter() - t
        ee.encode(model, speed_texts[:8], args.batch)  # warm
        t, c, la = time.perf_counter(), time.process_time(), os.getloadavg()[0]
        ee.encode(model, speed_texts, args.batch)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        row = {"load_seconds": round(load_s, 1), "speed_seconds": round(wall, 2), "speed_cpu_seconds": round(cpu, 2),
               "chunks_per_second": round(len(speed_texts) / wall, 2), "tokens_per_second": round(sum(lens) / wall),
               "cpu_ms_per_chunk": round(1000 * cpu / len(speed_texts), 1), "load_before": round(la, 2),
               "load_after": round(os.getloadavg()[0], 2),
               "precision": str(getattr(model, "precision", "fp32"))}
        qv = np.stack([ee.encode(model, [q], 1)[0] for q in queries])
        if b == "torch-fp32":
            qref = qv
        else:
            v = ee.encode(model, fid_texts, args.batch)
            cos = (v * ref).sum(1)
            row.update({"doc_cos_mean": round(float(cos.mean()), 5), "doc_cos_min": round(float(cos.min()), 5),
                        "doc_cos_p01": round(float(np.quantile(cos, 0.01)), 5),
                        "doc_cos_p05": round(float(np.quantile(cos, 0.05)), 5),
                        "doc_cos_below_0.99": int((cos < 0.99).sum()),
                        "worst": [{"cos": round(float(cos[i]), 4), "chars": len(fid_texts[i]),
                                   "tokens": len(tok.encode([fid_texts[i]])[0])} for i in np.argsort(cos)[:5]]})
            # does the document ranking of the fidelity sample survive: per dev question, top-10 overlap
            # among the 300 fidelity chunks, torch query x torch docs vs this backend's query x docs
            if qref is not None:
                qc = (qv * qref).sum(1)
                row.update({"query_cos_mean": round(float(qc.mean()), 5), "query_cos_min": round(float(qc.min()), 5)})
                top_ref = np.argsort(-(qref @ ref.T), axis=1)[:, :10]
                top = np.argsort(-(qv @ v.T), axis=1)[:, :10]
                row["top10_overlap_in_sample"] = round(float(np.mean([len(set(a) & set(b_)) / 10
                                                                      for a, b_ in zip(top_ref, top)])), 3)
        out["backends"][b] = row
        print(b, json.dumps(row), flush=True)
        del model
        if b == "torch-fp32":
            torch_model = None
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
