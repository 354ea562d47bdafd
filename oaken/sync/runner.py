"""Sync every folder of one account: list the server's folders with their STATUS in one round
trip, mirror renamed, deleted and replaced folders, skip the unchanged ones, and sync the rest.

A folder is known by its mailbox, not its name. Where the server names mailboxes for good (RFC 8474
MAILBOXID, or Dovecot's X-GUID; asked in the same LIST-STATUS or STATUS, see oaken/sync/imap.py),
the same id under a new name is a rename and another id under a known name is a new folder (the
old one is dropped, even when the same messages were put back). Elsewhere a folder gone from LIST
is recognised under a new name with the same UIDVALIDITY by a sample of its messages spread from
the oldest to the newest: enough of them still at their UIDs with the same Message-ID and size,
and none replaced by another message.

`sync()` is `oaken.sync()` and `oaken sync --once`; the daemon keeps an `AccountSync` open so that
a cycle with nothing new costs one LIST-STATUS on a live connection. INBOX is synced first (and
each folder newest first, oaken/sync/folder.py): the mail a user looks for first comes first.

With `[log] level = "debug"` each pass logs where its wall time went ("sync timing": opening the
store, connecting, LIST, then the folders' time by what the storing thread waited on), from a few
perf_counter calls per batch.
"""

from __future__ import annotations

import fnmatch
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable

from imapclient import IMAPClient

from oaken import config as config_mod
from oaken import envelope, log
from oaken.config import AccountConfig, Config
from oaken.errors import ConfigError, SyncError
from oaken.store import Folder, Store, open_store
from oaken.sync.folder import TIMERS, FolderReport, FolderSync, HeaderReaders, OnBatch
from oaken.sync.imap import TRANSIENT, Connection, ConnectionLost, ServerFolder, connect

DEFAULT_EXCLUDED_USES = ("\\junk", "\\trash")
# without mailbox ids: a folder under a new name is the old one when at least this share of a
# sample of the old one's messages is still there (the rest expunged meanwhile)
RENAME_SHARE = 0.5
RENAME_SAMPLE = 20
_SAMPLE_ITEMS = b"UID RFC822.SIZE BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"


