"""What a message must satisfy to be returned: the query's operators and the API's fields together.

DESIGN.md: operator and API field both given, both apply. Most of it is pushed into index.db
(`KeywordFilters`); read state and triage live in raw.db and are applied to candidates there;
exclusions are per message, not per chunk, so they are checked on candidates too. Both retrievers
pass their candidates through `Constraints.admit`, so phrases and exclusions bind both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any, Sequence

from oaken.config import DISPOSITIONS
from oaken.index.keyword import KeywordFilters, KeywordIndex
from oaken.search.matching import exclusion_terms
from oaken.search.query import ParsedQuery, day_start
from oaken.store import Store

DEFAULT_DISPOSITIONS = ("inbox", "archived")  # a search leaves out discarded unless in: names it


@dataclass(frozen=True)
class Fields:
    """The filter fields of `oaken.search(...)`, as the caller gave them (checked by `constraints`)."""

    thread: Any = None
    sender: Any = None
    after: Any = None
    before: Any = None
    labels: Any = None
    disposition: Any = None
    unread: Any = None
    categories: Any = None
    min_priority: Any = None


@dataclass(frozen=True)
class Constraints:
    index: KeywordFilters  # pushed into index.db
    also: tuple[KeywordFilters, ...] = ()  # more groups every message must satisfy (field beside operator)
    exclude: tuple[KeywordFilters, ...] = ()  # a message matching any of these is dropped (-from:x)
    excluded_terms: tuple[str, ...] = ()  # a message holding any of these anywhere is dropped
    phrases: tuple[str, ...] = ()  # a message must hold every one
    unread: bool | None = None
    starred: bool | None = None
    categories: tuple[str, ...] = ()
    min_priority: int | None = None
    dispositions: tuple[str, ...] = DEFAULT_DISPOSITIONS
    impossible: str | None = None  # why nothing can match (is:read with unread=True ...)

    def admit(
        self,
        index: KeywordIndex,
        store: Store,
        candidates: Sequence[int],
        *,
        index_filters_applied: bool = True,
        phrases_checked: bool = False,
    ) -> list[int]:
        """The candidates that satisfy everything, in their order.

        `index_filters_applied`: the candidates came through `self.index` already (the keyword
        side); a vector list passes False. `phrases_checked`: the MATCH held the phrases.
        """
        ids = list(dict.fromkeys(candidates))
        if not ids or self.impossible:
            return []
        keep = set(ids)
        groups = list(self.also) if index_filters_applied else [self.index, *self.also]
        for group in groups:
            keep &= _matching(index, group, keep)
        for group in self.exclude:
            if keep:
                keep -= _matching(index, group, keep)
        if keep and self.excluded_terms:
            held = index.tokens_present(keep, self.excluded_terms)
            keep -= set(held)
        if keep and self.phrases and not phrases_checked:
            held = index.tokens_present(keep, self.phrases)
            keep = {m for m in keep if len(held.get(m, ())) == len(set(self.phrases))}
        if keep:
            keep = store.filter_messages(
                keep,
                unread=self.unread,
                starred=self.starred,
                categories=self.categories,
                min_priority=self.min_priority,
                dispositions=self.dispositions,
            )
        return [m for m in ids if m in keep]

    @property
    def raw_filters(self) -> bool:
        """Whether candidates need more than index.db to be judged."""
        return bool(
            self.also
            or self.exclude
            or self.excluded_terms
            or self.unread is not None
            or self.starred is not None
            or self.categories
            or self.min_priority is not None
        )


# Messages changed in raw.db since an index was written, beyond which the index's copy of
# disposition is not used at all (raw.db's filter judges every candidate; a listing then reads more)
UNSURE_MAX = 1000


def as_of(cons: Constraints, store: Store, seq: int) -> Constraints:
    """`cons` for an index that has followed raw.db's change feed up to `seq`: its copy of a
    message's disposition is kept as a narrowing prefilter, except for the messages changed since
    (a triage a moment ago), which it lets through for raw.db to judge. So a stale copy never
    hides a message, and `admit` (raw.db) never lets one through that it should not."""
    wanted = cons.index.dispositions
    if not wanted or set(DISPOSITIONS) <= set(wanted):
        return cons
    changes = store.changes_since(seq, UNSURE_MAX + 1)
    if len(changes) > UNSURE_MAX:
        return replace(cons, index=replace(cons.index, dispositions=()))
    unsure = frozenset(c.message for c in changes if not c.deleted)
    return replace(cons, index=replace(cons.index, disposition_unsure=unsure)) if unsure else cons


def _matching(index: KeywordIndex, group: KeywordFilters, ids: set[int]) -> set[int]:
    probe = replace(group, include_ids=frozenset(ids))
    return {h.message for h in index.newest(probe, limit=len(ids), offset=0)}


# ---- building --------------------------------------------------------------------------------


def _strings(value: Any, name: str, warnings: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    try:
        items = tuple(value)
    except TypeError:
        warnings.append(f"{name}={value!r}: expected text or a list of texts; it filters nothing")
        return ()
    out = tuple(str(v) for v in items if isinstance(v, str) and v.strip())
    if len(out) != len(items):
        warnings.append(f"{name}: only text values filter; {[v for v in items if not isinstance(v, str)]!r} ignored")
    return out


def date_field(value: Any, name: str, warnings: list[str]) -> int | None:
    """A date field: 'YYYY-MM-DD', a date (its day, UTC), a datetime (naive is UTC) or Unix seconds."""
    if value is None:
        return None
    if isinstance(value, bool):
        pass
    elif isinstance(value, datetime):
        return int((value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp())
    elif isinstance(value, date):
        return int(datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp())
    elif isinstance(value, (int, float)) and value == value and abs(value) < 1e13:
        return int(value)
    elif isinstance(value, str):
        day = day_start(value.strip())
        if day is not None:
            return day
    warnings.append(
        f"{name}={value!r}: expected a date YYYY-MM-DD, a date/datetime or Unix seconds; it filters nothing"
    )
    return None


def _both(query_values: tuple[str, ...], field_values: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(main, also): one set goes into the index filter; a second, if both are given, must hold too."""
    if query_values and field_values:
        return query_values, field_values
    return query_values or field_values, ()


