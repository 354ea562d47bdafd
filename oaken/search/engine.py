"""`oaken.search(...)`: parse, ask the retrievers, filter, collapse, fuse, page, describe the hits.

Never raises on what a person types or passes: unreadable values are warnings, a missing or
damaged index.db is a degraded response. One account at a time (DESIGN.md "Precise rules").

Both retrievers run at once (the vector side in a thread: oaken.search.vector_side), each list
filtered, collapsed to messages and ranked before `_fuse` fuses them with `rrf_fuse`; the page
of hits is described by oaken.search.hits. When the meaning side cannot answer, the keyword list
comes back with DESIGN.md's degraded code. Nothing on the keyword path imports torch,
sentence-transformers or LanceDB.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import apsw

from oaken import config as config_mod
from oaken import extras, paths
from oaken.config import Config
from oaken.errors import IndexUnavailable, QueryError
from oaken.index.keyword import KeywordIndex
from oaken.search import filters, matching, retrievers
from oaken.search import hits as hits_mod
from oaken.search import query as query_mod
from oaken.search.fusion import FusedItem, rrf_fuse
from oaken.search.retrievers import RetrieverResult
from oaken.search.types import Explain, Hit, RetrieverTrace, SearchResponse
from oaken.store import Store, damaged, failure

SORTS = ("relevance", "date")
MAX_LIMIT = 1000


RETRIEVERS = ("keyword", "vector")


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


def _vector_precheck(cfg: Config, data_dir: Path, use: tuple[str, ...]) -> tuple[bool, str | None, str | None]:
    """(ask the vector side, else the degraded reason and its warning). `model = "none"` is
    keyword mode by choice; an install without the vectors extra and a missing vectors/ are found
    without importing anything, so such a search loads no model and no LanceDB."""
    if cfg.embedder.model == "none" or "vector" not in use:
        return False, None, None
    problem = extras.vectors_problem(cfg.embedder.model)
    if problem is not None:
        return False, "no_embedder", problem
    if not os.path.isdir(paths.vectors_dir(data_dir)):  # not oaken.index.vectors: it imports numpy
        return (
            False,
            "no_vector_store",
            (
                f"{data_dir / 'vectors'}: no vector store yet; `oaken reindex` or the "
                "daemon builds it; keyword results only"
            ),
        )
    return True, None, None


_COVERAGE: dict[str, tuple[float, float | None]] = {}  # data dir and model -> (when, share embedded)
_COVERAGE_LOCK = threading.Lock()
_COVERAGE_AGE = 5.0


def _coverage(cfg: Config, data_dir: Path) -> float | None:
    """vector_coverage for the response. Counting index.db's chunks costs tens of milliseconds at
    10k messages, so a warm process answers with the figure it has and refreshes it in the
    background when it is older than a few seconds; only the first search of a process waits."""
    if cfg.embedder.model == "none" or extras.vectors_missing(cfg.embedder.model):
        return None
    if not os.path.isdir(paths.vectors_dir(data_dir)):
        return 0.0  # nothing embedded yet: no need to count what is not
    key = f"{data_dir}\0{cfg.embedder.model}"
    with _COVERAGE_LOCK:
        known = _COVERAGE.get(key)
        stale = known is None or time.monotonic() - known[0] > _COVERAGE_AGE
        if known is not None and stale:
            _COVERAGE[key] = (time.monotonic(), known[1])  # one refresh at a time
    if known is None:
        return _count_coverage(cfg, key)
    if stale:
        threading.Thread(target=_count_coverage, args=(cfg, key), name="oaken-coverage", daemon=True).start()
    return known[1]


def _count_coverage(cfg: Config, key: str) -> float | None:
    from oaken.index.coverage import vector_coverage

    try:
        value = vector_coverage(cfg, max_age=0.0)
    except Exception:  # noqa: BLE001 - a figure for the response; never a reason to fail a search
        value = None
    with _COVERAGE_LOCK:
        _COVERAGE[key] = (time.monotonic(), value)
    return value


def _retrievers(asked: Any, warnings: list[str]) -> tuple[str, ...]:
    names = (asked,) if isinstance(asked, str) else tuple(asked) if isinstance(asked, (tuple, list)) else None
    if not names or any(n not in RETRIEVERS for n in names):
        warnings.append(f"retrievers={asked!r}: expected keyword, vector or both; using both")
        return RETRIEVERS
    return tuple(dict.fromkeys(names))


MAX_OFFSET = 2**31 - 1


def _check_paging(limit: Any, offset: Any, sort: Any, warnings: list[str]) -> tuple[int, int, str]:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        warnings.append(f"limit={limit!r}: expected a whole number of 0 or more; using 10")
        limit = 10
    if limit > MAX_LIMIT:
        warnings.append(f"limit={limit}: at most {MAX_LIMIT} hits are returned at once; use offset to page")
        limit = MAX_LIMIT
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        warnings.append(f"offset={offset!r}: expected a whole number of 0 or more; using 0")
        offset = 0
    if offset > MAX_OFFSET:  # past any mailbox; SQLite's integers end at 2**63
        warnings.append(f"offset={offset}: past the last hit any mailbox can have; nothing to list")
        offset = MAX_OFFSET
    if sort not in SORTS:
        warnings.append(f"sort={sort!r}: expected relevance or date; using relevance")
        sort = "relevance"
    return limit, offset, sort


def _account(store: Store, cfg: Config, asked: Any, warnings: list[str]) -> str | None:
    """DESIGN.md: the account named, else default_account, else the only account."""
    known = store.account_names()
    if asked is not None and not isinstance(asked, str):
        warnings.append(f"account={asked!r}: expected an account name")
        return None
    name = cfg.account(asked or None)
    if name is None and len(known) == 1:
        name = known[0]
    if name is None:
        if known:
            warnings.append(
                f"several accounts ({', '.join(known)}): a search covers one; pass --account / "
                "account=, or set default_account in the config"
            )
        else:
            warnings.append("no mail yet: run `oaken import` or `oaken sync` first")
        return None
    if name not in known:
        warnings.append(f"no mail in account {name!r} (accounts with mail: {', '.join(known) or 'none'})")
        return None
    return name


class _Response:
    """Collects warnings and timings while a search runs, and makes the response at any exit."""

    def __init__(self, cfg: Config, data_dir: Path, explain: bool):
        self.started = time.perf_counter()
        self.cfg = cfg
        self.explain = explain
        self.warnings: list[str] = []
        self.timings: dict[str, float] = {}
        self.parsed: query_mod.ParsedQuery | None = None
        self.fields: dict[str, Any] = dict(
            mode="keyword", degraded=False, degraded_reason=None, vector_coverage=_coverage(cfg, data_dir)
        )

    def __call__(
        self,
        hits: tuple[Hit, ...] = (),
        *,
        low_confidence: bool = False,
        traces: tuple[RetrieverTrace, ...] = (),
        weights: dict[str, float] | None = None,
        **fields: Any,
    ) -> SearchResponse:
        self.timings["total"] = _ms(self.started)
        info = None
        if self.explain and self.parsed is not None:
            info = Explain(query_mod.describe(self.parsed), traces, self.cfg.search.rrf_k, weights or {})
        return SearchResponse(
            hits=hits,
            low_confidence=low_confidence,
            warnings=tuple(dict.fromkeys(self.warnings)),
            timings=self.timings,
            explain=info,
            **{**self.fields, **fields},
        )

    def degrade(self, reason: str) -> None:
        if not self.fields["degraded"]:
            self.fields.update(degraded=True, degraded_reason=reason)


def search(
    query: str = "",
    *,
    limit: int = 10,
    offset: int = 0,
    account: str | None = None,
    thread: int | None = None,
    sender: str | None = None,
    after: Any = None,
    before: Any = None,
    labels: Sequence[str] | str | None = None,
    disposition: Sequence[str] | str | None = None,
    unread: bool | None = None,
    categories: Sequence[str] | str | None = None,
    min_priority: int | None = None,
    sort: str = "relevance",
    explain: bool = False,
    retrievers: Sequence[str] = RETRIEVERS,
    config: Config | None = None,
) -> SearchResponse:
    """Search one account's mail. See DESIGN.md "Query language" and "A hit and a response".

    `retrievers`: ("keyword",), ("vector",) or both (the default); the eval scores each alone
    through this same path. Asking for one is a choice, not a degraded search."""
    cfg = config if config is not None else config_mod.load()
    data_dir = config_mod.resolve_data_dir(cfg)
    respond = _Response(cfg, data_dir, explain)
    use = _retrievers(retrievers, respond.warnings)

    t = time.perf_counter()
    parsed = respond.parsed = query_mod.parse(query, categories=cfg.triage.categories)
    respond.warnings.extend(parsed.warnings)
    limit, offset, sort = _check_paging(limit, offset, sort, respond.warnings)
    plan = matching.plan(parsed, cfg.search.keyword_min_match)
    if plan:
        respond.warnings.extend(plan.warnings)
    respond.timings["parse"] = _ms(t)

    raw_path = data_dir / "raw.db"
    if not raw_path.exists():
        respond.warnings.append("no mail yet: run `oaken import` or `oaken sync` first")
        return respond()
    fields = filters.Fields(
        thread=thread,
        sender=sender,
        after=after,
        before=before,
        labels=labels,
        disposition=disposition,
        unread=unread,
        categories=categories,
        min_priority=min_priority,
    )
    ask_vector, reason, why = _vector_precheck(cfg, data_dir, use) if plan is not None else (False, None, None)
    if reason:
        respond.degrade(reason)
        respond.warnings.append(why or reason)
    if plan is not None and use == ("vector",) and cfg.embedder.model == "none":
        respond.warnings.append('retrievers=("vector",) but [embedder] model = "none": no retriever to ask')
    try:
        with Store(raw_path, readonly=True) as store:
            name = respond.fields["account"] = _account(store, cfg, account, respond.warnings)
            if name is None:
                return respond()
            cons, warned = filters.constraints(parsed, fields, account=name, categories=cfg.triage.categories)
            respond.warnings.extend(warned)
            if cons.impossible:
                respond.warnings.append(cons.impossible)
                return respond()
            want = _depth(cfg, plan, sort, offset + limit, fused=ask_vector)

            job = None
            if ask_vector:  # both retrievers at once: the vector side in its own thread
                from oaken.search import vector_side

                job = vector_side.VectorJob(cfg, data_dir, raw_path, parsed, cons, want)
            kw, unavailable = None, False
            if plan is None or "keyword" in use:
                t = time.perf_counter()
                kw, unavailable = _keyword_side(
                    store, data_dir, cfg, plan, cons, want, respond.warnings, details=want <= offset + limit
                )
                respond.timings["keyword"] = _ms(t)
            vec, best_cosine, best_chunks = _vector_list(job, respond)
            if vec is not None and "keyword" in use:  # retrievers=("vector",) alone: the raw list
                vec = _meaning_floor(
                    cfg, vec, kw, narrowed=_narrowed(cons.index), question=plan is not None and plan.question
                )
            lists = [lst for lst in (kw, vec) if lst is not None]
            if unavailable:
                respond.fields["degraded"] = False
                respond.degrade("keyword_index_unavailable")
            mode = "hybrid" if kw and vec else "vector" if vec else "keyword"
            if not lists:
                return respond(mode=mode)
            weights = _weights(cfg, parsed, lists, question=plan is not None and plan.question)
            fused = _fuse(lists, weights, cfg.search.rrf_k) if plan is not None else None

            t = time.perf_counter()
            fill = None
            if plan is not None and kw is not None and any(not r.described for r in kw.ranked):
                fill = functools.partial(hits_mod.described, data_dir, cfg, plan, cons)
            fold = functools.partial(hits_mod.fold, data_dir) if plan is not None and sort != "date" else None
            hits = hits_mod.page(store, lists, fused, sort=sort, offset=offset, limit=limit, fill=fill, fold=fold)
            if vec is not None and plan is not None:
                listed = len(kw.ranked) if kw is not None and "keyword" in use else None
                hits = hits_mod.meaning_hits(
                    hits, best_chunks, data_dir, cfg, parsed, plan, listed, weights.get("keyword", 1.0)
                )
            respond.timings["fetch"] = _ms(t)
    except apsw.Error as e:  # raw.db, the source of truth, cannot be read: a failure, not a degraded search
        raise (failure(raw_path, e, reading=True) or damaged(raw_path, e)) from None
    return respond(
        hits,
        mode=mode,
        low_confidence=_low_confidence(cfg, plan, kw, vec, best_cosine),
        traces=tuple(lst.trace for lst in lists),
        weights=weights,
    )


def _depth(cfg: Config, plan: matching.MatchPlan | None, sort: str, need: int, *, fused: bool) -> int:
    """How many messages each retriever lists: the same for every page of a query, so that its pages
    are slices of one list. Fusion sums weight / (rrf_k + rank) over lists, so lists cut at a depth
    that moved with offset + limit gave each page its own order (pages repeated and skipped hits,
    and the top hits changed with --limit). Date order reaches over every match the search may
    widen to. A listing, and a lookup's keyword list alone, are the same prefix at any depth
    (newest first; the best chunk's bm25): they read only what the page needs."""
    if plan is None:
        return need
    if sort == "date" or fused or plan.question:  # a question's graded order moves with its depth
        return max(need, cfg.search.max_candidates)
    return need


def _vector_list(job: Any, respond: _Response) -> tuple[RetrieverResult | None, float | None, dict[int, int]]:
    """Wait for the vector side: (its list, or None when it could not answer; the best cosine;
    each message's best chunk)."""
    if job is None:
        return None, None, {}
    from oaken.search import vector_side

    result, warning = job.wait()
    respond.timings["vector"] = job.ms
    respond.timings.update({f"vector_{k}": v for k, v in result.timings.items()})
    respond.warnings.extend(result.warnings)
    if warning:
        respond.warnings.append(warning)
    if result.degraded_reason:
        respond.degrade(result.degraded_reason)
        return None, None, {}
    if result.state != "ok":
        return None, None, {}
    return vector_side.as_list(result, job.ms), result.best_cosine, vector_side.best_chunks(result)


def _narrowed(f: Any) -> bool:
    """The query names which mail it means (a sender, recipient, subject word, date range, label,
    folder, thread or attachment), beyond the account and disposition every search has."""
    return bool(
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


def _meaning_floor(
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
    return RetrieverResult(vec.retriever, ranked, replace(vec.trace, kept=len(ranked)))


def _low_confidence(
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


def _keyword_side(
    store: Store,
    data_dir: Path,
    cfg: Config,
    plan: matching.MatchPlan | None,
    cons: filters.Constraints,
    want: int,
    warnings: list[str],
    details: bool,
) -> tuple[RetrieverResult | None, bool]:
    """(the keyword list, whether index.db is unavailable). A query with no words lists by date."""
    try:
        with KeywordIndex(data_dir, cfg.index) as index:
            if plan is None:
                return retrievers.newest(index, store, cons, want), False
            return retrievers.keyword(index, store, plan, cons, want, cfg.search, details=details), False
    except IndexUnavailable as e:
        warnings.append(str(e))
        return None, True
    except QueryError as e:  # a MATCH FTS5 refused: a bug here, reported rather than raised
        warnings.append(f"the keyword index refused the query: {e}")
        return RetrieverResult(
            "keyword", (), RetrieverTrace("keyword", "error", plan.expression if plan else "")
        ), False


def _weights(
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


def _fuse(lists: Sequence[RetrieverResult], weights: dict[str, float], rrf_k: int) -> list[FusedItem]:
    return rrf_fuse({lst.retriever: [r.message for r in lst.ranked] for lst in lists}, weights, rrf_k)


__all__ = ["search", "SORTS"]
