"""Build a pristine one-fragment Lance dataset shaped like Oaken's `chunks` table.

usage: build.py OUT ROWS [--index rq|hnsw] [--no-ann] [--dim 256] [--from-data DATASET]
Random unit vectors (seed 7), the scalar columns of oaken.index.vector_rows.schema_of, then
Oaken's indexes: the ANN index (rq: IVF_RQ cosine, sqrt(rows) partitions, 5 bits, as
oaken.index.vectors today; hnsw: IVF_HNSW_SQ, one partition per 1,048,576 rows, m=32,
ef_construction=150, as before), BTREE on chunk_id, message, date, thread, BITMAP on account,
disposition, LABEL_LIST on labels, folders."""

import argparse
import resource
import sys
import time
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from oaken.index.vector_rows import Fingerprint, schema_of  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("rows", type=int)
p.add_argument("--no-ann", action="store_true")
p.add_argument("--index", choices=("rq", "hnsw"), default="rq")
p.add_argument("--dim", type=int, default=256)
p.add_argument("--stable", action="store_true", help="enable_stable_row_ids=True")
p.add_argument("--from-data", help="copy data of this dataset instead of generating (indexes rebuilt)")
a = p.parse_args()

N, D = a.rows, a.dim
schema = schema_of(Fingerprint("model-x", D, "c1"))  # the chunks table as Oaken writes it


def batches():
    rng = np.random.default_rng(7)
    step = 50_000
    accounts = np.array(["a@x.org", "b@y.com", "c@z.net"], dtype=object)
    labels = [["inbox"], ["inbox", "work"], [], ["news"]]
    folders = [["inbox"], ["archive"], ["sent"]]
    for s in range(0, N, step):
        n = min(step, N - s)
        ids = np.arange(s, s + n, dtype=np.int64)
        v = rng.standard_normal((n, D), dtype=np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        msg = ids * 2 // 7
        cols = [
            pa.array(ids),
            pa.array(msg),
            pa.array(accounts[msg % 3]),
            pa.array(["model-x"] * n),
            pa.array(np.full(n, D, np.int32)),
            pa.array(["c1"] * n),
            pa.array(1_400_000_000 + msg * 300),
            pa.array([f"sender{m % 5000}@example.org" for m in msg]),
            pa.array([f"to{m % 700}@example.org" for m in msg]),
            pa.array([""] * n),
            pa.array([labels[m % 4] for m in msg], pa.list_(pa.string())),
            pa.array([folders[m % 3] for m in msg], pa.list_(pa.string())),
            pa.array(np.where(msg % 10 == 0, "spam", "ham").astype(object)),
            pa.array(msg // 4),
            pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), D),
        ]
        yield pa.RecordBatch.from_arrays(cols, schema=schema)


t0 = time.time()
if a.from_data:
    src = lance.dataset(a.from_data)
    reader = src.scanner(batch_size=50_000).to_reader()
else:
    reader = pa.RecordBatchReader.from_batches(schema, batches())
ds = lance.write_dataset(reader, a.out, schema=schema, max_rows_per_file=1 << 30, max_rows_per_group=1 << 20, enable_stable_row_ids=a.stable)
print("written", ds.count_rows(), "rows,", len(ds.get_fragments()), "fragments,", f"{time.time() - t0:.1f}s", flush=True)

t1 = time.time()
if not a.no_ann:
    if a.index == "rq":
        ds.create_index("vector", index_type="IVF_RQ", metric="cosine", num_partitions=max(1, round(N**0.5)), num_bits=5)
    else:
        ds.create_index(
            "vector",
            index_type="IVF_HNSW_SQ",
            metric="cosine",
            num_partitions=max(1, -(-N // 1_048_576)),
            m=32,
            ef_construction=150,
        )
    print(f"ann {time.time() - t1:.1f}s", flush=True)
for col, kind in [
    ("chunk_id", "BTREE"),
    ("message", "BTREE"),
    ("account", "BITMAP"),
    ("disposition", "BITMAP"),
    ("date", "BTREE"),
    ("thread", "BTREE"),
    ("labels", "LABEL_LIST"),
    ("folders", "LABEL_LIST"),
]:
    ds.create_scalar_index(col, index_type=kind)
ds = lance.dataset(a.out)
print(f"indexes {time.time() - t1:.1f}s;", [(i.name, [list(s.fragment_ids) for s in i.segments]) for i in ds.describe_indices()])
print("peak rss MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