def constraints(
    q: ParsedQuery, fields: Fields, *, account: str | None, categories: Sequence[str]
) -> tuple[Constraints, list[str]]:
    """Combine the parsed query with the API fields. Unreadable field values become warnings."""
    warnings: list[str] = []
    impossible = q.contradiction

    senders, also_senders = _both(q.senders, _strings(fields.sender, "sender", warnings))
    labels = tuple(dict.fromkeys((*q.labels, *_strings(fields.labels, "labels", warnings))))

    afters = [v for v in (q.after, date_field(fields.after, "after", warnings)) if v is not None]
    befores = [v for v in (q.before, date_field(fields.before, "before", warnings)) if v is not None]

    thread = fields.thread
    if thread is not None and (isinstance(thread, bool) or not isinstance(thread, int) or not 0 <= thread < 2**63):
        warnings.append(f"thread={thread!r}: expected a thread number (a hit's `thread`); it filters nothing")
        thread = None

    dispositions: tuple[str, ...] | None = q.dispositions
    wanted = _strings(fields.disposition, "disposition", warnings)
    if wanted:
        given = []
        for d in wanted:
            low = d.strip().lower()
            if low == "anywhere":
                given.extend(DISPOSITIONS)
            elif low in DISPOSITIONS:
                given.append(low)
            else:
                warnings.append(
                    f"disposition={d!r}: expected one of {', '.join(DISPOSITIONS)} or anywhere; it filters nothing"
                )
        if given:
            dispositions = tuple(d for d in dict.fromkeys(given) if dispositions is None or d in dispositions)
            if not dispositions:
                impossible = impossible or "disposition and in: name different dispositions: nothing matches"
    final_dispositions = dispositions if dispositions is not None else DEFAULT_DISPOSITIONS

    unread = q.unread
    if fields.unread is not None:
        if not isinstance(fields.unread, bool):
            warnings.append(f"unread={fields.unread!r}: expected true or false; it filters nothing")
        elif unread is not None and unread != fields.unread:
            impossible = impossible or "unread= and is:read/is:unread disagree: nothing matches"
        else:
            unread = fields.unread

    vocab = {c.lower(): c for c in categories}
    cats = q.categories
    field_cats = []
    for c in _strings(fields.categories, "categories", warnings):
        if c.strip().lower() in vocab:
            field_cats.append(vocab[c.strip().lower()])
        else:
            warnings.append(
                f"categories={c!r}: expected one of {', '.join(categories)} ([triage] categories); it filters nothing"
            )
    if cats and field_cats:
        cats = tuple(c for c in cats if c in field_cats)
        if not cats:
            impossible = impossible or "categories= and category: share no category: nothing matches"
    else:
        cats = cats or tuple(dict.fromkeys(field_cats))

    min_priority = q.min_priority
    if fields.min_priority is not None:
        p = fields.min_priority
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= 3:
            warnings.append(f"min_priority={p!r}: expected 0, 1, 2 or 3; it filters nothing")
        else:
            min_priority = p if min_priority is None else max(min_priority, p)

    index = KeywordFilters(
        account=account,
        senders=senders,
        to=q.recipients,
        cc=q.cc,
        subject_terms=tuple(t.text for t in q.subjects),
        after=max(afters) if afters else None,
        before=min(befores) if befores else None,
        labels=labels,
        thread=thread,
        dispositions=final_dispositions,
        has_attachment=q.has_attachment,
        filename_terms=q.filenames,
    )
    also = (KeywordFilters(account=account, senders=also_senders),) if also_senders else ()
    exclude = tuple(
        _negated(name, term_text, account) for name, term_text in ((n, t.text) for n, t in q.excluded_fields)
    )
    return Constraints(
        index=index,
        also=also,
        exclude=exclude,
        excluded_terms=exclusion_terms(q),
        phrases=q.phrases,
        unread=unread,
        starred=q.starred,
        categories=cats,
        min_priority=min_priority,
        dispositions=final_dispositions,
        impossible=impossible,
    ), warnings


def _negated(name: str, value: str, account: str | None) -> KeywordFilters:
    key = {
        "from": "senders",
        "to": "to",
        "cc": "cc",
        "subject": "subject_terms",
        "filename": "filename_terms",
        "label": "labels",
    }[name]
    return KeywordFilters(account=account, **{key: (value,)})
