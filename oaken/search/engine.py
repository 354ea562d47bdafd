"""`oaken.search(...)`: parse, ask the retrievers, filter, collapse, fuse, page, describe the hits.

Never raises on what a person types or passes: unreadable values are warnings, a missing or
damaged index.db is a degraded response. One account at a time (DESIGN.md "Precise rules").

The vector side plugs in at `_vector_side`: it returns a `RetrieverResult` (or a degraded
reason) and `_fuse` already fuses any number of lists with `rrf_fuse`. Nothing on the keyword
path imports torch, sentence-transformers or LanceDB.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import apsw

from oaken import config as config_mod
from oaken.config import Config
from oaken.errors import IndexUnavailable, QueryError, StoreError
from oaken.index.keyword import KeywordIndex
from oaken.search import filters, matching, retrievers
from oaken.search import query as query_mod
from oaken.search.fusion import FusedItem, rrf_fuse
from oaken.search.retrievers import Ranked, RetrieverResult
from oaken.search.types import Explain, Hit, RetrieverTrace, SearchResponse, Why
from oaken.store import MessageMeta, Store

SORTS = ("relevance", "date")
MAX_LIMIT = 1000


@dataclass(frozen=True)
class _VectorSide:
    """What the meaning side can do for this search: a result, or why not."""

    result: RetrieverResult | None
    reason: str | None  # a degraded reason code; None when off by choice or when it answered
    coverage: float | None


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


def _vector_side(cfg: Config, data_dir: Path) -> _VectorSide:
    """The vector retriever's place. Until it is wired in, a configured model reports the vector
    store as missing (DESIGN.md's `no_vector_store`); `model = "none"` is keyword mode by choice.
    The check is a path test, so a keyword search imports nothing heavy."""
    if cfg.embedder.model == "none":
        return _VectorSide(None, None, None)
    return _VectorSide(None, "no_vector_store", 0.0)


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
            warnings.append(f"several accounts ({', '.join(known)}): a search covers one; pass --account / "
                            "account=, or set default_account in the config")
        else:
            warnings.append("no mail yet: run `oaken import` or `oaken sync` first")
        return None
    if name not in known:
        warnings.append(f"no mail in account {name!r} (accounts with mail: {', '.join(known) or 'none'})")
        return None
    return name


class _Response:
    """Collects warnings and timings while a search runs, and makes the response at any exit."""

    def __init__(self, cfg: Config, explain: bool, vector: _VectorSide):
        self.started = time.perf_counter()
        self.cfg = cfg
        self.explain = explain
        self.warnings: list[str] = []
        self.timings: dict[str, float] = {}
        self.parsed: query_mod.ParsedQuery | None = None
        self.fields: dict[str, Any] = dict(mode="keyword", degraded=vector.reason is not None,
                                           degraded_reason=vector.reason, vector_coverage=vector.coverage)

    def __call__(self, hits: tuple[Hit, ...] = (), *, low_confidence: bool = False,
                 traces: tuple[RetrieverTrace, ...] = (), weights: dict[str, float] | None = None,
                 **fields: Any) -> SearchResponse:
        self.timings["total"] = _ms(self.started)
        info = None
        if self.explain and self.parsed is not None:
            info = Explain(query_mod.describe(self.parsed), traces, self.cfg.search.rrf_k, weights or {})
        return SearchResponse(hits=hits, low_confidence=low_confidence, warnings=tuple(dict.fromkeys(self.warnings)),
                              timings=self.timings, explain=info, **{**self.fields, **fields})


def search(query: str = "", *, limit: int = 10, offset: int = 0, account: str | None = None,
           thread: int | None = None, sender: str | None = None, after: Any = None, before: Any = None,
           labels: Sequence[str] | str | None = None, disposition: Sequence[str] | str | None = None,
           unread: bool | None = None, categories: Sequence[str] | str | None = None,
           min_priority: int | None = None, sort: str = "relevance", explain: bool = False,
           config: Config | None = None) -> SearchResponse:
    """Search one account's mail. See DESIGN.md "Query language" and "A hit and a response"."""
    cfg = config if config is not None else config_mod.load()
    data_dir = config_mod.resolve_data_dir(cfg)
    vector = _vector_side(cfg, data_dir)
    respond = _Response(cfg, explain, vector)

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
    fields = filters.Fields(thread=thread, sender=sender, after=after, before=before, labels=labels,
                            disposition=disposition, unread=unread, categories=categories, min_priority=min_priority)
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
            # date order reaches over every match the search may widen to, not the best few
            want = max(offset + limit, cfg.search.max_candidates if plan and sort == "date" else 0)

            t = time.perf_counter()
            kw, unavailable = _keyword_side(store, data_dir, cfg, plan, cons, want, respond.warnings)
            respond.timings["keyword"] = _ms(t)
            # The vector retriever plugs in here: asked beside the keyword side, filtered through
            # cons.admit (phrases and exclusions bind both sides), its list fused with the keyword list.
            lists = [lst for lst in (kw, vector.result) if lst is not None]
            if unavailable:
                return respond(mode="vector" if vector.result else "keyword", degraded=True,
                               degraded_reason="keyword_index_unavailable")
            weights = _weights(cfg, parsed, lists)
            fused = _fuse(lists, weights, cfg.search.rrf_k) if plan is not None else None

            t = time.perf_counter()
            hits = _hits(store, lists, fused, sort=sort, offset=offset, limit=limit)
            respond.timings["fetch"] = _ms(t)
    except apsw.Error as e:  # raw.db, the source of truth, is damaged: a failure, not a degraded search
        raise StoreError(f"{raw_path}: cannot be read ({e}); restore it from a backup, or sync again into a "
                         "new data directory") from None
    strong = any(r.strong for lst in lists for r in lst.ranked)
    return respond(hits, low_confidence=plan is not None and not strong,
                   traces=tuple(lst.trace for lst in lists), weights=weights)


def _keyword_side(store: Store, data_dir: Path, cfg: Config, plan: matching.MatchPlan | None,
                  cons: filters.Constraints, want: int, warnings: list[str]) -> tuple[RetrieverResult | None, bool]:
    """(the keyword list, whether index.db is unavailable). A query with no words lists by date."""
    try:
        with KeywordIndex(data_dir, cfg.index) as index:
            if plan is None:
                return retrievers.newest(index, store, cons, want), False
            return retrievers.keyword(index, store, plan, cons, want, cfg.search), False
    except IndexUnavailable as e:
        warnings.append(str(e))
        return None, True
    except QueryError as e:  # a MATCH FTS5 refused: a bug here, reported rather than raised
        warnings.append(f"the keyword index refused the query: {e}")
        return RetrieverResult("keyword", (), RetrieverTrace("keyword", "error", plan.expression if plan else "")), False


def _weights(cfg: Config, parsed: query_mod.ParsedQuery, lists: Sequence[RetrieverResult]) -> dict[str, float]:
    """Each retriever's RRF weight; exact_boost multiplies the keyword weight (DESIGN.md Fusion)."""
    s = cfg.search
    out = {}
    for lst in lists:
        if lst.retriever == "keyword":
            out["keyword"] = s.keyword_weight * (s.exact_boost if parsed.exact else 1.0)
        else:
            out[lst.retriever] = s.vector_weight
    return out


def _fuse(lists: Sequence[RetrieverResult], weights: dict[str, float], rrf_k: int) -> list[FusedItem]:
    return rrf_fuse({lst.retriever: [r.message for r in lst.ranked] for lst in lists}, weights, rrf_k)


def _iso(ts: int) -> str:
    try:
        return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return ""


def _sender(meta: MessageMeta) -> str:
    if meta.sender_name and meta.sender_addr:
        return f"{meta.sender_name} <{meta.sender_addr}>"
    return meta.sender_addr or meta.sender_name


def _hits(store: Store, lists: Sequence[RetrieverResult], fused: list[FusedItem] | None, *,
          sort: str, offset: int, limit: int) -> tuple[Hit, ...]:
    """The page of hits, described from raw.db (the truth: folders, labels, read state now)."""
    by_list = {lst.retriever: {r.message: r for r in lst.ranked} for lst in lists}
    if fused is None:  # a listing: newest first already
        order: list[tuple[int, float, tuple[Why, ...]]] = [(r.message, 0.0, ()) for r in lists[0].ranked]
    else:
        order = [(f.id, f.score, tuple(
            Why(c.retriever, c.rank, c.weight, c.value, by_list[c.retriever][f.id].detail)
            for c in f.contributions)) for f in fused]
    metas = store.metas(m for m, _, _ in order) if sort == "date" else None
    if metas is not None:
        order.sort(key=lambda o: (o[0] not in metas, -(metas[o[0]].date if o[0] in metas else 0), o[0]))
    page = order[offset:offset + limit]
    if metas is None:
        metas = store.metas(m for m, _, _ in page)
    hits = []
    for message, score, why in page:
        meta = metas.get(message)
        if meta is None:  # deleted from raw.db after the index was written: never returned
            continue
        first: Ranked | None = next((by_list[w.retriever][message] for w in why), None) or \
            by_list[lists[0].retriever].get(message)
        chunks = tuple(c for w in why for c in by_list[w.retriever][message].chunks)
        hits.append(Hit(
            id=meta.id, message_id=meta.message_id, account=meta.account, folders=meta.folders, labels=meta.labels,
            thread=meta.thread, subject=meta.subject, sender=_sender(meta), date=_iso(meta.date), unread=meta.unread,
            score=score, snippet=first.snippet if first else "", why=why, matched_chunks=chunks,
        ))
    return tuple(hits)


__all__ = ["search", "SORTS"]
