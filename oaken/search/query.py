"""The query parser: Gmail-like operators, words, "phrases", prefixes, -exclusions, OR, AND and
( ) groups (oaken.search.grammar has the precedence and its source). No model involved.

It never raises on user text. What it cannot read becomes a warning in the response and filters
nothing (a guessed filter that silently matches nothing is worse than none). DESIGN.md's
"Precise rules" decide the cases two careful readers could read two ways: what is an operator,
how repeated operators combine, what a question is and what triggers exact_boost.

The tree is read into a flat ParsedQuery where it can be: the top-level AND's words and ORs of
words are the free text (ranked by relevance as before grouping existed), its operators are
filters pushed into the indexes. What cannot be flattened (`invoice OR from:bob`, `-(a b)`,
`larger:1M OR label:x`) is a group, judged message by message on the candidates
(oaken.search.groups); when every message a group admits must hold one of its words, those words
are an OR clause of the free text too, so they find and rank its candidates.
"""

from __future__ import annotations

import time
import unicodedata
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Sequence

from oaken.config import DEFAULT_CATEGORIES
from oaken.search import grammar
from oaken.search.dates import shown
from oaken.search.explain_text import render
from oaken.search.grammar import And, Cond, Node, Not, Or, Term
from oaken.search.lexer import lex
from oaken.search.operators import OPERATORS, TEXT_OPERATORS, Leaves, has_token

__all__ = ["ParsedQuery", "Term", "parse", "describe", "has_token", "OPERATORS", "TEXT_OPERATORS", "STOP_WORDS"]

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

# Operators that, repeated, mean any of them (DESIGN.md): an OR of them alone is the same list.
ANY_OF = frozenset(
    {"from", "to", "cc", "bcc", "deliveredto", "list", "category", "disposition", "folder", "id", "thread"}
)
# Negated, these turn their value round; the text operators and label: exclude.
_TURNS = frozenset({"unread", "starred", "attachment"})
_EXCLUDES = frozenset({"from", "to", "cc", "subject", "filename"})


@dataclass(frozen=True)
class ParsedQuery:
    """What a query asks for. Dates are Unix seconds: `after` inclusive, `before` exclusive."""

    raw: str
    clauses: tuple[tuple[Term, ...], ...] = ()  # free text: every clause must match, any term of a clause
    excluded: tuple[Term, ...] = ()
    senders: tuple[str, ...] = ()  # from: (any of them)
    recipients: tuple[str, ...] = ()  # to: (any)
    cc: tuple[str, ...] = ()  # cc: (any)
    subjects: tuple[Term, ...] = ()  # subject: (all)
    filenames: tuple[str, ...] = ()  # filename: (all)
    excluded_fields: tuple[tuple[str, Term], ...] = ()  # -from:x, -subject:y: (operator, term)
    after: int | None = None
    before: int | None = None
    labels: tuple[str, ...] = ()  # all of them
    excluded_labels: tuple[str, ...] = ()  # -label:x (any of them excludes)
    dispositions: tuple[str, ...] | None = None  # None: every one but discarded
    unread: bool | None = None
    starred: bool | None = None
    categories: tuple[str, ...] = ()  # any of them
    min_priority: int | None = None
    has_attachment: bool | None = None  # has:attachment True, -has:attachment False
    headers: tuple[tuple[str, str], ...] = ()  # bcc:, deliveredto:, list: (name, value): any per name
    folders: tuple[str, ...] = ()  # in:sent|drafts|trash|spam (any)
    larger: int | None = None  # bytes, exclusive
    smaller: int | None = None  # bytes, exclusive
    message_ids: tuple[str, ...] = ()  # id: (any)
    threads: tuple[int | str, ...] = ()  # thread: a thread number or a Message-ID in it (any)
    groups: tuple[Node, ...] = ()  # conditions judged message by message (every one must hold)
    any_disposition: bool = False  # a group names a disposition: the default (no discarded) is lifted
    contradiction: str | None = None  # operators that no message can satisfy (is:read is:unread)
    question: bool = False
    exact: bool = False  # exact_boost applies: a quoted phrase or a token with a digit in the free text
    warnings: tuple[str, ...] = ()
    tree: Node | None = None  # the query as read, before flattening: what --explain shows
    tz: tzinfo = UTC  # the zone its dates were read in

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
        out: dict[tuple[tuple[str, bool, bool], ...], tuple[Term, ...]] = {}
        for clause in self.clauses:
            if all(not t.phrase and t.text.lower().strip("?!.,;") in STOP_WORDS for t in clause):
                continue
            out.setdefault(tuple((t.text.lower(), t.phrase, t.prefix) for t in clause), clause)
        return tuple(out.values())


