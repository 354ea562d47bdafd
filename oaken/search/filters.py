"""What a message must satisfy to be returned: the query's operators and the API's fields together.

DESIGN.md: operator and API field both given, both apply. Most of it is pushed into index.db
(`KeywordFilters`); read state and triage live in raw.db and are applied to candidates there;
exclusions are per message, not per chunk, so they are checked on candidates too. Both retrievers
pass their candidates through `Constraints.admit`, so phrases and exclusions bind both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, tzinfo
from typing import Any, Sequence

from oaken.config import DISPOSITIONS
from oaken.index.keyword import KeywordFilters, KeywordIndex
from oaken.search.dates import day_start
from oaken.search.groups import RawChecks
from oaken.search.matching import exclusion_terms, fts
from oaken.search.query import ParsedQuery
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
    excluded_terms: tuple[str, ...] = ()  # FTS5 strings: a message holding any of these anywhere is dropped
    phrases: tuple[str, ...] = ()  # FTS5 strings: a message must hold every one
    unread: bool | None = None
    starred: bool | None = None
    categories: tuple[str, ...] = ()
    min_priority: int | None = None
    dispositions: tuple[str, ...] = DEFAULT_DISPOSITIONS
    impossible: str | None = None  # why nothing can match (is:read with unread=True ...)
    raw: RawChecks = RawChecks()  # labels as they are now, folders, sizes, headers, groups
    # the messages changed since index.db was written, asked again without its copy of labels and
    # disposition (as_of): a label set a second ago finds them; raw.db then judges them
    side: KeywordFilters | None = None

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
        # raw.db judges labels and dispositions as they are now: index.db's copy is not asked here
        unsure_free = replace(self.index, labels=(), dispositions=(), disposition_unsure=frozenset())
        groups = list(self.also) if index_filters_applied else [unsure_free, *self.also]
        for group in groups:
            keep &= _matching(index, group, keep)
        for group in self.exclude:
            if keep:
                keep -= _matching(index, group, keep)
        if keep and self.excluded_terms:
            held = index.expressions_present(keep, self.excluded_terms)
            keep -= set(held)
        if keep and self.phrases and not phrases_checked:
            held = index.expressions_present(keep, self.phrases)
            keep = {m for m in keep if len(held.get(m, ())) == len(set(self.phrases))}
        if keep and self.raw:
            keep = self.raw.apply(keep, index, store, _matching)
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
            or bool(self.raw)
        )


# Messages changed in raw.db since an index was written, beyond which the index's copy of
# disposition is not used at all (raw.db's filter judges every candidate; a listing then reads more)
UNSURE_MAX = 1000


def as_of(cons: Constraints, store: Store, seq: int) -> Constraints:
    """`cons` for an index that has followed raw.db's change feed up to `seq`: its copy of a
    message's disposition and labels is kept as a narrowing prefilter, except for the messages
    changed since (a triage or a label a moment ago): the disposition filter lets them through,
    and `side` asks for them again without the labels. So a stale copy never hides a message, and
    `admit` (raw.db) never lets one through that it should not."""
    wanted = cons.index.dispositions
    narrows = bool(wanted) and not set(DISPOSITIONS) <= set(wanted)
    if not narrows and not cons.index.labels:
        return cons
    changes = store.changes_since(seq, UNSURE_MAX + 1)
    if len(changes) > UNSURE_MAX:
        return replace(cons, index=replace(cons.index, dispositions=(), labels=()))
    unsure = frozenset(c.message for c in changes if not c.deleted)
    if not unsure:
        return cons
    index = replace(cons.index, disposition_unsure=unsure) if narrows else cons.index
    side = None
    if cons.index.labels:
        ids = unsure if index.include_ids is None else unsure & index.include_ids
        if ids:
            side = replace(index, labels=(), dispositions=(), disposition_unsure=frozenset(), include_ids=ids)
    return replace(cons, index=index, side=side)


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


def date_field(value: Any, name: str, warnings: list[str], tz: tzinfo = UTC) -> int | None:
    """A date field: 'YYYY-MM-DD' or a date (its day in `tz`, the [search] time_zone), a datetime
    (naive: in `tz`) or Unix seconds."""
    if value is None:
        return None
    if isinstance(value, bool):
        pass
    elif isinstance(value, datetime):
        return int((value if value.tzinfo else value.replace(tzinfo=tz)).timestamp())
    elif isinstance(value, date):
        return int(datetime(value.year, value.month, value.day, tzinfo=tz).timestamp())
    elif isinstance(value, (int, float)) and value == value and abs(value) < 1e13:
        return int(value)
    elif isinstance(value, str):
        day = day_start(value.strip(), tz)
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
    q: ParsedQuery, fields: Fields, *, account: str | None, categories: Sequence[str], store: Store | None = None
) -> tuple[Constraints, list[str]]:
    """Combine the parsed query with the API fields. Unreadable field values become warnings.
    `store`: raw.db, where id: and thread: find their messages."""
    warnings: list[str] = []
    impossible = q.contradiction
    include, missing = _named_messages(q, account, store)
    if missing:
        impossible = impossible or missing

    senders, also_senders = _both(q.senders, _strings(fields.sender, "sender", warnings))
    labels = tuple(dict.fromkeys((*q.labels, *_strings(fields.labels, "labels", warnings))))

    afters = [v for v in (q.after, date_field(fields.after, "after", warnings, q.tz)) if v is not None]
    befores = [v for v in (q.before, date_field(fields.before, "before", warnings, q.tz)) if v is not None]

    thread = fields.thread
    if thread is not None and (isinstance(thread, bool) or not isinstance(thread, int) or not 0 <= thread < 2**63):
        warnings.append(f"thread={thread!r}: expected a thread number (a hit's `thread`); it filters nothing")
        thread = None

    dispositions: tuple[str, ...] | None = q.dispositions
    wanted = _strings(fields.disposition, "disposition", warnings)
    if wanted:
        given: list[str] = []
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
    if dispositions is None and q.any_disposition:
        dispositions = DISPOSITIONS  # a group names a disposition: the group decides
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
        include_ids=include,
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
        phrases=tuple(fts(c[0]) for c in q.clauses if len(c) == 1 and c[0].phrase),
        unread=unread,
        starred=q.starred,
        categories=cats,
        min_priority=min_priority,
        dispositions=final_dispositions,
        impossible=impossible,
        raw=RawChecks(
            account=account,
            labels=labels,
            excluded_labels=q.excluded_labels,
            folders=q.folders,
            larger=q.larger,
            smaller=q.smaller,
            headers=q.headers,
            groups=q.groups,
        ),
    ), warnings


def _named_messages(
    q: ParsedQuery, account: str | None, store: Store | None
) -> tuple[frozenset[int] | None, str | None]:
    """(the messages id: and thread: name, or None when they name none; why nothing can match)."""
    if not (q.message_ids or q.threads) or account is None or store is None:
        return None, None
    found: set[int] | None = None
    if q.message_ids:
        found = store.by_message_id(account, q.message_ids)
        if not found:
            return frozenset(), f"id:{q.message_ids[0]}: no message of account {account} has this Message-ID"
    if q.threads:
        members = store.thread_members(account, q.threads)
        if not members:
            return frozenset(), f"thread:{q.threads[0]}: no thread of account {account} holds this message or number"
        found = members if found is None else found & members
    return frozenset(found or ()), None if found else "id: and thread: name no message in common: nothing matches"


def _negated(name: str, value: str, account: str | None) -> KeywordFilters:
    one = (value,)
    match name:
        case "from":
            return KeywordFilters(account=account, senders=one)
        case "to":
            return KeywordFilters(account=account, to=one)
        case "cc":
            return KeywordFilters(account=account, cc=one)
        case "subject":
            return KeywordFilters(account=account, subject_terms=one)
        case "filename":
            return KeywordFilters(account=account, filename_terms=one)
    raise KeyError(name)  # the query parser negates no other operator
