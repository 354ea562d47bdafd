"""The engine's meaning side: the vector retriever run beside the keyword side, its list bound by
the same constraints, and turned into the `RetrieverResult` that fusion takes.

Imported only when `[embedder] model` is not "none", so a keyword search loads none of it. The
retriever (embedder loaded, store open) is kept per process: the daemon answers warm.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from oaken.config import Config
from oaken.errors import IndexUnavailable
from oaken.index.keyword import KeywordIndex
from oaken.search.filters import Constraints, as_of
from oaken.search.query import ParsedQuery
from oaken.search.retrievers import SNIPPET_CHARS, Ranked, RetrieverResult
from oaken.search.types import MatchedChunk, RetrieverTrace
from oaken.search.vector_retriever import VectorResult, VectorRetriever, needs_admit_for, prefilters
from oaken.store import Store

_RETRIEVERS: dict[tuple[str, str, str], VectorRetriever] = {}
_LOCK = threading.Lock()
_KEEP = 8  # retrievers of distinct settings kept (an eval run tries several thresholds)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")
_WORD = re.compile(r"\w+")


def retriever(cfg: Config, data_dir: Path) -> VectorRetriever:
    """This process's retriever for these settings: loaded once, reused by every search."""
    key = (str(data_dir), repr(cfg.embedder), repr(cfg.search))
    with _LOCK:
        found = _RETRIEVERS.get(key)
        if found is None:
            while len(_RETRIEVERS) >= _KEEP:
                _RETRIEVERS.pop(next(iter(_RETRIEVERS)))
            found = _RETRIEVERS[key] = VectorRetriever(cfg, data_dir=data_dir)
        return found


def embedded_text(parsed: ParsedQuery) -> str:
    """What meaning is asked of: the free text, phrases included; operators and exclusions are not."""
    return " ".join(t.text for clause in parsed.clauses for t in clause)


class _Admit:
    """`admit` for the vector list: phrases, exclusions, the filters LanceDB could not apply and
    raw.db's read state and triage. Its connections open in the thread that first uses them."""

    def __init__(self, cfg: Config, data_dir: Path, raw_path: Path, cons: Constraints):
        self.cfg, self.data_dir, self.raw_path, self.cons = cfg, data_dir, raw_path, cons
        self.index: KeywordIndex | None = None
        self.store: Store | None = None
        self.warning: str | None = None

    def _open(self) -> Store:
        if self.store is None:
            self.store = Store(self.raw_path, readonly=True)
        if self.index is None and self.warning is None:
            try:
                self.index = KeywordIndex(self.data_dir, self.cfg.index)
            except IndexUnavailable as e:
                self.warning = str(e)
        return self.store

    def settle(self) -> None:
        """Bind the constraints to how far vectors/ and index.db have followed raw.db's feed: the
        disposition they copied is not trusted for messages changed since (filters.as_of)."""
        from oaken.index.vector_files import followed_seq

        store = self._open()
        seq = followed_seq(self.data_dir)
        if self.index is not None:
            try:
                seq = min(seq, self.index.seq())
            except IndexUnavailable as e:
                self.index.close()
                self.index, self.warning = None, str(e)
        self.cons = as_of(self.cons, store, seq)

    def __call__(self, ids: Sequence[int]) -> list[int]:
        self._open()
        assert self.store is not None
        if self.index is not None:
            return self.cons.admit(self.index, self.store, ids, index_filters_applied=False)
        # index.db is gone: what needs it cannot be checked, so nothing that depends on it is returned
        c = self.cons
        if c.impossible or c.phrases or c.excluded_terms or c.also or c.exclude or needs_admit_for(c.index):
            return []
        keep = self.store.filter_messages(
            ids,
            unread=c.unread,
            starred=c.starred,
            categories=c.categories,
            min_priority=c.min_priority,
            dispositions=c.dispositions,
            account=c.index.account,
        )
        return [m for m in ids if m in keep]

    def close(self) -> None:
        for conn in (self.index, self.store):
            if conn is not None:
                conn.close()


MAX_DEPTH = 10_000  # the deepest list asked of the vector side: --offset 2147483647 overflowed LanceDB's limit


