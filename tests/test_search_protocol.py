"""The search socket's protocol: every request carries the protocol and an id, every reply the
daemon's protocol and the id it answers. A daemon of another protocol, or one that fails inside,
is said on stderr and searched around; a request the daemon refuses is reported, not searched
around; an answer to another request is never taken. And only the socket's owner may connect."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pytest

from oaken import log
from oaken.cli import main
from oaken.config import Config, EmbedderConfig, LogConfig, PathsConfig
from oaken.search import client, engine, server
from tests.search_fixtures import _keyword_home  # noqa: F401  (the keyword_home fixture)

REFUSED_LIMIT = 2**31  # --limit the command lets through and the socket refuses
MAX_REQUEST_ID = 128  # characters of a request id given as text (server.MAX_REQUEST_ID)


@pytest.fixture
def cfg(keyword_home: Config, oaken_home: Path) -> Config:
    """The notmuch mailbox, keyword only, in OAKEN_HOME: the command finds the same config."""
    (oaken_home / "config.toml").write_text('[embedder]\nmodel = "none"\n')
    return keyword_home


@contextmanager
def _serve(cfg: Config, search: Any = None) -> Iterator[server.SearchServer]:
    """A daemon's server, searching with `search` (default: the real engine's, never `here`'s)."""
    stop = threading.Event()
    srv = server.SearchServer(cfg, stop, search=search or _Recorder()).start()
    try:
        yield srv
    finally:
        stop.set()
        assert srv.thread is not None
        srv.thread.join(5)


def _raw(path: Path | str, request: Any) -> dict[str, Any]:
    """One request line over the real socket, as sent; the reply as JSON."""
    line = request if isinstance(request, bytes) else (json.dumps(request) + "\n").encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(path))
        s.sendall(line)
        return json.loads(s.makefile("rb").readline())


