"""Oaken's MATCH strings as Tantivy queries.

The grammar is closed: oaken/search/matching.py and filters.py write it, and nothing a person
types reaches it as syntax. Quoted strings (`""` inside is a quote), `*` after one (a prefix),
AND, OR, parentheses and `column : "t"`; AND binds tighter than OR, as in FTS5. A string is
cut by index.db's tokenizer: one token is a term, several a phrase, as FTS5 reads them. Without
a column a string is asked of the combined field and, at the quoted-text weight, of the quoted
field (schema.py); a prefix is a regex on the stemmed token, as FTS5's prefix is on its stem.
"""

from __future__ import annotations

import re

import tantivy

from oaken.errors import QueryError
from oaken.index.keyword.text.schema import COLUMN_FIELDS, COMBINED, QUOTED
from oaken.index.keyword.text.tokens import Tokens

_ITEM = re.compile(
    r'\s*(?:(?P<str>"(?:[^"]|"")*")(?P<star>\*)?|(?P<op>AND|OR|NOT)\b|(?P<paren>[()])|(?P<col>[a-z_]+)\s*:)'
)


class Compiler:
    """Compiles MATCH strings for one index's schema; `quoted_weight` is [index] weight_quoted."""

    def __init__(self, schema: tantivy.Schema, tokens: Tokens, quoted_weight: float) -> None:
        self._schema = schema
        self._tokens = tokens
        self._quoted = quoted_weight
        self._items: list[tuple[str, str]] = []
        self._at = 0
        self._expr = ""

    def compile(self, expr: str) -> tantivy.Query:
        self._expr = expr
        self._items = self._lex(expr)
        self._at = 0
        if not self._items:
            raise QueryError(f"MATCH {expr!r}: no words")
        q = self._or()
        if self._at != len(self._items):
            self._fail(f"unexpected {self._items[self._at][1]!r}")
        return q

    def phrases(self, expr: str) -> list[tantivy.Query]:
        """Each quoted string of `expr` as a query of its own, in order: FTS5's phrase numbers
        (which of them a chunk holds grades a question's hits)."""
        self._expr = expr
        items = self._lex(expr)
        out = []
        column = None
        for i, (kind, value) in enumerate(items):
            if kind == "col":
                column = self._column(value)
            elif kind == "str":
                out.append(self._string(value, column, i + 1 < len(items) and items[i + 1] == ("star", "*")))
                column = None
        return out

    def _fail(self, what: str) -> None:
        raise QueryError(f"keyword query {self._expr!r} could not be read for the text index: {what}")

    def _lex(self, expr: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        pos, end = 0, len(expr.rstrip())
        while pos < end:
            m = _ITEM.match(expr, pos)
            if m is None:
                self._fail(f"cannot read at character {pos}")
                break
            out.extend((kind, value) for kind, value in m.groupdict().items() if value)
            pos = m.end()
        return out

    def _peek(self) -> tuple[str, str] | None:
        return self._items[self._at] if self._at < len(self._items) else None

    def _take(self) -> tuple[str, str]:
        item = self._peek()
        if item is None:
            self._fail("it ends too soon")
            raise AssertionError  # not reached: _fail raises
        self._at += 1
        return item

    def _or(self) -> tantivy.Query:
        parts = [self._and()]
        while self._peek() == ("op", "OR"):
            self._at += 1
            parts.append(self._and())
        return _any(parts)

    def _and(self) -> tantivy.Query:
        parts = [self._primary()]
        while (item := self._peek()) is not None and item not in (("op", "OR"), ("paren", ")")):
            if item == ("op", "AND"):
                self._at += 1
            elif item[0] == "op":  # NOT: matching.py never writes it (exclusions are checked apart)
                self._fail("NOT is not supported")
            parts.append(self._primary())
        if len(parts) == 1:
            return parts[0]
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, p) for p in parts])

    def _primary(self) -> tantivy.Query:
        kind, value = self._take()
        if (kind, value) == ("paren", "("):
            q = self._or()
            if self._take() != ("paren", ")"):
                self._fail("a parenthesis is not closed")
            return q
        column = None
        if kind == "col":
            column = self._column(value)
            kind, value = self._take()
        if kind != "str":
            self._fail(f"expected a quoted string, found {value!r}")
        prefix = self._peek() == ("star", "*")
        if prefix:
            self._at += 1
        return self._string(value, column, prefix)

    def _column(self, name: str) -> str:
        if name not in COLUMN_FIELDS:
            self._fail(f"no column {name!r} in the text index")
        return name

    def _string(self, value: str, column: str | None, prefix: bool) -> tantivy.Query:
        """A quoted string (quotes included) of one column, or of the text at large."""
        words = self._tokens.query(value[1:-1].replace('""', '"'))
        if column is not None:
            return self._leaf(column, words, prefix)
        quoted = self._leaf(QUOTED, words, prefix)
        return _any([self._leaf(COMBINED, words, prefix), tantivy.Query.boost_query(quoted, self._quoted)])

    def _leaf(self, field: str, words: list[str], prefix: bool) -> tantivy.Query:
        s = self._schema
        if not words:  # only separators: FTS5 matches nothing for it
            return tantivy.Query.empty_query()
        if prefix and len(words) == 1:
            return tantivy.Query.regex_query(s, field, re.escape(words[0]) + ".*")
        if prefix:
            return tantivy.Query.regex_phrase_query(
                s, field, [*map(re.escape, words[:-1]), re.escape(words[-1]) + ".*"]
            )
        if len(words) == 1:
            return tantivy.Query.term_query(s, field, words[0], index_option="freq")
        return tantivy.Query.phrase_query(s, field, list[str | tuple[int, str]](words))


def _any(parts: list[tantivy.Query]) -> tantivy.Query:
    if len(parts) == 1:
        return parts[0]
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, p) for p in parts])
