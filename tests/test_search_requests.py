"""The search socket checks every request field before it searches, refusing a wrong one by name,
and never tells the client what went wrong inside the daemon: that goes to the daemon's log."""

from __future__ import annotations

import io
import json
import socket
import threading
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterator

import pytest

from oaken import log
from oaken.config import Config, EmbedderConfig, LogConfig, PathsConfig
from oaken.search import client, server
from tests.search_fixtures import _keyword_home  # noqa: F401  (the keyword_home fixture)

COUNT = "a whole number from 0 to 2147483647"


@pytest.fixture
def cfg(keyword_home: Config) -> Config:
    return keyword_home


@contextmanager
def _serve(cfg: Config, search: Any = None) -> Iterator[str]:
    stop = threading.Event()
    srv = server.SearchServer(cfg, stop, search=search).start()
    try:
        yield str(srv.path)
    finally:
        stop.set()
        assert srv.thread is not None
        srv.thread.join(5)


@pytest.fixture(scope="module")
def sock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with no mail, for requests refused before any search: one for the module, as
    each server takes half a second to stop."""
    searched: list[str] = []

    def search(query: str, **_kwargs: Any) -> Any:
        searched.append(query)
        raise AssertionError("a refused request reached the search")

    data = tmp_path_factory.mktemp("requests")
    cfg = replace(Config(), embedder=EmbedderConfig(model="none"), paths=PathsConfig(data_dir=str(data)))
    with _serve(cfg, search) as path:
        yield path
    assert searched == []


def ask(path: str, request: Any) -> dict[str, Any]:
    """One request line as sent (bytes) or as JSON, over the real socket; the JSON answer."""
    line = request if isinstance(request, bytes) else (json.dumps(request) + "\n").encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(line)
        return json.loads(s.makefile("rb").readline())


WRONG_PARAMS = [
    ({"limit": "abc"}, f'params.limit: expected {COUNT}, got "abc"'),
    ({"limit": -5}, f"params.limit: expected {COUNT}, got -5"),
    ({"limit": True}, f"params.limit: expected {COUNT}, got true"),
    ({"offset": 1e30}, f"params.offset: expected {COUNT}, got 1e+30"),
    ({"offset": 10**30}, f"params.offset: expected {COUNT}, got 1000000000000000000000000000000"),
    ({"thread": 10**30}, "params.thread: expected a thread number (a hit's `thread`, from 0 to 9223372036854775807) "
                         "or null, got 1000000000000000000000000000000"),
    ({"bogus": 1}, 'params: unknown parameter "bogus"; expected one of limit, offset, account, thread, sender, '
                   "after, before, labels, disposition, unread, categories, min_priority, sort, explain"),
    ({"account": ["work"]}, 'params.account: expected an account name or null, got ["work"]'),
    ({"sender": 7}, "params.sender: expected an address or name, a list of them, or null, got 7"),
    ({"after": "2024-02-30"}, 'params.after: expected a date YYYY-MM-DD, Unix seconds, or null, got "2024-02-30"'),
    ({"before": float("inf")}, "params.before: expected a date YYYY-MM-DD, Unix seconds, or null, got Infinity"),
    ({"labels": ["foo", 1]}, 'params.labels: expected a label, a list of labels, or null, got ["foo", 1]'),
    ({"disposition": "trash"}, "params.disposition: expected one of inbox, archived, discarded or anywhere, "
                               'a list of them, or null, got "trash"'),
    ({"categories": ["nope"]}, "params.categories: expected one of work, personal, finance, travel, shopping, "
                               'newsletters, notifications, social ([triage] categories), a list of them, or null, '
                               'got ["nope"]'),
    ({"unread": "yes"}, 'params.unread: expected true, false or null, got "yes"'),
    ({"min_priority": 4}, "params.min_priority: expected 0, 1, 2, 3 or null, got 4"),
    ({"sort": "newest"}, 'params.sort: expected "relevance" or "date", got "newest"'),
    ({"explain": 1}, "params.explain: expected true or false, got 1"),
    ({"unread": "x" * 100}, 'params.unread: expected true, false or null, got "' + "x" * 56 + "..."),  # cut short
]


@pytest.mark.parametrize("params, error", WRONG_PARAMS,
                         ids=[f"{k}={json.dumps(v)[:24]}" for p, _ in WRONG_PARAMS for k, v in p.items()])
def test_a_wrong_param_is_refused_by_name(sock: str, params: dict[str, Any], error: str) -> None:
    assert ask(sock, {"query": "notmuch", "params": params}) == {"protocol": 1, "id": None, "error": error,
                                                                  "code": "bad_request", "ref": None}


@pytest.mark.parametrize("line, error", [
    (b"not json\n", 'request: expected one line of JSON: {"query": "...", "params": {...}}'),
    (b"\xff\xfe\n", 'request: expected one line of JSON: {"query": "...", "params": {...}}'),
    (b"[" * 100_000 + b"\n", 'request: expected one line of JSON: {"query": "...", "params": {...}}'),
    (b"[1]\n", 'request: expected a JSON object {"query": "...", "params": {...}}, got [1]'),
    (b'{"query": 5}\n', "query: expected text (the search, may be empty), got 5"),
    (b'{"params": {}}\n', "query: expected text (the search, may be empty), got null"),
    (b'{"query": "x", "limit": 5}\n',
     'request: unknown field "limit"; a request holds protocol, id, query, params and render'),
    (b'{"query": "x", "params": [1]}\n', "params: expected a JSON object of search parameters, got [1]"),
    (b'{"query": "x", "render": {"format": "text", "color": false}}\n',
     'render: expected {"format": text or json or jsonl or ids, "color": true or false, "width": 1 to 10000}, '
     'got {"format": "text", "color": false}'),
    (b'{"query": "x", "render": {"format": "html", "color": false, "width": 80}}\n',
     'render: expected {"format": text or json or jsonl or ids, "color": true or false, "width": 1 to 10000}, '
     'got {"format": "html", "color": false, "width": 80}'),
    (b'{"query": "x", "render": {"format": "ids", "color": 1, "width": 80}}\n',
     'render: expected {"format": text or json or jsonl or ids, "color": true or false, "width": 1 to 10000}, '
     'got {"format": "ids", "color": 1, "width": 80}'),
    (b'{"query": "x", "render": {"format": "text", "color": true, "width": 0}}\n',
     "render.width: expected 1 to 10000, got 0"),
], ids=["not-json", "not-utf8", "too-deep", "not-an-object", "query-not-text", "no-query",
        "unknown-field", "params-not-an-object", "render-missing-width", "render-format", "render-color",
        "render-width"])
def test_a_malformed_request_is_refused_saying_what_a_request_is(sock: str, line: bytes, error: str) -> None:
    assert ask(sock, line) == {"protocol": 1, "id": None, "error": error, "code": "bad_request", "ref": None}


def test_every_param_the_client_may_send_is_checked(sock: str) -> None:
    for name in client.PARAMS:
        answer = ask(sock, {"query": "notmuch", "params": {name: {"not": "a value"}}})
        assert answer["code"] == "bad_request" and answer["error"].startswith(f"params.{name}: expected "), name


@pytest.fixture
def live(cfg: Config) -> Iterator[str]:
    """A server over real mail, searching with the engine."""
    with _serve(cfg) as path:
        yield path


def test_values_at_the_edges_of_their_ranges_are_answered(live: str) -> None:
    answer = ask(live, {"query": "notmuch", "params": {
        "limit": 2**31 - 1, "offset": 2**31 - 1, "thread": 2**63 - 1, "after": "2009-11-17", "before": 4102444800.5,
        "disposition": ["Inbox", "anywhere"], "categories": "Work", "labels": ["inbox"], "sender": None,
        "unread": False, "min_priority": 0, "sort": "date", "explain": False}})
    assert "error" not in answer and answer["hits"] == []
    assert any("at most 1000 hits" in w for w in answer["warnings"])  # the engine still caps the limit
    found = ask(live, {"query": "notmuch", "params": {"limit": 3}})
    assert len(found["hits"]) == 3
    assert ask(live, {"query": "notmuch"})["hits"]  # params may be left out


@pytest.mark.usefixtures("cli_log")  # puts the log back on stderr afterwards
def test_a_failure_inside_the_daemon_is_logged_there_not_sent(cfg: Config) -> None:
    def failing(query: str, **_kwargs: Any) -> Any:
        raise OverflowError(f"int too big to convert in /home/me/private/{query}")

    out = io.StringIO()
    log.configure(LogConfig(format="json"), stream=out)
    with _serve(cfg, search=failing) as path:
        answer = ask(path, {"query": "notmuch", "params": {"limit": 5}})
        ref = answer["ref"]
        assert answer == {"protocol": 1, "id": None, "error": f"internal error; see the daemon log (ref {ref})",
                          "code": "internal_error", "ref": ref}
        assert len(ref) == 8
        with pytest.raises(client.DaemonError) as failed:  # the command says so and searches in its own process
            client.ask_at(path, "notmuch", {})
        assert failed.value.fallback
        assert "could not answer: internal error; see the daemon log (ref " in str(failed.value)
    text = json.dumps(answer)
    assert "Overflow" not in text and "private" not in text and "Traceback" not in text
    logged = [json.loads(line) for line in out.getvalue().splitlines()]
    failure = next(e for e in logged if e["event"] == "search.internal_error" and e["ref"] == ref)
    assert "OverflowError: int too big to convert in /home/me/private/notmuch" in failure["exception"]
    assert "Traceback" in failure["exception"] and failure["query"] == "notmuch"
