"""Stage 1 of docs/tantivy-retriever.md as an experiment: Oaken's own keyword retriever (graded
order, widening, filters, fusion) with its ranked chunk list from Tantivy instead of FTS5's bm25,
judged by the real-mail eval. Everything else stays FTS5's: which phrases a ranked chunk holds,
snippets, exclusions, `query_within`, subject terms of listings. So the eval measures the one
thing stage 1 asks: whether Oaken's answers hold when Tantivy ranks.

    PYTHONPATH=/work/tv/lib/python3.11/site-packages .venv/bin/python scripts/spike_tantivy/retriever.py \\
        eval --engine tantivy -- --real --live --split dev --keep /work/evkeep --out /tmp/tv-dev
    ... retriever.py bench --data /work/scale/oaken-1000000 --text /work/tvtext   (1M: build, then time)

Text index (the design's schema, ranking on one combined field, docs/tantivy-retriever.md's last
section): every value tokenized by index.db's own tokenizer (`oaken_cjk porter unicode61
remove_diacritics 2`, through apsw: the very tokens FTS5 indexes; colocated CJK unigrams left out
here) and written space-separated into fields Tantivy cuts on whitespace. `all` holds subject 4x,
sender 2x, recipients, body and attachments (the column weights by repetition: one length norm
a chunk, as FTS5's bm25 has), `quoted` the quoted text (asked at boost 0.2), `subject` the
subject alone for `subject : "t"` restrictions. Prefixes (`"deploy"*`) are a regex on the stem.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path

import apsw
import tantivy

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from oaken.index.keyword import tokenizer as oaken_tokenizer  # noqa: E402
from oaken.index.keyword.records import KeywordChunkHit, KeywordFilters  # noqa: E402

REPEAT = (("subject", 4), ("sender", 2), ("recipients", 1), ("body", 1), ("attachments", 1))
QUOTED_BOOST = 0.2

# the fts_content view's columns, read from chunks and messages (schema.py's expressions)
ROWS_SQL = """
SELECT c.id, c.message, m.subject, m.sender_name || ' ' || m.sender_addr,
       CASE c.ord WHEN 0 THEN m.recipients || char(10) || m.cc ELSE '' END,
       CASE c.kind WHEN 'body' THEN c.text ELSE '' END,
       CASE c.kind WHEN 'quoted' THEN c.text ELSE '' END,
       CASE c.kind WHEN 'attachment' THEN c.text || char(10) || m.attachment_names ELSE m.attachment_names END
FROM chunks c JOIN messages m ON m.id = c.message WHERE c.id > ? ORDER BY c.id LIMIT ?
"""


class Tokens:
    """index.db's tokenizer called from Python: the tokens FTS5 indexes and parses."""

    def __init__(self) -> None:
        self.con = apsw.Connection(":memory:")
        oaken_tokenizer.register(self.con)
        self.tok = self.con.fts5_tokenizer(oaken_tokenizer.NAME, list(oaken_tokenizer.BASE))

    def doc(self, text: str | None) -> list[str]:
        if not text:
            return []
        return [t if isinstance(t, str) else t[0] for t in self.tok(
            text.encode("utf-8", "surrogateescape"), apsw.FTS5_TOKENIZE_DOCUMENT, None,
            include_offsets=False, include_colocated=False)]

    def query(self, text: str) -> list[str]:
        return [t if isinstance(t, str) else t[0] for t in self.tok(
            text.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False, include_colocated=False)]


def schema() -> tantivy.Schema:
    b = tantivy.SchemaBuilder()
    for f in ("all", "quoted", "subject"):
        b.add_text_field(f, stored=False, tokenizer_name="whitespace", index_option="position")
    b.add_integer_field("chunk", indexed=True, fast=True)
    b.add_integer_field("message", indexed=True, fast=True)
    return b.build()


