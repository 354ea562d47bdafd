"""Conformance: what a mail client relies on, run against every real server of
tests/pymap_fixtures.SERVERS (Dovecot, and pymap from PyPI), so that a server quirk is caught here
rather than by a user. Each case ends with raw.db compared to what the server holds
(Message-ID, folder, flags: `assert_mirrored`).

Where a server lacks an extension (pymap: CONDSTORE/QRESYNC, LIST-STATUS, ESEARCH, SPECIAL-USE,
arbitrary keywords) nothing is skipped: the case asserts that Oaken's fallback gives the same
mirror, and the first test pins which extensions each server offers (FEATURES), so each case is
known to exercise QRESYNC on Dovecot and the full flag fetch and UID comparison on pymap. See
docs/conformance.md.
"""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

from imapclient import IMAPClient

from oaken import config as config_mod
from oaken import envelope
from oaken.index import indexer
from oaken.reader import open_message
from oaken.search.engine import search
from oaken.store import open_store
from oaken.sync.folder import FolderReport
from oaken.sync.imap import Connection, connect, idle_wait
from oaken.sync.runner import AccountSync, SyncReport, account_config, sync
from tests.dovecot_fixtures import assert_mirrored, mirror_state
from tests.pymap_fixtures import ServerBox, pymap_server, server_box  # noqa: F401 - fixtures
from tests.tls_split_relay import TlsSplitRelay
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent


def _store(cfg: config_mod.Config):
    return open_store(config_mod.resolve_data_dir(cfg))


def _folder(report: SyncReport, name: str) -> FolderReport:
    return next(f for f in report.folders if f.folder == name)


def _by_uid(cfg: config_mod.Config, folder: str = "INBOX") -> list[int]:
    """Oaken ids of `folder` in server UID order."""
    with _store(cfg) as store:
        f = store.folder(store.account_id("test"), folder)
        return [m for _uid, (m, _fl) in sorted(store.folder_uids(f.id, f.uidvalidity).items())]


def _server_flags(box: ServerBox, folder: str = "INBOX") -> dict[str, set[str]]:
    return {mid: set(flags) for mid, f, flags in box.server_state([folder])}


def _no_change(report: SyncReport, folders: int, box: ServerBox) -> None:
    """A sync with nothing new on the server changes nothing and downloads nothing; with CONDSTORE
    STATUS proves each folder unchanged (not even selected), without it every folder is looked at."""
    assert not report.changed, report
    assert sum(f.bytes for f in report.folders) == 0
    assert report.skipped == (folders if box.features["condstore"] else 0)


def test_the_server_offers_the_extensions_this_suite_expects(server_box: ServerBox, real_mail):
    """Which of Oaken's paths the other cases exercise on this server. A server upgrade that adds
    or drops an extension fails here first: update FEATURES and docs/conformance.md."""
    conn = connect(server_box.config().accounts["test"])
    try:
        seen = {
            "condstore": conn.condstore,
            "qresync": conn.qresync,
            "list_status": conn.list_status,
            "esearch": "ESEARCH" in conn.caps,
            "special_use": "SPECIAL-USE" in conn.caps,
            "idle": "IDLE" in conn.caps,
        }
    finally:
        conn.close()
    with server_box.client() as c:
        seen["any_keyword"] = b"\\*" in c.select_folder("INBOX").get(b"PERMANENTFLAGS", ())
    server_box.fill("INBOX", real_mail[10:11])  # multipart, with a folded header line
    seen["same_bytes"] = list(server_box.bodies("INBOX").values()) == real_mail[10:11]
    assert seen == server_box.features


def test_oaken_stores_exactly_the_bytes_the_server_returns(server_box: ServerBox, real_mail):
    """raw.db holds BODY[] as the server sends it, whether or not the server kept the message as
    appended (pymap returns LF line ends and refolded headers; see FEATURES["same_bytes"])."""
    box = server_box
    box.fill("INBOX", real_mail[:8])
    cfg = box.config()
    sync(cfg)
    server = box.bodies("INBOX")
    with _store(cfg) as store:
        stored = {store.meta(i).message_id: store.raw(i) for i in _by_uid(cfg)}
    assert stored == server


