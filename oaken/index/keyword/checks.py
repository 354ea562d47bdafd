"""When index.db's integrity check runs: every time for a small file, once a day for a large one.

SQLite's quick_check reads every page, and on an FTS5 table it also runs FTS5's own integrity
check, which reads the whole full-text index: 0.3-0.5 s for the 27 MB index.db of 10,000 messages,
and so about half a minute at a million messages. Run before every `oaken reindex` and every
`oaken status`, it made both cost what the mailbox holds rather than what changed (2.4 s for
the 247 MB index.db of 100,000 generated messages, under load). Under ALWAYS_BYTES (about 25,000
messages; a check of half a second at most) nothing changes: every process checks before it
trusts the file. Over it, a sound check is remembered beside the file (index-<generation>.db.checked) and the
next one is due a day later; in between, damage still shows where it matters, since SQLite
reports a page it cannot read to the query that reads it (a search then says
keyword_index_unavailable, and the next keyword pass rebuilds). `oaken status` never runs the
long check: it says when the last one ran.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ALWAYS_BYTES = 64 << 20
EVERY_SECONDS = 24 * 3600
CHECKED_SUFFIX = ".checked"  # beside the file index.db links to: when quick_check last found it sound


def _real(path: Path) -> str:
    return os.path.realpath(path)


def _size(path: Path) -> int:
    try:
        return os.stat(_real(path)).st_size
    except OSError:
        return 0


def is_small(path: Path) -> bool:
    """Small enough that a check costs about a second at most: always run."""
    return _size(path) < ALWAYS_BYTES


def last_checked(path: Path) -> float | None:
    """When quick_check last found this index.db sound (unix time), if remembered."""
    try:
        with open(_real(path) + CHECKED_SUFFIX, encoding="utf-8") as f:
            return float(f.read().strip())
    except (OSError, ValueError):
        return None


def due(path: Path, now: float | None = None) -> bool:
    """Whether a process about to trust this index.db must check it first."""
    if is_small(path):
        return True
    last = last_checked(path)
    return last is None or (now if now is not None else time.time()) - last >= EVERY_SECONDS


def mark_checked(path: Path, when: float | None = None) -> None:
    try:
        with open(_real(path) + CHECKED_SUFFIX, "w", encoding="utf-8") as f:
            f.write(f"{when if when is not None else time.time():.0f}\n")
    except OSError:
        pass  # a read-only or full disk: the next process checks again


def when_checked(path: Path) -> str:
    """For `oaken status`: when the last check found the file sound, in UTC, or "never"."""
    last = last_checked(path)
    return "never" if last is None else time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(last))
