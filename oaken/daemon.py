"""`oaken sync --daemon`: keep raw.db an exact mirror, and the indexes right behind it.

One connection per IDLE folder waits for the server to announce a change; the main loop syncs
what was announced, pushes local flag changes within seconds, and checks every folder every
`poll_seconds`. On a server without IDLE (its capabilities say so) the IDLE folders are instead
polled every `no_idle_poll_seconds` over the main connection, with one warning. A dropped link, a
restarted server, a timeout or a TLS error is retried with exponential backoff, which starts again
from 1 s only after a session that lasted; a refused login or an untrusted certificate stops the
daemon with one clear error instead of a retry storm. SIGTERM lets the running batch commit, then
exits 0.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from imapclient import IMAPClient

from oaken import config as config_mod
from oaken import log
from oaken.config import Config
from oaken.errors import AlreadyRunning, SyncError
from oaken.sync.imap import TRANSIENT, Connection, ConnectionLost, connect, idle_wait
from oaken.sync.runner import AccountSync, account_config

LOCK_NAME = "daemon.lock"
PENDING_CHECK_SECONDS = 2.0  # how soon a message opened locally is marked read on the server
IDLE_RENEW_SECONDS = 60.0
SESSION_SETTLED_SECONDS = 60.0  # a session that lasted this long was a working one: back off from 1 s again


class DaemonLock:
    """An exclusive flock on DATA_DIR/daemon.lock, released by the kernel when the process dies,
    so a kill -9 never leaves a stale lock behind."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / LOCK_NAME
        self.fd: int | None = None

    def acquire(self) -> "DaemonLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise AlreadyRunning(
                f"another Oaken daemon (pid {pid}) already syncs {self.path.parent} (lock {self.path}); "
                f"stop it first (`systemctl --user stop oaken-sync` or `kill {pid}`)") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


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
        delay = min(self.ceiling, self.base * 2 ** self.failures)
        self.failures += 1
        return delay * random.uniform(0.85, 1.0)


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
    every FOLLOW_SECONDS: two one-row reads, so index.db follows within about a second."""

    FOLLOW_SECONDS = 1.0
    RETRY_SECONDS = 30.0  # after a failed pass, before raw.db's changes alone start another

    def __init__(self, config: Config):
        self.config = config
        self.due = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="indexer", daemon=True)
        self._quiet_until = 0.0

    def start(self) -> "IndexWorker":
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
            log.get("oaken.daemon").warning("cannot tell whether index.db is behind raw.db",
                                            error=f"{type(e).__name__}: {e}")
            self._quiet_until = time.monotonic() + self.RETRY_SECONDS
            return False

    def stop(self, timeout: float = 30.0) -> None:
        self.stopping.set()
        self.due.set()
        self.thread.join(timeout)


def _start_search_server(config: Config, stop_event: threading.Event) -> Any:
    """Answer `oaken search` on the data directory's socket until `stop_event` is set, with the
    embedder loaded in the background (a search before that waits for it, outside its timeout).
    A socket that cannot be opened is logged: sync goes on, searches run in their own process."""
    from oaken.search.server import SearchServer

    try:
        server = SearchServer(config, stop_event).start()
    except OSError as e:
        log.get("oaken.daemon").error("search socket not started; `oaken search` will search in its own process",
                                      error=f"{type(e).__name__}: {e}")
        return None

    def warm() -> None:
        if config.embedder.model != "none":  # loaded even before vectors exist: the first search is warm
            from oaken.search import vector_side

            try:
                vector_side.retriever(config, config_mod.resolve_data_dir(config)).load()
            except Exception as e:  # noqa: BLE001 - searches report it as no_embedder
                log.get("oaken.daemon").warning("embedder not loaded", error=f"{type(e).__name__}: {e}")
        server.warm()

    threading.Thread(target=warm, name="oaken-search-warm", daemon=True).start()
    log.get("oaken.daemon").info("search socket listening", path=str(server.path))
    return server


class Daemon:
    def __init__(self, config: Config, account: str | None = None, *, index: bool = True):
        self.config = config
        self.account = account_config(config, account)
        self.index = index
        self.stop = threading.Event()
        self.wake = threading.Event()
        self._woken: set[str] = set()
        self._woken_lock = threading.Lock()
        self._idle_conns: list[Connection] = []
        # each IDLE folder is either watched by its own IDLE thread or, on a server without
        # IDLE, polled by the main loop every no_idle_poll_seconds
        self._idling: set[str] = set()
        self._polled: set[str] = set()
        self._idle_lock = threading.Lock()
        self._warned_no_idle = False
        self.indexer: IndexWorker | None = None
        self.log = log.get("oaken.daemon").bind(account=self.account.name)
        self._signal: str | None = None

    # ---- signals and wake-ups ---------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # no logging here: a handler that writes a log line while the interrupted main thread is
        # in the middle of one waits on that logger's lock for ever; run() logs the signal
        self._signal = signal.Signals(signum).name
        self.stop.set()
        self.wake.set()

    def _notify(self, folder: str) -> None:
        with self._woken_lock:
            self._woken.add(folder)
        self.wake.set()

    def _take_woken(self) -> set[str]:
        with self._woken_lock:
            out, self._woken = self._woken, set()
        self.wake.clear()
        return out

    # ---- IDLE watchers ----------------------------------------------------------------------------

    def _watch(self, conn: Connection) -> None:
        """For each new main connection: an IDLE thread per IDLE folder if the server offers IDLE
        (once per folder), else those folders are polled by the main loop."""
        if "IDLE" not in conn.caps:
            with self._idle_lock:
                folders = [f for f in self.config.daemon.idle_folders if f not in self._idling]
            self._poll_instead(folders)
            return
        with self._idle_lock:
            start = [f for f in self.config.daemon.idle_folders if f not in self._idling]
            self._idling.update(start)
            again = [f for f in start if f in self._polled]
            self._polled.difference_update(start)
        if again:
            self.log.info("the server offers IDLE again; watching with IDLE", folders=again)
        for folder in start:
            threading.Thread(target=self._idle_loop, args=(folder,), name=f"idle-{folder}", daemon=True).start()

    def _poll_instead(self, folders: list[str]) -> None:
        """The server has no IDLE: the main loop polls these folders every no_idle_poll_seconds over
        its own connection. Warned about once per daemon, not once per attempt."""
        with self._idle_lock:
            new = [f for f in folders if f not in self._polled]
            self._polled.update(new)
            warn = bool(new) and not self._warned_no_idle
            self._warned_no_idle = self._warned_no_idle or warn
        if not new:
            return
        every = self.config.daemon.no_idle_poll_seconds
        if warn:
            self.log.warning("the server does not offer IDLE; polling instead", folders=new, every_seconds=every)
        else:
            self.log.info("the server does not offer IDLE; polling instead", folders=new, every_seconds=every)
        for folder in new:
            self._notify(folder)  # synced now, then every no_idle_poll_seconds

    def _polled_folders(self) -> set[str]:
        with self._idle_lock:
            return set(self._polled)

    def _idle_loop(self, folder: str) -> None:
        backoff = Backoff(self.config.daemon.max_backoff_seconds)
        conn: Connection | None = None
        renew = min(IDLE_RENEW_SECONDS, max(self.config.daemon.poll_seconds, 1.0))
        while not self.stop.is_set():
            try:
                fresh = conn is None
                if conn is None:
                    conn = connect(self.account)
                    self._idle_conns.append(conn)
                    backoff.connected()
                    if "IDLE" not in conn.caps:  # the server dropped IDLE since this thread started
                        conn = self._drop_idle(conn)
                        with self._idle_lock:
                            self._idling.discard(folder)
                        self._poll_instead([folder])
                        return
                # on a new connection, sync once IDLE listens: mail that arrived before it
                # (while cut off, or while starting) is never announced
                started = (lambda: self._notify(folder)) if fresh else None
                if idle_wait(conn, folder, renew, started):
                    self._notify(folder)
            except SyncError as e:
                if self.stop.is_set():
                    return
                if not isinstance(e, ConnectionLost):
                    self.log.error("idle stopped", folder=folder, error=str(e))
                    return
                conn = self._drop_idle(conn)
                self.stop.wait(backoff.next())
            except (IMAPClient.Error, *TRANSIENT) as e:
                if self.stop.is_set():
                    return  # stopping: run() closed this connection under the IDLE, nothing was lost
                delay = backoff.next()
                self.log.warning("idle connection lost", folder=folder, error=f"{type(e).__name__}: {e}",
                                 retry_in=round(delay, 2))
                conn = self._drop_idle(conn)
                self.stop.wait(delay)

    def _drop_idle(self, conn: Connection | None) -> None:
        if conn is not None:
            conn.close()
            if conn in self._idle_conns:
                self._idle_conns.remove(conn)
        return None

    # ---- the main loop ----------------------------------------------------------------------------

    def _on_batch(self, _added: int) -> None:
        if self.indexer is not None:
            self.indexer.request()

    def run(self) -> int:
        data_dir = config_mod.ensure_data_dir(self.config)
        lock = DaemonLock(data_dir).acquire()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        syncer = AccountSync(self.config, self.account)
        if self.index:
            self.indexer = IndexWorker(self.config).start()
            self.indexer.request()  # whatever a previous run stored but did not index
        try:
            self._first_connect(syncer)  # a refused login or an untrusted certificate stops here, once
            _start_search_server(self.config, self.stop)
            if syncer.conn is not None:
                self._watch(syncer.conn)  # IDLE threads, or polling on a server without IDLE
            self.log.info("daemon started", pid=os.getpid(), data_dir=str(data_dir),
                          idle_folders=list(self.config.daemon.idle_folders))
            self._loop(syncer)
        finally:
            syncer.close()
            if self._signal:
                self.log.info("stopping on a signal; the running batch was committed", signal=self._signal)
            # loaded only if an embedder was; another thread may be importing it right now
            stop_preparing = getattr(sys.modules.get("oaken.index.backends"), "stop_preparing", None)
            if stop_preparing is not None:
                stop_preparing()  # a first model export in a child process: not worth waiting for
            if self.indexer is not None:
                self.indexer.stop()
            for conn in list(self._idle_conns):
                self._drop_idle(conn)
            lock.release()
        self.log.info("daemon stopped")
        return 0

    def _first_connect(self, syncer: AccountSync) -> None:
        backoff = Backoff(self.config.daemon.max_backoff_seconds)
        while not self.stop.is_set():
            try:
                syncer.connect()
                return
            except ConnectionLost as e:
                delay = backoff.next()
                self.log.warning("server unreachable; retrying", error=str(e), retry_in=round(delay, 2))
                self.stop.wait(delay)

    def _loop(self, syncer: AccountSync) -> None:
        backoff = Backoff(self.config.daemon.max_backoff_seconds)
        if syncer.conn is not None:
            backoff.connected()  # the session _first_connect opened
        poll = self.config.daemon.poll_seconds
        quick = self.config.daemon.no_idle_poll_seconds  # the IDLE folders, on a server without IDLE
        next_full = next_quick = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            woken = self._take_woken()
            polled = self._polled_folders()
            only: set[str] | None = None
            if now >= next_full:
                next_full = now + poll
                next_quick = now + quick
            else:
                only = woken | self._folders_with_pending(syncer)
                if polled and now >= next_quick:
                    only |= polled
                    next_quick = now + quick
            if only is None or only:
                try:
                    if syncer.conn is None:  # lost: log in again, and look at the capabilities again
                        syncer.connect()
                        backoff.connected()
                        self._watch(syncer.conn)
                    report = syncer.run(only=only, on_batch=self._on_batch, stop=self.stop)
                except ConnectionLost as e:
                    delay = backoff.next()  # from 1 s again only if the lost session had lasted
                    self.log.warning("connection lost; reconnecting", error=str(e), retry_in=round(delay, 2))
                    next_full = 0.0  # after a reconnect, look at everything
                    self.stop.wait(delay)
                    continue
                if self.indexer is not None and report.changed:
                    self.indexer.request()  # flags, expunges, folders: the filter fields change too
                self.log.info("cycle", folders=len(report.folders), skipped=report.skipped, new=report.new,
                              seconds=report.seconds)
            until = next_full if not self._polled_folders() else min(next_full, next_quick)
            self.wake.wait(timeout=max(0.0, min(PENDING_CHECK_SECONDS, until - time.monotonic())))

    def _folders_with_pending(self, syncer: AccountSync) -> set[str]:
        names = {f.id: f.name for f in syncer.store.folders(syncer.account_id)}
        return {names[c.folder_id] for c in syncer.store.pending_flag_changes() if c.folder_id in names}


def run(config: Config, account: str | None = None, *, index: bool = True) -> int:
    """Run until SIGTERM; 0 on a clean stop. Raises AlreadyRunning or SyncError (bad login/TLS)."""
    return Daemon(config, account, index=index).run()
