"""VectorStore's search half: the nearest chunks to a query vector among those the filters
allow, each scored by its true cosine whatever path Lance took (oaken.index.vectors holds the
store and the ANN settings this reads)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from oaken.index import vector_ann
from oaken.index.vector_rows import VectorChunkHit, VectorFilters, where_sql


class VectorSearch:
    """The search half of oaken.index.vectors.VectorStore (its base class)."""

    if TYPE_CHECKING:  # VectorStore's
        from oaken.index.vector_superseded import SupersededRows

        superseded: SupersededRows

        def table(self) -> Any: ...

    def search(
        self, query_vector: np.ndarray, filters: VectorFilters = VectorFilters(), limit: int = 50
    ) -> list[VectorChunkHit]:
        """Nearest chunks by cosine among those the filters allow (prefiltered), best first.

        Every score is the true cosine of the query and the stored float32 vector, whatever path
        Lance took: the ANN index ranks by scalar-quantized vectors (and LanceDB reported another
        distance scale on that path, about 2(1 - cos)), so its candidates, ANN_REFINE
        times as many as asked for (at most ANN_REFINE_MAX_EXTRA more), are re-scored exactly here
        and the best `limit` kept. Brute force and a bypassed index are re-scored the same way, so
        one threshold holds on every path."""

        q = np.asarray(query_vector, dtype=np.float32).ravel()
        norm = float(np.linalg.norm(q))
        if norm == 0.0 or not np.isfinite(norm):
            return []
        q = q / norm
        limit = max(1, int(limit))
        where = where_sql(filters)
        fetch = (
            limit
            if filters.selective
            else limit + min(limit * (vector_ann.ANN_REFINE - 1), vector_ann.ANN_REFINE_MAX_EXTRA)
        )
        t = None
        if where and filters.broad:
            # The filter every search has (account, dispositions) keeps most rows, and LanceDB
            # evaluated it over all of them before the ANN search: at 3.5M rows 178 ms of a 64 ms
            # search (docs/scale.md). The nearest rows first, then the filter on them: when at
            # least `fetch` pass, they hold the nearest `fetch` that pass (any nearer passing row
            # ranks above the last of them); else the filter goes first after all. A quarter more
            # is asked, so that the `fetch` nearest that pass, the candidates the exact re-score
            # below chooses from, are the same as the prefiltered search's.
            t = self._nearest(q, filters, where, fetch + fetch // 4 + 16, prefilter=False)
            if t.num_rows < fetch:
                t = None
            else:
                nearest = np.argsort(t.column("_distance").to_numpy(zero_copy_only=False), kind="stable")
                t = t.take(nearest[:fetch])
        if t is None:
            t = self._nearest(q, filters, where, fetch, prefilter=True)
        if t.num_rows == 0:
            return []
        matrix = t.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        matrix = matrix.reshape(t.num_rows, -1).astype(np.float32, copy=False)
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0.0] = 1.0
        cosines = (matrix @ q) / norms
        chunk_ids = t.column("chunk_id").to_numpy()
        # best first; equal cosines by chunk id, so pages and repeated searches agree
        order = np.lexsort((chunk_ids, -cosines))[:limit]
        messages = t.column("message").to_numpy()
        return [VectorChunkHit(int(chunk_ids[i]), int(messages[i]), float(cosines[i])) for i in order]

    def _nearest(self, q: np.ndarray, filters: VectorFilters, where: str | None, fetch: int, *, prefilter: bool) -> Any:
        """Lance's `fetch` nearest rows to `q` that pass `where` (an Arrow table, with the
        `_distance` and `_rowid` Lance adds): the filter applied before the search (`prefilter`)
        or to its results. Superseded rows (oaken.index.vector_superseded) are dropped here, and
        more asked for when they took places."""
        table = self.table()
        k = fetch
        while True:
            nearest: dict[str, Any] = {"column": "vector", "q": q, "k": k, "metric": "cosine"}
            if filters.selective:
                nearest["use_index"] = False
            else:
                nearest["nprobes"] = vector_ann.ann_nprobes(int(table.count_rows()))
                nearest["ef"] = max(vector_ann.ANN_EF, 2 * k)
            # _distance is not used (the cosine is computed in `search`), but leaving it out makes
            # Lance warn on every search
            found = table.to_table(
                columns=["chunk_id", "message", "vector", "_rowid", "_distance"],
                nearest=nearest,
                filter=where or None,
                prefilter=prefilter,
            )
            live = self.superseded.live_mask(found.column("_rowid").to_numpy(), table.version)
            if live is None:
                return found
            kept = found.filter(live)
            if kept.num_rows >= fetch or found.num_rows < k:
                return kept
            k += 2 * (found.num_rows - kept.num_rows) + 16
