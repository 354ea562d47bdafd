"""Reads a folder's FETCH batches ahead of the thread that stores them.

A thread of its own takes batch n+1 off the socket (and hands its bodies to the header worker)
while the caller stores batch n: TLS reads and SQLite both release the GIL, so the network and
the database overlap instead of taking turns. The caller still does every write, crash point and
callback in its own thread, in order; this thread only ever touches the connection, and gives it
back (nothing left in flight) when `close` returns.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Callable, Sequence

from oaken.sync.imap import Connection

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

Fetched = dict[int, dict]
ReadAll = Callable[[list[bytes]], list]


class BatchFetcher:
    """`next()` returns each batch's (uid -> items, future of its headers) in order, or raises
    what reading it raised (a lost connection, a refused FETCH)."""

    def __init__(
        self, conn: Connection, batches: Sequence[Sequence[int]], items: bytes, pool: Executor | None, read_all: ReadAll
    ):
        self.conn = conn
        self.batches = batches
        self.items = items
        self.pool = pool
        self.read_all = read_all
        self._ready: queue.Queue = queue.Queue(maxsize=1)  # one batch read ahead, one on its way
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="oaken-fetch", daemon=True)
        self._thread.start()

    def next(self) -> tuple[Fetched, Future | None]:
        got = self._ready.get()
        if isinstance(got, BaseException):
            raise got
        return got

    def close(self) -> None:
        """Stop reading ahead, drain the answer already on its way, and wait for the thread."""
        self._stopping.set()
        while self._thread.is_alive():
            try:
                self._ready.get(timeout=0.05)
            except queue.Empty:
                pass
        self._thread.join()

    def _run(self) -> None:
        conn, items = self.conn, self.items
        try:
            pending = conn.fetch_start(self.batches[0], items)
            for n in range(len(self.batches)):
                fetched = conn.fetch_finish(pending)
                more = n + 1 < len(self.batches) and not self._stopping.is_set()
                # the server prepares the next batch while this one is parsed and stored
                pending = conn.fetch_start(self.batches[n + 1], items) if more else (b"", b"")
                self._ready.put((fetched, self._submit(fetched)))
                if self._stopping.is_set():
                    conn.fetch_finish(pending)  # drain the answer already on its way
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the storing thread, which raises it
            self._ready.put(e)

    def _submit(self, fetched: Fetched) -> Future | None:
        """The batch's headers, read by the worker process; None (read by the caller) without one."""
        if self.pool is None:
            return None
        bodies = [body for u in sorted(fetched) if (body := body_of(fetched[u])) is not None]
        try:
            return self.pool.submit(self.read_all, bodies)
        except RuntimeError:  # a broken or shut down pool costs speed, never mail
            self.pool = None
            return None


def body_of(item: dict) -> bytes | None:
    """A FETCH item's message bytes; None when there is no message to store: no BODY[] at all, or
    the empty body a server may send for a message another client expunged between our SEARCH and
    FETCH (RFC 2180 4.1.3; pymap does, with RFC822.SIZE 0). Storing that would add an empty,
    headerless message until the next sync removed it; no real message is zero bytes."""
    raw = item.get(b"BODY[]")
    if raw is None:
        return None
    raw = bytes(raw)
    return raw or None
