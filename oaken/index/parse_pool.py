"""Parsing and chunking for the keyword pass, on every core: this process and one worker process.
What comes back for a message is its attachment names and types, its parse problem, its chunks and
the attachments it could not read."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Callable

from oaken import chunking, mail, processes
from oaken.config import IndexConfig

# what a worker process sends back for one message: attachment names, types, problem, chunks, and
# the attachments whose words could not be read
Parts = tuple[tuple[str, ...], tuple[str, ...], "str | None", list[tuple[str, int, str]], tuple[str, ...]]
Job = tuple[str, bytes, IndexConfig]  # subject, raw bytes, settings


def parse_parts(job: Job) -> Parts:
    """Parse and chunk one message (in a worker process or here); never raises."""
    subject, raw, index_cfg = job
    parsed = mail.parse(raw, attachments=index_cfg.attachment_text)
    try:
        chunks = chunking.chunk(parsed, index_cfg, subject=subject)
    except (Exception, RecursionError) as e:  # noqa: BLE001 - never stop indexing: keep the headers
        parsed = mail.ParsedMessage(
            raw_headers=parsed.raw_headers,
            body="",
            quoted="",
            signature="",
            from_html=False,
            problem=f"chunking failed: {type(e).__name__}: {e}"[:300],
        )
        chunks = chunking.chunk(parsed, index_cfg, subject=subject)
    atts = parsed.attachments
    return (
        tuple(a.name for a in atts if a.name),
        tuple(dict.fromkeys(a.content_type for a in atts)),
        parsed.problem,
        [(c.kind, c.tokens, c.text) for c in chunks],
        parsed.attachment_warnings,
    )


class ParsePool:
    """Parses messages on every core: one worker process beside this one.

    One worker and not two: the benchmark sums the memory of all processes, and this process
    parses its share of each batch while the worker parses the rest of it and then the next
    batch's share, so the worker keeps busy while this process writes index.db."""

    MIN_BATCH = 64  # below this a worker's round trip costs more than it saves
    MINE = 0.35  # this process's share: it also reads raw.db and writes index.db (balanced on Enron)

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor | None:
        if self._pool is None and (os.cpu_count() or 1) > 1:
            try:
                method = processes.start_method()
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context(method),
                    initializer=processes.die_with_parent,
                    initargs=(processes.libc() if method == "fork" else None,),
                )
            except (OSError, ValueError):
                return None
        return self._pool

    def start(self, jobs: list[Job]) -> Callable[[], list[Parts]]:
        """Hand the worker its share now; the returned call parses the rest here and collects."""
        pool = self._get_pool() if len(jobs) >= self.MIN_BATCH else None
        if pool is None:
            return lambda: [parse_parts(j) for j in jobs]
        cut = int(len(jobs) * self.MINE)
        theirs = [pool.submit(_parse_many, jobs[i : i + 32]) for i in range(cut, len(jobs), 32)]

        def finish() -> list[Parts]:
            out = [parse_parts(j) for j in jobs[:cut]]
            for n, future in enumerate(theirs):
                try:
                    out.extend(future.result())
                except BrokenProcessPool:  # the worker died (out of memory?): do its share here
                    self._pool = None
                    out.extend(parse_parts(j) for j in jobs[cut + 32 * n : cut + 32 * (n + 1)])
            return out

        return finish

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _parse_many(jobs: list[Job]) -> list[Parts]:
    return [parse_parts(j) for j in jobs]
