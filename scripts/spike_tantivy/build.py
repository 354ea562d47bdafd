#!/usr/bin/env python3
"""Build a Tantivy index of an Oaken index.db's chunks, with the six FTS5 columns as six text
fields (the text each column of `fts` gets from the `fts_content` view), plus chunk id, message id,
date (fast + indexed i64/u64), account and kind (raw strings).

    nice -n 10 /usr/bin/time -v /tmp/tvspike/venv/bin/python build.py \
        --db /work/scale/oaken-1000000/index.db --out /work/tantivy-spike/index [--limit N]

index.db is opened read-only (mode=ro URI). Prints progress and a summary line.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time

import apsw
import tantivy

TEXT_FIELDS = ("subject", "sender", "recipients", "body", "quoted", "attachments")
TOKENIZER = "oaken_en"

# The fts_content view's columns, read straight from chunks and messages (same expressions).
SQL = """
SELECT c.id, c.message, m.date, m.account, c.kind,
       m.subject,
       m.sender_name || ' ' || m.sender_addr,
       CASE c.ord WHEN 0 THEN m.recipients || char(10) || m.cc ELSE '' END,
       CASE c.kind WHEN 'body' THEN c.text ELSE '' END,
       CASE c.kind WHEN 'quoted' THEN c.text ELSE '' END,
       CASE c.kind WHEN 'attachment' THEN c.text || char(10) || m.attachment_names ELSE m.attachment_names END
FROM chunks c JOIN messages m ON m.id = c.message
WHERE c.id > ? ORDER BY c.id LIMIT ?
"""


def analyzer() -> tantivy.TextAnalyzer:
    """Closest built-in chain to Oaken's `porter unicode61 remove_diacritics 2`: split on
    non-alphanumerics, drop tokens > 40 bytes, lowercase, fold diacritics, Snowball English stem."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def schema() -> tantivy.Schema:
    b = tantivy.SchemaBuilder()
    for f in TEXT_FIELDS:
        b.add_text_field(f, stored=False, tokenizer_name=TOKENIZER, index_option="position")
    b.add_unsigned_field("chunk", indexed=True, fast=True)
    b.add_unsigned_field("message", indexed=True, fast=True)
    b.add_integer_field("date", indexed=True, fast=True)
    b.add_text_field("account", tokenizer_name="raw", fast=True)
    b.add_text_field("kind", tokenizer_name="raw", fast=True)
    return b.build()


def open_index(path: str) -> tantivy.Index:
    idx = tantivy.Index.open(path)
    idx.register_tokenizer(TOKENIZER, analyzer())
    return idx


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit", type=int, default=0, help="only the first N chunks (0: all)")
    ap.add_argument("--heap-mb", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=5000)
    a = ap.parse_args()

    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    idx = tantivy.Index(schema(), path=a.out, reuse=False)
    idx.register_tokenizer(TOKENIZER, analyzer())
    writer = idx.writer(heap_size=a.heap_mb * 1_000_000, num_threads=a.threads)

    real = os.path.realpath(a.db)
    db = apsw.Connection(f"file:{real}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    db.execute("PRAGMA cache_size=-200000")
    total = db.execute("SELECT value FROM meta WHERE key='chunks'").fetchone()[0]
    want = min(a.limit, total) if a.limit else total
    print(f"{real}: {total:,} chunks; indexing {want:,}; load {open('/proc/loadavg').read().strip()}", flush=True)

    t0 = time.perf_counter()
    t_read = 0.0
    t_add = 0.0
    done = 0
    last = 0
    chars = 0
    next_report = 250_000
    while done < want:
        r0 = time.perf_counter()
        rows = db.execute(SQL, (last, min(a.batch, want - done))).fetchall()
        r1 = time.perf_counter()
        t_read += r1 - r0
        if not rows:
            break
        for cid, mid, date, account, kind, *texts in rows:
            doc = tantivy.Document()
            doc.add_unsigned("chunk", cid)
            doc.add_unsigned("message", mid)
            doc.add_integer("date", date)
            doc.add_text("account", account)
            doc.add_text("kind", kind)
            for f, t in zip(TEXT_FIELDS, texts):
                if t:
                    doc.add_text(f, t)
                    chars += len(t)
            writer.add_document(doc)
        t_add += time.perf_counter() - r1
        done += len(rows)
        last = rows[-1][0]
        if done >= next_report:
            el = time.perf_counter() - t0
            print(f"  {done:,} chunks  {el:7.1f} s  {done / el:8.0f}/s  load {open('/proc/loadavg').read().split()[0]}", flush=True)
            next_report += 250_000
    t_docs = time.perf_counter() - t0
    c0 = time.perf_counter()
    writer.commit()
    t_commit = time.perf_counter() - c0
    m0 = time.perf_counter()
    writer.wait_merging_threads()
    t_merge = time.perf_counter() - m0
    t_all = time.perf_counter() - t0
    idx.reload()
    s = idx.searcher()
    size = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"done: {done:,} chunks, {chars / 1e6:.0f} M chars of text; wall {t_all:.1f} s "
        f"(sqlite read {t_read:.1f}, python docs+add_document {t_add:.1f}, commit {t_commit:.1f}, "
        f"wait merges {t_merge:.1f}); cpu user {ru.ru_utime:.1f} sys {ru.ru_stime:.1f}; "
        f"maxrss {ru.ru_maxrss / 1024:.0f} MB; index {size / 1e6:.0f} MB, {s.num_segments} segments, "
        f"{s.num_docs:,} docs; load {open('/proc/loadavg').read().strip()}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
