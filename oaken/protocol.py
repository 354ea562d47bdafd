"""The search socket's protocol as both clients read it: the full one (oaken.search.client) and the
fast path's (oaken.quick_search), which imports neither json nor re. The server's half is
oaken.search.wire; oaken.search.client describes the lines.

A request may ask for the answer rendered (`"render": {"format": ..., "color": ..., "width": ...}`):
the daemon then replies `{"protocol": 1, "id": ..., "render": {"stdout": ..., "stderr": ...,
"exit": ...}}`, the bytes `oaken search` prints for that answer on a terminal of that width, made
by the same function as the full command prints with (oaken.cli_output.render_search). Why: the
client then needs no JSON encoder, table renderer or width tables, only a socket (docs/cli.md).
"""

from __future__ import annotations

from oaken.errors import OakenError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from typing import Any, Callable

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
# What a request may ask to be rendered: `oaken search --format` (json and jsonl: the same JSON
# lines the full command prints) and the table's width (a terminal's columns).
RENDER_FORMATS = ("text", "json", "jsonl", "ids")
MAX_RENDER_WIDTH = 10_000


class DaemonError(OakenError):
    """A daemon answered, but not with a response. `fallback`: whether this process may search
    instead (a daemon of another protocol, one that failed inside, an answer that is not this
    request's), or not (the daemon refused the request as sent, and its reason stands)."""

    def __init__(self, message: str, fallback: bool):
        super().__init__(message)
        self.fallback = fallback


def request(request_id: str, query: str, params: dict[str, Any], **more: Any) -> dict[str, Any]:
    """A request's fields: the parameters a client may pass (PARAMS), nothing else, and `more`
    (the fast path's `render`)."""
    fields = {
        "protocol": PROTOCOL,
        "id": request_id,
        "query": query,
        "params": {k: v for k, v in params.items() if k in PARAMS},
    }
    return {**fields, **more}


def read_reply(data: bytes, request_id: str, loads: Callable[[bytes], Any]) -> dict[str, Any]:
    """check_reply of a reply line decoded by `loads` (json.loads, or the fast path's scanner);
    a line that is not JSON is said as an answer that is not a JSON object."""
    try:
        answer = loads(data)
    except ValueError:
        answer = None
    return check_reply(answer, request_id)


def check_reply(answer: Any, request_id: str) -> dict[str, Any]:
    """The body of a reply (a decoded JSON line) to the request `request_id`, without protocol and
    id; DaemonError when it is not an answer to it."""
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
        import json  # only to say which id came back

        raise DaemonError(
            f"the search daemon answered another request (id {json.dumps(answer_id)}, not {json.dumps(request_id)})",
            True,
        )
    if error is None:
        return answer
    if answer.get("code") == "bad_request":  # this process would refuse the same parameters
        raise DaemonError(f"the search daemon refused the request: {error}", False)
    raise DaemonError(f"the search daemon could not answer: {error}", True)


def exchange(where: str, line: bytes, timeout: float) -> bytes | None:
    """Send one request line to the socket at `where` and read the reply line; None when no daemon
    listens there (no socket, a stale file); DaemonError when the exchange fails part-way."""
    import _socket  # the C half of `socket`: the Python half imports selectors and enum (~7 ms)

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            connect(sock, where)
        except OSError:
            return None  # no socket, a stale file, no one listening: no daemon
        try:
            sock.sendall(line)
            data = read_line(sock)
        except TimeoutError:
            raise DaemonError(f"the search daemon did not answer within {timeout:g} s", True) from None
        except OSError as e:
            raise DaemonError(f"the search daemon's connection failed ({e.strerror or e})", True) from None
    finally:
        sock.close()
    if not data:
        raise DaemonError("the search daemon closed the connection without answering", True)
    return data


def read_line(sock: Any) -> bytes:
    """The reply: bytes up to and including the first newline, or all there were before the close."""
    data = bytearray()
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return bytes(data)
        end = chunk.find(b"\n")
        if end >= 0:
            data += chunk[: end + 1]
            return bytes(data)
        data += chunk


def connect(sock: Any, path: str, tries: int = 20) -> None:
    """Connect, waiting up to about a second while the daemon's listen queue is full (a Unix
    socket with a timeout then fails at once with EAGAIN, and the command would load the model)."""
    import time

    for _ in range(tries - 1):
        try:
            return sock.connect(path)
        except BlockingIOError:
            time.sleep(0.05)
    sock.connect(path)
