"""raw.db: the source of truth. Every SQL statement against raw.db lives in this package, one
module per part of it: the schema (migrations.py), accounts and folders, messages and the threads
they are stored in, metadata reads, locations, the flag queue, labels and triage; here, Store
itself: opening, migrating and checking raw.db, and what it holds in all (`oaken status`).

Raw RFC 822 bytes, where each message lives (folder, UIDVALIDITY, UID) with its flags, labels,
threads, triage and the queue of local flag changes. The indexes downstream follow `change_seq`
(feed.py): every change to a message (a new location, a flag, a label, triage) bumps it, and a
deleted message leaves a tombstone, so an indexer never has to diff the whole store.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import apsw

from oaken.errors import StoreError
from oaken.sqlite_rows import one_value
from oaken.store.flag_queue import FlagQueue
from oaken.store.folders import Folders
from oaken.store.locations import Locations
from oaken.store.messages import Messages
from oaken.store.metadata import Metadata
from oaken.store.records import (
    FLAGGED,
    SEEN,
    AddResult,
    Change,
    FlagChange,
    Folder,
    Incoming,
    Location,
    MessageMeta,
    Triage,
    flags_text,
)
from oaken.store.search_reads import SearchReads
from oaken.store.triage import LabelsAndTriage

PAGE_SIZE = 16384  # for a new raw.db; one made before keeps its own


class Store(Folders, Messages, LabelsAndTriage, Metadata, FlagQueue, Locations, SearchReads):
    """An open raw.db. Not thread-safe: one Store per thread (apsw connections are cheap).
    Its methods come from one class per part of raw.db (oaken/store/*.py), all over one connection."""

    def __init__(self, path: str | Path, *, readonly: bool = False, create: bool = True):
        """`create=False`: a command that only reads or changes mail already there (`oaken show`)
        refuses a missing raw.db instead of making an empty one."""
        self.path = Path(path)
        self.readonly = readonly
        flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        new = not self.path.exists()
        if (readonly or not create) and new:
            raise StoreError(no_mail(self.path))
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
                self._wal()
                self.db.execute("PRAGMA synchronous=NORMAL")
                # statement journals (an INSERT with triggers keeps one) in memory, not a temp file
                # written 4 bytes and a page at a time: a third of a first sync's system time
                self.db.execute("PRAGMA temp_store=MEMORY")
            self.db.execute("PRAGMA foreign_keys=ON")
            if not readonly:
                self._migrate()
            else:
                self._upgrade_if_old()
        except apsw.Error as e:
            error = failure(self.path, e, reading=readonly)
            raise (error or StoreError(f"{self.path}: cannot open raw.db: {e}")) from None
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists() and not readonly:
                os.chmod(p, 0o600)

    def _wal(self) -> None:
        """WAL mode, once per file. Switching takes an exclusive lock and SQLite answers BUSY at
        once, without the busy timeout, when another process opens the new file at that moment
        (the daemon's first start beside an `oaken import`): retried within the same 30 s."""
        deadline = time.monotonic() + 30
        while True:
            try:
                if str(one_value(self.db, "PRAGMA journal_mode")).lower() != "wal":
                    self.db.execute("PRAGMA journal_mode=WAL")
                return
            except apsw.BusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self) -> None:
        from oaken.store.migrations import MIGRATIONS  # here: a read-only store (a search) never migrates

        if one_value(self.db, "PRAGMA user_version") == len(MIGRATIONS):
            return  # up to date: no write lock taken
        # One step a transaction, the version read inside it under the write lock: two processes
        # opening a new raw.db at once (the daemon's first start and an `oaken import`) both read
        # version 0 outside it, and the second failed on "table meta already exists".
        while True:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                version = one_value(self.db, "PRAGMA user_version")
                if version > len(MIGRATIONS):
                    raise StoreError(
                        f"{self.path}: made by a newer Oaken (schema {version}, this one knows "
                        f"{len(MIGRATIONS)}); upgrade Oaken"
                    )
                if version == len(MIGRATIONS):
                    self.db.execute("COMMIT")
                    return
                self.db.execute(MIGRATIONS[version][1])
                self.db.execute(f"PRAGMA user_version={version + 1}")
                self.db.execute("COMMIT")
            except BaseException:
                if not self.db.getautocommit():
                    self.db.execute("ROLLBACK")
                raise

    def _upgrade_if_old(self) -> None:
        """A reader of a raw.db an older Oaken made (a search right after an upgrade) would meet
        tables and columns it lacks: it is brought up to date once, as the first writer would."""
        from oaken.store.migrations import MIGRATIONS

        version = one_value(self.db, "PRAGMA user_version")
        if version >= len(MIGRATIONS):
            return
        if version == 0:  # not an older Oaken's: a raw.db another process is creating right now
            raise StoreError(no_mail(self.path))
        try:
            Store(self.path).close()  # read-write: migrates, in its own transactions
        except StoreError as e:
            raise StoreError(
                f"{self.path}: made by an older Oaken (schema {version} of {len(MIGRATIONS)}) and "
                f"could not be upgraded ({e}); run `oaken reindex` as the owner of the file"
            ) from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.close()
        # damage is said with raw.db's path to every caller; a busy or full raw.db stays an
        # apsw error here, for callers that wait and retry (the CLI words those too)
        error = store_error(exc) if isinstance(exc, DAMAGE) else None
        if error is not None:
            raise error from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One batch: all of it lands or none of it (a kill mid-batch loses only the batch).

        On a full disk SQLite rolls the transaction back itself, and the rollback on the way out
        then fails ("cannot rollback - no transaction is active"), hiding the cause: the cause
        is raised instead (the batch is gone either way, and raw.db is as before it)."""
        try:
            with self.db:
                yield
        except apsw.SQLError as e:
            cause = e.__context__
            if isinstance(cause, apsw.Error) and not self.db.in_transaction:
                raise cause from None
            raise

    def integrity_check(self) -> str:
        return one_value(self.db, "PRAGMA integrity_check")

    # ---- what raw.db holds, for `oaken status` ------------------------------------------------

    def status(self) -> dict:
        accounts: dict[str, dict] = {}
        # every figure from a counter or an index: status costs the same at a million messages
        for aid, name, count, size in self.db.execute(
            "SELECT a.id, a.name, coalesce(t.messages, 0), coalesce(t.bytes, 0) FROM accounts a "
            "LEFT JOIN account_totals t ON t.account_id = a.id ORDER BY a.id"
        ):
            with_problems = one_value(
                self.db,
                # the partial index holds the few problem messages; the planner would walk the account's
                "SELECT count(*) FROM messages INDEXED BY messages_problem WHERE problem IS NOT NULL AND account_id = ?",
                (aid,),
            )
            unread = one_value(self.db, "SELECT count(*) FROM unread WHERE account_id = ?", (aid,))
            folders = {
                fname: {"messages": n, "uidvalidity": uv, "synced_at": synced}
                for fname, n, uv, synced in self.db.execute(
                    "SELECT name, locations, uidvalidity, synced_at FROM folders WHERE account_id = ? ORDER BY name",
                    (aid,),
                )
            }
            accounts[name] = {
                "messages": count,
                "bytes": size,
                "unread": unread,
                "with_problems": with_problems,
                "folders": folders,
            }
        pending = one_value(self.db, "SELECT count(*) FROM flag_queue WHERE state = 'pending'")
        rejected = one_value(self.db, "SELECT count(*) FROM flag_queue WHERE state = 'rejected'")
        return {
            "messages": self.message_count(),
            "accounts": accounts,
            "flag_changes": {"pending": pending, "rejected": rejected},
            "raw_db_bytes": self.path.stat().st_size + _size(str(self.path) + "-wal"),
        }

    def problem_messages(self, limit: int = 50) -> list[tuple[int, str, str]]:
        """Messages stored with a parse problem: (id, subject, problem)."""
        return [
            tuple(r)
            for r in self.db.execute(
                "SELECT id, subject, problem FROM messages WHERE problem IS NOT NULL ORDER BY id LIMIT ?", (limit,)
            )
        ]


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def open_store(data_dir: Path, *, readonly: bool = False, create: bool = True) -> Store:
    return Store(data_dir / "raw.db", readonly=readonly, create=create)


# ---- a damaged or missing raw.db, said in one line ---------------------------------------------

# what SQLite raises when the file's bytes are wrong, not when it is busy or the query is
DAMAGE = (apsw.CorruptError, apsw.NotADBError)


def no_mail(path: Path) -> str:
    return f"{path}: no mail yet: run `oaken sync` or `oaken import`"


def damaged(path: Path, e: BaseException) -> StoreError:
    return StoreError(
        f"{path}: cannot be read ({e}); restore it from a backup, or sync or import again into a new data directory"
    )


def disk_full(path: Path, *, reading: bool = False) -> StoreError:
    """SQLITE_FULL said as what it is: the disk holding `path`, its free space, what to do. A reader
    meets it too: WAL mode must grow raw.db's -shm file to read."""
    from oaken import diskspace

    if reading:
        return StoreError(
            diskspace.full_message(
                path, fix="run the command again (SQLite needs a little room even to read raw.db; it is not damaged)"
            )
        )
    return StoreError(
        diskspace.full_message(
            path,
            fix="run the command again: it goes on where it stopped (nothing of the last batch was written; "
            "a batch needs a few times its messages' size)",
        )
    )


def failure(path: Path, exc: BaseException, *, reading: bool = False) -> StoreError | None:
    """SQLite failing on raw.db at `path`, said as what happened and what to do; None for an error
    that is not about the file (a bug, a busy database is the caller's to retry)."""
    from oaken import diskspace

    if isinstance(exc, DAMAGE):
        return damaged(path, exc)
    if diskspace.is_full(exc, path):
        return disk_full(path, reading=reading)
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        return StoreError(f"{path}: {exc}: another Oaken process kept it busy; run the command again")
    if isinstance(exc, (apsw.IOError, apsw.ReadOnlyError, apsw.PermissionsError, apsw.CantOpenError)):
        return StoreError(f"{path}: {exc}; check the file's permissions and the disk it is on")
    return None


def store_error(exc: BaseException) -> StoreError | None:
    """`exc` said as a StoreError naming raw.db and what to do, when it is SQLite failing on raw.db;
    else None.

    A page can be damaged anywhere in the file, so the fault shows up in whichever query reads it,
    not when raw.db is opened. Every raw.db query runs in a Store method, so the Store whose method
    raised it is in the traceback, and with it the path; a fault in another SQLite file (index.db)
    has no Store there and is left to its owner."""
    if not isinstance(exc, apsw.Error):
        return None
    store = None
    tb = exc.__traceback__
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if isinstance(candidate, Store):
            store = candidate  # the innermost one
        tb = tb.tb_next
    if store is None:
        return None
    return failure(store.path, exc, reading=store.readonly)


__all__ = [
    "Store",
    "open_store",
    "store_error",
    "failure",
    "disk_full",
    "no_mail",
    "DAMAGE",
    "AddResult",
    "Incoming",
    "MessageMeta",
    "Folder",
    "Location",
    "Triage",
    "Change",
    "FlagChange",
    "flags_text",
    "PAGE_SIZE",
    "SEEN",
    "FLAGGED",
]