def test_first_sync_mirrors_every_subscribed_folder_and_marks_nothing_read(server_box: ServerBox, real_mail):
    box = server_box
    box.fill("INBOX", real_mail[:12])
    box.fill("Lists/notmuch", real_mail[12:20], flags=("\\Flagged",))
    box.fill("Reçus 2024", real_mail[20:24], flags=("\\Answered", "\\Seen"))  # modified UTF-7 on the wire
    box.fill("Archive", real_mail[:3])  # the same mail in two folders: stored once, two locations
    box.fill("Empty", [])
    with box.client() as c:
        c.create_folder("Unsubscribed")
        c.append("Unsubscribed", real_mail[30])
    cfg = box.config()
    report = sync(cfg)
    assert report.complete
    assert {f.folder for f in report.folders} == {"INBOX", "Lists/notmuch", "Reçus 2024", "Archive", "Empty"}
    assert report.new == 12 + 8 + 4 + 3
    assert_mirrored(box, cfg)
    # BODY.PEEK[]: only the messages appended as \Seen are read on the server
    seen = {mid for mid, _f, flags in box.server_state() if "\\Seen" in flags}
    assert seen == {envelope.read(m).message_id for m in real_mail[20:24]}
    with _store(cfg) as store:
        ids = store.message_ids_in(store.account_id("test"))
        assert len(ids) == 24
        metas = {store.meta(i).message_id: store.meta(i) for i in ids}
    flagged = metas[envelope.read(real_mail[12]).message_id]
    assert "Lists/notmuch" in flagged.labels and flagged.starred and flagged.unread
    assert metas[envelope.read(real_mail[0]).message_id].folders == ("Archive", "INBOX")
    assert "Reçus 2024" in metas[envelope.read(real_mail[20]).message_id].folders
    _no_change(sync(cfg), 5, box)


def test_junk_and_trash_left_out_by_special_use_or_by_exclude(server_box: ServerBox, real_mail):
    """With SPECIAL-USE the server names \\Junk and \\Trash and Oaken leaves them out. Without it
    (pymap) Oaken goes by their usual names (oaken.sync.selection.USUAL_NAMES); `exclude` leaves
    out any folder by name."""
    box = server_box
    box.fill("INBOX", real_mail[:3])
    box.fill("Junk", real_mail[3:5])
    box.fill("Trash", real_mail[5:6])
    excluding = box.config(exclude=["Junk", "Trash"])
    report = sync(excluding)
    assert {f.folder for f in report.folders} == {"INBOX"}
    assert mirror_state(excluding) == box.server_state(["INBOX"])
    report = sync(box.config())
    assert {f.folder for f in report.folders} == {"INBOX"}
    assert_mirrored(box, box.config())
    report = sync(box.config(folders=["*", "Junk"]))  # named exactly: synced
    assert {f.folder for f in report.folders} == {"INBOX", "Junk"}
    assert _folder(report, "Junk").new == 2


def test_folder_names_that_need_quoting_or_modified_utf7(server_box: ServerBox, real_mail):
    names = ["[Gmail]/All Mail", 'Clients "A&B"', "Per%cent", "Back\\slash", "Ümlaut & Co", "a  two  spaces"]
    box = server_box
    box.fill("INBOX", real_mail[:1])
    for i, name in enumerate(names):
        box.fill(name, real_mail[1 + i : 3 + i])
    cfg = box.config()
    report = sync(cfg)
    assert {f.folder for f in report.folders} == {"INBOX", *names}
    assert_mirrored(box, cfg)
    _no_change(sync(cfg), 1 + len(names), box)


