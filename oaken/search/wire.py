"""The socket protocol's lines as the server reads and writes them: a request line checked whole
(its parameters by oaken.search.requests), and a reply line. oaken.search.client has the protocol.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from oaken.protocol import MAX_RENDER_WIDTH, PROTOCOL, RENDER_FORMATS
from oaken.search.client import encode as _encode
from oaken.search.requests import (
    MAX_COUNT,
    MAX_ID,
    MAX_REQUEST_ID,
    RequestError,
    check_params,
    shown,
    valid_request_id,
    whole,
)

MAX_REQUEST = 1 << 20


def parse_request(
    line: bytes, categories: Sequence[str], speaks: int = PROTOCOL
) -> tuple[str | int | None, str, dict[str, Any], dict[str, Any] | None]:
    """(id, query, params, render) of one request line, every field checked; RequestError names the
    first field at fault and what it expects (the protocol first: another one may have other
    fields). `render`: how the answer is to be rendered (oaken.protocol), or None for the response."""
    if len(line) >= MAX_REQUEST and not line.endswith(b"\n"):
        raise RequestError(f"request: longer than {MAX_REQUEST} bytes")
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):  # bad JSON, bytes that are not UTF-8, or nested past Python's depth
        raise RequestError('request: expected one line of JSON: {"query": "...", "params": {...}}') from None
    if not isinstance(request, dict):
        raise RequestError(
            f'request: expected a JSON object {{"query": "...", "params": {{...}}}}, got {shown(request)}'
        )
    request_id = request.get("id")
    echo = request_id if valid_request_id(request_id) else None
    protocol = request.get("protocol", speaks)
    if not whole(protocol, 0, MAX_COUNT):
        raise RequestError(
            f"protocol: expected a whole number (this daemon speaks protocol {speaks}), got {shown(protocol)}",
            request_id=echo,
        )
    if protocol != speaks:
        raise RequestError(
            f"protocol: the request speaks protocol {protocol}, this daemon protocol {speaks}; "
            "restart the daemon (`oaken sync --daemon`) with the oaken that searches",
            "protocol_mismatch",
            echo,
        )
    if request_id is not None and echo is None:
        raise RequestError(
            f"id: expected a request id (text of 1 to {MAX_REQUEST_ID} characters, or a whole "
            f"number from {-MAX_ID - 1} to {MAX_ID}) or null, got {shown(request_id)}"
        )
    for key in request:
        if key not in ("protocol", "id", "query", "params", "render"):
            raise RequestError(
                f"request: unknown field {shown(key)}; a request holds protocol, id, query, params and render",
                request_id=echo,
            )
    query = request.get("query")
    if not isinstance(query, str):
        raise RequestError(f"query: expected text (the search, may be empty), got {shown(query)}", request_id=echo)
    render = _render(request.get("render"), echo)
    params = request.get("params")
    if params is None:
        return echo, query, {}, render
    if not isinstance(params, dict):
        raise RequestError(f"params: expected a JSON object of search parameters, got {shown(params)}", request_id=echo)
    check_params(params, categories, echo)
    return echo, query, params, render


def _render(render: Any, echo: str | int | None) -> dict[str, Any] | None:
    """A request's `render` checked: {"format": one of RENDER_FORMATS, "color": true or false,
    "width": columns}, every field required."""
    if render is None:
        return None
    expected = (
        f'expected {{"format": {" or ".join(RENDER_FORMATS)}, "color": true or false, '
        f'"width": 1 to {MAX_RENDER_WIDTH}}}'
    )
    if (
        not isinstance(render, dict)
        or set(render) != {"format", "color", "width"}
        or render["format"] not in RENDER_FORMATS
        or type(render["color"]) is not bool
    ):
        raise RequestError(f"render: {expected}, got {shown(render)}", request_id=echo)
    if not whole(render["width"], 1, MAX_RENDER_WIDTH):
        raise RequestError(
            f"render.width: expected 1 to {MAX_RENDER_WIDTH}, got {shown(render['width'])}", request_id=echo
        )
    return render


def reply(request_id: str | int | None, body: dict[str, Any], speaks: int = PROTOCOL) -> bytes:
    """One reply line: the protocol, the request's id (None: the request had none to read), the body."""
    return _encode({"protocol": speaks, "id": request_id, **body})


def rendered(body: dict[str, Any], render: dict[str, Any]) -> dict[str, Any]:
    """What `oaken search` prints for this answer (oaken.protocol's `render`), from the answer as a
    client reads it off the socket (a JSON round trip), so that the bytes are the full command's."""
    from oaken.cli_output import render_search

    out, err, code = render_search(
        json.loads(_encode(body)), fmt=render["format"], color=render["color"], width=render["width"]
    )
    return {"stdout": out, "stderr": err, "exit": code}
