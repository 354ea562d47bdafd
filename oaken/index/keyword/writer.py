"""Writing index.db: the indexer's batches of messages and chunks, in transactions that queue."""

from __future__ import annotations

import json
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import apsw

from oaken.index.keyword.pool import POOL
from oaken.index.keyword.records import ChunkText, MessageFields
from oaken.index.keyword.schema import (
    CHUNKER_INDEX,
    COLUMNS,
    COUNT_NOW,
    COUNTER_TRIGGERS,
    DISPOSITION_INDEX,
    SCHEMA,
    build_path,
    check_version,
    classify,
    connect,
    damage,
    index_path,
    unavailable,
)
from oaken.index.keyword.whole import discard_build, swap_in
from oaken.sqlite_rows import one_value

# What an index.db made before each of these gets on the writer's next open, found by the name of
# the schema object that says it is there (the schema version stays: schema.py says why of each).
_ADDED_LATER = (
    ("messages_disposition", DISPOSITION_INDEX),  # ~0.1 s at 100k messages, once
    ("messages_chunker", CHUNKER_INDEX),  # ~1 s at a million messages, once
    ("count_chunk_kind", COUNTER_TRIGGERS + COUNT_NOW),  # the counters, counted once
)


class KeywordWriter:
    """index.db opened for writing by the indexer; creates it when missing.

    Durability is off (synchronous=OFF): index.db is rebuilt from raw.db after a crash.
    `KeywordWriter.build(data_dir)` makes a whole new one beside the live index.db instead, which
    no reader sees until `publish()` swaps it in.
    """

    def __init__(
        self, data_dir: Path, *, busy_ms: int = 30_000, _path: Path | None = None, _generation: str | None = None
    ):
        self.data_dir = Path(data_dir)
        self.path = _path if _path is not None else index_path(data_dir)
        self.building = _path is not None  # a new index.db beside the live one, not yet published
        self.generation = ""  # KeywordIndex.generation: made anew with every index.db
        new = not self.path.exists()
        if new:
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)  # it holds mail text: private
            os.close(fd)
        try:
            self.db = _connect(self.path, busy_ms)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=OFF")
            self.db.execute("PRAGMA cache_size=-8000")  # 8 MB: the benchmark sums every process's memory
            self.db.execute("PRAGMA temp_store=MEMORY")
            if not self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                with self.transaction():  # another indexer may be creating it at the same moment
                    if not self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                        self.db.execute(SCHEMA)
                        # chunk ids restart with every index.db: vectors/ keyed by them must know which
                        self.db.execute("INSERT INTO meta VALUES ('generation', ?)", (_generation or uuid.uuid4().hex,))
            check_version(self.db, self.path)
            row = self.db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
            self.generation = str(row[0]) if row else ""
            for name, sql in _ADDED_LATER:
                if not self.db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone():
                    with self.transaction():
                        self.db.execute(sql)
        except apsw.Error as e:
            raise unavailable(self.path, classify(e, self.path), str(e)) from None

    @classmethod
    def build(cls, data_dir: Path, *, busy_ms: int = 30_000) -> KeywordWriter:
        """A new, empty index.db beside the live one (index-<generation>.db, private), for a first
        build or a rebuild: readers go on with the live index.db until `publish`."""
        generation = uuid.uuid4().hex
        path = build_path(data_dir, generation)
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        try:
            return cls(data_dir, busy_ms=busy_ms, _path=path, _generation=generation)
        except BaseException:
            discard_build(path)
            raise

    def publish(self) -> None:
        """Swap this whole new index.db in for the live one and close it: a search opening index.db
        from now on reads it; one that opened the old file keeps reading that."""
        assert self.building, "publish() is for an index.db made by KeywordWriter.build"
        self.merge_segments()
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the file itself, no -wal
        self.close()
        swap_in(self.data_dir, self.path)
        self.building = False
        POOL.clear()  # this process's idle readers of the old file: closed now, its space freed

    def discard(self) -> None:
        """Close and delete an index.db being built (the build failed): the live one stays."""
        try:
            self.close()
        finally:
            if self.building:
                discard_build(self.path)

    def merge_segments(self) -> None:
        """Merge the full-text index into one segment (FTS5's 'optimize').

        A bulk load leaves FTS5 a dozen segments (11 for 100,000 messages), and every term of a
        search is looked up in each: one segment made searches at 100,000 messages 25-35 % faster
        (one word 39 -> 29 ms, a question 160 -> 103 ms; smoke run under load). It rewrites the
        whole index (2.6 s at 100,000 messages with the file in the page cache, 27 s from disk),
        so it runs after a build and after a pass that at least doubled the index, not after
        every few new messages, whose small segments FTS5's own automerge folds in."""
        with self.transaction():
            self.db.execute("INSERT INTO fts(fts) VALUES('optimize')")

    def damage(self) -> str | None:
        """What SQLite's quick_check finds wrong with this index.db, as one line; None when sound."""
        try:
            return damage(self.db)
        except apsw.Error as e:
            raise unavailable(self.path, classify(e, self.path), str(e)) from None

    def close(self) -> None:
        # this process's idle readers first, so that the writer is the file's last connection and
        # removes its -wal and -shm as it did before readers were kept (a read-only connection
        # closing last cannot); the next search opens its readers anew (pool.py)
        POOL.clear()
        try:
            self.db.execute("PRAGMA optimize")
        except apsw.Error:
            pass
        try:
            self.db.close()
        except apsw.Error:  # a damaged file can refuse even this; the connection is gone all the same
            pass

    def __enter__(self) -> KeywordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """`with writer.transaction():` one batch lands whole. The write lock is taken at the start
        (BEGIN IMMEDIATE), so two indexers (the daemon and `oaken reindex`) queue, never deadlock."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except apsw.BusyError as e:
            raise unavailable(self.path, "locked", str(e)) from None
        try:
            yield
        except BaseException:
            if self.db.in_transaction:  # a full disk has SQLite roll back itself: ROLLBACK would hide why
                self.db.execute("ROLLBACK")
            raise
        try:
            self.db.execute("COMMIT")
        except apsw.FullError as e:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise unavailable(self.path, "full", str(e)) from None

    def _damaged(self, detail: str) -> Exception:
        return unavailable(self.path, "corrupt", detail)

    def seq(self) -> int:
        return one_value(self.db, "SELECT value FROM meta WHERE key = 'seq'", damaged=self._damaged)

    def set_seq(self, seq: int) -> None:
        self.db.execute("UPDATE meta SET value = ? WHERE key = 'seq'", (seq,))

    def other_chunker(self, version: int) -> bool:
        """True when some message was chunked by another chunker version (its chunks, and the
        vectors made of them, are not what this code would make)."""
        row = self.db.execute(
            "SELECT (SELECT min(chunker_version) FROM messages), (SELECT max(chunker_version) FROM messages)"
        ).fetchone()
        return row is not None and row[0] is not None and (row[0] != version or row[1] != version)

    def hashes(self, messages: Iterable[int]) -> dict[int, tuple[str, int]]:
        """message -> (content_hash, chunker_version) of what is indexed now."""
        return {
            r[0]: (r[1], r[2])
            for r in self.db.execute(
                # the ids first, then each message by its key: the order SQLite picks from the table's
                # statistics was a scan of every message on a small index.db
                "SELECT m.id, m.content_hash, m.chunker_version FROM json_each(?) AS j "
                "CROSS JOIN messages AS m ON m.id = j.value",
                (json.dumps(sorted(set(messages))),),
            )
        }

    def _delete_text(self, messages: list[int]) -> None:
        ids = json.dumps(messages)
        # external content: FTS5 is told the old values before the rows behind them go
        self.db.execute(
            f"INSERT INTO fts(fts, rowid, {', '.join(COLUMNS)}) SELECT 'delete', id, {', '.join(COLUMNS)} "
            "FROM fts_content WHERE id IN (SELECT id FROM chunks WHERE message IN (SELECT value FROM json_each(?)))",
            (ids,),
        )
        self.db.execute("DELETE FROM chunks WHERE message IN (SELECT value FROM json_each(?))", (ids,))

    def delete(self, messages: Iterable[int]) -> None:
        ids = sorted(set(messages))
        if not ids:
            return
        self._delete_text(ids)
        js = json.dumps(ids)
        self.db.execute("DELETE FROM tags WHERE message IN (SELECT value FROM json_each(?))", (js,))
        self.db.execute("DELETE FROM messages WHERE id IN (SELECT value FROM json_each(?))", (js,))

    def _tags(self, fields: MessageFields) -> Iterator[tuple[str, str, int]]:
        for label in dict.fromkeys(fields.labels):
            yield ("l", label, fields.id)
        for folder in dict.fromkeys(fields.folders):
            yield ("f", folder, fields.id)

    def replace(self, docs: Sequence[tuple[MessageFields, Sequence[ChunkText]]], chunker_version: int) -> None:
        """Write messages and their chunks, replacing whatever was indexed for them."""
        if not docs:
            return
        self.delete(f.id for f, _ in docs)
        self.db.executemany(
            "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    f.id,
                    f.account,
                    f.message_id,
                    f.content_hash,
                    f.date,
                    f.subject,
                    f.sender_name,
                    f.sender_addr,
                    "\n".join(f.to),
                    "\n".join(f.cc),
                    f.thread,
                    f.disposition,
                    1 if f.attachment_names or f.attachment_types else 0,
                    "\n".join(f.attachment_names),
                    "\n".join(f.attachment_types),
                    f.problem,
                    chunker_version,
                    "\n".join(f.attachments_unread) or None,
                )
                for f, _ in docs
            ),
        )
        self.db.executemany("INSERT OR IGNORE INTO tags VALUES (?, ?, ?)", (t for f, _ in docs for t in self._tags(f)))
        next_id = one_value(self.db, "SELECT coalesce(max(id), 0) FROM chunks", damaged=self._damaged) + 1
        chunk_rows = []
        fts_rows = []
        for f, chunks in docs:
            sender = f"{f.sender_name} {f.sender_addr}"
            recipients = "\n".join(f.to) + "\n" + "\n".join(f.cc)
            names = "\n".join(f.attachment_names)
            for ord_, ch in enumerate(chunks):
                chunk_rows.append((next_id, f.id, ord_, ch.kind, ch.tokens, ch.text))
                body = ch.text if ch.kind == "body" else ""
                quoted = ch.text if ch.kind == "quoted" else ""
                # an attachment's words are weighed as its name is ([index] weight_attachments);
                # the same values as schema's fts_content view gives, which FTS5 deletes by
                files = f"{ch.text}\n{names}" if ch.kind == "attachment" else names
                fts_rows.append((next_id, f.subject, sender, recipients if ord_ == 0 else "", body, quoted, files))
                next_id += 1
        self.db.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?)", chunk_rows)
        self.db.executemany(f"INSERT INTO fts(rowid, {', '.join(COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?)", fts_rows)

    def update_fields(self, fields: Sequence[MessageFields]) -> None:
        """Labels, folders, disposition and thread changed but not the bytes: no text is touched."""
        if not fields:
            return
        self.db.executemany(
            "UPDATE messages SET thread = ?, disposition = ?, account = ? WHERE id = ?",
            ((f.thread, f.disposition, f.account, f.id) for f in fields),
        )
        self.db.execute(
            "DELETE FROM tags WHERE message IN (SELECT value FROM json_each(?))", (json.dumps([f.id for f in fields]),)
        )
        self.db.executemany("INSERT OR IGNORE INTO tags VALUES (?, ?, ?)", (t for f in fields for t in self._tags(f)))

    def message_ids(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT id FROM messages")}

    def counts(self) -> tuple[int, int]:
        """(messages, chunks), from the counters the triggers keep."""
        return (
            one_value(self.db, "SELECT value FROM meta WHERE key = 'messages'", damaged=self._damaged),
            one_value(self.db, "SELECT value FROM meta WHERE key = 'chunks'", damaged=self._damaged),
        )


def _connect(path: Path, busy_ms: int) -> apsw.Connection:
    try:
        return connect(path, write=True, busy_ms=busy_ms)
    except apsw.CantOpenError:  # index.db was swapped for a rebuilt one between finding and opening it
        return connect(path, write=True, busy_ms=busy_ms)
