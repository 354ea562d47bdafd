"""`oaken sync --daemon` against servers that make it reconnect: a Dovecot that does not offer IDLE
is polled over the daemon's one connection (one login, one warning, new mail within a few poll
intervals), and a server that drops every session soon after login is retried ever more slowly,
not once a second. Logins are counted on the server side, in Dovecot's log."""

from __future__ import annotations

import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
from imapclient import IMAPClient

from oaken import config as config_mod
from oaken.store import open_store
from tests.dovecot_fixtures import Dovecot, Mailbox, _mailbox, _serve, assert_mirrored
from tests.tcp_proxy import TcpProxy
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
WARNING = "the server does not offer IDLE"


@pytest.fixture(scope="session")
def dovecot_no_idle(dovecot: Dovecot) -> Iterator[Dovecot]:
    """Dovecot's own capability list, read from the usual server after a login, less IDLE."""
    user, password = "capabilities", "capabilities-pw"
    dovecot.add_user(user, password)
    ctx = ssl.create_default_context(cafile=dovecot.ca_file)
    with IMAPClient("127.0.0.1", dovecot.ssl_port, ssl=True, ssl_context=ctx, timeout=10) as c:
        c.login(user, password)
        caps = [cap.decode() for cap in c.capabilities()]
    assert "IDLE" in caps
    yield from _serve(" ".join(cap for cap in caps if cap != "IDLE"))


@pytest.fixture
def no_idle_box(dovecot_no_idle: Dovecot, oaken_home: Path) -> Mailbox:
    return _mailbox(dovecot_no_idle, oaken_home)


@pytest.fixture
def daemons() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _start(tmp_path: Path, daemons: list[subprocess.Popen]) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "daemon.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "oaken.cli", "sync", "--daemon", "--no-index"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
    daemons.append(proc)
    return proc, log


def _stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=20)


_counting: list[str] = ["raw.db not opened yet"]


def _count() -> int:
    """Messages in raw.db; what kept it from being read is kept for the failure message."""
    try:
        with open_store(config_mod.resolve_data_dir(config_mod.load()), readonly=True) as store:
            count = store.message_count()
    except Exception as exc:  # noqa: BLE001 - raw.db not created yet, or being created
        _counting[0] = f"raw.db: {exc!r}"
        return 0
    _counting[0] = f"raw.db holds {count}"
    return count


def _logins(box: Mailbox) -> int:
    """Logins of this test's user so far, as Dovecot logged them."""
    assert box.server.dir is not None
    return (box.server.dir / "dovecot-info.log").read_text().count(f"Login: user=<{box.user}>,")


def _config(box: Mailbox, **daemon: object) -> None:
    data = box.config_dict()
    data["daemon"] = {"idle_folders": ["INBOX"], "poll_seconds": 300.0, "no_idle_poll_seconds": 1.0,
                      "max_backoff_seconds": 2.0, **daemon}
    box.write_config(data)


def test_without_idle_the_daemon_polls_over_one_connection_and_warns_once(
        no_idle_box: Mailbox, real_mail, tmp_path: Path, daemons):
    box = no_idle_box
    box.fill("INBOX", real_mail[:3])
    _config(box)  # full passes every 300 s: only the short poll of INBOX can bring new mail in time
    cfg = config_mod.load()
    before = _logins(box)  # the test's own APPEND
    proc, log = _start(tmp_path, daemons)
    wait_until("the first sync", lambda: _count() == 3, timeout=60, log=log, detail=lambda: _counting[0])
    time.sleep(10)  # ten poll intervals: a daemon stuck reconnecting would log in ten times or more
    daemon_logins = _logins(box) - before

    box.fill("INBOX", real_mail[3:4])  # one more login, the test's
    wait_until("the short poll to bring the new message", lambda: _count() == 4, timeout=10, log=log, detail=lambda: _counting[0])  # 10 intervals
    assert _logins(box) - before - 1 == daemon_logins

    assert _stop(proc) == 0
    text = log.read_text()
    assert daemon_logins == 1, f"{daemon_logins} logins in 10 s\n{text[-3000:]}"
    assert text.count(WARNING) == 1, text[-3000:]
    assert "every_seconds=1.0" in text
    assert "idle connection lost" not in text and "connection lost" not in text
    assert_mirrored(box, cfg)


