"""The search socket's answers as data: the SearchResponse rebuilt from its JSON (so a daemon's
answer prints as an in-process search's does), and the reply when there is no response to give."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oaken.search.types import Explain, Hit, MatchedChunk, RetrieverTrace, SearchResponse, Why


@dataclass(frozen=True)
class ErrorReply:
    """The socket's answer when it has no SearchResponse to give."""

    error: str  # one line for a person
    # "bad_request": the request is at fault, as `error` says; "protocol_mismatch": it speaks another
    # protocol, `error` names both; "internal_error": the daemon is at fault
    code: str
    ref: str | None = None  # internal_error: the `ref` of the daemon's log line that holds the traceback


def response_from_dict(data: dict[str, Any]) -> SearchResponse:
    """Rebuild the typed response from its JSON, so both paths print the same thing."""
    hits = tuple(
        Hit(
            **{
                **h,
                "folders": tuple(h["folders"]),
                "labels": tuple(h["labels"]),
                "why": tuple(Why(**w) for w in h["why"]),
                "matched_chunks": tuple(MatchedChunk(**c) for c in h["matched_chunks"]),
                "copies": tuple(h.get("copies", ())),
            }
        )
        for h in data["hits"]
    )
    explain = data.get("explain")
    if explain:
        explain = Explain(
            parsed=explain["parsed"],
            retrievers=tuple(RetrieverTrace(**r) for r in explain["retrievers"]),
            rrf_k=explain["rrf_k"],
            weights=explain["weights"],
        )
    return SearchResponse(**{**data, "hits": hits, "warnings": tuple(data["warnings"]), "explain": explain})
