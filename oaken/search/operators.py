"""One token of a query read into a leaf of its tree: a word or phrase (`Term`), or an operator
read into what it means (`Cond`). Never raises: a value that cannot be read is a warning and
the leaf filters nothing; `name:value` with an unknown name is searched as words, with a
did-you-mean when the name is one edit from an operator (`form:alice`: "did you mean from:?").

DESIGN.md "What is an operator": a known name, ':' and a value; `10:30`, `https://...` and
`std::string` are plain text, without a warning."""

from __future__ import annotations

import re
import unicodedata
from datetime import tzinfo
from typing import Callable, Sequence

from oaken.config import DISPOSITIONS
from oaken.search.dates import date_range, day_start, relative
from oaken.search.grammar import Cond, Node, Not, Term
from oaken.search.lexer import Token

# Operators whose value is text matched in a column of the message (any of them when repeated).
TEXT_OPERATORS = ("from", "to", "cc", "bcc", "deliveredto", "list", "subject", "filename")
DATE_OPERATORS = ("after", "before", "newer", "older", "newer_than", "older_than", "date")
OPERATORS = frozenset(
    {
        *TEXT_OPERATORS,
        *DATE_OPERATORS,
        *("label", "in", "is", "category", "priority", "has", "larger", "smaller", "size"),
        *("id", "rfc822msgid", "thread"),
    }
)
# in: a triage disposition (Oaken's own), or a folder found by its SPECIAL-USE flag (RFC 6154)
SPECIAL_FOLDERS = {
    "sent": "sent",
    "drafts": "drafts",
    "draft": "drafts",
    "trash": "trash",
    "bin": "trash",
    "spam": "spam",
    "junk": "spam",
}
_SIZE = re.compile(r"(\d{1,12})([kmg]?)b?", re.I)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_OPERATOR_SHAPE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(.*)", re.S)  # rfc822msgid has digits


def has_token(text: str) -> bool:
    """Whether FTS5's unicode61 tokenizer finds a token in `text` (letters, numbers, private use);
    a term without one would be an empty phrase, which matches nothing."""
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in "LN" or cat == "Co":
            return True
    return False


