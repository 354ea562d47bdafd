"""The query parser: Gmail-like operators, words, "phrases", -exclusions and OR. No model involved.

It never raises on user text. What it cannot read becomes a warning in the response and filters
nothing (a guessed filter that silently matches nothing is worse than none). DESIGN.md's
"Precise rules" decide the cases two careful readers could read two ways: what is an operator,
how repeated operators combine, what a question is and what triggers exact_boost.
"""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Iterable, Sequence

from oaken.config import DEFAULT_CATEGORIES, DISPOSITIONS
from oaken.search.dates import day_start, relative
from oaken.search.lexer import lex

# Operators whose value is text searched in one FTS column, and those that filter.
TEXT_OPERATORS = ("from", "to", "cc", "subject", "filename")
OPERATORS = frozenset(
    {*TEXT_OPERATORS, "after", "before", "newer_than", "older_than", "label", "in", "is", "category", "priority", "has"}
)
# Negated (-from:alex, -label:Lists) these exclude; -is: and -has: turn their value round.
NEGATABLE = frozenset({*TEXT_OPERATORS, "label"})
_OPPOSITE = {
    "is:unread": "read",
    "is:read": "unread",
    "is:starred": "unstarred",
    "is:flagged": "unstarred",
    "is:unstarred": "starred",
    "is:unflagged": "starred",
}

