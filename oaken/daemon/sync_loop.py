"""The daemon's main loop: sync what the IDLE watchers announced, push local flag changes within
seconds, check every folder every `poll_seconds`, and reconnect with backoff when the link drops."""

from __future__ import annotations

import threading
import time
from typing import Any

from oaken.config import Config
from oaken.daemon.backoff import Backoff
from oaken.daemon.index_worker import IndexWorker
from oaken.daemon.watchers import IdleWatchers, Wakeups
from oaken.sync.imap import ConnectionLost
from oaken.sync.runner import AccountSync

PENDING_CHECK_SECONDS = 2.0  # how soon a message opened locally is marked read on the server


class SyncLoop:
    """Runs `syncer` until `stop` is set; a new connection is handed to `watchers`, and each stored
    batch or other change asks `indexer` (None: no indexing) for a pass."""

    def __init__(
        self,
        config: Config,
        syncer: AccountSync,
        stop: threading.Event,
        wakeups: Wakeups,
        watchers: IdleWatchers,
        indexer: IndexWorker | None,
        log: Any,
    ):
        self.config = config
        self.syncer = syncer
        self.stop = stop
        self.wakeups = wakeups
        self.watchers = watchers
        self.indexer = indexer
        self.log = log

    def first_connect(self) -> None:
        """Log in, retrying an unreachable server; a refused login or an untrusted certificate
        raises (SyncError), once."""
        backoff = Backoff(self.config.daemon.max_backoff_seconds)
        while not self.stop.is_set():
            try:
                self.syncer.connect()
                return
            except ConnectionLost as e:
                delay = backoff.next()
                self.log.warning("server unreachable; retrying", error=str(e), retry_in=round(delay, 2))
                self.stop.wait(delay)

    def run(self) -> None:
        syncer = self.syncer
        backoff = Backoff(self.config.daemon.max_backoff_seconds)
        if syncer.conn is not None:
            backoff.connected()  # the session first_connect opened
        poll = self.config.daemon.poll_seconds
        quick = self.config.daemon.no_idle_poll_seconds  # the IDLE folders, on a server without IDLE
        next_full = next_quick = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            woken = self.wakeups.take()
            polled = self.watchers.polled()
            only: set[str] | None = None
            if now >= next_full:
                next_full = now + poll
                next_quick = now + quick
            else:
                only = woken | self._folders_with_pending()
                if polled and now >= next_quick:
                    only |= polled
                    next_quick = now + quick
            if only is None or only:
                try:
                    if syncer.conn is None:  # lost: log in again, and look at the capabilities again
                        conn = syncer.connect()
                        backoff.connected()
                        self.watchers.watch(conn)
                    report = syncer.run(only=only, on_batch=self._on_batch, stop=self.stop)
                except ConnectionLost as e:
                    delay = backoff.next()  # from 1 s again only if the lost session had lasted
                    self.log.warning("connection lost; reconnecting", error=str(e), retry_in=round(delay, 2))
                    next_full = 0.0  # after a reconnect, look at everything
                    self.stop.wait(delay)
                    continue
                if self.indexer is not None and report.changed:
                    self.indexer.request()  # flags, expunges, folders: the filter fields change too
                self.log.info(
                    "cycle", folders=len(report.folders), skipped=report.skipped, new=report.new, seconds=report.seconds
                )
            until = next_full if not self.watchers.polled() else min(next_full, next_quick)
            self.wakeups.event.wait(timeout=max(0.0, min(PENDING_CHECK_SECONDS, until - time.monotonic())))

    def _on_batch(self, _added: int) -> None:
        if self.indexer is not None:
            self.indexer.request()

    def _folders_with_pending(self) -> set[str]:
        store, account_id = self.syncer.store, self.syncer.account_id
        names = {f.id: f.name for f in store.folders(account_id)}
        return {names[c.folder_id] for c in store.pending_flag_changes() if c.folder_id in names}
