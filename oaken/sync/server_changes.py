"""What changed on the server among the messages already stored: expunges and flag changes, by
QRESYNC (in SELECT's own answer), by CONDSTORE (`CHANGEDSINCE`, and a UID comparison when the
count or MODSEQ moved), or on a server with neither by every flag and the whole UID set."""

from __future__ import annotations

from dataclasses import dataclass

from oaken.store import Folder, Store
from oaken.sync.flag_push import FlagState
from oaken.sync.imap import Connection, Selected
from oaken.sync.imap_syntax import flag_names, modseq_of
from oaken.sync.pending_flags import pending_overlay, with_pending


@dataclass(frozen=True)
class Changes:
    expunged: int  # locations removed
    flags: int  # locations whose flags changed
    stored_above: set[int]  # UIDs at or above `start` that an interrupted pass stored: not downloaded again


def pull_changes(
    conn: Connection, store: Store, folder: Folder, sel: Selected, start: int, pushed: dict[int, FlagState]
) -> Changes:
    """Expunges and flag changes of every stored UID: those below `start`, and those above it that
    an interrupted newest-first pass stored; committed with the folder state (UIDNEXT `start`).
    `pushed` holds the flags our own STOREs left, which SELECT's report predates."""
    f = folder
    known = store.folder_uids(f.id, sel.uidvalidity)
    top = max(start - 1, max(known, default=0))  # the highest UID we may hold
    gone: set[int] = set()
    changed: dict[int, FlagState] = {}
    if conn.qresync and f.highestmodseq:
        gone = set(sel.vanished)
        changed = dict(sel.changed)
    elif conn.condstore and f.highestmodseq and sel.highestmodseq is not None:
        if sel.highestmodseq != f.highestmodseq and top > 0:
            fetched = conn.fetch(f"1:{top}".encode(), b"UID FLAGS MODSEQ", f"CHANGEDSINCE {f.highestmodseq}".encode())
            changed = {u: (flag_names(i.get(b"FLAGS", ())), modseq_of(i)) for u, i in fetched.items()}
        if sel.highestmodseq != f.highestmodseq or sel.exists != f.exists_count:
            gone = set(known) - set(conn.search_uids(f"UID 1:{max(top, 1)}".encode()))
    elif top > 0 and known:
        # no CONDSTORE: every flag, and the UID set compared with ours
        fetched = conn.fetch(f"1:{top}".encode(), b"UID FLAGS")
        fetched = {u: i for u, i in fetched.items() if u <= top}
        changed = {u: (flag_names(i.get(b"FLAGS", ())), None) for u, i in fetched.items()}
        gone = set(known) - set(fetched)
    gone &= set(known)
    changed.update(pushed)
    overlay = pending_overlay(store, f.id, sel.uidvalidity)
    updates = 0
    with store.transaction():
        if gone:
            store.remove_uids(f.id, sel.uidvalidity, sorted(gone), defer=True)
            store.drop_orphan_flag_changes()
        for uid, (flags, modseq) in changed.items():
            if uid not in known or uid in gone:
                continue
            new = with_pending(flags, overlay.get(uid, ()))
            if set(new) != set(known[uid][1]) - {"\\Recent"}:
                updates += 1
            store.set_flags(f.id, sel.uidvalidity, uid, new, modseq)
        store.set_folder_state(
            f.id, uidvalidity=sel.uidvalidity, uidnext=start, highestmodseq=sel.highestmodseq, exists_count=sel.exists
        )
    return Changes(len(gone), updates, {u for u in known if u >= start and u not in gone})
