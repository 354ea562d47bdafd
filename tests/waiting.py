"""Waiting, bounded, for something another process or thread does (a daemon's socket, a log line)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 20.0,
               log: Path | None = None, detail: Callable[[], str] | None = None) -> None:
    """On a timeout the failure carries the tail of `log` (a daemon's output, say): what the other
    process was doing is the first thing anyone reading a CI failure needs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    tail = ""
    if log is not None:
        try:
            tail = "\n--- " + str(log) + " (tail) ---\n" + log.read_text(errors="replace")[-4000:]
        except OSError as exc:
            tail = f"\n(no log: {exc})"
    if detail is not None:
        tail = f" ({detail()})" + tail
    raise AssertionError(f"timed out after {timeout} s waiting for {what}{tail}")
