"""index.db's own tokenizer called from Python, so that the text index holds the very tokens FTS5
indexes and parses (Porter stems, diacritics removed, CJK bigrams with their colocated
characters): a word matches the same chunks in both, only the ranking differs."""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from oaken.index.keyword import tokenizer as oaken_tokenizer

# what the text index was cut with: another value makes it stale (built again from index.db)
NAME = oaken_tokenizer.TOKENIZE


@dataclass(frozen=True)
class Cut:
    """A value's tokens, one tuple per position (more than one: CJK characters colocated with
    their bigram)."""

    positions: tuple[tuple[str, ...], ...]
    colocated: bool  # some position holds more than one token

    def words(self) -> list[str]:
        return [p[0] for p in self.positions]


EMPTY = Cut((), False)


class Tokens:
    """One per process or thread: an in-memory SQLite connection that registers oaken_cjk."""

    def __init__(self) -> None:
        self._con = apsw.Connection(":memory:")
        oaken_tokenizer.register(self._con)
        self._tok = self._con.fts5_tokenizer(oaken_tokenizer.NAME, list(oaken_tokenizer.BASE))

    def document(self, text: str | None) -> Cut:
        if not text:
            return EMPTY
        utf8 = text.encode("utf-8", "surrogateescape")
        if utf8.isascii():  # no script without spaces: one token a position, as strings (faster)
            found = self._tok(utf8, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False, include_colocated=False)
            return Cut(tuple((str(t),) for t in found), False)
        tuples = self._tok(utf8, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False, include_colocated=True)
        positions = tuple(tuple(str(x) for x in t) for t in tuples)
        return Cut(positions, any(len(p) > 1 for p in positions))

    def query(self, text: str) -> list[str]:
        """A quoted query string's tokens (several: FTS5 reads it as a phrase)."""
        found = self._tok(
            text.encode("utf-8", "surrogateescape"),
            apsw.FTS5_TOKENIZE_QUERY,
            None,
            include_offsets=False,
            include_colocated=False,
        )
        return [t if isinstance(t, str) else str(t[0]) for t in found]
