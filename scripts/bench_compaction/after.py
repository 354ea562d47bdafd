"""After a defer_index_remap compaction: run ds.optimize.optimize_indices(**KWARGS) in a fresh
process and print wall seconds and peak RSS (the deferred remap's cost, if that is what does it).
usage: after.py DATASET '{"index_names": ["vector_idx"]}'"""
import json, resource, sys, time
import lance
ds = lance.dataset(sys.argv[1])
kw = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
before = [(i.name, i.index_type, [list(s.fragment_ids) for s in i.segments]) for i in ds.describe_indices()]
t = time.time()
ds.optimize.optimize_indices(**kw)
el = time.time() - t
ds = lance.dataset(sys.argv[1])
after = [(i.name, i.index_type, [list(s.fragment_ids) for s in i.segments]) for i in ds.describe_indices()]
print("AFTER " + json.dumps({"kwargs": kw, "t": round(el, 2), "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "before": before, "after": after}), flush=True)