@dataclass(frozen=True)
class SyncReport:
    account: str
    folders: tuple[FolderReport, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    deleted: tuple[str, ...] = ()
    rejected_flag_changes: tuple[tuple[int, str, str, str], ...] = ()  # (message, op, flag, error)
    complete: bool = True
    seconds: float = 0.0

    @property
    def new(self) -> int:
        return sum(f.new for f in self.folders)

    @property
    def changed(self) -> bool:
        return bool(
            self.renamed
            or self.deleted
            or any(f.new or f.matched or f.flags or f.expunged or f.pushed for f in self.folders)
        )

    @property
    def skipped(self) -> int:
        return sum(f.skipped for f in self.folders)


def account_config(config: Config, account: str | None) -> AccountConfig:
    name = config.account(account)
    if not config.accounts:
        raise ConfigError(
            f"{config.source or config_mod.config_path()}: no [accounts.NAME] table; "
            "`oaken init --host ... --username ...` writes one"
        )
    if name is None:
        raise ConfigError(
            f"{config.source}: several accounts ({', '.join(config.accounts)}); "
            "pass --account NAME or set default_account"
        )
    if name not in config.accounts:
        raise ConfigError(f"{config.source}: no account {name!r} (accounts: {', '.join(config.accounts)})")
    return config.accounts[name]


def wanted(folder: ServerFolder, account: AccountConfig) -> bool:
    """Every subscribed folder but \\Junk and \\Trash, narrowed by `folders` and `exclude`;
    a special-use folder is synced only when a pattern names it exactly."""
    if not folder.selectable or not folder.subscribed:
        return False
    name = folder.name
    if any(fnmatch.fnmatchcase(name, p) for p in account.exclude):
        return False
    if (folder.special_use or "").lower() in DEFAULT_EXCLUDED_USES:
        return name in account.folders
    return any(
        fnmatch.fnmatchcase(name, p) or (p.upper() == "INBOX" and name.upper() == "INBOX") for p in account.folders
    )


def unchanged(local: Folder, server: ServerFolder) -> bool:
    """STATUS says nothing happened since our state: same UIDVALIDITY, UIDNEXT and HIGHESTMODSEQ.
    Without CONDSTORE a flag change is invisible to STATUS, so such a folder is never skipped."""
    st = server.status
    if st is None or st.highestmodseq is None or local.uidvalidity is None:
        return False
    return (
        st.uidvalidity == local.uidvalidity
        and st.uidnext == local.uidnext
        and st.highestmodseq == local.highestmodseq
        and st.messages == local.exists_count
    )


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
        selected = sorted((f for f in server if wanted(f, self.account)), key=lambda f: f.name.upper() != "INBOX")
        renamed, deleted = self._mirror_folder_changes(conn, server, selected)
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

    # ---- renamed, deleted and replaced folders ---------------------------------------------------

    def _mirror_folder_changes(
        self, conn: Connection, server: list[ServerFolder], selected: list[ServerFolder]
    ) -> tuple[list[tuple[str, str]], list[str]]:
        """Before any folder is synced: each mirrored folder whose mailbox left its name is found
        under its new name (renamed: its messages, ids and triage kept, nothing downloaded) or
        dropped (deleted on the server: its messages go, unless another folder holds them too)."""
        local = {f.name: f for f in self.store.folders(self.account_id)}
        listed = {sf.name: sf for sf in server}
        gone: list[Folder] = []  # the name is gone, or holds another mailbox: dropped unless found elsewhere
        unsure: list[Folder] = []  # same name, new UIDVALIDITY, no ids to tell: moved away, or renumbered
        for f in local.values():
            if f.uidvalidity is None:  # only folders this sync mirrored; imported ones are not the server's
                continue
            sf = listed.get(f.name)
            if sf is None:
                gone.append(f)
            elif f.mailbox_id and sf.mailbox_id:
                if sf.mailbox_id != f.mailbox_id:
                    gone.append(f)  # deleted and made again under the same name (or another renamed onto it)
            elif sf.status is not None and sf.status.uidvalidity not in (None, f.uidvalidity):
                unsure.append(f)
        if not gone and not unsure:
            return [], []
        vacated = {f.name for f in gone + unsure}
        candidates = [
            sf for sf in selected if sf.name not in local or local[sf.name].uidvalidity is None or sf.name in vacated
        ]
        pairs: list[tuple[float, Folder, ServerFolder]] = []
        for old in gone + unsure:
            for sf in candidates:
                if sf.name != old.name and (score := self._same_mailbox(conn, old, sf)) is not None:
                    pairs.append((score, old, sf))
        pairs.sort(key=lambda p: -p[0])
        moves: dict[int, tuple[Folder, ServerFolder]] = {}
        taken: set[str] = set()
        for _score, old, sf in pairs:
            if old.id not in moves and sf.name not in taken:
                moves[old.id] = (old, sf)
                taken.add(sf.name)
        # an unsure folder not found elsewhere stays: its server renumbered it, and FolderSync matches
        # its messages again; unless the mailbox of another folder now holds its name
        drop = [f for f in gone if f.id not in moves] + [f for f in unsure if f.id not in moves and f.name in taken]
        renamed: list[tuple[str, str]] = []
        deleted: list[str] = []
        with self.store.transaction():
            for old, _sf in moves.values():  # out of the way first: two folders may trade names
                self.store.rename_folder(old.id, f"\x00renaming {old.id}", bump=False)
            for f in drop:
                self.store.delete_folder(f.id, defer=True)  # its messages go at the end of the pass
                deleted.append(f.name)
                self.log.info("folder deleted", folder=f.name, name_reused=f.name in listed)
            if drop:
                self.store.drop_orphan_flag_changes()
            for old, sf in moves.values():
                placeholder = self.store.folder(self.account_id, sf.name)
                if placeholder is not None:  # an empty entry made by an interrupted pass
                    self.store.delete_folder(placeholder.id, defer=True)
                self.store.rename_folder(old.id, sf.name)
                renamed.append((old.name, sf.name))
                self.log.info(
                    "folder renamed",
                    old=old.name,
                    new=sf.name,
                    by="mailbox id" if old.mailbox_id and sf.mailbox_id else "sampled messages",
                )
        return renamed, deleted

    def _same_mailbox(self, conn: Connection, old: Folder, new: ServerFolder) -> float | None:
        """How surely `new` is `old`'s mailbox under another name, or None if it is not: 1.0 by
        the server's mailbox ids when both are known; else the share of a sample of `old`'s messages
        (spread from its oldest to its newest) found in `new` at the same UIDs with the same
        Message-ID and size, if at least RENAME_SHARE. A renamed mailbox keeps its UIDVALIDITY and
        UIDs; one sampled UID holding another message, or a UIDNEXT behind ours, is another mailbox."""
        if old.mailbox_id and new.mailbox_id:
            return 1.0 if old.mailbox_id == new.mailbox_id else None
        st = new.status
        if st is None or st.uidvalidity is None or st.uidvalidity != old.uidvalidity:
            return None
        if st.uidnext is not None and old.uidnext is not None and st.uidnext < old.uidnext:
            return None  # UIDs only grow: this mailbox never had the UIDs we stored
        sample = self.store.identity_sample(old.id, old.uidvalidity, RENAME_SAMPLE)
        if not sample:
            return 1.0 if not st.messages else None
        try:
            conn.select(new.name, readonly=True)
            fetched = conn.fetch([u for u, _m, _s in sample], _SAMPLE_ITEMS)
        except IMAPClient.AbortError:
            raise
        except IMAPClient.Error as e:  # gone again meanwhile, or refused: not a rename we can tell
            self.log.warning("cannot compare folders", old=old.name, new=new.name, error=str(e))
            return None
        found = 0
        for uid, message_id, size in sample:
            item = fetched.get(uid)
            if item is None:
                continue  # expunged meanwhile: says nothing either way
            header = next((v for k, v in item.items() if k.startswith(b"BODY[HEADER")), b"") or b""
            ids = envelope.message_ids(bytes(header).decode("utf-8", "replace"))
            if int(item.get(b"RFC822.SIZE", -1)) != size or (ids[0] if ids else None) != message_id:
                return None
            found += 1
        share = found / len(sample)
        return share if share >= RENAME_SHARE else None


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


__all__ = ["sync", "SyncReport", "AccountSync", "account_config", "wanted", "unchanged", "SyncError", "ConnectionLost"]
