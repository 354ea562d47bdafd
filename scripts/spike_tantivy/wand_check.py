#!/usr/bin/env python3
"""Does top-k pruning (block-max WAND) engage through tantivy-py? Median ms of top-80 with
count=False (TopDocs alone: pruning allowed) and count=True (Count+TopDocs: every match scored),
for query shapes from one field unboosted to Oaken's six boosted fields.

    nice -n 10 /tmp/tvspike/venv/bin/python wand_check.py
"""
import statistics, sys, time
sys.dont_write_bytecode = True
sys.path.insert(0, "/work/tantivy-spike")
import tantivy
from bench import BOOSTS, TEXT_FIELDS, loadavg
from build import open_index

idx = open_index("/work/tantivy-spike/index")
s = idx.searcher()
def ms(q, count, runs=20):
    s.search(q, 80, count=count)
    t = []
    for _ in range(runs):
        a = time.perf_counter(); s.search(q, 80, count=count); t.append((time.perf_counter() - a) * 1000)
    return statistics.median(t)
print(f"load {loadavg()}")
print(f"{'query':60} {'matches':>9} {'count=False':>11} {'count=True':>10}")
for text in ["broadband", "energy OR trading OR losses", "energy trading losses"]:
    for label, kw in [("body only", dict(default_field_names=["body"])),
                      ("6 fields, no boosts", dict(default_field_names=list(TEXT_FIELDS))),
                      ("6 fields, Oaken boosts", dict(default_field_names=list(TEXT_FIELDS), field_boosts=BOOSTS))]:
        q = idx.parse_query(text, conjunction_by_default=False, **kw)
        n = s.search(q, 1, count=True).count
        print(f"{text + ' / ' + label:60} {n:9,} {ms(q, False):11.2f} {ms(q, True):10.2f}", flush=True)
