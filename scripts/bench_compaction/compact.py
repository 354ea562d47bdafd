"""Run Oaken's compaction (oaken.index.vector_fragments.compact, materialize_all) on DATASET with
extra CompactionOptions, in this process alone, and print one JSON line of timings and memory.

usage: compact.py DATASET '{"num_threads": 1}' [--after optimize_indices|none]
--after: what to run after the commit (for defer_index_remap trials), measured separately.
Memory: ru_maxrss (peak RSS, VmHWM) read after each phase, plus a 0.1 s sampler of RssAnon
(anonymous memory, i.e. heap, not mapped files) so phases can be told apart."""

import argparse
import json
import resource
import threading
import time

import lance
from lance.optimize import Compaction, CompactionOptions

p = argparse.ArgumentParser()
p.add_argument("dataset")
p.add_argument("options", nargs="?", default="{}")
p.add_argument("--after", default="none")
p.add_argument("--commit-without-options", action="store_true", help="Compaction.commit(ds, results) as Oaken does")
p.add_argument("--trace", help="write the RSS samples (t, rss_mb, anon_mb, phase) to this file")
a = p.parse_args()

phase = ["open"]
samples = []
stop = threading.Event()


def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "VmHWM"):
                out[k] = int(v.split()[0]) // 1024
    return out


def sampler():
    t0 = time.time()
    while not stop.is_set():
        s = status()
        samples.append((round(time.time() - t0, 2), s["VmRSS"], s["RssAnon"], phase[0]))
        stop.wait(0.1)


threading.Thread(target=sampler, daemon=True).start()


def maxrss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def anon_peak(ph):
    xs = [s[2] for s in samples if s[3] == ph]
    return max(xs) if xs else None


res = {"options": json.loads(a.options), "after": a.after}
t = time.time()
ds = lance.dataset(a.dataset)
res["frags_before"] = len(ds.get_fragments())
res["rss_open"] = maxrss_mb()
opts = CompactionOptions(excluded_fragment_ids=[], materialize_deletions=True, materialize_deletions_threshold=0.0)
opts.update(json.loads(a.options))

phase[0] = "plan"
t = time.time()
plan = Compaction.plan(ds, opts)
res["tasks"] = len(plan.tasks)
res["t_plan"] = round(time.time() - t, 2)

phase[0] = "execute"
t = time.time()
results = [task.execute(ds) for task in plan.tasks]
res["t_execute"] = round(time.time() - t, 2)
res["rss_after_execute"] = maxrss_mb()

phase[0] = "commit"
t = time.time()
if results:
    # the options go to commit too: without them commit uses the defaults (defer_index_remap=False)
    Compaction.commit(ds, results, None if a.commit_without_options else opts)
res["t_commit"] = round(time.time() - t, 2)
res["rss_after_commit"] = maxrss_mb()

if a.after != "none":
    phase[0] = "after"
    t = time.time()
    ds = lance.dataset(a.dataset)
    if a.after == "optimize_indices":
        ds.optimize.optimize_indices()
    elif a.after == "optimize_indices_merge1":
        ds.optimize.optimize_indices(num_indices_to_merge=1)
    else:
        raise SystemExit(f"unknown --after {a.after}")
    res["t_after"] = round(time.time() - t, 2)
    res["rss_after_after"] = maxrss_mb()

stop.set()
time.sleep(0.15)
res["t_total"] = round(res["t_plan"] + res["t_execute"] + res["t_commit"] + res.get("t_after", 0), 2)
for ph in ("execute", "commit", "after"):
    res[f"anon_peak_{ph}"] = anon_peak(ph)
res["frags_after"] = len(lance.dataset(a.dataset).get_fragments())
if a.trace:
    with open(a.trace, "w") as f:
        for s in samples:
            f.write("%s %s %s %s\n" % s)
print("RESULT " + json.dumps(res), flush=True)
