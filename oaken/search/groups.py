"""Judging candidates by what index.db cannot answer alone: raw.db's current labels, special-use
folders, sizes and headers, and the groups of a query (`invoice OR from:bob`, `-(a b)`) that do
not flatten into filters, evaluated message by message as a boolean tree over the candidate set.

Every leaf is asked of the whole set at once (one query per leaf, not per message): a word or
phrase of index.db's text, an operator of index.db's columns, or one of raw.db's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from oaken.index.keyword import KeywordFilters, KeywordIndex
from oaken.search.grammar import And, Cond, Node, Not, Or, Term, bounds
from oaken.store import Store

HEADER_NAMES = {"bcc": "bcc", "deliveredto": "delivered-to", "list": "list-id"}


@dataclass(frozen=True)
class RawChecks:
    """The checks only raw.db answers as things are now (all must hold)."""

    account: str | None = None
    labels: tuple[str, ...] = ()  # all
    excluded_labels: tuple[str, ...] = ()  # none
    folders: tuple[str, ...] = ()  # special uses, any
    larger: int | None = None
    smaller: int | None = None
    headers: tuple[tuple[str, str], ...] = ()  # any per header
    groups: tuple[Node, ...] = ()  # each must hold

    def __bool__(self) -> bool:
        return bool(
            self.labels
            or self.excluded_labels
            or self.folders
            or self.larger is not None
            or self.smaller is not None
            or self.headers
            or self.groups
        )

    def apply(self, keep: set[int], index: KeywordIndex, store: Store, matching: Matcher) -> set[int]:
        for label in self.labels:
            if keep:
                keep &= store.labelled(keep, label)
        for label in self.excluded_labels:
            if keep:
                keep -= store.labelled(keep, label)
        if keep and self.folders:
            keep &= _in_special(store, self.account, self.folders, keep)
        if keep and (self.larger is not None or self.smaller is not None):
            keep = store.sized(keep, self.larger, self.smaller)
        by_name: dict[str, list[str]] = {}
        for name, value in self.headers:
            by_name.setdefault(name, []).append(value)
        for name, values in by_name.items():
            if keep:
                keep = header_match(store, keep, name, values)
        judge = Judge(index, store, self.account, matching)
        for group in self.groups:
            if keep:
                keep = judge(group, keep)
        return keep


Matcher = Callable[[KeywordIndex, KeywordFilters, set[int]], set[int]]


def _in_special(store: Store, account: str | None, kinds: Sequence[str], ids: set[int]) -> set[int]:
    if account is None:
        return set()
    folders = [f for kind in kinds for f in store.special_folders(account, kind)]
    return store.in_folders(ids, folders)


def _header_forms(name: str, value: str) -> tuple[str, ...]:
    low = value.casefold()
    # list:info@example.com finds List-Id <info.example.com>, as Gmail's list: does
    return (low, low.replace("@", ".")) if name == "list" and "@" in low else (low,)


def header_match(store: Store, ids: set[int], name: str, values: Sequence[str]) -> set[int]:
    """Those of `ids` whose header (bcc:, deliveredto:, list:) holds one of `values`, case-insensitive."""
    header = HEADER_NAMES[name]
    found = store.header_values(ids, [header])
    forms = [f for v in values for f in _header_forms(name, v)]
    return {m for m, h in found.items() if any(f in h.get(header, "").casefold() for f in forms)}


class Judge:
    """Evaluates a group's tree over a set of candidates."""

    def __init__(self, index: KeywordIndex, store: Store, account: str | None, matching: Matcher):
        self.index, self.store, self.account, self.matching = index, store, account, matching

    def __call__(self, node: Node, ids: set[int]) -> set[int]:
        if not ids:
            return set()
        if isinstance(node, Term):
            from oaken.search.matching import fts

            expr = fts(node)
            return {m for m, held in self.index.expressions_present(ids, [expr]).items() if held}
        if isinstance(node, Not):
            return ids - self(node.child, ids)
        if isinstance(node, And):
            for child in node.children:
                ids = self(child, ids)
            return ids
        if isinstance(node, Or):
            found: set[int] = set()
            rest = set(ids)
            for child in node.children:
                got = self(child, rest)
                found |= got
                rest -= got
            return found
        return self.cond(node, ids)

    def cond(self, c: Cond, ids: set[int]) -> set[int]:
        v, a = c.value, self.account
        one = KeywordFilters(account=a)
        columns = {"from": "senders", "to": "to", "cc": "cc", "filename": "filename_terms"}
        if c.name in columns:
            return self.matching(self.index, _with(one, columns[c.name], (str(v),)), ids)
        if c.name == "subject":
            text = v.text if isinstance(v, Term) else str(v)
            return self.matching(self.index, _with(one, "subject_terms", (text,)), ids)
        if c.name == "date":
            lo, hi = bounds(v)
            return self.matching(self.index, KeywordFilters(account=a, after=lo, before=hi), ids)
        if c.name == "attachment":
            return self.matching(self.index, KeywordFilters(account=a, has_attachment=bool(v)), ids)
        if c.name in HEADER_NAMES:
            return header_match(self.store, ids, c.name, [str(v)])
        if c.name == "label":
            return self.store.labelled(ids, str(v))
        if c.name == "folder":
            return _in_special(self.store, a, [str(v)], ids)
        if c.name == "size":
            lo, hi = bounds(v)
            return self.store.sized(ids, lo, hi)
        if c.name == "id":
            return ids & self.store.by_message_id(a, [str(v)]) if a else set()
        if c.name == "thread":
            return ids & self.store.thread_members(a, [v]) if a else set()  # type: ignore[list-item]
        f = self.store.filter_messages
        if c.name == "unread":
            return f(ids, unread=bool(v))
        if c.name == "starred":
            return f(ids, starred=bool(v))
        if c.name == "category":
            return f(ids, categories=(str(v),))
        if c.name == "priority":
            return f(ids, min_priority=int(v))  # type: ignore[call-overload]
        if c.name == "disposition":
            return f(ids, dispositions=tuple(v) if isinstance(v, tuple) else ())
        raise KeyError(c.name)  # oaken.search.operators makes no other


def _with(base: KeywordFilters, field: str, value: tuple[str, ...]) -> KeywordFilters:
    from dataclasses import replace

    changes: dict[str, Any] = {field: value}
    return replace(base, **changes)
