"""Waiting, bounded, for something another process or thread does (a daemon's socket, a log line)."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
