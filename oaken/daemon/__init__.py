"""`oaken sync --daemon`: keep raw.db an exact mirror, and the indexes right behind it.

One connection per IDLE folder waits for the server to announce a change; the main loop syncs
what was announced, pushes local flag changes within seconds, and checks every folder every
`poll_seconds`. On a server without IDLE (its capabilities say so) the IDLE folders are instead
polled every `no_idle_poll_seconds` over the main connection, with one warning. A dropped link, a
restarted server, a timeout or a TLS error is retried with exponential backoff, which starts again
from 1 s only after a session that lasted; a refused login or an untrusted certificate stops the
daemon with one clear error instead of a retry storm. SIGTERM lets the running batch commit, then
exits 0.

Each job has its own module: the main loop (sync_loop), the IDLE watchers and polling
(watchers), the indexing thread (index_worker), the search socket (search_socket). This one
supervises them: the lock on the data directory, the signals, starting them in order and
stopping them.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from oaken import config as config_mod
from oaken import log
from oaken.config import Config
from oaken.daemon.backoff import SESSION_SETTLED_SECONDS, Backoff  # noqa: F401 - re-exported
from oaken.daemon.index_worker import IndexWorker, index_now  # noqa: F401 - re-exported
from oaken.daemon.search_socket import start_search_server
from oaken.daemon.sync_loop import PENDING_CHECK_SECONDS, SyncLoop  # noqa: F401 - re-exported
from oaken.daemon.watchers import IDLE_RENEW_SECONDS, IdleWatchers, Wakeups  # noqa: F401 - re-exported
from oaken.errors import AlreadyRunning
from oaken.search import background
from oaken.sync.runner import AccountSync, account_config

LOCK_NAME = "daemon.lock"


class DaemonLock:
    """An exclusive flock on DATA_DIR/daemon.lock, released by the kernel when the process dies,
    so a kill -9 never leaves a stale lock behind."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / LOCK_NAME
        self.fd: int | None = None

    def acquire(self) -> DaemonLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise AlreadyRunning(
                f"another Oaken daemon (pid {pid}) already syncs {self.path.parent} (lock {self.path}); "
                f"stop it first (`systemctl --user stop oaken-sync` or `kill {pid}`)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Daemon:
    """Supervision: one daemon per data directory (DaemonLock), SIGTERM and SIGINT stop it
    between batches, and its parts start and stop in order."""

    def __init__(self, config: Config, account: str | None = None, *, index: bool = True):
        self.config = config
        self.account = account_config(config, account)
        self.index = index
        self.stop = threading.Event()
        self.wakeups = Wakeups()
        self.log = log.get("oaken.daemon").bind(account=self.account.name)
        self.watchers = IdleWatchers(config, self.account, self.stop, self.wakeups, self.log)
        self.indexer: IndexWorker | None = None
        self._signal: str | None = None
        self._warming: list[threading.Thread] = []  # the search server's embedder load

    # A model still loading when the interpreter shuts down can abort the process; the wait is
    # bounded below systemd's default stop timeout (90 s) and said when it runs out.
    WARMING_WAIT_S = 60.0

    def _wait_for_warming(self) -> None:
        deadline = time.monotonic() + self.WARMING_WAIT_S
        for thread in self._warming:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                self.log.warning(
                    "the embedder was still loading when the daemon stopped; exiting without waiting for it",
                    waited_s=self.WARMING_WAIT_S,
                )

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # no logging here: a handler that writes a log line while the interrupted main thread is
        # in the middle of one waits on that logger's lock for ever; run() logs the signal
        self._signal = signal.Signals(signum).name
        self.stop.set()
        self.wakeups.event.set()

    def run(self) -> int:
        data_dir = config_mod.ensure_data_dir(self.config)
        lock = DaemonLock(data_dir).acquire()
        # a background search server that a search started (oaken.search.background) hands over:
        # stopped, and no search starts another while the daemon runs
        search_lock = background.take_over(data_dir, self.log)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        syncer = AccountSync(self.config, self.account)
        if self.index:
            self.indexer = IndexWorker(self.config).start()
            self.indexer.request()  # whatever a previous run stored but did not index
        loop = SyncLoop(self.config, syncer, self.stop, self.wakeups, self.watchers, self.indexer, self.log)
        try:
            # searches are answered from the start, also while the IMAP server is out of reach
            logged_in = threading.Event()  # the model loads after the first login, not beside it
            start_search_server(self.config, self.stop, warm_after=logged_in, threads=self._warming)
            loop.first_connect()  # a refused login or an untrusted certificate stops here, once
            logged_in.set()
            if syncer.conn is not None:
                self.watchers.watch(syncer.conn)  # IDLE threads, or polling on a server without IDLE
            self.log.info(
                "daemon started",
                pid=os.getpid(),
                data_dir=str(data_dir),
                idle_folders=list(self.config.daemon.idle_folders),
            )
            loop.run()
        finally:
            self.stop.set()  # the search socket too, when first_connect raised
            syncer.close()
            if self._signal:
                self.log.info("stopping on a signal; the running batch was committed", signal=self._signal)
            # loaded only if an embedder was; another thread may be importing it right now
            stop_preparing = getattr(sys.modules.get("oaken.index.backends"), "stop_preparing", None)
            if stop_preparing is not None:
                stop_preparing()  # a first model export in a child process: not worth waiting for
            if self.indexer is not None:
                self.indexer.stop()
            self._wait_for_warming()
            self.watchers.close()
            background.release(search_lock)
            lock.release()
        self.log.info("daemon stopped")
        return 0


def run(config: Config, account: str | None = None, *, index: bool = True) -> int:
    """Run until SIGTERM; 0 on a clean stop. Raises AlreadyRunning or SyncError (bad login/TLS)."""
    return Daemon(config, account, index=index).run()