class _Recorder:
    """engine.search for the daemon, counting the searches it runs."""

    def __init__(self, search: Any = engine.search):
        self.queries: list[str] = []
        self._search = search

    def __call__(self, query: str, **kwargs: Any) -> Any:
        self.queries.append(query)
        return self._search(query, **kwargs)


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The searches the command runs in its own process (engine.search as the command calls it)."""
    searched: list[str] = []
    search = engine.search

    def in_process(query: str, **kwargs: Any) -> Any:
        searched.append(query)
        return search(query, **kwargs)

    monkeypatch.setattr(engine, "search", in_process)
    return searched


def _command(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    rc = main(["search", "--json", *args])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.strip() else None), err


# ---- the protocol on the wire --------------------------------------------------------------------


def test_each_reply_carries_the_protocol_and_echoes_the_id(cfg: Config) -> None:
    with _serve(cfg) as srv:
        for request_id in ("4242-1", 7, -3, "x" * MAX_REQUEST_ID):
            answer = _raw(srv.path, {"protocol": client.PROTOCOL, "id": request_id, "query": "notmuch",
                                     "params": {"limit": 2}})
            assert answer["protocol"] == client.PROTOCOL == 1 and answer["id"] == request_id
            assert len(answer["hits"]) == 2
        refused = _raw(srv.path, {"protocol": 1, "id": "r-1", "query": "notmuch", "params": {"limit": -1}})
        assert refused["protocol"] == 1 and refused["id"] == "r-1" and refused["code"] == "bad_request"
        # no protocol: read as protocol 1 (the request of before the handshake), answered with no id
        old = _raw(srv.path, {"query": "notmuch", "params": {"limit": 1}})
        assert old["protocol"] == 1 and old["id"] is None and len(old["hits"]) == 1
        # what the daemon could not read as far as an id is refused with a null id
        assert _raw(srv.path, b"not json\n")["id"] is None
        # the client takes the response without the envelope's fields
        answer = client.ask_at(str(srv.path), "notmuch", {"limit": 2})
        assert answer is not None and "protocol" not in answer and "id" not in answer and len(answer["hits"]) == 2


@pytest.mark.parametrize("request_id, shown", [
    ("", '""'), ("x" * (MAX_REQUEST_ID + 1), '"' + "x" * 56 + "..."), (True, "true"), (1.5, "1.5"),
    ([1], "[1]"), (2**63, str(2**63)),
])
def test_an_id_that_is_not_text_or_a_whole_number_is_refused(cfg: Config, request_id: Any, shown: str) -> None:
    with _serve(cfg, search=_Recorder()) as srv:
        answer = _raw(srv.path, {"protocol": 1, "id": request_id, "query": "notmuch"})
    assert answer == {"protocol": 1, "id": None, "code": "bad_request", "ref": None, "error": (
        "id: expected a request id (text of 1 to 128 characters, or a whole number from -9223372036854775808 "
        f"to 9223372036854775807) or null, got {shown}")}


def test_a_request_of_another_protocol_is_refused_naming_both(cfg: Config) -> None:
    searched = _Recorder()
    with _serve(cfg, search=searched) as srv:
        for theirs in (0, 2, 99):
            answer = _raw(srv.path, {"protocol": theirs, "id": "m-1", "query": "notmuch", "whatever": "v2 sends"})
            assert answer == {"protocol": 1, "id": "m-1", "code": "protocol_mismatch", "ref": None, "error": (
                f"protocol: the request speaks protocol {theirs}, this daemon protocol 1; restart the daemon "
                "(`oaken sync --daemon`) with the oaken that searches")}
        for bad in ("1", 1.0, True, None, -1):
            answer = _raw(srv.path, {"protocol": bad, "id": "m-2", "query": "notmuch"})
            assert answer["code"] == "bad_request" and answer["id"] == "m-2"
            assert answer["error"].startswith("protocol: expected a whole number (this daemon speaks protocol 1)")
    assert searched.queries == []


# ---- the command: what it says, and when it searches in its own process ----------------------------


def test_a_daemon_of_another_protocol_is_said_and_searched_around(cfg: Config, monkeypatch: pytest.MonkeyPatch,
                                                                 here: list[str], capsys) -> None:
    daemon = _Recorder()
    with _serve(cfg, search=daemon):
        rc, alone, err = _command(capsys, "notmuch")
        assert rc == 0 and daemon.queries == ["notmuch"] and here == [] and err == ""  # the same protocol
        monkeypatch.setattr(server, "PROTOCOL", 2, raising=False)  # a daemon of a newer oaken
        rc, answer, err = _command(capsys, "notmuch")
    assert daemon.queries == ["notmuch"]  # refused, not searched
    assert rc == 0 and here == ["notmuch"]  # searched here instead
    assert ("oaken: warning: the running search daemon speaks protocol 2, this oaken protocol 1: restart the "
            "daemon (`oaken sync --daemon`) with this oaken; searching in this process instead\n") in err
    assert answer is not None and alone is not None
    for d in (alone, answer):
        d.pop("timings")
    assert answer == alone and answer["hits"]


def test_a_daemon_from_before_the_handshake_is_said_and_searched_around(
        cfg: Config, monkeypatch: pytest.MonkeyPatch, here: list[str], capsys) -> None:
    """The daemon of the oaken before protocol 1 refused the new fields as a bad request, with no
    protocol in its reply: a bad request of an older daemon, not of the user."""
    old_refusal = {"error": 'request: unknown field "protocol"; a request holds query and params',
                   "code": "bad_request", "ref": None}
    monkeypatch.setattr(server, "reply", lambda _id, _body: client.encode(old_refusal))
    with _serve(cfg):
        rc, answer, err = _command(capsys, "notmuch")
    assert rc == 0 and here == ["notmuch"] and answer is not None and answer["hits"]
    assert ("oaken: warning: the running search daemon speaks no protocol (an oaken from before protocol 1), "
            "this oaken protocol 1: restart the daemon (`oaken sync --daemon`) with this oaken; searching in "
            "this process instead\n") in err


@pytest.mark.usefixtures("cli_log")  # puts the log back on stderr afterwards
def test_a_failure_inside_the_daemon_is_said_and_searched_around(cfg: Config, here: list[str], capsys) -> None:
    def failing(query: str, **_kwargs: Any) -> Any:
        raise RuntimeError("the index broke")

    out = io.StringIO()
    log.configure(LogConfig(format="json"), stream=out)
    with _serve(cfg, search=failing):
        rc, answer, err = _command(capsys, "notmuch")
    ref = next(json.loads(line)["ref"] for line in out.getvalue().splitlines()
               if json.loads(line)["event"] == "search.internal_error")
    assert rc == 0 and here == ["notmuch"] and answer is not None and answer["hits"]
    assert (f"oaken: warning: the search daemon could not answer: internal error; see the daemon log (ref {ref}); "
            "searching in this process instead\n") in err
    assert "the index broke" not in err


def test_a_request_the_daemon_refuses_is_reported_not_searched_around(cfg: Config, here: list[str],
                                                                     capsys) -> None:
    daemon = _Recorder()
    with _serve(cfg, search=daemon) as srv:
        rc, answer, err = _command(capsys, "--limit", str(REFUSED_LIMIT), "notmuch")
        assert answer is None and rc == 1
        assert err == ("oaken: the search daemon refused the request: params.limit: expected a whole number "
                       "from 0 to 2147483647, got 2147483648\n")
        with pytest.raises(client.DaemonError) as refused:
            client.ask_for(cfg, "notmuch", {"limit": REFUSED_LIMIT}, warn=pytest.fail)
        assert not refused.value.fallback
        with pytest.raises(client.DaemonError) as refused:
            client.ask_at(str(srv.path), "notmuch", {"sort": "newest"})
        assert not refused.value.fallback and "params.sort" in str(refused.value)
    assert daemon.queries == [] and here == []  # neither the daemon nor this process searched


@pytest.mark.parametrize("reply_id", ["another-1", None, 17])
def test_an_answer_to_another_request_is_never_taken(cfg: Config, monkeypatch: pytest.MonkeyPatch,
                                                     here: list[str], capsys, reply_id: Any) -> None:
    answer_with = server.reply
    monkeypatch.setattr(server, "reply", lambda _id, body: answer_with(reply_id, body))
    with _serve(cfg) as srv:
        with pytest.raises(client.DaemonError) as taken:
            client.ask_at(str(srv.path), "notmuch", {})
        assert taken.value.fallback
        assert str(taken.value).startswith(f"the search daemon answered another request (id {json.dumps(reply_id)}, "
                                           f'not "{os.getpid()}-')
        rc, answer, err = _command(capsys, "notmuch")
    assert rc == 0 and here == ["notmuch"] and answer is not None and answer["hits"]
    assert (f"oaken: warning: the search daemon answered another request (id {json.dumps(reply_id)}, "
            f'not "{os.getpid()}-') in err
    assert "); searching in this process instead\n" in err


def test_each_request_of_a_process_has_its_own_id(cfg: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    parse = server.parse_request

    def recording(line: bytes, categories: Any) -> Any:
        parsed = parse(line, categories)
        seen.append(parsed[0])
        return parsed

    monkeypatch.setattr(server, "parse_request", recording)
    with _serve(cfg) as srv:
        for _ in range(3):
            assert client.ask_at(str(srv.path), "notmuch", {"limit": 1}) is not None
    assert len(set(seen)) == 3 and all(str(i).startswith(f"{os.getpid()}-") for i in seen)


# ---- who may connect ---------------------------------------------------------------------------


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A directory every user may pass through (pytest's own are root's, 0700), removed after."""
    parent = Path(tempfile.mkdtemp(prefix="oaken-protocol-"))
    parent.chmod(0o755)
    try:
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _cfg_in(data: Path) -> Config:
    return replace(Config(), embedder=EmbedderConfig(model="none"), paths=PathsConfig(data_dir=str(data)))


