"""The rules that decide which folders a pass covers and which it may leave unopened, as plain
functions of plain values: no imapclient, config dataclasses or store behind them.

Why apart: the full sync (runner.py, renames.py, selection.py) and the cold no-change check
(nochange.py), which must not pay for those imports, decide by the same code, so the check can
never call unchanged what the full pass would have touched. Each function reads only attributes:
a folder as listed (`name`, `delimiter`, `flags`, `subscribed`, `status`), its STATUS
(`messages`, `uidnext`, `uidvalidity`, `highestmodseq`, `mailbox_id`), a stored folder (the same
state, `uidvalidity` None for one that no sync mirrored) and an account (`folders`, `exclude`).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold path
if TYPE_CHECKING:
    from typing import Any, Iterable, Mapping, Sequence

DEFAULT_EXCLUDED_USES = ("\\junk", "\\trash")
SPECIAL_USES = ("\\junk", "\\trash", "\\sent", "\\drafts", "\\archive", "\\all", "\\flagged")
# the names junk and trash folders usually have, for a server that flags none of its folders
# with that use (no SPECIAL-USE, RFC 6154): matched whole, on the last part of the name
USUAL_NAMES = {
    "\\junk": ("junk", "junk e-mail", "junk email", "spam", "bulk mail"),
    "\\trash": ("trash", "deleted items", "deleted messages", "deleted"),
}


def special_use_of(flags: Iterable[str]) -> str | None:
    """The RFC 6154 use among a LIST entry's flags, as the server spelled it."""
    for f in flags:
        if f.lower() in SPECIAL_USES:
            return f
    return None


def is_selectable(flags: Iterable[str]) -> bool:
    return not any(f.lower() in ("\\noselect", "\\nonexistent") for f in flags)


def assumed_uses(server: Sequence[Any]) -> dict[str, str]:
    """Folder name -> the use its name implies, for each of \\Junk and \\Trash that no folder of
    the server is flagged with: mail a user threw away is not searched on a server that does not
    say which folder holds it either."""
    flagged = {(special_use_of(f.flags) or "").lower() for f in server}
    out: dict[str, str] = {}
    for use, names in USUAL_NAMES.items():
        if use in flagged:
            continue
        for f in server:
            last = f.name.rsplit(f.delimiter, 1)[-1] if f.delimiter else f.name
            if not special_use_of(f.flags) and last.lower() in names:
                out[f.name] = use
    return out


def wanted(folder: Any, account: Any, assumed: Mapping[str, str] | None = None) -> bool:
    """Every subscribed folder but \\Junk and \\Trash (flagged so, or `assumed` so by its name:
    assumed_uses), narrowed by `folders` and `exclude`; such a folder is synced only when a
    pattern names it exactly."""
    import fnmatch

    if not is_selectable(folder.flags) or not folder.subscribed:
        return False
    name = folder.name
    if any(fnmatch.fnmatchcase(name, p) for p in account.exclude):
        return False
    use = special_use_of(folder.flags) or (assumed or {}).get(name, "")
    if use.lower() in DEFAULT_EXCLUDED_USES:
        return name in account.folders
    return any(
        fnmatch.fnmatchcase(name, p) or (p.upper() == "INBOX" and name.upper() == "INBOX") for p in account.folders
    )


def unchanged(local: Any, server: Any) -> bool:
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


def moved_away(local: Iterable[Any], listed: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
    """(gone, unsure) among the stored folders a sync mirrored: gone, its name no longer listed or
    holding another mailbox (by the server's mailbox ids); unsure, the same name with a new
    UIDVALIDITY and no ids to tell a renumbered folder from another one put there."""
    gone: list[Any] = []
    unsure: list[Any] = []
    for f in local:
        if f.uidvalidity is None:  # only folders this sync mirrored; imported ones are not the server's
            continue
        sf = listed.get(f.name)
        mailbox_id = sf.status.mailbox_id if sf is not None and sf.status is not None else None
        if sf is None:
            gone.append(f)
        elif f.mailbox_id and mailbox_id:
            if mailbox_id != f.mailbox_id:
                gone.append(f)  # deleted and made again under the same name (or another renamed onto it)
        elif sf.status is not None and sf.status.uidvalidity not in (None, f.uidvalidity):
            unsure.append(f)
    return gone, unsure


def row_kept(local: Any, server: Any) -> bool:
    """Whether recording the listed folder leaves its stored row as it is (the store's
    ensure_folder: a delimiter or use the server now gives replaces ours, a mailbox id is recorded
    where none was)."""
    mailbox_id = server.status.mailbox_id if server.status is not None else None
    use = special_use_of(server.flags)
    return (
        (server.delimiter is None or server.delimiter == local.delimiter)
        and (use is None or use == local.special_use)
        and not (local.mailbox_id is None and mailbox_id is not None)
    )


# Dovecot's greeting, unless its administrator changed login_greeting ("Dovecot ready.",
# "Dovecot (Debian) ready."): Dovecot 2.3 offers no OBJECTID but answers STATUS X-GUID.
_DOVECOT_GREETING = re.compile(rb"^\* OK (?:\[[^\]]*\] )?Dovecot\b")


def mailbox_id_item(caps: set[str], greeting: bytes | None) -> bytes | None:
    """The STATUS item that names a mailbox for good, kept through RENAME and never given to another
    mailbox: MAILBOXID where the server offers OBJECTID (RFC 8474), X-GUID on a Dovecot (its
    mailbox GUID; Dovecot 2.3 has no OBJECTID); None elsewhere, where folders are recognised by
    their messages (oaken/sync/renames.py)."""
    if "OBJECTID" in caps:
        return b"MAILBOXID"
    if greeting and _DOVECOT_GREETING.match(greeting):
        return b"X-GUID"
    return None


def status_items(caps: set[str], id_item: bytes | None) -> bytes:
    """The STATUS items a pass asks of each folder: HIGHESTMODSEQ with CONDSTORE, the mailbox id."""
    condstore = "CONDSTORE" in caps or "QRESYNC" in caps
    return (
        b"MESSAGES UIDNEXT UIDVALIDITY"
        + (b" HIGHESTMODSEQ" if condstore else b"")
        + (b" " + id_item if id_item else b"")
    )
