"""The keyword retriever (a query with no words is listed by oaken.search.listing).

A retriever returns a ranked list of messages (chunks collapsed, ranks from 1, every filter
applied), which is what fusion consumes; the vector retriever returns the same `RetrieverResult`.
Filters the index cannot judge (read state, triage, exclusions) are applied to candidates, and when
they leave too few the search widens: overfetch x limit chunks, doubling up to max_candidates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Sequence

from oaken.config import SearchConfig
from oaken.index.keyword import KeywordChunkHit, KeywordFilters, KeywordIndex
from oaken.search.filters import Constraints, as_of
from oaken.search.matching import MatchPlan
from oaken.search.types import MatchedChunk, RetrieverTrace
from oaken.store import Store

SNIPPET_CHARS = 160
# Rounds past max_candidates that leave out the messages already read (`_past`): a word of a
# subject is in every chunk of its message, so one long message can fill a whole round.
PAST_ROUNDS = 3


@dataclass(frozen=True)
class Ranked:
    """One message in one retriever's list."""

    message: int
    rank: int  # from 1, after chunks are collapsed and filters applied
    score: float  # the retriever's own score (bm25, cosine): never compared across retrievers
    snippet: str
    detail: str  # why this rank, in words
    strong: bool  # holds every graded clause of the query (for low_confidence)
    chunks: tuple[MatchedChunk, ...] = ()  # its other chunks that matched
    chunk: int = 0  # its best chunk (keyword side)
    described: bool = True  # False: snippet and columns left for `describe` (the page's only)
    holds_exact: bool = True  # holds every identifier and phrase of the query (for low_confidence)


@dataclass(frozen=True)
class RetrieverResult:
    retriever: str
    ranked: tuple[Ranked, ...]
    trace: RetrieverTrace
    # Cut short: more lay past the list (matches past the chunks read; cosines past the candidates),
    # so a message it does not hold may rank just past it, and fusion measures its shares from the
    # share of the rank just past it (oaken.search.fusion). A whole list (every match read) is not
    # cut: a message it does not hold does not match.
    cut: bool = False


@dataclass(frozen=True)
class _Candidate:
    message: int
    best: KeywordChunkHit
    held: frozenset[int]  # graded clauses held by the message's matched chunks together
    best_held: int
    others: tuple[KeywordChunkHit, ...]


def _collapse(hits: Sequence[KeywordChunkHit], plan: MatchPlan, every: bool = False) -> list[_Candidate]:
    """Chunks to messages: the best chunk (most clauses held, then bm25) stands for its message.
    `every`: each chunk holds every clause (a lookup's AND, read without its phrases)."""
    whole = frozenset(range(len(plan.clauses)))
    by_message: dict[int, list[KeywordChunkHit]] = {}
    for h in hits:
        by_message.setdefault(h.message, []).append(h)
    out = []
    for message, chunks in by_message.items():
        graded = sorted(chunks, key=lambda h: (len(plan.held(h.phrases)), h.score), reverse=True)
        held: set[int] = set()
        for h in chunks:
            held |= plan.held(h.phrases)
        best = graded[0]
        if every:
            held = set(whole)
        out.append(
            _Candidate(
                message, best, frozenset(held), len(held) if every else len(plan.held(best.phrases)), tuple(graded[1:])
            )
        )
    # graded matching: chunks holding every word rank above chunks holding some
    out.sort(key=lambda c: (c.best_held, c.best.score), reverse=True)
    return out


