"""The ANN index's settings: how many partitions an index over so many rows gets, how many a
search visits, how many candidates are re-scored. Benchmarks set these module attributes to
compare settings (scripts/bench_ann.py, scripts/bench_ann_home.py); the store reads them here at
each build and search, so a change takes effect on the next one."""

from __future__ import annotations

import math

# The ANN index: about sqrt(rows) IVF partitions, each row a RaBitQ code of ANN_NUM_BITS bits a
# dimension (IVF_RQ), a search scanning the partitions nearest the query (ann_nprobes), whose
# candidates are re-scored exactly from the stored vectors (ANN_REFINE). On 1M chunks made from
# real MiniLM vectors it found 0.987 of the exact top 10 messages (text questions) at the speed of
# the IVF-HNSW-SQ index it replaced (one graph of up to 1M rows, M = 32, ef 1,000: 0.957), built
# in 121 s against 733 s, in 266 MB against 731 MB, and holds no graph in memory (~2 GB resident
# at 3.5M rows). Small partitions also bound what Lance's row mask costs a search (each row of
# each partition visited is checked when any row is deleted or outside the index): a fifth of
# the table, against all of it. docs/ann-recall.md.
ANN_INDEX_TYPE = "IVF_RQ"
ANN_NUM_BITS = 5  # 1 bit: 0.84-0.93 at 1M whatever nprobes (refine 4 included)
# Partitions a query visits: at least ANN_NPROBES_MIN, and ANN_PROBE_SHARE of them. At 1M chunks
# (1,000 partitions) 100 gave 0.956 and 200 gave 0.987; at 3.5M (1,876) 200 gave 0.973 and 300
# 0.983, so a fixed count loses recall as the partitions multiply (docs/ann-recall.md).
ANN_NPROBES_MIN = 200
ANN_PROBE_SHARE = 0.2
# A fixed count instead (benchmarks set it); None: ann_nprobes.
ANN_NPROBES: int | None = None
# HNSW's search beam, for the IVF-HNSW-SQ index a store from before IVF_RQ holds until its next
# full maintenance builds the new one (IVF_RQ ignores it): 1,000 gave 0.96 at 1M chunks.
ANN_EF = 1000
# Candidates fetched from the ANN index per chunk asked for, then re-scored exactly from the stored
# vectors (see VectorStore.search): the index ranks by quantized vectors, so its order near the
# cut is loose.
ANN_REFINE = 2
# ...but at most this many more: a hybrid search's 500 candidates re-scored from 1,000 cost 17 ms
# against 13 ms from 500 (Enron, 23k chunks), and past the first hundred the order near the cut
# no longer moves a page (docs/ann-recall.md: page recall alike at refine 1 and 2)
ANN_REFINE_MAX_EXTRA = 64


def ann_partitions(rows: int) -> int:
    """IVF partitions for an index over `rows` vectors: about sqrt(rows), so a partition holds
    about as many rows as there are partitions (docs/ann-recall.md: rows/4096, 244 partitions at 1M
    chunks, needed 100 of them scanned for 0.98, twice the rows sqrt's 200 read)."""
    return max(1, round(math.sqrt(rows)))


def ann_nprobes(rows: int) -> int:
    """Partitions a search of an index over about `rows` vectors visits (see ANN_NPROBES_MIN)."""
    if ANN_NPROBES is not None:
        return ANN_NPROBES
    return max(ANN_NPROBES_MIN, round(ann_partitions(rows) * ANN_PROBE_SHARE))
