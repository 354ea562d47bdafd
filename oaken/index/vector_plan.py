"""What an embedding pass must do: which rows of vectors/ to remove and which messages to embed.

Two ways to find it, with the same answer. After a complete pass under the same index.db
generation, only the messages raw.db's change feed lists since can differ, and only they are
compared (a triage change or a hundred new messages cost what they are; a pass stopped since is
followed from that record too). Otherwise every stored row is compared with every body chunk of
index.db (a first pass, a rebuild, a feed longer than FOLLOW_MAX_CHANGES): 12 s at a million
messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from oaken.index.vector_files import read_cursor
from oaken.index.vector_rows import normal
from oaken.index.vectors import MessageFields, VectorStore

if TYPE_CHECKING:
    from oaken.index.keyword import KeywordIndex
    from oaken.store import Store
    from oaken.store.records import Change


# Past this many raw.db changes since the last pass, comparing every row is cheaper than
# following each change (a first sync, a rebuild of index.db).
FOLLOW_MAX_CHANGES = 20_000
# Messages whose stored fields are read and compared at once when there is no cursor (and written
# at once when they differ): bounds the memory of that pass.
COMPARE_SPAN = 20_000


@dataclass(frozen=True)
class Plan:
    removed: int  # rows deleted while planning
    refreshed: int  # messages whose prefilter fields were rewritten
    todo: list[tuple[int, int]]  # (message, body chunks to embed), newest first
    has_rows: set[int]  # messages of todo with rows stored: replaced, not appended
    wanted: int  # body chunks index.db holds

    def __iter__(self) -> Iterator:
        return iter((self.removed, self.refreshed, self.todo, self.has_rows, self.wanted))


def follows_on(
    data_dir: Path, last: dict | None, index_state: tuple[int, int, int, str], raw_seq: int, raw: Store
) -> int | None:
    """The seq from which only the messages changed since can differ, or None: vectors/ held
    exactly index.db's body chunks as of the last complete pass's record (index.db's seq when it
    read them), index.db is the same generation and has followed raw.db to its end. A pass since
    that was stopped, or that read raw.db ahead of index.db, moved the cursor further (the rows'
    fields) but not the record: the messages changed since the record are compared again."""
    if last is None or not isinstance(last.get("index"), list) or len(last["index"]) != 4:
        return None
    since, cursor = last.get("raw_seq"), read_cursor(data_dir)
    ok = (
        isinstance(since, int)
        and not isinstance(since, bool)
        and since <= cursor <= raw_seq
        and last["index"][3] == index_state[3]
        and index_state[0] == raw_seq
        and raw.count_changes_since(since) <= FOLLOW_MAX_CHANGES
    )
    return since if ok else None


def changed_plan(store: VectorStore, index: KeywordIndex, raw: Store, since: int, until: int) -> Plan:
    """Compare rows and chunks of the messages raw.db's feed lists since the last pass only: a
    triage change or a hundred new messages cost what they are, not what the mailbox holds (every
    row and chunk id read, 4M of each at a million messages). Chunk ids are compared with their
    message, since index.db gives a deleted message's ids to the next new one."""
    batches = list(_feed(raw, since, until))  # at most FOLLOW_MAX_CHANGES: read once, used twice
    touched = {c.message for batch in batches for c in batch}
    stored = _stored_pairs(store, touched)
    present = {m for _, m in stored}
    removed, refreshed = _refresh(store, raw, present, batches) if present else (0, 0)
    if removed:  # rows of deleted messages went: what is left
        stored = _stored_pairs(store, touched)
    wanted = set(index.body_chunk_pairs(touched))
    removed += store.delete_chunks({c for c, _ in stored - wanted})
    per_message: dict[int, int] = {}
    for _, m in wanted - stored:
        per_message[m] = per_message.get(m, 0) + 1
    todo = _by_date(index, per_message)
    has_rows = {m for _, m in stored & wanted}
    return Plan(removed, refreshed, todo, has_rows, index.body_chunk_count())


def _stored_pairs(store: VectorStore, messages: set[int]) -> set[tuple[int, int]]:
    """(chunk id, message) of the stored rows of `messages`, asked a thousand messages at a time."""
    ordered = sorted(messages)
    out: set[tuple[int, int]] = set()
    for i in range(0, len(ordered), 1000):
        out.update((r["chunk_id"], r["message"]) for r in store.rows_of(ordered[i : i + 1000]))
    return out