def test_a_message_expunged_by_another_client_during_the_download_is_not_stored(
    server_box: ServerBox, real_mail, monkeypatch
):
    """Another client expunges a message between Oaken's UID SEARCH and its body FETCH. Dovecot
    leaves it out of the FETCH answer; pymap sends `UID n RFC822.SIZE 0 FLAGS () BODY[] {0}` and a
    tagged OK, the "NIL FETCH responses" RFC 2180 section 4.1.3 allows. Either way the message is
    gone and must not enter raw.db as an empty one."""
    box = server_box  # before the fix (sync.fetcher.body_of) pymap's empty BODY[] was stored as a message
    box.fill("INBOX", real_mail[:6])
    cfg = box.config()
    original = Connection.search_uids
    expunged: list[int] = []

    def search_then_expunge(conn: Connection, criteria: bytes) -> list[int]:
        uids = original(conn, criteria)
        if criteria.startswith(b"UID ") and not expunged:
            with box.client() as c:
                c.select_folder("INBOX")
                c.delete_messages([uids[2]])
                c.expunge()
            expunged.append(uids[2])
        return uids

    with monkeypatch.context() as patch:  # not monkeypatch.undo(): that would drop OAKEN_HOME too
        patch.setattr(Connection, "search_uids", search_then_expunge)
        report = sync(cfg)
    assert expunged and report.complete
    mirrored = mirror_state(cfg)
    assert all(mid for mid, _f, _fl in mirrored), f"an empty message was stored: {sorted(mirrored)}"
    assert _folder(report, "INBOX").new == 5
    assert_mirrored(box, cfg)


def test_new_mail_expunges_and_flag_changes_on_the_server(server_box: ServerBox, real_mail):
    box = server_box
    box.fill("INBOX", real_mail[:15])
    box.fill("Archive", real_mail[15:20])
    cfg = box.config()
    sync(cfg)
    _no_change(sync(cfg), 2, box)
    with box.client() as c:
        c.select_folder("INBOX")
        uids = c.search("ALL")
        c.add_flags(uids[:4], ["\\Seen", "$Label1"])
        c.remove_flags(uids[:1], ["\\Seen"])
        c.add_flags(uids[5:6], ["\\Answered"])
        c.delete_messages(uids[10:13])
        c.expunge()
        c.append("INBOX", real_mail[25])
    report = sync(cfg)
    inbox = _folder(report, "INBOX")
    # uids 1-3 gain \Seen, uid 5 \Answered; uid 0 keeps only $Label1, which a server without
    # PERMANENTFLAGS \* (pymap) drops silently: then uid 0 did not change at all
    keyword = box.features["any_keyword"]
    assert (inbox.new, inbox.flags, inbox.expunged) == (1, 4 + keyword, 3)
    archive = _folder(report, "Archive")
    assert archive.skipped == box.features["condstore"]
    assert (archive.new, archive.flags, archive.expunged, archive.bytes) == (0, 0, 0, 0)
    assert_mirrored(box, cfg)
    with _store(cfg) as store:
        first = store.meta(_by_uid(cfg)[0])
    assert ("$Label1" in first.labels) == keyword
    _no_change(sync(cfg), 2, box)


def test_marking_read_in_oaken_reaches_the_server_beside_another_clients_changes(server_box: ServerBox, real_mail):
    box = server_box
    box.fill("INBOX", real_mail[:6])
    cfg = box.config()
    sync(cfg)
    ids = _by_uid(cfg)
    kept = open_message(ids[0], config=cfg)  # `oaken show`: read here at once, queued for the server
    assert kept.was_unread and not kept.unread and kept.queued == 1
    assert open_message(ids[1], config=cfg).queued == 1  # another client expunges this one meanwhile
    with box.client() as c:
        c.select_folder("INBOX")
        uids = c.search("ALL")
        c.add_flags(uids[0], ["\\Flagged"])
        c.delete_messages(uids[1])
        c.expunge()
    report = sync(cfg)
    inbox = _folder(report, "INBOX")
    assert (inbox.pushed, inbox.rejected, inbox.expunged) == (1, 0, 1) and not report.rejected_flag_changes
    assert _server_flags(box)[kept.message_id] == {"\\Seen", "\\Flagged"}  # both changes, neither lost
    assert_mirrored(box, cfg)
    with _store(cfg) as store:
        assert not store.pending_flag_changes()
        with store.transaction():
            assert store.mark_read(ids[0], read=False) == 1  # and unread again
    assert _folder(sync(cfg), "INBOX").pushed == 1
    assert _server_flags(box)[kept.message_id] == {"\\Flagged"}
    assert_mirrored(box, cfg)


