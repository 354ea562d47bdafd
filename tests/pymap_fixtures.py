"""The servers of the conformance suite (tests/test_conformance.py) behind one small interface.

`server_box` is a fresh IMAP user on one of SERVERS, as a `ServerBox`: the helpers of
tests/dovecot_fixtures.py's `Mailbox` (fill, client, config, server_state, compared by
`assert_mirrored`) plus what differs between servers:

- how a client reaches it (Dovecot: implicit TLS; pymap: STARTTLS, its only TLS),
- `change_uidvalidity(folder)`: what an administrator's tool does behind the clients' back
  (Dovecot: `doveadm mailbox update --uid-validity`; pymap: its dovecot-uidlist header),
- `FEATURES[kind]`: which IMAP extensions the server offers, so each test knows which of Oaken's
  paths it exercises there (QRESYNC or CONDSTORE or a full flag fetch, LIST-STATUS or one STATUS
  per folder, SPECIAL-USE or none), and two behaviours that differ: whether any keyword may be set
  and whether BODY[] returns the very bytes that were appended.

A third server is one more `ServerBox` subclass, one more entry in SERVERS and FEATURES, and a
session fixture that starts it.
"""

from __future__ import annotations

import collections
import itertools
import os
import ssl
from pathlib import Path
from typing import Any, ClassVar, Iterator

import pytest
from imapclient import IMAPClient

from oaken import envelope
from tests.dovecot_fixtures import Dovecot, Entry, Mailbox, synced_by_default

from pymap_server import Pymap  # noqa: E402  (scripts/ is on sys.path via tests.dovecot_fixtures)

SERVERS = ("dovecot", "pymap")

# What each server offers after login, as Oaken sees it (oaken/sync/imap.py Connection):
# condstore and qresync (RFC 7162), LIST-STATUS (RFC 5819), ESEARCH (RFC 4731), SPECIAL-USE
# (RFC 6154), IDLE (RFC 2177); any_keyword: PERMANENTFLAGS has \* (pymap's Maildir drops a keyword
# not listed in the folder's dovecot-keywords file, silently); same_bytes: BODY[] is the message as
# appended (pymap's Maildir backend rewrites it on the way to disk: LF line ends, the trailing space
# of a folded header line dropped, a blank line added after a closing MIME boundary; its
# RFC822.SIZE agrees with the rewritten bytes).
FEATURES: dict[str, dict[str, bool]] = {
    "dovecot": {"condstore": True, "qresync": True, "list_status": True, "esearch": True, "special_use": True,
                "idle": True, "any_keyword": True, "same_bytes": True},
    "pymap": {"condstore": False, "qresync": False, "list_status": False, "esearch": False, "special_use": False,
              "idle": True, "any_keyword": False, "same_bytes": False},
}

_users = itertools.count(1)


class ServerBox(Mailbox):
    """One IMAP user on one kind of server (see the module docstring)."""

    kind: ClassVar[str] = ""

    @property
    def features(self) -> dict[str, bool]:
        return FEATURES[self.kind]

    def change_uidvalidity(self, folder: str) -> int:
        """Give `folder` a new UIDVALIDITY with its messages and UIDs kept; returns the new value."""
        raise NotImplementedError

    def bodies(self, folder: str) -> dict[str, bytes]:
        """Message-ID -> BODY[] as the server returns it now (which pymap does not keep as appended)."""
        with self.client() as c:
            c.select_folder(folder, readonly=True)
            out = {}
            for item in c.fetch(c.search("ALL"), ["BODY.PEEK[]"]).values():
                body = item[b"BODY[]"]
                out[envelope.read(body).message_id or ""] = body
            return out

    def uidvalidity(self, folder: str) -> int:
        with self.client() as c:
            return int(c.folder_status(folder, ["UIDVALIDITY"])[b"UIDVALIDITY"])

    def server_state(self, folders: list[str] | None = None) -> collections.Counter[Entry]:
        """Mailbox.server_state, skipping \\Noselect folders: pymap lists a parent such as `Lists`
        of `Lists/notmuch` as subscribed and \\Noselect, and SELECT of it fails."""
        out: collections.Counter[Entry] = collections.Counter()
        with self.client() as c:
            subscribed = {n for _f, _d, n in c.list_sub_folders()} | {"INBOX"}
            listed = c.list_folders()
            for flags, _d, name in listed:
                if folders is not None and name not in folders:
                    continue
                if name not in subscribed or not synced_by_default(flags, name, listed):
                    continue
                if any(f.lower() in (b"\\noselect", b"\\nonexistent") for f in flags):
                    continue
                c.select_folder(name, readonly=True)
                uids = c.search("ALL")
                for i in range(0, len(uids), 500):
                    for _uid, item in c.fetch(uids[i:i + 500],
                                              ["FLAGS", "BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"]).items():
                        header = next(v for k, v in item.items() if k.startswith(b"BODY[HEADER"))
                        mid = envelope.message_ids(header.decode())[0]
                        fl = frozenset(f.decode() for f in item[b"FLAGS"] if f != b"\\Recent")
                        out[(mid, name, fl)] += 1
        return out


class DovecotBox(ServerBox):
    kind = "dovecot"

    def change_uidvalidity(self, folder: str) -> int:
        new = self.uidvalidity(folder) + 1000
        self.doveadm("mailbox update", "--uid-validity", str(new), folder)
        return new


class PymapBox(ServerBox):
    kind = "pymap"
    server: Pymap  # type: ignore[assignment]

    def client(self, port: int | None = None) -> IMAPClient:
        ctx = ssl.create_default_context(cafile=self.server.ca_file)
        c = IMAPClient("127.0.0.1", port or self.server.port, ssl=False, timeout=10)
        c.starttls(ctx)
        c.login(self.user, self.password)
        return c

    def account(self, **over: Any) -> dict[str, Any]:
        acc: dict[str, Any] = {
            "host": "127.0.0.1", "port": self.server.port, "tls": "starttls", "ca_file": self.server.ca_file,
            "username": self.user, "password_command": f"printf %s {self.password}",
            "timeout_seconds": 5.0, "batch_size": 10,
        }
        acc.update(self.extra)
        acc.update(over)
        return {k: v for k, v in acc.items() if v is not None}  # None: leave that key out

    def doveadm(self, command: str, *args: str) -> str:
        raise NotImplementedError("pymap has no doveadm; use ServerBox methods")

    def change_uidvalidity(self, folder: str) -> int:
        new = (self.server.uidvalidity(self.user, folder) + 1000) % 2**32 or 1
        self.server.set_uidvalidity(self.user, folder, new)
        return new


@pytest.fixture(scope="session")
def pymap_server() -> Iterator[Pymap]:
    server = Pymap(owner_pid=os.getpid()).start()
    yield server
    server.stop(remove=True)


def _new_box(cls: type[ServerBox], server: Any, home: Path) -> ServerBox:
    user = f"c{os.getpid()}x{next(_users)}"
    password = f"pw-{user}-secret"
    server.add_user(user, password)
    return cls(server, user, password, home)


@pytest.fixture(params=SERVERS)
def server_box(request: pytest.FixtureRequest, oaken_home: Path) -> ServerBox:
    """A fresh user on each server in turn (the test runs once per server)."""
    if request.param == "dovecot":
        server: Dovecot = request.getfixturevalue("dovecot")
        return _new_box(DovecotBox, server, oaken_home)
    return _new_box(PymapBox, request.getfixturevalue("pymap_server"), oaken_home)
