"""What a search request over the socket may carry: each parameter's test and what it expects.

A request is checked whole before it is run: every field of the wrong type or out of range is
refused with its name and what it expects, where an in-process search would warn and ignore it
(a program sent it, not a person typing). oaken.search.server reads the request line and its
protocol; this module judges the values.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from oaken.config import DISPOSITIONS
from oaken.errors import OakenError
from oaken.search.client import PARAMS

MAX_COUNT = (1 << 31) - 1  # limit and offset: far more mail than one mailbox holds
MAX_ID = (1 << 63) - 1  # a thread number: SQLite's largest integer
MAX_REQUEST_ID = 128  # characters of a request id given as text


class RequestError(OakenError):
    """A request the socket refuses as sent; the message names the field and what it expects.
    `code`: "bad_request", or "protocol_mismatch"; `request_id`: the request's id, when it has a
    valid one, for the reply to echo."""

    def __init__(self, message: str, code: str = "bad_request", request_id: str | int | None = None):
        super().__init__(message)
        self.code = code
        self.request_id = request_id


def whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _texts(value: Any) -> tuple[str, ...] | None:
    """A text or a list of texts, none blank, as a tuple; None when `value` is anything else."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else None
    if not items or not all(isinstance(v, str) and v.strip() for v in items):
        return None
    return tuple(items)


def _when(value: Any) -> bool:
    """A date as the engine reads one (filters.date_field): what it would warn about is refused.
    JSON also carries NaN and Infinity, which it refuses too."""
    from oaken.search.filters import date_field

    warned: list[str] = []
    return value is not None and date_field(value, "date", warned) is not None and not warned


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
    count = (lambda v: whole(v, 0, MAX_COUNT), f"a whole number from 0 to {MAX_COUNT}")
    return {
        "limit": count,
        "offset": count,
        "account": (_or_null(lambda v: isinstance(v, str) and bool(v.strip())), "an account name or null"),
        "thread": (
            _or_null(lambda v: whole(v, 0, MAX_ID)),
            f"a thread number (a hit's `thread`, from 0 to {MAX_ID}) or null",
        ),
        "sender": (_or_null(lambda v: _texts(v) is not None), "an address or name, a list of them, or null"),
        "after": (_or_null(_when), "a date YYYY-MM-DD, Unix seconds, or null"),
        "before": (_or_null(_when), "a date YYYY-MM-DD, Unix seconds, or null"),
        "labels": (_or_null(lambda v: _texts(v) is not None), "a label, a list of labels, or null"),
        "disposition": (
            _or_null(_one_of((*DISPOSITIONS, "anywhere"))),
            f"one of {', '.join(DISPOSITIONS)} or anywhere, a list of them, or null",
        ),
        "unread": (_or_null(lambda v: isinstance(v, bool)), "true, false or null"),
        "categories": (
            _or_null(_one_of(categories)),
            f"one of {', '.join(categories)} ([triage] categories), a list of them, or null",
        ),
        "min_priority": (_or_null(lambda v: whole(v, 0, 3)), "0, 1, 2, 3 or null"),
        "sort": (lambda v: v in ("relevance", "date"), '"relevance" or "date"'),
        "explain": (lambda v: isinstance(v, bool), "true or false"),
    }


def valid_request_id(value: Any) -> bool:
    return (isinstance(value, str) and 0 < len(value) <= MAX_REQUEST_ID) or whole(value, -MAX_ID - 1, MAX_ID)


def shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def check_params(params: dict[str, Any], categories: Sequence[str], request_id: str | int | None) -> None:
    """Refuse the first parameter that is unknown or of a value the search does not take
    (RequestError naming it and what it expects, with `request_id` for the reply to echo)."""
    checks = _checks(categories)
    for name, value in params.items():
        if name not in checks:
            raise RequestError(
                f"params: unknown parameter {shown(name)}; expected one of {', '.join(PARAMS)}", request_id=request_id
            )
        check, expected = checks[name]
        if not check(value):
            raise RequestError(f"params.{name}: expected {expected}, got {shown(value)}", request_id=request_id)
