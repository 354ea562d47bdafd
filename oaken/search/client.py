"""The client half of the daemon's search socket, kept light on purpose: json and socket only.

A cold `oaken search` that a warm daemon answers should cost little more than starting Python,
so this path builds no typed response: it reads the JSON answer and `View` lets the table
renderer read it like a `SearchResponse`. `oaken.search.server` speaks the server half.
"""

from __future__ import annotations

import json
import socket
import time

from oaken.paths import SOCKET_NAME  # noqa: F401 - re-exported for the server

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from oaken.config import Config
# What a client may pass: the keyword arguments of engine.search, nothing else.
PARAMS = ("limit", "offset", "account", "thread", "sender", "after", "before", "labels", "disposition", "unread",
          "categories", "min_priority", "sort", "explain")


def socket_path(config: Config) -> Path:
    from oaken import config as config_mod

    return config_mod.resolve_data_dir(config) / SOCKET_NAME


def encode(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, default=list) + "\n").encode()


def ask_raw(config: Config, query: str, params: dict[str, Any], timeout: float = 60.0) -> dict[str, Any] | None:
    """The daemon's answer as the response's JSON dict, or None when no daemon answers."""
    return ask_at(str(socket_path(config)), query, params, timeout)


def ask_for(config: Config | None, query: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The answer of the daemon serving `config`'s data directory; with no config (no --config),
    of the one the usual config file names, found without loading the typed config."""
    if config is not None:
        return ask_raw(config, query, params)
    from oaken import paths

    where = paths.socket_file()
    return None if where is None else ask_at(where, query, params)


def ask_at(path: str, query: str, params: dict[str, Any], timeout: float = 60.0) -> dict[str, Any] | None:
    """ask_raw for a socket path found without the typed config (oaken.paths.socket_file)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            _connect(sock, path)
            sock.sendall(encode({"query": query, "params": {k: v for k, v in params.items() if k in PARAMS}}))
            data = sock.makefile("rb").readline()
    except OSError:
        return None
    try:
        answer = json.loads(data)
    except ValueError:
        return None
    if not isinstance(answer, dict) or "error" in answer:
        return None
    return answer


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