class CuttingProxy(TcpProxy):
    """Once `cutting` is set, resets every connection `lifetime` seconds after it opened (those
    already open at once): a server that drops each session soon after the login."""

    def __init__(self, target_port: int, lifetime: float):
        super().__init__(target_port)
        self.lifetime = lifetime
        self.cutting = False
        self._born: dict[object, float] = {}
        threading.Thread(target=self._cut, daemon=True).start()

    def _cut(self) -> None:
        while not self._closed:
            now = time.monotonic()
            with self._lock:
                for client, _server in self._pairs:
                    self._born.setdefault(client, now)
                old = [p for p in self._pairs if self.cutting and now - self._born[p[0]] >= self.lifetime]
                self._pairs = [p for p in self._pairs if p not in old]
            for pair in old:
                for s in pair:
                    try:
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        s.close()
                    except OSError:
                        pass
            time.sleep(0.02)


@pytest.mark.parametrize("server, lifetime, ceiling", [
    ("IDLE", 0.5, 8.0),  # the IDLE thread and the main loop each back off
    ("no IDLE", 0.5, 8.0),
    # long enough for a successful poll before each cut: still backed off (a backoff that such a
    # poll reset would reconnect every 3 s: ten times in the window)
    ("no IDLE", 2.0, 16.0),
])
def test_sessions_dropped_soon_after_login_get_a_growing_backoff(
        request, server: str, lifetime: float, ceiling: float, real_mail, tmp_path: Path, daemons):
    box: Mailbox = request.getfixturevalue("imap_box" if server == "IDLE" else "no_idle_box")
    loops = 2 if server == "IDLE" else 1  # the main loop, and one IDLE thread if the server has IDLE
    box.fill("INBOX", real_mail[:3])
    proxy = CuttingProxy(box.server.ssl_port, lifetime)
    try:
        data = box.config_dict(port=proxy.port)
        data["daemon"] = {"idle_folders": ["INBOX"], "poll_seconds": 30.0, "no_idle_poll_seconds": 1.0,
                          "max_backoff_seconds": ceiling}
        box.write_config(data)
        cfg = config_mod.load()
        proc, log = _start(tmp_path, daemons)
        wait_until("the first sync", lambda: _count() == 3, timeout=60, log=log, detail=lambda: _counting[0])

        proxy.cutting = True
        window = 2 * ceiling
        start = _logins(box)
        time.sleep(window / 2)
        middle = _logins(box)
        time.sleep(window / 2)
        end = _logins(box)
        proxy.cutting = False
        # 1 s, 2 s, 4 s, 8 s (16 s) between attempts: four (five) logins per loop in the window, at
        # most one in its second half; reconnecting a second after each cut would be ten or more
        assert end - start <= 6 * loops, f"{end - start} logins in {window} s\n{log.read_text()[-3000:]}"
        assert end - middle <= 2 * loops, f"{end - middle} logins in the last {window / 2} s"
        assert end - start >= loops  # it did try again

        box.fill("INBOX", real_mail[3:4])  # the link is back: within the backoff's ceiling, the mail comes
        wait_until("the sync after the cuts", lambda: _count() == 4, timeout=60, log=log, detail=lambda: _counting[0])
        assert _stop(proc) == 0
    finally:
        proxy.close()
    text = log.read_text()
    assert text.count(WARNING) == (0 if server == "IDLE" else 1)
    assert_mirrored(box, cfg)


def test_no_idle_poll_seconds_defaults_to_a_minute_and_refuses_less_than_a_second() -> None:
    from oaken.errors import ConfigError

    assert config_mod.Config().daemon.no_idle_poll_seconds == 60.0
    assert config_mod.from_dict({"daemon": {"no_idle_poll_seconds": 5}}).daemon.no_idle_poll_seconds == 5.0
    with pytest.raises(ConfigError, match=r"\[daemon\] no_idle_poll_seconds: expected 1 or more, got 0.0"):
        config_mod.from_dict({"daemon": {"no_idle_poll_seconds": 0}})
