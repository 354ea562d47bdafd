"""How the retrievers' lists are weighed: the meaning floor, RRF weights, fusion, and low confidence."""

from __future__ import annotations

from typing import Sequence

from oaken.config import Config
from oaken.search import filters, matching
from oaken.search import query as query_mod
from oaken.search.fusion import FusedItem, rrf_fuse
from oaken.search.retrievers import RetrieverResult


def narrowed(cons: filters.Constraints) -> bool:
    """The query names which mail it means (a sender, recipient, subject word, date range, label,
    folder, thread, attachment, size, header or group), beyond the account and disposition every
    search has."""
    f = cons.index
    return (
        bool(cons.raw)
        or f.include_ids is not None
        or bool(
            f.senders
            or f.to
            or f.cc
            or f.subject_terms
            or f.after is not None
            or f.before is not None
            or f.labels
            or f.folders
            or f.thread is not None
            or f.filename_terms
            or f.has_attachment is not None
        )
    )


def meaning_floor(
    cfg: Config, vec: RetrieverResult, kw: RetrieverResult | None, *, narrowed: bool = False, question: bool = False
) -> RetrieverResult:
    """The vector list without the hits found by meaning alone whose cosine is under the model's
    `[search] vector_min_cosine`: nearest is not related, and that tail only padded a list to its
    limit. A hit the keyword list holds stays whatever its cosine. Ranks are counted again from 1
    among the hits kept (DESIGN.md: filtering comes first), so fusion still compares ranks only.

    The floor is for a lookup over the whole mailbox (`virus`: three messages hold it, and the
    nearest unrelated memos padded the list). Not for a query whose operators chose the mail
    (`narrowed`: from:, subject:, dates...: that mail ranked by meaning is what was asked for; a
    short "is he safe" scores 0.22 against the right one among a sender's earthquake mails), nor
    for a question (its keyword list holds partial matches anyway, so the floor kept no list
    short and only removed right answers: on the real dev half, floor everywhere 0.26 gave hybrid
    R@10 0.673, lookups only 0.702). low_confidence still says when the best is weak."""
    from dataclasses import replace

    from oaken.search.vector_retriever import min_cosine

    floor = min_cosine(cfg)
    if floor is None or narrowed or question:
        return vec
    by_words = {r.message for r in kw.ranked} if kw is not None else set()
    kept = [r for r in vec.ranked if r.message in by_words or r.score >= floor]
    if len(kept) == len(vec.ranked):
        return vec
    ranked = tuple(replace(r, rank=rank) for rank, r in enumerate(kept, start=1))
    # still cut where it was: a message of the keyword list it no longer holds lay past its cut
    # (one it held is kept whatever its cosine), so fusion gives it the share past the cut
    return RetrieverResult(vec.retriever, ranked, replace(vec.trace, kept=len(ranked)), cut=vec.cut)


def low_confidence(
    cfg: Config,
    plan: matching.MatchPlan | None,
    kw: RetrieverResult | None,
    vec: RetrieverResult | None,
    best_cosine: float | None,
) -> bool:
    """No strong match: no keyword hit holds every word, and either the question's identifiers and
    phrases are held by none of them (meaning cannot stand in for an identifier: the nearest
    "ERV memo 12/14/2001" is another day's memo), or (when meaning answered) the best cosine is
    under the model's `[search] low_confidence_cosine`."""
    if plan is None:
        return False
    if kw is not None and any(r.strong for r in kw.ranked):
        return False
    if plan.exact_clauses and kw is not None and not any(r.holds_exact for r in kw.ranked):
        return True  # an identifier or phrase no message holds: nearest in meaning is not it
    if vec is None:
        return True
    from oaken.search.vector_retriever import low_cosine

    return low_cosine(cfg, best_cosine)


def weights(
    cfg: Config, parsed: query_mod.ParsedQuery, lists: Sequence[RetrieverResult], *, question: bool = False
) -> dict[str, float]:
    """Each retriever's RRF weight; exact_boost multiplies the keyword weight (DESIGN.md Fusion).
    A question no keyword hit holds whole (each holds only keyword_min_match of its words) is
    described in other words than the mail's: its keyword list is mostly mail sharing a few
    common words, and `keyword_partial_weight` scales it down (measured on the real dev half)."""
    s = cfg.search
    out = {}
    for lst in lists:
        if lst.retriever == "keyword":
            out["keyword"] = s.keyword_weight * (s.exact_boost if parsed.exact else 1.0)
            if question and not parsed.exact and not any(r.strong for r in lst.ranked):
                out["keyword"] *= s.keyword_partial_weight
        else:
            out[lst.retriever] = s.vector_weight
    return out


def cuts(lists: Sequence[RetrieverResult]) -> dict[str, int]:
    """The depth each list that was cut short is fused at (oaken.search.fusion). None for one list
    alone: its order is its own, and its scores stay what they were at any --limit."""
    if len(lists) < 2:
        return {}
    return {lst.retriever: len(lst.ranked) for lst in lists if lst.cut and lst.ranked}


def fuse(
    lists: Sequence[RetrieverResult], weights: dict[str, float], rrf_k: int, cut: dict[str, int]
) -> list[FusedItem]:
    return rrf_fuse({lst.retriever: [r.message for r in lst.ranked] for lst in lists}, weights, rrf_k, cut)
