"""`oaken.search(...)`: parse, ask the retrievers, filter, collapse, fuse, page, describe the hits.

Never raises on what a person types or passes: unreadable values are warnings, a missing or
damaged index.db is a degraded response. One account at a time (DESIGN.md "Precise rules").

Both retrievers run at once (the vector side in a thread: oaken.search.vector_side), each list
filtered, collapsed to messages and ranked before oaken.search.weighing weighs and fuses them
with `rrf_fuse`; the page of hits is described by oaken.search.hits, and the response made by
oaken.search.response_builder. When the meaning side cannot answer, the keyword list
comes back with DESIGN.md's degraded code. Nothing on the keyword path imports torch,
sentence-transformers or LanceDB.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from pathlib import Path
from typing import Any, Sequence

import apsw

from oaken import config as config_mod
from oaken import extras, paths
from oaken.config import Config
from oaken.errors import IndexUnavailable, QueryError
from oaken.index.keyword import KeywordIndex
from oaken.search import filters, listing, matching, retrievers, weighing
from oaken.search import hits as hits_mod
from oaken.search import query as query_mod
from oaken.search.response_builder import PendingResponse, ms
from oaken.search.retrievers import RetrieverResult
from oaken.search.types import RetrieverTrace, SearchResponse
from oaken.store import Store, damaged, failure

SORTS = ("relevance", "date")
MAX_LIMIT = 1000


RETRIEVERS = ("keyword", "vector")


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
    respond = PendingResponse(cfg, data_dir, explain)
    use = _retrievers(retrievers, respond.warnings)

    t = time.perf_counter()
    parsed = respond.parsed = query_mod.parse(query, categories=cfg.triage.categories, tz=_zone(cfg, respond.warnings))
    respond.warnings.extend(parsed.warnings)
    limit, offset, sort = _check_paging(limit, offset, sort, respond.warnings)
    plan = matching.plan(parsed, cfg.search.keyword_min_match)
    if plan:
        respond.warnings.extend(plan.warnings)
    respond.timings["parse"] = ms(t)

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
            cons, warned = filters.constraints(
                parsed, fields, account=name, categories=cfg.triage.categories, store=store
            )
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
                respond.timings["keyword"] = ms(t)
            vec, best_cosine, best_chunks = _vector_list(job, respond)
            if vec is not None and "keyword" in use:  # retrievers=("vector",) alone: the raw list
                vec = weighing.meaning_floor(
                    cfg, vec, kw, narrowed=weighing.narrowed(cons), question=plan is not None and plan.question
                )
            lists = [lst for lst in (kw, vec) if lst is not None]
            if unavailable:
                respond.degrade("keyword_index_unavailable", over=True)
            mode = "hybrid" if kw and vec else "vector" if vec else "keyword"
            if not lists:
                return respond(mode=mode)
            weights = weighing.weights(cfg, parsed, lists, question=plan is not None and plan.question)
            cut = weighing.cuts(lists) if plan is not None else {}
            fused = weighing.fuse(lists, weights, cfg.search.rrf_k, cut) if plan is not None else None

            t = time.perf_counter()
            fill = None
            failed: list[str] = []  # index.db found damaged while reading the page's snippets
            if plan is not None and kw is not None and any(not r.described for r in kw.ranked):
                fill = functools.partial(hits_mod.described, data_dir, cfg, plan, cons, failed=failed)
            fold = functools.partial(hits_mod.fold, data_dir) if plan is not None and sort != "date" else None
            hits = hits_mod.page(store, lists, fused, sort=sort, offset=offset, limit=limit, fill=fill, fold=fold)
            if failed:
                respond.warnings.extend(failed)
                respond.degrade("keyword_index_unavailable", over=True)
            if vec is not None and plan is not None:
                listed = len(kw.ranked) if kw is not None and "keyword" in use else None
                hits = hits_mod.meaning_hits(
                    hits, best_chunks, data_dir, cfg, parsed, plan, listed, weights.get("keyword", 1.0)
                )
            respond.timings["fetch"] = ms(t)
    except apsw.Error as e:  # raw.db, the source of truth, cannot be read: a failure, not a degraded search
        raise (failure(raw_path, e, reading=True) or damaged(raw_path, e)) from None
    return respond(
        hits,
        mode=mode,
        low_confidence=weighing.low_confidence(cfg, plan, kw, vec, best_cosine),
        traces=tuple(dataclasses.replace(lst.trace, cut=cut.get(lst.retriever, 0)) for lst in lists),
        weights=weights,
    )


def _depth(cfg: Config, plan: matching.MatchPlan | None, sort: str, need: int, *, fused: bool) -> int:
    """How many messages each retriever lists: the same for every page of a query up to
    `fused_depth`, so that those pages are slices of one list. Fusion sums weight / (rrf_k + rank)
    over lists, so lists cut at a depth that moved with offset + limit gave each page its own order
    (pages repeated and skipped hits, and the top hits changed with --limit); a page reaching past
    `fused_depth` reads its next multiple, never past `max_candidates` unless the page itself
    does. Date order reaches over every match the search may widen to. A listing, and a lookup's
    keyword list alone, are the same prefix at any depth (newest first; the best chunk's bm25):
    they read only what the page needs."""
    if plan is None:
        return need
    if sort == "date":
        return max(need, cfg.search.max_candidates)
    if fused or plan.question:  # a question's graded order moves with its depth
        block = cfg.search.fused_depth
        return max(need, min(max(1, -(-need // block)) * block, cfg.search.max_candidates))
    return need


def _vector_list(job: Any, respond: PendingResponse) -> tuple[RetrieverResult | None, float | None, dict[int, int]]:
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


def _zone(cfg: Config, warnings: list[str]) -> Any:
    """The `[search] time_zone` the dates of a query are read in (the config checked it; a zone
    database missing since is a warning, and UTC)."""
    from datetime import UTC

    from oaken.search.dates import zone

    try:
        return zone(cfg.search.time_zone)
    except ValueError as e:
        warnings.append(f"[search] time_zone: {e}; dates are read in UTC")
        return UTC


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
                return listing.newest(index, store, cons, want), False
            return retrievers.keyword(index, store, plan, cons, want, cfg.search, details=details), False
    except IndexUnavailable as e:
        warnings.append(str(e))
        return None, True
    except QueryError as e:  # a MATCH FTS5 refused: a bug here, reported rather than raised
        warnings.append(f"the keyword index refused the query: {e}")
        return RetrieverResult(
            "keyword", (), RetrieverTrace("keyword", "error", plan.expression if plan else "")
        ), False


__all__ = ["search", "SORTS"]
