"""index.db as a whole: what it holds (for `oaken status`) and deleting it (for a rebuild)."""

from __future__ import annotations

import os
from pathlib import Path

import apsw

from oaken.errors import IndexUnavailable
from oaken.index.keyword.reader import KeywordIndex
from oaken.index.keyword.schema import classify, index_path


def status(data_dir: Path) -> dict:
    """What index.db holds, for `oaken status`: never raises."""
    path = index_path(data_dir)
    if not path.exists():
        return {"state": "missing", "messages": 0, "chunks": 0, "seq": 0, "path": str(path)}
    try:
        idx = KeywordIndex(data_dir)
    except IndexUnavailable as e:
        return {"state": getattr(e, "state", "corrupt"), "messages": 0, "chunks": 0, "seq": 0, "path": str(path),
                "problem": str(e)}
    try:
        check = idx.db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            return {"state": "corrupt", "messages": 0, "chunks": 0, "seq": 0, "path": str(path), "problem": check}
        messages, chunks = idx.counts()
        return {"state": "ok", "messages": messages, "chunks": chunks, "seq": idx.seq(), "path": str(path),
                "bytes": path.stat().st_size + _size(str(path) + "-wal")}
    except (IndexUnavailable, apsw.Error) as e:
        state = getattr(e, "state", None) or (classify(e) if isinstance(e, apsw.Error) else "corrupt")
        return {"state": state, "messages": 0, "chunks": 0, "seq": 0, "path": str(path), "problem": str(e)}
    finally:
        idx.close()


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def drop(data_dir: Path) -> None:
    """Delete index.db and its WAL files (rebuild)."""
    path = index_path(data_dir)
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(str(path) + suffix)
        except FileNotFoundError:
            pass
