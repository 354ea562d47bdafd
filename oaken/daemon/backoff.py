"""How long the daemon waits before trying a server again."""

from __future__ import annotations

import random
import time

SESSION_SETTLED_SECONDS = 60.0  # a session that lasted this long was a working one: back off from 1 s again


class Backoff:
    """1 s, 2 s, 4 s ... up to `ceiling`, with a little jitter so many clients do not stampede.

    It starts again from `base` only when the session that just failed had lasted `settled`
    seconds (`connected()` marks its start): a login alone proves nothing, and a server that drops
    every session right after it is retried ever more slowly, not once a second."""

    def __init__(self, ceiling: float, base: float = 1.0, settled: float = SESSION_SETTLED_SECONDS):
        self.ceiling = max(ceiling, base)
        self.base = base
        self.settled = settled
        self.failures = 0
        self._since: float | None = None

    def connected(self) -> None:
        """A session began (logged in)."""
        self._since = time.monotonic()

    def next(self) -> float:
        """The delay before the next attempt, after a failed one or a lost session."""
        if self._since is not None and time.monotonic() - self._since >= self.settled:
            self.failures = 0
        self._since = None
        delay = min(self.ceiling, self.base * 2**self.failures)
        self.failures += 1
        return delay * random.uniform(0.85, 1.0)
