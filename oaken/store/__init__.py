"""raw.db: the source of truth. Every SQL statement against raw.db lives in this package, one
module per part of it: the schema (migrations.py), accounts and folders, messages and the threads
they are stored in, metadata reads, locations, the flag queue, labels and triage, status.

Raw RFC 822 bytes, where each message lives (folder, UIDVALIDITY, UID) with its flags, labels,
threads, triage and the queue of local flag changes. The indexes downstream follow `change_seq`
(feed.py): every change to a message (a new location, a flag, a label, triage) bumps it, and a
deleted message leaves a tombstone, so an indexer never has to diff the whole store.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import apsw

from oaken.errors import StoreError
from oaken.store.flag_queue import FlagQueue
from oaken.store.folders import Folders
from oaken.store.locations import Locations
from oaken.store.messages import Messages
from oaken.store.metadata import Metadata
from oaken.store.migrations import MIGRATIONS
from oaken.store.records import (FLAGGED, SEEN, AddResult, Change, FlagChange, Folder, Incoming, Location,
                                 MessageMeta, Triage, flags_text)
from oaken.store.status import Status
from oaken.store.triage import LabelsAndTriage

PAGE_SIZE = 16384  # for a new raw.db; one made before keeps its own


class Store(Folders, Status, Messages, LabelsAndTriage, Metadata, FlagQueue, Locations):
    """An open raw.db. Not thread-safe: one Store per thread (apsw connections are cheap).
    Its methods come from one class per part of raw.db (oaken/store/*.py), all over one connection."""

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


def open_store(data_dir: Path, *, readonly: bool = False) -> Store:
    return Store(data_dir / "raw.db", readonly=readonly)


__all__ = ["Store", "open_store", "AddResult", "Incoming", "MessageMeta", "Folder", "Location", "Triage", "Change",
           "FlagChange", "flags_text", "MIGRATIONS", "PAGE_SIZE", "SEEN", "FLAGGED"]
