"""One folder's sync: push queued flag changes, then pull what changed on the server, then
download the new mail.

The folder state (UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ) is written in the same transaction as the
messages it accounts for, so a kill at any moment resumes exactly: UIDNEXT only ever means "every
UID below this is stored", and HIGHESTMODSEQ is the one SELECT reported before anything was read,
so a change made while we fetch is seen again next time rather than missed.

New mail is downloaded newest first (the highest UIDs first, the first batch small), so that the
mail a user looks for first is stored, and searchable behind the daemon, within a second or two of
a first sync's start. UIDNEXT stays where it was until the oldest batch is stored; the messages
stored above it by an interrupted pass are known by their locations: the next pass takes their
flag changes and expunges like any stored message's and downloads only the rest.

The steps before the download have modules of their own: flag_push.py (local changes first, so
the pull never reverts them), server_changes.py (expunges and flag changes of stored messages),
rematch.py (a changed UIDVALIDITY); header_workers.py is the pass's header worker process.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # imported when a download needs them: a sync with nothing new must start fast
    from concurrent.futures import Executor, Future

from oaken import crashpoints, envelope, log
from oaken.store import Folder, Incoming, Store
from oaken.sync.fetcher import BatchFetcher, body_of
from oaken.sync.flag_push import FlagState, push_flag_changes
from oaken.sync.header_workers import HeaderReaders
from oaken.sync.imap import Connection, Selected
from oaken.sync.imap_syntax import flag_names, internaldate, modseq_of
from oaken.sync.pending_flags import pending_overlay, with_pending
from oaken.sync.rematch import rematch
from oaken.sync.reports import TIMERS, FolderReport, OnBatch, Progress
from oaken.sync.server_changes import pull_changes

FIRST_BATCH = 100  # a download's first (newest) batch: small, so the newest mail is stored at once
WORKER_SECONDS = 15.0  # a batch's headers take the worker milliseconds; past this it is stuck


class FolderSync:
    """Brings one folder of raw.db in line with the server over an open connection."""

    def __init__(
        self,
        conn: Connection,
        store: Store,
        account_id: int,
        folder: Folder,
        *,
        batch_size: int = 500,
        progress: Progress | None = None,
        on_batch: OnBatch | None = None,
        stop: threading.Event | None = None,
        readers: HeaderReaders | None = None,
    ):
        self.conn = conn
        self.readers = readers  # the pass's header worker (runner.py); None: one of its own per download
        self.store = store
        self.account_id = account_id
        self.folder = folder
        self.batch_size = max(1, batch_size)
        self.progress = progress
        self.on_batch = on_batch
        self.stop = stop
        self.counts = {"new": 0, "matched": 0, "flags": 0, "expunged": 0, "pushed": 0, "rejected": 0, "bytes": 0}
        self.complete = True
        self.worker_failed = False  # then batches are read here, and the worker is killed at the end
        self.pushed: dict[int, FlagState] = {}  # uid -> flags the server has now
        self.log = log.get("oaken.sync").bind(folder=folder.name)
        # wall seconds of this thread by what it waited on (a few perf_counter calls per batch; the
        # runner logs their sums on a debug line, "sync timing")
        self.timing = dict.fromkeys((*TIMERS, "folder"), 0.0)

    def run(self) -> FolderReport:
        t0 = time.perf_counter()
        f = self.folder
        resync = (f.uidvalidity, f.highestmodseq) if f.uidvalidity and f.highestmodseq else None
        sel = self.conn.select(f.name, qresync=resync)
        pushed = push_flag_changes(self.conn, self.store, f, sel, self.log)
        self.counts["pushed"] += pushed.pushed
        self.counts["rejected"] += pushed.rejected
        self.pushed = pushed.flags
        changed_uv = f.uidvalidity is not None and f.uidvalidity != sel.uidvalidity
        stored: set[int] = set()  # UIDs at or above `start` stored by an interrupted newest-first pass
        if changed_uv:
            self.log.warning("uidvalidity changed", old=f.uidvalidity, new=sel.uidvalidity)
            matched = rematch(self.conn, self.store, f, sel, lambda uids: self._download_rest(sel, uids))
            self.counts["matched"] += matched.matched
            self.counts["expunged"] += matched.expunged
            start = matched.start
        elif f.uidvalidity is None:
            start = 1
        else:
            start = f.uidnext or 1
            changes = pull_changes(self.conn, self.store, f, sel, start, self.pushed)
            self.counts["expunged"] += changes.expunged
            self.counts["flags"] += changes.flags
            stored = changes.stored_above
        self.timing["select"] += time.perf_counter() - t0
        if self.complete:
            self._pull_new(sel, start, stored)
        self.timing["folder"] = time.perf_counter() - t0
        self.log.debug("folder timing", **{k: round(v, 4) for k, v in self.timing.items()})
        c = self.counts
        return FolderReport(
            f.name,
            new=c["new"],
            matched=c["matched"],
            flags=c["flags"],
            expunged=c["expunged"],
            pushed=c["pushed"],
            rejected=c["rejected"],
            uidvalidity_changed=changed_uv,
            complete=self.complete,
            bytes=c["bytes"],
            seconds=round(time.perf_counter() - t0, 4),
        )

    # ---- new mail by UID range, in batches, newest first -----------------------------------------

    def _pull_new(self, sel: Selected, start: int, stored: set[int]) -> None:
        t0 = time.perf_counter()
        uids: list[int] = []
        if sel.uidnext > start:
            uids = [u for u in self.conn.search_uids(f"UID {start}:*".encode()) if u >= start and u not in stored]
        self.timing["search"] += time.perf_counter() - t0
        self._download(sel, uids, advance_state=True, start=start, top=max(stored, default=0))

    def _download_rest(self, sel: Selected, uids: list[int]) -> bool:
        """What a changed UIDVALIDITY left to download (rematch.py); False when stopped between batches."""
        self._download(sel, uids, advance_state=False)
        return self.complete

    def _download(
        self, sel: Selected, uids: Sequence[int], *, advance_state: bool, start: int = 1, top: int = 0
    ) -> None:
        """Newest first: the highest UIDs in a small first batch, then batch_size at a time down to
        the lowest. With `advance_state`, UIDNEXT moves (past every UID seen, `top` too) only with
        the last, oldest batch: until then it stays at `start`, under the oldest UID still missing."""
        f = self.folder
        items = b"UID FLAGS INTERNALDATE BODY.PEEK[]" + (b" MODSEQ" if self.conn.condstore else b"")
        if not uids and advance_state:
            with self.store.transaction():
                self.store.set_folder_state(
                    f.id,
                    uidvalidity=sel.uidvalidity,
                    uidnext=max(sel.uidnext, start, top + 1),
                    highestmodseq=sel.highestmodseq,
                    exists_count=sel.exists,
                )
        if not uids:
            return
        newest = sorted(uids, reverse=True)
        size = min(self.batch_size, FIRST_BATCH) if len(newest) > self.batch_size else self.batch_size
        batches: list[list[int]] = []
        i = 0
        while i < len(newest):
            batches.append(sorted(newest[i : i + size]))
            i += size
            size = self.batch_size
        end = max(sel.uidnext, newest[0] + 1, start, top + 1)  # UIDNEXT once the oldest batch is stored
        t0 = time.perf_counter()
        readers = self.readers or HeaderReaders()
        pool = readers.get() if len(batches) > 1 else None
        self.timing["workers"] += time.perf_counter() - t0
        try:
            self._download_batches(sel, batches, items, pool, advance_state=advance_state, start=start, end=end)
        finally:
            t0 = time.perf_counter()
            if self.worker_failed:
                readers.discard()  # stuck or broken: killed; the next folder's download forks another
            elif readers is not self.readers:
                readers.close()
            self.timing["workers"] += time.perf_counter() - t0

    def _download_batches(
        self,
        sel: Selected,
        batches: list[list[int]],
        items: bytes,
        pool: Executor | None,
        *,
        advance_state: bool,
        start: int,
        end: int,
    ) -> None:
        """Four stages overlap: the server prepares the next batches, a thread takes them off the
        socket, a worker process reads their headers, and this thread stores batch n."""
        timing = self.timing
        t0 = time.perf_counter()
        fetcher = BatchFetcher(self.conn, batches, items, pool, _read_all)
        timing["threads"] += time.perf_counter() - t0
        try:
            for n, batch in enumerate(batches):
                t0 = time.perf_counter()
                fetched, future = fetcher.next()
                timing["wait_fetch"] += time.perf_counter() - t0
                if self.worker_failed:
                    fetcher.pool = None  # no more batches for it
                last = n + 1 == len(batches)
                self._store_batch(
                    sel, batch, fetched, future, uidnext=end if last else start, advance_state=advance_state
                )
                if not last and self.stop is not None and self.stop.is_set():
                    self.complete = False
                    return
        finally:
            t0 = time.perf_counter()
            fetcher.close()
            timing["threads"] += time.perf_counter() - t0

    def _store_batch(
        self,
        sel: Selected,
        batch: list[int],
        fetched: dict[int, dict],
        future: Future | None,
        *,
        uidnext: int,
        advance_state: bool,
    ) -> None:
        """One transaction: the batch's messages and the folder state that accounts for them."""
        f = self.folder
        timing = self.timing
        t0 = time.perf_counter()
        overlay = pending_overlay(self.store, f.id, sel.uidvalidity)
        read = None
        if future is not None and not self.worker_failed:
            try:
                read = iter(future.result(timeout=WORKER_SECONDS))
            except Exception as e:  # noqa: BLE001 - a broken or stuck worker costs speed, never mail
                self.worker_failed = True
                self.log.warning("header worker failed; reading here", error=f"{type(e).__name__}: {e}")
        t1 = time.perf_counter()
        timing["wait_headers"] += t1 - t0
        items: list[Incoming] = []
        for uid in sorted(fetched):
            item = fetched[uid]
            raw = body_of(item)
            if raw is None:
                if b"BODY[]" in item:
                    self.log.info("empty message not stored (expunged meanwhile?)", folder=f.name, uid=uid)
                continue
            digest, env = next(read) if read else (envelope.content_hash(raw), envelope.read(raw))
            items.append(
                Incoming(
                    raw,
                    digest,
                    env,
                    f.id,
                    sel.uidvalidity,
                    uid,
                    with_pending(flag_names(item.get(b"FLAGS", ())), overlay.get(uid, ())),
                    internaldate(item.get(b"INTERNALDATE")),
                    f"imap:{f.name}",
                    modseq_of(item),
                )
            )
        t2 = time.perf_counter()
        timing["rows"] += t2 - t1
        half = len(items) // 2 + 1  # the crash point lands with half the batch written, as it did per message
        with self.store.transaction():
            results = self.store.add_messages(self.account_id, items[:half])
            if items:
                crashpoints.reached("sync.mid_batch", folder=f.name, uid=items[half - 1].uid)
            results += self.store.add_messages(self.account_id, items[half:])
            added = sum(r.new_location for r in results)
            self.counts["bytes"] += sum(len(it.raw) for it in items)
            crashpoints.reached("sync.before_state", folder=f.name, uid=batch[-1])
            if advance_state:
                # every UID below `uidnext` is stored: older batches still to come keep it down
                self.store.set_folder_state(
                    f.id,
                    uidvalidity=sel.uidvalidity,
                    uidnext=uidnext,
                    highestmodseq=sel.highestmodseq,
                    exists_count=sel.exists,
                )
        t3 = time.perf_counter()
        timing["sqlite"] += t3 - t2
        crashpoints.reached("sync.after_batch", folder=f.name, uid=batch[-1])
        self.counts["new"] += added
        if self.progress:
            self.progress(len(batch))
        if self.on_batch and added:
            self.on_batch(added)
        timing["callbacks"] += time.perf_counter() - t3


def _read_all(bodies: list[bytes]) -> list[tuple[str, envelope.Envelope]]:
    """In a worker process: the content hash and headers the store needs, for a whole batch."""
    return [(envelope.content_hash(b), envelope.read(b)) for b in bodies]


__all__ = ["FolderSync", "FolderReport", "HeaderReaders", "TIMERS", "OnBatch", "Progress"]
