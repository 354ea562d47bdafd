"""The daemon's IDLE watchers: a connection per IDLE folder that waits for the server to announce
a change and wakes the sync loop; on a server without IDLE, those folders are polled by the sync
loop instead, with one warning."""

from __future__ import annotations

import threading
import time
from typing import Any

from imapclient import IMAPClient

from oaken.config import AccountConfig, Config
from oaken.daemon.backoff import Backoff
from oaken.errors import SyncError
from oaken.sync.idle import idle_wait
from oaken.sync.imap import TRANSIENT, Connection, ConnectionLost, connect

IDLE_RENEW_SECONDS = 60.0
CLOSE_WAIT_SECONDS = 5.0  # how long close() waits for the IDLE threads to end


class Wakeups:
    """The folders announced as changed since the sync loop last looked, and the event that wakes it
    (set by an IDLE thread, a folder to poll, or a signal)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._folders: set[str] = set()
        self._lock = threading.Lock()

    def notify(self, folder: str) -> None:
        with self._lock:
            self._folders.add(folder)
        self.event.set()

    def take(self) -> set[str]:
        with self._lock:
            out, self._folders = self._folders, set()
        self.event.clear()
        return out


class IdleWatchers:
    """Each IDLE folder is either watched by its own IDLE thread or, on a server without IDLE,
    polled by the sync loop every no_idle_poll_seconds (`polled()`)."""

    def __init__(self, config: Config, account: AccountConfig, stop: threading.Event, wakeups: Wakeups, log: Any):
        self.config = config
        self.account = account
        self.stop = stop
        self.wakeups = wakeups
        self.log = log
        self._conns: list[Connection] = []
        self._idling: set[str] = set()
        self._polled: set[str] = set()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._warned_no_idle = False

    def watch(self, conn: Connection) -> None:
        """For each new main connection: an IDLE thread per IDLE folder if the server offers IDLE
        (once per folder), else those folders are polled by the main loop."""
        if "IDLE" not in conn.caps:
            with self._lock:
                folders = [f for f in self.config.daemon.idle_folders if f not in self._idling]
            self._poll_instead(folders)
            return
        with self._lock:
            start = [f for f in self.config.daemon.idle_folders if f not in self._idling]
            self._idling.update(start)
            again = [f for f in start if f in self._polled]
            self._polled.difference_update(start)
        if again:
            self.log.info("the server offers IDLE again; watching with IDLE", folders=again)
        for folder in start:
            thread = threading.Thread(target=self._idle_loop, args=(folder,), name=f"idle-{folder}", daemon=True)
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def polled(self) -> set[str]:
        """The IDLE folders the sync loop polls, the server offering no IDLE."""
        with self._lock:
            return set(self._polled)

    def close(self) -> None:
        """Close every IDLE connection (the daemon is stopping) and wait for the IDLE threads to end,
        so that none is cut off mid-call when the process exits (a thread killed by the interpreter's
        exit printed a half traceback). The sockets are shut, not logged out: each is being read by
        its IDLE thread, which would take the LOGOUT's answer and leave the LOGOUT waiting out the
        account's timeout; the shut socket ends the wait at once. A connection still being opened
        is shut by its own thread, which finds the watchers closed when it registers it."""
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
            threads = list(self._threads)
        for conn in conns:
            conn.abandon()
        deadline = time.monotonic() + CLOSE_WAIT_SECONDS
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _poll_instead(self, folders: list[str]) -> None:
        """The server has no IDLE: the main loop polls these folders every no_idle_poll_seconds over
        its own connection. Warned about once per daemon, not once per attempt."""
        with self._lock:
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
            self.wakeups.notify(folder)  # synced now, then every no_idle_poll_seconds

    def _idle_loop(self, folder: str) -> None:
        backoff = Backoff(self.config.daemon.max_backoff_seconds)
        conn: Connection | None = None
        renew = min(IDLE_RENEW_SECONDS, max(self.config.daemon.poll_seconds, 1.0))
        while not self.stop.is_set():
            try:
                fresh = conn is None
                if conn is None:
                    conn = connect(self.account)
                    if not self._register(conn):
                        conn.close()  # the daemon stopped while this connection was being opened
                        return
                    backoff.connected()
                    if "IDLE" not in conn.caps:  # the server dropped IDLE since this thread started
                        self._drop(conn)
                        with self._lock:
                            self._idling.discard(folder)
                        self._poll_instead([folder])
                        return
                # on a new connection, sync once IDLE listens: mail that arrived before it
                # (while cut off, or while starting) is never announced
                started = (lambda: self.wakeups.notify(folder)) if fresh else None
                if idle_wait(conn, folder, renew, started):
                    self.wakeups.notify(folder)
            except SyncError as e:
                if self.stop.is_set():
                    return
                if not isinstance(e, ConnectionLost):
                    self.log.error("idle stopped", folder=folder, error=str(e))
                    return
                self._drop(conn)
                conn = None
                self.stop.wait(backoff.next())
            except (IMAPClient.Error, *TRANSIENT) as e:
                if self.stop.is_set():
                    return  # stopping: the daemon closed this connection under the IDLE, nothing was lost
                delay = backoff.next()
                self.log.warning(
                    "idle connection lost", folder=folder, error=f"{type(e).__name__}: {e}", retry_in=round(delay, 2)
                )
                self._drop(conn)
                conn = None
                self.stop.wait(delay)
            except Exception as e:  # noqa: BLE001 - a thread must not die silently
                if self.stop.is_set():
                    return  # stopping: whatever the shut socket made the IDLE wait raise ends it
                # a defect, not a link failure: the folder is polled from now on, so no mail waits
                self.log.exception("idle failed; polling this folder instead", folder=folder, error=repr(e))
                self._drop(conn)
                with self._lock:
                    self._idling.discard(folder)
                self._poll_instead([folder])
                return

    def _register(self, conn: Connection) -> bool:
        """Keep `conn` so that close() can shut it; False when the watchers were closed already."""
        with self._lock:
            if self._closed:
                return False
            self._conns.append(conn)
            return True

    def _drop(self, conn: Connection | None) -> None:
        if conn is not None:
            conn.close()
            with self._lock:
                if conn in self._conns:
                    self._conns.remove(conn)