def keyword(
    index: KeywordIndex,
    store: Store,
    plan: MatchPlan,
    cons: Constraints,
    want: int,
    cfg: SearchConfig,
    *,
    details: bool = True,
) -> RetrieverResult:
    """The best `want` messages for the query's words (fewer when fewer match). A lookup's chunks
    (its AND: each holds every clause) are not looked up again for which words and columns they
    hold; a question's graded order needs them, and so does a lookup's spread across chunks unless
    `details` is off (a list read far deeper than the page shown). Snippets are never read here:
    `describe` reads the page's (the entries are left `described=False`)."""
    start = time.perf_counter()
    # Reading snippets for every chunk a round ranks cost 146 ms of a 3-word question at 10k
    # messages, and 0.4 s of a lookup whose words lie in different chunks (`_spread` widening to
    # 500 chunks, a snippet each, every round); the page needs ten. Reading a lookup's columns and
    # phrases cost 3-5 ms of a 6-20 ms search at a million messages, to learn what its AND says.
    lazy = not plan.question
    cons = as_of(cons, store, index.seq())
    asked = min(max(want * cfg.overfetch, want, 1), max(cfg.max_candidates, want))

    def admitted_of(hits: Sequence[KeywordChunkHit]) -> list[_Candidate]:
        """The messages of these chunks that hold enough clauses and pass every filter, in order."""
        candidates = [c for c in _collapse(hits, plan, every=lazy) if len(c.held) >= plan.required]
        kept = set(cons.admit(index, store, [c.message for c in candidates], phrases_checked=True))
        return [c for c in candidates if c.message in kept]

    rounds = 0
    while True:
        rounds += 1
        hits, exhausted = _query(index, plan.expression, cons, asked, details=not lazy)
        admitted = admitted_of(hits)
        if len(admitted) >= want or exhausted or asked >= cfg.max_candidates:
            break
        asked = min(asked * 2, cfg.max_candidates)
    # The chunks read may belong to fewer than `want` messages: a few long ones (a 997-chunk
    # message held a subject word in each: the list was that one message, cut short, and fusion
    # gave a cut list's first rank almost nothing, so a lookup of its own word ranked it third).
    # Then rounds past the cap read the other messages; each one's best chunk scored below every
    # chunk already read, so they rank after the messages found so far (a question's graded order
    # holds within each round). Filters that reject what was read do not widen past the cap.
    seen = {h.message for h in hits}
    for _ in range(PAST_ROUNDS):
        if len(admitted) >= want or exhausted or len(seen) >= want:
            break
        rounds += 1
        more, exhausted = _query(index, plan.expression, _past(cons, seen), asked, details=not lazy)
        seen |= {h.message for h in more}
        admitted += admitted_of(more)
    total = len(plan.clauses)
    spread: list[_Candidate] = []
    spread_whole = True  # every chunk holding one of a spread lookup's words was read
    # only once every one-chunk match is listed, so that the list is the same prefix at any depth
    if plan.spread and len(admitted) < want and exhausted:
        spread, spread_whole = _spread(
            index,
            store,
            plan,
            cons,
            want - len(admitted),
            cfg,
            {c.message for c in admitted},
            details=details,
        )
    ranked = tuple(
        Ranked(
            message=c.message,
            rank=i,
            score=c.best.score,
            snippet=c.best.snippet,
            detail=(
                _holds(c, total)
                + (" in one chunk" if i <= len(admitted) else " across its chunks")
                + f"; bm25 {c.best.score:.2f}"
            ),
            strong=len(c.held) >= total,
            chunks=tuple(MatchedChunk(h.chunk, "keyword", h.snippet) for h in c.others),
            chunk=c.best.chunk,
            described=False,  # `describe` adds the snippet and the columns for the page
            holds_exact=plan.exact_clauses <= c.held,
        )
        for i, c in enumerate([*admitted, *spread], start=1)
    )
    trace = RetrieverTrace(
        "keyword", "ok", plan.expression, rounds, asked, len(ranked), round((time.perf_counter() - start) * 1000, 2)
    )
    # cut short: more matches lay past the chunks read (a lookup's words across chunks: its quota
    # met, or its chunks read only to max_candidates and past rounds)
    cut = not exhausted or (bool(spread) and len(ranked) >= want) or not spread_whole
    return RetrieverResult("keyword", ranked, trace, cut=cut)


def _past(cons: Constraints, seen: set[int]) -> Constraints:
    """`cons` leaving out the messages a round already read, in index.db's filters and in the
    list of recently changed messages (filters.as_of)."""

    def more(f: KeywordFilters) -> KeywordFilters:
        return replace(f, exclude_ids=f.exclude_ids | seen)

    return replace(cons, index=more(cons.index), side=None if cons.side is None else more(cons.side))


def describe(index: KeywordIndex, plan: MatchPlan, cons: Constraints, ranked: Sequence[Ranked]) -> dict[int, Ranked]:
    """The page's keyword entries with their snippets and columns, which the list leaves out."""
    todo = [r for r in ranked if not r.described]
    if not todo:
        return {}
    got = index.chunk_details(
        plan.spread or plan.expression, cons.index, [c for r in todo for c in (r.chunk, *(m.chunk for m in r.chunks))]
    )
    out = {}
    for r in todo:
        snippet, columns, _ = got.get(r.chunk, ("", (), ()))
        out[r.message] = replace(
            r,
            snippet=snippet,
            detail=r.detail + _columns(columns),
            chunks=tuple(replace(m, snippet=got.get(m.chunk, ("",))[0]) for m in r.chunks),
            described=True,
        )
    return out


def past_the_list(index: KeywordIndex, plan: MatchPlan, messages: Sequence[int], listed: int) -> dict[int, Ranked]:
    """Those of `messages` (found by another retriever, past the `listed` the keyword list holds)
    that match the query's words all the same, as the keyword side judges a match (every word of a
    lookup, somewhere in the message; a question's share of its words). They have no keyword rank
    (0): ranking them would mean ranking every match. Only the page's few messages are asked."""
    if not messages:
        return {}
    hits = index.query_within(plan.spread or plan.expression, messages)
    total = len(plan.clauses)
    return {
        c.message: Ranked(
            message=c.message,
            rank=0,
            score=c.best.score,
            snippet=c.best.snippet,
            detail=(
                f"{_holds(c, total)}{_columns(c.best.columns)}; not ranked: past the "
                f"{listed} messages the keyword side lists, so it adds nothing to the score"
            ),
            strong=len(c.held) >= total,
            chunks=tuple(MatchedChunk(h.chunk, "keyword", h.snippet) for h in c.others),
        )
        for c in _collapse(hits, plan)
        if len(c.held) >= plan.required
    }


