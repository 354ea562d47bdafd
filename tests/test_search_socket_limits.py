"""The daemon's search socket stays bounded whoever connects: thousands of idle connections add no
thread and keep no search out, a client that trickles half a request is dropped at its deadline
without holding a worker, and the daemon still stops on SIGTERM with clients connected."""

from __future__ import annotations

import io
import json
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pytest

from oaken import log
from oaken import config as config_mod
from oaken.config import Config, EmbedderConfig, LogConfig
from oaken.search import client, engine, server
from oaken.search.types import SearchResponse
from tests.dovecot_fixtures import Mailbox
from tests.search_fixtures import _keyword_home  # noqa: F401  (the keyword_home fixture)
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
IDLE = 2000
SPARE_FDS = 200  # the test's own files, SQLite's, the server's (at most MAX_CONNECTIONS clients)


@pytest.fixture
def cfg(keyword_home: Config) -> Config:
    return keyword_home


@contextmanager
def _serve(cfg: Config, **limits: float) -> Iterator[server.SearchServer]:
    stop = threading.Event()
    srv = server.SearchServer(cfg, stop, **limits).start()
    try:
        yield srv
    finally:
        stop.set()
        assert srv.thread is not None
        srv.thread.join(5)
        assert not srv.thread.is_alive()


def _threads(pid: int | str = "self") -> int:
    """The process's OS threads, native ones included."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Threads:")).split()[1])


def _open_fds() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


@contextmanager
def _file_limit(wanted: int) -> Iterator[int]:
    """Raise this process's open-file limit towards `wanted` (never past the hard limit); the
    number of idle connections the limit leaves room for."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = wanted + SPARE_FDS if hard == resource.RLIM_INFINITY else min(wanted + SPARE_FDS, hard)
    if ceiling > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
    try:
        yield min(wanted, max(ceiling, soft) - SPARE_FDS)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _idle_connections(path: str, count: int, stack: ExitStack, seconds: float = 30.0) -> list[socket.socket]:
    """`count` connections that never send a byte. A full listen queue fails a connect at once
    (EAGAIN): that one is tried again until the server has taken the ones before it."""
    deadline = time.monotonic() + seconds
    conns: list[socket.socket] = []
    while len(conns) < count:
        sock = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        sock.settimeout(5)
        while True:
            assert time.monotonic() < deadline, f"only {len(conns)} of {count} connections made in {seconds} s"
            try:
                sock.connect(path)
                break
            except BlockingIOError:
                time.sleep(0.005)
        conns.append(sock)
    return conns


def _drain(sock: socket.socket) -> tuple[bytes, bool]:
    """What the server has sent on the connection, and whether it has closed it; never waits."""
    got = b""
    timeout = sock.gettimeout()
    sock.setblocking(False)  # a socket with a timeout would wait for data first
    try:
        for _ in range(1000):
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                return got, False
            except ConnectionResetError:
                return got, True
            if not data:
                return got, True
            got += data
    finally:
        sock.settimeout(timeout)
    raise AssertionError("the server sent more than 65 MB")


def test_two_thousand_idle_connections_add_no_thread_and_keep_no_search_out(cfg: Config) -> None:
    with _file_limit(IDLE) as count, ExitStack() as stack:
        if count < IDLE:  # a hard limit too low for 2,000: as many as it allows, said in the test's report
            warnings.warn(f"RLIMIT_NOFILE's hard limit allows {count} idle connections here, not {IDLE}")
        threads_before = _threads()
        srv = stack.enter_context(_serve(cfg))
        assert server.ask(cfg, "notmuch", {"limit": 3}) is not None  # warm: the indexes are open
        fds_before = _open_fds()

        idle = _idle_connections(str(srv.path), count, stack)
        answered = [server.ask(cfg, "notmuch", {"limit": 3}, timeout=10) for _ in range(5)]
        assert all(a is not None and len(a.hits) == 3 for a in answered), answered
        # the server: its loop and its workers, whoever connects (a few more for SQLite or the search)
        assert _threads() <= threads_before + 1 + srv.workers + 3, (_threads(), threads_before)
        # and at most max_connections of its own ends open, beside the test's `count`
        assert _open_fds() <= fds_before + len(idle) + srv.max_connections + 8
        # those it let go for newer ones were told why
        if count > srv.max_connections + 128 + 50:  # all accepted but the newest and the listen queue's
            for sock in idle[:50]:
                said, closed = _drain(sock)
                assert closed and json.loads(said) == {"protocol": 1, "id": None, "code": "bad_request", "ref": None,
                                                       "error": (
                    "request: not sent whole before a newer client needed the connection "
                    f"({srv.max_connections} open at most)")}
    assert len(idle) == count


