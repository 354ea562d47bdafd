"""How the keyword pass follows raw.db's change feed: a batch at a time, parsed ahead, written in one transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from oaken import chunking
from oaken.config import Config
from oaken.index import keyword
from oaken.index.parse_pool import ParsePool, Parts
from oaken.store import Change, MessageMeta, Store

Progress = Callable[[int], None]


def _fields(meta: MessageMeta, parts: Parts | None = None) -> keyword.MessageFields:
    names, types, problem = (parts[0], parts[1], parts[2]) if parts else ((), (), None)
    if meta.problem:
        problem = f"{meta.problem}; {problem}" if problem else meta.problem
    return keyword.MessageFields(
        id=meta.id,
        account=meta.account,
        message_id=meta.message_id,
        content_hash=meta.content_hash,
        date=meta.date,
        subject=meta.subject,
        sender_name=meta.sender_name,
        sender_addr=meta.sender_addr,
        to=meta.to,
        cc=meta.cc,
        thread=meta.thread,
        disposition=meta.triage.disposition,
        labels=meta.labels,
        folders=meta.folders,
        attachment_names=names,
        attachment_types=types,
        problem=problem,
        attachments_unread=parts[4] if parts else (),
    )


def _changes(store: Store, seq: int, limit: int) -> list[Change]:
    """A batch of the feed that never cuts a run of equal seqs (a folder rename bumps many at once)."""
    while True:
        batch = store.changes_since(seq, limit)
        if len(batch) < limit:
            return batch
        last = batch[-1].seq
        whole = [c for c in batch if c.seq != last]
        if whole:
            return whole
        limit *= 2


def follow(
    store: Store,
    writer: keyword.KeywordWriter,
    cfg: Config,
    counts: dict[str, int],
    progress: Progress | None,
    *,
    fresh: bool,
) -> int:
    """Follow raw.db's change feed from where `writer`'s index.db stands; returns the seq reached."""
    parser = ParsePool()
    try:
        seq = writer.seq()
        fresh = fresh or (seq == 0 and not writer.counts()[0])
        batch_size = max(1, cfg.index.batch_size)
        # batch k+1 is read and handed to the worker before batch k is written
        ahead = _prepare(store, writer, cfg, _changes(store, seq, batch_size), fresh, parser)
        while ahead is not None:
            current = ahead
            ahead = _prepare(store, writer, cfg, _changes(store, current.seq, batch_size), fresh, parser)
            with writer.transaction():
                _write(writer, current, counts)
                writer.set_seq(current.seq)
            seq = current.seq
            if progress:
                progress(current.messages)
        return seq
    finally:
        parser.close()


@dataclass
class _Batch:
    seq: int  # the feed position this batch reaches
    messages: int
    gone: list[int]
    field_only: list[keyword.MessageFields]
    to_parse: list[MessageMeta]
    parsed: Callable[[], list[Parts]]


def _prepare(
    store: Store, writer: keyword.KeywordWriter, cfg: Config, changes: list[Change], fresh: bool, parser: ParsePool
) -> _Batch | None:
    """Sort a batch of the feed into deletions, field updates and messages to parse (started now)."""
    if not changes:
        return None
    latest: dict[int, Change] = {}
    for c in changes:
        latest[c.message] = c  # the feed is by seq: the last entry of a message is its state now
    gone = [m for m, c in latest.items() if c.deleted]
    live = [m for m, c in latest.items() if not c.deleted]
    metas = store.metas(live)
    # read before the previous batch is written: a message in both is parsed again (same result)
    indexed = {} if fresh else writer.hashes(live)
    to_parse: list[MessageMeta] = []
    field_only = []
    for m in live:
        meta = metas.get(m)
        if meta is None:  # deleted after the feed was read; its tombstone comes in a later batch
            continue
        if indexed.get(m) == (meta.content_hash, chunking.CHUNKER_VERSION):
            field_only.append(_fields(meta))
        else:
            to_parse.append(meta)
    parsed = parser.start([(meta.subject, store.raw(meta.id), cfg.index) for meta in to_parse])
    return _Batch(changes[-1].seq, len(latest), gone, field_only, to_parse, parsed)


def _write(writer: keyword.KeywordWriter, batch: _Batch, counts: dict[str, int]) -> None:
    if batch.gone:
        writer.delete(batch.gone)
        counts["deleted"] += len(batch.gone)
    docs = []
    for meta, parts in zip(batch.to_parse, batch.parsed()):
        texts = [keyword.ChunkText(kind, tokens, text) for kind, tokens, text in parts[3]]
        docs.append((_fields(meta, parts), texts))
        counts["problems"] += parts[2] is not None
        counts["chunks"] += len(texts)
    writer.replace(docs, chunking.CHUNKER_VERSION)
    writer.update_fields(batch.field_only)
    counts["indexed"] += len(docs)
    counts["updated"] += len(batch.field_only)
