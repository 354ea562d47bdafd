"""A real Dovecot for the sync tests: one server per test worker, one fresh user per test.

`imap_box` gives a test its own IMAP user with helpers to put mail on the server (APPEND, doveadm)
and to read back the server's state as (Message-ID, folder, flags), which the tests compare with
what raw.db mirrors.
"""

from __future__ import annotations

import collections
import itertools
import os
import ssl
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
import tomli_w
from imapclient import IMAPClient

from oaken import config as config_mod
from oaken import envelope
from oaken.store import open_store

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from dovecot import Dovecot  # noqa: E402

DATA = Path(__file__).parent / "data" / "sync"
_users = itertools.count(1)
Entry = tuple[str, str, frozenset[str]]  # (Message-ID, folder, flags)


def corpus() -> list[bytes]:
    """The 52 real messages of tests/data/sync, CRLF line ends as IMAP stores them."""
    out = []
    for p in sorted(DATA.glob("*.eml")):
        raw = p.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        out.append(raw)
    return out


@dataclass
class Mailbox:
    """One IMAP user on the test server, and the Oaken config that syncs it."""

    server: Dovecot
    user: str
    password: str
    home: Path
    extra: dict[str, Any] = field(default_factory=dict)

    def client(self, port: int | None = None) -> IMAPClient:
        ctx = ssl.create_default_context(cafile=self.server.ca_file)
        c = IMAPClient("127.0.0.1", port or self.server.ssl_port, ssl=True, ssl_context=ctx, timeout=10)
        c.login(self.user, self.password)
        return c

    def account(self, **over: Any) -> dict[str, Any]:
        acc: dict[str, Any] = {
            "host": "127.0.0.1", "port": self.server.ssl_port, "tls": "implicit", "ca_file": self.server.ca_file,
            "username": self.user, "password_command": f"printf %s {self.password}",
            "timeout_seconds": 5.0, "batch_size": 10,
        }
        acc.update(self.extra)
        acc.update(over)
        return {k: v for k, v in acc.items() if v is not None}  # None: leave that key out

    def config_dict(self, **over: Any) -> dict[str, Any]:
        return {"default_account": "test", "accounts": {"test": self.account(**over)},
                "daemon": {"idle_folders": ["INBOX"], "poll_seconds": 30.0, "max_backoff_seconds": 2.0},
                "embedder": {"backend": "torch"}}  # "auto" would export the fast backends first (tens of s)

    def config(self, **over: Any) -> config_mod.Config:
        return config_mod.from_dict(self.config_dict(**over), source="test-config")

    def write_config(self, data: dict[str, Any] | None = None, **over: Any) -> Path:
        """config.toml in OAKEN_HOME, for tests that run `oaken` as a process."""
        path = self.home / "config.toml"
        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            tomli_w.dump(data or self.config_dict(**over), f)
        return path

    def fill(self, folder: str, messages: list[bytes], flags: tuple[str, ...] = ()) -> None:
        with self.client() as c:
            if folder.upper() != "INBOX" and not c.folder_exists(folder):
                c.create_folder(folder)
                c.subscribe_folder(folder)
            if messages:
                c.multiappend(folder, [{"msg": m, "flags": flags} for m in messages])

    def doveadm(self, command: str, *args: str) -> str:
        """`doveadm COMMAND -u USER ARGS`, e.g. doveadm("mailbox update", "--uid-validity", "7", "INBOX")."""
        return self.server.doveadm(*command.split(), "-u", self.user, *args)

    def server_state(self, folders: list[str] | None = None) -> collections.Counter[Entry]:
        """What the server holds in the synced folders (subscribed, not \\Junk or \\Trash; on a
        server that flags no folder so, not one with such a folder's usual name)."""
        out: collections.Counter[Entry] = collections.Counter()
        with self.client() as c:
            subscribed = {n for _f, _d, n in c.list_sub_folders()} | {"INBOX"}
            listed = c.list_folders()
            for flags, _d, name in listed:
                if folders is not None and name not in folders:
                    continue
                if name not in subscribed or not synced_by_default(flags, name, listed):
                    continue
                c.select_folder(name, readonly=True)
                uids = c.search("ALL")
                for i in range(0, len(uids), 500):
                    part = uids[i:i + 500]
                    for _uid, item in c.fetch(part, ["FLAGS", "BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"]).items():
                        header = next(v for k, v in item.items() if k.startswith(b"BODY[HEADER"))
                        mid = envelope.message_ids(header.decode())[0]
                        fl = frozenset(f.decode() for f in item[b"FLAGS"] if f != b"\\Recent")
                        out[(mid, name, fl)] += 1
        return out


