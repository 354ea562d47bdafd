"""The daemon's indexing: index.db and the vectors kept right behind raw.db, on a thread of their
own so that a slow embedding never delays the mirror."""

from __future__ import annotations

import threading
import time

from oaken import log
from oaken.config import Config


def index_now(config: Config, *, keyword_only: bool = False, stop: threading.Event | None = None) -> bool:
    """Bring the indexes up to date with raw.db, if the index package is there. Its failure is
    logged, never fatal to sync (the indexes can always be rebuilt from raw.db). True if it ran."""
    try:
        from oaken.index import indexer
    except ImportError:
        return False
    try:
        indexer.update(config, keyword_only=keyword_only, stop=stop)
        return True
    except Exception as e:  # noqa: BLE001 - indexing must never stop the mirror
        log.get("oaken.daemon").error("indexing failed", error=f"{type(e).__name__}: {e}")
        return False


class IndexWorker:
    """Indexes behind the sync on its own thread, so a slow embedding never delays the mirror:
    each stored batch gets a keyword pass right away; the vector pass (slow) runs once the
    batches stop coming. One pass at a time, so index.db has one writer.

    Changes that do not come from sync (`oaken triage`, `oaken show` marking a message read, an
    email client writing labels through the API) are found by looking at raw.db's change seq
    every FOLLOW_SECONDS: two one-row reads, so index.db follows within about a second. The same
    look finds a cleanup of vectors/ that a maintenance left for after its retention, and the
    vector pass it starts does it (VectorUpkeep.tidy)."""

    FOLLOW_SECONDS = 1.0
    RETRY_SECONDS = 30.0  # after a failed pass, before raw.db's changes alone start another

    def __init__(self, config: Config):
        self.config = config
        self.due = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="indexer", daemon=True)
        self._quiet_until = 0.0
        self._upkeep_quiet_until = 0.0

    def start(self) -> IndexWorker:
        self.thread.start()
        return self

    def request(self) -> None:
        self.due.set()

    def _loop(self) -> None:
        while not self.stopping.is_set():
            if not self.due.wait(timeout=self.FOLLOW_SECONDS) and not self._behind():
                continue
            self.due.clear()
            if not index_now(self.config, keyword_only=True):
                self._quiet_until = time.monotonic() + self.RETRY_SECONDS  # logged; no retry every second
                continue
            if not self.due.wait(timeout=0.5) and not self.stopping.is_set():
                index_now(self.config, stop=self.stopping)  # vectors, when nothing new is waiting

    def _behind(self) -> bool:
        """Whether raw.db changed after what index.db has indexed, or vectors/ waits for its cleanup."""
        if self.stopping.is_set() or time.monotonic() < self._quiet_until:
            return False
        try:
            from oaken.index import indexer
        except ImportError:
            return False
        try:
            if indexer.behind(self.config):
                return True
            if time.monotonic() < self._upkeep_quiet_until or not indexer.upkeep_due(self.config):
                return False
            # a pass that cannot reach the cleanup (vectors no longer installed) is not started every second
            self._upkeep_quiet_until = time.monotonic() + self.RETRY_SECONDS
            return True
        except Exception as e:  # noqa: BLE001 - the pass it would start reports the fault
            log.get("oaken.daemon").warning(
                "cannot tell whether index.db is behind raw.db", error=f"{type(e).__name__}: {e}"
            )
            self._quiet_until = time.monotonic() + self.RETRY_SECONDS
            return False

    def stop(self, timeout: float = 30.0) -> None:
        self.stopping.set()
        self.due.set()
        self.thread.join(timeout)
