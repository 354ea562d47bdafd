"""Read connections to index.db kept open between searches in a long-lived process.

A search opens index.db two to four times (the keyword list, the near-duplicate fold, the page's
snippets, the second half of a split ranking), and a new connection's first statements read
through its own empty page cache: at a million messages a one-word lookup took 1.2-2.6 ms more on
a new connection than on one that had served before (docs/scale.md). The search server and the
daemon live for days, so the connections a search is done with wait here for the next one.

Kept by the file they opened, not by the `index.db` link: a rebuild publishes another file, whose
readers open it anew, and a connection to a file that is gone is closed at the next take, so the
old file's disk space is not held. A forked child starts with an empty pool and never touches its
parent's connections (SQLite connections must not cross a fork; they are not closed there
either). The pool holds no connection in use: a connection that failed is closed, not given back.
"""

from __future__ import annotations

import os
import threading

import apsw

MAX_IDLE = 4  # per file: the search server's workers, and the split ranking's second connection


def _identity(real: str) -> tuple[int, int, int, int] | None:
    """The file as it is now (device, inode, size, modification time), None when it is gone."""
    try:
        st = os.stat(real)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (file, busy timeout) -> [(connection, the file's identity when it was given back)]
        self._idle: dict[tuple[str, int], list[tuple[apsw.Connection, tuple[int, int, int, int]]]] = {}
        self._inherited: list[object] = []  # a parent's connections, after a fork: never used or closed

    def take(self, real: str, busy_ms: int) -> apsw.Connection | None:
        """An idle connection to the file `real` (a resolved path) that has not changed since the
        connection was given back, or None. A connection to a file written since is closed: its
        page cache may hold what something outside SQLite wrote over (a damaged disk, a test), and
        SQLite's writes reach the file only at a checkpoint, after which the writer closed the idle
        ones anyway (KeywordWriter.close). Connections to files that are gone (a rebuild's
        predecessor) are closed on the way."""
        gone: list[apsw.Connection] = []
        now = _identity(real)
        db = None
        with self._lock:
            for key in [k for k in self._idle if k[0] != real and not os.path.exists(k[0])]:
                gone.extend(c for c, _ in self._idle.pop(key))
            idle = self._idle.get((real, busy_ms), [])
            while idle and db is None:
                conn, then = idle.pop()
                if then == now:
                    db = conn
                else:
                    gone.append(conn)
        for old in gone:
            _close(old)
        return db

    def give(self, real: str, busy_ms: int, db: apsw.Connection) -> None:
        """Keep `db` for the next search, unless MAX_IDLE already wait for that file or the file is
        gone (replaced by a rebuild while the search ran: closing the last reader of an unlinked
        file removes its -wal and -shm)."""
        now = _identity(real)
        if now is not None:
            with self._lock:
                idle = self._idle.setdefault((real, busy_ms), [])
                if len(idle) < MAX_IDLE:
                    idle.append((db, now))
                    return
        _close(db)

    def clear(self) -> None:
        """Close every idle connection (tests; a process about to remove its data directory)."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for dbs in idle.values():
            for db, _ in dbs:
                _close(db)

    def _forget_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._inherited.append(self._idle)  # kept referenced: their finalizers would close them
        self._idle = {}


def _close(db: apsw.Connection) -> None:
    try:
        db.close()
    except apsw.Error:
        pass


POOL = Pool()
os.register_at_fork(after_in_child=POOL._forget_after_fork)
