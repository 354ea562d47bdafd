"""Stage 1 preview of docs/tantivy-retriever.md: the bare ranking function, FTS5's bm25 against
Tantivy's BM25, on the MATCH plan Oaken writes for each answerable real-mail question (no
grading, no widening, no filters: both sides alike), chunks collapsed to messages, R@10 / MRR.

    PYTHONPATH=/path/to/a/venv/with/tantivy/site-packages \\
        .venv/bin/python scripts/spike_tantivy/parity.py --data /work/evkeep/data --split dev [--all]

--data is a kept real eval data dir (`python -m oaken.evals retrieval --real --live --keep DIR`:
DIR/data). Tantivy gets one text field per FTS5 column with the column weights as query boosts,
or with --all one combined field (subject 4x, sender 2x, recipients, body, attachments: weights
by repetition) beside quoted text at 0.2, which normalises by the whole chunk as FTS5's bm25 does.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import tantivy  # noqa: E402

from oaken.evals import questions as questions_mod  # noqa: E402
from oaken.evals.retrieval import recall_at, reciprocal_rank  # noqa: E402
from oaken.index.keyword import KeywordIndex  # noqa: E402
from oaken.search import matching  # noqa: E402
from oaken.search import query as query_mod  # noqa: E402

COLS = ["subject", "sender", "recipients", "body", "quoted", "attachments"]
WEIGHTS = {"subject": 4.0, "sender": 2.0, "recipients": 1.0, "body": 1.0, "quoted": 0.2, "attachments": 1.0}
# Tantivy's en_stem, but without its remove_long(40) filter, which drops a 40-character token (a
# git commit hash: two exact questions found nothing): FTS5 keeps every token
TOKENIZER = "oaken_en"
REPEAT = {"subject": 4, "sender": 2, "recipients": 1, "body": 1, "quoted": 0, "attachments": 1}
KINDS = ("exact", "paraphrase", "filtered", "mixed", "overall")


def build(rows: list[tuple]) -> tantivy.Index:
    sb = tantivy.SchemaBuilder()
    for c in [*COLS, "all"]:
        sb.add_text_field(c, stored=False, tokenizer_name=TOKENIZER, index_option="position")
    sb.add_integer_field("chunk", indexed=True, fast=True, stored=True)
    sb.add_integer_field("message", indexed=True, fast=True, stored=True)
    ix = tantivy.Index(sb.build(), path=tempfile.mkdtemp())
    analyzer = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
                .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.stemmer("english")).build())
    ix.register_tokenizer(TOKENIZER, analyzer)
    w = ix.writer(heap_size=200_000_000, num_threads=1)
    for r in rows:
        d = tantivy.Document(chunk=int(r[0]), message=int(r[1]))
        for c, v in zip(COLS, r[2:]):
            if v:
                d.add_text(c, v)
        d.add_text("all", " \n ".join(v for c, v in zip(COLS, r[2:]) if v for _ in range(REPEAT[c])) or " ")
        w.add_document(d)
    w.commit()
    w.wait_merging_threads()
    ix.reload()
    return ix


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--split", choices=("dev", "test"), default="dev")
    ap.add_argument("--all", action="store_true", help="one combined field (see above)")
    args = ap.parse_args()
    raw = sqlite3.connect(f"file:{args.data / 'raw.db'}?mode=ro", uri=True)
    mid = dict(raw.execute("SELECT id, message_id FROM messages"))
    idx = sqlite3.connect(f"file:{args.data / 'index.db'}?mode=ro", uri=True)
    rows = idx.execute("SELECT f.id, c.message, " + ", ".join("f." + c for c in COLS)
                       + " FROM fts_content f JOIN chunks c ON c.id = f.id").fetchall()
    t = time.perf_counter()
    ix = build(rows)
    searcher = ix.searcher()
    print(f"tantivy: {searcher.num_docs} chunks in {time.perf_counter() - t:.1f} s", flush=True)
    files = sorted((REPO / "evals" / "questions").glob("*.jsonl"))
    dev, test = questions_mod.split([q for f in files for q in questions_mod.load_jsonl(f)])
    bm25 = "bm25(fts, " + ", ".join(str(WEIGHTS[c]) for c in COLS) + ")"
    res: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with KeywordIndex(args.data) as k:
        for q in dev if args.split == "dev" else test:
            plan = matching.plan(query_mod.parse(q.query), 0.5) if q.relevant else None
            if plan is None:
                continue
            fts = [m for _, m in k._run("SELECT fts.rowid, c.message FROM fts JOIN chunks c ON c.id = fts.rowid "
                                        f"WHERE fts MATCH ? ORDER BY {bm25} LIMIT 500", [plan.expression])]
            expr = re.sub(r'"\*', '"', plan.expression)  # prefixes: dropped on this side (few questions have one)
            tq = (ix.parse_query(expr, ["all", "quoted"], field_boosts={"all": 1.0, "quoted": 0.2}) if args.all
                  else ix.parse_query(expr, COLS, field_boosts=WEIGHTS))
            tv = [searcher.doc(a)["message"][0] for _, a in searcher.search(tq, 500).hits]
            for name, ranked in (("fts5", fts), ("tantivy", tv)):
                msgs = [mid.get(m) for m in dict.fromkeys(ranked)]
                score = (recall_at(msgs, q.relevant, 10), reciprocal_rank(msgs[:10], q.relevant))
                res.setdefault((name, q.kind), []).append(score)
                res.setdefault((name, "overall"), []).append(score)
    for kind in KINDS:
        cells = [f"{name} n={len(v)} R@10 {statistics.mean(a for a, _ in v):.3f} MRR {statistics.mean(b for _, b in v):.3f}"
                 for name in ("fts5", "tantivy") if (v := res.get((name, kind)))]
        print(f"{kind:10s} | " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
