"""A folder whose UIDVALIDITY changed: its messages are matched again by Message-ID and size at
their new UIDs, keeping their ids and triage, and only the rest is downloaded. The old locations
go once every new one is stored, so a pass cut short resumes the matching."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from oaken import envelope
from oaken.store import Folder, Store
from oaken.sync.imap import Connection, Selected
from oaken.sync.imap_syntax import flag_names, modseq_of

HEADER_ITEMS = b"UID RFC822.SIZE FLAGS BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"


@dataclass(frozen=True)
class Rematched:
    start: int  # the UIDNEXT to pull new mail from
    matched: int  # locations moved to their new UIDs without downloading
    expunged: int  # old locations no message matched


def rematch(
    conn: Connection, store: Store, folder: Folder, sel: Selected, download: Callable[[list[int]], bool]
) -> Rematched:
    """Match, then `download(uids)` what matched nothing (it returns False when stopped between
    batches: the old locations then stay for the next pass)."""
    f = folder
    uv = sel.uidvalidity
    known = store.folder_uids(f.id, uv)  # matched by an earlier, interrupted pass
    server = [u for u in conn.search_uids(b"ALL") if u not in known]
    candidates: dict[tuple[str, int], list[tuple[int | None, int]]] = {}
    for old_uv, old_uid, message_id, size in store.stale_locations(f.id, uv):
        if message_id:
            candidates.setdefault((message_id, size), []).append((old_uv, old_uid))
    relocate: list[tuple[int | None, int, int, tuple[str, ...], int | None]] = []
    new: list[int] = []
    for i in range(0, len(server), 1000):
        part = server[i : i + 1000]
        fetched = conn.fetch(part, HEADER_ITEMS + (b" MODSEQ" if conn.condstore else b""))
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
                new.append(uid)
    with store.transaction():
        for old_uv, old_uid, uid, flags, modseq in relocate:
            store.relocate(f.id, old_uv, old_uid, uv, uid, flags, modseq)
    if not download(new):
        return Rematched(sel.uidnext, len(relocate), 0)
    with store.transaction():
        expunged = len(store.stale_locations(f.id, uv))
        store.drop_stale_uidvalidity(f.id, uv, defer=True)
        store.drop_orphan_flag_changes()
        store.set_folder_state(
            f.id, uidvalidity=uv, uidnext=sel.uidnext, highestmodseq=sel.highestmodseq, exists_count=sel.exists
        )
    return Rematched(sel.uidnext, len(relocate), expunged)
