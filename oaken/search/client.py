"""The client half of the daemon's search socket, kept light on purpose: json and socket only.

A cold `oaken search` that a warm daemon answers should cost little more than starting Python,
so this path builds no typed response: it reads the JSON answer and `View` lets the table
renderer read it like a `SearchResponse`. `oaken.search.server` speaks the server half.

The protocol (PROTOCOL): one JSON line each way on a connection of its own.
  request  {"protocol": 1, "id": "4242-1", "query": "...", "params": {...}}
  reply    {"protocol": 1, "id": "4242-1", **the SearchResponse as a dict}
       or  {"protocol": 1, "id": "4242-1", "error": "...", "code": ..., "ref": ...}
The reply carries the daemon's protocol and echoes the request's id; an error reply's id is null
when the daemon could not read the request far enough to find one (not JSON, too long, not sent
in time). `code`: "bad_request" (the request as sent is refused: `error` names the field),
"protocol_mismatch" (the request speaks another protocol), "internal_error" (the daemon failed;
`ref` names its log line).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from oaken.errors import OakenError
from oaken.paths import SOCKET_NAME  # noqa: F401 - re-exported for the server

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Callable

    from oaken.config import Config
# The socket's protocol: raised when a field of a request or a reply changes meaning or goes away.
PROTOCOL = 1
# What a client may pass: the keyword arguments of engine.search, nothing else.
PARAMS = (
    "limit",
    "offset",
    "account",
    "thread",
    "sender",
    "after",
    "before",
    "labels",
    "disposition",
    "unread",
    "categories",
    "min_priority",
    "sort",
    "explain",
)
_sent = 0  # requests this process has sent: the id's second half


class DaemonError(OakenError):
    """A daemon answered, but not with a response. `fallback`: whether this process may search
    instead (a daemon of another protocol, one that failed inside, an answer that is not this
    request's), or not (the daemon refused the request as sent, and its reason stands)."""

    def __init__(self, message: str, fallback: bool):
        super().__init__(message)
        self.fallback = fallback


def socket_path(config: Config) -> Path:
    from oaken import config as config_mod

    return config_mod.resolve_data_dir(config) / SOCKET_NAME


def encode(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, default=list) + "\n").encode()


def ask_raw(config: Config, query: str, params: dict[str, Any], timeout: float = 60.0) -> dict[str, Any] | None:
    """The daemon's answer as the response's JSON dict, or None when no daemon answers; DaemonError
    when one answers with no response."""
    return ask_at(str(socket_path(config)), query, params, timeout)


def ask_for(
    config: Config | None, query: str, params: dict[str, Any], warn: Callable[[str], None] | None = None
) -> dict[str, Any] | None:
    """The answer of the daemon serving `config`'s data directory; with no config (no --config),
    of the one the usual config file names, found without loading the typed config.

    None: search in this process. When a daemon answered but this process may search instead
    (DaemonError.fallback), why is said to `warn` (default: a line on stderr), with that this
    process searches instead; a request the daemon refused raises its DaemonError."""
    try:
        if config is not None:
            return ask_raw(config, query, params)
        from oaken import paths

        where = paths.socket_file()
        return None if where is None else ask_at(where, query, params)
    except DaemonError as e:
        if not e.fallback:
            raise
        said = f"{e}; searching in this process instead"
        if warn is None:
            print(f"oaken: warning: {said}", file=sys.stderr)
        else:
            warn(said)
        return None


def ask_at(path: str, query: str, params: dict[str, Any], timeout: float = 60.0) -> dict[str, Any] | None:
    """ask_raw for a socket path found without the typed config (oaken.paths.socket_file)."""
    global _sent
    _sent += 1
    request_id = f"{os.getpid()}-{_sent}"
    request = {
        "protocol": PROTOCOL,
        "id": request_id,
        "query": query,
        "params": {k: v for k, v in params.items() if k in PARAMS},
    }
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            _connect(sock, path)
        except OSError:
            return None  # no socket, a stale file, no one listening: no daemon
        try:
            sock.sendall(encode(request))
            data = sock.makefile("rb").readline()
        except TimeoutError:
            raise DaemonError(f"the search daemon did not answer within {timeout:g} s", True) from None
        except OSError as e:
            raise DaemonError(f"the search daemon's connection failed ({e.strerror or e})", True) from None
    return _answer(data, request_id)


def _answer(data: bytes, request_id: str) -> dict[str, Any]:
    """The response of a reply line to the request `request_id`, without protocol and id."""
    if not data:
        raise DaemonError("the search daemon closed the connection without answering", True)
    try:
        answer = json.loads(data)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise DaemonError("the search daemon's answer is not a JSON object", True)
    protocol = answer.pop("protocol", None)
    if type(protocol) is not int or protocol != PROTOCOL:  # True == 1, but is no protocol
        theirs = (
            f"protocol {protocol}"
            if type(protocol) is int
            else "no protocol (an oaken from before protocol 1)"
            if protocol is None
            else f"protocol {protocol!r}"
        )
        raise DaemonError(
            f"the running search daemon speaks {theirs}, this oaken protocol {PROTOCOL}: "
            "restart the daemon (`oaken sync --daemon`) with this oaken",
            True,
        )
    answer_id = answer.pop("id", None)
    error = answer.get("error")
    # an error with no id: the daemon could not read this connection's request as far as its id
    if answer_id != request_id and not (answer_id is None and error is not None):
        raise DaemonError(
            f"the search daemon answered another request (id {json.dumps(answer_id)}, not {json.dumps(request_id)})",
            True,
        )
    if error is None:
        return answer
    if answer.get("code") == "bad_request":  # this process would refuse the same parameters
        raise DaemonError(f"the search daemon refused the request: {error}", False)
    raise DaemonError(f"the search daemon could not answer: {error}", True)


def _connect(sock: socket.socket, path: str, tries: int = 20) -> None:
    """Connect, waiting up to about a second while the daemon's listen queue is full (a Unix
    socket with a timeout then fails at once with EAGAIN, and the command would load the model)."""
    for _ in range(tries - 1):
        try:
            return sock.connect(path)
        except BlockingIOError:
            time.sleep(0.05)
    sock.connect(path)


class View(dict):
    """A response's JSON read with attribute access (`view.hits[0].why[0].rank`), as render does."""

    def __getattr__(self, name: str) -> Any:
        try:
            return _wrap(self[name])
        except KeyError:
            raise AttributeError(name) from None


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return View(value)
    if isinstance(value, list):
        return tuple(_wrap(v) for v in value)
    return value
