"""A folder is known by its mailbox, not its name (issue #14 item 1): renamed on the server while
messages were expunged or delivered, it keeps its messages' ids and triage and is not downloaded
again; deleted and made again, even under the same name, it is not taken for the old one.

Two paths, each against a real Dovecot:

- "ids": the server names its mailboxes for good. Dovecot 2.3 offers no OBJECTID (RFC 8474), but
  answers STATUS X-GUID, its mailbox GUID, which oaken asks in the same LIST-STATUS as MAILBOXID.
  A real OBJECTID server (pymap) is covered at the end where it is installed.
- "sampled": the same Dovecot seen as an unknown server (its usual capabilities less OBJECTID,
  another greeting), so folders are recognised by a sample of their messages spread over the
  folder, matched by Message-ID and size at the same UIDs.
"""

from __future__ import annotations

import os
import ssl
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest
from imapclient import IMAPClient

from oaken import config as config_mod
from oaken import envelope
from oaken.store import open_store
from oaken.sync.imap import connect
from oaken.sync.runner import SyncReport, sync
from tests.dovecot_fixtures import Dovecot, Mailbox, _mailbox, assert_mirrored

KINDS = ("ids", "sampled")


@pytest.fixture(scope="session")
def dovecot_unnamed(dovecot: Dovecot) -> Iterator[Dovecot]:
    """Dovecot as a server oaken cannot tell apart: its own post-login capabilities less OBJECTID,
    and a greeting that does not say Dovecot (so no X-GUID either)."""
    user, password = "capabilities", "capabilities-pw"
    dovecot.add_user(user, password)
    ctx = ssl.create_default_context(cafile=dovecot.ca_file)
    with IMAPClient("127.0.0.1", dovecot.ssl_port, ssl=True, ssl_context=ctx, timeout=10) as c:
        c.login(user, password)
        caps = [cap.decode() for cap in c.capabilities()]
    server = Dovecot(capability=" ".join(cap for cap in caps if cap.upper() != "OBJECTID"), owner_pid=os.getpid())
    server.dir = Path(tempfile.mkdtemp(prefix="oaken-dovecot-"))
    os.chmod(server.dir, 0o755)  # as Dovecot.start() makes it: its unprivileged processes reach in
    server._write_config()
    with server.conf.open("a") as f:
        f.write("login_greeting = Mail server ready.\n")
    server.start()
    yield server
    server.stop(remove=True)


@pytest.fixture
def box(request: pytest.FixtureRequest, oaken_home: Path) -> Mailbox:
    server = request.getfixturevalue("dovecot" if request.param == "ids" else "dovecot_unnamed")
    return _mailbox(server, oaken_home)


def _store(box: Mailbox):
    return open_store(config_mod.resolve_data_dir(box.config()))


def _ids(box: Mailbox) -> dict[str, int]:
    """Message-ID -> oaken's id of every stored message."""
    with _store(box) as store:
        return {store.meta(m).message_id or "": m for m in store.message_ids_in(store.account_id("test"))}


def _mid(raw: bytes) -> str:
    return envelope.read(raw).message_id or ""


def _folder(report: SyncReport, name: str):
    return next(f for f in report.folders if f.folder == name)


def _triage(box: Mailbox, message: int, **fields: Any) -> Any:
    cfg = box.config()
    with _store(box) as store:
        with store.transaction():
            store.set_triage(message, categories=cfg.triage.categories, **fields)
        return store.meta(message).triage


def _uids(box: Mailbox, folder: str) -> list[int]:
    with box.client() as c:
        c.select_folder(folder, readonly=True)
        return sorted(c.search("ALL"))


def _expunge(box: Mailbox, folder: str, uids: list[int]) -> None:
    with box.client() as c:
        c.select_folder(folder)
        c.delete_messages(uids)
        c.expunge()


def _rename(box: Mailbox, old: str, new: str) -> None:
    with box.client() as c:
        c.rename_folder(old, new)
        c.subscribe_folder(new)


@pytest.mark.parametrize("box", KINDS, indirect=True)
def test_each_path_is_the_one_under_test(box: Mailbox):
    conn = connect(box.config().accounts["test"])
    try:
        expected = b"X-GUID" if box.server.capability is None else None
        assert conn.mailbox_id_item == expected
        folders = {f.name: f for f in conn.list_folders()}
        assert (folders["INBOX"].mailbox_id is not None) == (expected is not None)
    finally:
        conn.close()


