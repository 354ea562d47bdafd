"""One table over several scripts/eval_embedder.py result files (--out JSON): per run and kind,
right answer in the top 10 and MRR@10; where paraphrases' right answers sit; the best-cosine
AUC of answerable against unanswerable questions; corpus speed and query latency.

    .venv/bin/python scripts/eval_embedder_summary.py /work/bench-embed/results-*-dev.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

KINDS = ("paraphrase", "mixed", "exact", "filtered", "overall")
BINS = ("1", "2-10", "11-30", "31-100", ">100")


def main(paths: list[str]) -> int:
    runs = {}
    for p in paths:
        d = json.loads(Path(p).read_text())
        for label, run in d["runs"].items():
            runs[label] = {**run, "_file": Path(p).name, "_chunks": d["chunks"], "rankings": d["rankings"][label]}
    head = "| run | " + " | ".join(f"{k} top10 / MRR" for k in KINDS) + " |"
    lines = [head, "|---|" + "---|" * len(KINDS)]
    for label, r in runs.items():
        s = r["scores"]
        lines.append(f"| {label} | " + " | ".join(f"{s[k]['answered_at_10']:.3f} / {s[k]['mrr_at_10']:.3f}"
                                                   for k in KINDS) + " |")
    lines += ["", "| run | paraphrase first right: " + " | ".join(BINS) + " | AUC answerable | AUC para+mixed |",
              "|---|" + "---|" * (len(BINS) + 2)]
    for label, r in runs.items():
        b, sep = r["scores"]["paraphrase_first_right"], r["separation"]
        lines.append(f"| {label} | " + " | ".join(str(b[x]) for x in BINS) +
                     f" | {sep['answerable']['auc']:.3f} | {sep['paraphrase+mixed']['auc']:.3f} |")
    lines += ["", "| run | backend / precision | chunks/s | CPU ms/text | mean load | encode s | query p50 / p90 ms | "
              "query CPU p50 ms | file |", "|---|" + "---|" * 8]
    for label, r in runs.items():
        e, q = r["embedding"], r["query_ms"]
        lines.append(f"| {label} | {e.get('backend', 'torch-fp32')} / {e.get('precision', 'fp32')} | "
                     f"{e['chunks_per_second']} | {e['cpu_ms_per_text']} | {e['mean_load']} | {e['encode_seconds']} | "
                     f"{q['p50']} / {q['p90']} | {q['cpu_p50']} | {r['_file']} |")
    first, base = next(iter(runs.items())) if runs else (None, None)
    if base is not None and len(runs) > 1:
        lines += ["", f"Paired against {first}: questions with a right answer in the top 10 gained / lost, per kind:", "",
                  "| run | " + " | ".join(KINDS[:-1]) + " |", "|---|" + "---|" * (len(KINDS) - 1)]
        ref = {r["question"]: r for r in base["rankings"]}
        for label, r in list(runs.items())[1:]:
            cells = []
            for kind in KINDS[:-1]:
                gained = lost = 0
                for q in r["rankings"]:
                    if q["kind"] != kind or q["question"] not in ref:
                        continue
                    a, b = _top10(ref[q["question"]]), _top10(q)
                    gained += b and not a
                    lost += a and not b
                cells.append(f"+{gained} / -{lost}")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    return 0


def _top10(row: dict) -> bool:
    return row["first_right"] is not None and row["first_right"] <= 10


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
