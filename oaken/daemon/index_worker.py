"""The daemon's indexing: index.db and the vectors kept right behind raw.db, on a thread of their
own so that a slow embedding never delays the mirror."""

from __future__ import annotations

import threading
import time

from oaken import log
from oaken.config import Config


def index_now(
    config: Config, *, keyword_only: bool = False, stop: threading.Event | None = None, upkeep_later: bool = False
) -> bool:
    """Bring the indexes up to date with raw.db, if the index package is there. Its failure is
    logged, never fatal to sync (the indexes can always be rebuilt from raw.db). True if it ran."""
    try:
        from oaken.index import indexer
    except ImportError:
        return False
    try:
        indexer.update(config, keyword_only=keyword_only, stop=stop, upkeep_later=upkeep_later)
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
    every FOLLOW_SECONDS: two one-row reads, so index.db follows within about a second.

    The passes that follow changes leave the vector store's upkeep (compaction, index deltas; 2-3 s
    at a million messages, every 20 writes) for later, so a triage reaches both indexes at the cost
    of its own rows. Once nothing has changed for UPKEEP_QUIET_SECONDS, a pass of its own does it,
    and the cleanup a maintenance left for after its retention (VectorUpkeep.finish_pass, tidy)."""

    FOLLOW_SECONDS = 1.0
    RETRY_SECONDS = 30.0  # after a failed pass, before raw.db's changes alone start another
    UPKEEP_QUIET_SECONDS = 5.0

    def __init__(self, config: Config):
        self.config = config
        self.due = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="indexer", daemon=True)
        self._quiet_until = 0.0
        self._upkeep_quiet_until = 0.0
        self._changed = time.monotonic()  # when the last pass that followed a change ended

    def start(self) -> IndexWorker:
        self.thread.start()
        return self

    def request(self) -> None:
        self.due.set()

    def _loop(self) -> None:
        while not self.stopping.is_set():
            if not self.due.wait(timeout=self.FOLLOW_SECONDS) and not self._behind():
                if self._upkeep_wanted():
                    index_now(self.config, stop=self.stopping)  # nothing to index: the upkeep alone
                continue
            self.due.clear()
            try:
                if not index_now(self.config, keyword_only=True):
                    self._quiet_until = time.monotonic() + self.RETRY_SECONDS  # logged; no retry every second
                    continue
                if not self.due.wait(timeout=0.5) and not self.stopping.is_set():
                    # vectors, when nothing new is waiting
                    index_now(self.config, stop=self.stopping, upkeep_later=True)
            finally:
                self._changed = time.monotonic()

    def _behind(self) -> bool:
        """Whether raw.db changed after what index.db has indexed."""
        if self.stopping.is_set() or time.monotonic() < self._quiet_until:
            return False
        try:
            from oaken.index import indexer
        except ImportError:
            return False
        try:
            return indexer.behind(self.config)
        except Exception as e:  # noqa: BLE001 - the pass it would start reports the fault
            log.get("oaken.daemon").warning(
                "cannot tell whether index.db is behind raw.db", error=f"{type(e).__name__}: {e}"
            )
            self._quiet_until = time.monotonic() + self.RETRY_SECONDS
            return False

    def _upkeep_wanted(self) -> bool:
        """Whether vectors/ waits for upkeep and nothing has changed for UPKEEP_QUIET_SECONDS."""
        now = time.monotonic()
        if self.stopping.is_set() or now < max(self._quiet_until, self._upkeep_quiet_until):
            return False  # after a failed pass, or an upkeep pass that did not clear it
        if now - self._changed < self.UPKEEP_QUIET_SECONDS:
            return False
        try:
            from oaken.index import indexer
        except ImportError:
            return False
        try:
            if not indexer.upkeep_due(self.config):
                return False
        except Exception as e:  # noqa: BLE001 - a state file that cannot be read: the next write replaces it
            log.get("oaken.daemon").warning(
                "cannot tell whether vectors/ waits for upkeep", error=f"{type(e).__name__}: {e}"
            )
            self._upkeep_quiet_until = now + self.RETRY_SECONDS
            return False
        # a pass that cannot do it (vectors no longer installed) is not started every second
        self._upkeep_quiet_until = now + self.RETRY_SECONDS
        return True

    def stop(self, timeout: float = 30.0) -> None:
        self.stopping.set()
        self.due.set()
        self.thread.join(timeout)
