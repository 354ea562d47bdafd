"""One folder's sync: push queued flag changes, then pull what changed on the server.

The folder state (UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ) is written in the same transaction as the
messages it accounts for, so a kill at any moment resumes exactly: UIDNEXT only ever means "every
UID below this is stored", and HIGHESTMODSEQ is the one SELECT reported before anything was read,
so a change made while we fetch is seen again next time rather than missed.

New mail is downloaded newest first (the highest UIDs first, the first batch small), so that the
mail a user looks for first is stored, and searchable behind the daemon, within a second or two of
a first sync's start. UIDNEXT stays where it was until the oldest batch is stored; the messages
stored above it by an interrupted pass are known by their locations: the next pass takes their
flag changes and expunges like any stored message's and downloads only the rest.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:  # imported when a download needs them: a sync with nothing new must start fast
    from concurrent.futures import Executor, Future

from oaken import crashpoints, envelope, log, processes
from oaken.store import Folder, Incoming, Store
from oaken.sync.fetcher import BatchFetcher, body_of
from oaken.sync.imap import Connection, Selected, StoreResult
from oaken.sync.imap_syntax import flag_names, internaldate, modseq_of

HEADER_ITEMS = b"UID RFC822.SIZE FLAGS BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"
FIRST_BATCH = 100  # a download's first (newest) batch: small, so the newest mail is stored at once
PUSH_RETRIES = 3
WORKER_SECONDS = 15.0  # a batch's headers take the worker milliseconds; past this it is stuck

Progress = Callable[[int], None]
OnBatch = Callable[[int], None]


@dataclass(frozen=True)
class FolderReport:
    folder: str
    new: int = 0  # locations added from downloaded messages
    matched: int = 0  # re-matched after a UIDVALIDITY change without downloading
    flags: int = 0  # locations whose flags changed on the server
    expunged: int = 0  # locations removed
    pushed: int = 0  # local flag changes applied on the server
    rejected: int = 0  # local flag changes the server refused (kept, reported)
    uidvalidity_changed: bool = False
    skipped: bool = False  # unchanged by STATUS: not even selected
    complete: bool = True  # False when stopped between batches
    bytes: int = 0
    seconds: float = 0.0


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
        self.pushed: dict[int, tuple[tuple[str, ...], int | None]] = {}  # uid -> flags the server has now
        self.log = log.get("oaken.sync").bind(folder=folder.name)
        # wall seconds of this thread by what it waited on (a few perf_counter calls per batch; the
        # runner logs their sums on a debug line, "sync timing")
        self.timing = dict.fromkeys((*TIMERS, "folder"), 0.0)

    def run(self) -> FolderReport:
        t0 = time.perf_counter()
        f = self.folder
        resync = (f.uidvalidity, f.highestmodseq) if f.uidvalidity and f.highestmodseq else None
        sel = self.conn.select(f.name, qresync=resync)
        self._push(sel)
        changed_uv = f.uidvalidity is not None and f.uidvalidity != sel.uidvalidity
        stored: set[int] = set()  # UIDs at or above `start` stored by an interrupted newest-first pass
        if changed_uv:
            self.log.warning("uidvalidity changed", old=f.uidvalidity, new=sel.uidvalidity)
            start = self._rematch(sel)
        elif f.uidvalidity is None:
            start = 1
        else:
            start = f.uidnext or 1
            stored = self._pull_changes(sel, start)
        self.timing["select"] += time.perf_counter() - t0
        if self.complete:
            self._pull_new(sel, start, stored)
        self.timing["folder"] = time.perf_counter() - t0
        self.log.debug("folder timing", **{k: round(v, 4) for k, v in self.timing.items()})
        return FolderReport(
            f.name,
            uidvalidity_changed=changed_uv,
            complete=self.complete,
            seconds=round(time.perf_counter() - t0, 4),
            **self.counts,
        )

    # ---- push: local flag changes first, so the pull never reverts them -------------------------

    def _push(self, sel: Selected) -> None:
        for ch in self.store.pending_flag_changes(self.folder.id):
            if ch.uid is None or ch.uidvalidity != sel.uidvalidity:
                continue  # its location is matched again below; pushed on the next pass
            result, flags, modseq, gone = self._store_one(ch.uid, ch.op, ch.flag, ch.modseq)
            crashpoints.reached("sync.mid_flag_push", folder=self.folder.name, uid=ch.uid)
            with self.store.transaction():
                if gone:  # expunged meanwhile: nothing left to change; the pull drops the location
                    self.store.finish_flag_change(ch.id)
                    continue
                if not result.ok or result.modified:
                    error = result.error or "the message kept changing on the server (UNCHANGEDSINCE failed)"
                    self.store.finish_flag_change(ch.id, error=error)
                    self.counts["rejected"] += 1
                    self.log.warning(
                        "flag change refused", message=ch.message, uid=ch.uid, op=ch.op, flag=ch.flag, error=error
                    )
                    continue
                self.store.finish_flag_change(ch.id)
                self.counts["pushed"] += 1
                if flags is not None:
                    flags = _with_pending(flags, self._pending_overlay(sel.uidvalidity).get(ch.uid, ()))
                    self.pushed[ch.uid] = (flags, modseq)
                    self.store.set_flags(self.folder.id, sel.uidvalidity, ch.uid, flags, modseq)

    def _store_one(
        self, uid: int, op: str, flag: str, modseq: int | None
    ) -> tuple[StoreResult, tuple[str, ...] | None, int | None, bool]:
        """STORE one change, UNCHANGEDSINCE our MODSEQ where the server has CONDSTORE; when someone
        else changed the message meanwhile, learn its state and apply ours on top (a +/- of one flag
        commutes with theirs). Returns (result, flags now, modseq now, expunged)."""
        items = b"UID FLAGS MODSEQ" if self.conn.condstore else b"UID FLAGS"
        since = modseq if self.conn.condstore else None
        result = self.conn.store_flag(uid, op, flag, unchangedsince=since)
        for _attempt in range(PUSH_RETRIES - 1):
            if not result.ok or not result.modified:
                break
            current = self.conn.fetch([uid], items)
            if uid not in current:
                return result, None, None, True
            result = self.conn.store_flag(uid, op, flag, unchangedsince=modseq_of(current[uid]))
        flags, new_modseq = result.flags, result.modseq
        if result.ok and not result.modified and flags is None:
            current = self.conn.fetch([uid], items)
            if uid not in current:
                return result, None, None, True
            flags, new_modseq = flag_names(current[uid].get(b"FLAGS", ())), modseq_of(current[uid])
        return result, flags, new_modseq, False

    # ---- pull: expunges and flag changes of the UIDs we have -----------------------------------

    def _pull_changes(self, sel: Selected, start: int) -> set[int]:
        """Expunges and flag changes of every stored UID: those below `start`, and those above it
        that an interrupted newest-first pass stored (returned, so that they are not downloaded again)."""
        f = self.folder
        known = self.store.folder_uids(f.id, sel.uidvalidity)
        top = max(start - 1, max(known, default=0))  # the highest UID we may hold
        gone: set[int] = set()
        changed: dict[int, tuple[tuple[str, ...], int | None]] = {}
        if self.conn.qresync and f.highestmodseq:
            gone = set(sel.vanished)
            changed = dict(sel.changed)
        elif self.conn.condstore and f.highestmodseq and sel.highestmodseq is not None:
            if sel.highestmodseq != f.highestmodseq and top > 0:
                fetched = self.conn.fetch(
                    f"1:{top}".encode(), b"UID FLAGS MODSEQ", f"CHANGEDSINCE {f.highestmodseq}".encode()
                )
                changed = {u: (flag_names(i.get(b"FLAGS", ())), modseq_of(i)) for u, i in fetched.items()}
            if sel.highestmodseq != f.highestmodseq or sel.exists != f.exists_count:
                gone = set(known) - set(self.conn.search_uids(f"UID 1:{max(top, 1)}".encode()))
        elif top > 0 and known:
            # no CONDSTORE: every flag, and the UID set compared with ours
            fetched = self.conn.fetch(f"1:{top}".encode(), b"UID FLAGS")
            fetched = {u: i for u, i in fetched.items() if u <= top}
            changed = {u: (flag_names(i.get(b"FLAGS", ())), None) for u, i in fetched.items()}
            gone = set(known) - set(fetched)
        gone &= set(known)
        changed.update(self.pushed)  # SELECT's report predates our own STOREs
        overlay = self._pending_overlay(sel.uidvalidity)
        updates = 0
        with self.store.transaction():
            if gone:
                self.store.remove_uids(f.id, sel.uidvalidity, sorted(gone), defer=True)
                self.store.drop_orphan_flag_changes()
            for uid, (flags, modseq) in changed.items():
                if uid not in known or uid in gone:
                    continue
                new = _with_pending(flags, overlay.get(uid, ()))
                if set(new) != set(known[uid][1]) - {"\\Recent"}:
                    updates += 1
                self.store.set_flags(f.id, sel.uidvalidity, uid, new, modseq)
            self.store.set_folder_state(
                f.id,
                uidvalidity=sel.uidvalidity,
                uidnext=start,
                highestmodseq=sel.highestmodseq,
                exists_count=sel.exists,
            )
        self.counts["expunged"] += len(gone)
        self.counts["flags"] += updates
        return {u for u in known if u >= start and u not in gone}

    def _pending_overlay(self, uidvalidity: int) -> dict[int, list[tuple[str, str]]]:
        """Local changes not yet pushed (made while this sync ran): kept on top of the server's flags."""
        out: dict[int, list[tuple[str, str]]] = {}
        for ch in self.store.pending_flag_changes(self.folder.id):
            if ch.uid is not None and ch.uidvalidity == uidvalidity:
                out.setdefault(ch.uid, []).append((ch.op, ch.flag))
        return out

    # ---- pull: new mail by UID range, in batches ------------------------------------------------

    def _pull_new(self, sel: Selected, start: int, stored: set[int]) -> None:
        t0 = time.perf_counter()
        uids: list[int] = []
        if sel.uidnext > start:
            uids = [u for u in self.conn.search_uids(f"UID {start}:*".encode()) if u >= start and u not in stored]
        self.timing["search"] += time.perf_counter() - t0
        self._download(sel, uids, advance_state=True, start=start, top=max(stored, default=0))

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
        overlay = self._pending_overlay(sel.uidvalidity)
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
                    _with_pending(flag_names(item.get(b"FLAGS", ())), overlay.get(uid, ())),
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

    # ---- UIDVALIDITY changed: match again by Message-ID and size, download only the rest -------

    def _rematch(self, sel: Selected) -> int:
        f = self.folder
        uv = sel.uidvalidity
        known = self.store.folder_uids(f.id, uv)  # matched by an earlier, interrupted pass
        server = [u for u in self.conn.search_uids(b"ALL") if u not in known]
        candidates: dict[tuple[str, int], list[tuple[int | None, int]]] = {}
        for old_uv, old_uid, message_id, size in self.store.stale_locations(f.id, uv):
            if message_id:
                candidates.setdefault((message_id, size), []).append((old_uv, old_uid))
        relocate: list[tuple[int | None, int, int, tuple[str, ...], int | None]] = []
        download: list[int] = []
        for i in range(0, len(server), 1000):
            part = server[i : i + 1000]
            fetched = self.conn.fetch(part, HEADER_ITEMS + (b" MODSEQ" if self.conn.condstore else b""))
            for uid in part:
                item = fetched.get(uid)
                if item is None:
                    continue
                header = next((v for k, v in item.items() if k.startswith(b"BODY[HEADER")), b"") or b""
                ids = envelope.message_ids(bytes(header).decode("utf-8", "replace"))
                key = (ids[0], int(item.get(b"RFC822.SIZE", -1))) if ids else None
                olds = candidates.get(key) if key else None
                if olds:
                    old_uv, old_uid = olds.pop(0)
                    relocate.append((old_uv, old_uid, uid, flag_names(item.get(b"FLAGS", ())), modseq_of(item)))
                else:
                    download.append(uid)
        with self.store.transaction():
            for old_uv, old_uid, uid, flags, modseq in relocate:
                self.store.relocate(f.id, old_uv, old_uid, uv, uid, flags, modseq)
        self.counts["matched"] += len(relocate)
        self._download(sel, download, advance_state=False)
        if not self.complete:
            return sel.uidnext
        with self.store.transaction():
            self.counts["expunged"] += len(self.store.stale_locations(f.id, uv))
            self.store.drop_stale_uidvalidity(f.id, uv, defer=True)
            self.store.drop_orphan_flag_changes()
            self.store.set_folder_state(
                f.id, uidvalidity=uv, uidnext=sel.uidnext, highestmodseq=sel.highestmodseq, exists_count=sel.exists
            )
        return sel.uidnext


