#!/usr/bin/env python3
"""What the oaken_cjk tokenizer (oaken/index/keyword/tokenizer.py) costs on mail without CJK.

Issue #17 item 3 allows index size and speed on the Enron corpus to regress by 15 % at most. Three
measurements, each against `porter unicode61 remove_diacritics 2` (the tokenizer before it):

  fts      the text of every chunk of an index.db (its fts_content view) indexed again into a
           contentless FTS5 table per candidate, in this process: the tokenizer's own cost, with
           nothing else around it (the worst case for a slower tokenizer). Candidates: unicode61,
           oaken_cjk, and unicode61 plus a trigram table beside it (issue's option a).
  query    searches on those tables: bm25's best 50, and the same with snippets (snippet() calls
           the tokenizer again on each hit's text).
  reindex  `oaken reindex --rebuild --keyword-only` run whole (parse, chunk, write), alternating
           this tree's code and another tree's (--base-code: a `git archive HEAD` of the tree
           before the change), on a data directory holding raw.db.
  search   oaken.search.engine.search (keyword mode) for SEARCHES, in a process per tree and
           run, each tree on an index.db it built (the base tree's in a copy of --home): CPU ms
           per search, the median of 30, then the median over --runs.

Times are CPU seconds (process_time; the children's user+sys for reindex) and wall seconds,
medians of --runs; sizes are bytes of the database file after FTS5's optimize. Run it niced on a
shared machine and read `uptime` beside it:

  nice .venv/bin/python scripts/bench_tokenizer.py --home /tmp/home --base-code /tmp/base --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw

from oaken.index.keyword import tokenizer

COLUMNS = ("subject", "sender", "recipients", "body", "quoted", "attachments")
CANDIDATES = {
    "unicode61": [" ".join(tokenizer.BASE)],
    "oaken_cjk": [tokenizer.TOKENIZE],
    "unicode61+trigram": [" ".join(tokenizer.BASE), "trigram"],
}
QUERIES = ('"enron"', '"meeting"', '"california" AND "power"', '"board of directors"', '"deal"*', '"skilling"')


def rows_of(index_db: Path) -> list[tuple]:
    db = apsw.Connection(str(index_db), flags=apsw.SQLITE_OPEN_READONLY)
    tokenizer.register(db)
    try:
        return db.execute(f"SELECT id, {', '.join(COLUMNS)} FROM fts_content ORDER BY id").fetchall()
    finally:
        db.close()


def build(path: Path, tokenizes: list[str], rows: list[tuple]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) to index `rows` into one contentless table per tokenizer."""
    db = apsw.Connection(str(path))
    tokenizer.register(db)
    db.execute("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF")
    cpu, wall = time.process_time(), time.perf_counter()
    with db:
        for i, tok in enumerate(tokenizes):
            db.execute(f"CREATE VIRTUAL TABLE t{i} USING fts5({', '.join(COLUMNS)}, content='', tokenize='{tok}')")
            db.executemany(f"INSERT INTO t{i}(rowid, {', '.join(COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            db.execute(f"INSERT INTO t{i}(t{i}) VALUES('optimize')")
    out = time.process_time() - cpu, time.perf_counter() - wall
    db.close()
    return out


def bench_fts(rows: list[tuple], runs: int, work: Path) -> dict:
    result: dict = {}
    for _ in range(runs):
        for name, tokenizes in CANDIDATES.items():  # interleaved: a burst of load hits all alike
            path = work / f"{name}.db"
            path.unlink(missing_ok=True)
            cpu, wall = build(path, tokenizes, rows)
            r = result.setdefault(name, {"cpu": [], "wall": [], "bytes": path.stat().st_size})
            r["cpu"].append(cpu)
            r["wall"].append(wall)
    return {k: {"cpu_s": _med(v["cpu"]), "wall_s": _med(v["wall"]), "bytes": v["bytes"]} for k, v in result.items()}


def bench_queries(rows: list[tuple], work: Path, repeat: int) -> dict:
    """ms per query on a table with content (snippet needs the text), per tokenizer."""
    out = {}
    for name in ("unicode61", "oaken_cjk"):
        path = work / f"q-{name}.db"
        path.unlink(missing_ok=True)
        db = apsw.Connection(str(path))
        tokenizer.register(db)
        with db:
            db.execute(f"CREATE VIRTUAL TABLE f USING fts5({', '.join(COLUMNS)}, tokenize='{CANDIDATES[name][0]}')")
            db.executemany(f"INSERT INTO f(rowid, {', '.join(COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            db.execute("INSERT INTO f(f) VALUES('optimize')")
        timings = {}
        for label, sql in (
            ("top50", "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 50"),
            (
                "top50+snippet",
                "SELECT rowid, snippet(f, -1, '[[', ']]', '…', 24) FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 50",
            ),
        ):
            samples = []
            for _ in range(repeat):
                t = time.process_time()
                for q in QUERIES:
                    db.execute(sql, (q,)).fetchall()
                samples.append((time.process_time() - t) * 1000 / len(QUERIES))
            timings[label] = round(_med(samples), 3)
        out[name] = timings
        db.close()
    return out


def reindex(home: Path, code: Path | None) -> tuple[float, float, int, str]:
    """(children's CPU s, wall s, index.db bytes, its tokenize=) of one whole keyword rebuild."""
    env = dict(os.environ, OAKEN_HOME=str(home))
    if code is not None:
        env["PYTHONPATH"] = str(code)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from oaken.cli import main; sys.exit(main())",
            "reindex",
            "--rebuild",
            "--keyword-only",
            "--json",
        ],
        env=env,
        cwd=home,  # not this tree: `python -c` puts the working directory first on sys.path
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    index_db = home / "index.db"
    db = apsw.Connection(str(index_db), flags=apsw.SQLITE_OPEN_READONLY)
    sql = db.execute("SELECT sql FROM sqlite_master WHERE name = 'fts'").fetchone()[0]
    db.close()
    return cpu, wall, os.stat(os.path.realpath(index_db)).st_size, sql.split("tokenize=")[-1].rstrip(")")


def bench_reindex(home: Path, base: Path | None, runs: int) -> dict:
    result: dict = {}
    for _ in range(runs):
        for name, code in (("this tree", None), ("base", base)):
            if name == "base" and base is None:
                continue
            cpu, wall, size, tok = reindex(home, code)
            r = result.setdefault(name, {"cpu": [], "wall": [], "bytes": size, "tokenize": tok})
            r["cpu"].append(cpu)
            r["wall"].append(wall)
    return {
        k: {"cpu_s": _med(v["cpu"]), "wall_s": _med(v["wall"]), "bytes": v["bytes"], "tokenize": v["tokenize"]}
        for k, v in result.items()
    }


SEARCHES = (
    "enron",
    "meeting",
    "california power",
    '"board of directors"',
    "deal*",
    "skilling",
    "what did the board decide about the merger?",
)
_SEARCH_PROGRAM = """
import json, statistics, sys, time
from oaken.config import Config, EmbedderConfig, PathsConfig
from oaken.search.engine import search
cfg = Config(paths=PathsConfig(data_dir=sys.argv[1]), embedder=EmbedderConfig(model="none"))
out = {}
for q in json.loads(sys.argv[2]):
    search(q, config=cfg)
    ms = []
    for _ in range(30):
        t = time.process_time()
        search(q, config=cfg)
        ms.append((time.process_time() - t) * 1000)
    out[q] = statistics.median(ms)
print(json.dumps(out))
"""


def bench_search(home: Path, base: Path | None, runs: int, work: Path) -> dict:
    trees = [("this tree", home, None)]
    if base is not None:
        base_home = work / "base-home"
        base_home.mkdir()
        shutil.copy(home / "raw.db", base_home / "raw.db")
        reindex(base_home, base)
        trees.append(("base", base_home, base))
    reindex(home, None)
    samples: dict = {}
    for _ in range(runs):
        for name, data, code in trees:
            env = dict(os.environ, **({"PYTHONPATH": str(code)} if code else {}))
            done = subprocess.run(
                [sys.executable, "-c", _SEARCH_PROGRAM, str(data), json.dumps(SEARCHES)],
                env=env,
                cwd=work,
                check=True,
                capture_output=True,
                text=True,
            )
            for q, ms in json.loads(done.stdout).items():
                samples.setdefault(q, {}).setdefault(name, []).append(ms)
    return {q: {name: _med(v) for name, v in by.items()} for q, by in samples.items()}


def _med(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True, help="a data directory with raw.db (oaken import --no-index)")
    ap.add_argument("--base-code", type=Path, help="a tree whose oaken/ is the code before the change")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", choices=("fts", "query", "reindex", "search"), action="append")
    args = ap.parse_args()
    only = set(args.only or ("fts", "query", "reindex", "search"))
    report: dict = {"load_before": os.getloadavg()}
    if "reindex" in only:
        report["reindex"] = bench_reindex(args.home, args.base_code, args.runs)
    if "search" in only:
        with tempfile.TemporaryDirectory() as tmp:
            report["search_cpu_ms"] = bench_search(args.home, args.base_code, args.runs, Path(tmp))
    if only & {"fts", "query"}:
        if not (args.home / "index.db").exists():
            reindex(args.home, None)
        rows = rows_of(args.home / "index.db")
        report["chunks"] = len(rows)
        with tempfile.TemporaryDirectory() as tmp:
            if "fts" in only:
                report["fts"] = bench_fts(rows, args.runs, Path(tmp))
            if "query" in only:
                report["query_ms"] = bench_queries(rows, Path(tmp), args.runs * 4)
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
