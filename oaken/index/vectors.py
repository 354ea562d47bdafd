"""vectors/: the LanceDB store of chunk embeddings, beside raw.db and index.db.

One table, `chunks`: a row per body chunk with its vector, the fingerprint of what made it
(embedder, dimension, chunker version) and the message fields a search prefilters on. The
fingerprint is also kept in the table's schema metadata: a table of another fingerprint is stale
and is never searched (`model_mismatch`) until the embedding pass rebuilds it.

Every LanceDB write is a new version on disk. Writes are batched (one version per batch of
messages), and `maintain` compacts and removes old versions, but only those that stopped being
the latest more than `retention_seconds` ago: a reader that opened a version a moment before a
cleanup keeps its files (a cleanup with older_than=0 makes such a reader fail).

The stated bound: after maintenance the folder holds the live rows, the ANN index, and the
versions of roughly the last two retention periods plus at most `maintain_every` writes. Tested:
1,000 write cycles on a 100-row table stay under 1.5 MB (without cleanup: ~8 MB and growing).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from oaken.errors import VectorUnavailable
from oaken import paths

if TYPE_CHECKING:
    from oaken.store import MessageMeta

TABLE = "chunks"
STATE_FILE = "state.json"
# in vectors/ while the table is being built again (another model or chunker, a rebuilt index.db,
# `oaken reindex --rebuild`): a search then says its vector side is degraded instead of answering
# from the part of the mail embedded so far as if it were all of it. The embedding pass removes
# it once every chunk is embedded again.
REBUILDING_FILE = "rebuilding.json"
_META_KEY = b"oaken.fingerprint"
# the index.db whose chunk ids the rows carry (KeywordIndex.generation): a rebuilt index.db numbers
# its chunks again, so rows of another generation would stand for other chunks' text
_GENERATION_KEY = b"oaken.index_generation"

# Defaults; [index] settings of the same names override them (see `store_settings`).
ANN_MIN_ROWS = 10_000  # brute force below (exact; ~20 ms at 10k with prefilters), IVF-HNSW-SQ above (~4 ms)
RETENTION_SECONDS = 60.0  # a version outlives its successor by this long: longer than any search
MAINTAIN_EVERY = 20  # writes between compactions
# HNSW search beam (ignored by brute force). 300 holds message recall@10 >= 0.99 up to 100k chunks
# but gives 0.90 at 1M; 1000 gives 0.96 there for 1-2 ms at limit 10 (docs/ann-recall.md).
ANN_EF = 1000
# Candidates fetched from the ANN index per chunk asked for, then re-scored exactly from the stored
# vectors (see VectorStore.search): the index ranks by quantized vectors, so its order near the
# cut is loose.
ANN_REFINE = 2
# ...but at most this many more: a hybrid search's 500 candidates re-scored from 1,000 cost 17 ms
# against 13 ms from 500 (Enron, 23k chunks), and past the first hundred the order near the cut
# no longer moves a page (docs/ann-recall.md: page recall alike at refine 1 and 2)
ANN_REFINE_MAX_EXTRA = 64
ANN_NPROBES: int | None = None  # IVF partitions a query visits (None: LanceDB's default)
# HNSW build beam. 64 left nodes unreachable (3 of 1,500 real chunks not found by their own vector;
# text recall@10 stuck near 0.98 at any ef); 150 gives 0.989-0.993 for 1.2-1.6 s more build at
# 23k chunks; LanceDB's 300 gives 0.994 (docs/ann-recall.md).
ANN_EF_CONSTRUCTION = 150


def ann_partitions(rows: int) -> int | None:
    """IVF partitions for an index over `rows` vectors: one graph up to 1,048,576 rows (LanceDB's
    own default for IVF_HNSW_SQ, pinned). More partitions cost recall at 100k and 1M whatever
    nprobes (docs/ann-recall.md); past ~1M rows untested."""
    return max(1, -(-rows // 1_048_576))


@dataclass(frozen=True)
class Fingerprint:
    """What makes two vectors comparable: the embedder's fingerprint, the dimension, the chunker."""

    model: str
    dim: int
    chunker: str

    def key(self) -> str:
        return json.dumps({"model": self.model, "dim": self.dim, "chunker": self.chunker}, sort_keys=True)

    @classmethod
    def from_key(cls, key: str | bytes) -> "Fingerprint":
        d = json.loads(key)
        return cls(str(d["model"]), int(d["dim"]), str(d["chunker"]))

    def describe(self) -> str:
        return f"{self.model}, {self.dim} dimensions, chunker {self.chunker}"