class VectorJob:
    """The vector side of one search, running in its own thread while the keyword side runs."""

    def __init__(self, cfg: Config, data_dir: Path, raw_path: Path, parsed: ParsedQuery, cons: Constraints, want: int):
        self.started = time.perf_counter()
        self.ms = 0.0
        self.result: VectorResult | None = None
        self._admit = _Admit(cfg, data_dir, raw_path, cons)
        self._retriever = retriever(cfg, data_dir)
        self._text = embedded_text(parsed)
        self._filters = prefilters(cons.index)
        self._want = min(want, MAX_DEPTH)
        self._thread = threading.Thread(target=self._run, name="oaken-vector-side", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            loose = None
            if self._filters.broad and (self._filters.account is not None or self._filters.dispositions):
                # Only what every search names (the account, the dispositions): `admit` judges
                # them for the few candidates from index.db and raw.db (about a millisecond), where
                # LanceDB read both columns of each candidate from its fragment (25-45 ms at a
                # million messages, docs/scale.md). Most mail usually passes; when too little
                # does (a small account, `in:trash`), the retriever gives LanceDB the filters.
                loose = replace(self._filters, account=None, dispositions=())
            if self._filters.dispositions:
                self._admit.settle()
                index = self._admit.cons.index
                self._filters = replace(prefilters(index), disposition_unsure=index.disposition_unsure)
            self.result = self._retriever.retrieve(
                self._text, self._filters, want=self._want, admit=self._admit, loose=loose
            )
        except Exception as e:  # noqa: BLE001 - retrieve never raises; should it, keyword results still come back
            self.result = VectorResult((), "error", (f"vector search failed: {type(e).__name__}: {e}",))
        finally:
            self.ms = round((time.perf_counter() - self.started) * 1000, 2)
            if self.result is None or self.result.state != "timeout":
                self._admit.close()  # after a timeout its abandoned round may still be using them

    def wait(self) -> tuple[VectorResult, str | None]:
        """(the result, a warning when index.db could not bind the vector list)."""
        self._thread.join()
        assert self.result is not None
        warning = None
        if self._admit.warning and self.result.hits == ():
            warning = "without index.db, phrases, exclusions and subject/filename filters cannot bind the vector side"
        return self.result, warning


def as_list(result: VectorResult, ms: float) -> RetrieverResult:
    """The vector list as fusion takes it (its snippets are filled for the page only: `snippets`)."""
    ranked = tuple(
        Ranked(
            message=h.message,
            rank=h.rank,
            score=h.score,
            snippet="",
            detail=f"cosine {h.score:.3f}"
            + (f"; {len(h.matched_chunks) + 1} chunks close" if h.matched_chunks else ""),
            strong=False,
            chunks=tuple(MatchedChunk(c, "vector", "") for c in h.matched_chunks),
        )
        for h in result.hits
    )
    trace = RetrieverTrace(
        "vector", result.state, result.embedded_text, result.rounds, result.candidates, len(ranked), ms
    )
    return RetrieverResult("vector", ranked, trace, cut=result.cut)


def best_chunks(result: VectorResult) -> dict[int, int]:
    return {h.message: h.chunk for h in result.hits}


def snippets(index: KeywordIndex, chunks: dict[int, int], words: Sequence[str]) -> dict[int, str]:
    """For hits found by meaning only: the sentences of the best chunk sharing most words with the
    query (its opening when none does), about SNIPPET_CHARS long. Word overlap, not another model
    call: a search must stay in milliseconds."""
    if not chunks:
        return {}
    wanted = {w.lower() for w in words}
    text_of = {c.id: c.text for c in index.chunks_of(chunks, kind=None) if c.id in set(chunks.values())}
    out = {}
    for message, chunk in chunks.items():
        sentences = [" ".join(s.split()) for s in _SENTENCE.split(text_of.get(chunk, "")) if s.strip()]
        if not sentences:
            continue
        scores = [len(wanted & {w.lower() for w in _WORD.findall(s)}) for s in sentences]
        start = max(range(len(sentences)), key=lambda i: (scores[i], -i))
        picked = ""
        for s in sentences[start:]:
            if picked and len(picked) + len(s) > SNIPPET_CHARS:
                break
            picked = f"{picked} {s}".strip()
        out[message] = picked[:SNIPPET_CHARS] + ("…" if len(picked) > SNIPPET_CHARS else "")
    return out