# Kept small: words that carry no meaning in a question ("when is the invoice due?").
STOP_WORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her
here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
now of off on once only or other our ours ourselves out over own same she should so some such than that
the their theirs them themselves then there these they this those through to too under until up very was
we were what when where which while who whom why will with would you your yours yourself yourselves
""".split()
)

_OPERATOR_SHAPE = re.compile(r"([A-Za-z_]+):(.*)", re.S)
_DAY = 86400


@dataclass(frozen=True)
class Term:
    """A word or a quoted phrase, as the person typed it (quoted for FTS5 only when the MATCH is built)."""

    text: str
    phrase: bool = False


@dataclass(frozen=True)
class ParsedQuery:
    """What a query asks for. Dates are Unix seconds UTC: `after` inclusive, `before` exclusive."""

    raw: str
    clauses: tuple[tuple[Term, ...], ...] = ()  # free text: every clause must match, any term of a clause
    excluded: tuple[Term, ...] = ()
    senders: tuple[str, ...] = ()  # from: (any of them)
    recipients: tuple[str, ...] = ()  # to: (any)
    cc: tuple[str, ...] = ()  # cc: (any)
    subjects: tuple[Term, ...] = ()  # subject: (all)
    filenames: tuple[str, ...] = ()  # filename: (all)
    excluded_fields: tuple[tuple[str, Term], ...] = ()  # -from:x, -subject:y, -label:z: (operator, term)
    after: int | None = None
    before: int | None = None
    labels: tuple[str, ...] = ()  # all of them
    dispositions: tuple[str, ...] | None = None  # None: every one but discarded
    unread: bool | None = None
    starred: bool | None = None
    categories: tuple[str, ...] = ()  # any of them
    min_priority: int | None = None
    has_attachment: bool | None = None  # has:attachment True, -has:attachment False
    contradiction: str | None = None  # operators that no message can satisfy (is:read is:unread)
    question: bool = False
    exact: bool = False  # exact_boost applies: a quoted phrase or a token with a digit in the free text
    warnings: tuple[str, ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        """Every word of the free text (phrases and exclusions left out), in order."""
        return tuple(t.text for clause in self.clauses for t in clause if not t.phrase)

    @property
    def phrases(self) -> tuple[str, ...]:
        """Quoted phrases that stand alone: a message must hold each of them."""
        return tuple(c[0].text for c in self.clauses if len(c) == 1 and c[0].phrase)

    @property
    def has_text(self) -> bool:
        """False for a query with no words (`is:unread from:alex`): it lists the newest matches."""
        return bool(self.clauses)

    @property
    def free_text(self) -> str:
        """The words and phrases as text: what a meaning-based retriever would embed."""
        return " ".join(t.text for clause in self.clauses for t in clause)

    def content_clauses(self) -> tuple[tuple[Term, ...], ...]:
        """Distinct clauses that are not only stop words: what keyword_min_match counts for a question."""
        out: dict[tuple[tuple[str, bool], ...], tuple[Term, ...]] = {}
        for clause in self.clauses:
            if all(not t.phrase and t.text.lower().strip("?!.,;") in STOP_WORDS for t in clause):
                continue
            out.setdefault(tuple((t.text.lower(), t.phrase) for t in clause), clause)
        return tuple(out.values())


def has_token(text: str) -> bool:
    """Whether FTS5's unicode61 tokenizer finds a token in `text` (letters, numbers, private use);
    a term without one would be an empty phrase, which matches nothing."""
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in "LN" or cat == "Co":
            return True
    return False


def _has_digit(text: str) -> bool:
    return any(unicodedata.category(ch) == "Nd" for ch in text)


# ---- parsing -------------------------------------------------------------------------------


class _Builder:
    """Collects what the tokens say; turned into a frozen ParsedQuery at the end."""

    def __init__(self, categories: Sequence[str], now: float):
        self.categories = {c.lower(): c for c in categories}
        self.now = now
        self.excluded: list[Term] = []
        self.senders: list[str] = []
        self.recipients: list[str] = []
        self.cc: list[str] = []
        self.subjects: list[Term] = []
        self.filenames: list[str] = []
        self.excluded_fields: list[tuple[str, Term]] = []
        self.afters: list[int] = []
        self.befores: list[int] = []
        self.labels: list[str] = []
        self.dispositions: list[str] = []
        self.unread: set[bool] = set()
        self.starred: set[bool] = set()
        self.cats: list[str] = []
        self.priorities: list[int] = []
        self.has_attachment: bool | None = None
        self.warnings: list[str] = []

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def unreadable(self, name: str, value: str, expected: str) -> None:
        self.warn(f"{name}:{value}: {expected}; it filters nothing")

    def operator(self, name: str, value: str, quoted: bool) -> None:
        """Apply one known operator; an unreadable value is a warning."""
        v = value.strip()
        if not v:
            self.warn(f"{name}: has no value; it filters nothing")
            return
        low = v.lower()
        if name == "from":
            self.senders.append(v)
        elif name == "to":
            self.recipients.append(v)
        elif name == "cc":
            self.cc.append(v)
        elif name == "subject":
            if has_token(v):
                self.subjects.append(Term(v, phrase=quoted))
            else:
                self.unreadable(name, v, 'expected a word or a "phrase" of the subject')
        elif name == "filename":
            self.filenames.append(v)
        elif name in ("after", "before"):
            day = day_start(v)
            if day is None:
                self.unreadable(name, v, "expected a date YYYY-MM-DD or YYYY/MM/DD")
            else:
                (self.afters if name == "after" else self.befores).append(day)
        elif name in ("newer_than", "older_than"):
            when = relative(v, self.now)
            if when is None:
                self.unreadable(name, v, "expected a number and d, w, m (months) or y, as in 7d or 1y")
            else:
                (self.afters if name == "newer_than" else self.befores).append(when)
        elif name == "label":
            self.labels.append(v)
        elif name == "in":
            if low == "anywhere":
                self.dispositions.extend(DISPOSITIONS)
            elif low in DISPOSITIONS:
                self.dispositions.append(low)
            else:
                self.unreadable(
                    name,
                    v,
                    f"expected one of {', '.join(DISPOSITIONS)} or anywhere (label:{v} finds a folder or label)",
                )
        elif name == "is":
            if low in ("unread", "read"):
                self.unread.add(low == "unread")
            elif low in ("starred", "flagged"):
                self.starred.add(True)
            elif low in ("unstarred", "unflagged"):
                self.starred.add(False)
            else:
                self.unreadable(name, v, "expected unread, read, starred or unstarred")
        elif name == "category":
            if low in self.categories:
                self.cats.append(self.categories[low])
            else:
                self.unreadable(name, v, f"expected one of {', '.join(self.categories.values())} ([triage] categories)")
        elif name == "priority":
            if v.isascii() and v.isdigit() and int(v) <= 3:
                self.priorities.append(int(v))
            else:
                self.unreadable(name, v, "expected 0, 1, 2 or 3 (priority:N finds N or higher)")
        elif name == "has":
            if low in ("attachment", "attachments"):
                self.has_attachment = True
            else:
                self.unreadable(name, v, "expected has:attachment")


def parse(query: str, *, categories: Sequence[str] = DEFAULT_CATEGORIES, now: float | None = None) -> ParsedQuery:
    """Read a query. Never raises on any text; see the module docstring."""
    query = _clean(query)
    b = _Builder(categories, time.time() if now is None else now)
    # Items: a Term of the free text, "OR"/"AND", "name:" for an operator, "-" for an exclusion.
    items: list[Term | str] = []
    tokens, unclosed = lex(query)
    if unclosed:
        b.warn("a quote is not closed: the phrase runs to the end of the query")
    for tok in tokens:
        shape = None if tok.kind == "phrase" else _OPERATOR_SHAPE.fullmatch(tok.text)
        quoted = tok.kind == "operator"
        # DESIGN.md: a known name, ':' and a value is an operator; name:value with an unknown name of
        # letters is searched as words with a warning; other colons (10:30, https://, std::) are text.
        if shape and shape[2][:1] not in (":", "/") and (shape[2] or quoted or shape[1].lower() in OPERATORS):
            name, value = shape[1].lower(), shape[2]
            if name in OPERATORS:
                key = f"{name}:{value.strip().lower()}"
                if tok.negated and key in _OPPOSITE:
                    b.operator("is", _OPPOSITE[key], False)
                elif tok.negated and key in ("has:attachment", "has:attachments"):
                    b.has_attachment = False
                elif tok.negated:
                    if name in NEGATABLE and value.strip():
                        b.excluded_fields.append((name, Term(value.strip(), phrase=quoted)))
                    else:
                        b.warn(f"-{name}:{value}: a negated {name}: is not supported; it filters nothing")
                else:
                    b.operator(name, value, quoted)
                items.append(("-" if tok.negated else "") + name + ":")
                continue
            b.warn(f"{shape[1]}: is not an operator; {tok.text!r} is searched as words")
        term = Term(tok.text, phrase=tok.kind == "phrase")
        if not has_token(term.text):
            continue  # nothing FTS5 could match: punctuation alone
        if tok.kind == "word" and "*" in tok.text:
            b.warn(f"{tok.text}: wildcards are not supported; searched as {tok.text.replace('*', ' ').strip()!r}")
        if tok.negated:
            b.excluded.append(term)
            items.append("-")
        elif tok.kind == "word" and tok.text in ("OR", "AND"):
            items.append(tok.text)
        else:
            items.append(term)
    if query.strip() and not items and not b.warnings:
        b.warn(f"{query.strip()[:40]!r} holds no word to search for; the newest messages are listed")
    clauses = _clauses(items, b)
    return _finish(query, clauses, b)


def _clean(query: object) -> str:
    if not isinstance(query, str):
        query = "" if query is None else str(query)
    # NUL and other control characters are not search text; keep tabs and newlines as spaces.
    return "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in query)


_ANY_OPERATORS = ("from:", "to:", "cc:", "category:", "in:")  # repeated: any of them already


def _clauses(items: list[Term | str], b: _Builder) -> list[list[Term]]:
    """Group free-text terms: `a OR b c` is (a or b) and c. OR/AND not between two terms is a word."""
    clauses: list[list[Term]] = []
    pending_or = False
    for idx, item in enumerate(items):
        prev = items[idx - 1] if idx > 0 else None
        nxt = items[idx + 1] if idx + 1 < len(items) else None
        if item in ("OR", "AND"):
            if isinstance(prev, Term) and isinstance(nxt, Term):
                pending_or = item == "OR"
                continue
            if prev is not None and nxt is not None and prev not in ("OR", "AND") and nxt not in ("OR", "AND"):
                # beside an operator or an exclusion: dropped (both sides apply anyway)
                if item == "OR" and not (prev == nxt and prev in _ANY_OPERATORS):
                    b.warn("OR works between words and phrases only; the operators and exclusions beside it all apply")
                continue
            if prev is None or nxt is None:
                b.warn(f"{item} at the start or end of the query is searched as a word")
            item = Term(item)
        if isinstance(item, Term):
            if pending_or and clauses:
                clauses[-1].append(item)
            else:
                clauses.append([item])
        pending_or = False
    return clauses


def _finish(query: str, clauses: list[list[Term]], b: _Builder) -> ParsedQuery:
    contradiction = None
    if len(b.unread) > 1:
        contradiction = "is:read and is:unread together match nothing"
    elif len(b.starred) > 1:
        contradiction = "is:starred and is:unstarred together match nothing"
    if contradiction:
        b.warn(contradiction)
    words = [t for clause in clauses for t in clause if not t.phrase]
    question = len(words) >= 4 or bool(words and words[-1].text.endswith("?"))
    exact = any(t.phrase or _has_digit(t.text) for clause in clauses for t in clause)
    return ParsedQuery(
        raw=query,
        clauses=tuple(tuple(c) for c in clauses),
        excluded=tuple(dict.fromkeys(b.excluded)),
        senders=tuple(dict.fromkeys(b.senders)),
        recipients=tuple(dict.fromkeys(b.recipients)),
        cc=tuple(dict.fromkeys(b.cc)),
        subjects=tuple(dict.fromkeys(b.subjects)),
        filenames=tuple(dict.fromkeys(b.filenames)),
        excluded_fields=tuple(dict.fromkeys(b.excluded_fields)),
        after=max(b.afters) if b.afters else None,
        before=min(b.befores) if b.befores else None,
        labels=tuple(dict.fromkeys(b.labels)),
        dispositions=tuple(dict.fromkeys(b.dispositions)) if b.dispositions else None,
        unread=next(iter(b.unread)) if len(b.unread) == 1 else None,
        starred=next(iter(b.starred)) if len(b.starred) == 1 else None,
        categories=tuple(dict.fromkeys(b.cats)),
        min_priority=max(b.priorities) if b.priorities else None,
        has_attachment=b.has_attachment,
        contradiction=contradiction,
        question=question,
        exact=exact,
        warnings=tuple(b.warnings),
    )


def describe(q: ParsedQuery) -> dict[str, object]:
    """The parsed query as plain data, for --explain."""
    out: dict[str, object] = {}
    if q.clauses:
        out["free_text"] = [" OR ".join(f'"{t.text}"' if t.phrase else t.text for t in c) for c in q.clauses]
    for name in ("excluded", "subjects"):
        terms: Iterable[Term] = getattr(q, name)
        if terms:
            out[name] = [f'"{t.text}"' if t.phrase else t.text for t in terms]
    for name in ("senders", "recipients", "cc", "filenames", "labels", "categories"):
        if getattr(q, name):
            out[name] = list(getattr(q, name))
    if q.excluded_fields:
        out["excluded_fields"] = [f"{n}:{t.text}" for n, t in q.excluded_fields]
    for name in ("after", "before"):
        value = getattr(q, name)
        if value is not None:
            out[name] = datetime.fromtimestamp(value, tz=UTC).isoformat()
    for name in ("dispositions", "unread", "starred", "min_priority"):
        if getattr(q, name) is not None:
            out[name] = getattr(q, name)
    if q.has_attachment is not None:
        out["has_attachment"] = q.has_attachment
    out["kind"] = "question" if q.question else "lookup"
    out["exact_boost"] = q.exact
    return out
