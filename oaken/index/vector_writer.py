"""The embedding pass's writes to vectors/, on a thread of their own."""

from __future__ import annotations

import queue
import threading
from typing import Callable

from oaken.index.vectors import ChunkVector, MessageFields, VectorStore


class WindowWriter:
    """Stores windows in a thread of its own, so Lance writes overlap with encoding; a failure
    is raised in the caller's thread by the next `put` or by `close`."""

    def __init__(self, store: VectorStore, progress: Callable[[int], None] | None):
        self.store = store
        self.progress = progress
        self.queue: queue.Queue[tuple[dict[int, MessageFields], list[ChunkVector], bool] | None] = queue.Queue(2)
        self.error: BaseException | None = None
        self.written = 0
        self.thread = threading.Thread(target=self._run, name="oaken-vector-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            if self.error is not None:
                continue
            try:
                fields, chunks, fresh = item
                if fresh:  # no stored row of these messages: an append, a third of a merge's cost
                    self.store.insert(fields, chunks)
                else:
                    self.store.upsert(fields, chunks)
                self.written += len(chunks)
                if self.progress:
                    self.progress(len(chunks))
            except BaseException as exc:  # re-raised in the caller's thread by close()
                self.error = exc

    def put(self, fields: dict[int, MessageFields], chunks: list[ChunkVector], *, fresh: bool = False) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put((fields, chunks, fresh))

    def close(self) -> int:
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.written