@pytest.mark.parametrize("box", KINDS, indirect=True)
@pytest.mark.parametrize("expunged", [1, 5], ids=["oldest", "oldest-five"])
def test_renamed_while_its_oldest_messages_were_expunged_keeps_ids_and_triage(box: Mailbox, real_mail, expunged):
    """The probe's repro: triage a message, expunge the lowest UID(s) of its folder, RENAME the
    folder, SUBSCRIBE the new name, sync."""
    box.fill("INBOX", real_mail[:2])
    box.fill("Projects", real_mail[2:14])
    cfg = box.config()
    sync(cfg)
    before = _ids(box)
    kept = real_mail[2 + expunged]  # the oldest message left after the expunge
    triage = _triage(box, before[_mid(kept)], category="work", priority=2, disposition="archived")
    _expunge(box, "Projects", _uids(box, "Projects")[:expunged])
    _rename(box, "Projects", "Projects 2024")
    report = sync(cfg)
    assert report.renamed == (("Projects", "Projects 2024"),) and report.deleted == ()
    assert sum(f.bytes for f in report.folders) == 0, "the renamed folder's mail was downloaded again"
    assert _folder(report, "Projects 2024").expunged == expunged
    assert_mirrored(box, cfg)
    after = _ids(box)
    gone = {_mid(m) for m in real_mail[2:2 + expunged]}
    assert after == {mid: i for mid, i in before.items() if mid not in gone}, "oaken ids changed"
    with _store(box) as store:
        assert store.meta(after[_mid(kept)]).triage == triage
        assert "Projects 2024" in store.meta(after[_mid(kept)]).folders


@pytest.mark.parametrize("box", KINDS, indirect=True)
def test_renamed_while_new_mail_arrived_downloads_only_the_new_mail(box: Mailbox, real_mail):
    box.fill("INBOX", real_mail[:2])
    box.fill("Projects", real_mail[2:12])
    cfg = box.config()
    sync(cfg)
    before = _ids(box)
    triage = _triage(box, before[_mid(real_mail[2])], priority=3)
    _rename(box, "Projects", "Projects 2024")
    box.fill("Projects 2024", real_mail[12:14])
    report = sync(cfg)
    assert report.renamed == (("Projects", "Projects 2024"),) and report.deleted == ()
    folder = _folder(report, "Projects 2024")
    assert folder.new == 2 and folder.bytes == sum(len(m) for m in real_mail[12:14])
    assert_mirrored(box, cfg)
    after = _ids(box)
    assert {mid: after[mid] for mid in before} == before
    with _store(box) as store:
        assert store.meta(after[_mid(real_mail[2])]).triage == triage


@pytest.mark.parametrize("box", KINDS, indirect=True)
def test_deleted_and_made_again_with_other_mail_is_not_a_rename(box: Mailbox, real_mail):
    box.fill("INBOX", real_mail[:1])
    box.fill("Box", real_mail[1:6])
    cfg = box.config()
    sync(cfg)
    with box.client() as c:
        c.delete_folder("Box")
    box.fill("Box", real_mail[20:25])
    report = sync(cfg)
    assert report.renamed == ()
    folder = _folder(report, "Box")
    assert folder.new == 5 and folder.matched == 0
    if box.server.capability is None:  # another mailbox under the name: the old folder is dropped
        assert report.deleted == ("Box",) and not folder.uidvalidity_changed
    else:  # no ids: the name's new UIDVALIDITY, nothing matched again, the old locations expunged
        assert report.deleted == () and folder.uidvalidity_changed and folder.expunged == 5
    assert_mirrored(box, cfg)
    ids = _ids(box)
    assert not {_mid(m) for m in real_mail[1:6]} & set(ids)
    assert {_mid(m) for m in real_mail[20:25]} <= set(ids)


