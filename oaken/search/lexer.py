"""A query's text as tokens: words, "phrases" (an open quote runs to the end), operators with a
quoted value (name:"two words") joined into one token, brackets that group (`(`, `)`, and Gmail's
`{ }` for "any of"), and `name:(` opening a group whose words all go to that operator; each maybe
negated by a leading "-". What a token means is oaken.search.grammar's to decide.

A bracket groups only at the edge of a token: `(invoice` opens, `receipt)` closes, but `f(x)` and
`:-)` are text (a word keeps the closing brackets its own opening ones match)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME_COLON = re.compile(r"[A-Za-z_][A-Za-z0-9_]*:")
_FIELD_GROUP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):([({])")
OPENERS = {"(": ")", "{": "}"}
CLOSERS = {")": "(", "}": "{"}


@dataclass(frozen=True)
class Token:
    text: str
    # "word", "phrase", "operator" (name:"quoted value", joined here), "open" / "close" (a bracket:
    # text "(" "{" ")" "}"), or "field" (text: the name of `name:(`, an "open" token follows)
    kind: str
    negated: bool


def _closers(word: str) -> int:
    """How many closing brackets end `word` beyond those its own opening brackets match: a closer
    belongs to the word only when it closes the word's innermost open bracket of the same kind."""
    trailing = len(word) - len(word.rstrip(")}"))
    stack: list[str] = []
    for ch in word[: len(word) - trailing]:
        if ch in OPENERS:
            stack.append(ch)
        elif ch in CLOSERS and stack and stack[-1] == CLOSERS[ch]:
            stack.pop()
    kept = 0
    for ch in word[len(word) - trailing :]:
        if not stack or stack[-1] != CLOSERS[ch]:
            break
        stack.pop()
        kept += 1
    return trailing - kept


def lex(query: str) -> tuple[list[Token], bool]:
    """The tokens, and whether a quote was left open (its phrase then runs to the end)."""
    out: list[Token] = []
    unclosed = False
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch.isspace():
            i += 1
            continue
        negated = False
        if ch == "-" and i + 1 < n and not query[i + 1].isspace():
            negated = True
            i += 1
            ch = query[i]
        if ch in OPENERS or ch in CLOSERS:
            out.append(Token(ch, "open" if ch in OPENERS else "close", negated and ch in OPENERS))
            i += 1
            continue
        if ch == '"':
            end = query.find('"', i + 1)
            unclosed = unclosed or end < 0
            end = n if end < 0 else end
            out.append(Token(query[i + 1 : end], "phrase", negated))
            i = end + 1
            continue
        group = _FIELD_GROUP.match(query, i)
        if group:
            out.append(Token(group[1], "field", negated))
            out.append(Token(group[2], "open", False))
            i = group.end()
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
        closing = _closers(word)
        if closing:
            word, tail = word[:-closing], word[-closing:]
            if word:
                out.append(Token(word, "word", negated))
            out.extend(Token(c, "close", False) for c in tail)
            continue
        out.append(Token(word, "word", negated))
    return out, unclosed