def build(index_db: Path, out: Path, *, heap_mb: int = 256, batch: int = 20_000) -> dict:
    """A text index of every chunk of index.db (opened read-only), in `out` (replaced)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    ix = tantivy.Index(schema(), path=str(out))
    w = ix.writer(heap_size=heap_mb * 1_000_000, num_threads=1)
    tok = Tokens()
    db = apsw.Connection(f"file:{index_db}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    t0 = time.perf_counter()
    last, n, tokenize_s = -1, 0, 0.0
    while True:
        rows = db.execute(ROWS_SQL, (last, batch)).fetchall()
        if not rows:
            break
        for chunk, message, subject, sender, recipients, body, quoted, attachments in rows:
            t = time.perf_counter()
            cols = {"subject": tok.doc(subject), "sender": tok.doc(sender), "recipients": tok.doc(recipients),
                    "body": tok.doc(body), "attachments": tok.doc(attachments)}
            words = [w_ for name, times in REPEAT for _ in range(times) for w_ in cols[name]]
            q = tok.doc(quoted)
            tokenize_s += time.perf_counter() - t
            d = tantivy.Document(chunk=chunk, message=message)
            d.add_text("all", " ".join(words))
            if q:
                d.add_text("quoted", " ".join(q))
            if cols["subject"]:
                d.add_text("subject", " ".join(cols["subject"]))
            w.add_document(d)
        n += len(rows)
        last = rows[-1][0]
        if n % 200_000 < batch:
            print(f"  {n:,} chunks, {time.perf_counter() - t0:.0f} s", flush=True)
    w.commit()
    w.wait_merging_threads()
    return {"chunks": n, "seconds": round(time.perf_counter() - t0, 1), "tokenize_s": round(tokenize_s, 1),
            "disk_mb": round(sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1e6, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


# The MATCH grammar oaken/search/matching.py and filters.py write: quoted strings ("" inside is a
# quote), `*` after one (a prefix), AND, OR, parentheses, `column : "t"`.
_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"]|"")*")(?P<star>\*)?|(?P<op>AND|OR|NOT)\b|(?P<paren>[()])|(?P<col>\w+)\s*:)')


class Compiler:
    """Oaken's MATCH strings as Tantivy queries (AND binds tighter than OR, as in FTS5)."""

    def __init__(self, ix: tantivy.Index, tok: Tokens) -> None:
        self.schema = ix.schema
        self.tok = tok

    def compile(self, expr: str) -> tantivy.Query:
        self.items = self._lex(expr)
        self.at = 0
        q = self._or()
        if self.at != len(self.items):
            raise ValueError(f"MATCH {expr!r}: unexpected {self.items[self.at]!r}")
        return q

    @staticmethod
    def _lex(expr: str) -> list[tuple[str, str]]:
        out, pos = [], 0
        while pos < len(expr.rstrip()):
            m = _TOKEN.match(expr, pos)
            if m is None:
                raise ValueError(f"MATCH {expr!r}: cannot read at {pos}")
            for kind in ("str", "star", "op", "paren", "col"):
                if m.group(kind):
                    out.append((kind, m.group(kind)))
            pos = m.end()
        return out

    def _peek(self) -> tuple[str, str] | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def _or(self) -> tantivy.Query:
        parts = [self._and()]
        while self._peek() == ("op", "OR"):
            self.at += 1
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else tantivy.Query.boolean_query([(tantivy.Occur.Should, p) for p in parts])

    def _and(self) -> tantivy.Query:
        parts = [self._primary()]
        while (nxt := self._peek()) is not None and nxt != ("op", "OR") and nxt != ("paren", ")"):
            if nxt == ("op", "AND"):
                self.at += 1
            parts.append(self._primary())
        return parts[0] if len(parts) == 1 else tantivy.Query.boolean_query([(tantivy.Occur.Must, p) for p in parts])

    def _primary(self) -> tantivy.Query:
        kind, val = self.items[self.at]
        self.at += 1
        if (kind, val) == ("paren", "("):
            q = self._or()
            self.at += 1  # ")"
            return q
        column = None
        if kind == "col":
            column = val
            kind, val = self.items[self.at]
            self.at += 1
        if kind != "str":
            raise ValueError(f"expected a quoted string, got {val!r}")
        prefix = self._peek() == ("star", "*")
        if prefix:
            self.at += 1
        words = self.tok.query(val[1:-1].replace('""', '"'))
        fields = [(column, 1.0)] if column else [("all", 1.0), ("quoted", QUOTED_BOOST)]
        alts = [self._leaf(f, words, prefix, boost) for f, boost in fields]
        return alts[0] if len(alts) == 1 else tantivy.Query.boolean_query([(tantivy.Occur.Should, a) for a in alts])

    def _leaf(self, field: str, words: list[str], prefix: bool, boost: float) -> tantivy.Query:
        if not words:
            return tantivy.Query.empty_query()
        if prefix and len(words) == 1:
            q = tantivy.Query.regex_query(self.schema, field, re.escape(words[0]) + ".*")
        elif len(words) == 1:
            q = tantivy.Query.term_query(self.schema, field, words[0], index_option="freq")
        elif prefix:
            q = tantivy.Query.regex_phrase_query(self.schema, field, [*map(re.escape, words[:-1]), re.escape(words[-1]) + ".*"])
        else:
            q = tantivy.Query.phrase_query(self.schema, field, words)
        return q if boost == 1.0 else tantivy.Query.boost_query(q, boost)


