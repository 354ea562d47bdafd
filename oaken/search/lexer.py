"""A query's text as tokens: words, "phrases" (an open quote runs to the end), operators with a
quoted value (name:"two words") joined into one token, each maybe negated by a leading "-".
What a token means is oaken.search.query's to decide."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME_COLON = re.compile(r"[A-Za-z_]+:")


@dataclass(frozen=True)
class Token:
    text: str
    kind: str  # "word", "phrase", or "operator" (name:"quoted value", joined by the lexer)
    negated: bool


def lex(query: str) -> tuple[list[Token], bool]:
    """The tokens, and whether a quote was left open (its phrase then runs to the end)."""
    out: list[Token] = []
    unclosed = False
    i, n = 0, len(query)
    while i < n:
        if query[i].isspace():
            i += 1
            continue
        negated = False
        if query[i] == "-" and i + 1 < n and not query[i + 1].isspace():
            negated = True
            i += 1
        if query[i] == '"':
            end = query.find('"', i + 1)
            unclosed = unclosed or end < 0
            end = n if end < 0 else end
            out.append(Token(query[i + 1 : end], "phrase", negated))
            i = end + 1
            continue
        start = i
        while i < n and not query[i].isspace() and query[i] != '"':
            i += 1
        word = query[start:i]
        if i < n and query[i] == '"' and _NAME_COLON.fullmatch(word):
            end = query.find('"', i + 1)
            unclosed = unclosed or end < 0
            end = n if end < 0 else end
            out.append(Token(word + query[i + 1 : end], "operator", negated))
            i = end + 1
            continue
        out.append(Token(word, "word", negated))
    return out, unclosed
