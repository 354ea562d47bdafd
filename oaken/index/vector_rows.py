"""What a row of vectors/ holds and how a search picks rows: the fingerprint that makes vectors
comparable, the message fields a vector search prefilters on, the Arrow schema of the `chunks`
table (oaken.index.vectors) and the filters as a LanceDB SQL predicate."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    from oaken.store import MessageMeta

META_KEY = b"oaken.fingerprint"
# the index.db whose chunk ids the rows carry (KeywordIndex.generation): a rebuilt index.db numbers
# its chunks again, so rows of another generation would stand for other chunks' text
GENERATION_KEY = b"oaken.index_generation"


@dataclass(frozen=True)
class Fingerprint:
    """What makes two vectors comparable: the embedder's fingerprint, the dimension, the chunker."""

    model: str
    dim: int
    chunker: str

    def key(self) -> str:
        return json.dumps({"model": self.model, "dim": self.dim, "chunker": self.chunker}, sort_keys=True)

    @classmethod
    def from_key(cls, key: str | bytes) -> Fingerprint:
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
    def from_meta(cls, m: MessageMeta) -> MessageFields:
        return cls(
            message=m.id,
            account=m.account,
            date=m.date,
            sender=f"{m.sender_name} <{m.sender_addr}>",
            to_addrs="\n".join(m.to),
            cc_addrs="\n".join(m.cc),
            labels=m.labels,
            folders=m.folders,
            disposition=m.triage.disposition,
            thread=m.thread,
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

    @property
    def broad(self) -> bool:
        """Only what every search names (the account, the dispositions searched by default, ids to
        leave out): most rows usually pass, so the nearest rows are found first and the filter
        applied to them (VectorStore.search)."""
        return not (
            self.senders
            or self.to
            or self.cc
            or self.after is not None
            or self.before is not None
            or self.labels
            or self.folders
            or self.selective
        )


@dataclass(frozen=True)
class VectorChunkHit:
    chunk_id: int
    message: int
    score: float  # cosine similarity: 1 is the same direction


def ids_sql(values: Iterable[int]) -> str:
    """Message or chunk ids as the list of an SQL `IN (...)`."""
    return ", ".join(str(int(v)) for v in sorted(set(values)))


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
        parts.append(f"({held} OR message IN ({ids_sql(f.disposition_unsure)}))" if f.disposition_unsure else held)
    if f.thread is not None:
        parts.append(f"thread = {int(f.thread)}")
    if f.include_ids is not None:
        ids = sorted(f.include_ids)
        parts.append(f"message IN ({', '.join(map(str, ids))})" if ids else "false")
    if f.exclude_ids:
        parts.append(f"message NOT IN ({', '.join(map(str, sorted(f.exclude_ids)))})")
    return " AND ".join(parts) or None


def schema_of(fp: Fingerprint, generation: str = "") -> Any:
    import pyarrow as pa

    return pa.schema(
        [
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
        ],
        metadata={META_KEY: fp.key().encode(), GENERATION_KEY: generation.encode()},
    )


FIELD_COLUMNS = ("account", "date", "sender", "to_addrs", "cc_addrs", "labels", "folders", "disposition", "thread")


def normal(f: MessageFields) -> MessageFields:
    """Strings that filters match case-insensitively are stored lower-cased."""
    return replace(
        f,
        sender=f.sender.lower(),
        to_addrs=f.to_addrs.lower(),
        cc_addrs=f.cc_addrs.lower(),
        labels=tuple(sorted({x.lower() for x in f.labels})),
        folders=tuple(sorted({x.lower() for x in f.folders})),
    )


def arrow_table(fp: Fingerprint, fields: Mapping[int, MessageFields], chunks: Sequence[ChunkVector]) -> Any:
    """The rows of `chunks` as an Arrow table of the schema of `fp`, their messages' fields beside them."""
    import pyarrow as pa

    schema = schema_of(fp)
    n = len(chunks)
    matrix = np.zeros((n, fp.dim), dtype=np.float32)
    for i, c in enumerate(chunks):
        matrix[i] = c.vector
    fs = [normal(fields[c.message]) for c in chunks]
    cols: dict[str, Any] = {
        "chunk_id": [c.chunk_id for c in chunks],
        "message": [c.message for c in chunks],
        "model": [fp.model] * n,
        "dim": [fp.dim] * n,
        "chunker": [fp.chunker] * n,
    }
    for name in FIELD_COLUMNS:
        cols[name] = [getattr(f, name) for f in fs]
    arrays = [pa.array(cols[f.name], f.type) for f in schema if f.name != "vector"]
    vector = pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel(), pa.float32()), fp.dim)
    return pa.Table.from_arrays([*arrays, vector], schema=schema)


def stored_fields(rows: Any) -> dict[int, MessageFields]:
    """Each message's fields in `rows` (an Arrow table holding the message and field columns), as
    its first row holds them: a message's rows all carry its fields."""
    _, first = np.unique(rows.column("message").to_numpy(), return_index=True)
    out: dict[int, MessageFields] = {}
    for r in rows.take(first).select(["message", *FIELD_COLUMNS]).to_pylist():
        r["labels"], r["folders"] = tuple(r["labels"]), tuple(r["folders"])
        out[r["message"]] = MessageFields(**r)
    return out
