"""The IDLE wait (oaken/sync/idle.py) and the daemon's IDLE watchers against a real Dovecot: a
wait with nothing new ends when its time is up and leaves the session usable, and a stopping
daemon ends its watchers' waits at once, not after the account's timeout. A response cut across
TLS records is tested on every server in tests/test_conformance.py."""

from __future__ import annotations

import threading
import time

from oaken import log
from oaken.daemon.watchers import IdleWatchers, Wakeups
from oaken.sync.idle import idle_wait
from oaken.sync.imap import connect
from tests.dovecot_fixtures import Mailbox
from tests.waiting import wait_until


def test_an_idle_wait_with_nothing_new_ends_when_its_time_is_up(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:2])
    conn = connect(imap_box.config().accounts["test"])
    try:
        t0 = time.monotonic()
        assert not idle_wait(conn, "INBOX", 1.0)
        assert 0.9 < time.monotonic() - t0 < 5.0
        conn.noop()
        assert len(conn.search_uids(b"ALL")) == 2
    finally:
        conn.close()


def test_a_stopping_daemon_ends_its_idle_waits_at_once(imap_box: Mailbox, real_mail):
    """IdleWatchers.close shuts the sockets its threads wait on: a LOGOUT there would have its
    answer read by the waiting thread and wait out the account's timeout (30 s here)."""
    imap_box.fill("INBOX", real_mail[:1])
    cfg = imap_box.config(timeout_seconds=30.0)
    account = cfg.accounts["test"]
    stop, wakeups = threading.Event(), Wakeups()
    watchers = IdleWatchers(cfg, account, stop, wakeups, log.get("test"))
    main = connect(account)
    try:
        watchers.watch(main)
        wait_until("the IDLE thread to listen", lambda: "INBOX" in wakeups.take(), timeout=20)
        idle = next(t for t in threading.enumerate() if t.name == "idle-INBOX")
        time.sleep(0.3)  # inside the wait, not between its commands
        stop.set()
        t0 = time.monotonic()
        watchers.close()
        idle.join(10)
        assert not idle.is_alive()
        assert time.monotonic() - t0 < 3.0
    finally:
        stop.set()
        watchers.close()
        main.close()


def test_watchers_closed_while_an_idle_thread_connects_wait_for_it_and_it_ends_quietly(imap_box: Mailbox, real_mail):
    """The daemon stopping right after it started its IDLE threads: close() returns only once they
    have ended (a thread still running at the process's exit was killed mid-call and printed half a
    traceback into the daemon's log), and the connection a thread was opening is shut by it."""
    imap_box.fill("INBOX", real_mail[:1])
    cfg = imap_box.config(timeout_seconds=30.0)
    account = cfg.accounts["test"]
    failures: list[threading.ExceptHookArgs] = []
    before, threading.excepthook = threading.excepthook, failures.append
    main = connect(account)
    try:
        for _ in range(5):
            stop, wakeups = threading.Event(), Wakeups()
            watchers = IdleWatchers(cfg, account, stop, wakeups, log.get("test"))
            watchers.watch(main)
            stop.set()
            watchers.close()  # the thread is opening its connection now, or about to
            assert [t.name for t in threading.enumerate() if t.name == "idle-INBOX"] == []
            assert watchers._conns == []
    finally:
        threading.excepthook = before
        main.close()
    assert failures == []
