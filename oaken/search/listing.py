"""The list for a query with no words (`is:unread from:alex`): the newest messages that satisfy
every filter, from index.db's date order, with raw.db judging each (read state, triage, labels,
mail deleted since the index was written). It returns the keyword retriever's `RetrieverResult`.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Sequence

from oaken.index.keyword import KeywordIndex
from oaken.search.filters import Constraints, as_of
from oaken.search.retrievers import SNIPPET_CHARS, Ranked, RetrieverResult
from oaken.search.types import RetrieverTrace
from oaken.store import Store

# A listing reads pages of the date index until it has enough; this bounds one page.
MAX_PAGE = 5000
UNREAD_POOL = 20_000  # up to this many unread messages, is:unread lists them from raw.db's list


def newest(index: KeywordIndex, store: Store, cons: Constraints, want: int) -> RetrieverResult:
    """A query with no words: the newest messages that satisfy every filter, as many as asked.

    Reads the index's date order page by page until enough pass the raw.db filters (or none are left).
    """
    start = time.perf_counter()
    cons = as_of(cons, store, index.seq())
    kept: list[int] = []
    offset, page, rounds = 0, max(want, 50), 0
    # is:unread: only raw.db's short list of unread messages is read from the index's date order,
    # instead of the whole mailbox past every read message (917 ms at 100k messages)
    pool = store.unread_ids(cons.index.account, UNREAD_POOL) if cons.unread and cons.index.account else None
    if pool is not None:
        ids = frozenset(pool) if cons.index.include_ids is None else cons.index.include_ids & frozenset(pool)
        cons = replace(cons, index=replace(cons.index, include_ids=ids))
    # the messages changed since index.db was written, read without its copy of labels (as_of):
    # merged into the date order as the pages reach them
    side = cons.side
    pending = index.newest(side, limit=len(side.include_ids or ()), offset=0) if side is not None else []
    seen: set[int] = set()
    while len(kept) < want:
        rounds += 1
        rows = index.newest(cons.index, limit=page, offset=offset)
        offset += len(rows)
        last = len(rows) < page
        if pending:
            floor = (rows[-1].date, rows[-1].message) if rows and not last else None
            reached = [h for h in pending if floor is None or (h.date, h.message) >= floor]
            pending = pending[len(reached) :]
            rows = sorted({h.message: h for h in (*rows, *reached)}.values(), key=lambda h: (h.date, h.message))[::-1]
        fresh = [r.message for r in rows if r.message not in seen]
        seen.update(fresh)
        # raw.db is the truth: read state, triage, labels, and mail deleted since the index was written
        kept.extend(cons.admit(index, store, fresh))
        if last:
            break
        page = min(page * 2, MAX_PAGE)
    kept = kept[:want]
    snippets = _opening_lines(index, kept)
    ranked = tuple(
        Ranked(m, i, 0.0, snippets.get(m, ""), "no words: newest first", True) for i, m in enumerate(kept, start=1)
    )
    trace = RetrieverTrace(
        "keyword", "listing", "", rounds, offset, len(ranked), round((time.perf_counter() - start) * 1000, 2)
    )
    return RetrieverResult("keyword", ranked, trace)


def _opening_lines(index: KeywordIndex, messages: Sequence[int]) -> dict[int, str]:
    """The start of each message's first chunk: the snippet of a hit found without words."""
    body: dict[int, str] = {}
    quoted: dict[int, str] = {}
    for chunk in index.chunks_of(messages, kind=None):
        (body if chunk.kind == "body" else quoted).setdefault(chunk.message, chunk.text)
    out = {}
    for m in messages:
        text = " ".join((body.get(m) or quoted.get(m) or "").split())
        out[m] = text[:SNIPPET_CHARS] + ("…" if len(text) > SNIPPET_CHARS else "")
    return out


__all__ = ["newest"]
