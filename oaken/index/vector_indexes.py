"""VectorStore's indexes: the ANN index (its build, its deltas, its type) and the scalar indexes
rows are found and prefiltered by; VectorUpkeep decides when they are built or merged."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oaken.index import vector_ann
from oaken.index.vector_fragments import MAX_INDEX_DELTAS, REBUILD_SHARE, vector_index


class VectorIndexes:
    """The index half of VectorUpkeep (its base class)."""

    path: Path
    _ann_base_rows: int | None  # rows the ANN index was last built over (None: not known)

    if TYPE_CHECKING:  # VectorStore's

        def table(self) -> Any: ...
        def count(self) -> int: ...

    def _build_index(self, table: Any, *, replace: bool = False) -> None:
        rows = self.count()
        table.create_index(
            "vector",
            index_type=vector_ann.ANN_INDEX_TYPE,
            metric="cosine",
            replace=replace,
            num_partitions=vector_ann.ann_partitions(rows),
            num_bits=vector_ann.ANN_NUM_BITS,
        )
        self._ann_base_rows = rows

    def _index_outdated(self) -> bool:
        """Whether the ANN index is of another type than vector_ann.ANN_INDEX_TYPE: a store from
        before IVF_RQ holds an IVF-HNSW-SQ index, built again once by the next maintenance."""
        name = self._vector_index_name()
        if name is None:
            return False
        return str(self.table().stats.index_stats(name).get("index_type")) != vector_ann.ANN_INDEX_TYPE

    def index_deltas(self) -> tuple[int, int] | None:
        """(delta indexes beside the first, rows indexed) of the ANN index; None without one."""
        name = self._vector_index_name()
        if name is None:
            return None
        stats = self.table().stats.index_stats(name)
        return int(stats["num_indices"]) - 1, int(stats["num_indexed_rows"])

    def _vector_index_name(self, indexes: Any = None) -> str | None:
        """The ANN index's name, from `indexes` (a describe_indices() already read) or the table's."""
        index = vector_index(self.table().describe_indices() if indexes is None else indexes)
        return None if index is None else str(index.name)

    def _bound_deltas(self, table: Any) -> dict[str, Any]:
        """Keeps the ANN index to at most MAX_INDEX_DELTAS deltas (see there): merges them, or
        builds the index again once they hold REBUILD_SHARE of its rows. LanceDB's Python API
        cannot merge index deltas; pylance, the Lance engine it is built on, can. A merge that
        fails is logged and left for the next maintenance: searches stay right, only slower."""
        found = self.index_deltas()
        if found is None or found[0] <= MAX_INDEX_DELTAS:
            return {}
        deltas, indexed = found
        base = self._ann_base_rows if self._ann_base_rows else indexed  # not recorded: say deltas are small
        self._ann_base_rows = base
        t = time.monotonic()
        if indexed - base > REBUILD_SHARE * base:
            self._build_index(table, replace=True)
            return {"index_rebuilt": round(time.monotonic() - t, 3)}
        try:
            table.optimize.optimize_indices(num_indices_to_merge=deltas, index_names=[self._vector_index_name()])
        except Exception as exc:  # Lance's own: the deltas stay, searches still right
            from oaken import log

            log.get().warning("vector_index_merge_failed", path=str(self.path), deltas=deltas, error=str(exc))
            return {"index_merge_failed": str(exc)}
        return {"index_deltas_merged": deltas, "index_merge_seconds": round(time.monotonic() - t, 3)}

    KEY_COLUMNS = ("chunk_id", "message")
    # Scalar indexes on the columns every search's prefilter reads (account and disposition in
    # each one; dates, thread, labels and folders when the query names them). Without them
    # LanceDB evaluated the predicate over every row before the ANN search: at 100,000 messages
    # (347,192 chunks) a 500-candidate search took 43 ms with the account and disposition filter
    # against 22 ms without; with them 24 ms, a date range 39 -> 15 ms, a label 70 -> 40 ms, the
    # same hits (docs/scale.md). Bitmaps for the few-valued columns, label lists for the arrays.
    FILTER_INDEXES = (
        ("account", "bitmap"),
        ("disposition", "bitmap"),
        ("date", "btree"),
        ("thread", "btree"),
        ("labels", "label_list"),
        ("folders", "label_list"),
    )

    def _ensure_key_indexes(self, table: Any) -> None:
        """B-tree indexes on the columns rows are found by. Without them a merge_insert (a triage
        or label change: update_fields) joined against every row and a delete or a `message IN
        (...)` read scanned the column: 0.8-1.7 s for 4 rows of 221,836 (100,000 messages), 6-12
        ms with them; building both took 0.13 s there. Then the prefilter's indexes
        (FILTER_INDEXES). The upkeep keeps them up to date with rows written since."""
        kinds = {"btree": "BTREE", "bitmap": "BITMAP", "label_list": "LABEL_LIST"}
        have = {c for i in table.describe_indices() for c in i.field_names}
        for column in self.KEY_COLUMNS:
            if column not in have:
                table.create_scalar_index(column, index_type="BTREE")
        for column, kind in self.FILTER_INDEXES:
            if column in have:
                continue
            try:
                table.create_scalar_index(column, index_type=kinds[kind])
            except Exception as exc:  # noqa: BLE001 - a filter index is for speed: never a failed pass
                from oaken import log

                log.get().warning("vector_filter_index_failed", column=column, kind=kind, error=repr(exc))

    def has_index(self) -> bool:
        return self._vector_index_name() is not None
