"""Vector search in a built home (e.g. bench_scale.py --vectors): latency and recall against exact search, per
setting (nprobes, refine). usage: scripts/bench_ann_home.py VECTORS_PARENT_DATA_DIR [--settings 'np=None;np=300,refine=2'] (np=None: the product's rule)"""
from pathlib import Path
import argparse, json, statistics, sys, time

import numpy as np
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "scripts"))
import bench_ann as B
import oaken.index.vector_ann as A
import oaken.index.vectors as V
from oaken.index.concept import ConceptEmbedder  # noqa

ap = argparse.ArgumentParser()
ap.add_argument("data_dir", type=Path)
ap.add_argument("--settings", default="np=None")
ap.add_argument("--truth", type=Path, default=None)
ap.add_argument("--limits", default="10,150,500")
a = ap.parse_args()

store = V.VectorStore(a.data_dir, retention_seconds=0.0)
t = store.table()
print("rows", store.count(), "indexes", [i.name for i in t.describe_indices()], flush=True)
try:
    st = t.stats.index_stats("vector_idx"); print("stats", st)
except Exception as e:
    print("stats?", e)

a.truth = a.truth or a.data_dir / "ann-truth.npz"
if a.truth.exists():
    z = np.load(a.truth, allow_pickle=True)
    queries, chunk_ids, messages = z["queries"], None, None
    truth = B.Truth([set(x) for x in z["chunks"]], z["chunk_cut"], [set(x) for x in z["msgs"]], z["msg_cut"])
else:
    t0 = time.time()
    live = store.live(["chunk_id", "message", "vector"])  # superseded rows left out
    chunk_ids = live.column("chunk_id").to_numpy(); messages = live.column("message").to_numpy()
    vectors = live.column("vector").combine_chunks().flatten().to_numpy().reshape(live.num_rows, -1).astype(np.float32)
    del live
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    print("loaded", vectors.shape, round(time.time() - t0, 1), "s", flush=True)
    emb = ConceptEmbedder(vectors.shape[1])
    text = np.stack([emb.embed_query(q) for q in B.QUERIES]).astype(np.float32)
    rng = np.random.default_rng(7)
    pick = rng.choice(len(vectors), 100, replace=False)
    near = B.noisy(vectors[pick], 0.01, rng).astype(np.float32)
    queries = np.concatenate([text, near])
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    tr = B.exact(vectors, messages, queries)
    # truth in chunk ids / message ids (rows -> ids)
    tchunks = [set(int(chunk_ids[r]) for r in s) for s in tr.chunks]
    truth = B.Truth(tchunks, tr.chunk_cut, tr.msgs, tr.msg_cut)
    np.savez(a.truth, queries=queries, chunks=np.array([sorted(s) for s in tchunks], dtype=object),
             chunk_cut=tr.chunk_cut, msgs=np.array([sorted(s) for s in tr.msgs], dtype=object), msg_cut=tr.msg_cut)
    del vectors
    print("truth", round(time.time() - t0, 1), "s", flush=True)

limits = [int(x) for x in a.limits.split(",")]
nq = len(B.QUERIES)
for setting in a.settings.split(";"):
    kv = dict(p.split("=") for p in setting.split(","))
    A.ANN_NPROBES = None if kv.get("np", "None") == "None" else int(kv["np"])
    A.ANN_REFINE = int(kv.get("refine", 2))
    for v in queries[:5]:
        store.search(v, limit=10)
    out = {}
    for k in limits:
        times, rec = {"text": [], "near": []}, {"text": [], "near": []}
        for i, v in enumerate(queries):
            s = time.perf_counter(); hits = store.search(v, limit=k); ms = (time.perf_counter() - s) * 1000
            kind = "text" if i < nq else "near"
            times[kind].append(ms)
            if k == 10:
                rec[kind].append(B._recall([(h.chunk_id, h.score) for h in hits], truth.chunks[i], truth.chunk_cut[i]))
            else:
                rec[kind].append(B._recall(B._messages(hits), truth.msgs[i], truth.msg_cut[i]))
        for kind in ("text", "near"):
            out[f"{kind}@{k}"] = (round(statistics.median(times[kind]), 1), round(float(np.percentile(times[kind], 95)), 1),
                                  round(float(np.mean(rec[kind])), 3), round(float(np.min(rec[kind])), 2))
    print(setting, json.dumps(out), flush=True)
rss = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmRSS"))
print("process RSS after the searches", round(rss / 1024), "MB", flush=True)