def _query(
    index: KeywordIndex, match: str, cons: Constraints, asked: int, *, details: bool
) -> tuple[list[KeywordChunkHit], bool]:
    """The best `asked` chunks within the filters (no snippets), and whether fewer matched."""
    hits, found = _query_counted(index, match, cons, asked, details=details)
    return hits, all(n < asked for n in found)


def _query_counted(
    index: KeywordIndex, match: str, cons: Constraints, asked: int, *, details: bool
) -> tuple[list[KeywordChunkHit], tuple[int, ...]]:
    """The best `asked` chunks within the filters, and how many each list gave (fewer than `asked`:
    every match). With `cons.side` (the messages changed since index.db was written, without its
    copy of labels: filters.as_of) both lists are merged by score, so a label set a moment ago finds
    its messages. The best n of them for any n <= asked are the best n chunks. Both lists are then
    ranked by FTS5: the text index would rank the first and, too rare for it, FTS5 the few of the
    second, and scores of two BM25s do not compare."""
    one = cons.side is None
    hits = index.query(match, cons.index, asked, details=details, snippets=False, columns=False, text=one)
    if cons.side is None:
        return hits, (len(hits),)
    extra = index.query(match, cons.side, asked, details=details, snippets=False, columns=False, text=False)
    merged = sorted({h.chunk: h for h in (*hits, *extra)}.values(), key=lambda h: (-h.score, h.chunk))
    return merged[:asked], (len(hits), len(extra))


def _holds(c: _Candidate, total: int) -> str:
    return f"holds {len(c.held)} of {total} {'word' if total == 1 else 'words'}"


def _columns(columns: Sequence[str]) -> str:
    return f"; in {', '.join(columns) or '?'}"


def _spread(
    index: KeywordIndex,
    store: Store,
    plan: MatchPlan,
    cons: Constraints,
    want: int,
    cfg: SearchConfig,
    have: set[int],
    details: bool = True,
) -> tuple[list[_Candidate], bool]:
    """A lookup whose words are in different chunks of one message: chunks holding any of the words,
    kept when their message holds every clause somewhere. Ranked after every one-chunk match;
    `want` more are sought. Also whether every chunk holding one of the words was read."""
    if not all(index.matches_anything(" OR ".join(alts)) for alts in plan.alternatives):
        return [], True  # a word found nowhere: ranking the others' chunks would be wasted
    asked = min(max(want * cfg.overfetch, want, 1), cfg.max_candidates)
    texts = [t for alts in plan.alternatives for t in alts]
    everything = frozenset(range(len(plan.alternatives)))
    present: dict[int, frozenset[str]] = {}

    def admitted_of(hits: Sequence[KeywordChunkHit]) -> list[_Candidate]:
        """The messages of these chunks (not listed already) that hold every clause somewhere and
        pass every filter, by the best chunk of each read (hits come best first, ties by chunk
        id): unlike the graded order, the same prefix at any depth."""
        candidates = [c for c in _collapse(hits, plan) if c.message not in have]
        unknown = [c.message for c in candidates if c.message not in present]
        if unknown:
            held = index.expressions_present(unknown, texts)
            present.update({m: held.get(m, frozenset()) for m in unknown})
        whole = [
            c
            for c in candidates
            if all(any(t in present.get(c.message, ()) for t in alts) for alts in plan.alternatives)
        ]
        kept = set(cons.admit(index, store, [c.message for c in whole], phrases_checked=True))
        first: dict[int, int] = {}
        for i, h in enumerate(hits):
            first.setdefault(h.message, i)
        return [
            _Candidate(c.message, c.best, everything, c.best_held, c.others)
            for c in sorted(whole, key=lambda c: first[c.message])
            if c.message in kept
        ]

    # Ranked once, as deep as the widening may go: FTS5 scores every match at any depth, and the
    # best `asked` are the first `asked` of the deeper list. Re-ranking for each round cost five
    # rankings of a common OR (10,000 messages: 87 ms of a 0.23 s lookup).
    deepest, found = _query_counted(index, plan.spread, cons, cfg.max_candidates, details=details)
    while True:  # widens like the one-chunk matches: a message is listed once one of its chunks is read
        hits, exhausted = deepest[:asked], all(n < asked for n in found)
        out = admitted_of(hits)
        if len(out) >= want or exhausted or asked >= cfg.max_candidates:
            break
        asked = min(asked * 2, cfg.max_candidates)
    # the chunks read may hold few messages (long ones: see `keyword`): read the others past the cap
    seen = have | {h.message for h in hits}
    for _ in range(PAST_ROUNDS):
        if len(out) >= want or exhausted or len(seen - have) >= want:
            break
        more, found = _query_counted(index, plan.spread, _past(cons, seen), cfg.max_candidates, details=details)
        exhausted = all(n < cfg.max_candidates for n in found)
        seen |= {h.message for h in more}
        out += admitted_of(more)
    return out, exhausted


__all__ = ["Ranked", "RetrieverResult", "describe", "keyword", "past_the_list"]