@pytest.mark.parametrize("box", KINDS, indirect=True)
def test_deleted_and_another_made_with_the_same_uidvalidity_is_not_a_rename(box: Mailbox, real_mail):
    """Without ids the sample decides: a new folder that happens to have the old one's UIDVALIDITY
    (and more UIDs) holds other messages at the sampled UIDs."""
    box.fill("INBOX", real_mail[:1])
    box.fill("Old", real_mail[1:5])
    cfg = box.config()
    sync(cfg)
    with box.client() as c:
        old_uv = c.folder_status("Old", ["UIDVALIDITY"])[b"UIDVALIDITY"]
        c.delete_folder("Old")
    box.fill("New", real_mail[10:18])
    box.doveadm("mailbox update", "--uid-validity", str(old_uv), "New")
    with box.client() as c:
        assert c.folder_status("New", ["UIDVALIDITY"])[b"UIDVALIDITY"] == old_uv
    report = sync(cfg)
    assert report.renamed == () and report.deleted == ("Old",)
    assert _folder(report, "New").new == 8
    assert_mirrored(box, cfg)
    assert not {_mid(m) for m in real_mail[1:5]} & set(_ids(box))


@pytest.mark.parametrize("box", KINDS, indirect=True)
def test_deleted_and_made_again_with_the_same_mail(box: Mailbox, real_mail):
    """With mailbox ids the folder is a new one and is downloaded, but the messages it holds are
    the ones stored before: they keep their ids and triage (a message left with no folder is
    deleted only at the end of the pass, and found again by Message-ID and content). Without ids
    oaken cannot tell it from the same folder renumbered (a new UIDVALIDITY): its messages are
    matched again by Message-ID and size, without downloading, and keep their ids and triage."""
    box.fill("INBOX", real_mail[:1])
    box.fill("Box", real_mail[1:6])
    cfg = box.config()
    sync(cfg)
    before = _ids(box)
    triage = _triage(box, before[_mid(real_mail[2])], category="work", disposition="archived")
    with box.client() as c:
        c.delete_folder("Box")
    box.fill("Box", real_mail[1:6])
    report = sync(cfg)
    assert report.renamed == ()
    folder = _folder(report, "Box")
    after = _ids(box)
    assert set(after) == set(before)
    if box.server.capability is None:
        assert report.deleted == ("Box",)
        assert (folder.new, folder.matched) == (5, 0) and folder.bytes == sum(len(m) for m in real_mail[1:6])
        assert after == before  # before deferred orphans: five new ids, the triage gone
        with _store(box) as store:
            assert store.meta(after[_mid(real_mail[2])]).triage == triage
    else:
        assert report.deleted == ()
        assert folder.uidvalidity_changed and (folder.new, folder.matched, folder.bytes) == (0, 5, 0)
        assert after == before
        with _store(box) as store:
            assert store.meta(after[_mid(real_mail[2])]).triage == triage
    assert_mirrored(box, cfg)


@pytest.mark.parametrize("box", KINDS, indirect=True)
def test_renamed_and_a_new_folder_made_under_the_old_name(box: Mailbox, real_mail):
    """A renamed to B, a new A made: B is the old A (ids and triage kept, nothing downloaded), A is
    new (downloaded). Without ids, A's changed UIDVALIDITY sends oaken looking for its mailbox."""
    box.fill("INBOX", real_mail[:1])
    box.fill("A", real_mail[1:9])
    cfg = box.config()
    sync(cfg)
    before = _ids(box)
    triage = _triage(box, before[_mid(real_mail[2])], priority=1)
    _expunge(box, "A", _uids(box, "A")[:1])
    _rename(box, "A", "B")
    box.fill("A", real_mail[20:23])
    report = sync(cfg)
    assert report.renamed == (("A", "B"),) and report.deleted == ()
    assert _folder(report, "B").bytes == 0
    assert _folder(report, "A").new == 3 and _folder(report, "A").bytes == sum(len(m) for m in real_mail[20:23])
    assert_mirrored(box, cfg)
    after = _ids(box)
    assert {_mid(m): after[_mid(m)] for m in real_mail[2:9]} == {_mid(m): before[_mid(m)] for m in real_mail[2:9]}
    assert _mid(real_mail[1]) not in after  # the expunged one
    with _store(box) as store:
        assert store.meta(after[_mid(real_mail[2])]).triage == triage
        assert store.meta(after[_mid(real_mail[2])]).folders == ("B",)


