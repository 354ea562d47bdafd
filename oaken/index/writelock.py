"""One writer at a time for index.db and vectors/: an exclusive flock on DATA_DIR/index.lock.

Every writer of the derived indexes takes it: the keyword pass, the embedding pass, `oaken
reindex` (for the whole run) and so the daemon's indexing, which runs those passes. A second
writer waits for the first and says so on stderr: two embedding passes at once would both find
the same chunks missing and store each of them twice, and two keyword rebuilds would each build
an index.db. Readers (search, status) never take it.

The kernel releases the lock when its holder dies (kill -9 included), so it is never stale. It
is reentrant within a process: `reindex` holds it around the passes, which take it again; other
threads of the process wait for the thread that holds it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from oaken import log

LOCK_NAME = "index.lock"


class _Held:
    def __init__(self) -> None:
        self.thread_lock = threading.RLock()
        self.depth = 0
        self.fd: int | None = None


_HELD: dict[str, _Held] = {}
_GUARD = threading.Lock()


def lock_path(data_dir: Path) -> Path:
    return Path(data_dir) / LOCK_NAME


@contextmanager
def held(data_dir: Path, purpose: str) -> Iterator[None]:
    """`with held(data_dir, "keyword pass"):` this process is the only writer of the indexes.
    `purpose` is what a waiting writer is told the holder is doing."""
    key = os.path.realpath(data_dir)
    with _GUARD:
        state = _HELD.setdefault(key, _Held())
    if not state.thread_lock.acquire(blocking=False):
        log.get("oaken.index").warning(
            "index.waiting_for_writer", data_dir=key, holder="another thread of this process"
        )
        state.thread_lock.acquire()
    try:
        if state.depth == 0:
            state.fd = _take(lock_path(Path(key)), purpose)
        state.depth += 1
        try:
            yield
        finally:
            state.depth -= 1
            if state.depth == 0 and state.fd is not None:
                fd, state.fd = state.fd, None
                # LOCK_UN before close: a worker forked meanwhile shares the open file, and would
                # otherwise keep the lock until it exits
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
    finally:
        state.thread_lock.release()


def _take(path: Path, purpose: str) -> int:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            log.get("oaken.index").warning(
                "index.waiting_for_writer",
                lock=str(path),
                holder=holder,
                note="another process is writing index.db or vectors/; this one goes on when it is done",
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:  # who holds it, for the next writer's message: on a full disk, left unsaid
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}: {purpose}\n".encode(), 0)
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
    except BaseException:
        os.close(fd)
        raise
    return fd
