"""Pushing queued local flag changes (a message read here) to the server, before the folder's pull,
so that the mirror never reverts them. Conditional (UNCHANGEDSINCE) where the server has
CONDSTORE; a change the server refuses is kept with its error, for `oaken status` to show."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oaken import crashpoints
from oaken.store import Folder, Store
from oaken.sync.imap import Connection, Selected, StoreResult
from oaken.sync.imap_syntax import flag_names, modseq_of
from oaken.sync.pending_flags import pending_overlay, with_pending

PUSH_RETRIES = 3

FlagState = tuple[tuple[str, ...], int | None]  # (flags, modseq)


@dataclass
class Pushed:
    pushed: int = 0  # changes the server took
    rejected: int = 0  # changes it refused (kept, with the error)
    flags: dict[int, FlagState] = field(default_factory=dict)  # uid -> what the server holds now


def push_flag_changes(conn: Connection, store: Store, folder: Folder, sel: Selected, log: Any) -> Pushed:
    """Each queued change of `folder` at the selected UIDVALIDITY, committed one by one."""
    out = Pushed()
    for ch in store.pending_flag_changes(folder.id):
        if ch.uid is None or ch.uidvalidity != sel.uidvalidity:
            continue  # its location is matched again by the pull; pushed on the next pass
        result, flags, modseq, gone = _store_one(conn, ch.uid, ch.op, ch.flag, ch.modseq)
        crashpoints.reached("sync.mid_flag_push", folder=folder.name, uid=ch.uid)
        with store.transaction():
            if gone:  # expunged meanwhile: nothing left to change; the pull drops the location
                store.finish_flag_change(ch.id)
                continue
            if not result.ok or result.modified:
                error = result.error or "the message kept changing on the server (UNCHANGEDSINCE failed)"
                store.finish_flag_change(ch.id, error=error)
                out.rejected += 1
                log.warning("flag change refused", message=ch.message, uid=ch.uid, op=ch.op, flag=ch.flag, error=error)
                continue
            store.finish_flag_change(ch.id)
            out.pushed += 1
            if flags is not None:
                flags = with_pending(flags, pending_overlay(store, folder.id, sel.uidvalidity).get(ch.uid, ()))
                out.flags[ch.uid] = (flags, modseq)
                store.set_flags(folder.id, sel.uidvalidity, ch.uid, flags, modseq)
    return out


def _store_one(
    conn: Connection, uid: int, op: str, flag: str, modseq: int | None
) -> tuple[StoreResult, tuple[str, ...] | None, int | None, bool]:
    """STORE one change, UNCHANGEDSINCE our MODSEQ where the server has CONDSTORE; when someone
    else changed the message meanwhile, learn its state and apply ours on top (a +/- of one flag
    commutes with theirs). Returns (result, flags now, modseq now, expunged)."""
    items = b"UID FLAGS MODSEQ" if conn.condstore else b"UID FLAGS"
    since = modseq if conn.condstore else None
    result = conn.store_flag(uid, op, flag, unchangedsince=since)
    for _attempt in range(PUSH_RETRIES - 1):
        if not result.ok or not result.modified:
            break
        current = conn.fetch([uid], items)
        if uid not in current:
            return result, None, None, True
        result = conn.store_flag(uid, op, flag, unchangedsince=modseq_of(current[uid]))
    flags, new_modseq = result.flags, result.modseq
    if result.ok and not result.modified and flags is None:
        current = conn.fetch([uid], items)
        if uid not in current:
            return result, None, None, True
        flags, new_modseq = flag_names(current[uid].get(b"FLAGS", ())), modseq_of(current[uid])
    return result, flags, new_modseq, False