def _distance(a: str, b: str) -> int:
    """Edits (insert, delete, change, swap two neighbours) from a to b: `form` is one from `from`."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[-1]


def suggest(name: str) -> str | None:
    """The operator an unknown name most likely meant: within one edit (two for long names)."""
    low = name.lower()
    best = min(sorted(OPERATORS), key=lambda op: _distance(low, op))
    return best if _distance(low, best) <= (1 if len(low) <= 5 else 2) else None


def _size(value: str) -> int | None:
    m = _SIZE.fullmatch(value.strip())
    return int(m[1]) * _UNITS[m[2].lower()] if m else None


def source(name: str, value: str, quoted: bool) -> str:
    """An operator as --explain writes it back, quoted as it was typed (an unquoted value is one
    word the lexer left whole, so it reads back the same; a quoted one holds no quote)."""
    return f'{name}:"{value}"' if quoted or any(c.isspace() for c in value) else f"{name}:{value}"


class Leaves:
    """Reads tokens into leaves (oaken.search.grammar.Leaf) and collects the warnings."""

    def __init__(self, categories: Sequence[str], now: float, tz: tzinfo, warn: Callable[[str], None]):
        self.categories = {c.lower(): c for c in categories}
        self.now, self.tz, self.warn = now, tz, warn

    def field(self, name: str) -> str | None:
        """The operator of a `name:(...)` group, or None (its words are searched as words)."""
        low = name.lower()
        if low in OPERATORS:
            return low
        hint = suggest(low)
        self.warn(
            f"{name}: is not an operator{f' (did you mean {hint}:?)' if hint else ''}; its group is searched as words"
        )
        return None

    def __call__(self, tok: Token, field: str | None) -> Node | None:
        leaf = self._read(tok, field)
        return Not(leaf) if tok.negated and leaf is not None else leaf

    def _read(self, tok: Token, field: str | None) -> Node | None:
        if field is not None and tok.kind in ("word", "phrase"):
            return self.operator(field, tok.text, tok.kind == "phrase")
        shape = None if tok.kind == "phrase" else _OPERATOR_SHAPE.fullmatch(tok.text)
        quoted = tok.kind == "operator"
        # name:"value" is an operator whatever the value; name:value unless it reads as a URL or C++
        if shape and (quoted or (shape[2][:1] not in (":", "/") and (shape[2] or shape[1].lower() in OPERATORS))):
            if shape[1].lower() in OPERATORS:
                return self.operator(shape[1].lower(), shape[2], quoted)
            if not shape[1].replace("_", "").isalpha():  # DESIGN.md: only a name of letters warns
                return self.term(tok.text, tok.kind == "phrase")
            hint = suggest(shape[1])
            self.warn(
                f"{shape[1]}: is not an operator{f' (did you mean {hint}:?)' if hint else ''}; "
                f"{tok.text!r} is searched as words"
            )
        return self.term(tok.text, tok.kind == "phrase")

    def term(self, text: str, phrase: bool) -> Term | None:
        if phrase:
            return Term(text, phrase=True) if has_token(text) else None
        stem = text.rstrip("*")
        if stem != text and has_token(stem) and "*" not in stem:
            return Term(stem, prefix=True)
        if not has_token(text):
            return None  # nothing FTS5 could match: punctuation alone
        if "*" in text:
            self.warn(
                f"{text}: * works only at the end of a word (deploy*); searched as {text.replace('*', ' ').strip()!r}"
            )
        return Term(text)

    def unreadable(self, name: str, value: str, expected: str) -> None:
        self.warn(f"{name}:{value}: {expected}; it filters nothing")

    def operator(self, name: str, value: str, quoted: bool) -> Cond | None:
        """One known operator read; an unreadable value is a warning (None: it filters nothing)."""
        v = value.strip()
        if not v:
            self.warn(f"{name}: has no value; it filters nothing")
            return None
        # a value starting with : or / (from `subject:(/x)`) would be plain text unquoted: it is
        # read, and written back, as quoted
        quoted = quoted or v[:1] in (":", "/")
        src, low = source(name, v, quoted), v.lower()
        if name in TEXT_OPERATORS:
            if name == "subject":
                if not has_token(v):
                    self.unreadable(name, v, 'expected a word or a "phrase" of the subject')
                    return None
                return Cond(name, Term(v, phrase=quoted), src)
            return Cond(name, v, src)
        if name in DATE_OPERATORS:
            return self._date(name, v, src)
        if name == "label":
            return Cond("label", v, src)
        if name == "in":
            if low == "anywhere":
                return Cond("disposition", DISPOSITIONS, src)
            if low in DISPOSITIONS:
                return Cond("disposition", (low,), src)
            if low in SPECIAL_FOLDERS:
                return Cond("folder", SPECIAL_FOLDERS[low], src)
            self.unreadable(
                name,
                v,
                f"expected one of {', '.join(DISPOSITIONS)}, anywhere, sent, drafts, trash or spam "
                f"(label:{v} finds a folder or label)",
            )
            return None
        if name == "is":
            if low in ("unread", "read"):
                return Cond("unread", low == "unread", src)
            if low in ("starred", "flagged", "unstarred", "unflagged"):
                return Cond("starred", low in ("starred", "flagged"), src)
            self.unreadable(name, v, "expected unread, read, starred or unstarred")
            return None
        if name == "category":
            if low in self.categories:
                return Cond("category", self.categories[low], src)
            self.unreadable(name, v, f"expected one of {', '.join(self.categories.values())} ([triage] categories)")
            return None
        if name == "priority":
            if v.isascii() and v.isdigit() and int(v) <= 3:
                return Cond("priority", int(v), src)
            self.unreadable(name, v, "expected 0, 1, 2 or 3 (priority:N finds N or higher)")
            return None
        if name == "has":
            if low in ("attachment", "attachments"):
                return Cond("attachment", True, src)
            self.unreadable(name, v, "expected has:attachment")
            return None
        if name in ("larger", "smaller", "size"):
            size = _size(v)
            if size is None:
                self.unreadable(name, v, "expected a size in bytes, or with K, M or G, as in 500K or 10M")
                return None
            return Cond("size", (None, size) if name == "smaller" else (size, None), src)
        if name in ("id", "rfc822msgid"):
            return Cond("id", v.strip("<>") or v, src)
        # thread: a thread number (a hit's `thread`) or the Message-ID of any message in it
        return Cond("thread", int(v) if v.isascii() and v.isdigit() and len(v) < 19 else v.strip("<>") or v, src)

    def _date(self, name: str, v: str, src: str) -> Cond | None:
        if name == "date":
            bounds = date_range(v, self.now, self.tz)
            if bounds is None:
                self.unreadable(
                    name, v, "expected a period or a range of them, as in 2024, 2024-03, 2024-01..2024-03, 7d.."
                )
                return None
            return Cond("date", bounds, src)
        if name in ("newer_than", "older_than"):
            when = relative(v, self.now, self.tz)
            if when is None:
                self.unreadable(name, v, "expected a number and d, w, m (months) or y, as in 7d or 1y")
                return None
            return Cond("date", (when, None) if name == "newer_than" else (None, when), src)
        day = day_start(v, self.tz)
        if day is None:
            self.unreadable(name, v, "expected a date YYYY-MM-DD or YYYY/MM/DD")
            return None
        return Cond("date", (day, None) if name in ("after", "newer") else (None, day), src)