@pytest.mark.parametrize("box", KINDS, indirect=True)
def test_two_folders_that_traded_names(box: Mailbox, real_mail):
    box.fill("INBOX", real_mail[:1])
    box.fill("Left", real_mail[1:7])
    box.fill("Right", real_mail[7:12])
    cfg = box.config()
    sync(cfg)
    before = _ids(box)
    with box.client() as c:
        c.rename_folder("Left", "Swap")
        c.rename_folder("Right", "Left")
        c.rename_folder("Swap", "Right")
    report = sync(cfg)
    assert sorted(report.renamed) == [("Left", "Right"), ("Right", "Left")] and report.deleted == ()
    assert sum(f.bytes for f in report.folders) == 0
    assert_mirrored(box, cfg)
    assert _ids(box) == before
    with _store(box) as store:
        assert store.meta(before[_mid(real_mail[1])]).folders == ("Right",)


def test_folders_of_a_raw_db_made_before_mailbox_ids_get_theirs(imap_box: Mailbox, real_mail):
    """A raw.db synced before the mailbox id column has none: folders gone meanwhile are compared
    by their messages, and every folder takes its id at its next sync."""
    imap_box.fill("INBOX", real_mail[:1])
    imap_box.fill("Projects", real_mail[1:9])
    cfg = imap_box.config()
    sync(cfg)
    with _store(imap_box) as store:
        with store.transaction():
            store.db.execute("UPDATE folders SET mailbox_id = NULL")
    before = _ids(imap_box)
    _expunge(imap_box, "Projects", _uids(imap_box, "Projects")[:1])
    _rename(imap_box, "Projects", "Projects 2024")
    report = sync(cfg)
    assert report.renamed == (("Projects", "Projects 2024"),)
    assert sum(f.bytes for f in report.folders) == 0
    with _store(imap_box) as store:
        folders = store.folders(store.account_id("test"))
        assert {f.name for f in folders} == {"INBOX", "Projects 2024"}
        assert all(f.mailbox_id for f in folders)
    assert {mid: i for mid, i in _ids(imap_box).items()} == {
        mid: i for mid, i in before.items() if mid != _mid(real_mail[1])}


def test_a_server_refusing_the_id_item_is_sampled(imap_box: Mailbox, real_mail, monkeypatch):
    """A server that greets like Dovecot but refuses X-GUID: one warning, then folders by messages."""
    from oaken.sync import imap

    imap_box.fill("INBOX", real_mail[:2])
    cfg = imap_box.config()
    monkeypatch.setattr(imap, "mailbox_id_item", lambda caps, greeting: b"X-NO-SUCH-ITEM")
    report = sync(cfg)
    assert report.new == 2
    with _store(imap_box) as store:
        assert not any(f.mailbox_id for f in store.folders(store.account_id("test")))
    assert_mirrored(imap_box, cfg)


# ---- a real OBJECTID server: pymap (MAILBOXID), where it is installed --------------------------

def _pymap():
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
        from pymap_server import Pymap  # scripts/pymap_server.py, pymap from PyPI

        import pymap  # noqa: F401
    except ImportError:
        return None
    return Pymap


@pytest.fixture(scope="session")
def pymap_server() -> Iterator[Any]:
    Pymap = _pymap()
    if Pymap is None:
        pytest.skip("pymap (a server with OBJECTID) is not installed")
    server = Pymap(owner_pid=os.getpid())
    server.start()
    yield server
    server.stop(remove=True)


class _PymapBox(Mailbox):
    def client(self, port: int | None = None) -> IMAPClient:
        ctx = ssl.create_default_context(cafile=self.server.ca_file)
        c = IMAPClient("127.0.0.1", self.server.port, ssl=False, timeout=10)
        c.starttls(ctx)
        c.login(self.user, self.password)
        return c

    def account(self, **over: Any) -> dict[str, Any]:
        acc: dict[str, Any] = {
            "host": "127.0.0.1", "port": self.server.port, "tls": "starttls", "ca_file": self.server.ca_file,
            "username": self.user, "password_command": f"printf %s {self.password}",
            "timeout_seconds": 5.0, "batch_size": 10,
        }
        acc.update(over)
        return acc


@pytest.fixture
def pymap_box(pymap_server: Any, oaken_home: Path) -> Mailbox:
    user = f"p{os.getpid()}x{len(pymap_server.users) + 1}"
    password = f"pw-{user}-secret"
    pymap_server.add_user(user, password)
    return _PymapBox(pymap_server, user, password, oaken_home)  # type: ignore[arg-type]


