"""The typed response of a search (DESIGN.md "A hit and a response").

Frozen dataclasses: `dataclasses.asdict` turns a response into the JSON that `oaken search --json`
prints, so the Python API and the command line say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

MODES = ("hybrid", "keyword", "vector")
# DESIGN.md "Precise rules": the fixed set of reasons a search ran degraded.
DEGRADED_REASONS = (
    "no_embedder",
    "no_vector_store",
    "no_vectors",
    "model_mismatch",
    "timeout",
    "error",
    "keyword_index_unavailable",
    # the background search server was just started (oaken.search.background): keywords answered
    "vector_starting",
)


@dataclass(frozen=True)
class Why:
    """One retriever that found a hit: its rank (from 1, after chunks are collapsed to messages)
    and what that rank adds to the fused score, weight / (rrf_k + rank), less weight / (rrf_k + cut
    + 1) for a list cut short (oaken.search.fusion). Rank 0 with contribution
    0 is a keyword entry for a hit the vector side ranked that holds the query's words too, but past
    the depth the keyword side listed: it is not found by meaning alone, and its score is as fused."""

    retriever: str  # "keyword" or "vector"
    rank: int
    weight: float  # the retriever's weight, exact_boost included
    contribution: float
    detail: str = ""  # e.g. "holds 3 of 4 words; bm25 11.2; in subject, body"


@dataclass(frozen=True)
class MatchedChunk:
    """Another chunk of the same message that matched (the best one stands for the message)."""

    chunk: int
    retriever: str
    snippet: str


@dataclass(frozen=True)
class Hit:
    id: int  # Oaken's id, stable across reindexing: `oaken show ID`
    message_id: str | None  # the RFC 822 Message-ID, angle brackets removed
    account: str
    folders: tuple[str, ...]
    labels: tuple[str, ...]
    thread: int
    subject: str
    sender: str  # "Name <address>", or the address alone
    date: str  # ISO 8601, UTC
    unread: bool
    score: float  # the fused score: the sum of each Why's contribution
    snippet: str  # around the matched words, which sit between [[ and ]]
    why: tuple[Why, ...] = ()
    matched_chunks: tuple[MatchedChunk, ...] = ()
    copies: tuple[int, ...] = ()  # ids of near-identical messages this hit stands for (oaken.search.copies)


@dataclass(frozen=True)
class RetrieverTrace:
    """What one retriever did, for --explain."""

    retriever: str
    state: str  # "ok", "skipped" (no words: a date listing), or a degraded reason code
    expression: str = ""  # the FTS5 MATCH that ran, every token quoted
    rounds: int = 0  # 1 + how many times the search widened
    candidates: int = 0  # chunks or messages asked for in the last round
    kept: int = 0  # messages left after every filter
    ms: float = 0.0
    cut: int = 0  # the depth the list was cut at in fusion (more lay past it); 0: whole


@dataclass(frozen=True)
class Explain:
    parsed: Mapping[str, Any]
    retrievers: tuple[RetrieverTrace, ...]
    rrf_k: int
    weights: Mapping[str, float]  # per retriever, exact_boost included


@dataclass(frozen=True)
class SearchResponse:
    hits: tuple[Hit, ...]
    mode: str  # "hybrid", "keyword" or "vector": what answered
    degraded: bool = False
    degraded_reason: str | None = None  # one of DEGRADED_REASONS
    low_confidence: bool = False
    warnings: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)  # milliseconds per part
    vector_coverage: float | None = None  # share of chunks embedded; None when there is no vector side
    account: str | None = None  # the one account searched
    explain: Explain | None = None  # filled when explain=True


__all__ = ["Why", "MatchedChunk", "Hit", "RetrieverTrace", "Explain", "SearchResponse", "MODES", "DEGRADED_REASONS"]