def _has_digit(text: str) -> bool:
    return any(unicodedata.category(ch) == "Nd" for ch in text)


def _clean(query: object) -> str:
    if not isinstance(query, str):
        query = "" if query is None else str(query)
    # NUL and other control characters are not search text; keep tabs and newlines as spaces.
    return "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in query)


def parse(
    query: str,
    *,
    categories: Sequence[str] = DEFAULT_CATEGORIES,
    now: float | None = None,
    tz: tzinfo = UTC,
) -> ParsedQuery:
    """Read a query; dates in `tz` (the `[search] time_zone`). Never raises on any text."""
    query = _clean(query)
    warnings: list[str] = []

    def warn(text: str) -> None:
        if text not in warnings:
            warnings.append(text)

    tokens, unclosed = lex(query)
    if unclosed:
        warn("a quote is not closed: the phrase runs to the end of the query")
    root = grammar.tree(tokens, Leaves(categories, time.time() if now is None else now, tz, warn), warn)
    if query.strip() and root is None and not warnings:
        warn(f"{query.strip()[:40]!r} holds no word to search for; the newest messages are listed")
    return _Flat(warn).read(query, root, tz, warnings)


class _Flat:
    """The tree's top-level AND read into ParsedQuery's fields (see the module docstring)."""

    def __init__(self, warn: object):
        self.warn = warn
        self.fields: dict[str, list] = {
            k: []
            for k in (
                "clauses excluded senders recipients cc subjects filenames excluded_fields afters befores labels "
                "excluded_labels dispositions cats priorities headers folders larger smaller message_ids threads groups"
            ).split()
        }
        self.unread: set[bool] = set()
        self.starred: set[bool] = set()
        self.has_attachment: bool | None = None

    def read(self, query: str, root: Node | None, tz: tzinfo, warnings: list[str]) -> ParsedQuery:
        top = grammar.nnf(root) if root is not None else None
        items = list(top.children) if isinstance(top, And) else [top] if top is not None else []
        names = Counter(c.name for c in items if isinstance(c, Cond))
        for item in items:
            self.item(item, names)
        f = self.fields
        for group in f["groups"]:
            if grammar.needs_text(group):
                f["clauses"].append(list(dict.fromkeys(grammar.positive_terms(group))))
        contradiction = None
        if len(self.unread) > 1:
            contradiction = "is:read and is:unread together match nothing"
        elif len(self.starred) > 1:
            contradiction = "is:starred and is:unstarred together match nothing"
        if contradiction and contradiction not in warnings:
            warnings.append(contradiction)
        words = [t for clause in f["clauses"] for t in clause if not t.phrase]
        u = dict.fromkeys
        return ParsedQuery(
            raw=query,
            clauses=tuple(tuple(c) for c in f["clauses"]),
            excluded=tuple(u(f["excluded"])),
            senders=tuple(u(f["senders"])),
            recipients=tuple(u(f["recipients"])),
            cc=tuple(u(f["cc"])),
            subjects=tuple(u(f["subjects"])),
            filenames=tuple(u(f["filenames"])),
            excluded_fields=tuple(u(f["excluded_fields"])),
            after=max(f["afters"]) if f["afters"] else None,
            before=min(f["befores"]) if f["befores"] else None,
            labels=tuple(u(f["labels"])),
            excluded_labels=tuple(u(f["excluded_labels"])),
            dispositions=tuple(u(f["dispositions"])) if f["dispositions"] else None,
            unread=next(iter(self.unread)) if len(self.unread) == 1 else None,
            starred=next(iter(self.starred)) if len(self.starred) == 1 else None,
            categories=tuple(u(f["cats"])),
            min_priority=max(f["priorities"]) if f["priorities"] else None,
            has_attachment=self.has_attachment,
            headers=tuple(u(f["headers"])),
            folders=tuple(u(f["folders"])),
            larger=max(f["larger"]) if f["larger"] else None,
            smaller=min(f["smaller"]) if f["smaller"] else None,
            message_ids=tuple(u(f["message_ids"])),
            threads=tuple(u(f["threads"])),
            groups=tuple(f["groups"]),
            any_disposition=any(_names_disposition(g) for g in f["groups"]),
            contradiction=contradiction,
            question=len(words) >= 4 or bool(words and words[-1].text.endswith("?")),
            exact=any(t.phrase or _has_digit(t.text) for clause in f["clauses"] for t in clause),
            warnings=tuple(warnings),
            tree=root,
            tz=tz,
        )

    def item(self, item: Node, names: Counter) -> None:
        f = self.fields
        if isinstance(item, Term):
            f["clauses"].append([item])
        elif isinstance(item, Cond):
            self.cond(item)
        elif isinstance(item, Not) and isinstance(item.child, Term):
            f["excluded"].append(item.child)
        elif isinstance(item, Not) and isinstance(item.child, Cond) and self.negated(item.child):
            pass
        elif isinstance(item, Or) and all(isinstance(c, Term) for c in item.children):
            f["clauses"].append(list(item.children))
        elif (
            isinstance(item, Or)
            and all(isinstance(c, Cond) for c in item.children)
            and len({c.name for c in item.children if isinstance(c, Cond)}) == 1
            and isinstance(item.children[0], Cond)
            and item.children[0].name in ANY_OF
            and names[item.children[0].name] == 0
        ):
            for c in item.children:
                assert isinstance(c, Cond)
                self.cond(c)
        else:
            f["groups"].append(item)

    def cond(self, c: Cond) -> None:
        f, v = self.fields, c.value
        simple = {"from": "senders", "to": "recipients", "cc": "cc", "subject": "subjects", "filename": "filenames"}
        if c.name in simple:
            f[simple[c.name]].append(v)
        elif c.name in ("bcc", "deliveredto", "list"):
            f["headers"].append((c.name, v))
        elif c.name in ("date", "size"):  # a range: its low end and its high end, each if given
            low, high = ("afters", "befores") if c.name == "date" else ("larger", "smaller")
            for into, bound in zip((low, high), grammar.bounds(v)):
                if bound is not None:
                    f[into].append(bound)
        elif c.name == "disposition":
            f["dispositions"].extend(v if isinstance(v, tuple) else ())
        elif c.name == "unread":
            self.unread.add(bool(v))
        elif c.name == "starred":
            self.starred.add(bool(v))
        elif c.name == "attachment":
            self.has_attachment = bool(v)
        else:
            key = {"label": "labels", "folder": "folders", "category": "cats", "priority": "priorities"}
            f[key.get(c.name, {"id": "message_ids", "thread": "threads"}.get(c.name, c.name))].append(v)

    def negated(self, c: Cond) -> bool:
        """A negated operator read as a flat field; False: it is left to a group."""
        if c.name in _TURNS:
            self.cond(Cond(c.name, not c.value, c.source))
            return True
        if c.name in _EXCLUDES:
            term = c.value if isinstance(c.value, Term) else Term(str(c.value))
            self.fields["excluded_fields"].append((c.name, term))
            return True
        if c.name == "label":
            self.fields["excluded_labels"].append(c.value)
            return True
        return False