class TextIndex:
    """An open text index: ranked (chunk, message, score) for a MATCH."""

    def __init__(self, path: Path) -> None:
        self.ix = tantivy.Index.open(str(path))
        self.searcher = self.ix.searcher()
        self.compiler = Compiler(self.ix, Tokens())
        self.calls = 0

    def ranked(self, expr: str, k: int) -> tuple[list[tuple[int, int, float]], int]:
        self.calls += 1
        q = self.compiler.compile(expr)
        res = self.searcher.search(q, k, count=False)
        addrs = [a for _, a in res.hits]
        chunks = self.searcher.fast_field_values("chunk", addrs)
        msgs = self.searcher.fast_field_values("message", addrs)
        return [(c, m, s) for (s, _), c, m in zip(res.hits, chunks, msgs)], len(addrs)


TEXT: TextIndex | None = None


def query(self, match: str, filters: KeywordFilters = KeywordFilters(), limit: int = 50, *,
          details: bool = True, snippets: bool = True) -> list[KeywordChunkHit]:
    """KeywordIndex.query with the ranked list from Tantivy: the best limit x 8 chunks, joined to
    index.db for the filters Tantivy does not hold, widened x 8 while too few pass and more match."""
    from oaken.index.keyword.filters import filter_sql

    assert TEXT is not None
    conds, params, subject = filter_sql(filters)
    expr, n_subject = self._expression(match, subject, filters)
    k = max(limit, 1) * 8
    while True:
        hits, got = TEXT.ranked(expr, k)
        if conds and hits:
            ids = json.dumps([c for c, _, _ in hits])
            passing = {r[0] for r in self._run(
                "SELECT c.id FROM json_each(?) j JOIN chunks c ON c.id = j.value JOIN messages m ON m.id = c.message "
                "WHERE " + " AND ".join(conds), [ids, *params])}
            hits = [h for h in hits if h[0] in passing]
        if len(hits) >= limit or got < k:
            break
        k *= 8
    ranked = [(c, m, -s) for c, m, s in sorted(hits, key=lambda h: (-h[2], h[0]))[:limit]]
    if not ranked:
        return []
    matches = got if got < k else None
    walk = self._walk(expr, matches, len(ranked)) if details else False
    extra = self._details(expr, n_subject, [r[0] for r in ranked], snippets=snippets, walk=walk) if details else {}
    return [KeywordChunkHit(message, chunk, -rank, *extra.get(chunk, ("", (), ()))) for chunk, message, rank in ranked]


def run_eval(args: argparse.Namespace) -> int:
    """The eval, in this process, with KeywordIndex.query from Tantivy (--engine tantivy) or as is."""
    global TEXT
    from oaken.evals import __main__ as evals_main
    from oaken.index.keyword import reader

    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    if args.engine == "tantivy":
        keep = Path(rest[rest.index("--keep") + 1])
        text = keep / "text"
        if not (text / "meta.json").exists():
            print("built:", build((keep / "data" / "index.db").resolve(), text), flush=True)
        TEXT = TextIndex(text)
        reader.KeywordIndex.query = query  # type: ignore[method-assign]
    code = evals_main.main(["retrieval", *rest])
    if TEXT is not None:
        print(f"tantivy ranked {TEXT.calls} lists", file=sys.stderr)
    return code


