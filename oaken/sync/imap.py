"""One logged-in IMAP session and the raw commands imapclient lacks (QRESYNC SELECT, LIST-STATUS,
conditional STORE, pipelined FETCH). Socket timeouts are always set, so a silent link ends in
TimeoutError instead of hanging forever.

Its neighbours, each with one job: login.py opens and secures the session (credentials.py says
where the secrets and the TLS context come from), idle.py waits with IDLE, imap_syntax.py is the
syntax of what is sent and received, imap_answer.py reads a long answer off the socket,
imap_results.py holds what the server answered, link_errors.py what a lost link raises. The names
the rest of Oaken imports from here (connect, idle_wait, ConnectionLost, ...) stay importable here.
"""

from __future__ import annotations

import imaplib
from typing import Iterator, Sequence

from imapclient import IMAPClient, imap_utf7

from oaken import log
from oaken.config import AccountConfig
from oaken.sync.folder_rules import mailbox_id_item, status_items
from oaken.sync.idle import idle_wait
from oaken.sync.imap_answer import read_answer
from oaken.sync.imap_results import Selected, ServerFolder, StoreResult
from oaken.sync.imap_syntax import (
    as_text,
    fetch_items,
    flag_changes,
    flag_names,
    folder_statuses,
    parse_uid_set,
    quote_mailbox,
    uid_set,
)
from oaken.sync.link_errors import TRANSIENT, ConnectionLost
from oaken.sync.login import login


