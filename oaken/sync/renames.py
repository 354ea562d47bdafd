"""Renamed, deleted and replaced folders, mirrored before any folder is synced.

A folder is known by its mailbox, not its name. Where the server names mailboxes for good (RFC 8474
MAILBOXID, or Dovecot's X-GUID; asked in the same LIST-STATUS or STATUS, see oaken/sync/imap.py),
the same id under a new name is a rename and another id under a known name is a new folder (the
old one is dropped, even when the same messages were put back). Elsewhere a folder gone from LIST
is recognised under a new name with the same UIDVALIDITY by a sample of its messages spread from
the oldest to the newest: enough of them still at their UIDs with the same Message-ID and size,
and none replaced by another message.
"""

from __future__ import annotations

from typing import Any

from imapclient import IMAPClient

from oaken.store import Folder, Store
from oaken.sync.folder_rules import moved_away
from oaken.sync.imap import Connection, ServerFolder

# without mailbox ids: a folder under a new name is the old one when at least this share of a
# sample of the old one's messages is still there (the rest expunged meanwhile)
RENAME_SHARE = 0.5
RENAME_SAMPLE = 20
_SAMPLE_ITEMS = b"UID RFC822.SIZE BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"


def mirror_folder_changes(
    conn: Connection,
    store: Store,
    account_id: int,
    server: list[ServerFolder],
    selected: list[ServerFolder],
    log: Any,
) -> tuple[list[tuple[str, str]], list[str]]:
    """Each mirrored folder whose mailbox left its name is found under its new name (renamed: its
    messages, ids and triage kept, nothing downloaded) or dropped (deleted on the server: its
    messages go, unless another folder holds them too). Returns (renamed (old, new), deleted)."""
    local = {f.name: f for f in store.folders(account_id)}
    listed = {sf.name: sf for sf in server}
    # gone: dropped unless found elsewhere; unsure: moved away, or renumbered (folder_rules.moved_away)
    gone, unsure = moved_away(local.values(), listed)
    if not gone and not unsure:
        return [], []
    vacated = {f.name for f in gone + unsure}
    candidates = [
        sf for sf in selected if sf.name not in local or local[sf.name].uidvalidity is None or sf.name in vacated
    ]
    pairs: list[tuple[float, Folder, ServerFolder]] = []
    for old in gone + unsure:
        for sf in candidates:
            if sf.name != old.name and (score := same_mailbox(conn, store, old, sf, log)) is not None:
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
    with store.transaction():
        for old, _sf in moves.values():  # out of the way first: two folders may trade names
            store.rename_folder(old.id, f"\x00renaming {old.id}", bump=False)
        for f in drop:
            store.delete_folder(f.id, defer=True)  # its messages go at the end of the pass
            deleted.append(f.name)
            log.info("folder deleted", folder=f.name, name_reused=f.name in listed)
        if drop:
            store.drop_orphan_flag_changes()
        for old, sf in moves.values():
            placeholder = store.folder(account_id, sf.name)
            if placeholder is not None:  # an empty entry made by an interrupted pass
                store.delete_folder(placeholder.id, defer=True)
            store.rename_folder(old.id, sf.name)
            renamed.append((old.name, sf.name))
            log.info(
                "folder renamed",
                old=old.name,
                new=sf.name,
                by="mailbox id" if old.mailbox_id and sf.mailbox_id else "sampled messages",
            )
    return renamed, deleted


def same_mailbox(conn: Connection, store: Store, old: Folder, new: ServerFolder, log: Any) -> float | None:
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
    sample = store.identity_sample(old.id, old.uidvalidity, RENAME_SAMPLE)
    if not sample:
        return 1.0 if not st.messages else None
    try:
        conn.select(new.name, readonly=True)
        fetched = conn.fetch([u for u, _m, _s in sample], _SAMPLE_ITEMS)
    except IMAPClient.AbortError:
        raise
    except IMAPClient.Error as e:  # gone again meanwhile, or refused: not a rename we can tell
        log.warning("cannot compare folders", old=old.name, new=new.name, error=str(e))
        return None
    from oaken import envelope  # the Message-ID parser: needed only when folders are compared

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
