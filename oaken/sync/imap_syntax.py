"""IMAP's syntax both ways, as pure functions with no connection: UID sets and quoted folder names
for our commands; flags, MODSEQ, dates, STATUS and FETCH answers out of the server's responses
(as imaplib collected them). Kept apart from the connection so that each can be tested on bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

from imapclient import imap_utf7
from imapclient.response_parser import parse_fetch_response, parse_response


def quote_mailbox(name: str) -> bytes:
    """A folder name as a quoted string in modified UTF-7 (RFC 3501), for SELECT, STATUS, ..."""
    raw = imap_utf7.encode(name)
    return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def uid_set(uids: Iterable[int]) -> bytes:
    """1,2,3,7 -> b'1:3,7': short commands even for thousands of UIDs."""
    out: list[str] = []
    start = prev = None
    for u in sorted(set(uids)):
        if start is None:
            start = prev = u
        elif u == prev + 1:  # type: ignore[operator]
            prev = u
        else:
            out.append(f"{start}:{prev}" if start != prev else str(start))
            start = prev = u
    if start is not None:
        out.append(f"{start}:{prev}" if start != prev else str(start))
    return ",".join(out).encode()


def parse_uid_set(text: bytes | str) -> set[int]:
    s = text.decode() if isinstance(text, bytes) else text
    out: set[int] = set()
    for part in s.strip().split(","):
        if not part:
            continue
        if ":" in part:
            a, b = (int(x) for x in part.split(":"))
            out.update(range(min(a, b), max(a, b) + 1))
        else:
            out.add(int(part))
    return out


def as_text(v: object) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def flag_names(flags: Iterable[object]) -> tuple[str, ...]:
    return tuple(as_text(f) for f in flags)


def modseq_of(item: dict) -> int | None:
    v = item.get(b"MODSEQ")
    if isinstance(v, tuple) and v:
        return int(v[0])
    return int(v) if isinstance(v, int) else None


def internaldate(value: object) -> int | None:
    if isinstance(value, int):
        return value
    return int(value.timestamp()) if isinstance(value, datetime) else None


@dataclass(frozen=True)
class FolderStatus:
    messages: int | None
    uidnext: int | None
    uidvalidity: int | None
    highestmodseq: int | None
    mailbox_id: str | None = None  # the server's id of the mailbox, kept across RENAME (see mailbox_id_of)


def folder_statuses(data: list) -> dict[str, FolderStatus]:
    """Folder name -> its STATUS, from the untagged STATUS responses of a STATUS or LIST-STATUS."""
    out: dict[str, FolderStatus] = {}
    for entry in data:
        parts = parse_response([entry] if isinstance(entry, bytes) else list(entry))
        name = imap_utf7.decode(parts[0]) if isinstance(parts[0], bytes) else str(parts[0])
        values = dict(zip(parts[1][::2], parts[1][1::2]))
        out[name] = FolderStatus(
            values.get(b"MESSAGES"),
            values.get(b"UIDNEXT"),
            values.get(b"UIDVALIDITY"),
            values.get(b"HIGHESTMODSEQ"),
            mailbox_id_of(values),
        )
    return out


def mailbox_id_of(values: dict) -> str | None:
    """A mailbox's lasting id from its STATUS values: RFC 8474's `MAILBOXID (id)` (servers that
    offer OBJECTID) or Dovecot's `X-GUID id` (its mailbox GUID, the same idea under another name).
    Both stay with the mailbox through RENAME and are never given to another mailbox."""
    for key in (b"MAILBOXID", b"X-GUID"):
        value = values.get(key)
        if isinstance(value, (tuple, list)):
            value = value[0] if value else None
        if value is not None:
            text = as_text(value)
            return text if text.upper() != "NIL" and text else None
    return None


def flag_changes(data: list) -> dict[int, tuple[tuple[str, ...], int | None]]:
    """uid -> (flags, modseq) from the untagged FETCH responses of a QRESYNC SELECT or a STORE."""
    out: dict[int, tuple[tuple[str, ...], int | None]] = {}
    if not data:
        return out
    for _seq, item in parse_fetch_response(data, False, False).items():
        uid = item.get(b"UID")
        if uid is not None and b"FLAGS" in item:
            out[int(uid)] = (flag_names(item[b"FLAGS"]), modseq_of(item))
    return out


def fetch_items(data: list) -> dict[int, dict]:
    """uid -> items from the untagged FETCH responses of a UID FETCH (bodies under b'BODY[]')."""
    fast = _fast_fetch(data)
    if fast is not None:
        return fast
    return {int(uid): item for uid, item in parse_fetch_response(data, False, True).items()}


# The answer to our own body FETCH, as servers write it: "7 (UID 7 FLAGS (\Seen) INTERNALDATE
# "29-Nov-2026 14:15:39 +0000" MODSEQ (2) BODY[] {2483}". imapclient's general parser spends more
# time on it than storing the message; anything else falls back to that parser.
_BODY_FETCH = re.compile(
    rb'\d+ \(UID (\d+) FLAGS \(([^()]*)\) INTERNALDATE "(\d{1,2})-(\w{3})-(\d{4}) (\d\d):(\d\d):(\d\d) '
    rb'([+-])(\d\d)(\d\d)"(?: MODSEQ \((\d+)\))? BODY\[\] \{\d+\}$'
)
_MONTHS = {
    m: i
    for i, m in enumerate(
        (b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"), 1
    )
}


def _fast_fetch(data: list) -> dict[int, dict] | None:
    import calendar

    out: dict[int, dict] = {}
    i = 0
    while i < len(data):
        entry = data[i]
        tail = data[i + 1] if i + 1 < len(data) else None
        if not isinstance(entry, tuple) or tail != b")":
            return None
        m = _BODY_FETCH.match(entry[0])
        if m is None or m.group(4) not in _MONTHS:
            return None
        uid, flags, day, mon, year, hh, mm, ss, sign, oh, om, modseq = m.groups()
        stamp = calendar.timegm((int(year), _MONTHS[mon], int(day), int(hh), int(mm), int(ss), 0, 0, 0))
        offset = (int(oh) * 3600 + int(om) * 60) * (1 if sign == b"+" else -1)
        item: dict = {
            b"UID": int(uid),
            b"FLAGS": tuple(flags.split()),
            b"INTERNALDATE": stamp - offset,
            b"BODY[]": entry[1],
        }
        if modseq is not None:
            item[b"MODSEQ"] = (int(modseq),)
        out[int(uid)] = item
        i += 2
    return out
