"""The daemon's search socket: a warm process (embedder loaded, indexes open) answers `oaken search`.

A Unix socket in the data directory, mode 0600 (only its owner may search the mail). One JSON
line in, one JSON line out: {"query": ..., "params": {...}} -> the SearchResponse as a dict, or
an ErrorReply {"error": ..., "code": ...}. A client that finds no socket, or a dead one, or gets
an error, searches in its own process.

A request is checked whole before it is run: every field of the wrong type or out of range is
refused with its name and what it expects, where an in-process search would warn and ignore it
(a program sent it, not a person typing). A failure inside the daemon is logged here with its
traceback; the client is told only that there was one and the reference of the log line.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import socket
import threading
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from oaken import config as config_mod
from oaken import log
from oaken.config import DISPOSITIONS, Config
from oaken.errors import OakenError
from oaken.search.client import PARAMS, SOCKET_NAME, ask_raw, socket_path  # noqa: F401 - socket_path, SOCKET_NAME: re-exported
from oaken.search.client import encode as _encode
from oaken.search.types import Explain, Hit, MatchedChunk, RetrieverTrace, SearchResponse, Why

MAX_REQUEST = 1 << 20
MAX_COUNT = (1 << 31) - 1  # limit and offset: far more mail than one mailbox holds
MAX_ID = (1 << 63) - 1  # a thread number: SQLite's largest integer


class RequestError(OakenError):
    """A request the socket refuses as sent; the message names the field and what it expects."""


@dataclass(frozen=True)
class ErrorReply:
    """The socket's answer when it has no SearchResponse to give."""

    error: str  # one line for a person
    code: str  # "bad_request": the request is at fault, as `error` says; "internal_error": the daemon is
    ref: str | None = None  # internal_error: the `ref` of the daemon's log line that holds the traceback


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _texts(value: Any) -> tuple[str, ...] | None:
    """A text or a list of texts, none blank, as a tuple; None when `value` is anything else."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else None
    if not items or not all(isinstance(v, str) and v.strip() for v in items):
        return None
    return tuple(items)


def _when(value: Any) -> bool:
    from oaken.search.query import day_start

    if isinstance(value, str):
        return day_start(value.strip()) is not None
    # Unix seconds, as the engine reads them (JSON also carries NaN and Infinity)
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and abs(value) < 1e13)


def _one_of(vocabulary: Sequence[str]) -> Callable[[Any], bool]:
    allowed = {v.lower() for v in vocabulary}

    def check(value: Any) -> bool:
        texts = _texts(value)
        return texts is not None and all(t.strip().lower() in allowed for t in texts)

    return check


def _or_null(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _checks(categories: Sequence[str]) -> dict[str, tuple[Callable[[Any], bool], str]]:
    """Each param: a test of its value, and what it expects, as the error says it."""
    count = (lambda v: _whole(v, 0, MAX_COUNT), f"a whole number from 0 to {MAX_COUNT}")
    return {
        "limit": count,
        "offset": count,
        "account": (_or_null(lambda v: isinstance(v, str) and bool(v.strip())), "an account name or null"),
        "thread": (_or_null(lambda v: _whole(v, 0, MAX_ID)),
                   f"a thread number (a hit's `thread`, from 0 to {MAX_ID}) or null"),
        "sender": (_or_null(lambda v: _texts(v) is not None), "an address or name, a list of them, or null"),
        "after": (_or_null(_when), "a date YYYY-MM-DD, Unix seconds, or null"),
        "before": (_or_null(_when), "a date YYYY-MM-DD, Unix seconds, or null"),
        "labels": (_or_null(lambda v: _texts(v) is not None), "a label, a list of labels, or null"),
        "disposition": (_or_null(_one_of((*DISPOSITIONS, "anywhere"))),
                        f"one of {', '.join(DISPOSITIONS)} or anywhere, a list of them, or null"),
        "unread": (_or_null(lambda v: isinstance(v, bool)), "true, false or null"),
        "categories": (_or_null(_one_of(categories)),
                       f"one of {', '.join(categories)} ([triage] categories), a list of them, or null"),
        "min_priority": (_or_null(lambda v: _whole(v, 0, 3)), "0, 1, 2, 3 or null"),
        "sort": (lambda v: v in ("relevance", "date"), '"relevance" or "date"'),
        "explain": (lambda v: isinstance(v, bool), "true or false"),
    }


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_request(line: bytes, categories: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """(query, params) of one request line, every field checked; RequestError names the first
    field at fault and what it expects."""
    if len(line) >= MAX_REQUEST and not line.endswith(b"\n"):
        raise RequestError(f"request: longer than {MAX_REQUEST} bytes")
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):  # bad JSON, bytes that are not UTF-8, or nested past Python's depth
        raise RequestError('request: expected one line of JSON: {"query": "...", "params": {...}}') from None
    if not isinstance(request, dict):
        raise RequestError(f'request: expected a JSON object {{"query": "...", "params": {{...}}}}, '
                           f"got {_shown(request)}")
    for key in request:
        if key not in ("query", "params"):
            raise RequestError(f"request: unknown field {_shown(key)}; a request holds query and params")
    query = request.get("query")
    if not isinstance(query, str):
        raise RequestError(f"query: expected text (the search, may be empty), got {_shown(query)}")
    params = request.get("params")
    if params is None:
        return query, {}
    if not isinstance(params, dict):
        raise RequestError(f"params: expected a JSON object of search parameters, got {_shown(params)}")
    checks = _checks(categories)
    for name, value in params.items():
        if name not in checks:
            raise RequestError(f"params: unknown parameter {_shown(name)}; expected one of {', '.join(PARAMS)}")
        check, expected = checks[name]
        if not check(value):
            raise RequestError(f"params.{name}: expected {expected}, got {_shown(value)}")
    return query, params


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
        logger = log.get("oaken.search.server")
        with conn:
            conn.settimeout(30)
            try:
                line = conn.makefile("rb").readline(MAX_REQUEST)
            except OSError as e:  # the client stalled or left: no one to answer
                logger.info("search.client_lost", error=f"{type(e).__name__}: {e}")
                return
            if not line:
                return  # connected and left without asking
            query = ""
            try:
                query, params = parse_request(line, self.config.triage.categories)
                answer = _encode(asdict(self._search(query, config=self.config, **params)))
            except RequestError as e:
                logger.info("search.bad_request", error=str(e))
                answer = _encode(asdict(ErrorReply(str(e), "bad_request")))
            except Exception:  # noqa: BLE001 - the client falls back to searching itself
                ref = secrets.token_hex(4)
                logger.exception("search.internal_error", ref=ref, query=query)
                answer = _encode(asdict(ErrorReply(f"internal error; see the daemon log (ref {ref})",
                                                   "internal_error", ref)))
            try:
                conn.sendall(answer)
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