def test_folder_created_renamed_and_deleted_on_the_server(server_box: ServerBox, real_mail):
    box = server_box
    box.fill("INBOX", real_mail[:2])
    box.fill("Projects", real_mail[2:10])
    box.fill("Old", real_mail[10:13])
    cfg = box.config()
    sync(cfg)
    with box.client() as c:
        c.rename_folder("Projects", "Projects 2024")
        c.subscribe_folder("Projects 2024")
        c.delete_folder("Old")
    box.fill("New/Sub", real_mail[13:16])
    report = sync(cfg)
    assert report.renamed == (("Projects", "Projects 2024"),)
    assert report.deleted == ("Old",)
    assert _folder(report, "New/Sub").new == 3
    # a renamed folder keeps its UIDVALIDITY: matched, not downloaded again
    assert sum(f.bytes for f in report.folders) == sum(len(b) for b in box.bodies("New/Sub").values())
    assert_mirrored(box, cfg)
    with _store(cfg) as store:
        assert len(store.message_ids_in(store.account_id("test"))) == 13


def test_uidvalidity_change_rematches_without_download_duplicate_or_loss(server_box: ServerBox, real_mail):
    box = server_box
    box.fill("INBOX", real_mail[:10])
    cfg = box.config()
    sync(cfg)
    with _store(cfg) as store:
        before = set(store.message_ids_in(store.account_id("test")))
    with box.client() as c:
        c.select_folder("INBOX")
        uids = c.search("ALL")
        c.add_flags(uids[:2], ["\\Seen"])
        c.delete_messages(uids[-1:])
        c.expunge()
    new_uv = box.change_uidvalidity("INBOX")
    box.fill("INBOX", real_mail[10:12])
    report = sync(cfg)
    inbox = _folder(report, "INBOX")
    assert inbox.uidvalidity_changed
    assert (inbox.matched, inbox.new, inbox.expunged) == (9, 2, 1)
    fresh = {envelope.read(m).message_id for m in real_mail[10:12]}
    assert inbox.bytes == sum(len(b) for mid, b in box.bodies("INBOX").items() if mid in fresh), (
        "matched messages were downloaded again"
    )
    assert_mirrored(box, cfg)
    with _store(cfg) as store:
        assert store.folder(store.account_id("test"), "INBOX").uidvalidity == new_uv
        after = set(store.message_ids_in(store.account_id("test")))
    assert len(before & after) == 9, "Oaken ids kept for the matched mail"


def test_deleted_and_recreated_folder_gets_a_new_uidvalidity_and_is_mirrored(server_box: ServerBox, real_mail):
    """The same name, a new mailbox (a new UIDVALIDITY), partly the same mail. Whether the engine
    matches the three messages again or drops the old folder and downloads the new one (it may know
    the mailbox is another by its MAILBOXID) is its choice, tested in tests/test_sync.py; what a
    client relies on is the mirror: the new folder's mail, nothing of the old one's that is gone."""
    box = server_box
    box.fill("INBOX", real_mail[:1])
    box.fill("Box", real_mail[1:6])
    cfg = box.config()
    sync(cfg)
    old_uv = box.uidvalidity("Box")
    with box.client() as c:
        c.delete_folder("Box")
    box.fill("Box", real_mail[3:8])
    new_uv = box.uidvalidity("Box")
    assert new_uv != old_uv
    report = sync(cfg)
    assert report.complete and _folder(report, "Box").new + _folder(report, "Box").matched == 5
    assert_mirrored(box, cfg)
    with _store(cfg) as store:
        assert store.folder(store.account_id("test"), "Box").uidvalidity == new_uv
    _no_change(sync(cfg), 2, box)


