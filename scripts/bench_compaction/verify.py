"""Check a dataset after compaction: fragments, index coverage, vector search and scalar lookups.

usage: verify.py DATASET [--mod 50]   (rows with chunk_id % mod == 0 were deleted)
Prints one JSON line: fragments, per index whether its segments cover every fragment, the
ANN search's recall@10 against an exact cosine search over the live rows (30 queries: 15 near
live rows, 15 random), whether any deleted chunk_id came back, whether the plan uses the ANN
index, and whether scalar-indexed lookups are right."""

import argparse
import json
import time

import lance
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("dataset")
p.add_argument("--mod", type=int, default=50)
a = p.parse_args()

ds = lance.dataset(a.dataset)
res = {}
frags = sorted(int(f.fragment_id) for f in ds.get_fragments())
res["fragments"] = frags
res["deletion_files"] = sum(f.metadata.deletion_file is not None for f in ds.get_fragments())
cover = {}
for idx in ds.describe_indices():
    covered = set()
    for s in idx.segments:
        covered |= {int(i) for i in s.fragment_ids}
    cover[idx.name] = {
        "segments": len(idx.segments),
        "covers_all": set(frags) <= covered,
        "stale": sorted(covered - set(frags))[:5],
    }
res["indexes"] = cover
try:
    res["vector_idx_stats"] = {
        k: v
        for k, v in ds.stats.index_stats("vector_idx").items()
        if k in ("num_indexed_rows", "num_unindexed_rows", "num_indices", "num_indexed_fragments", "num_unindexed_fragments")
    }
except Exception as e:  # noqa: BLE001
    res["vector_idx_stats"] = repr(e)[:200]

t = ds.to_table(columns=["chunk_id", "vector"])
ids = t.column("chunk_id").to_numpy()
res["rows"] = len(ids)
res["deleted_present"] = int((ids % a.mod == 0).sum())
mat = t.column("vector").combine_chunks().values.to_numpy().reshape(len(ids), -1)
del t
rng = np.random.default_rng(99)
D = mat.shape[1]
qs = []
for i in rng.choice(len(ids), 15, replace=False):
    q = mat[i] + 0.05 * rng.standard_normal(D).astype(np.float32)
    qs.append(q / np.linalg.norm(q))
for _ in range(15):
    q = rng.standard_normal(D).astype(np.float32)
    qs.append(q / np.linalg.norm(q))
recalls, bad, uses_ann, lat = [], 0, None, []
try:
  for j, q in enumerate(qs):
      sims = mat @ q
      exact = set(ids[np.argpartition(-sims, 10)[:10]].tolist())
      nearest = {"column": "vector", "q": q, "k": 10, "metric": "cosine", "ef": 1000}
      if uses_ann is None:
          plan = ds.scanner(columns=["chunk_id", "_distance"], nearest=nearest).explain_plan()
          uses_ann = "ANNSubIndex" in plan or "ANNIvfPartition" in plan
          if not uses_ann:
              res["plan"] = plan[:600]
      t0 = time.time()
      got = ds.to_table(columns=["chunk_id", "_distance"], nearest=nearest).column("chunk_id").to_numpy()
      lat.append(time.time() - t0)
      bad += int((got % a.mod == 0).sum())
      recalls.append(len(exact & set(got.tolist())) / 10)
except Exception as e:  # noqa: BLE001
    res['search_error'] = repr(e)[:300]
res["uses_ann"] = uses_ann
res["recall_near"] = round(float(np.mean(recalls[:15])), 3) if len(recalls) == 30 else None
res["recall_random"] = round(float(np.mean(recalls[15:])), 3) if len(recalls) == 30 else None
res["deleted_in_results"] = bad
res["search_ms_median"] = round(1000 * float(np.median(lat)), 1) if lat else None

# scalar lookups through the btree (chunk_id) / bitmap (account) indexes
ok = True
for cid in (0, 50, 1, 12345, 12350, len(ids) // 2 + 1):
    n = ds.count_rows(filter=f"chunk_id = {cid}")
    ok &= n == (0 if cid % a.mod == 0 else 1)
plan = ds.scanner(columns=["chunk_id"], filter="chunk_id = 12345").explain_plan()
res["scalar_uses_index"] = "ScalarIndexQuery" in plan or "MaterializeIndex" in plan or "IndexedScan" in plan or "chunk_id_idx" in plan
if not res["scalar_uses_index"]:
    res["scalar_plan"] = plan[:600]
msg = ds.to_table(columns=["chunk_id"], filter="message = 1000").column("chunk_id").to_numpy()
exp = [c for c in range(3495, 3505) if c * 2 // 7 == 1000 and c % a.mod]
ok &= sorted(msg.tolist()) == exp
acc_exp = int(((ids * 2 // 7) % 3 == 0).sum())
ok &= ds.count_rows(filter="account = 'a@x.org'") == acc_exp
ok &= ds.count_rows(filter="thread = 250") == int(((ids * 2 // 7) // 4 == 250).sum())
res["scalar_ok"] = bool(ok)
try:  # a prefiltered ANN search, as Oaken's (account/disposition through the bitmap indexes)
    got = ds.to_table(columns=["chunk_id", "_distance"], prefilter=True, filter="account = 'a@x.org' AND disposition = 'ham'",
                      nearest={"column": "vector", "q": qs[20], "k": 10, "metric": "cosine", "ef": 1000}).column("chunk_id").to_numpy()
    m = got * 2 // 7
    res["prefiltered_ann_ok"] = bool(len(got) == 10 and (m % 3 == 0).all() and (m % 10 != 0).all() and (got % a.mod != 0).all())
except Exception as e:  # noqa: BLE001
    res["prefiltered_ann_ok"] = repr(e)[:200]
print("VERIFY " + json.dumps(res), flush=True)
