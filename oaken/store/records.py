"""raw.db's records: the frozen dataclasses the store hands out and takes in, and the text forms
their fields take in raw.db's columns (flags space-separated, addresses one per line)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # the envelope reader's regexes are loaded by writers only, not by a search
    from oaken.envelope import Envelope

SEEN = "\\Seen"
FLAGGED = "\\Flagged"


@dataclass(frozen=True)
class Folder:
    id: int
    account_id: int
    name: str
    delimiter: str | None
    special_use: str | None
    uidvalidity: int | None
    uidnext: int | None
    highestmodseq: int | None
    exists_count: int | None
    mailbox_id: str | None = None  # the server's lasting id of the mailbox (MAILBOXID, X-GUID), if it has one


@dataclass(frozen=True)
class Location:
    id: int
    message: int
    folder_id: int
    folder: str
    uidvalidity: int | None
    uid: int | None
    flags: tuple[str, ...]
    modseq: int | None


@dataclass(frozen=True)
class AddResult:
    message: int  # Oaken's id of the message
    new_message: bool  # False when the message was already stored (another folder, a re-import)
    new_location: bool
    problem: str | None = None  # set when the message is new and its headers could not all be read


@dataclass(frozen=True)
class Incoming:
    """One message to store and the place it lives, with what was read from its bytes (the
    content hash and envelope, which sync computes in a worker process)."""

    raw: bytes
    digest: str
    envelope: Envelope
    folder_id: int
    uidvalidity: int | None = None
    uid: int | None = None
    flags: tuple[str | bytes, ...] = ()
    internaldate: int | None = None
    source: str | None = None
    modseq: int | None = None


@dataclass(frozen=True)
class Triage:
    category: str | None
    priority: int | None
    disposition: str


@dataclass(frozen=True)
class MessageMeta:
    """A stored message without its bytes: what search results and the indexer need."""

    id: int
    account: str
    message_id: str | None
    content_hash: str
    date: int
    subject: str
    sender_name: str
    sender_addr: str
    to: tuple[str, ...]
    cc: tuple[str, ...]
    thread: int
    folders: tuple[str, ...]
    labels: tuple[str, ...]  # folders, IMAP keywords and labels set locally
    unread: bool
    starred: bool
    triage: Triage
    problem: str | None
    size: int


@dataclass(frozen=True)
class Change:
    """One entry of the change feed an indexer follows."""

    message: int
    seq: int
    deleted: bool
    content_hash: str | None


@dataclass(frozen=True)
class FlagChange:
    id: int
    message: int
    location: int
    folder_id: int
    uidvalidity: int | None
    uid: int | None
    op: str
    flag: str
    modseq: int | None


def split_lines(text: str) -> tuple[str, ...]:
    """A column of one value per line (addresses, folder names, labels) as a tuple."""
    return tuple(t for t in text.split("\n") if t)


def split_flags(text: str) -> tuple[str, ...]:
    """A location's flags column as a tuple."""
    return tuple(f for f in text.split(" ") if f)


def flags_text(flags: Iterable[str | bytes]) -> str:
    """Flags as a location's flags column: sorted, once each, without \\Recent (a session's flag)."""
    out = sorted({f.decode("utf-8", "replace") if isinstance(f, bytes) else str(f) for f in flags})
    return " ".join(f for f in out if f and f != "\\Recent")


def json_list(values: Iterable[object]) -> str:
    """A list bound as one parameter and read back by json_each: one query for a whole batch."""
    import json  # here: a search, which opens raw.db too, never needs it

    return json.dumps(list(values))