def test_keyword_search_finds_synced_mail_and_forgets_what_the_server_expunged(server_box: ServerBox, real_mail):
    box = server_box
    box.fill("INBOX", real_mail[:10])
    box.fill("Work", real_mail[10:14] + real_mail[1:2])  # real_mail[1]: "preliminary FreeBSD support"
    cfg = box.config()
    sync(cfg)
    indexer.keyword_pass(cfg)
    target = envelope.read(real_mail[1]).message_id

    def hits(query: str, **filters) -> list[str]:
        r = search(query, config=cfg, limit=20, retrievers=("keyword",), **filters)
        assert not r.degraded, (r.degraded_reason, r.warnings)
        return [h.message_id or "" for h in r.hits]

    assert hits('"preliminary FreeBSD support"')[:1] == [target]
    assert target in hits("FreeBSD", labels=["Work"])
    with box.client() as c:  # gone from INBOX, still in Work
        c.select_folder("INBOX")
        uid = next(
            u
            for u, item in c.fetch(c.search("ALL"), ["BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"]).items()
            if target in next(iter(v for k, v in item.items() if k.startswith(b"BODY["))).decode()
        )
        c.delete_messages([uid])
        c.expunge()
    sync(cfg)
    indexer.keyword_pass(cfg)
    assert target in hits("FreeBSD", labels=["Work"])
    assert target not in hits("FreeBSD", labels=["INBOX"])
    with box.client() as c:
        c.delete_folder("Work")
    sync(cfg)
    indexer.keyword_pass(cfg)
    assert target not in hits('"preliminary FreeBSD support"')
    assert_mirrored(box, cfg)


def test_idle_reports_mail_delivered_by_another_client(server_box: ServerBox, real_mail):
    """The daemon's wait (oaken/sync/idle.py idle_wait) on every server that offers IDLE."""
    box = server_box
    assert box.features["idle"], "a server without IDLE: the daemon polls (tests/test_no_idle.py)"
    box.fill("INBOX", real_mail[:1])
    conn = connect(box.config().accounts["test"])
    delivery = threading.Thread(target=box.fill, args=("INBOX", real_mail[1:2]))
    try:
        t0 = time.monotonic()
        assert idle_wait(conn, "INBOX", 10.0, on_started=delivery.start)
        assert time.monotonic() - t0 < 8.0
        conn.noop()  # the connection is usable after DONE
    finally:
        if delivery.ident is not None:  # started
            delivery.join(10)
        conn.close()


def test_idle_survives_responses_that_arrive_cut_in_two(server_box: ServerBox, real_mail):
    """A response whose line arrives in two TLS records (pymap writes one response in several; on a
    loaded machine they arrive apart) is read whole: imapclient's idle_check dropped the first part,
    and idle_done then aborted on the rest ('FLAGS ())'). tests/tls_split_relay.py cuts every
    answer of the server in the middle of its last line, so the cut is certain, not a matter of load."""
    box = server_box
    box.fill("INBOX", real_mail[:1])
    cert = Path(box.server.ca_file)
    with TlsSplitRelay(box.server.port, cert, cert.with_name("key.pem")) as relay:
        conn = connect(box.config(port=relay.port, tls="starttls").accounts["test"])
        delivery = threading.Thread(target=box.fill, args=("INBOX", real_mail[1:2]))
        try:
            assert idle_wait(conn, "INBOX", 10.0, on_started=delivery.start)
            delivery.join(10)
            assert relay.cuts, "the relay cut no answer in two"
            conn.noop()  # the session is intact after DONE: nothing was left half read
            assert len(conn.search_uids(b"ALL")) == 2
        finally:
            if delivery.ident is not None:
                delivery.join(10)
            conn.close()


