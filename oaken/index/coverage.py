"""How far the vectors have caught up with index.db: for `oaken status` and every search response.

Cheap on purpose: it reads the summary the vector store leaves on each write (vectors/state.json)
and counts body chunks in index.db, so `oaken status` never imports LanceDB or the model.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from oaken import config as config_mod
from oaken.config import Config
from oaken.index.vector_files import read_state, vectors_path


def body_chunks(data_dir: Path) -> int | None:
    """Body chunks in index.db (the ones that are embedded), or None when it cannot be read."""
    from oaken.errors import IndexUnavailable
    from oaken.index.keyword import KeywordIndex, index_path

    if not index_path(data_dir).exists():
        return None
    try:
        with KeywordIndex(data_dir) as index:
            return index.body_chunk_count()
    except IndexUnavailable:
        return None


def _current(config: Config, fingerprint: dict[str, Any]) -> bool:
    """Whether stored vectors belong to the configured model and the running chunker."""
    from oaken.index.vector_files import chunker_version

    model = str(fingerprint.get("model", ""))
    return model.split(":")[0] == config.embedder.model and str(fingerprint.get("chunker")) == chunker_version()


def share(rows: int, chunks: int | None) -> float:
    if not chunks:
        return 1.0 if chunks == 0 else 0.0
    return round(min(1.0, rows / chunks), 4)


def status(config: Config, *, with_bytes: bool = True) -> dict[str, Any]:
    """{"coverage": share of body chunks embedded, "state", "model", "rows", "chunks", "path",
    "bytes"}.

    state: "off" ([embedder] model = "none"), "missing" (no vectors/ yet), "stale" (vectors of
    another model or chunker: not searched until rebuilt), "building" (coverage below 1),
    "ready"."""
    data_dir = config_mod.resolve_data_dir(config)
    path = vectors_path(data_dir)
    out: dict[str, Any] = {"model": config.embedder.model, "path": str(path)}
    if config.embedder.model == "none":
        return {**out, "coverage": 0.0, "state": "off", "rows": 0, "chunks": body_chunks(data_dir)}
    state = read_state(data_dir)
    chunks = body_chunks(data_dir)
    if state is None or not state.get("fingerprint"):
        return {**out, "coverage": 0.0, "state": "missing", "rows": 0, "chunks": chunks}
    rows = int(state.get("rows", 0))
    fingerprint = state["fingerprint"]
    out.update(rows=rows, chunks=chunks, fingerprint=fingerprint)
    if with_bytes:
        out["bytes"] = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    if not _current(config, fingerprint):
        return {**out, "coverage": 0.0, "state": "stale"}
    coverage = share(rows, chunks)
    return {**out, "coverage": coverage, "state": "ready" if coverage >= 1.0 else "building"}


_RECENT: dict[str, tuple[float, float]] = {}  # data dir -> (when, coverage)


def vector_coverage(config: Config, *, max_age: float = 5.0) -> float | None:
    """The share of body chunks embedded, for each search response; None when the vector side is
    off. Counting index.db's chunks costs milliseconds at 100k, so a warm process (the daemon)
    reuses a figure up to `max_age` seconds old."""
    if config.embedder.model == "none":
        return None
    key = str(config_mod.resolve_data_dir(config))
    now = time.monotonic()
    cached = _RECENT.get(key)
    if cached is not None and now - cached[0] <= max_age:
        return cached[1]
    value = float(status(config, with_bytes=False)["coverage"])
    _RECENT[key] = (now, value)
    return value
