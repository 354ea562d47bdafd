#!/usr/bin/env python3
"""What tantivy-py 0.27's Python API does for what Oaken needs, tried on a small index built from
the first N chunks of index.db (copied to /tmp/tvspike/small), plus prefix-query timings on the big
index (read-only use).

    nice -n 10 /tmp/tvspike/venv/bin/python api_check.py --db /work/scale/oaken-1000000/index.db \
        --big /work/tantivy-spike/index
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

import tantivy

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import BOOSTS, TEXT_FIELDS, loadavg, rss  # noqa: E402
from build import open_index  # noqa: E402

PY = sys.executable
SMALL = "/tmp/tvspike/small"


def ms(fn, runs=20):
    fn()
    t = []
    for _ in range(runs):
        s = time.perf_counter()
        fn()
        t.append((time.perf_counter() - s) * 1000)
    return statistics.median(t)


def section(title):
    print(f"\n## {title}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--big", required=True)
    ap.add_argument("--small-chunks", type=int, default=20000)
    a = ap.parse_args()

    section("small index")
    subprocess.run([PY, os.path.join(HERE, "build.py"), "--db", a.db, "--out", SMALL, "--limit",
                    str(a.small_chunks), "--heap-mb", "50"], check=True)
    idx = open_index(SMALL)
    s = idx.searcher()
    schema = idx.schema
    print("docs", s.num_docs, "segments", s.num_segments)

    section("per-field boosts")
    q = idx.parse_query("pipeline", list(TEXT_FIELDS), field_boosts=BOOSTS)
    print("parse_query(field_boosts=...):", repr(q)[:400])
    hit = s.search(q, 1).hits
    if hit:
        import json
        e = json.loads(q.explain(s, hit[0][1]).to_json())
        print("explain top:", e["value"], [d["description"][:40] for d in e["details"]])
    q2 = tantivy.Query.boost_query(tantivy.Query.term_query(schema, "subject", "pipelin"), 4.0)
    print("Query.boost_query(term_query) also:", repr(q2)[:200])

    section("phrase")
    for text in ['"board of directors"', '"natural gas"~2']:
        q = idx.parse_query(text, list(TEXT_FIELDS), field_boosts=BOOSTS)
        print(text, "->", s.search(q, 1, count=True).count, "matches")
    q = tantivy.Query.phrase_query(schema, "body", ["natur", "gas"])
    print("Query.phrase_query(body, [natur, gas]) ->", s.search(q, 1, count=True).count,
          "(terms must be given already stemmed: term/phrase constructors do not tokenize)")

    section("prefix (deploy*)")
    for text in ["deploy*", "deplo*"]:
        q = idx.parse_query(text, list(TEXT_FIELDS))
        print(f"parse_query({text!r}) ->", repr(q)[:160], "count", s.search(q, 1, count=True).count)
    for name, mk in [
        ("regex_query(body, 'deplo.*')", lambda sc: tantivy.Query.regex_query(sc, "body", "deplo.*")),
        ("phrase_prefix_query(body, ['deplo'])", lambda sc: tantivy.Query.phrase_prefix_query(sc, "body", ["deplo"])),
        ("parse_query('body:\"deplo\"*')", lambda sc: idx.parse_query('body:"deplo"*')),
    ]:
        try:
            q = mk(schema)
            print(name, "-> count", s.search(q, 1, count=True).count)
        except Exception as e:  # noqa: BLE001
            print(name, "-> ERROR", type(e).__name__, e)
    print("terms_with_prefix(body, 'deplo'):", s.terms_with_prefix("body", "deplo", limit=10))

    section("delete / update a message's chunks by message id, commit, reload")
    w = idx.writer(heap_size=50_000_000, num_threads=1)
    mid = s.fast_field_values("message", [s.search(tantivy.Query.all_query(), 1).hits[0][1]])[0]
    before = s.search(tantivy.Query.term_query(schema, "message", mid), 1, count=True).count
    w.delete_documents_by_term("message", mid)
    w.commit()
    idx.reload()
    left = idx.searcher().search(tantivy.Query.term_query(schema, "message", mid), 1, count=True).count
    print(f"delete_documents_by_term('message', {mid}) on the u64 field: {left} of {before} chunks left "
          f"(a Python int becomes an i64 term: nothing deleted on a u64 field)")
    w.delete_documents_by_query(tantivy.Query.term_query(schema, "message", mid))
    d = tantivy.Document()
    d.add_unsigned("chunk", 10**9)
    d.add_unsigned("message", mid)
    d.add_integer("date", 0)
    d.add_text("account", "local")
    d.add_text("kind", "body")
    d.add_text("body", "a triage change re-indexed this message")
    w.add_document(d)
    t = time.perf_counter()
    w.commit()
    commit_ms = (time.perf_counter() - t) * 1000
    stale = s.search(tantivy.Query.term_query(schema, "message", mid), 1, count=True).count
    idx.reload()
    s2 = idx.searcher()
    after = s2.search(tantivy.Query.term_query(schema, "message", mid), 1, count=True).count
    print(f"message {mid}: {before} chunks; delete_documents_by_query(term_query) + 1 add + commit ({commit_ms:.1f} ms); "
          f"old searcher still sees {stale}, after index.reload() a new searcher sees {after}")
    try:
        idx.writer(heap_size=50_000_000, num_threads=1)
        print("second writer in the same process: allowed (!)")
    except Exception as e:  # noqa: BLE001
        print("second writer while one is open:", type(e).__name__, str(e)[:120])
    w.wait_merging_threads()
    try:
        w.add_document(d)
        print("writer usable after wait_merging_threads")
    except Exception as e:  # noqa: BLE001
        print("writer after wait_merging_threads:", type(e).__name__, str(e)[:120])
    del w

    section("a second process reading while this one commits (and merges)")
    reader_code = f"""