def test_pymap_script_starts_and_stops_a_private_server():
    script = ROOT / "scripts" / "pymap_server.py"
    started = subprocess.run([sys.executable, str(script), "start"], capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    state = json.loads(started.stdout)
    try:
        ctx = ssl.create_default_context(cafile=state["ca_file"])
        user, password = next(iter(state["users"].items()))
        with IMAPClient("127.0.0.1", state["port"], ssl=False, timeout=5) as c:
            assert c.has_capability("STARTTLS")
            c.starttls(ctx)
            c.login(user, password)
            assert c.has_capability("IDLE")
    finally:
        stopped = subprocess.run(
            [sys.executable, str(script), "stop", state["dir"]], capture_output=True, text=True, timeout=60
        )
    assert stopped.returncode == 0, stopped.stderr
    assert not Path(state["dir"]).exists()


def test_a_connection_kept_open_across_passes_sees_every_change(server_box: ServerBox, real_mail):
    """The daemon keeps one connection for its sync passes (oaken/sync/runner.py AccountSync), with
    the last folder still selected between them (a server without UNSELECT gets a NOOP instead)."""
    box = server_box
    box.fill("INBOX", real_mail[:6])
    box.fill("Other", real_mail[6:9])
    cfg = box.config()
    syncer = AccountSync(cfg, account_config(cfg, None))
    try:
        syncer.run()
        conn = syncer.conn
        with box.client() as c:
            c.select_folder("Other")
            uids = c.search("ALL")
            c.add_flags(uids[:1], ["\\Seen"])
            c.delete_messages(uids[1:2])
            c.expunge()
            c.append("INBOX", real_mail[9])
            c.append("Other", real_mail[10])
        second = syncer.run()
        assert syncer.conn is conn
        assert (_folder(second, "INBOX").new, _folder(second, "Other").new) == (1, 1)
        assert (_folder(second, "Other").flags, _folder(second, "Other").expunged) == (1, 1)
        assert_mirrored(box, cfg)
        box.fill("INBOX", real_mail[11:12])
        third = syncer.run(only=["INBOX"])
        assert _folder(third, "INBOX").new == 1
        assert_mirrored(box, cfg)
    finally:
        syncer.close()


def test_the_daemon_idles_pushes_a_read_flag_and_stops_on_sigterm(server_box: ServerBox, real_mail, tmp_path: Path):
    """`oaken sync --daemon` as a process: the first sync, mail delivered while it waits in IDLE,
    a message read here marked read on the server, a clean exit on SIGTERM."""
    box = server_box
    box.fill("INBOX", real_mail[:5])
    box.fill("Other", real_mail[5:7])
    box.write_config()  # the daemon reads $OAKEN_HOME/config.toml
    cfg = config_mod.load()

    def count() -> int:
        try:
            with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
                return store.message_count()
        except Exception:  # noqa: BLE001 - raw.db not created yet
            return 0

    with open(tmp_path / "daemon.log", "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "oaken.cli", "sync", "--daemon", "--no-index"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
        )
    try:
        daemon_log = tmp_path / "daemon.log"
        wait_until("the first sync", lambda: count() == 7, log=daemon_log)
        box.fill("INBOX", real_mail[7:8])
        wait_until("IDLE to bring the new message (the poll interval is 30 s)", lambda: count() == 8, log=daemon_log)
        first = _by_uid(cfg)[0]
        with _store(cfg) as store, store.transaction():
            mid = store.meta(first).message_id
            store.mark_read(first)
        wait_until("the push", lambda: "\\Seen" in _server_flags(box)[mid])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, (tmp_path / "daemon.log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_mirrored(box, cfg)
