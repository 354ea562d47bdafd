"""The text index opened for ranking, kept between searches in a long-lived process.

A ranker answers only for the index.db it mirrors: same generation, same change seq, cut as this
code cuts (schema.Sidecar). Otherwise (missing, behind, damaged) there is none and the caller
ranks with FTS5, which holds the same words: the answer is whole, only slower.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Collection, Sequence

import tantivy

from oaken import log
from oaken.index.keyword.text.expr import Compiler
from oaken.index.keyword.text.schema import SIDECAR, Sidecar, mark_damaged, read_sidecar, repeats, text_dir
from oaken.index.keyword.text.tokens import Tokens


class Ranker:
    """An open text index: the best chunks for a MATCH, as (chunk, message, score)."""

    def __init__(self, directory: Path, sidecar: Sidecar, quoted_weight: float) -> None:
        self.sidecar = sidecar
        self._index = tantivy.Index.open(str(directory))
        self._searcher = self._index.searcher()
        self._tokens = Tokens()
        self._quoted = quoted_weight

    def ranked(self, expr: str, k: int, exclude: Collection[int] = ()) -> tuple[list[tuple[int, int, float]], bool]:
        """The best `k` chunks, best first, and whether they are every match; none of the messages
        in `exclude` (a must-not: the scores of the others do not change). `k` is held to the
        number of documents (a page far past the end asks for more than there are: Tantivy would
        reserve room for all of them)."""
        query = Compiler(self._index.schema, self._tokens, self._quoted).compile(expr)
        if exclude:
            left_out = tantivy.Query.term_set_query(self._index.schema, "message", sorted(exclude))
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.MustNot, left_out)])
        every = self._searcher.num_docs
        k = max(1, min(k, every))
        found = self._searcher.search(query, k, count=False).hits
        addresses = [a for _, a in found]
        chunks = self._searcher.fast_field_values("chunk", addresses)
        messages = self._searcher.fast_field_values("message", addresses)
        hits = [(int(c or 0), int(m or 0), float(s)) for (s, _), c, m in zip(found, chunks, messages)]
        return hits, len(found) < k or k >= every

    def held(self, expr: str, chunks: Sequence[int], skip: int) -> dict[int, tuple[int, ...]] | None:
        """Which phrases of `expr` (numbered as FTS5 does, less the first `skip`) each of these
        chunks holds; None when there are more than HELD_MAX. At a million messages 3.5-4.9 ms
        for 250 chunks, where FTS5's lookup of each took 10-19."""
        phrases = Compiler(self._index.schema, self._tokens, self._quoted).phrases(expr)[skip:]
        if len(phrases) > HELD_MAX:
            return None
        if not chunks:
            return {}
        found = self._which("chunk", chunks, phrases, len(chunks))
        return {chunk: tuple(i for i in range(len(phrases)) if bits >> i & 1) for chunk, bits in found}

    def present(self, expressions: Sequence[str], messages: Sequence[int]) -> dict[int, set[int]] | None:
        """For each of these messages, which of `expressions` (their indexes) one of its chunks
        matches; None for more than HELD_MAX expressions or more matching chunks than one list
        reads. At a million messages ~4 ms for 150 messages and a phrase, where FTS5 took 26-77
        (the vector side of a hybrid phrase search asks it each round)."""
        if len(expressions) > HELD_MAX:
            return None
        if not messages or not expressions:
            return {}
        compiler = Compiler(self._index.schema, self._tokens, self._quoted)
        k = min(self._searcher.num_docs, max(len(messages) * PRESENT_CHUNKS, 1000))
        found = self._which("message", messages, [compiler.compile(e) for e in expressions], k, matching=True)
        if len(found) >= k and k < self._searcher.num_docs:
            return None  # it may hold more: FTS5 says
        out: dict[int, set[int]] = {}
        for message, bits in found:
            out.setdefault(message, set()).update(i for i in range(len(expressions)) if bits >> i & 1)
        return out

    def _which(
        self, field: str, ids: Sequence[int], queries: list[tantivy.Query], k: int, *, matching: bool = False
    ) -> list[tuple[int, int]]:
        """(`field`'s value, which of `queries` it matched as bits) for the documents whose `field`
        is one of `ids` (and, `matching`, that match one of them), at most `k`. One search: the ids
        a term set, each query a constant score of 2^i, so a score is the sum of the bits (exact
        in Tantivy's float32 scores up to HELD_MAX queries)."""
        parts = [
            (
                tantivy.Occur.Must,
                tantivy.Query.const_score_query(
                    tantivy.Query.term_set_query(self._index.schema, field, list(ids)), 0.0
                ),
            )
        ]
        parts += [
            (tantivy.Occur.Should, tantivy.Query.const_score_query(q, float(1 << i))) for i, q in enumerate(queries)
        ]
        query = tantivy.Query.boolean_query(parts, 1) if matching else tantivy.Query.boolean_query(parts)
        found = self._searcher.search(query, max(k, 1), count=False).hits
        values = self._searcher.fast_field_values(field, [a for _, a in found])
        return [(int(v or 0), int(score)) for (score, _), v in zip(found, values)]


HELD_MAX = 24  # phrases whose bits a float32 score holds exactly
PRESENT_CHUNKS = 64  # the matching chunks `present` reads at most, per message asked


_LOCK = threading.Lock()
# by (directory, weight_quoted, pid): a process forked from one holding it opens its own (Tantivy's
# threads are not in the child)
_OPEN: dict[tuple[str, float, int], tuple[tuple[int, int, int], Ranker]] = {}
_WARNED: set[str] = set()


def ranker(data_dir: Path, weights: tuple[float, ...], generation: str, seq: int) -> Ranker | None:
    """The text index of `data_dir` when it mirrors index.db at this generation and seq; else None."""
    directory = text_dir(data_dir, generation)
    try:
        st = (directory / SIDECAR).stat()
    except OSError:
        return None
    signature = (st.st_ino, st.st_mtime_ns, st.st_size)
    key = (str(directory), weights[4], os.getpid())
    with _LOCK:
        cached = _OPEN.get(key)
        if cached is None or cached[0] != signature:
            sidecar = read_sidecar(directory)
            if sidecar is None:
                return None
            try:
                opened = Ranker(directory, sidecar, weights[4])
            except (ValueError, OSError) as e:  # damaged: the next keyword pass builds it again
                failed(directory, f"the text index cannot be opened ({e})")
                return None
            _OPEN[key] = cached = (signature, opened)
    found = cached[1]
    return found if found.sidecar.mirrors(generation, seq, repeats(weights)) else None


def failed(directory: Path, what: str) -> None:
    """Said once a process, and noted for the writer: FTS5 ranks until the next pass builds it again."""
    mark_damaged(directory, what)
    if str(directory) not in _WARNED:
        _WARNED.add(str(directory))
        log.get("oaken.index").warning(
            "index.text_unusable", path=str(directory), reason=what, note="ranking with FTS5 until it is built again"
        )


def forget() -> None:
    """Close every kept text index (tests; a process that moved the data dir)."""
    with _LOCK:
        _OPEN.clear()
        _WARNED.clear()
