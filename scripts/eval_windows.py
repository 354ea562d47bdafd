"""Experiment (issue #13): embed windows of about --words words of each chunk (sentences grouped),
instead of or beside the chunks; a message scores its best window (vector side alone, exact
search, all-MiniLM-L6-v2 on openvino-int8, scripts/eval_embedder.py's scoring).

    .venv/bin/python scripts/eval_windows.py --data /work/evkeep/data --split dev
    .venv/bin/python scripts/eval_windows.py --data /work/evkeep/data --split test --modes chunks,both

Measured and not kept (2026-12-04, docs/meaning-at-scale.md): chunks and 40-word windows
together gained on dev (overall R@10 0.571 -> 0.596) and lost on test (0.626 -> 0.608), for 2.8x
the rows.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

import eval_embedder as E  # noqa: E402

from oaken.evals import questions as questions_mod  # noqa: E402

MODEL = "all-MiniLM-L6-v2@openvino-int8"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def windows(text: str, words: int) -> list[str]:
    """The text's sentences grouped into windows of at most `words` words (a longer sentence alone)."""
    out: list[str] = []
    cur: list[str] = []
    n = 0
    for s in (s.strip() for s in SENTENCE_END.split(text)):
        if not s:
            continue
        k = len(s.split())
        if cur and n + k > words:
            out.append(" ".join(cur))
            cur, n = [], 0
        cur.append(s)
        n += k
    if cur:
        out.append(" ".join(cur))
    return out


def build(data: Path, mode: str, words: int) -> E.Corpus:
    """eval_embedder's Corpus with a row per chunk ("chunks"), per window ("windows"), or per chunk
    plus per window of chunks that split into more than one ("both")."""
    chunks = E.body_chunks(data)
    msgs = sorted({c.message for c in chunks})
    row = {m: i for i, m in enumerate(msgs)}
    raw = sqlite3.connect(f"file:{data / 'raw.db'}?mode=ro", uri=True)
    try:
        mid_of = dict(raw.execute("SELECT id, message_id FROM messages"))
    finally:
        raw.close()
    text_row: dict[str, int] = {}
    ids, chunk_msg, chunk_text = [], [], []
    for c in chunks:
        subject = c.subject.strip()
        texts = [E.embed_text(c)] if mode in ("chunks", "both") else []
        if mode in ("windows", "both"):
            ws = windows(c.text, words)
            if mode == "windows" or len(ws) > 1:
                texts += [f"{subject}\n{w}" if subject else w for w in ws]
        for t in texts:
            ids.append(c.id)
            chunk_msg.append(row[c.message])
            chunk_text.append(text_row.setdefault(t, len(text_row)))
    texts = list(text_row)
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    return E.Corpus(np.array(ids), np.array(chunk_msg), np.array(chunk_text), texts, np.array(msgs),
                    [mid_of.get(m) or f"oaken:{m}" for m in msgs], h.hexdigest()[:16])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="a kept eval data dir (DIR/data of --keep DIR)")
    ap.add_argument("--cache", type=Path, default=Path("/work/bench-embed/windows"), help="vectors cache")
    ap.add_argument("--words", type=int, default=40, help="words per window")
    ap.add_argument("--split", choices=("dev", "test"), default="dev")
    ap.add_argument("--modes", default="chunks,windows,both", help="chunks, windows, both (comma-separated)")
    args = ap.parse_args()
    files = sorted((REPO / "evals" / "questions").glob("*.jsonl"))
    dev, test = questions_mod.split([q for f in files for q in questions_mod.load_jsonl(f)])
    half = dev if args.split == "dev" else test
    model = None
    for mode in args.modes.split(","):
        t = time.perf_counter()
        corpus = build(args.data, mode, args.words)
        doc, _ = E.embed_corpus(MODEL, corpus, args.cache, 2, 32)
        if model is None:
            model = E.load(MODEL, 2, 32, args.cache)
        asked = E.ask_list(args.data, corpus, half)
        qvecs, _, _ = E.embed_queries(model, asked)
        sc = E.scores(E.search(corpus, doc, qvecs, asked))
        kinds = "; ".join(f"{k} {v['recall_at_10']} / {v['mrr_at_10']} / {v['answered_at_10']}"
                          for k, v in sc.items() if k != "paraphrase_first_right")
        print(f"{args.words} words, {args.split}, {mode}: {len(corpus.chunk_ids)} rows, {len(corpus.texts)} texts; "
              f"R@10 / MRR / answered: {kinds}; paraphrase first right {sc['paraphrase_first_right']}; "
              f"{time.perf_counter() - t:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
