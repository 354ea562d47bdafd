"""raw.db: the source of truth. Every SQL statement against raw.db lives in this package: the
queries here, the schema in oaken/store/migrations.py.

Raw RFC 822 bytes, where each message lives (folder, UIDVALIDITY, UID) with its flags, labels,
threads, triage and the queue of local flag changes. The indexes downstream follow `change_seq`:
every change to a message (a new location, a flag, a label, triage) bumps it by trigger, and a
deleted message leaves a tombstone, so an indexer never has to diff the whole store.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

import apsw

from oaken.config import DISPOSITIONS
from oaken.errors import NotFound, StoreError, TriageError
from oaken.store.migrations import MIGRATIONS

if TYPE_CHECKING:  # the envelope reader's regexes are loaded by writers only, not by a search
    from oaken.envelope import Envelope

SEEN = "\\Seen"
PAGE_SIZE = 16384  # for a new raw.db; one made before keeps its own
FLAGGED = "\\Flagged"


@dataclass(frozen=True)
class Folder:
    id: int
    account_id: int
    name: str
    delimiter: str | None
    special_use: str | None
    uidvalidity: int | None
    uidnext: int | None
    highestmodseq: int | None
    exists_count: int | None


@dataclass(frozen=True)
class Location:
    id: int
    message: int
    folder_id: int
    folder: str
    uidvalidity: int | None
    uid: int | None
    flags: tuple[str, ...]
    modseq: int | None


@dataclass(frozen=True)
class AddResult:
    message: int  # Oaken's id of the message
    new_message: bool  # False when the message was already stored (another folder, a re-import)
    new_location: bool
    problem: str | None = None  # set when the message is new and its headers could not all be read


@dataclass(frozen=True)
class Incoming:
    """One message to store and the place it lives, with what was read from its bytes (the
    content hash and envelope, which sync computes in a worker process)."""

    raw: bytes
    digest: str
    envelope: Envelope
    folder_id: int
    uidvalidity: int | None = None
    uid: int | None = None
    flags: tuple[str | bytes, ...] = ()
    internaldate: int | None = None
    source: str | None = None
    modseq: int | None = None


@dataclass(frozen=True)
class Triage:
    category: str | None
    priority: int | None
    disposition: str


@dataclass(frozen=True)
class MessageMeta:
    """A stored message without its bytes: what search results and the indexer need."""

    id: int
    account: str
    message_id: str | None
    content_hash: str
    date: int
    subject: str
    sender_name: str
    sender_addr: str
    to: tuple[str, ...]
    cc: tuple[str, ...]
    thread: int
    folders: tuple[str, ...]
    labels: tuple[str, ...]  # folders, IMAP keywords and labels set locally
    unread: bool
    starred: bool
    triage: Triage
    problem: str | None
    size: int


@dataclass(frozen=True)
class Change:
    """One entry of the change feed an indexer follows."""

    message: int
    seq: int
    deleted: bool
    content_hash: str | None


@dataclass(frozen=True)
class FlagChange:
    id: int
    message: int
    location: int
    folder_id: int
    uidvalidity: int | None
    uid: int | None
    op: str
    flag: str
    modseq: int | None


def _split(text: str) -> tuple[str, ...]:
    return tuple(t for t in text.split("\n") if t)


def _flags(text: str) -> tuple[str, ...]:
    return tuple(f for f in text.split(" ") if f)


def flags_text(flags: Iterable[str | bytes]) -> str:
    out = sorted({f.decode("utf-8", "replace") if isinstance(f, bytes) else str(f) for f in flags})
    return " ".join(f for f in out if f and f != "\\Recent")


class Store:
    """An open raw.db. Not thread-safe: one Store per thread (apsw connections are cheap)."""

    def __init__(self, path: str | Path, *, readonly: bool = False):
        self.path = Path(path)
        flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        new = not self.path.exists()
        if readonly and new:
            raise StoreError(f"{self.path}: no raw.db yet; run `oaken import` or `oaken sync` first")
        if new:
            # create it private before the first byte of mail lands in it
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        try:
            self.db = apsw.Connection(str(self.path), flags=flags)
            self.db.set_busy_timeout(30_000)
            if new:
                # a message is a few KB: on 16 KB pages most fit in one page with no overflow chain,
                # and a first sync writes a third fewer pages (measured: less CPU, half the system time)
                self.db.execute(f"PRAGMA page_size={PAGE_SIZE}")
            if not readonly:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
                # statement journals (an INSERT with triggers keeps one) in memory, not a temp file
                # written 4 bytes and a page at a time: a third of a first sync's system time
                self.db.execute("PRAGMA temp_store=MEMORY")
            self.db.execute("PRAGMA foreign_keys=ON")
            if not readonly:
                self._migrate()
        except apsw.Error as e:
            raise StoreError(f"{self.path}: cannot open raw.db: {e}") from None
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists() and not readonly:
                os.chmod(p, 0o600)

    # ---- life cycle -------------------------------------------------------------------------

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise StoreError(
                f"{self.path}: made by a newer Oaken (schema {version}, this one knows {len(MIGRATIONS)}); upgrade Oaken"
            )
        for number, (_name, sql) in enumerate(MIGRATIONS[version:], start=version + 1):
            with self.db:
                self.db.execute(sql)
                self.db.execute(f"PRAGMA user_version={number}")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One batch: all of it lands or none of it (a kill mid-batch loses only the batch)."""
        with self.db:
            yield

    def integrity_check(self) -> str:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0]

    def seq(self) -> int:
        return self.db.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()[0]

    # ---- accounts and folders ---------------------------------------------------------------

    def ensure_account(self, name: str) -> int:
        row = self.db.execute("SELECT id FROM accounts WHERE name = ?", (name,)).fetchone()
        if row:
            return row[0]
        return self.db.execute("INSERT INTO accounts(name) VALUES (?) RETURNING id", (name,)).fetchone()[0]

    def account_id(self, name: str) -> int:
        row = self.db.execute("SELECT id FROM accounts WHERE name = ?", (name,)).fetchone()
        if not row:
            known = ", ".join(self.account_names()) or "none yet"
            raise NotFound(f"no account {name!r} in {self.path} (accounts: {known})")
        return row[0]

    def account_names(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT name FROM accounts ORDER BY id")]

    _FOLDER_COLS = "id, account_id, name, delimiter, special_use, uidvalidity, uidnext, highestmodseq, exists_count"

    def ensure_folder(self, account_id: int, name: str, *, delimiter: str | None = None,
                      special_use: str | None = None) -> Folder:
        self.db.execute(
            "INSERT INTO folders(account_id, name, delimiter, special_use) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(account_id, name) DO UPDATE SET "
            "delimiter = coalesce(excluded.delimiter, delimiter), special_use = coalesce(excluded.special_use, special_use)",
            (account_id, name, delimiter, special_use),
        )
        return self.folder(account_id, name)  # type: ignore[return-value]

    def folder(self, account_id: int, name: str) -> Folder | None:
        row = self.db.execute(
            f"SELECT {self._FOLDER_COLS} FROM folders WHERE account_id = ? AND name = ?", (account_id, name)
        ).fetchone()
        return Folder(*row) if row else None

    def folders(self, account_id: int) -> list[Folder]:
        return [Folder(*r) for r in self.db.execute(
            f"SELECT {self._FOLDER_COLS} FROM folders WHERE account_id = ? ORDER BY name", (account_id,))]

    def set_folder_state(self, folder_id: int, *, uidvalidity: int | None, uidnext: int | None,
                         highestmodseq: int | None, exists_count: int | None = None) -> None:
        """Saved in the same transaction as the folder's messages, so a restart resumes exactly."""
        self.db.execute(
            "UPDATE folders SET uidvalidity = ?, uidnext = ?, highestmodseq = ?, exists_count = ?, synced_at = ? "
            "WHERE id = ?",
            (uidvalidity, uidnext, highestmodseq, exists_count, time.time(), folder_id),
        )

    def rename_folder(self, folder_id: int, new_name: str) -> None:
        self.db.execute("UPDATE folders SET name = ? WHERE id = ?", (new_name, folder_id))
        # labels come from folder names: every message there changed (a no-op UPDATE of locations
        # would not fire its trigger, so bump them directly)
        self._bump(r[0] for r in self.db.execute(
            "SELECT DISTINCT message FROM locations WHERE folder_id = ?", (folder_id,)))

    def delete_folder(self, folder_id: int) -> int:
        """Forget a folder; messages left with no location are deleted. Returns how many."""
        affected = [r[0] for r in self.db.execute(
            "SELECT DISTINCT message FROM locations WHERE folder_id = ?", (folder_id,))]
        self.db.execute("DELETE FROM locations WHERE folder_id = ?", (folder_id,))
        self.db.execute("DELETE FROM folders WHERE id = ?", (folder_id,))
        return self._delete_orphans(affected)

    # ---- messages ---------------------------------------------------------------------------

    def add_message(self, account_id: int, raw: bytes, *, folder_id: int, uidvalidity: int | None = None,
                    uid: int | None = None, flags: Iterable[str | bytes] = (), internaldate: int | None = None,
                    source: str | None = None, modseq: int | None = None,
                    read: tuple[str, Envelope] | None = None) -> AddResult:
        """Store a message once per (Message-ID, content) and record one more place it lives.
        `read`: (content hash, envelope) already computed from `raw`, e.g. by sync in a worker process."""
        from oaken import envelope

        digest, env = read if read is not None else (envelope.content_hash(raw), envelope.read(raw))
        return self.add_messages(account_id, [Incoming(raw, digest, env, folder_id, uidvalidity, uid, tuple(flags),
                                                       internaldate, source, modseq)])[0]

    def add_messages(self, account_id: int, items: Sequence[Incoming]) -> list[AddResult]:
        """add_message for a whole batch, in order, as if each were added alone: a handful of
        statements per batch instead of a dozen per message (a first sync stores 10,000s)."""
        from oaken import envelope

        if not items:
            return []
        known = self._find_messages(account_id, {(it.envelope.message_id or "", it.digest) for it in items})
        slots: list[int] = []  # per item: a stored message id (>= 0) or -1 - index into `rows`
        rows: list[list] = []  # messages to insert; thread_id (column 14) may change as threads merge
        pending: dict[tuple[str, str], int] = {}
        fresh = [it for it in items if (it.envelope.message_id or "", it.digest) not in known]
        threads = _Threads(self, account_id, fresh) if fresh else None
        now = time.time()
        for it in items:
            key = (it.envelope.message_id or "", it.digest)
            if key in known:
                slots.append(known[key])
                continue
            if key not in pending:
                assert threads is not None
                pending[key] = len(rows)
                env = it.envelope
                arrived = it.internaldate if it.internaldate is not None else envelope.now()
                date, date_source = envelope.effective_date(env.date, arrived)
                if date_source == "arrival" and it.internaldate is None:
                    date_source = "import"
                rows.append([account_id, env.message_id, it.digest, it.raw, len(it.raw), date, date_source,
                             env.subject, env.sender_name, env.sender_addr, "\n".join(env.to), "\n".join(env.cc),
                             " ".join(env.in_reply_to), " ".join(env.references), threads.place(env, rows),
                             env.problem, now])
            slots.append(-1 - pending[key])
        ids: list[int] = []
        if rows:
            assert threads is not None
            threads.save()
            # fresh change seqs for the new rows, so no trigger rewrites a row (and its raw bytes)
            # to bump it
            top = self.db.execute("UPDATE meta SET value = value + ? WHERE key = 'seq' RETURNING value",
                                  (len(rows),)).fetchone()[0]
            first = top - len(rows) + 1
            ids = [r[0] for r in self.db.executemany(
                "INSERT INTO messages(account_id, message_id, content_hash, raw, size, date, date_source, subject, "
                "sender_name, sender_addr, to_addrs, cc_addrs, in_reply_to, refs, thread_id, problem, added_at, "
                "change_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                [(*row, first + n) for n, row in enumerate(rows)])]
            # no triage row until triage is set: every reader LEFT JOINs it with disposition 'inbox'
        results = self._add_locations(items, [s if s >= 0 else ids[-1 - s] for s in slots], set(ids))
        out = []
        seen_new: set[int] = set()
        for it, slot, (message, new_location) in zip(items, slots, results):
            new_message = slot < 0 and slot not in seen_new
            seen_new.add(slot)
            out.append(AddResult(message, new_message, new_location, it.envelope.problem if new_message else None))
        return out

    def _add_locations(self, items: Sequence[Incoming], messages: list[int], fresh: set[int]) -> list[tuple[int, bool]]:
        """One location per item unless that place is taken already: (message, new location).
        A message stored before (not in `fresh`) that gains a location is bumped in the feed."""
        taken: set[tuple] = set()
        by_uid: dict[tuple[int, int | None], list[int]] = {}
        for it in items:
            if it.uid is not None:
                by_uid.setdefault((it.folder_id, it.uidvalidity), []).append(it.uid)
        for (folder_id, uidvalidity), uids in by_uid.items():
            taken.update((folder_id, uidvalidity, r[0]) for r in self.db.execute(
                "SELECT uid FROM locations WHERE folder_id = ? AND uidvalidity IS ? AND uid IN "
                "(SELECT value FROM json_each(?))", (folder_id, uidvalidity, _json_list(uids))))
        out: list[tuple[int, bool]] = []
        new: list[tuple] = []
        for it, message in zip(items, messages):
            if it.uid is not None:
                key: tuple = (it.folder_id, it.uidvalidity, it.uid)
            else:
                key = (it.folder_id, message)
                if key not in taken and message not in fresh and self.db.execute(
                        "SELECT 1 FROM locations WHERE folder_id = ? AND message = ? AND uid IS NULL",
                        key).fetchone():
                    taken.add(key)
            if key in taken:
                out.append((message, False))
                continue
            taken.add(key)
            new.append((message, it.folder_id, it.uidvalidity, it.uid, it.source, flags_text(it.flags), it.modseq,
                        it.internaldate))
            out.append((message, True))
        if new:
            self.db.executemany(
                "INSERT INTO locations(message, folder_id, uidvalidity, uid, source, flags, modseq, internaldate) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", new)
            self._bump(dict.fromkeys(row[0] for row in new if row[0] not in fresh))
        return out

    def find_message(self, account_id: int, message_id: str | None, content_hash: str) -> int | None:
        row = self.db.execute(
            "SELECT id FROM messages WHERE account_id = ? AND coalesce(message_id, '') = ? AND content_hash = ?",
            (account_id, message_id or "", content_hash),
        ).fetchone()
        return row[0] if row else None

    def _find_messages(self, account_id: int, keys: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """find_message for many (Message-ID or '', content hash) keys in one query; CROSS JOIN
        keeps SQLite on the identity index, key by key."""
        return {(m, h): i for i, m, h in self.db.execute(
            "SELECT m.id, coalesce(m.message_id, ''), m.content_hash FROM json_each(?2) AS j CROSS JOIN messages AS m "
            "WHERE m.account_id = ?1 AND coalesce(m.message_id, '') = j.value ->> 0 AND m.content_hash = j.value ->> 1",
            (account_id, _json_list(keys)))}

    def raw(self, message: int) -> bytes:
        row = self.db.execute("SELECT raw FROM messages WHERE id = ?", (message,)).fetchone()
        if not row:
            raise NotFound(f"no message with id {message}; `oaken search` shows ids")
        return bytes(row[0])

    def message_count(self, account_id: int | None = None) -> int:
        if account_id is None:
            return self.db.execute("SELECT count(*) FROM messages").fetchone()[0]
        return self.db.execute("SELECT count(*) FROM messages WHERE account_id = ?", (account_id,)).fetchone()[0]

    def delete_messages(self, messages: Iterable[int]) -> None:
        self.db.executemany("DELETE FROM messages WHERE id = ?", ((m,) for m in messages))

    def _delete_orphans(self, candidates: Iterable[int]) -> int:
        gone = [m for m in set(candidates)
                if not self.db.execute("SELECT 1 FROM locations WHERE message = ? LIMIT 1", (m,)).fetchone()]
        self.delete_messages(gone)
        return len(gone)

    def _bump(self, messages: Iterable[int]) -> None:
        ids = list(messages)
        if not ids:
            return
        # a seq of its own for each message: a reader paging the feed never cuts a run of equal seqs
        top = self.db.execute("UPDATE meta SET value = value + ? WHERE key = 'seq' RETURNING value",
                              (len(ids),)).fetchone()[0]
        self.db.executemany("UPDATE messages SET change_seq = ? WHERE id = ?",
                            ((top - len(ids) + 1 + n, m) for n, m in enumerate(ids)))

    # ---- threading --------------------------------------------------------------------------

    def _thread_refs(self, account_id: int, refs: Iterable[str]) -> dict[str, int]:
        refs = set(refs)
        if not refs:
            return {}
        return dict(self.db.execute(
            "SELECT ref, thread_id FROM thread_refs WHERE account_id = ? AND ref IN (SELECT value FROM json_each(?))",
            (account_id, _json_list(refs))))

    def _thread_subjects(self, account_id: int, subjects: Iterable[str]) -> dict[str, int]:
        subjects = set(subjects)
        if not subjects:
            return {}
        return dict(self.db.execute(
            "SELECT subject, thread_id FROM thread_subjects WHERE account_id = ? AND subject IN "
            "(SELECT value FROM json_each(?))", (account_id, _json_list(subjects))))

    def _last_thread(self) -> int:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'thread'").fetchone()
        return row[0] if row else 0

    def _save_threads(self, account_id: int, last: int | None, refs: Iterable[tuple[str, int]],
                      subjects: Iterable[tuple[str, int]]) -> None:
        if last is not None:
            self.db.execute("INSERT INTO meta(key, value) VALUES ('thread', ?) "
                            "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (last,))
        if refs:
            self.db.executemany("INSERT OR IGNORE INTO thread_refs(account_id, ref, thread_id) VALUES (?, ?, ?)",
                                [(account_id, ref, t) for ref, t in refs])
        if subjects:
            self.db.executemany(
                "INSERT OR IGNORE INTO thread_subjects(account_id, subject, thread_id) VALUES (?, ?, ?)",
                [(account_id, s, t) for s, t in subjects])

    def _merge_thread(self, thread: int, other: int) -> None:
        """A message joined two threads: `other` becomes `thread`, and its messages changed."""
        self.db.execute("UPDATE thread_refs SET thread_id = ? WHERE thread_id = ?", (thread, other))
        self.db.execute("UPDATE thread_subjects SET thread_id = ? WHERE thread_id = ?", (thread, other))
        moved = [r[0] for r in self.db.execute("SELECT id FROM messages WHERE thread_id = ?", (other,))]
        self.db.execute("UPDATE messages SET thread_id = ? WHERE thread_id = ?", (thread, other))
        self._bump(moved)

    # ---- metadata reads ---------------------------------------------------------------------

    _META_SQL = """
        SELECT m.id, a.name, m.message_id, m.content_hash, m.date, m.subject, m.sender_name, m.sender_addr,
               m.to_addrs, m.cc_addrs, m.thread_id, m.problem, m.size,
               t.category, t.priority, coalesce(t.disposition, 'inbox'),
               (SELECT group_concat(f.name, char(10)) FROM locations l JOIN folders f ON f.id = l.folder_id
                 WHERE l.message = m.id),
               (SELECT group_concat(l.flags, ' ') FROM locations l WHERE l.message = m.id),
               (SELECT group_concat(label, char(10)) FROM labels WHERE message = m.id)
        FROM messages m JOIN accounts a ON a.id = m.account_id LEFT JOIN triage t ON t.message = m.id
    """

    def _meta(self, row: Sequence) -> MessageMeta:
        (mid, account, message_id, digest, date, subject, sname, saddr, to, cc, thread, problem, size,
         category, priority, disposition, folders, flags, labels) = row
        folder_list = tuple(sorted(set(_split(folders or ""))))
        flag_list = (flags or "").split()
        keywords = {f for f in flag_list if not f.startswith("\\")}
        # a message is unread when none of its locations carries \Seen (DESIGN.md)
        seen = SEEN in flag_list
        return MessageMeta(
            id=mid, account=account, message_id=message_id, content_hash=digest, date=date, subject=subject,
            sender_name=sname, sender_addr=saddr, to=_split(to), cc=_split(cc), thread=thread,
            folders=folder_list, labels=tuple(sorted(set(folder_list) | keywords | set(_split(labels or "")))),
            unread=not seen, starred=FLAGGED in flag_list,
            triage=Triage(category, priority, disposition), problem=problem, size=size,
        )

    def meta(self, message: int) -> MessageMeta:
        row = self.db.execute(self._META_SQL + " WHERE m.id = ?", (message,)).fetchone()
        if not row:
            raise NotFound(f"no message with id {message}; `oaken search` shows ids")
        return self._meta(row)

    def metas(self, messages: Iterable[int]) -> dict[int, MessageMeta]:
        ids = list(dict.fromkeys(messages))
        out: dict[int, MessageMeta] = {}
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            marks = ",".join("?" * len(part))
            for row in self.db.execute(self._META_SQL + f" WHERE m.id IN ({marks})", part):
                meta = self._meta(row)
                out[meta.id] = meta
        return out

    def changes_since(self, seq: int, limit: int = 1000) -> list[Change]:
        """The change feed: messages changed or deleted after `seq`, oldest change first."""
        rows = self.db.execute(
            "SELECT id, change_seq, 0, content_hash FROM messages WHERE change_seq > ?1 "
            "UNION ALL SELECT message, change_seq, 1, NULL FROM tombstones WHERE change_seq > ?1 "
            "ORDER BY 2 LIMIT ?2",
            (seq, limit),
        ).fetchall()
        return [Change(m, s, bool(d), h) for m, s, d, h in rows]

    def count_changes_since(self, seq: int) -> int:
        """How many entries changes_since(seq) would list in all (a progress bar's total)."""
        return self.db.execute(
            "SELECT (SELECT count(*) FROM messages WHERE change_seq > ?1) + "
            "(SELECT count(*) FROM tombstones WHERE change_seq > ?1)", (seq,)).fetchone()[0]

    def message_ids_in(self, account_id: int) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT id FROM messages WHERE account_id = ?", (account_id,))]

    def all_message_ids(self) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT id FROM messages ORDER BY id")]

    def filter_messages(self, messages: Iterable[int], *, unread: bool | None = None, starred: bool | None = None,
                        categories: Sequence[str] = (), min_priority: int | None = None,
                        dispositions: Sequence[str] | None = None) -> set[int]:
        """The subset of `messages` whose read state and triage match: these live only here."""
        ids = list(dict.fromkeys(messages))
        keep: set[int] = set()
        conds: list[str] = []
        params: list[object] = []
        if unread is not None:
            conds.append(("NOT " if unread else "") +
                         "EXISTS (SELECT 1 FROM locations l WHERE l.message = m.id AND ' ' || l.flags || ' ' LIKE '% \\Seen %')")
        if starred is not None:
            conds.append(("" if starred else "NOT ") +
                         "EXISTS (SELECT 1 FROM locations l WHERE l.message = m.id AND ' ' || l.flags || ' ' LIKE '% \\Flagged %')")
        if categories:
            conds.append(f"t.category IN ({','.join('?' * len(categories))})")
            params.extend(categories)
        if min_priority is not None:
            conds.append("t.priority >= ?")
            params.append(min_priority)
        if dispositions is not None:
            conds.append(f"coalesce(t.disposition, 'inbox') IN ({','.join('?' * len(dispositions))})")
            params.extend(dispositions)
        where = " AND ".join(conds) or "1"
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            marks = ",".join("?" * len(part))
            sql = (f"SELECT m.id FROM messages m LEFT JOIN triage t ON t.message = m.id "
                   f"WHERE m.id IN ({marks}) AND {where}")
            keep.update(r[0] for r in self.db.execute(sql, [*part, *params]))
        return keep

    # ---- locations and flags (sync) -----------------------------------------------------------

    _LOC_SQL = ("SELECT l.id, l.message, l.folder_id, f.name, l.uidvalidity, l.uid, l.flags, l.modseq "
                "FROM locations l JOIN folders f ON f.id = l.folder_id")

    def locations(self, message: int) -> list[Location]:
        return [Location(*r[:6], _flags(r[6]), r[7]) for r in self.db.execute(
            self._LOC_SQL + " WHERE l.message = ? ORDER BY l.id", (message,))]

    def folder_uids(self, folder_id: int, uidvalidity: int | None) -> dict[int, tuple[int, tuple[str, ...]]]:
        """uid -> (message, flags) for one folder at one UIDVALIDITY."""
        return {r[0]: (r[1], _flags(r[2])) for r in self.db.execute(
            "SELECT uid, message, flags FROM locations WHERE folder_id = ? AND uidvalidity IS ? AND uid IS NOT NULL",
            (folder_id, uidvalidity))}

    def set_flags(self, folder_id: int, uidvalidity: int | None, uid: int, flags: Iterable[str | bytes],
                  modseq: int | None = None) -> None:
        self.db.execute(
            "UPDATE locations SET flags = ?, modseq = coalesce(?, modseq) WHERE folder_id = ? AND uidvalidity IS ? AND uid = ?",
            (flags_text(flags), modseq, folder_id, uidvalidity, uid),
        )

    def remove_uids(self, folder_id: int, uidvalidity: int | None, uids: Iterable[int]) -> int:
        """Expunged on the server: drop those locations, and messages left nowhere. Returns messages deleted."""
        affected: list[int] = []
        for uid in uids:
            row = self.db.execute(
                "DELETE FROM locations WHERE folder_id = ? AND uidvalidity IS ? AND uid = ? RETURNING message",
                (folder_id, uidvalidity, uid),
            ).fetchone()
            if row:
                affected.append(row[0])
        return self._delete_orphans(affected)

    def relocate(self, folder_id: int, old_uidvalidity: int | None, old_uid: int, new_uidvalidity: int,
                 new_uid: int, flags: Iterable[str | bytes], modseq: int | None = None) -> None:
        """A message matched again after UIDVALIDITY changed: move its location, keep the message."""
        self.db.execute(
            "UPDATE locations SET uidvalidity = ?, uid = ?, flags = ?, modseq = ? "
            "WHERE folder_id = ? AND uidvalidity IS ? AND uid = ?",
            (new_uidvalidity, new_uid, flags_text(flags), modseq, folder_id, old_uidvalidity, old_uid),
        )

    def drop_stale_uidvalidity(self, folder_id: int, keep_uidvalidity: int) -> int:
        affected = [r[0] for r in self.db.execute(
            "DELETE FROM locations WHERE folder_id = ? AND uid IS NOT NULL AND uidvalidity IS NOT ? RETURNING message",
            (folder_id, keep_uidvalidity))]
        return self._delete_orphans(affected)

    # ---- read state: local changes queued for the server --------------------------------------

    def mark_read(self, message: int, read: bool = True) -> int:
        """Set or clear \\Seen on every location at once, and queue each change for the server."""
        queued = 0
        for loc in self.locations(message):
            has = SEEN in loc.flags
            if has == read:
                continue
            new = set(loc.flags) | {SEEN} if read else set(loc.flags) - {SEEN}
            self.db.execute("UPDATE locations SET flags = ? WHERE id = ?", (flags_text(new), loc.id))
            if loc.uid is not None:
                self.db.execute(
                    "INSERT INTO flag_queue(message, location, op, flag, created_at) VALUES (?, ?, ?, ?, ?)",
                    (message, loc.id, "+" if read else "-", SEEN, time.time()),
                )
                queued += 1
        return queued

    def pending_flag_changes(self, folder_id: int | None = None) -> list[FlagChange]:
        sql = ("SELECT q.id, q.message, q.location, l.folder_id, l.uidvalidity, l.uid, q.op, q.flag, l.modseq "
               "FROM flag_queue q JOIN locations l ON l.id = q.location WHERE q.state = 'pending'")
        params: tuple = ()
        if folder_id is not None:
            sql += " AND l.folder_id = ?"
            params = (folder_id,)
        return [FlagChange(*r) for r in self.db.execute(sql + " ORDER BY q.id", params)]

    def finish_flag_change(self, change_id: int, *, error: str | None = None) -> None:
        self.db.execute(
            "UPDATE flag_queue SET state = ?, error = ?, attempts = attempts + 1 WHERE id = ?",
            ("rejected" if error else "done", error, change_id),
        )

    def rejected_flag_changes(self) -> list[tuple[int, str, str, str]]:
        return [tuple(r) for r in self.db.execute(  # type: ignore[misc]
            "SELECT message, op, flag, coalesce(error, '') FROM flag_queue WHERE state = 'rejected'")]

    def drop_orphan_flag_changes(self) -> None:
        """A change whose location was expunged has nothing left to change on the server."""
        self.db.execute(
            "UPDATE flag_queue SET state = 'done', error = 'location gone' "
            "WHERE state = 'pending' AND location NOT IN (SELECT id FROM locations)"
        )

    # ---- labels and triage --------------------------------------------------------------------

    def add_label(self, message: int, label: str) -> None:
        self.meta(message)
        self.db.execute("INSERT OR IGNORE INTO labels VALUES (?, ?)", (message, label))

    def remove_label(self, message: int, label: str) -> None:
        self.db.execute("DELETE FROM labels WHERE message = ? AND label = ?", (message, label))

    def set_triage(self, message: int, *, categories: Sequence[str], category: str | None = None,
                   priority: int | None = None, disposition: str | None = None) -> Triage:
        """Write triage; only the fields given change. Values outside the vocabulary are refused."""
        if category is not None and category not in categories:
            raise TriageError(f"category {category!r}: expected one of {', '.join(categories)} ([triage] categories)")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)
                                     or not 0 <= priority <= 3):
            raise TriageError(f"priority {priority!r}: expected an integer 0-3 (3 most urgent)")
        if disposition is not None and disposition not in DISPOSITIONS:
            raise TriageError(f"disposition {disposition!r}: expected one of {', '.join(DISPOSITIONS)}")
        current = self.meta(message).triage
        new = Triage(
            category if category is not None else current.category,
            priority if priority is not None else current.priority,
            disposition if disposition is not None else current.disposition,
        )
        self.db.execute(
            "INSERT INTO triage(message, category, priority, disposition, updated_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(message) DO UPDATE SET category = excluded.category, priority = excluded.priority, "
            "disposition = excluded.disposition, updated_at = excluded.updated_at",
            (message, new.category, new.priority, new.disposition, time.time()),
        )
        return new

    # ---- status -------------------------------------------------------------------------------

    def status(self) -> dict:
        accounts: dict[str, dict] = {}
        for aid, name in self.db.execute("SELECT id, name FROM accounts ORDER BY id").fetchall():
            count, size = self.db.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM messages WHERE account_id = ?", (aid,)).fetchone()
            flagged = self.db.execute(
                "SELECT count(*) FROM messages WHERE account_id = ? AND problem IS NOT NULL", (aid,)).fetchone()[0]
            unread = self.db.execute(
                "SELECT count(*) FROM messages m WHERE account_id = ? AND NOT EXISTS (SELECT 1 FROM locations l "
                "WHERE l.message = m.id AND ' ' || l.flags || ' ' LIKE '% \\Seen %')", (aid,)).fetchone()[0]
            folders = {
                fname: {"messages": n, "uidvalidity": uv, "synced_at": synced}
                for fname, n, uv, synced in self.db.execute(
                    "SELECT f.name, count(l.id), f.uidvalidity, f.synced_at FROM folders f "
                    "LEFT JOIN locations l ON l.folder_id = f.id WHERE f.account_id = ? GROUP BY f.id ORDER BY f.name",
                    (aid,))
            }
            accounts[name] = {"messages": count, "bytes": size, "unread": unread, "flagged": flagged,
                              "folders": folders}
        pending = self.db.execute("SELECT count(*) FROM flag_queue WHERE state = 'pending'").fetchone()[0]
        rejected = self.db.execute("SELECT count(*) FROM flag_queue WHERE state = 'rejected'").fetchone()[0]
        return {
            "messages": self.message_count(),
            "accounts": accounts,
            "flag_changes": {"pending": pending, "rejected": rejected},
            "raw_db_bytes": self.path.stat().st_size + _size(str(self.path) + "-wal"),
        }

    def flagged_messages(self, limit: int = 50) -> list[tuple[int, str, str]]:
        """Messages stored with a parse problem: (id, subject, problem)."""
        return [tuple(r) for r in self.db.execute(  # type: ignore[misc]
            "SELECT id, subject, problem FROM messages WHERE problem IS NOT NULL ORDER BY id LIMIT ?", (limit,))]

    def local_sources(self, account_id: int) -> dict[str, int | None]:
        """Files an import already stored (path -> mtime), so a re-import need not read them again."""
        return {r[0]: r[1] for r in self.db.execute(
            "SELECT l.source, l.internaldate FROM locations l JOIN folders f ON f.id = l.folder_id "
            "WHERE f.account_id = ? AND l.uid IS NULL AND l.source IS NOT NULL", (account_id,))}

    # ---- sync: matching messages again without downloading them ---------------------------------

    def stale_locations(self, folder_id: int, keep_uidvalidity: int) -> list[tuple[int | None, int, str | None, int]]:
        """Locations of a folder left at another UIDVALIDITY: (uidvalidity, uid, Message-ID, size)."""
        return [tuple(r) for r in self.db.execute(  # type: ignore[misc]
            "SELECT l.uidvalidity, l.uid, m.message_id, m.size FROM locations l JOIN messages m ON m.id = l.message "
            "WHERE l.folder_id = ? AND l.uid IS NOT NULL AND l.uidvalidity IS NOT ? ORDER BY l.uid",
            (folder_id, keep_uidvalidity))]

    def location_sample(self, folder_id: int, limit: int = 10) -> list[tuple[int, str | None, int]]:
        """Up to `limit` (uid, Message-ID, size) spread over a folder: enough to recognise it renamed."""
        rows = self.db.execute(
            "SELECT l.uid, m.message_id, m.size FROM locations l JOIN messages m ON m.id = l.message "
            "WHERE l.folder_id = ? AND l.uid IS NOT NULL ORDER BY l.uid", (folder_id,)).fetchall()
        step = max(1, len(rows) // limit)
        return [tuple(r) for r in rows[::step][:limit]]  # type: ignore[misc]

    def queue_flag_change(self, location: int, op: str, flag: str) -> None:
        """Queue one flag change of one location for the server (mark_read does this for \\Seen)."""
        row = self.db.execute("SELECT message FROM locations WHERE id = ?", (location,)).fetchone()
        if not row:
            raise NotFound(f"no location {location}")
        self.db.execute(
            "INSERT INTO flag_queue(message, location, op, flag, created_at) VALUES (?, ?, ?, ?, ?)",
            (row[0], location, op, flag, time.time()),
        )

    def location_count(self, folder_id: int) -> int:
        return self.db.execute("SELECT count(*) FROM locations WHERE folder_id = ?", (folder_id,)).fetchone()[0]


class _Threads:
    """JWZ-style threading of a batch of new messages, in order, as if each were stored alone: by
    Message-ID, References and In-Reply-To, merging the threads a message joins; the subject is a
    fallback only for a reply that carries neither header. Looked up once per batch."""

    def __init__(self, store: Store, account_id: int, items: Sequence[Incoming]):
        from oaken import envelope

        self.store = store
        self.account_id = account_id
        self.bases = {subject: envelope.base_subject(subject) for subject in {it.envelope.subject for it in items}}
        self.refs = store._thread_refs(account_id, (r for it in items for r in _thread_ids(it.envelope)))
        self.subjects = store._thread_subjects(account_id, set(self.bases.values()) - {""})
        self.new_refs: list[str] = []
        self.new_subjects: list[str] = []
        self.last: int | None = None  # the thread counter, read when a new thread is needed
        self.changed = False

    def place(self, env: Envelope, rows: list[list]) -> int:
        """The thread of one more message; `rows` (messages not inserted yet) follow a merge."""
        ids = _thread_ids(env)
        has_refs = len(ids) > (1 if env.message_id else 0)
        found = {self.refs[r] for r in ids if r in self.refs}
        base = self.bases[env.subject]
        if not found and not has_refs and base and base != env.subject.strip().lower() and base in self.subjects:
            found.add(self.subjects[base])
        if found:
            thread = min(found)
            for other in sorted(found - {thread}):
                self.store._merge_thread(thread, other)
                for table in (self.refs, self.subjects):
                    for k, v in table.items():
                        if v == other:
                            table[k] = thread
                for row in rows:
                    if row[_THREAD_COLUMN] == other:
                        row[_THREAD_COLUMN] = thread
        else:
            self.last = (self.store._last_thread() if self.last is None else self.last) + 1
            self.changed = True
            thread = self.last
        for ref in ids:
            if ref not in self.refs:
                self.refs[ref] = thread
                self.new_refs.append(ref)
        if base and base not in self.subjects:
            self.subjects[base] = thread
            self.new_subjects.append(base)
        return thread

    def save(self) -> None:
        self.store._save_threads(self.account_id, self.last if self.changed else None,
                                 [(r, self.refs[r]) for r in self.new_refs],
                                 [(s, self.subjects[s]) for s in self.new_subjects])


_THREAD_COLUMN = 14  # thread_id's place in add_messages' rows


def _thread_ids(env: Envelope) -> list[str]:
    """The Message-ID, then References and In-Reply-To: the ids that tie a message to a thread."""
    return ([env.message_id] if env.message_id else []) + [r for r in (*env.references, *env.in_reply_to) if r]


def _json_list(values: Iterable[object]) -> str:
    """A list bound as one parameter and read back by json_each: one query for a whole batch."""
    import json  # here: a search, which opens raw.db too, never needs it

    return json.dumps(list(values))


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def open_store(data_dir: Path, *, readonly: bool = False) -> Store:
    return Store(data_dir / "raw.db", readonly=readonly)


__all__ = ["Store", "open_store", "AddResult", "Incoming", "MessageMeta", "Folder", "Location", "Triage", "Change",
           "FlagChange", "flags_text"]
