"""A full disk said as a full disk, whichever layer meets it.

SQLite says SQLITE_FULL when a write finds no room, but a reader on a full disk fails too (it
cannot grow the -shm file WAL mode maps: SQLITE_IOERR_SHMSIZE), and LanceDB reports ENOSPC as a
RuntimeError whose text holds "os error 28". Called "damaged" or "disk I/O error", a full disk
sends a user to restore a backup or delete an index that is sound; said as what it is, the fix is
plain: free some space and run the command again.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

# an I/O error from SQLite while the disk holding the file has less than this free is the disk
# being full (SQLite's own I/O error does not say why; ENOSPC is the common cause)
LOW_SPACE = 4 * 1024 * 1024

_ENOSPC_TEXT = ("no space left on device", "os error 28", "disk is full", "database or disk is full")


def free_bytes(path: Path) -> int | None:
    """Free space on the file system holding `path` (its nearest existing parent); None if unknown."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def is_full(exc: BaseException, path: Path | None = None) -> bool:
    """True when `exc` is a write (or a reader's -shm) failing for want of space on `path`'s disk."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    try:
        import apsw
    except ImportError:  # pragma: no cover - apsw is a core dependency
        pass
    else:
        if isinstance(exc, apsw.FullError):
            return True
        if isinstance(exc, apsw.IOError):
            free = free_bytes(path) if path is not None else None
            return free is not None and free < LOW_SPACE
    text = str(exc).lower()
    return any(t in text for t in _ENOSPC_TEXT)


def full_message(path: Path, *, fix: str) -> str:
    """'<path>: the disk is full (N MB free on DIR); <fix>' (fix: what to run once space is freed)."""
    folder = Path(path).parent
    free = free_bytes(folder)
    space = f"{free / 1e6:.1f} MB free" if free is not None else "free space unknown"
    return f"{path}: the disk is full ({space} on {folder}); free some space, then {fix}"
