"""The daemon's search socket: a warm process (embedder loaded, indexes open) answers `oaken search`.

A Unix socket in the data directory, mode 0600 (only its owner may search the mail). One JSON
line in, one JSON line out: {"query": ..., "params": {...}} -> the SearchResponse as a dict, or
{"error": "..."}. A client that finds no socket, or a dead one, searches in its own process.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from dataclasses import asdict
from typing import Any, Callable

from oaken import config as config_mod
from oaken.config import Config
from oaken.search.client import PARAMS, SOCKET_NAME, ask_raw, socket_path  # noqa: F401 - socket_path, SOCKET_NAME: re-exported
from oaken.search.client import encode as _encode
from oaken.search.types import Explain, Hit, MatchedChunk, RetrieverTrace, SearchResponse, Why

MAX_REQUEST = 1 << 20


def response_from_dict(data: dict[str, Any]) -> SearchResponse:
    """Rebuild the typed response from its JSON, so both paths print the same thing."""
    hits = tuple(
        Hit(**{**h, "folders": tuple(h["folders"]), "labels": tuple(h["labels"]),
               "why": tuple(Why(**w) for w in h["why"]),
               "matched_chunks": tuple(MatchedChunk(**c) for c in h["matched_chunks"]),
               "copies": tuple(h.get("copies", ()))})
        for h in data["hits"]
    )
    explain = data.get("explain")
    if explain:
        explain = Explain(parsed=explain["parsed"],
                          retrievers=tuple(RetrieverTrace(**r) for r in explain["retrievers"]),
                          rrf_k=explain["rrf_k"], weights=explain["weights"])
    return SearchResponse(**{**data, "hits": hits, "warnings": tuple(data["warnings"]), "explain": explain})


class SearchServer:
    """Answers searches on the socket until `stop_event` is set; one thread per connection."""

    def __init__(self, config: Config, stop_event: threading.Event,
                 search: Callable[..., SearchResponse] | None = None):
        self.config = config
        self.stop_event = stop_event
        self.path = socket_path(config)
        if search is None:
            from oaken.search import engine

            search = engine.search
        self._search = search
        self._sock: socket.socket | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> "SearchServer":
        config_mod.ensure_data_dir(self.config)
        try:
            self.path.unlink()  # a socket left by a killed daemon (the daemon lock says we are the only one)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(16)
        sock.settimeout(0.5)
        self._sock = sock
        self.thread = threading.Thread(target=self._loop, name="oaken-search-server", daemon=True)
        self.thread.start()
        return self

    def warm(self) -> None:
        """Load the embedder and open the indexes now, not on the first search."""
        try:
            self._search("warm up", limit=1, config=self.config)
        except Exception:  # noqa: BLE001 - a failing warm-up shows up again, as degraded, on real searches
            pass

    def _loop(self) -> None:
        assert self._sock is not None
        while not self.stop_event.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                break
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()
        self.close()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            try:
                data = conn.makefile("rb").readline(MAX_REQUEST)
                request = json.loads(data)
                query = request.get("query", "")
                params = {k: v for k, v in (request.get("params") or {}).items() if k in PARAMS}
                response = self._search(query if isinstance(query, str) else "", config=self.config, **params)
                conn.sendall(_encode(asdict(response)))
            except Exception as e:  # noqa: BLE001 - the client falls back to searching itself
                try:
                    conn.sendall(_encode({"error": f"{type(e).__name__}: {e}"}))
                except OSError:
                    pass

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                try:
                    self.path.unlink()
                except FileNotFoundError:
                    pass


def ask(config: Config, query: str, params: dict[str, Any], timeout: float = 60.0) -> SearchResponse | None:
    """The daemon's answer, or None when no daemon answers (then search in this process)."""
    answer = ask_raw(config, query, params, timeout)
    return None if answer is None else response_from_dict(answer)