@dataclass(frozen=True)
class MessageFields:
    """The fields of a message that a vector search prefilters on (stored lower-cased)."""

    message: int
    account: str
    date: int
    sender: str
    to_addrs: str
    cc_addrs: str
    labels: tuple[str, ...]
    folders: tuple[str, ...]
    disposition: str
    thread: int

    @classmethod
    def from_meta(cls, m: "MessageMeta") -> "MessageFields":
        return cls(
            message=m.id, account=m.account, date=m.date,
            sender=f"{m.sender_name} <{m.sender_addr}>", to_addrs="\n".join(m.to), cc_addrs="\n".join(m.cc),
            labels=m.labels, folders=m.folders,
            disposition=m.triage.disposition, thread=m.thread,
        )


@dataclass(frozen=True)
class ChunkVector:
    chunk_id: int
    message: int
    vector: np.ndarray  # (dim,) float32, unit norm


@dataclass(frozen=True)
class VectorFilters:
    """Prefilters (all given fields must hold). Within a field: senders, to, cc, folders and
    dispositions match any; labels must all be present. Strings match case-insensitively,
    senders/to/cc as substrings. Phrases, exclusions, attachments, read state and triage
    are not here: the caller binds them (see vector_retriever)."""

    account: str | None = None
    senders: tuple[str, ...] = ()
    to: tuple[str, ...] = ()
    cc: tuple[str, ...] = ()
    after: int | None = None  # unix seconds, inclusive
    before: int | None = None  # unix seconds, exclusive
    labels: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    dispositions: tuple[str, ...] = ()
    # messages whose stored disposition may be stale (changed in raw.db after the pass that
    # wrote it): kept whatever their rows say, so raw.db alone decides them
    disposition_unsure: frozenset[int] = frozenset()
    thread: int | None = None
    include_ids: frozenset[int] | None = None
    exclude_ids: frozenset[int] = frozenset()

    @property
    def selective(self) -> bool:
        """Narrow enough that an ANN index could miss hits: search these exactly."""
        return self.thread is not None or self.include_ids is not None


@dataclass(frozen=True)
class VectorChunkHit:
    chunk_id: int
    message: int
    score: float  # cosine similarity: 1 is the same direction


def vectors_path(data_dir: Path) -> Path:
    return Path(paths.vectors_dir(data_dir))


