#!/usr/bin/env python3
"""Top-10 agreement of Tantivy and FTS5 per bench query: |tv10 ∩ fts10|, and how many of FTS5's
top 10 Tantivy has in its top 80 / top 400 (and the reverse), by chunk id.

    nice -n 10 /tmp/tvspike/venv/bin/python overlap.py
"""
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, "/work/tantivy-spike")
from bench import QUERIES, Tv, Fts, loadavg

tv = Tv("/work/tantivy-spike/index")
fts = Fts("/work/scale/oaken-1000000/index.db")
print(f"load {loadavg()}")
print(f"{'query':30} tv10∩fts10  fts10⊂tv80 fts10⊂tv400  tv10⊂fts80 tv10⊂fts400")
for label, tq, fm, filt in QUERIES:
    q = tv.query(tq, filt)
    t = [c for c, _, _ in tv.top(q, 400)]
    f = [c for c, _, _ in fts.top(fm, filt, 400)]
    f10, t10 = set(f[:10]), set(t[:10])
    print(f"{label[:30]:30} {len(t10 & f10):6}/10 {len(f10 & set(t[:80])):9}/10 {len(f10 & set(t)):9}/10 "
          f"{len(t10 & set(f[:80])):9}/10 {len(t10 & set(f)):9}/10", flush=True)
