"""Results as references, packed within a byte budget, for an agent's context window.

A search's hits become references (id, date, from, subject, snippet, found_by, unread, copies);
the response keeps as many whole hits as fit in max_bytes, drops the rest from the end and says
how many it dropped and where the next page starts. A hit is never cut in the middle: a half
snippet reads as evidence it is not. A message's body, which has no such unit, is cut at a line
end where one is near, and says where to read on.
"""

from __future__ import annotations

import json
from typing import Any

RETRIEVERS = ("keyword", "vector")


def dumps(obj: Any) -> str:
    """The JSON text an agent reads: compact, UTF-8 as is. Sizes are counted on this very text."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def size(obj: Any) -> int:
    return len(dumps(obj).encode("utf-8"))


def reference(hit: dict[str, Any]) -> dict[str, Any]:
    """A hit of the engine's JSON response as the reference an agent cites. Near-identical copies
    the engine folded into the hit (Hit.copies) are counted, not listed: 1,124 copies of a form
    letter are one line."""
    found = {w["retriever"] for w in hit.get("why") or ()}
    return {
        "id": hit["id"],
        "date": hit["date"],
        "from": hit["sender"],
        "subject": hit["subject"],
        "snippet": hit["snippet"],
        "found_by": [r for r in RETRIEVERS if r in found],
        "unread": bool(hit["unread"]),
        "copies": len(hit.get("copies") or ()),
    }


def pack(response: dict[str, Any], *, limit: int, offset: int, max_bytes: int, served_by: str) -> dict[str, Any]:
    """The response for an agent: whole references while they fit within `max_bytes`, the rest
    counted in `omitted`; `next_offset` is where the next page starts (None: nothing more)."""
    refs = [reference(h) for h in response.get("hits") or ()]
    warnings = list(response.get("warnings") or ())
    full_page = len(refs) >= limit

    def build(n: int, warned: list[str]) -> dict[str, Any]:
        more = n < len(refs) or full_page
        return {
            "hits": refs[:n],
            "omitted": len(refs) - n,
            "next_offset": offset + n if more else None,
            "mode": response.get("mode", "keyword"),
            "degraded": bool(response.get("degraded")),
            "degraded_reason": response.get("degraded_reason"),
            "low_confidence": bool(response.get("low_confidence")),
            "warnings": warned,
            "account": response.get("account"),
            "served_by": served_by,
        }

    warnings = _fit_warnings(lambda w: build(0, w), warnings, max_bytes)
    total = size(build(0, warnings))  # the envelope, with omitted and next_offset at their widest
    n = 0
    for ref in refs:
        grown = total + size(ref) + (1 if n else 0)  # and the comma between two hits
        if grown > max_bytes:
            break
        total, n = grown, n + 1
    packed = build(n, warnings)
    while n and size(packed) > max_bytes:  # the estimate is exact but for the counts' digits
        n -= 1
        packed = build(n, warnings)
    return packed


def _fit_warnings(build: Any, warnings: list[str], max_bytes: int) -> list[str]:
    """Warnings dropped from the end, and counted in a last one, until the empty envelope fits."""
    trial = warnings
    for keep in range(len(warnings), -1, -1):
        left_out = len(warnings) - keep
        trial = warnings[:keep] + ([f"{left_out} more warnings left out"] if left_out else [])
        if size(build(trial)) <= max_bytes:
            break
    return trial


def fit_text(result: dict[str, Any], text: str, *, text_offset: int, max_bytes: int) -> dict[str, Any]:
    """`result` with as much of `text` from `text_offset` as fits within `max_bytes`, cut at a line
    end (else a space) where one is near, with `truncated` and `next_text_offset` saying where
    the rest starts."""
    rest = text[text_offset:]

    def build(k: int) -> dict[str, Any]:
        cut = k < len(rest)
        return {
            **result,
            "text": rest[:k],
            "text_offset": text_offset,
            "text_chars": len(text),
            "truncated": cut,
            "next_text_offset": text_offset + k if cut else None,
        }

    if size(build(len(rest))) <= max_bytes:
        return build(len(rest))
    low, high = 0, len(rest)  # the longest prefix that fits: size grows with k
    while low < high:
        mid = (low + high + 1) // 2
        if size(build(mid)) <= max_bytes:
            low = mid
        else:
            high = mid - 1
    k = low
    for mark in ("\n", " "):
        at = rest.rfind(mark, 0, k)
        if at >= 0 and at + 1 >= k * 3 // 4:  # a clean cut costs at most a quarter of what fits
            k = at + 1
            break
    return build(k)
