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
import sys

from oaken import paths
from oaken.paths import SOCKET_NAME  # noqa: F401 - re-exported for the server
from oaken.protocol import PARAMS, PROTOCOL, DaemonError, exchange, read_reply, request  # noqa: F401 - re-exported

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Callable

    from oaken.config import Config
_sent = 0  # requests this process has sent: the id's second half


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
        where = paths.usual_socket_file()
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
    data = exchange(path, encode(request(request_id, query, params)), timeout)
    if data is None:
        return None
    return read_reply(data, request_id, json.loads)


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