def write_json(path: Path, data: object) -> None:
    """A small JSON file beside the vectors (state, cursor, last pass), replaced whole: a reader
    never sees half of it, and two writers (threads or processes) never share a temporary file."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _any(clauses: list[str]) -> str:
    return "(" + " OR ".join(clauses) + ")"


def where_sql(f: VectorFilters) -> str | None:
    """The filters as a LanceDB SQL predicate; every value is a quoted literal."""
    parts: list[str] = []
    if f.account is not None:
        parts.append(f"account = {_lit(f.account)}")
    for column, values in (("sender", f.senders), ("to_addrs", f.to), ("cc_addrs", f.cc)):
        if values:
            parts.append(_any([f"contains({column}, {_lit(v.lower())})" for v in values]))
    if f.after is not None:
        parts.append(f"date >= {int(f.after)}")
    if f.before is not None:
        parts.append(f"date < {int(f.before)}")
    for label in f.labels:
        parts.append(f"array_has(labels, {_lit(label.lower())})")
    if f.folders:
        parts.append(_any([f"array_has(folders, {_lit(x.lower())})" for x in f.folders]))
    if f.dispositions:
        held = f"disposition IN ({', '.join(_lit(d) for d in f.dispositions)})"
        parts.append(f"({held} OR message IN ({_ids(f.disposition_unsure)}))" if f.disposition_unsure else held)
    if f.thread is not None:
        parts.append(f"thread = {int(f.thread)}")
    if f.include_ids is not None:
        ids = sorted(f.include_ids)
        parts.append(f"message IN ({', '.join(map(str, ids))})" if ids else "false")
    if f.exclude_ids:
        parts.append(f"message NOT IN ({', '.join(map(str, sorted(f.exclude_ids)))})")
    return " AND ".join(parts) or None


def _schema(fp: Fingerprint, generation: str = "") -> Any:
    import pyarrow as pa

    return pa.schema([
        ("chunk_id", pa.int64()),
        ("message", pa.int64()),
        ("account", pa.string()),
        ("model", pa.string()),
        ("dim", pa.int32()),
        ("chunker", pa.string()),
        ("date", pa.int64()),
        ("sender", pa.string()),
        ("to_addrs", pa.string()),
        ("cc_addrs", pa.string()),
        ("labels", pa.list_(pa.string())),
        ("folders", pa.list_(pa.string())),
        ("disposition", pa.string()),
        ("thread", pa.int64()),
        ("vector", pa.list_(pa.float32(), fp.dim)),
    ], metadata={_META_KEY: fp.key().encode(), _GENERATION_KEY: generation.encode()})


_FIELD_COLUMNS = ("account", "date", "sender", "to_addrs", "cc_addrs", "labels", "folders", "disposition", "thread")


def _normal(f: MessageFields) -> MessageFields:
    """Strings that filters match case-insensitively are stored lower-cased."""
    return replace(f, sender=f.sender.lower(), to_addrs=f.to_addrs.lower(), cc_addrs=f.cc_addrs.lower(),
                   labels=tuple(sorted({x.lower() for x in f.labels})),
                   folders=tuple(sorted({x.lower() for x in f.folders})))


def _ids(values: Iterable[int]) -> str:
    return ", ".join(str(int(v)) for v in sorted(set(values)))


class VectorStore:
    """The `chunks` table of vectors/. Writers and readers may be separate processes."""

    def __init__(self, data_dir: Path, *, ann_min_rows: int = ANN_MIN_ROWS,
                 retention_seconds: float = RETENTION_SECONDS, maintain_every: int = MAINTAIN_EVERY,
                 create: bool = False):
        self.path = vectors_path(data_dir)
        if not self.path.is_dir() and not create:
            raise VectorUnavailable("no_vector_store", f"{self.path}: no vector store yet; "
                                                       "`oaken reindex` builds it")
        import lancedb

        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Interval 0: every query reads the newest version, so a long-lived reader (the daemon)
        # never holds on to a version that a cleanup may remove.
        self.db = lancedb.connect(str(self.path), read_consistency_interval=timedelta(0))
        self.ann_min_rows = ann_min_rows
        self.retention_seconds = retention_seconds
        self.maintain_every = maintain_every
        self._writes = 0
        self._state_written = 0.0
        self._table: Any = None

    # ---- the table and its fingerprint ------------------------------------------------------

    def table(self) -> Any:
        """The open table; VectorUnavailable("no_vector_store") when there is none."""
        if self._table is None:
            try:
                self._table = self.db.open_table(TABLE)
            except (FileNotFoundError, ValueError) as exc:
                raise VectorUnavailable("no_vector_store", f"{self.path}: holds no table {TABLE!r}; "
                                                           "`oaken reindex` builds it") from exc
        return self._table

    def exists(self) -> bool:
        try:
            self.table()
        except VectorUnavailable:
            return False
        return True

    def fingerprint(self) -> Fingerprint | None:
        meta = self.table().schema.metadata or {}
        key = meta.get(_META_KEY)
        return Fingerprint.from_key(key) if key else None

    def generation(self) -> str:
        """The index.db generation whose chunk ids the rows carry ("" when not recorded)."""
        return (self.table().schema.metadata or {}).get(_GENERATION_KEY, b"").decode()

    def check(self, expected: Fingerprint) -> None:
        """Raise VectorUnavailable("model_mismatch") unless the table was built by `expected`, and
        VectorUnavailable("no_vectors") while it is being rebuilt (it holds only part of the mail)."""
        found = self.fingerprint()
        if found != expected:
            what = found.describe() if found else "an unknown model"
            raise VectorUnavailable("model_mismatch", f"{self.path}: vectors of {what}, but the configuration "
                                                      f"wants {expected.describe()}; they are stale and not "
                                                      "searched until `oaken reindex` rebuilds them")
        self.check_whole()

    def check_whole(self) -> None:
        """Raise VectorUnavailable("no_vectors") while the table is being rebuilt (REBUILDING_FILE):
        it holds only part of the mail. Asked before a search and again after it, since a rebuild
        may begin in between."""
        marker = rebuilding(self.path.parent)
        if marker is not None:
            raise VectorUnavailable("no_vectors", f"{self.path}: being rebuilt ({marker.get('reason', 'stale')}); "
                                                  "not searched until every chunk is embedded again "
                                                  "(`oaken reindex`, or the daemon)")

    def ensure(self, fp: Fingerprint, *, rebuild: bool = False, generation: str | None = None,
               reason: str = "asked for") -> bool:
        """Make sure the table exists for `fp` (and, given, the index.db `generation` whose chunk
        ids its rows carry); a table of another fingerprint or generation, or with the columns of
        another Oaken version, or any table with `rebuild` (for `reason`), is dropped, and the new
        one marked as being rebuilt (REBUILDING_FILE). Returns True when a stale table was dropped."""
        dropped = False
        if self.exists():
            found = self.fingerprint()
            same = found == fp and self.table().schema.names == _schema(fp).names
            if not rebuild and same and (generation is None or self.generation() == generation):
                return False
            if rebuild:
                why = reason
            elif found != fp:
                why = "vectors of another model or chunker"
            elif not same:
                why = "made by another version of Oaken"
            else:
                why = "index.db was rebuilt"
            # said before the rows go, so no search takes the emptied table for a whole one
            mark_rebuilding(self.path.parent, why)
            self.db.drop_table(TABLE)
            self._table = None
            dropped = True
        self._table = self.db.create_table(TABLE, schema=_schema(fp, generation or ""))
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
        return int(self.table().count_rows())

    def chunk_messages(self) -> dict[int, int]:
        """chunk id -> message id of every stored row."""
        t = self.table().search().select(["chunk_id", "message"]).limit(None).to_arrow()
        return dict(zip(t.column("chunk_id").to_pylist(), t.column("message").to_pylist()))

    def rows_of(self, messages: Iterable[int], columns: Sequence[str] = ("chunk_id", "message")) -> list[dict]:
        ids = _ids(messages)
        if not ids:
            return []
        t = self.table().search().where(f"message IN ({ids})").select(list(columns)).limit(None).to_arrow()
        return t.to_pylist()

    # ---- writes -----------------------------------------------------------------------------

    def upsert(self, fields: Mapping[int, MessageFields], chunks: Sequence[ChunkVector]) -> None:
        """Make the stored chunks of the messages in `fields` exactly `chunks` (one version)."""
        if not fields:
            return
        table = self.table()
        fp = self.fingerprint()
        assert fp is not None
        data = self._arrow(fp, fields, chunks)
        (table.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all()
         .when_not_matched_by_source_delete(f"message IN ({_ids(fields)})").execute(data))
        self._wrote()

    def insert(self, fields: Mapping[int, MessageFields], chunks: Sequence[ChunkVector]) -> None:
        """Append the chunks of messages that have no stored row (one version): upsert's result
        for them, without its merge against the table (22k Enron chunks: 0.14 against 0.4 CPU s)."""
        if not chunks:
            return
        fp = self.fingerprint()
        assert fp is not None
        self.table().add(self._arrow(fp, fields, chunks))
        self._wrote()

    def delete_chunks(self, chunk_ids: Iterable[int]) -> int:
        return self._delete("chunk_id", chunk_ids)

    def delete_messages(self, messages: Iterable[int]) -> int:
        return self._delete("message", messages)

    def _delete(self, column: str, values: Iterable[int]) -> int:
        """Delete rows whose `column` is among `values` (one version); returns the rows removed."""
        ids = _ids(values)
        if not ids or not self.exists():
            return 0
        before = self.count()
        self.table().delete(f"{column} IN ({ids})")
        self._wrote()
        return before - self.count()

    def update_fields(self, fields: Sequence[MessageFields]) -> None:
        """New labels, folders, disposition... for rows already stored; vectors stay (one version)."""
        if not fields or not self.exists():
            return
        import pyarrow as pa

        by_message = {f.message: f for f in fields}
        rows = self.rows_of(by_message)
        if not rows:
            return
        fs = [_normal(by_message[r["message"]]) for r in rows]
        schema = self.table().schema
        cols = _FIELD_COLUMNS
        data = pa.table({"chunk_id": pa.array([r["chunk_id"] for r in rows], pa.int64()),
                         **{c: pa.array([getattr(f, c) for f in fs], schema.field(c).type) for c in cols}})
        self.table().merge_insert("chunk_id").when_matched_update_all().execute(data)
        self._wrote()

    def _arrow(self, fp: Fingerprint, fields: Mapping[int, MessageFields], chunks: Sequence[ChunkVector]) -> Any:
        import pyarrow as pa

        schema = _schema(fp)
        n = len(chunks)
        matrix = np.zeros((n, fp.dim), dtype=np.float32)
        for i, c in enumerate(chunks):
            matrix[i] = c.vector
        fs = [_normal(fields[c.message]) for c in chunks]
        cols: dict[str, Any] = {
            "chunk_id": [c.chunk_id for c in chunks], "message": [c.message for c in chunks],
            "model": [fp.model] * n, "dim": [fp.dim] * n, "chunker": [fp.chunker] * n,
        }
        for name in _FIELD_COLUMNS:
            cols[name] = [getattr(f, name) for f in fs]
        arrays = [pa.array(cols[f.name], f.type) for f in schema if f.name != "vector"]
        vector = pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel(), pa.float32()), fp.dim)
        return pa.Table.from_arrays([*arrays, vector], schema=schema)

    def _wrote(self) -> None:
        self._writes += 1
        if self._writes % self.maintain_every == 0:
            self.maintain(index=False)
        elif time.monotonic() - self._state_written > 1.0:
            self._write_state()

    def _write_state(self, *, backends: list[str] | None = None) -> None:
        """A small summary `oaken status` reads without importing LanceDB (at most once a second
        while writing, and after every maintenance); `backends` replaces the recorded list,
        which is otherwise kept."""
        self._state_written = time.monotonic()
        fp = self.fingerprint()
        state = {"fingerprint": json.loads(fp.key()) if fp else None, "rows": self.count(),
                 "written_at": time.time(), "backends": self.backends() if backends is None else backends}
        write_json(self.path / STATE_FILE, state)

    # ---- maintenance ------------------------------------------------------------------------

    def maintain(self, *, index: bool = True) -> dict[str, Any]:
        """Compact, clean up versions no reader can still hold, and build the ANN index once the
        table holds ann_min_rows (with `index`: building it takes seconds to minutes)."""
        table = self.table()
        out: dict[str, Any] = {"indexed": self.has_index()}
        if index and not out["indexed"] and self.count() >= self.ann_min_rows:
            from lancedb.index import IvfHnswSq

            table.create_index("vector", config=IvfHnswSq(distance_type="cosine", ef_construction=ANN_EF_CONSTRUCTION,
                                                          num_partitions=ann_partitions(self.count())))
            out["indexed"] = True
        table.optimize()  # compaction and index update; its own cleanup keeps a week of versions
        older = self._safe_older_than()
        if older is not None:
            table.optimize(cleanup_older_than=older)  # nothing left to compact: only the cleanup
        self._write_state()
        return out

    def _safe_older_than(self) -> timedelta | None:
        """The cleanup age that removes only versions superseded more than retention_seconds ago.

        LanceDB removes versions older than a cut-off *by their own timestamp*, and a version
        written an hour ago and superseded a moment ago may still be being read. With S the newest
        version whose successor is older than the retention (on LanceDB's clock, measured from
        the newest version L), an age of (L - S) + retention puts the cut-off at or before S while
        L is recent, and when L itself is older than the retention every superseded version is
        safe to remove anyway. Only differences of LanceDB's own timestamps are used."""
        versions = sorted(self.table().list_versions(), key=lambda v: v["version"])
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

    def has_index(self) -> bool:
        return any("vector" in (getattr(i, "columns", None) or [])
                   for i in self.table().list_indices())

    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())

    # ---- search -----------------------------------------------------------------------------

    def search(self, query_vector: np.ndarray, filters: VectorFilters = VectorFilters(),
               limit: int = 50) -> list[VectorChunkHit]:
        """Nearest chunks by cosine among those the filters allow (prefiltered), best first.

        Every score is the true cosine of the query and the stored float32 vector, whatever path
        LanceDB took: the ANN index reports another distance scale (about 2(1 - cos), the squared
        L2 of unit vectors) and ranks by scalar-quantized vectors, so its candidates, ANN_REFINE
        times as many as asked for (at most ANN_REFINE_MAX_EXTRA more), are re-scored exactly here
        and the best `limit` kept. Brute force and a bypassed index are re-scored the same way, so
        one threshold holds on every path."""
        q = np.asarray(query_vector, dtype=np.float32).ravel()
        norm = float(np.linalg.norm(q))
        if norm == 0.0 or not np.isfinite(norm):
            return []
        q = q / norm
        limit = max(1, int(limit))
        query = self.table().search(q, vector_column_name="vector").distance_type("cosine")
        where = where_sql(filters)
        if where:
            query = query.where(where, prefilter=True)
        fetch = limit
        if filters.selective:
            query = query.bypass_vector_index()
        else:
            fetch = limit + min(limit * (ANN_REFINE - 1), ANN_REFINE_MAX_EXTRA)
            query = query.ef(max(ANN_EF, 2 * fetch))
            if ANN_NPROBES is not None:
                query = query.nprobes(ANN_NPROBES)
        # _distance is not used (the cosine is computed below), but leaving it out makes lance warn on
        # every search; its Python builder has no way to turn that projection off
        t = query.select(["chunk_id", "message", "vector", "_distance"]).limit(fetch).to_arrow()
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