SHAPES = {
    "one word": ['"pipeline"', '"dabhol"', '"reception"', '"broadband"', '"invoice"'],
    "three-word question": ['("california" OR "power" OR "prices")', '("approved" OR "budget")',
                            '("board" OR "meeting" OR "agenda")', '("stock" OR "option" OR "grants")',
                            '("energy" OR "trading" OR "losses")'],
    "quoted phrase": ['"board of directors"', '"natural gas"', '"conference call"', '"press release"'],
}


def _ms(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def run_bench(args: argparse.Namespace) -> int:
    """At a home's size: build the text index (once), then the ranked top 80 / 640 per shape,
    Tantivy against FTS5's bm25 (both ranking only, same MATCH strings, alternating)."""
    from oaken.index.keyword import KeywordIndex

    index_db = (args.data / "index.db").resolve()
    if not (args.text / "meta.json").exists():
        print("built:", json.dumps(build(index_db, args.text, heap_mb=args.heap_mb)), flush=True)
    text = TextIndex(args.text)
    with KeywordIndex(args.data) as k:
        bm25 = k._bm25
        for shape, exprs in SHAPES.items():
            for expr in exprs:
                for limit in (80, 640):
                    tv = _ms(lambda e=expr, n=limit: text.ranked(e, n), args.runs)
                    fts = _ms(lambda e=expr, n=limit: k._run(f"SELECT fts.rowid, {bm25} AS r FROM fts WHERE fts MATCH ? "
                                                             "ORDER BY r LIMIT ?", [e, n]), args.runs)
                    print(f"{shape:20s} {expr:42s} top {limit:3d}: tantivy p50 {statistics.median(tv):6.1f} ms "
                          f"max {max(tv):6.1f} | fts5 p50 {statistics.median(fts):6.1f} ms", flush=True)
    whole_searches(args, text)
    return 0


def whole_searches(args: argparse.Namespace, text: TextIndex) -> None:
    """Oaken's whole keyword search in this process (engine.search, the home's config from
    $OAKEN_HOME), per query of bench_scale.py's word shapes, FTS5's ranking and Tantivy's in
    alternating rounds: p50 / p95 per shape and engine."""
    global TEXT
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_scale import SHAPES as USER_SHAPES

    from oaken.index.keyword import reader
    from oaken.search import engine

    own = reader.KeywordIndex.query
    TEXT = text
    times: dict[tuple[str, str], list[float]] = {}
    firsts: dict[tuple[str, str], list] = {}
    for round_ in range(args.runs + 1):
        for engine_name, fn in (("fts5", own), ("tantivy", query)):
            reader.KeywordIndex.query = fn  # type: ignore[method-assign]
            for shape in ("one word", "three-word question", "quoted phrase", "filters only"):
                for q in USER_SHAPES[shape]:
                    t = time.perf_counter()
                    r = engine.search(q, limit=10, retrievers=("keyword",))
                    ms = (time.perf_counter() - t) * 1000
                    if round_:  # the first round warms the page cache for both
                        times.setdefault((shape, engine_name), []).append(ms)
                    else:
                        firsts[(q, engine_name)] = [h.id for h in r.hits]
    reader.KeywordIndex.query = own  # type: ignore[method-assign]
    for (shape, engine_name), ts in sorted(times.items()):
        ts.sort()
        print(f"whole search {shape:20s} {engine_name:8s} p50 {statistics.median(ts):6.1f} ms "
              f"p95 {ts[int(0.95 * (len(ts) - 1))]:6.1f} ms (n={len(ts)})", flush=True)
    for q in dict.fromkeys(q for q, _ in firsts):
        a, b = firsts[(q, "fts5")], firsts[(q, "tantivy")]
        print(f"top 10 of {q!r}: {len(set(a) & set(b))} shared", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("eval")
    e.add_argument("--engine", choices=("fts5", "tantivy"), required=True)
    e.add_argument("rest", nargs=argparse.REMAINDER)
    b = sub.add_parser("bench")
    b.add_argument("--data", type=Path, required=True)
    b.add_argument("--text", type=Path, required=True)
    b.add_argument("--runs", type=int, default=7)
    b.add_argument("--heap-mb", type=int, default=256)
    args = ap.parse_args()
    return run_eval(args) if args.cmd == "eval" else run_bench(args)


if __name__ == "__main__":
    sys.exit(main())