import sys, time, tantivy
sys.path.insert(0, {HERE!r}); sys.dont_write_bytecode = True
from build import open_index, TEXT_FIELDS
errors = 0; searches = 0; opens = 0; seen = set()
idx = open_index({SMALL!r})
idx.config_reader(reload_policy='commit')
q = idx.parse_query('pipeline', list(TEXT_FIELDS))
end = time.time() + float(sys.argv[1])
while time.time() < end:
    try:
        s = idx.searcher(); s.search(q, 80); searches += 1; seen.add(s.num_docs)
        i2 = open_index({SMALL!r}); i2.searcher().search(q, 80); opens += 1
    except Exception as e:
        errors += 1; print('reader error:', type(e).__name__, str(e)[:200], flush=True)
print(f'reader: {{searches}} searches on a reload-on-commit reader, {{opens}} fresh Index.open, {{errors}} errors, '
      f'{{len(seen)}} distinct num_docs seen', flush=True)
"""
    rp = subprocess.Popen([PY, "-c", reader_code, "12"])
    time.sleep(1)
    w = idx.writer(heap_size=50_000_000, num_threads=1)
    commits = 0
    end = time.time() + 10
    k = 0
    while time.time() < end:
        for _ in range(200):
            k += 1
            d = tantivy.Document()
            d.add_unsigned("chunk", 2 * 10**9 + k)
            d.add_unsigned("message", 2 * 10**9 + k)
            d.add_integer("date", 0)
            d.add_text("account", "local")
            d.add_text("kind", "body")
            d.add_text("body", f"pipeline update number {k}")
            w.add_document(d)
        w.delete_documents_by_query(tantivy.Query.term_query(schema, "message", 2 * 10**9 + k - 150))
        w.commit()
        commits += 1
    w.wait_merging_threads()
    rp.wait()
    idx.reload()
    print(f"writer: {commits} commits; segments now {idx.searcher().num_segments} "
          f"(merged by the default LogMergePolicy in the writer's threads)")

    section("prefix on the big index (read-only use)")
    big = open_index(a.big)
    bs = big.searcher()
    print("load", loadavg())
    for prefix in ["deplo", "pipe", "enr"]:
        terms = bs.terms_with_prefix("body", prefix, limit=None)
        rq = tantivy.Query.boolean_query([
            (tantivy.Occur.Should, tantivy.Query.boost_query(tantivy.Query.regex_query(big.schema, f, f"{prefix}.*"), BOOSTS[f]))
            for f in TEXT_FIELDS])
        pq = tantivy.Query.boolean_query([
            (tantivy.Occur.Should, tantivy.Query.boost_query(tantivy.Query.phrase_prefix_query(big.schema, f, [prefix]), BOOSTS[f]))
            for f in TEXT_FIELDS])
        n = bs.search(rq, 1, count=True).count
        print(f"{prefix}*: {len(terms)} body terms, {n:,} matching chunks; regex_query x6 fields top-80 "
              f"{ms(lambda: bs.search(rq, 80, count=False)):.1f} ms, phrase_prefix_query x6 "
              f"{ms(lambda: bs.search(pq, 80, count=False)):.1f} ms; load {loadavg()}", flush=True)
    print("RSS of this process with the big searcher open:", rss())
    return 0


if __name__ == "__main__":
    sys.exit(main())