def open_for_search(data_dir: Path, expected: Fingerprint) -> VectorStore:
    """The store, checked: raises VectorUnavailable with no_vector_store, model_mismatch or
    no_vectors when it cannot answer."""
    store = VectorStore(data_dir)
    store.check(expected)
    if store.count() == 0:
        raise VectorUnavailable("no_vectors", f"{store.path}: no vectors yet; embedding runs behind keyword "
                                              "indexing (`oaken reindex` or the daemon)")
    return store


def read_state(data_dir: Path) -> dict[str, Any] | None:
    """The summary the last write left, or None when there is no store."""
    try:
        return json.loads((vectors_path(data_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def drop(data_dir: Path, *, rebuilding: str | None = None) -> None:
    """Remove vectors/ (derived data: `oaken reindex` rebuilds it; the embed cache makes that quick).
    With `rebuilding` (why), the new vectors/ is marked as being rebuilt until the embedding pass
    has embedded every chunk (see REBUILDING_FILE)."""
    shutil.rmtree(vectors_path(data_dir), ignore_errors=True)
    if rebuilding is not None:
        mark_rebuilding(data_dir, rebuilding)


def mark_rebuilding(data_dir: Path, reason: str) -> None:
    folder = vectors_path(data_dir)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not (folder / REBUILDING_FILE).exists():
        write_json(folder / REBUILDING_FILE, {"reason": reason, "since": time.time()})


def rebuilding(data_dir: Path) -> dict[str, Any] | None:
    """Why vectors/ is being rebuilt, or None when it is not (see REBUILDING_FILE)."""
    try:
        found = json.loads((vectors_path(data_dir) / REBUILDING_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"reason": "unknown"}
    return found if isinstance(found, dict) else {"reason": "unknown"}


def rebuilt(data_dir: Path) -> None:
    """The table holds every chunk again: searches may use it."""
    try:
        (vectors_path(data_dir) / REBUILDING_FILE).unlink()
    except FileNotFoundError:
        pass