def test_a_client_trickling_half_a_request_is_dropped_at_its_deadline_without_holding_a_worker(
        cfg: Config) -> None:
    with _serve(cfg, workers=2, timeout=2.0) as srv, ExitStack() as stack:
        slow = []
        for sock in _idle_connections(str(srv.path), 3 * srv.workers, stack):
            sock.sendall(b'{"query": "not')
            slow.append(sock)
        # more stalled clients than workers, and a search is answered at once
        answer = server.ask(cfg, "notmuch", {"limit": 3}, timeout=10)
        assert answer is not None and len(answer.hits) == 3
        assert not any(_drain(s)[1] for s in slow)  # still waiting, well within their deadline

        # a byte now and then does not put the deadline off (bounded: 40 rounds of 0.2 s)
        told: dict[int, bytes] = {}
        for _ in range(40):
            for n, sock in enumerate(slow):
                if n in told:
                    continue
                said, closed = _drain(sock)
                if closed:
                    told[n] = said
                    continue
                try:
                    sock.send(b"m")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # closed since: read on the next round
            if len(told) == len(slow):
                break
            time.sleep(0.2)
        assert len(told) == len(slow), f"{len(slow) - len(told)} slow clients still connected after 8 s"
        for said in told.values():
            assert json.loads(said) == {"protocol": 1, "id": None, "error": "request: not sent whole within 2 s",
                                        "code": "bad_request", "ref": None}
        assert server.ask(cfg, "notmuch", {"limit": 1}, timeout=10) is not None


@pytest.mark.usefixtures("cli_log")  # puts the log back on stderr afterwards
def test_a_client_that_never_reads_its_answer_is_dropped_without_holding_a_worker(cfg: Config) -> None:
    def search(query: str, **kwargs: Any) -> SearchResponse:
        found = engine.search(query, **kwargs)
        # "big": an answer of 2 MB, far over what the socket's buffers take before the client reads
        return replace(found, warnings=("w" * (2 << 20),)) if query == "big" else found

    out = io.StringIO()
    log.configure(LogConfig(format="json"), stream=out)
    with _serve(cfg, search=search, workers=1, timeout=1.0) as srv, ExitStack() as stack:
        sock = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        sock.settimeout(10)
        sock.connect(str(srv.path))
        sock.sendall(client.encode({"query": "big", "params": {}}))
        # the one worker is free at once, the answer left with the loop for a reader that never reads
        answer = server.ask(cfg, "notmuch", {"limit": 3}, timeout=10)
        assert answer is not None and len(answer.hits) == 3
        wait_until("the client to be dropped", lambda: "answer not read within 1 s" in out.getvalue(), timeout=10)
        got, closed = _drain(sock)
        assert closed and 0 < len(got) < 2 << 20  # what the buffers held, and no more


def test_a_request_over_the_cap_is_refused_saying_so_and_the_connection_closed(cfg: Config) -> None:
    with _serve(cfg) as srv:
        for body in (b"x" * (server.MAX_REQUEST + 100), b"x" * (server.MAX_REQUEST + 100) + b"\n"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(10)
                sock.connect(str(srv.path))
                try:
                    sock.sendall(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # refused before the last bytes went: the answer is waiting all the same
                reader = sock.makefile("rb")
                assert json.loads(reader.readline()) == {
                    "protocol": 1, "id": None, "error": f"request: longer than {server.MAX_REQUEST} bytes",
                    "code": "bad_request", "ref": None}
                try:
                    assert reader.read() == b""
                except ConnectionResetError:
                    pass  # closed with our surplus bytes unread: closed all the same
        # one byte under the cap is read whole and checked like any request
        padding = server.MAX_REQUEST - len(b'{"query": "", "params": {"limit": -1}}\n')
        line = b'{"query": "' + b"q" * padding + b'", "params": {"limit": -1}}\n'
        assert len(line) == server.MAX_REQUEST
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(srv.path))
            sock.sendall(line)
            answer = json.loads(sock.makefile("rb").readline())
        assert answer["code"] == "bad_request" and answer["error"].startswith("params.limit: expected")


def test_the_daemon_stops_on_sigterm_with_idle_and_slow_clients_connected(imap_box: Mailbox, real_mail,
                                                                         tmp_path: Path) -> None:
    imap_box.fill("INBOX", real_mail[:3])
    data = imap_box.config_dict()
    data["embedder"] = {"model": "none"}
    imap_box.write_config(data)
    cfg = config_mod.load()
    log = tmp_path / "daemon.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "oaken.cli", "sync", "--daemon", "--no-index"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
    try:
        try:
            wait_until("the search socket", lambda: client.ask_raw(cfg, "", {}, timeout=10) is not None, timeout=60)
        except AssertionError as e:
            raise AssertionError(f"{e}; the daemon's log:\n{log.read_text()[-3000:]}") from None
        threads_before = _threads(proc.pid)
        path = str(server.socket_path(cfg))
        with ExitStack() as stack:
            idle = _idle_connections(path, 500, stack)
            for sock in idle[-3:]:
                sock.sendall(b'{"query": "hal')  # stalled half-way
            assert client.ask_raw(cfg, "", {}, timeout=10) is not None
            assert _threads(proc.pid) <= threads_before + 3
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
        text = log.read_text()
        assert "daemon stopped" in text and "Traceback" not in text, text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
