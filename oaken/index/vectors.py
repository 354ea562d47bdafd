"""vectors/: the LanceDB store of chunk embeddings, beside raw.db and index.db.

The table is a Lance dataset (vectors/chunks.lance), the format LanceDB keeps its tables in, read
and written through pylance, Lance's own Python API: LanceDB's Python package adds a connection
layer Oaken does not use, and importing it took 2.2-2.6 s of every process that touched vectors/
(a generated REST client of 300 pydantic models), against 0.4 s for pylance. A triage at a
million messages, through `oaken triage` and `oaken reindex`, spent 4.2 of its 6 s there.

One table, `chunks`: a row per body chunk with its vector, the fingerprint of what made it
(embedder, dimension, chunker version) and the message fields a search prefilters on. The
fingerprint is also kept in the table's schema metadata: a table of another fingerprint is stale
and is never searched (`model_mismatch`) until the embedding pass rebuilds it.

Every LanceDB write is a new version on disk. Writes are batched (one version per batch of
messages), and `maintain` compacts and removes old versions, but only those that stopped being
the latest more than `retention_seconds` ago: a reader that opened a version a moment before a
cleanup keeps its files (a cleanup with older_than=0 makes such a reader fail).

A change never deletes a row: the new rows are appended and the old ones recorded as superseded
(oaken.index.vector_superseded), hidden from every reader, since a deleted row costs every later
ANN search a mask over the partitions it visits.

The rows and their schema are oaken.index.vector_rows'; the small files beside the table (its
state, the rebuilding marker, the embedding pass's records) are oaken.index.vector_files'; the
upkeep (state summary, compaction, cleanup) is oaken.index.vector_upkeep's, its index builds
oaken.index.vector_indexes'; the search is oaken.index.vector_search's; the ANN index's settings
are oaken.index.vector_ann's.

The stated bound: after maintenance the folder holds the live rows, the ANN index, and the
versions of roughly the last two retention periods plus at most `maintain_every` writes. Tested:
1,000 write cycles on a 100-row table stay under 1.5 MB (without cleanup: ~8 MB and growing).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from oaken.errors import VectorUnavailable
from oaken.index.vector_files import (  # noqa: F401 - re-exported
    REBUILDING_FILE,
    STATE_FILE,
    ann_base_rows,
    cleanup_after,
    cleanup_due,
    drop,
    maintenance_due,
    mark_rebuilding,
    read_state,
    rebuilding,
    rebuilt,
    vectors_path,
    write_json,
    writes_since_upkeep,
)
from oaken.index.vector_rows import (  # noqa: F401 - the row types re-exported: callers import them here
    FIELD_COLUMNS,
    GENERATION_KEY,
    META_KEY,
    ChunkVector,
    Fingerprint,
    MessageFields,
    VectorChunkHit,
    VectorFilters,
    arrow_table,
    ids_sql,
    normal,
    schema_of,
    stored_fields,
    where_sql,
)
from oaken.index.vector_search import VectorSearch
from oaken.index.vector_superseded import SupersededRows
from oaken.index.vector_upkeep import VectorUpkeep

TABLE = "chunks"
# LanceDB 0.40 prints a warning to stderr on every optimize() that updates the ANN index, asking
# whether index statistics should keep the IVF centroids (a future default drops them). Oaken
# reads no index statistics: take the new behaviour, and keep `oaken reindex` and the daemon's
# log free of it. Read by LanceDB when it optimizes, so setting it before any use is enough.
os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")
# Lance's own log (Rust, to stderr) warns while building an IVF_RQ index of a mailbox's size that
# k-means left some of its small sub-clusters empty: nothing a user can act on, printed into
# `oaken reindex`'s output and the daemon's journal. Errors still show; Oaken logs its own.
os.environ.setdefault("LANCE_LOG", "error")
# Defaults; [index] settings of the same names override them (see `store_settings`).
ANN_MIN_ROWS = 10_000  # brute force below (exact; ~20 ms at 10k with prefilters), the ANN index above (~4 ms)
RETENTION_SECONDS = 60.0  # a version outlives its successor by this long: longer than any search
MAINTAIN_EVERY = 20  # writes between compactions


class VectorStore(VectorUpkeep, VectorSearch):
    """The `chunks` table of vectors/. Writers and readers may be separate processes."""

    def __init__(
        self,
        data_dir: Path,
        *,
        ann_min_rows: int = ANN_MIN_ROWS,
        retention_seconds: float = RETENTION_SECONDS,
        maintain_every: int = MAINTAIN_EVERY,
        create: bool = False,
        upkeep_later: bool = False,
    ):
        self.path = vectors_path(data_dir)
        if not self.path.is_dir() and not create:
            raise VectorUnavailable("no_vector_store", f"{self.path}: no vector store yet; `oaken reindex` builds it")
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.ann_min_rows = ann_min_rows
        self.retention_seconds = retention_seconds
        self.maintain_every = maintain_every
        self.upkeep_later = upkeep_later
        state = read_state(data_dir)  # once: the writes counted since the upkeep, a cleanup due
        self._writes = writes_since_upkeep(state)
        self._cleanup_after = cleanup_after(state)
        self._ann_base_rows = ann_base_rows(state)
        self._state_written = 0.0
        self._local = threading.local()  # this thread's handle on the table (see `table`)
        self._session: Any = None
        self._session_lock = threading.Lock()
        self.superseded = SupersededRows(self.path)

    # ---- the table and its fingerprint ------------------------------------------------------

    @property
    def uri(self) -> Path:
        return self.path / f"{TABLE}.lance"

    def table(self) -> Any:
        """The table (a lance.LanceDataset) at its newest version; VectorUnavailable
        ("no_vector_store") when there is none. Every call looks for a newer version, so a
        long-lived reader (the daemon) never holds on to one that a cleanup may remove.

        A handle per thread: moving a handle to a newer version while another thread searches
        through it fails ("Already mutably borrowed"). The handles share one Lance session, and
        with it the ANN index once loaded (5-8 s at a million messages): a thread's own handle
        opens in ~0.1 ms."""
        import lance

        ds = getattr(self._local, "ds", None)
        if ds is not None:
            try:
                ds.checkout_latest()
                return ds
            except Exception:  # noqa: BLE001 - dropped or replaced meanwhile: opened again below
                self._local.ds = None
        with self._session_lock:  # one session, so the ANN index is loaded once for all threads
            try:
                ds = lance.dataset(str(self.uri), session=self._session)
            except (FileNotFoundError, ValueError) as exc:
                raise VectorUnavailable(
                    "no_vector_store", f"{self.path}: holds no table {TABLE!r}; `oaken reindex` builds it"
                ) from exc
            if self._session is None:
                self._session = ds.session()
        self._local.ds = ds
        return ds

    def exists(self) -> bool:
        try:
            self.table()
        except VectorUnavailable:
            return False
        return True

    def fingerprint(self) -> Fingerprint | None:
        meta = self.table().schema.metadata or {}
        key = meta.get(META_KEY)
        return Fingerprint.from_key(key) if key else None

    def generation(self) -> str:
        """The index.db generation whose chunk ids the rows carry ("" when not recorded)."""
        return (self.table().schema.metadata or {}).get(GENERATION_KEY, b"").decode()

    def check(self, expected: Fingerprint) -> None:
        """Raise VectorUnavailable("model_mismatch") unless the table was built by `expected`, and
        VectorUnavailable("no_vectors") while it is being rebuilt (it holds only part of the mail)."""
        found = self.fingerprint()
        if found != expected:
            what = found.describe() if found else "an unknown model"
            raise VectorUnavailable(
                "model_mismatch",
                f"{self.path}: vectors of {what}, but the configuration "
                f"wants {expected.describe()}; they are stale and not "
                "searched until `oaken reindex` rebuilds them",
            )
        self.check_whole()

    def check_whole(self) -> None:
        """Raise VectorUnavailable("no_vectors") while the table is being rebuilt (REBUILDING_FILE):
        it holds only part of the mail. Asked before a search and again after it, since a rebuild
        may begin in between."""
        marker = rebuilding(self.path.parent)
        if marker is not None:
            raise VectorUnavailable(
                "no_vectors",
                f"{self.path}: being rebuilt ({marker.get('reason', 'stale')}); "
                "not searched until every chunk is embedded again "
                "(`oaken reindex`, or the daemon)",
            )

    def ensure(
        self, fp: Fingerprint, *, rebuild: bool = False, generation: str | None = None, reason: str = "asked for"
    ) -> bool:
        """Make sure the table exists for `fp` (and, given, the index.db `generation` whose chunk
        ids its rows carry); a table of another fingerprint or generation, with the columns of
        another Oaken version or an unreadable superseded.npy, or any table with `rebuild` (for
        `reason`), is dropped, and the new
        one marked as being rebuilt (REBUILDING_FILE). Returns True when a stale table was dropped."""
        dropped = False
        if self.exists():
            found = self.fingerprint()
            same = found == fp and self.table().schema.names == schema_of(fp).names
            readable = self.superseded.readable()
            if not rebuild and same and readable and (generation is None or self.generation() == generation):
                return False
            if rebuild:
                why = reason
            elif found != fp:
                why = "vectors of another model or chunker"
            elif not same:
                why = "made by another version of Oaken"
            elif not readable:
                why = f"{self.superseded.file.name}, which says which rows count, cannot be read"
            else:
                why = "index.db was rebuilt"
            # said before the rows go, so no search takes the emptied table for a whole one
            mark_rebuilding(self.path.parent, why)
            shutil.rmtree(self.uri)
            self._local.ds = None
            with self._session_lock:
                self._session = None  # nothing it cached describes the new table
            dropped = True
        import lance

        self.superseded.clear()  # addresses of a table that is gone (dropped here or by hand)
        schema = schema_of(fp, generation or "")
        lance.write_dataset(schema.empty_table(), str(self.uri), schema=schema, mode="create")
        self._write_state(backends=[])
        return dropped

    def backends(self) -> list[str]:
        """The backends that built the stored vectors (oaken.index.backends names), oldest first,
        as state.json records them; [] when none is recorded (a store older than the record)."""
        state = read_state(self.path.parent) or {}
        return [str(b) for b in state.get("backends") or []]

    def record_backend(self, name: str) -> None:
        """Note that `name` writes vectors here from now on (kept until the table is dropped)."""
        if name not in self.backends():
            self._write_state(backends=[*self.backends(), name])

    def count(self) -> int:
        """Rows readers see (superseded ones are on disk but hidden)."""
        table = self.table()
        return int(table.count_rows()) - int(self.superseded.hidden(table.version).size)

    def live(self, columns: Sequence[str], where: str | None = None) -> Any:
        """The rows a reader sees (an Arrow table of `columns` and `_rowid`), superseded ones
        dropped: what anything reading the table outside this class must use."""
        table = self.table()
        t = table.to_table(columns=[*columns, "_rowid"], filter=where)
        live = self.superseded.live_mask(t.column("_rowid").to_numpy(), table.version)
        return t if live is None else t.filter(live)

    def chunk_messages(self) -> dict[int, int]:
        """chunk id -> message id of every stored row."""
        t = self.live(["chunk_id", "message"])
        return dict(zip(t.column("chunk_id").to_pylist(), t.column("message").to_pylist()))

    def rows_of(self, messages: Iterable[int], columns: Sequence[str] = ("chunk_id", "message")) -> list[dict]:
        ids = ids_sql(messages)
        if not ids:
            return []
        return self.live(columns, f"message IN ({ids})").drop(["_rowid"]).to_pylist()

    def fields_between(self, low: int, high: int) -> dict[int, MessageFields]:
        """The prefilter fields stored for each message with an id in [low, high] (its first row's:
        a message's rows all carry its fields)."""
        return stored_fields(
            self.live(["message", *FIELD_COLUMNS], f"message >= {int(low)} AND message <= {int(high)}")
        )

    # ---- writes -----------------------------------------------------------------------------

    def upsert(self, fields: Mapping[int, MessageFields], chunks: Sequence[ChunkVector]) -> None:
        """Make the stored chunks of the messages in `fields` exactly `chunks` (one version): the
        new rows appended, the old ones superseded (oaken.index.vector_superseded)."""
        if not fields:
            return
        self.settle()  # before reading: a committed append not yet dated would count its old rows
        fp = self.fingerprint()
        assert fp is not None
        old = self.live(["message"], f"message IN ({ids_sql(fields)})").column("_rowid").to_numpy()
        self._append_replacing(arrow_table(fp, fields, chunks), old)

    def insert(self, fields: Mapping[int, MessageFields], chunks: Sequence[ChunkVector]) -> None:
        """Append the chunks of messages that have no stored row (one version): upsert's result
        for them, without reading the table first."""
        if not chunks:
            return
        self.settle()  # before any commit (oaken.index.vector_superseded)
        fp = self.fingerprint()
        assert fp is not None
        self.table().insert(arrow_table(fp, fields, chunks))
        self._wrote()

    def delete_chunks(self, chunk_ids: Iterable[int]) -> int:
        return self._delete("chunk_id", chunk_ids)

    def delete_messages(self, messages: Iterable[int]) -> int:
        return self._delete("message", messages)

    def _delete(self, column: str, values: Iterable[int]) -> int:
        """Hide the rows whose `column` is among `values` from readers (superseded: no Lance
        version, no deletion mask; see oaken.index.vector_superseded); returns how many."""
        ids = ids_sql(values)
        if not ids or not self.exists():
            return 0
        self.settle()
        table = self.table()
        version = table.version
        found = self.live([column], f"{column} IN ({ids})").column("_rowid").to_numpy()
        self.superseded.hide(found.tolist(), version)
        if len(found):
            self._wrote()
        return int(len(found))

    def update_fields(self, fields: Sequence[MessageFields]) -> None:
        """New labels, folders, disposition... for rows already stored; vectors stay (one version).

        The rows are appended again with the new fields and the old ones superseded
        (oaken.index.vector_superseded): a deleted row in a fragment the ANN index covers costs
        every later search a deletion mask over the partitions it visits (docs/scale.md). Given
        only the changed columns Lance rewrites those columns in place instead, and every scalar
        index on them (chunk_id's, the prefilter's) drops each fragment it touched until the next
        upkeep: at a million messages one triage left 2.3M of 3.5M rows outside them, so the next
        triage's read scanned them all (0.16 -> 1.0 s) and every prefilter scanned them."""
        if not fields or not self.exists():
            return
        import pyarrow as pa
        import pyarrow.compute as pc

        self.settle()  # before reading: a committed append not yet dated would show its old rows
        by_message = {f.message: normal(f) for f in fields}
        schema = self.table().schema
        rows = self.live(schema.names, f"message IN ({ids_sql(by_message)})")
        # a read-state, star or category change reaches the feed too, but not these fields
        changed = sorted(m for m, f in stored_fields(rows).items() if by_message[m] != f)
        if not changed:
            return
        rows = rows.filter(pc.is_in(rows.column("message"), pa.array(changed, pa.int64())))
        old = rows.column("_rowid").to_numpy()
        rows = rows.select(schema.names)
        fs = [by_message[m] for m in rows.column("message").to_pylist()]
        for c in FIELD_COLUMNS:
            i = schema.get_field_index(c)
            rows = rows.set_column(i, schema.field(c), pa.array([getattr(f, c) for f in fs], schema.field(c).type))
        self._append_replacing(rows, old)

    def settle(self) -> None:
        """Resolve what a writer that died mid-append left pending in superseded.npy. Every write
        calls it before its commit: a pending entry is dated by the table having moved past its
        base, which only its own append may have done (writers only)."""
        if self.superseded.pending().size:
            self.superseded.settle(self.table().latest_version)

    def _append_replacing(self, rows: Any, old: np.ndarray) -> None:
        """Append `rows` and supersede the rows at `old` from the version the append makes."""
        self.settle()
        table = self.table()
        base = table.version
        if not rows.num_rows:  # nothing replaces them: a deletion
            self.superseded.hide(old.tolist(), base)
            self._wrote()
            return
        self.superseded.hide_after(old.tolist(), base)
        try:
            table.insert(rows)
        finally:
            self.settle()  # dated if the append committed, dropped if it did not
        self._wrote()


def open_for_search(data_dir: Path, expected: Fingerprint) -> VectorStore:
    """The store, checked: raises VectorUnavailable with no_vector_store, model_mismatch or
    no_vectors when it cannot answer."""
    store = VectorStore(data_dir)
    store.check(expected)
    if store.count() == 0:
        raise VectorUnavailable(
            "no_vectors",
            f"{store.path}: no vectors yet; embedding runs behind keyword indexing (`oaken reindex` or the daemon)",
        )
    return store