def test_the_socket_is_0600_in_a_0700_directory(open_parent: Path) -> None:
    data = open_parent / "data"
    data.mkdir(mode=0o755)  # made by someone else, open to all: the daemon closes it
    with _serve(_cfg_in(data), search=_Recorder()) as srv:
        assert stat.S_ISSOCK(srv.path.stat().st_mode)
        assert stat.S_IMODE(srv.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        assert srv.path.stat().st_uid == data.stat().st_uid == os.geteuid()


_PROBE = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except PermissionError:
    print("EACCES")
except OSError as e:
    print("errno", e.errno, e)
else:
    print("connected")
"""


def _as_nobody(path: Path) -> str:
    """Whether user nobody (no groups) can connect to `path`: EACCES, connected, or another errno."""
    for python in (os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"):
        try:
            proc = subprocess.run([python, "-I", "-S", "-c", _PROBE, str(path)], user="nobody", group="nogroup",
                                  extra_groups=[], cwd="/", capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode == 0:
            return proc.stdout.strip()
    pytest.skip("no Python that user nobody may run")


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to user nobody needs root")
def test_another_user_cannot_connect(open_parent: Path) -> None:
    data = open_parent / "data"
    with _serve(_cfg_in(data), search=_Recorder()) as srv:
        assert _as_nobody(srv.path) == "EACCES"  # the directory, 0700, keeps them out
        data.chmod(0o711)  # were it passable: the socket itself, 0600, keeps them out
        assert _as_nobody(srv.path) == "EACCES"
        srv.path.chmod(0o666)  # the probe does connect where it may: its EACCES was the mode's
        assert _as_nobody(srv.path) == "connected"
        srv.path.chmod(0o600)
        data.chmod(0o700)
        assert client.ask_at(str(srv.path), "", {}) is not None  # and the owner still searches


def test_after_a_fallback_the_command_does_not_say_no_daemon_is_running(
        cfg: Config, monkeypatch: pytest.MonkeyPatch, here: list[str], capsys) -> None:
    from oaken.mailbox import Mailbox

    monkeypatch.setattr(Mailbox, "loads_model", lambda _self: True)  # what it says when the model is loaded here
    monkeypatch.setattr(server, "PROTOCOL", 2, raising=False)
    with _serve(cfg):
        rc, answer, err = _command(capsys, "notmuch")
    assert rc == 0 and here == ["notmuch"] and "speaks protocol 2" in err
    assert "no search daemon is running" not in err
