"""Sync every folder of one account: list the server's folders with their STATUS in one round
trip, mirror renamed, deleted and replaced folders (renames.py), skip the unchanged ones
(selection.py), and sync the rest (folder.py).

`sync()` is `oaken.sync()` and `oaken sync --once`; the daemon keeps an `AccountSync` open so that
a cycle with nothing new costs one LIST-STATUS on a live connection. INBOX is synced first (and
each folder newest first, oaken/sync/folder.py): the mail a user looks for first comes first. A
pass that finds every folder unchanged never imports the download machinery (folder.py and what
it needs): a cold `oaken sync` with nothing new is mostly the interpreter's start.

With `[log] level = "debug"` each pass logs where its wall time went ("sync timing": opening the
store, connecting, LIST, then the folders' time by what the storing thread waited on), from a few
perf_counter calls per batch.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterable

from imapclient import IMAPClient

from oaken import config as config_mod
from oaken import log
from oaken.config import AccountConfig, Config
from oaken.errors import SyncError
from oaken.store import Store, open_store
from oaken.sync.header_workers import HeaderReaders
from oaken.sync.imap import TRANSIENT, Connection, ConnectionLost, ServerFolder, connect
from oaken.sync.renames import mirror_folder_changes
from oaken.sync.reports import TIMERS, FolderReport, OnBatch, SyncReport
from oaken.sync.selection import account_config, assumed_uses, unchanged, wanted


class AccountSync:
    """A connection and a store for one account, kept open across cycles by the daemon."""

    def __init__(self, config: Config, account: AccountConfig, *, store: Store | None = None):
        t0 = time.perf_counter()
        self.config = config
        self.account = account
        self.store = store or open_store(config_mod.ensure_data_dir(config))
        self._own_store = store is None
        self.account_id = self.store.ensure_account(account.name)
        self.conn: Connection | None = None
        self.log = log.get("oaken.sync").bind(account=account.name)
        self._opened = time.perf_counter() - t0  # reported by the first pass's "sync timing"

    def connect(self) -> Connection:
        if self.conn is None:
            self.conn = connect(self.account)
        return self.conn

    def drop_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def close(self) -> None:
        self.drop_connection()
        if self._own_store:
            self.store.close()

    def run(
        self,
        *,
        only: Iterable[str] | None = None,
        progress: Any = None,
        on_batch: OnBatch | None = None,
        stop: threading.Event | None = None,
    ) -> SyncReport:
        """One pass over the account's folders (or just `only`). A lost link raises ConnectionLost
        after closing the connection; everything committed so far stays. `progress(n)` is called per
        stored batch; if it has `set_total(n)`, that is called first with the messages expected."""
        t0 = time.perf_counter()
        readers = HeaderReaders()  # one header worker for the pass's folders, forked when first needed
        try:
            return self._run(set(only) if only is not None else None, progress, on_batch, stop, t0, readers)
        except ConnectionLost:
            self.drop_connection()
            raise
        except TRANSIENT as e:
            self.drop_connection()
            raise ConnectionLost(
                f"[accounts.{self.account.name}] {self.account.host}: connection lost "
                f"({type(e).__name__}: {e}); what was stored is kept"
            ) from None
        except IMAPClient.Error as e:  # the server refused a command outside any one folder (LIST)
            self.drop_connection()
            raise ConnectionLost(
                f"[accounts.{self.account.name}] {self.account.host}: the server refused "
                f"a command ({e}); what was stored is kept"
            ) from None
        finally:
            readers.close()

    def _run(
        self,
        only: set[str] | None,
        progress: Any,
        on_batch: OnBatch | None,
        stop: threading.Event | None,
        t0: float,
        readers: HeaderReaders,
    ) -> SyncReport:
        timing = {
            "open": self._opened,
            **dict.fromkeys(("connect", "list", "folder_rows", "folder", *TIMERS, "end"), 0.0),
        }
        self._opened = 0.0
        conn = self.connect()
        t1 = time.perf_counter()
        timing["connect"] = t1 - t0
        server = conn.list_folders()
        # INBOX first, the rest in the server's order: a first sync stores the mail looked for first
        assumed = assumed_uses(server)
        selected = sorted(
            (f for f in server if wanted(f, self.account, assumed)), key=lambda f: f.name.upper() != "INBOX"
        )
        renamed, deleted = mirror_folder_changes(conn, self.store, self.account_id, server, selected, self.log)
        if only is not None:
            selected = [f for f in selected if f.name in only]
        timing["list"] = time.perf_counter() - t1
        if progress is not None and hasattr(progress, "set_total"):
            progress.set_total(self._expected_downloads(selected))
        reports: list[FolderReport] = []
        complete = True
        for sf in selected:
            if stop is not None and stop.is_set():
                complete = False
                break
            t1 = time.perf_counter()
            with self.store.transaction():
                local = self.store.ensure_folder(
                    self.account_id,
                    sf.name,
                    delimiter=sf.delimiter,
                    special_use=sf.special_use,
                    mailbox_id=sf.mailbox_id,
                )
            skip = unchanged(local, sf) and not self.store.pending_flag_changes(local.id)
            timing["folder_rows"] += time.perf_counter() - t1
            if skip:
                reports.append(FolderReport(sf.name, skipped=True))
                continue
            from oaken.sync.folder import FolderSync  # only when a folder has changed

            folder_sync = FolderSync(
                conn,
                self.store,
                self.account_id,
                local,
                batch_size=self.account.batch_size,
                progress=progress,
                on_batch=on_batch,
                stop=stop,
                readers=readers,
            )
            try:
                report = folder_sync.run()
            except IMAPClient.AbortError:
                raise
            except IMAPClient.Error as e:  # this folder only (deleted meanwhile, refused): the rest go on
                self.log.error("folder failed", folder=sf.name, error=str(e))
                complete = False
                continue
            finally:
                for key in (*TIMERS, "folder"):
                    timing[key] += folder_sync.timing[key]
            complete = complete and report.complete
            reports.append(report)
            self.log.info(
                "folder synced",
                folder=sf.name,
                new=report.new,
                matched=report.matched,
                flags=report.flags,
                expunged=report.expunged,
                pushed=report.pushed,
                rejected=report.rejected,
                uidvalidity_changed=report.uidvalidity_changed,
                bytes=report.bytes,
                seconds=report.seconds,
            )
        t1 = time.perf_counter()
        readers.close()
        if complete and only is None:
            # every folder was seen: a message no folder holds now has gone from the account
            with self.store.transaction():
                swept = self.store.sweep_orphans(self.account_id)
            if swept:
                self.log.info("messages gone from every folder deleted", messages=swept)
        rejected = tuple(self.store.rejected_flag_changes())
        end = time.perf_counter()
        timing["end"] = end - t1
        timing["total"] = end - t0 + timing["open"]
        self.log.debug("sync timing", folders=len(selected), **{k: round(v, 4) for k, v in timing.items()})
        return SyncReport(
            self.account.name, tuple(reports), tuple(renamed), tuple(deleted), rejected, complete, round(end - t0, 4)
        )

    def _expected_downloads(self, selected: list[ServerFolder]) -> int:
        """The messages a first sync of these folders downloads (0 for incremental syncs): a new
        folder's, and what an interrupted newest-first pass left to get of a folder's first sync."""
        total = 0
        for sf in selected:
            st = sf.status
            if not st or not st.messages:
                continue
            local = self.store.folder(self.account_id, sf.name)
            if local is None or local.uidvalidity is None:
                total += st.messages
            elif local.uidvalidity == st.uidvalidity and (local.uidnext or 1) == 1:
                # a first sync cut short: its newest batches are stored, UIDNEXT waits at 1
                total += max(0, st.messages - self.store.location_count(local.id))
        return total


def sync(
    config: Config | None = None,
    account: str | None = None,
    progress: Any = None,
    *,
    stop: threading.Event | None = None,
    on_batch: OnBatch | None = None,
) -> SyncReport:
    """Mirror one account's folders into raw.db once (`oaken sync --once`)."""
    cfg = config if config is not None else config_mod.load()
    acc = account_config(cfg, account)
    runner = AccountSync(cfg, acc)
    try:
        return runner.run(progress=progress, on_batch=on_batch, stop=stop)
    finally:
        runner.close()


__all__ = [
    "sync",
    "SyncReport",
    "FolderReport",
    "AccountSync",
    "account_config",
    "wanted",
    "unchanged",
    "SyncError",
    "ConnectionLost",
]
