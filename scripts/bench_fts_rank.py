#!/usr/bin/env python3
"""Where FTS5's ranking time goes, on an Oaken home's index.db: per query, the median ms of

- `count`: walking the match (the doclists, no row looked at);
- `sort, cheap key`: every match sorted by a key SQLite computes for nothing (rowid % 977);
- `bm25`: Oaken's weighted bm25, ORDER BY ... LIMIT 80 as the keyword side asks it;
- `callback, nothing`: a Python auxiliary function returning 0 (the cost of calling one per row);
- `callback, column size`: the same asking FTS5 for the row's size (what bm25 reads per row:
  a lookup in the fts_docsize table).

One connection, one core; the keyword side splits the ranking in two halves past a million chunks
(oaken.index.keyword.reader). Read the columns against each other: `bm25 - sort` is what scoring
costs, `column size - nothing` how much of it the size lookup is.

    OAKEN_HOME=/work/scale/oaken-1000000 .venv/bin/python scripts/bench_fts_rank.py [QUERY ...]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import apsw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from oaken import config  # noqa: E402
from oaken.index.keyword import tokenizer  # noqa: E402
from oaken.index.keyword.reader import KeywordIndex  # noqa: E402

QUERIES = ["pipeline", "broadband", '"board of directors"', "california AND power AND prices", "budget OR approved"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("queries", nargs="*", default=QUERIES, help="FTS5 MATCH expressions")
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args(argv)
    cfg = config.load()
    index = KeywordIndex(cfg.data_dir, cfg.index)
    bm25 = index._bm25
    path = os.path.realpath(index.path)
    index.close()
    db = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    tokenizer.register(db)
    db.execute("PRAGMA cache_size=-400000")
    db.register_fts5_function("cb_nothing", lambda api, *args: 0)
    db.register_fts5_function("cb_size", lambda api, *args: api.column_size(-1))
    (chunks,) = db.execute("SELECT count(*) FROM fts_docsize").fetchone()
    print(f"{path}: {chunks:,} chunks; load {os.getloadavg()[0]:.1f}; median of {a.runs} ms")
    shapes = {
        "count": "SELECT count(*) FROM fts WHERE fts MATCH ?",
        "sort, cheap key": "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid % 977 LIMIT 80",
        "bm25": f"SELECT rowid, {bm25} AS r FROM fts WHERE fts MATCH ? ORDER BY r LIMIT 80",
        "callback, nothing": "SELECT rowid, cb_nothing(fts) AS r FROM fts WHERE fts MATCH ? ORDER BY r LIMIT 80",
        "callback, column size": "SELECT rowid, cb_size(fts) AS r FROM fts WHERE fts MATCH ? ORDER BY r LIMIT 80",
    }
    print(f"{'query':34} {'matches':>9} " + " ".join(f"{name:>22}" for name in shapes))
    for q in a.queries:
        (matches,) = db.execute(shapes["count"], [q]).fetchone()
        cells = []
        for sql in shapes.values():
            db.execute(sql, [q]).fetchall()
            times = []
            for _ in range(a.runs):
                start = time.perf_counter()
                db.execute(sql, [q]).fetchall()
                times.append((time.perf_counter() - start) * 1000)
            cells.append(f"{statistics.median(times):22.1f}")
        print(f"{q[:34]:34} {matches:9,} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
