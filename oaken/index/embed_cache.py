"""The embedding cache: vectors by (model fingerprint, hash of the text), in embed_cache.db.

Embedding is the slow part of indexing; a rebuild of vectors/, a re-sync that brings the same
message back, or the same paragraph in a thousand petition letters must not pay for it again.
The cache is derived data like the indexes: deleting it costs time, never mail.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable, Iterable, Sequence

import apsw
import numpy as np

CACHE_FILE = "embed_cache.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors(
    model TEXT NOT NULL,
    hash BLOB NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY(model, hash)
) WITHOUT ROWID;
"""


def text_hash(text: str) -> bytes:
    """16 bytes of BLAKE2b: collisions are out of reach for a mailbox's worth of texts."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class EmbedCache:
    """One SQLite file; safe to share between the daemon and `oaken reindex` (WAL, busy wait)."""

    def __init__(self, path: Path, *, busy_ms: int = 30_000):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = apsw.Connection(str(self.path))
        self.db.set_busy_timeout(busy_ms)
        self.db.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
        self.db.execute(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "EmbedCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_many(self, model: str, hashes: Sequence[bytes], dim: int) -> dict[bytes, np.ndarray]:
        """The cached vectors among `hashes`; a stored vector of another length is ignored."""
        out: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for i in range(0, len(unique), 500):
            part = unique[i:i + 500]
            marks = ",".join("?" * len(part))
            for h, blob in self.db.execute(
                    f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN ({marks})", [model, *part]):
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape[0] == dim:
                    out[bytes(h)] = vector
        return out

    def put_many(self, model: str, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        rows = [(model, h, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for h, v in items]
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)

    def count(self, model: str | None = None) -> int:
        if model is None:
            return self.db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        return self.db.execute("SELECT count(*) FROM vectors WHERE model = ?", (model,)).fetchone()[0]

    def drop_other_models(self, keep: str) -> int:
        """Forget the vectors of every model but `keep` (after a model change has settled)."""
        with self.db:
            self.db.execute("DELETE FROM vectors WHERE model != ?", (keep,))
            return self.db.changes()


def open_cache(data_dir: Path) -> EmbedCache:
    return EmbedCache(Path(data_dir) / CACHE_FILE)


def embed_cached(texts: Sequence[str], *, model: str, dim: int, cache: EmbedCache,
                 encode: Callable[[Sequence[str]], np.ndarray]) -> tuple[np.ndarray, int]:
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
            raise ValueError(f"embedder {model}: returned shape {fresh.shape} for {len(todo)} texts, "
                             f"expected ({len(todo)}, {dim})")
        new = dict(zip(todo, fresh))
        cache.put_many(model, new.items())
        found.update(new)
    out = np.empty((len(texts), dim), dtype=np.float32)
    for i, h in enumerate(hashes):
        out[i] = found[h]
    return out, len(todo)