class Connection:
    """A logged-in IMAP session for one account."""

    def __init__(self, account: AccountConfig, client: IMAPClient):
        self.account = account
        self.client = client
        self.caps = {c.decode().upper() if isinstance(c, bytes) else c.upper() for c in client.capabilities()}
        self.condstore = "CONDSTORE" in self.caps or "QRESYNC" in self.caps
        self.qresync = "QRESYNC" in self.caps
        self.list_status = "LIST-STATUS" in self.caps
        self.mailbox_id_item = mailbox_id_item(self.caps, getattr(client, "welcome", b""))
        self.selected: str | None = None
        if self.qresync:
            self.client.enable("QRESYNC")
        elif self.condstore:
            self.client.enable("CONDSTORE") if "ENABLE" in self.caps else None

    # ---- raw commands -----------------------------------------------------------------------

    def command(self, line: bytes) -> tuple[str, bytes, dict[str, list]]:
        """Send one command; returns (OK|NO, tagged text, untagged responses by name)."""
        return self.finish(self.send(line), line)

    def send(self, line: bytes) -> bytes:
        """Send a command without waiting for its answer (pipelining); `finish` collects it."""
        imap = self.client._imap
        tag = imap._new_tag()
        imap.send(tag + b" " + line + b"\r\n")
        return tag

    def finish(self, tag: bytes, line: bytes) -> tuple[str, bytes, dict[str, list]]:
        imap = self.client._imap
        imap.untagged_responses = {}
        name = line.split(b" ", 2)[1 if line.startswith(b"UID ") else 0].decode()
        try:
            typ, data = imap._command_complete(name, tag)
        except imaplib.IMAP4.abort:
            raise
        except imaplib.IMAP4.error as e:  # BAD
            raise IMAPClient.Error(f"{line[:80]!r}: {e}") from None
        untagged = imap.untagged_responses
        imap.untagged_responses = {}
        text = data[0] if data and isinstance(data[0], bytes) else b""
        return typ, text, untagged

    def _answer(self, tag: bytes, line: bytes) -> tuple[str, bytes, dict[str, list]]:
        """`finish` for an answer of megabytes (a body FETCH), read by oaken.sync.imap_answer."""
        return read_answer(self.client._imap, tag, line)

    def _check(self, line: bytes) -> dict[str, list]:
        typ, text, untagged = self.command(line)
        if typ != "OK":
            raise IMAPClient.Error(f"{line[:80].decode(errors='replace')}: {typ} {text.decode(errors='replace')}")
        return untagged

    # ---- folders ------------------------------------------------------------------------------

    def list_folders(self) -> list[ServerFolder]:
        """Every folder with its subscription, special use and, with LIST-STATUS, its STATUS, in one
        round trip; without LIST-STATUS, one STATUS per subscribed folder. The STATUS includes the
        mailbox's lasting id where the server has one (`mailbox_id_item`), at no extra round trip."""
        if self.selected is not None:
            # a server may answer STATUS of the selected folder from this session's stale view
            self._check(b"UNSELECT" if "UNSELECT" in self.caps else b"NOOP")
            self.client._imap.state = "AUTH"
            self.selected = None
        if self.mailbox_id_item is not None:
            try:
                return self._list_folders(self.mailbox_id_item)
            except IMAPClient.AbortError:
                raise
            except IMAPClient.Error as e:
                # refused: the same without the id raises if the id was not the trouble; if it was (a
                # server that greets as Dovecot but is not), folders are recognised by their messages
                folders = self._list_folders(None)
                log.get("oaken.sync").warning(
                    "the server refused its mailbox ids; recognising folders by their messages",
                    item=self.mailbox_id_item.decode(),
                    error=str(e),
                )
                self.mailbox_id_item = None
                return folders
        return self._list_folders(None)

    def _list_folders(self, id_item: bytes | None) -> list[ServerFolder]:
        items = status_items(self.caps, id_item)
        if self.list_status and "LIST-EXTENDED" in self.caps:
            special = b" SPECIAL-USE" if "SPECIAL-USE" in self.caps else b""
            untagged = self._check(b'LIST "" "*" RETURN (SUBSCRIBED' + special + b" STATUS (" + items + b"))")
            statuses = folder_statuses(untagged.get("STATUS", []))
            return [
                ServerFolder(n, d, f, "\\Subscribed" in f or n.upper() == "INBOX", statuses.get(n))
                for f, d, n in self._list_entries(untagged.get("LIST", []))
            ]
        subscribed = {n for _f, _d, n in self._list_entries(self._check(b'LSUB "" "*"').get("LSUB", []))}
        out = []
        for flags, delim, name in self._list_entries(self._check(b'LIST "" "*"').get("LIST", [])):
            sub = name in subscribed or name.upper() == "INBOX"
            status = None
            if sub and "\\Noselect" not in flags:
                status = folder_statuses(
                    self._check(b"STATUS " + quote_mailbox(name) + b" (" + items + b")").get("STATUS", [])
                ).get(name)
            out.append(ServerFolder(name, delim, flags, sub, status))
        return out

    def _list_entries(self, data: list) -> Iterator[tuple[tuple[str, ...], str | None, str]]:
        for flags, delim, name in self.client._proc_folder_list([d for d in data if d is not None]):
            yield (
                flag_names(flags),
                as_text(delim) if delim is not None else None,
                name if isinstance(name, str) else imap_utf7.decode(name),
            )

    def select(self, name: str, *, readonly: bool = False, qresync: tuple[int, int] | None = None) -> Selected:
        """SELECT (or EXAMINE); with `qresync=(uidvalidity, modseq)` the server reports what vanished
        and which flags changed since then, in the same round trip (RFC 7162)."""
        line = (b"EXAMINE " if readonly else b"SELECT ") + quote_mailbox(name)
        if qresync and self.qresync:
            line += f" (QRESYNC ({qresync[0]} {qresync[1]}))".encode()
        elif self.condstore:
            line += b" (CONDSTORE)"
        untagged = self._check(line)
        self.client._imap.state = "SELECTED"
        self.selected = name

        def num(key: str) -> int | None:
            v = untagged.get(key)
            return int(v[-1].split()[0]) if v and v[-1] else None

        vanished: set[int] = set()
        for v in untagged.get("VANISHED", []):
            text = as_text(v)
            vanished |= parse_uid_set(text.replace("(EARLIER)", "").strip())
        changed = flag_changes(untagged.get("FETCH", []))
        uidvalidity = num("UIDVALIDITY")
        if uidvalidity is None:
            raise IMAPClient.Error(f"SELECT {name}: the server sent no UIDVALIDITY")
        exists = num("EXISTS") or 0
        uidnext = num("UIDNEXT")
        if uidnext is None:  # allowed by RFC 3501 when the folder is empty; find it ourselves
            uids = self.search_uids(b"ALL") if exists else []
            uidnext = max(uids) + 1 if uids else 1
        return Selected(
            name,
            uidvalidity,
            uidnext,
            exists,
            num("HIGHESTMODSEQ") if self.condstore else None,
            frozenset(vanished),
            changed,
        )

    # ---- messages -----------------------------------------------------------------------------

    def search_uids(self, criteria: bytes) -> list[int]:
        if "ESEARCH" in self.caps:  # ranges ("1:9000") instead of every UID spelled out
            untagged = self._check(b"UID SEARCH RETURN (ALL) " + criteria)
            found: set[int] = set()
            for line in untagged.get("ESEARCH", []):
                words = as_text(line).split()
                if "ALL" in words:
                    found |= parse_uid_set(words[words.index("ALL") + 1])
            return sorted(found)
        untagged = self._check(b"UID SEARCH " + criteria)
        out: list[int] = []
        for line in untagged.get("SEARCH", []):
            if line:
                out.extend(int(x) for x in line.split() if x.isdigit())
        return sorted(out)

    def fetch(self, uids: Sequence[int] | bytes, items: bytes, modifiers: bytes = b"") -> dict[int, dict]:
        """UID FETCH; returns uid -> items (bodies under b'BODY[]')."""
        return self.fetch_finish(self.fetch_start(uids, items, modifiers))

    def fetch_start(self, uids: Sequence[int] | bytes, items: bytes, modifiers: bytes = b"") -> tuple[bytes, bytes]:
        """Send a UID FETCH and return at once: the server prepares the next batch while we store
        this one."""
        spec = uids if isinstance(uids, bytes) else uid_set(uids)
        line = b"UID FETCH " + spec + b" (" + items + b")" + ((b" (" + modifiers + b")") if modifiers else b"")
        return (self.send(line) if spec else b""), line

    def fetch_finish(self, pending: tuple[bytes, bytes]) -> dict[int, dict]:
        tag, line = pending
        if not tag:
            return {}
        typ, text, untagged = self._answer(tag, line)
        if typ != "OK":
            raise IMAPClient.Error(f"{line[:80].decode(errors='replace')}: {typ} {text.decode(errors='replace')}")
        data = untagged.get("FETCH", [])
        if not data:
            return {}
        return fetch_items(data)

    def store_flag(self, uid: int, op: str, flag: str, *, unchangedsince: int | None = None) -> StoreResult:
        """Add or remove one flag on one message; UNCHANGEDSINCE makes it conditional (RFC 7162)."""
        mod = f" (UNCHANGEDSINCE {unchangedsince})".encode() if unchangedsince is not None else b""
        line = f"UID STORE {uid}".encode() + mod + f" {op}FLAGS ({flag})".encode()
        try:
            typ, text, untagged = self.command(line)
        except IMAPClient.AbortError:
            raise
        except IMAPClient.Error as e:  # BAD: the server will never take this change
            return StoreResult(False, False, None, None, str(e))
        if typ != "OK":
            return StoreResult(False, False, None, None, f"{typ} {text.decode(errors='replace')}")
        modified = text.upper().startswith(b"[MODIFIED")
        flags: tuple[str, ...] | None = None
        modseq = None
        for fetched_uid, (f, m) in flag_changes(untagged.get("FETCH", [])).items():
            if fetched_uid == uid:
                flags, modseq = f, m
        return StoreResult(True, modified, flags, modseq)

    def noop(self) -> None:
        self._check(b"NOOP")

    def abandon(self) -> None:
        """Close the socket without LOGOUT, for a session another thread is reading (an IDLE wait):
        that reader would take the LOGOUT's answer, and the LOGOUT would wait out the timeout."""
        try:
            self.client.shutdown()
        except Exception:  # noqa: BLE001 - already closed
            pass

    def close(self) -> None:
        try:
            self.client.logout()
        except Exception:  # noqa: BLE001 - a dead link cannot say goodbye
            try:
                self.client.shutdown()
            except Exception:  # noqa: BLE001
                pass


def connect(account: AccountConfig, *, timeout: float | None = None) -> Connection:
    """Open, secure and log in (oaken/sync/login.py). A refused login or an untrusted certificate
    raises SyncError once; a network failure raises ConnectionLost."""
    return login(account, Connection, timeout=timeout)


__all__ = [
    "TRANSIENT",
    "Connection",
    "ConnectionLost",
    "Selected",
    "ServerFolder",
    "StoreResult",
    "connect",
    "idle_wait",
    "mailbox_id_item",
]