def _names_disposition(node: Node) -> bool:
    if isinstance(node, Cond):
        return node.name == "disposition"
    if isinstance(node, Not):
        return _names_disposition(node.child)
    if isinstance(node, (And, Or)):
        return any(_names_disposition(c) for c in node.children)
    return False


def _term_text(t: Term) -> str:
    return f'"{t.text}"' if t.phrase else t.text + ("*" if t.prefix else "")


def describe(q: ParsedQuery) -> dict[str, object]:
    """The parsed query as plain data, for --explain: `query` is the tree written back as a query
    (it reads back into the same tree), the rest what each part became."""
    out: dict[str, object] = {}
    if q.tree is not None:
        out["query"] = render(q.tree)
    if q.clauses:
        out["free_text"] = [" OR ".join(map(_term_text, c)) for c in q.clauses]
    for name in ("excluded", "subjects"):
        terms: tuple[Term, ...] = getattr(q, name)
        if terms:
            out[name] = [_term_text(t) for t in terms]
    for name in ("senders", "recipients", "cc", "filenames", "labels", "excluded_labels", "categories", "folders"):
        if getattr(q, name):
            out[name] = list(getattr(q, name))
    for name, value in q.headers:
        out.setdefault(name, []).append(value)  # type: ignore[attr-defined]
    if q.message_ids:
        out["message_ids"] = list(q.message_ids)
    if q.threads:
        out["threads"] = list(q.threads)
    if q.excluded_fields:
        out["excluded_fields"] = [f"{n}:{t.text}" for n, t in q.excluded_fields]
    for name in ("after", "before"):
        value = getattr(q, name)
        if value is not None:
            out[name] = shown(value, q.tz)
    for name in ("larger", "smaller", "dispositions", "unread", "starred", "min_priority", "has_attachment"):
        if getattr(q, name) is not None:
            out[name] = getattr(q, name)
    if q.groups:
        out["groups"] = [render(g) for g in q.groups]
    out["kind"] = "question" if q.question else "lookup"
    out["exact_boost"] = q.exact
    return out
