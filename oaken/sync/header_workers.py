"""The header worker of a sync pass: one forked process that reads each batch's headers (the
costliest part of storing mail) while the pass stores the previous batch. Shared by the pass's
folders, forked on the first download of more than one batch, shut down at the end of the pass;
where processes cannot be made, batches are read in the storing thread instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a download needs them: a sync with nothing new must start fast
    from concurrent.futures import Executor


class HeaderReaders:
    """The header worker process of one pass (see the module docstring)."""

    def __init__(self) -> None:
        self.pool: Executor | None = None
        self._tried = False

    def get(self) -> Executor | None:
        if self.pool is None and not self._tried:
            self._tried = True  # None for good where processes cannot be made
            self.pool = _reader_pool()
        return self.pool

    def discard(self) -> None:
        """Kill a worker that failed or never answered; the next `get` forks a new one."""
        if self.pool is not None:
            _close_pool(self.pool, kill=True)
        self.pool = None
        self._tried = False

    def close(self) -> None:
        if self.pool is not None:
            _close_pool(self.pool, kill=False)
        self.pool = None


def _reader_pool() -> Executor | None:
    """One worker process for header reading; None where processes cannot be made."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from oaken import envelope, processes

    envelope.load_all()  # the child imports nothing and opens no library: see envelope.load_all, processes.libc
    try:
        pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("fork"),
            initializer=processes.die_with_parent,
            initargs=(processes.libc(),),
        )
        # forked now, from this thread: PR_SET_PDEATHSIG follows the thread that forked, and the
        # thread that reads the batches (oaken.sync.fetcher) ends before the sync does
        pool.submit(int)
        return pool
    except (OSError, ValueError):
        return None


def _close_pool(pool: Executor, *, kill: bool) -> None:
    """Shut the worker down; a stuck one (it never answered) is killed rather than waited for."""
    processes = list((getattr(pool, "_processes", None) or {}).values()) if kill else []
    pool.shutdown(wait=not kill, cancel_futures=True)
    for process in processes:
        process.kill()
