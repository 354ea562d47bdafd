"""The fast path's client: `oaken search` sent to a running daemon, which answers with the bytes to
print (oaken.protocol's `render`), made by the same function the full command prints with.

Why a second client beside oaken.search.client: a warm search should cost little more than
starting Python. This one imports only the C halves of the socket and of the JSON scanner and the
small modules of the protocol and the terminal: no json (it loads re), no table renderer, no
width tables. The full client stays the one the library and the full command use.
"""

from __future__ import annotations

import _json
import os

from oaken import protocol
from oaken.protocol import MAX_RENDER_WIDTH, DaemonError, exchange, read_reply
from oaken.terminal import table_settings

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from typing import Any


class _Rules:
    """What json.loads passes its scanner (json.decoder.JSONDecoder's defaults), so that the C
    scanner reads a line as json.loads does: strict strings, NaN and Infinity as floats."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
    memo: dict[str, str] = {}


_scan = _json.make_scanner(_Rules())  # type: ignore[arg-type]  # typeshed types the context as a scanner


def loads(data: bytes) -> Any:
    """json.loads of one reply line (UTF-8, as the daemon writes it); ValueError when it is not."""
    text = data.decode("utf-8")
    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        raise ValueError("not JSON") from None
    if text[end:].strip(" \t\n\r"):
        raise ValueError("extra data after the JSON value")
    return value


def dumps(value: Any) -> str:
    """JSON of the plain values a request holds (None, booleans, whole numbers, text, objects)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    if type(value) is str:
        return _json.encode_basestring(value)
    if type(value) is dict:
        return "{" + ", ".join(f"{dumps(k)}: {dumps(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"not a request value: {type(value).__name__}")


def ask(
    where: str, query: str, params: dict[str, Any], fmt: str, color: str, timeout: float = 60.0
) -> dict[str, Any] | None:
    """The daemon's rendering of this search ({"stdout", "stderr", "exit"}) for this process's
    terminal, or None when no daemon listens at `where`; DaemonError when one answers with no
    rendering (as oaken.search.client.ask_at says it)."""
    on, width = table_settings(color)
    if fmt != "text":  # the width shapes the table only
        width = min(max(width, 1), MAX_RENDER_WIDTH)
    if not 1 <= width <= MAX_RENDER_WIDTH:
        return None  # a COLUMNS the daemon would refuse: the full command prints that table itself
    request_id = f"{os.getpid()}-1"
    fields = protocol.request(request_id, query, params, render={"format": fmt, "color": on, "width": width})
    data = exchange(where, (dumps(fields) + "\n").encode(), timeout)
    if data is None:
        return None
    render = read_reply(data, request_id, loads).get("render")
    if (
        not isinstance(render, dict)
        or type(render.get("stdout")) is not str
        or type(render.get("stderr")) is not str
        or type(render.get("exit")) is not int
    ):
        raise DaemonError("the search daemon's answer holds no rendering", True)
    return render
