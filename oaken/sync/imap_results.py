"""What the server answered, as the sync reads it: a listed folder with its STATUS, a SELECT,
a STORE. Frozen records, so that a folder's sync works from one consistent answer."""

from __future__ import annotations

from dataclasses import dataclass

from oaken.sync.folder_rules import is_selectable, special_use_of
from oaken.sync.imap_syntax import FolderStatus


@dataclass(frozen=True)
class ServerFolder:
    name: str
    delimiter: str | None
    flags: tuple[str, ...]
    subscribed: bool
    status: FolderStatus | None

    @property
    def special_use(self) -> str | None:
        return special_use_of(self.flags)

    @property
    def mailbox_id(self) -> str | None:
        """The server's lasting id of this mailbox (MAILBOXID or Dovecot's X-GUID), if it gave one."""
        return self.status.mailbox_id if self.status is not None else None

    @property
    def selectable(self) -> bool:
        return is_selectable(self.flags)


@dataclass(frozen=True)
class Selected:
    """What SELECT told us; with QRESYNC also what changed since the state we gave it."""

    name: str
    uidvalidity: int
    uidnext: int
    exists: int
    highestmodseq: int | None
    vanished: frozenset[int]
    changed: dict[int, tuple[tuple[str, ...], int | None]]  # uid -> (flags, modseq)


@dataclass(frozen=True)
class StoreResult:
    ok: bool
    modified: bool  # UNCHANGEDSINCE failed: the message changed on the server meanwhile
    flags: tuple[str, ...] | None  # the flags the server reported after the STORE
    modseq: int | None
    error: str | None = None
