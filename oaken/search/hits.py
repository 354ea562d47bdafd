"""The page of hits a search returns, described from raw.db (the truth: folders, labels, read
state now), with near-identical copies folded (oaken.search.copies), the keyword entries a deep
list left undescribed filled in, and the hits found by meaning alone given a snippet of their own.
oaken.search.engine decides which messages make the page; this module says what each one is."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Callable, Sequence

from oaken.config import Config
from oaken.errors import IndexUnavailable, QueryError
from oaken.index.keyword import KeywordIndex
from oaken.search import filters, matching, retrievers
from oaken.search import query as query_mod
from oaken.search.fusion import Contribution, FusedItem
from oaken.search.render import by_meaning_only
from oaken.search.retrievers import Ranked, RetrieverResult
from oaken.search.types import Hit, Why
from oaken.store import MessageMeta, Store


def page(
    store: Store,
    lists: Sequence[RetrieverResult],
    fused: list[FusedItem] | None,
    *,
    sort: str,
    offset: int,
    limit: int,
    fill: Callable[[Sequence[Ranked]], dict[int, Ranked]] | None = None,
    fold: Callable[[list[Any], int], tuple[list[Any], dict[int, tuple[int, ...]]]] | None = None,
) -> tuple[Hit, ...]:
    """The page of hits, described from raw.db (the truth: folders, labels, read state now).
    `fill` gives the page's keyword entries the snippets and columns a list read deep left out;
    `fold` folds near-identical messages into the first of them."""
    by_list = {lst.retriever: {r.message: r for r in lst.ranked} for lst in lists}
    if fused is None:  # a listing: newest first already
        order: list[tuple[int, float, tuple[Contribution, ...]]] = [(r.message, 0.0, ()) for r in lists[0].ranked]
    else:
        order = [(f.id, f.score, f.contributions) for f in fused]
    metas: dict[int, MessageMeta] | None = None
    if sort == "date":
        dated = metas = store.metas(m for m, _, _ in order)
        order.sort(key=lambda o: (o[0] not in dated, -(dated[o[0]].date if o[0] in dated else 0), o[0]))
    copies: dict[int, tuple[int, ...]] = {}
    if fold is not None:  # given for a relevance-ordered list only
        order, copies = fold(order, offset + limit)
    page = order[offset : offset + limit]
    if metas is None:
        metas = store.metas(m for m, _, _ in page)
    if fill is not None and "keyword" in by_list:
        keyword = by_list["keyword"]
        keyword.update(fill([keyword[m] for m, _, _ in page if m in keyword]))
    hits = []
    for message, score, contributions in page:
        meta = metas.get(message)
        if meta is None:  # deleted from raw.db after the index was written: never returned
            continue
        why = tuple(
            Why(c.retriever, c.rank, c.weight, c.value, by_list[c.retriever][message].detail) for c in contributions
        )
        first: Ranked | None = next((by_list[w.retriever][message] for w in why), None) or by_list[
            lists[0].retriever
        ].get(message)
        chunks = tuple(c for w in why for c in by_list[w.retriever][message].chunks)
        hits.append(
            Hit(
                id=meta.id,
                message_id=meta.message_id,
                account=meta.account,
                folders=meta.folders,
                labels=meta.labels,
                thread=meta.thread,
                subject=meta.subject,
                sender=_sender(meta),
                date=_iso(meta.date),
                unread=meta.unread,
                score=score,
                snippet=first.snippet if first else "",
                why=why,
                matched_chunks=chunks,
                copies=copies.get(message, ()),
            )
        )
    return tuple(hits)


def described(
    data_dir: Path,
    cfg: Config,
    plan: matching.MatchPlan,
    cons: filters.Constraints,
    ranked: Sequence[Ranked],
    *,
    failed: list[str] | None = None,
) -> dict[int, Ranked]:
    """The page's keyword entries with the snippets and columns the list leaves out. index.db found
    damaged or gone here is said in `failed` (the caller degrades the answer): the hits stay,
    without snippets."""
    try:
        with KeywordIndex(data_dir, cfg.index) as index:
            return retrievers.describe(index, plan, cons, ranked)
    except IndexUnavailable as e:
        if failed is not None:
            failed.append(str(e))
        return {}
    except QueryError:
        return {}


def fold(data_dir: Path, order: list[Any], need: int) -> tuple[list[Any], dict[int, tuple[int, ...]]]:
    """Near-identical messages folded behind the best-ranked of them (oaken.search.copies)."""
    from oaken.search import copies

    try:
        with KeywordIndex(data_dir) as index:
            return copies.fold(order, lambda o: o[0], need, *copies.from_index(index))
    except IndexUnavailable:
        return order, {}


def meaning_hits(
    hits: tuple[Hit, ...],
    best_chunks: dict[int, int],
    data_dir: Path,
    cfg: Config,
    parsed: query_mod.ParsedQuery,
    plan: matching.MatchPlan,
    listed: int | None,
    weight: float,
) -> tuple[Hit, ...]:
    """The page's hits the vector side alone ranked. One holding the query's words all the same
    (past the keyword list's depth: `listed` messages) gets a keyword `why` with rank 0 and no
    contribution, and a keyword snippet: a hit marked as found by meaning holds none of the words.
    The others get the best-matching sentences of their best chunk."""
    from dataclasses import replace

    from oaken.search import vector_side

    alone = [h.id for h in hits if by_meaning_only(h)]
    if not alone:
        return hits
    try:
        with KeywordIndex(data_dir, cfg.index) as index:
            held: dict[int, Ranked] = {}
            if listed is not None:
                try:
                    held = retrievers.past_the_list(index, plan, alone, listed)
                except QueryError:  # a MATCH FTS5 refused: the keyword side has warned of it
                    pass
            chunks = {m: c for m, c in best_chunks.items() if m in alone and m not in held}
            found = vector_side.snippets(index, chunks, [t.text for c in parsed.clauses for t in c])
    except IndexUnavailable:
        return hits
    out = []
    for h in hits:
        if h.id in held:
            k = held[h.id]
            h = replace(
                h,
                why=(*h.why, Why("keyword", 0, weight, 0.0, k.detail)),
                snippet=k.snippet,
                matched_chunks=(*h.matched_chunks, *k.chunks),
            )
        elif h.id in alone and not h.snippet:
            h = replace(h, snippet=found.get(h.id, ""))
        out.append(h)
    return tuple(out)


def _iso(ts: int) -> str:
    try:
        return datetime.fromtimestamp(ts, tz=UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return ""


def _sender(meta: MessageMeta) -> str:
    if meta.sender_name and meta.sender_addr:
        return f"{meta.sender_name} <{meta.sender_addr}>"
    return meta.sender_addr or meta.sender_name