def whole_plan(store: VectorStore, index: KeywordIndex, raw: Store, since: int, until: int, rebuilt: bool) -> Plan:
    """Compare every stored row with every body chunk of index.db."""
    stored = store.chunk_messages()
    removed = refreshed = 0
    if stored and not rebuilt:
        # rows written earlier may carry labels, folders or a disposition changed since, or
        # belong to a message deleted since
        present = set(stored.values())
        if since:
            removed, refreshed = _follow_changes(store, raw, present, since, until)
        else:
            removed, refreshed = _compare_all(store, raw, present)
        stored = store.chunk_messages() if removed else stored
    wanted = index.chunk_ids("embedded")
    removed += store.delete_chunks(set(stored) - wanted)
    todo = _newest_first(index, wanted - set(stored))
    has_rows = {m for c, m in stored.items() if c in wanted}  # these are replaced, the others appended
    return Plan(removed, refreshed, todo, has_rows, len(wanted))


def _follow_changes(store: VectorStore, raw: Store, present: set[int], since: int, until: int) -> tuple[int, int]:
    """Follow raw.db's change feed over (since, until] for the messages `present` in vectors/:
    refresh their prefilter fields, remove the deleted ones. Returns (rows removed, messages
    refreshed). Messages not embedded yet get current fields when they are."""
    return _refresh(store, raw, present, _feed(raw, since, until))


def _compare_all(store: VectorStore, raw: Store, present: set[int]) -> tuple[int, int]:
    """Without a cursor (a store from before it, or restored from elsewhere) every message's
    stored fields are compared with raw.db's, a range of ids at a time, and only those that differ
    are written: replaying the whole feed instead rewrote every row a thousand messages at a time,
    at a million messages over 20 minutes of merges and compactions. Returns (rows removed,
    messages refreshed)."""
    removed = refreshed = 0
    ordered = sorted(present)
    for i in range(0, len(ordered), COMPARE_SPAN):
        part = ordered[i : i + COMPARE_SPAN]
        held = store.fields_between(part[0], part[-1])
        metas = raw.metas(part)
        removed += store.delete_messages(m for m in part if m not in metas)
        changed = [f for f in (normal(MessageFields.from_meta(m)) for m in metas.values()) if held.get(f.message) != f]
        store.update_fields(changed)
        refreshed += len(changed)
    return removed, refreshed


def _feed(raw: Store, since: int, until: int) -> Iterator[list[Change]]:
    """raw.db's change feed over (since, until], a thousand entries at a time."""
    seq = since
    while seq < until:
        changes = [c for c in raw.changes_since(seq, limit=1000) if c.seq <= until]
        if not changes:
            return
        seq = changes[-1].seq
        yield changes


def _refresh(store: VectorStore, raw: Store, present: set[int], batches: Iterable[list[Change]]) -> tuple[int, int]:
    removed = refreshed = 0
    for changes in batches:
        touched = {c.message for c in changes} & present
        metas = raw.metas(touched)
        removed += store.delete_messages(touched - set(metas))
        store.update_fields([MessageFields.from_meta(m) for m in metas.values()])
        refreshed += len(metas)
    return removed, refreshed


def _newest_first(index: KeywordIndex, chunk_ids: set[int]) -> list[tuple[int, int]]:
    """(message, chunks of it to embed), newest message first."""
    if not chunk_ids:
        return []
    per_message: dict[int, int] = {}
    for m in _walk(index, chunk_ids):
        per_message[m] = per_message.get(m, 0) + 1
    return _by_date(index, per_message)


def _by_date(index: KeywordIndex, per_message: dict[int, int]) -> list[tuple[int, int]]:
    dates = index.message_dates(per_message)
    order = sorted(per_message, key=lambda m: (-dates.get(m, 0), -m))
    return [(m, per_message[m]) for m in order]


def _walk(index: KeywordIndex, chunk_ids: set[int]) -> list[int]:
    """The message of each wanted chunk, read by walking the body chunks in id order."""
    out: list[int] = []
    after = min(chunk_ids) - 1
    while True:
        batch = index.body_chunks(after_id=after, limit=5000)
        if not batch:
            return out
        out.extend(c.message for c in batch if c.id in chunk_ids)
        after = batch[-1].id
