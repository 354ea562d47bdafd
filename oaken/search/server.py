"""The daemon's search socket: a warm process (embedder loaded, indexes open) answers `oaken search`.

A Unix socket in the data directory, mode 0600 in a directory of mode 0700 (only its owner may
search the mail). One JSON line in, one JSON line out, as oaken.search.client describes:
{"protocol": 1, "id": ..., "query": ..., "params": {...}} -> {"protocol": 1, "id": ..., **the
SearchResponse as a dict}, or {"protocol": 1, "id": ..., **an ErrorReply}. A request of another
protocol is refused with the code "protocol_mismatch", naming both. A request without "protocol"
is read as protocol 1: its fields and its answer are those of the socket before protocols had a
number, so the clients of then (and a hand-typed request) are answered as before, and a protocol 2
will refuse them as protocol 1. The client of this oaken always sends the protocol and an id.

A request is checked whole before it is run (its parameters by oaken.search.requests): every field
of the wrong type or out of range is refused with its name and what it expects, where an
in-process search would warn and ignore it (a program sent it, not a person typing). A failure inside the daemon is logged here with its
traceback; the client is told only that there was one and the reference of the log line.

Bounded, whoever connects: a few threads (one serving loop, WORKERS searching), MAX_CONNECTIONS
open at once, CLIENT_SECONDS to send a request and to read its answer, MAX_REQUEST bytes a request.
"""

from __future__ import annotations

import itertools
import os
import queue
import secrets
import selectors
import socket
import threading
import time
from dataclasses import asdict
from typing import Any, Callable, Sequence

from oaken import config as config_mod
from oaken import log
from oaken.config import Config
from oaken.search import wire
from oaken.search.client import PROTOCOL, SOCKET_NAME, ask_raw, socket_path  # noqa: F401 - re-exported
from oaken.search.requests import RequestError
from oaken.search.responses import ErrorReply, response_from_dict
from oaken.search.types import SearchResponse
from oaken.search.wire import MAX_REQUEST

WORKERS = 4  # searches at once; more clients wait their turn without holding a thread
MAX_CONNECTIONS = 64  # open at once; far more than one user's searches need
CLIENT_SECONDS = 5.0  # to send the whole request, and to read the whole answer: a local client needs ms
READ_CHUNK = 1 << 16
STOP_POLL_SECONDS = 0.5  # how soon the loop sees stop_event


def parse_request(
    line: bytes, categories: Sequence[str]
) -> tuple[str | int | None, str, dict[str, Any], dict[str, Any] | None]:
    """wire.parse_request, for the protocol this server speaks (PROTOCOL, read at each call)."""
    return wire.parse_request(line, categories, PROTOCOL)


def reply(request_id: str | int | None, body: dict[str, Any]) -> bytes:
    """wire.reply, in the protocol this server speaks."""
    return wire.reply(request_id, body, PROTOCOL)


class _Client:
    """One connection as the serving loop sees it: reading its request, searching, or answering."""

    __slots__ = ("sock", "deadline", "data", "out")

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock = sock
        self.deadline = deadline  # reading: the whole request by then; answering: the whole answer
        self.data = bytearray()
        self.out: memoryview | None = None  # the answer's unsent part, once there is one


