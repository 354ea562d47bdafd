"""The embedding cache: vectors by (model fingerprint, hash of the text), in embed_cache.db.

Embedding is the slow part of indexing; a rebuild of vectors/, a re-sync that brings the same
message back, or the same paragraph in a thousand petition letters must not pay for it again.
The cache is derived data like the indexes: deleting it costs time, never mail.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Iterable, Sequence

import apsw
import numpy as np

from oaken.sqlite_rows import one_value

CACHE_FILE = "embed_cache.db"

# Vectors in rowid order, found through a small unique index: a 1.5 KB vector inside a WITHOUT
# ROWID primary key (the first schema) made inserts 4x dearer and the file 2.4x larger (19,721
# Enron vectors: 0.62 against 0.15 CPU s, 93 against 39 MB).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS cached(
    id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    hash BLOB NOT NULL,
    vector BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS cached_key ON cached(model, hash);
"""
SCHEMA_VERSION = 1


def text_hash(text: str) -> bytes:
    """16 bytes of BLAKE2b: collisions are out of reach for a mailbox's worth of texts."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class EmbedCache:
    """One SQLite file; safe to share between the daemon and `oaken reindex` (WAL, busy wait)."""

    def __init__(self, path: Path, *, busy_ms: int = 30_000):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():  # private from its first byte, as raw.db and index.db are
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        self.db = apsw.Connection(str(self.path))
        self.db.set_busy_timeout(busy_ms)
        self.db.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
        with self.db:
            self.db.execute(_SCHEMA)
            if one_value(self.db, "PRAGMA user_version") < SCHEMA_VERSION:
                old = self.db.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'vectors' AND type = 'table'"
                ).fetchone()
                if old:  # the first schema's rows move over once: no vector is computed twice
                    self.db.execute(
                        "INSERT OR IGNORE INTO cached(model, hash, vector) SELECT model, hash, vector FROM vectors"
                    )
                    self.db.execute("DROP TABLE vectors")
                self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> EmbedCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_many(self, model: str, hashes: Sequence[bytes], dim: int) -> dict[bytes, np.ndarray]:
        """The cached vectors among `hashes`; a stored vector of another length is ignored."""
        out: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for i in range(0, len(unique), 500):
            part = unique[i : i + 500]
            marks = ",".join("?" * len(part))
            for h, blob in self.db.execute(
                f"SELECT hash, vector FROM cached WHERE model = ? AND hash IN ({marks})", [model, *part]
            ):
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape[0] == dim:
                    out[bytes(h)] = vector
        return out

    def put_many(self, model: str, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        rows = [(model, h, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for h, v in items]
        try:
            with self.db:
                self.db.executemany("INSERT OR REPLACE INTO cached(model, hash, vector) VALUES (?, ?, ?)", rows)
        except apsw.SQLError as e:
            # on a full disk SQLite rolls back itself, and the rollback on the way out then fails
            # ("cannot rollback - no transaction is active"), hiding the cause: raise the cause
            cause = e.__context__
            if isinstance(cause, apsw.Error) and not self.db.in_transaction:
                raise cause from None
            raise

    def count(self, model: str | None = None) -> int:
        if model is None:
            return one_value(self.db, "SELECT count(*) FROM cached")
        return one_value(self.db, "SELECT count(*) FROM cached WHERE model = ?", (model,))

    def drop_other_models(self, keep: str) -> int:
        """Forget the vectors of every model but `keep` (after a model change has settled)."""
        with self.db:
            self.db.execute("DELETE FROM cached WHERE model != ?", (keep,))
            dropped = self.db.changes()
        return dropped


def open_cache(data_dir: Path) -> EmbedCache:
    return EmbedCache(Path(data_dir) / CACHE_FILE)


def embed_cached(
    texts: Sequence[str], *, model: str, dim: int, cache: EmbedCache, encode: Callable[[Sequence[str]], np.ndarray]
) -> tuple[np.ndarray, int]:
    """Vectors for `texts` in order, encoding only texts neither cached nor repeated in `texts`.

    Returns (vectors of shape (len(texts), dim), how many texts were encoded)."""
    hashes = [text_hash(t) for t in texts]
    found = cache.get_many(model, hashes, dim)
    todo: dict[bytes, str] = {}
    for h, t in zip(hashes, texts):
        if h not in found and h not in todo:
            todo[h] = t
    if todo:
        fresh = encode(list(todo.values()))
        if fresh.shape != (len(todo), dim):
            raise ValueError(
                f"embedder {model}: returned shape {fresh.shape} for {len(todo)} texts, expected ({len(todo)}, {dim})"
            )
        new = dict(zip(todo, fresh))
        cache.put_many(model, new.items())
        found.update(new)
    out = np.empty((len(texts), dim), dtype=np.float32)
    for i, h in enumerate(hashes):
        out[i] = found[h]
    return out, len(todo)
