#!/usr/bin/env python3
"""Same-run latency of Tantivy (tantivy-py) top-k BM25 against Oaken's FTS5 bm25 ORDER BY LIMIT,
on the same chunks, in one warm process, the engines alternating run by run.

    nice -n 10 /tmp/tvspike/venv/bin/python bench.py --db /work/scale/oaken-1000000/index.db \
        --index /work/tantivy-spike/index --runs 20 [--json out.json]

Per query: match counts of both engines, median and p95 ms of top-80 and top-400 for each, the
Tantivy time with count=True (every match visited, as FTS5 does), and the overlap of the two top
10s. index.db is opened read-only; Oaken's tokenizer module is loaded from its file (no package
import) so FTS5 can parse MATCH with `oaken_cjk`.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import statistics
import sys
import time

import apsw
import tantivy

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from build import TEXT_FIELDS, open_index  # noqa: E402

WEIGHTS = (4.0, 2.0, 1.0, 1.0, 0.2, 1.0)  # oaken.config.IndexConfig defaults: subject..attachments
BOOSTS = dict(zip(TEXT_FIELDS, WEIGHTS))
BM25 = f"bm25(fts, {', '.join(repr(w) for w in WEIGHTS)})"

Y2015 = (int(datetime.datetime(2015, 1, 1, tzinfo=datetime.timezone.utc).timestamp()),
         int(datetime.datetime(2016, 1, 1, tzinfo=datetime.timezone.utc).timestamp()))

# (label, tantivy query text, FTS5 MATCH, filter) ; filter: None | ("date", lo, hi) | ("account", a) | ("kind", k)
QUERIES = [
    ("pipeline", "pipeline", "pipeline", None),
    ("broadband", "broadband", "broadband", None),
    ("dabhol", "dabhol", "dabhol", None),
    ("reception", "reception", "reception", None),
    ("invoice", "invoice", "invoice", None),
    ("AND california power prices", "california power prices", "california AND power AND prices", None),
    ("AND board meeting agenda", "board meeting agenda", "board AND meeting AND agenda", None),
    ("AND stock option grants", "stock option grants", "stock AND option AND grants", None),
    ('"board of directors"', '"board of directors"', '"board of directors"', None),
    ('"natural gas"', '"natural gas"', '"natural gas"', None),
    ('"conference call"', '"conference call"', '"conference call"', None),
    ("budget OR approved", "budget OR approved", "budget OR approved", None),
    ("energy OR trading OR losses", "energy OR trading OR losses", "energy OR trading OR losses", None),
    ("pipeline, date in 2015", "pipeline", "pipeline", ("date", *Y2015)),
    ("broadband, date in 2015", "broadband", "broadband", ("date", *Y2015)),
    ("pipeline, account=local", "pipeline", "pipeline", ("account", "local")),
    ("pipeline, kind=attachment", "pipeline", "pipeline", ("kind", "attachment")),
]


def load_oaken_tokenizer():
    path = "/work/main/oaken/index/keyword/tokenizer.py"
    spec = importlib.util.spec_from_file_location("oaken_tokenizer_ro", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def rss() -> dict[str, int]:
    out = {}
    for line in open("/proc/self/status"):
        if line.startswith(("VmRSS", "RssAnon", "RssFile")):
            k, v = line.split(":")
            out[k] = int(v.split()[0]) // 1024
    return out


class Tv:
    def __init__(self, path: str):
        self.index = open_index(path)
        self.schema = self.index.schema
        self.searcher = self.index.searcher()

    def query(self, text: str, filt) -> tantivy.Query:
        q = self.index.parse_query(
            text, default_field_names=list(TEXT_FIELDS), field_boosts=BOOSTS, conjunction_by_default=True
        )
        if filt is None:
            return q
        if filt[0] == "date":
            f = tantivy.Query.range_query(
                self.schema, "date", tantivy.FieldType.Integer, filt[1], filt[2], include_upper=False
            )
        else:
            f = tantivy.Query.term_query(self.schema, filt[0], filt[1])
        # the filter scores nothing: constant 0 added to every match
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, q), (tantivy.Occur.Must, tantivy.Query.const_score_query(f, 0.0))]
        )

    def top(self, q: tantivy.Query, k: int, count: bool = False) -> list[tuple[int, int, float]]:
        """(chunk id, message id, score) best first, ids read from the fast fields as a search
        would need them."""
        res = self.searcher.search(q, k, count=count)
        addrs = [a for _, a in res.hits]
        chunks = self.searcher.fast_field_values("chunk", addrs)
        msgs = self.searcher.fast_field_values("message", addrs)
        return [(c, m, s) for (s, _), c, m in zip(res.hits, chunks, msgs)]

    def count(self, q: tantivy.Query) -> int:
        return self.searcher.search(q, 1, count=True).count


class Fts:
    def __init__(self, path: str):
        tok = load_oaken_tokenizer()
        real = os.path.realpath(path)
        self.db = apsw.Connection(f"file:{real}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        tok.register(self.db)
        self.db.execute("PRAGMA cache_size=-400000")  # as bench_fts_rank.py

    def top(self, match: str, filt, k: int) -> list[tuple[int, int, float]]:
        if filt is None:
            # the unfiltered ranking as bench_fts_rank.py / reader._ranked_first's inner statement
            rows = self.db.execute(
                f"SELECT rowid, {BM25} AS r FROM fts WHERE fts MATCH ? ORDER BY r, rowid LIMIT ?", (match, k)
            ).fetchall()
            return [(r[0], 0, -r[1]) for r in rows]
        # filtered: every match joined and filtered (reader.search's fallback statement, one half)
        cond, params = {
            "date": ("m.date >= ? AND m.date < ?", list(filt[1:])),
            "account": ("m.account = ?", [filt[1]]),
            "kind": ("c.kind = ?", [filt[1]]),
        }[filt[0]]
        rows = self.db.execute(
            f"SELECT fts.rowid, c.message, {BM25} AS rank FROM fts JOIN chunks c ON c.id = fts.rowid "
            f"JOIN messages m ON m.id = c.message WHERE fts MATCH ? AND {cond} ORDER BY rank, fts.rowid LIMIT ?",
            [match, *params, k],
        ).fetchall()
        return [(r[0], r[1], -r[2]) for r in rows]

    def count(self, match: str, filt) -> int:
        if filt is None:
            return self.db.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (match,)).fetchone()[0]
        cond, params = {
            "date": ("m.date >= ? AND m.date < ?", list(filt[1:])),
            "account": ("m.account = ?", [filt[1]]),
            "kind": ("c.kind = ?", [filt[1]]),
        }[filt[0]]
        return self.db.execute(
            f"SELECT count(*) FROM fts JOIN chunks c ON c.id = fts.rowid JOIN messages m ON m.id = c.message "
            f"WHERE fts MATCH ? AND {cond}",
            [match, *params],
        ).fetchone()[0]


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--only", help="substring of the labels to run")
    a = ap.parse_args()

    r0 = rss()
    tv = Tv(a.index)
    r1 = rss()
    fts = Fts(a.db)
    print(f"tantivy: {tv.searcher.num_docs:,} docs, {tv.searcher.num_segments} segments; RSS before open {r0}, "
          f"after open {r1}; load {loadavg()}", flush=True)
    out = []
    hdr = (f"{'query':30} {'tv n':>8} {'fts n':>8} | {'tv80 p50':>8} {'p95':>6} {'tv400':>6} {'tvcnt':>6} | "
           f"{'fts80 p50':>9} {'p95':>6} {'fts400':>6} | top10∩ | load")
    print(hdr, flush=True)
    for label, tq, fm, filt in QUERIES:
        if a.only and a.only not in label:
            continue
        q = tv.query(tq, filt)
        n_tv = tv.count(q)
        n_fts = fts.count(fm, filt)
        # warm both
        tv.top(q, 400)
        fts.top(fm, filt, 400)
        times = {k: [] for k in ("tv80", "tv400", "tvcount80", "fts80", "fts400")}
        load_before = loadavg()
        for i in range(a.runs):
            # alternate the order run by run
            steps = [
                ("tv80", lambda: tv.top(q, 80)),
                ("fts80", lambda: fts.top(fm, filt, 80)),
                ("tv400", lambda: tv.top(q, 400)),
                ("fts400", lambda: fts.top(fm, filt, 400)),
                ("tvcount80", lambda: tv.top(q, 80, count=True)),
            ]
            if i % 2:
                steps.reverse()
            for name, fn in steps:
                t = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - t) * 1000)
        load_after = loadavg()
        t10 = tv.top(q, 10)
        f10 = fts.top(fm, filt, 10)
        overlap = len({c for c, _, _ in t10} & {c for c, _, _ in f10})
        med = {k: statistics.median(v) for k, v in times.items()}
        pp = {k: p95(v) for k, v in times.items()}
        print(f"{label[:30]:30} {n_tv:8,} {n_fts:8,} | {med['tv80']:8.2f} {pp['tv80']:6.2f} {med['tv400']:6.2f} "
              f"{med['tvcount80']:6.1f} | {med['fts80']:9.1f} {pp['fts80']:6.1f} {med['fts400']:6.1f} | "
              f"{overlap:2d}/10  | {load_before.split()[0]}->{load_after.split()[0]}", flush=True)
        out.append(dict(label=label, tantivy_query=tq, fts_match=fm, filter=filt, n_tantivy=n_tv, n_fts=n_fts,
                        median_ms=med, p95_ms=pp, top10_overlap=overlap, load_before=load_before,
                        load_after=load_after, runs=a.runs,
                        top10_tantivy=[c for c, _, _ in t10], top10_fts=[c for c, _, _ in f10]))
    r2 = rss()
    print(f"RSS at end (tantivy searcher + FTS5 connection with 400 MB cache_size): {r2}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(results=out, rss_open=r1, rss_before=r0, rss_end=r2), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