def synced_by_default(flags: tuple[bytes, ...], name: str, listed: list) -> bool:
    """Not a junk or trash folder: flagged \\Junk or \\Trash, or, on a server flagging no folder
    so, named as such folders usually are (oaken.sync.selection.USUAL_NAMES, the last part)."""
    from oaken.sync.selection import USUAL_NAMES

    if any(f in (b"\\Junk", b"\\Trash") for f in flags):
        return False
    flagged = {f.decode().lower() for fl, _d, _n in listed for f in fl}
    by_name = {n for use, names in USUAL_NAMES.items() if use not in flagged for n in names}
    special = any(f.lower() in (b"\\sent", b"\\drafts", b"\\archive", b"\\all", b"\\flagged") for f in flags)
    delim = next((d for _f, d, n in listed if n == name), None)
    sep = delim.decode() if isinstance(delim, bytes) else delim
    last = name.rsplit(sep, 1)[-1] if sep else name
    return special or last.lower() not in by_name


def mirror_state(config: config_mod.Config, account: str = "test") -> collections.Counter[Entry]:
    """What raw.db mirrors, as a multiset: a duplicated location counts twice."""
    out: collections.Counter[Entry] = collections.Counter()
    with open_store(config_mod.resolve_data_dir(config), readonly=True) as store:
        aid = store.account_id(account)
        for f in store.folders(aid):
            for _uid, (message, flags) in store.folder_uids(f.id, f.uidvalidity).items():
                mid = store.meta(message).message_id or ""
                out[(mid, f.name, frozenset(flags))] += 1
            assert store.location_count(f.id) == len(store.folder_uids(f.id, f.uidvalidity)), \
                f"{f.name}: locations left at an old UIDVALIDITY"
    return out


def assert_mirrored(box: Mailbox, config: config_mod.Config) -> None:
    server = box.server_state()
    local = mirror_state(config)
    assert local == server, (f"only on the server: {sorted(server - local)[:5]}; "
                             f"only in raw.db: {sorted(local - server)[:5]}")
    with open_store(config_mod.resolve_data_dir(config), readonly=True) as store:
        ids = [store.meta(m).message_id for m in store.message_ids_in(store.account_id("test"))]
    assert len(ids) == len(set(ids)), "a message stored twice"
    assert set(ids) == {mid for mid, _f, _fl in server}


# what a plain IMAP4rev1 server offers: no CONDSTORE, QRESYNC, LIST-STATUS or ESEARCH
BASIC_CAPABILITY = "IMAP4rev1 LITERAL+ SASL-IR ID ENABLE IDLE UIDPLUS MULTIAPPEND LIST-EXTENDED SPECIAL-USE NAMESPACE UNSELECT"


def _serve(capability: str | None = None) -> Iterator[Dovecot]:
    server = Dovecot(capability=capability, owner_pid=os.getpid()).start()
    yield server
    server.stop(remove=True)


@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    yield from _serve()


@pytest.fixture(scope="session")
def dovecot_basic() -> Iterator[Dovecot]:
    """Neither CONDSTORE, QRESYNC nor LIST-STATUS: every flag fetched, UID sets compared."""
    yield from _serve(BASIC_CAPABILITY)


@pytest.fixture(scope="session")
def dovecot_condstore() -> Iterator[Dovecot]:
    """CONDSTORE without QRESYNC or LIST-STATUS: CHANGEDSINCE, UID-set expunges, one STATUS per folder."""
    yield from _serve(BASIC_CAPABILITY + " CONDSTORE")


def _mailbox(server: Dovecot, home: Path) -> Mailbox:
    user = f"u{os.getpid()}x{next(_users)}"
    password = f"pw-{user}-secret"
    server.add_user(user, password)
    return Mailbox(server, user, password, home)


@pytest.fixture
def imap_box(dovecot: Dovecot, oaken_home: Path) -> Mailbox:
    return _mailbox(dovecot, oaken_home)


@pytest.fixture
def basic_imap_box(dovecot_basic: Dovecot, oaken_home: Path) -> Mailbox:
    return _mailbox(dovecot_basic, oaken_home)


@pytest.fixture
def condstore_imap_box(dovecot_condstore: Dovecot, oaken_home: Path) -> Mailbox:
    return _mailbox(dovecot_condstore, oaken_home)


@pytest.fixture
def real_mail() -> list[bytes]:
    return corpus()
