"""VectorStore's upkeep: its state summary, compaction, version cleanup, and when its indexes are
built or merged (how: oaken.index.vector_indexes; what it does to the table's fragments and index
segments is oaken.index.vector_fragments')."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from oaken.index.vector_files import STATE_FILE, write_json
from oaken.index.vector_fragments import (
    MAX_INDEX_DELTAS,
    big_fragments,
    bound_scalar_deltas,
    compact,
    fragment_rows,
    materialize,
    materialize_small,
    segment_rows,
    vector_index,
)
from oaken.index.vector_indexes import VectorIndexes
from oaken.index.vector_superseded import SUPERSEDED_MAX_SHARE, fragment_of

if TYPE_CHECKING:
    from oaken.index.vector_rows import Fingerprint
    from oaken.index.vector_superseded import SupersededRows


MAINTAIN_ROWS = 1_000  # new rows after which a pass ends with a maintenance (finish_pass)
# Rows no ANN index segment covers (appended since the last upkeep: new mail, a triage's new rows)
# make Lance check every row of each partition a search visits against an allow list, as a
# deleted row does: at a million messages a vector search took 179 ms with two such fragments and
# 43 ms once a delta covered them, which took 0.11 s (docs/scale.md). So every pass that appended
# rows ends by adding them to the index as a delta of their own (`cover_new_rows`), and once more
# than MAX_INDEX_DELTAS deltas of at most this many rows each are the newest, merges those (a cost
# of their few rows; bigger deltas are left to the upkeep's _bound_deltas).
FOLD_MAX_ROWS = 4_096
# A store opened with `upkeep_later` (the daemon's passes) leaves a maintenance that falls due to a
# pass of its own once nothing has changed for a few seconds (IndexWorker): at a million messages
# one costs 2-3 s, which a triage's pass paid every `maintain_every` writes. Past this many times
# `maintain_every` writes it is done in the pass anyway: a daemon that is never idle still keeps
# vectors/ within its bound.
DEFER_LIMIT = 5


class VectorUpkeep(VectorIndexes):
    """The upkeep half of oaken.index.vectors.VectorStore (its base class): what keeps vectors/
    small and its state summary current while the store is written. `path`, `_ann_base_rows`,
    `table` and `count` are declared on VectorIndexes, its base."""

    ann_min_rows: int
    retention_seconds: float
    maintain_every: int
    upkeep_later: bool  # see DEFER_LIMIT
    _writes: int
    _state_written: float
    _cleanup_after: float | None  # when a deferred cleanup may run (time.time()); see tidy

    if TYPE_CHECKING:  # VectorStore's
        superseded: SupersededRows

        def fingerprint(self) -> Fingerprint | None: ...
        def backends(self) -> list[str]: ...
        def settle(self) -> None: ...

    def _wrote(self) -> None:
        self._writes += 1  # since the last maintenance, by any process: kept in the state file
        if self._maintenance_due() and not self._deferring():
            self.maintain(index=False)
        elif time.monotonic() - self._state_written > 1.0:
            self._write_state()

    def _write_state(self, *, backends: list[str] | None = None) -> None:
        """A small summary `oaken status` reads without importing LanceDB (at most once a second
        while writing, and after every maintenance); `backends` replaces the recorded list,
        which is otherwise kept."""
        self._state_written = time.monotonic()
        fp = self.fingerprint()
        state = {
            "fingerprint": json.loads(fp.key()) if fp else None,
            "rows": self.count(),
            "written_at": time.time(),
            "backends": self.backends() if backends is None else backends,
            "writes_since_upkeep": self._writes,
            "upkeep_due": self._maintenance_due(),  # read without LanceDB (vector_files.maintenance_due)
            "cleanup_after": self._cleanup_after,
            "ann_base_rows": self._ann_base_rows,
        }
        write_json(self.path / STATE_FILE, state)

    # ---- maintenance ------------------------------------------------------------------------

    def finish_pass(self, written: int) -> None:
        """After a complete pass that wrote `written` new rows: a maintenance when the ANN index
        is due or many rows wait to be folded into it; else only the state summary. A pass that
        rewrote a few messages' fields (a triage) or added a few paid ~0.6 s for maintenance of a
        0.6-1.2 s triage at 100,000 messages; the upkeep every `maintain_every` writes (counted
        across passes and processes in the state file) compacts, cleans up and merges the ANN
        index's deltas; meanwhile every pass adds its new rows as a delta (`cover_new_rows`). With
        `upkeep_later` that
        counted maintenance and a due cleanup are left for a pass without it (DEFER_LIMIT); a
        first ANN index and a pass of many new rows are not, as no later pass may be quiet."""
        self.settle()  # before any commit below (oaken.index.vector_superseded)
        if written >= MAINTAIN_ROWS or (self.count() >= self.ann_min_rows and not self.has_index()):
            self.maintain()  # a first ANN index or many new rows: a long pass already, never deferred
            return
        if self._maintenance_due():
            if self._deferring():
                self.cover_new_rows()
                self._write_state()  # the state file says it is due: a pass without upkeep_later does it
                return
            self.maintain()
            return
        if self._cleanup_after is not None and time.time() >= self._cleanup_after and not self.upkeep_later:
            self.tidy()
        if self.count():
            self._ensure_key_indexes(self.table())  # a listing when they exist: milliseconds
        self.cover_new_rows()
        self._write_state()

    def cover_new_rows(self) -> None:
        """Add the rows no segment of the ANN index covers to it, as a delta (see FOLD_MAX_ROWS):
        milliseconds for a pass's few rows. Without an ANN index (a small mailbox, searched
        exactly) nothing is done. A failure is logged: searches stay right, only slower."""
        table = self.table()
        index = vector_index(table.describe_indices())
        if index is None:
            return
        name = str(index.name)
        rows = fragment_rows(table)
        segments = list(index.segments)  # oldest first
        covered = {int(i) for seg in segments for i in seg.fragment_ids}
        if not set(rows) - covered:
            return
        small = 0
        for seg in reversed(segments[1:]):  # the newest deltas, never the first segment
            if segment_rows(seg, rows) > FOLD_MAX_ROWS:
                break
            small += 1
        merge = small if small >= MAX_INDEX_DELTAS else 0
        if merge and self.upkeep_later and small < 3 * MAX_INDEX_DELTAS:
            # a merge took 1-1.5 s at a million messages: the daemon's quiet upkeep does it
            # (_bound_deltas), due from now on; a daemon never quiet merges past three times as many
            merge, self._writes = 0, max(self._writes, self.maintain_every)
        try:
            table.optimize.optimize_indices(index_names=[name], num_indices_to_merge=merge)
        except Exception as exc:  # Lance's own: the rows stay searched by the allow list
            from oaken import log

            log.get().warning("vector_index_cover_failed", path=str(self.path), error=f"{type(exc).__name__}: {exc}")

    def _maintenance_due(self) -> bool:
        return self._writes >= self.maintain_every

    def _deferring(self) -> bool:
        return self.upkeep_later and self._writes < DEFER_LIMIT * self.maintain_every

    def maintain(self, *, index: bool = True) -> dict[str, Any]:
        """Compact, clean up versions no reader can still hold, and build the ANN index once the
        table holds ann_min_rows (with `index`: building it takes seconds to minutes)."""
        self.settle()
        table = self.table()
        out: dict[str, Any] = {"indexed": self.has_index()}
        if index and not out["indexed"] and self.count() >= self.ann_min_rows:
            self._build_index(table)
            out["indexed"] = True
        elif index and out["indexed"] and self._index_outdated():
            t = time.monotonic()
            self._build_index(table, replace=True)
            out["index_rebuilt"] = round(time.monotonic() - t, 3)
        if self.count():
            self._ensure_key_indexes(table)
        self._writes = 0
        self._compact_and_update_indexes(table)
        if out["indexed"]:
            out.update(self._bound_deltas(table))
        older = self._safe_older_than()
        if older is not None:
            table.cleanup_old_versions(older_than=older)
        self._forget_deleted(table)
        # what this maintenance superseded is kept through the retention: removed by tidy after it
        waiting = len(table.versions()) > 1
        self._cleanup_after = time.time() + self.retention_seconds + 1.0 if waiting else None
        self._write_state()
        return out

    def _compact_and_update_indexes(self, table: Any) -> None:
        """What LanceDB's optimize() does but its cleanup, with new rows added to the ANN index
        as a delta only. optimize() lets Lance rebalance the IVF partitions: one under a quarter
        of Lance's target size (262,144 rows) is joined to another, one over four times it is
        split, and either merges every delta and builds every partition's graph again. At a
        million messages (3.5M rows, 4 partitions) a maintenance after 350 new rows ran 25
        minutes on both cores without finishing (docs/scale.md), and a first build's own
        maintenance joined the partitions it had just built (tests/test_vectors.py). The
        partitions are Oaken's choice (vector_ann.ann_partitions), renewed by the rebuild in
        _bound_deltas; Lance is asked for a plain delta (`num_indices_to_merge=0`, which skips
        the rebalancing).

        The scalar indexes get deltas too: Lance's default merges the new rows into the newest
        segment, which is the whole table's until a delta exists (1.26 s of every upkeep at a
        million messages, against 5 ms for the eight deltas); `bound_scalar_deltas` keeps them
        few."""
        optimizer = table.optimize
        self._purge_superseded(table)
        # a fragment still holding superseded rows keeps its row addresses: never rewritten here
        keep = sorted({int(f) for f in fragment_of(self.superseded.hidden(table.latest_version))})
        compact(table, excluded_fragment_ids=keep)
        materialize_small(table, keep)  # Compaction.commit moves `table` to the version it writes
        indexes = table.describe_indices()
        vector = self._vector_index_name(indexes)
        others = [str(i.name) for i in indexes if str(i.name) != vector]
        if others:
            optimizer.optimize_indices(index_names=others, num_indices_to_merge=0)
            bound_scalar_deltas(table, others)
        if vector is not None:
            optimizer.optimize_indices(index_names=[vector], num_indices_to_merge=0)

    def _purge_superseded(self, table: Any) -> None:
        """Delete for real the superseded rows (oaken.index.vector_superseded) of the fragments
        the compaction may rewrite, which materialize_small then rewrites without them; those of
        the big fragments stay hidden, until they (with any row deleted there before) pass
        SUPERSEDED_MAX_SHARE of the table: then they go and their fragments are rewritten, a
        minute at a million messages. A failure is logged: they stay hidden, searches stay right."""
        hidden = self.superseded.hidden(table.latest_version)
        if not hidden.size:
            return
        big = big_fragments(table)
        in_big = np.isin(fragment_of(hidden), sorted(big))
        deleted_big = sum(
            int(f.metadata.deletion_file.num_deleted_rows or 0)
            for f in table.get_fragments()
            if int(f.fragment_id) in big and f.metadata.deletion_file is not None
        )
        rewrite_big = int(in_big.sum()) + deleted_big > SUPERSEDED_MAX_SHARE * int(table.count_rows())
        gone = hidden if rewrite_big else hidden[~in_big]
        from oaken import log

        try:
            for i in range(0, len(gone), 10_000):
                part = gone[i : i + 10_000]
                table.delete(f"_rowid IN ({', '.join(map(str, part.tolist()))})")
                # a reader of an older version still has them hidden: forgotten after the cleanup
                self.superseded.deleted(part, table.latest_version)
        except Exception as exc:  # Lance's own
            log.get().warning(
                "vector_superseded_purge_failed", rows=int(len(gone)), error=f"{type(exc).__name__}: {exc}"
            )
            return
        if rewrite_big:
            materialize(table, set())  # every fragment holding a deleted row, the big ones too

    def tidy(self) -> None:
        """The cleanup a maintenance had to leave for later: the versions it superseded stay
        through the retention, for readers that opened them. A first build ends with a
        compaction and the ANN index, which supersede every window written seconds before, so
        vectors/ held ~3.5x its compacted size (2,059 against 553 MB at 100,000 messages) until
        the next maintenance, maybe days later. Asked for by the first pass after the retention
        (the daemon starts one then: IndexWorker); once per maintenance, so a failure is
        reported by that pass and not retried every second."""
        self._cleanup_after = None
        self._write_state()
        older = self._superseded_long_ago()
        if older is not None:
            self.table().cleanup_old_versions(older_than=older)
        self._forget_deleted(self.table())

    def _forget_deleted(self, table: Any) -> None:
        """Superseded rows deleted for real in a version no older one remains before: no reader
        can see them any more."""
        if self.superseded.entries().size:
            self.superseded.drop_deleted_before(min(int(v["version"]) for v in table.versions()))

    def _superseded_long_ago(self) -> timedelta | None:
        """The cleanup age that removes every version superseded more than retention_seconds ago,
        measured to now: `_safe_older_than` measures from the newest version, so it never removes
        what the newest version itself superseded. A version older than the retention that is
        not the newest is kept (its successor may be recent), with a second's margin for the
        cleanup's own clock, which reads a moment later."""
        versions = sorted(self.table().versions(), key=lambda v: v["version"])
        if len(versions) < 2:
            return None
        retention = timedelta(seconds=self.retention_seconds)
        now = datetime.now(versions[-1]["timestamp"].tzinfo)  # LanceDB's are naive local times
        old = [v for v in versions if v["timestamp"] <= now - retention]
        if not old:
            return None
        if old[-1] is versions[-1]:
            return retention  # every other version was superseded by it, long enough ago
        return (now - old[-1]["timestamp"]) + timedelta(seconds=1)

    def _safe_older_than(self) -> timedelta | None:
        """The cleanup age that removes only versions superseded more than retention_seconds ago.

        LanceDB removes versions older than a cut-off *by their own timestamp*, and a version
        written an hour ago and superseded a moment ago may still be being read. With S the newest
        version whose successor is older than the retention (on LanceDB's clock, measured from
        the newest version L), an age of (L - S) + retention puts the cut-off at or before S while
        L is recent, and when L itself is older than the retention every superseded version is
        safe to remove anyway. Only differences of LanceDB's own timestamps are used."""
        versions = sorted(self.table().versions(), key=lambda v: v["version"])
        if len(versions) < 2:
            return None
        latest = versions[-1]["timestamp"]
        retention = timedelta(seconds=self.retention_seconds)
        safe = None
        for older, newer in zip(versions, versions[1:]):
            if newer["timestamp"] <= latest - retention:
                safe = older
        if safe is None:
            return None
        return (latest - safe["timestamp"]) + retention

    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