def _message_ids(box: Mailbox, folder: str) -> set[str]:
    with box.client() as c:
        c.select_folder(folder, readonly=True)
        return {envelope.message_ids(v[b"BODY[HEADER.FIELDS (MESSAGE-ID)]"].decode())[0]
                for v in c.fetch(c.search("ALL"), ["BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"]).values()}


def test_mailboxid_of_an_objectid_server(pymap_box: Mailbox, real_mail):
    """pymap offers OBJECTID: renamed while its oldest message was expunged, the folder is found by
    its MAILBOXID; deleted and made again with the same mail, it is a new folder."""
    box = pymap_box
    box.fill("INBOX", real_mail[:1])
    box.fill("Projects", real_mail[1:9])
    box.fill("Box", real_mail[10:13])
    with box.client() as c:
        c.subscribe_folder("Projects")
        c.subscribe_folder("Box")
    cfg = box.config()
    sync(cfg)
    before = _ids(box)
    triage = _triage(box, before[_mid(real_mail[2])], category="work", priority=2)
    _expunge(box, "Projects", _uids(box, "Projects")[:1])
    _rename(box, "Projects", "Projects 2024")
    with box.client() as c:
        c.delete_folder("Box")
    box.fill("Box", real_mail[10:13])
    with box.client() as c:
        c.subscribe_folder("Box")
    report = sync(cfg)
    assert report.renamed == (("Projects", "Projects 2024"),) and report.deleted == ("Box",)
    assert _folder(report, "Projects 2024").bytes == 0 and _folder(report, "Box").new == 3
    after = _ids(box)
    assert {mid: after[mid] for mid in _message_ids(box, "Projects 2024")} == {
        mid: before[mid] for mid in _message_ids(box, "Projects 2024")}
    # the same mail in the new Box: the messages stored before, found again (ids kept)
    assert {after[_mid(m)] for m in real_mail[10:13]} == {before[_mid(m)] for m in real_mail[10:13]}
    with _store(box) as store:
        assert store.meta(after[_mid(real_mail[2])]).triage == triage
    conn = connect(cfg.accounts["test"])
    try:
        assert conn.mailbox_id_item == b"MAILBOXID"
    finally:
        conn.close()


def test_a_message_moved_to_a_folder_synced_later_keeps_its_id_and_triage(imap_box, real_mail):
    """Another client's MOVE is an expunge in one folder and an APPEND in another. When the source
    is synced first, the message is in no folder for a moment; it used to be deleted then and
    stored again under a new id from the folder synced next, its triage lost."""
    imap_box.fill("INBOX", real_mail[:1])
    imap_box.fill("Zarchive", real_mail[1:4])
    cfg = imap_box.config()
    report = sync(cfg)
    # the move goes from the folder synced first to one synced after it (the server's LIST order)
    first, then = [f.folder for f in report.folders]
    before = _ids(imap_box)
    moved = _mid(real_mail[1] if first == "Zarchive" else real_mail[0])
    triage = _triage(imap_box, before[moved], category="work", disposition="archived")
    with imap_box.client() as c:
        c.select_folder(first)
        uid = next(u for u, d in c.fetch(c.search("ALL"), ["BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"]).items()
                   if moved.encode() in next(v for k, v in d.items() if k.startswith(b"BODY")))
        c.move([uid], then)
    report = sync(cfg)
    assert [f.folder for f in report.folders] == [first, then]
    assert _folder(report, first).expunged == 1 and _folder(report, then).new == 1
    after = _ids(imap_box)
    assert after == before
    with _store(imap_box) as store:
        assert store.meta(after[moved]).triage == triage
    assert_mirrored(imap_box, cfg)


def test_a_message_gone_from_every_folder_is_deleted_at_the_end_of_the_pass(imap_box, real_mail):
    imap_box.fill("INBOX", real_mail[:3])
    cfg = imap_box.config()
    sync(cfg)
    gone = _mid(real_mail[0])
    with imap_box.client() as c:
        c.select_folder("INBOX")
        c.delete_messages([min(c.search("ALL"))])
        c.expunge()
    sync(cfg)
    assert gone not in _ids(imap_box)
    assert_mirrored(imap_box, cfg)