TIMERS = ("select", "search", "wait_fetch", "wait_headers", "rows", "sqlite", "callbacks", "workers", "threads")


def _read_all(bodies: list[bytes]) -> list[tuple[str, envelope.Envelope]]:
    """In a worker process: the content hash and headers the store needs, for a whole batch."""
    return [(envelope.content_hash(b), envelope.read(b)) for b in bodies]


class HeaderReaders:
    """The header worker process of one pass, shared by its folders: forked on the first download
    of more than one batch, shut down by `close` at the end of the pass."""

    def __init__(self) -> None:
        self.pool: Executor | None = None
        self._tried = False

    def get(self) -> Executor | None:
        if self.pool is None and not self._tried:
            self._tried = True  # None for good where processes cannot be made
            self.pool = _reader_pool()
        return self.pool

    def discard(self) -> None:
        """Kill a worker that failed or never answered; the next `get` forks a new one."""
        if self.pool is not None:
            _close_pool(self.pool, kill=True)
        self.pool = None
        self._tried = False

    def close(self) -> None:
        if self.pool is not None:
            _close_pool(self.pool, kill=False)
        self.pool = None


def _reader_pool() -> Executor | None:
    """One worker process for header reading (the costliest part of storing mail); None where
    processes cannot be made, and the batch is read here instead."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    envelope.load_all()  # the child imports nothing and opens no library: see envelope.load_all, processes.libc
    try:
        pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("fork"),
            initializer=processes.die_with_parent,
            initargs=(processes.libc(),),
        )
        # forked now, from this thread: PR_SET_PDEATHSIG follows the thread that forked, and the
        # thread that reads the batches (oaken.sync.fetcher) ends before the sync does
        pool.submit(int)
        return pool
    except (OSError, ValueError):
        return None


def _close_pool(pool: Executor, *, kill: bool) -> None:
    """Shut the worker down; a stuck one (it never answered) is killed rather than waited for."""
    processes = list((getattr(pool, "_processes", None) or {}).values()) if kill else []
    pool.shutdown(wait=not kill, cancel_futures=True)
    for process in processes:
        process.kill()


def _with_pending(flags: Sequence[str], pending: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    out = set(flags)
    for op, flag in pending:
        if op == "+":
            out.add(flag)
        else:
            out.discard(flag)
    return tuple(sorted(out))


__all__ = ["FolderSync", "FolderReport", "HeaderReaders"]