class SearchServer:
    """Answers searches on the socket until `stop_event` is set.

    One thread owns every connection and never blocks on one (a selector): it accepts, reads each
    request, writes each answer, and drops a client that has not sent its whole request, or read its
    whole answer, within `timeout` seconds. A request read whole goes to `workers` threads that
    check it and search; they never touch a socket, so a client that stalls half-way through its
    request, or never reads its answer, holds no worker. At most `max_connections` are open: a new
    client displaces the one waiting longest for its request, so idle clients cannot keep a search
    out. However many connect, the server runs 1 + `workers` threads."""

    def __init__(
        self,
        config: Config,
        stop_event: threading.Event,
        search: Callable[..., SearchResponse] | None = None,
        *,
        workers: int = WORKERS,
        max_connections: int = MAX_CONNECTIONS,
        timeout: float = CLIENT_SECONDS,
    ):
        self.config = config
        self.stop_event = stop_event
        self.path = socket_path(config)
        if search is None:
            from oaken.search import engine

            search = engine.search
        self._search = search
        self.workers = workers
        self.max_connections = max_connections
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self.thread: threading.Thread | None = None
        self._log = log.get("oaken.search.server")
        # between the loop and the workers: (client key, request line) in, (client key, answer) out
        self._requests: queue.SimpleQueue[tuple[int, bytes] | None] = queue.SimpleQueue()
        self._answers: queue.SimpleQueue[tuple[int, bytes]] = queue.SimpleQueue()
        self._keys = itertools.count()
        self._clients: dict[int, _Client] = {}
        self._reading: dict[int, _Client] = {}  # in order of arrival: the first has waited longest
        # the socket file this server bound, (inode, ctime): close removes only that one; an inode alone
        # may be reused by the next file bound at the path
        self._bound: tuple[int, int] | None = None
        # activity, for a server that exits when idle (oaken.search.background)
        self._activity = threading.Lock()
        self._busy = 0
        self._last_active = time.monotonic()

    def start(self) -> SearchServer:
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
        bound = os.stat(self.path)
        self._bound = (bound.st_ino, bound.st_ctime_ns)
        sock.listen(128)
        sock.setblocking(False)
        with self._activity:
            self._last_active = time.monotonic()  # idle from now, not from when the model began loading
        self._sock = sock
        self._wake_r, self._wake_w = socket.socketpair()  # a worker's answer wakes the loop
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        for n in range(self.workers):
            threading.Thread(target=self._work, name=f"oaken-search-worker-{n}", daemon=True).start()
        self.thread = threading.Thread(target=self._loop, name="oaken-search-server", daemon=True)
        self.thread.start()
        return self

    def idle_seconds(self) -> float:
        """Seconds since the last search ended; 0 while one runs."""
        with self._activity:
            return 0.0 if self._busy else time.monotonic() - self._last_active

    def owns_socket(self) -> bool:
        """Whether the socket path is still the file this server bound: another server that took the
        path over (the daemon replacing a background server), or a deleted file, means no client
        reaches this one any more."""
        try:
            now = os.stat(self.path)
        except OSError:
            return False
        return self._bound == (now.st_ino, now.st_ctime_ns)

    def warm(self) -> None:
        """Load the embedder and open the indexes now, not on the first search."""
        try:
            self._search("warm up", limit=1, config=self.config)
        except Exception:  # noqa: BLE001 - a failing warm-up shows up again, as degraded, on real searches
            pass

    # ---- the workers: a request line in, an answer out, no socket ----------------------------------

    def _work(self) -> None:
        while (item := self._requests.get()) is not None:
            key, line = item
            with self._activity:
                self._busy += 1
            try:
                answer = self._answer(line)
            finally:
                with self._activity:
                    self._busy -= 1
                    self._last_active = time.monotonic()
            self._answers.put((key, answer))
            try:
                self._wake_w.send(b"\0")
            except OSError:  # BlockingIOError: the loop has wake-ups enough to read; else it has stopped
                pass

    def _answer(self, line: bytes) -> bytes:
        request_id: str | int | None = None
        query = ""
        try:
            request_id, query, params, render = parse_request(line, self.config.triage.categories)
            body = asdict(self._search(query, config=self.config, **params))
            return reply(request_id, body if render is None else {"render": wire.rendered(body, render)})
        except RequestError as e:
            self._log.info(f"search.{e.code}", error=str(e))
            return reply(e.request_id, asdict(ErrorReply(str(e), e.code)))
        except Exception:  # noqa: BLE001 - the client says so and searches itself
            ref = secrets.token_hex(4)
            self._log.exception("search.internal_error", ref=ref, query=query)
            return reply(
                request_id, asdict(ErrorReply(f"internal error; see the daemon log (ref {ref})", "internal_error", ref))
            )

    # ---- the serving loop: every connection, never blocking ----------------------------------------

    def _loop(self) -> None:
        assert self._sock is not None
        selector = selectors.DefaultSelector()
        selector.register(self._sock, selectors.EVENT_READ, "accept")
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        accepting = True
        try:
            while not self.stop_event.is_set():
                now = time.monotonic()
                due = min(
                    (c.deadline for k, c in self._clients.items() if self._timed(k, c)), default=now + STOP_POLL_SECONDS
                )
                for key, _events in selector.select(min(max(due - now, 0.0), STOP_POLL_SECONDS)):
                    if key.data == "accept":
                        accepting = self._accept(selector)
                    elif key.data == "wake":
                        self._take_answers(selector)
                    elif key.data in self._reading:
                        self._read(selector, key.data)
                    elif key.data in self._clients:
                        self._write(selector, key.data)
                self._drop_late(selector)
                if not accepting and len(self._clients) < self.max_connections:
                    selector.register(self._sock, selectors.EVENT_READ, "accept")
                    accepting = True
        finally:
            for client in list(self._clients):
                self._drop(selector, client)
            for _ in range(self.workers):
                self._requests.put(None)
            selector.close()
            self._wake_r.close()
            self._wake_w.close()
            self.close()

    def _accept(self, selector: selectors.BaseSelector) -> bool:
        """Take the clients waiting to connect; False when every slot is searching or answering
        (then new clients wait in the listen queue until one is free)."""
        assert self._sock is not None
        displaced = 0
        for _ in range(self.max_connections):  # those waiting now, then back to the others
            if len(self._clients) >= self.max_connections:
                if not self._reading:
                    selector.unregister(self._sock)
                    return False
                displaced += 1
                self._drop(
                    selector,
                    next(iter(self._reading)),
                    f"request: not sent whole before a newer client needed the connection "
                    f"({self.max_connections} open at most)",
                )
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:  # out of file descriptors: those open are served, new ones wait
                self._log.warning("search.accept_failed", error=f"{type(e).__name__}: {e}")
                break
            conn.setblocking(False)
            key = next(self._keys)
            self._clients[key] = self._reading[key] = _Client(conn, time.monotonic() + self.timeout)
            selector.register(conn, selectors.EVENT_READ, key)
        if displaced:  # one line for a burst, not one per client
            self._log.info(
                "search.clients_dropped",
                count=displaced,
                reason=f"{self.max_connections} connections open; dropped those that waited longest for their request",
            )
        return True

    def _read(self, selector: selectors.BaseSelector, key: int) -> None:
        client = self._reading[key]
        try:
            chunk = client.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:  # the client left: no one to answer
            self._log.info("search.client_lost", error=f"{type(e).__name__}: {e}")
            self._drop(selector, key)
            return
        data = client.data
        if not chunk and not data:
            self._drop(selector, key)  # connected and left without asking
            return
        newline = chunk.find(b"\n")
        if newline >= 0 and len(data) + newline < MAX_REQUEST:
            line = bytes(data + chunk[: newline + 1])
        elif len(data) + len(chunk) >= MAX_REQUEST:
            line = bytes((data + chunk)[:MAX_REQUEST])  # no newline within the cap: parse_request refuses it
        elif not chunk:
            line = bytes(data)  # the client shut its side after a line with no newline
        else:
            data += chunk
            return
        del self._reading[key]
        client.data = bytearray()
        selector.unregister(client.sock)
        self._requests.put((key, line))

    def _take_answers(self, selector: selectors.BaseSelector) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        while True:
            try:
                key, answer = self._answers.get_nowait()
            except queue.Empty:
                return
            client = self._clients.get(key)
            if client is None:
                continue
            client.out = memoryview(answer)
            client.deadline = time.monotonic() + self.timeout
            selector.register(client.sock, selectors.EVENT_WRITE, key)
            self._write(selector, key)  # most answers fit in the socket's buffer at once

    def _write(self, selector: selectors.BaseSelector, key: int) -> None:
        client = self._clients[key]
        assert client.out is not None
        try:
            client.out = client.out[client.sock.send(client.out) :]
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # the client left without its answer
            self._drop(selector, key)
            return
        if not client.out:
            self._drop(selector, key)

    def _timed(self, key: int, client: _Client) -> bool:
        """Whether the client is on the clock: reading its request or its answer, not waiting for a search."""
        return key in self._reading or client.out is not None

    def _drop_late(self, selector: selectors.BaseSelector) -> None:
        now = time.monotonic()
        for key in [k for k, c in self._clients.items() if c.deadline <= now and self._timed(k, c)]:
            if key in self._reading:
                self._log.info("search.client_dropped", reason=f"no whole request within {self.timeout:g} s")
                self._drop(selector, key, f"request: not sent whole within {self.timeout:g} s")
            else:
                self._log.info("search.client_dropped", reason=f"answer not read within {self.timeout:g} s")
                self._drop(selector, key)

    def _drop(self, selector: selectors.BaseSelector, key: int, why: str | None = None) -> None:
        """Close a client's connection; `why`, to one still sending its request, is told it first
        (if its socket takes the line at once: the loop never waits on a client)."""
        client = self._clients.pop(key)
        self._reading.pop(key, None)
        try:
            selector.unregister(client.sock)
        except (KeyError, ValueError):
            pass  # being searched for: not watched
        if why is not None:
            try:
                client.sock.send(reply(None, asdict(ErrorReply(why, "bad_request"))))
            except OSError:
                pass
        client.sock.close()

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                if self.owns_socket():  # not a socket another server has bound at the path since
                    try:
                        self.path.unlink()
                    except FileNotFoundError:
                        pass


def ask(config: Config, query: str, params: dict[str, Any], timeout: float = 60.0) -> SearchResponse | None:
    """The daemon's answer, or None when no daemon answers (then search in this process);
    client.DaemonError when one answers with no response."""
    answer = ask_raw(config, query, params, timeout)
    return None if answer is None else response_from_dict(answer)
