"""Sync against a real Dovecot: first sync, new mail, flags, expunges, folders, UIDVALIDITY."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from imapclient import IMAPClient

from oaken import config as config_mod
from oaken.store import open_store
from oaken.sync.runner import sync
from tests.dovecot_fixtures import Mailbox, assert_mirrored


def _store(cfg: config_mod.Config):
    return open_store(config_mod.resolve_data_dir(cfg))


def test_first_sync_mirrors_subscribed_folders_but_junk_and_trash_and_never_marks_read(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:20])
    imap_box.fill("Lists/notmuch", real_mail[20:30], flags=("\\Flagged", "$Work"))
    imap_box.fill("Junk", real_mail[30:33])
    imap_box.fill("Trash", real_mail[33:35])
    with imap_box.client() as c:
        c.create_folder("Unsubscribed")
        c.append("Unsubscribed", real_mail[35])
    cfg = imap_box.config()
    report = sync(cfg)
    assert {f.folder for f in report.folders} == {"INBOX", "Lists/notmuch"}
    assert report.new == 30
    assert_mirrored(imap_box, cfg)
    # BODY.PEEK[]: the server still has every message unread
    assert not any("\\Seen" in flags for _m, _f, flags in imap_box.server_state())
    with _store(cfg) as store:
        meta = store.meta(store.message_ids_in(store.account_id("test"))[-1])
        assert "Lists/notmuch" in meta.labels and "$Work" in meta.labels and meta.starred and meta.unread


def test_new_mail_flag_changes_and_expunges_and_unchanged_folders_skipped(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:15])
    imap_box.fill("Archive", real_mail[15:25])
    cfg = imap_box.config()
    sync(cfg)
    again = sync(cfg)
    assert again.skipped == 2 and not again.changed
    with imap_box.client() as c:
        c.select_folder("INBOX")
        uids = c.search("ALL")
        c.add_flags(uids[:4], ["\\Seen", "$Label1"])
        c.remove_flags(uids[:1], ["\\Seen"])
        c.delete_messages(uids[10:13])
        c.expunge()
        c.append("INBOX", real_mail[25])
    report = sync(cfg)
    inbox = next(f for f in report.folders if f.folder == "INBOX")
    assert (inbox.new, inbox.flags, inbox.expunged) == (1, 4, 3)
    assert next(f for f in report.folders if f.folder == "Archive").skipped
    assert_mirrored(imap_box, cfg)


@pytest.mark.parametrize("kind", ["basic", "condstore"])
def test_servers_without_qresync_or_list_status_are_mirrored_too(kind: str, request, real_mail):
    """basic: no CONDSTORE either (all flags fetched, UID sets compared); condstore: CHANGEDSINCE."""
    box: Mailbox = request.getfixturevalue(f"{kind}_imap_box")
    box.fill("INBOX", real_mail[:12])
    box.fill("Work", real_mail[12:18])
    cfg = box.config()
    sync(cfg)
    assert_mirrored(box, cfg)
    again = sync(cfg)
    assert again.skipped == (2 if kind == "condstore" else 0)  # STATUS cannot see flag changes without it
    with box.client() as c:
        assert c.has_capability("CONDSTORE") == (kind == "condstore")
        assert not c.has_capability("QRESYNC") and not c.has_capability("LIST-STATUS")
        c.select_folder("INBOX")
        uids = c.search("ALL")
        c.add_flags(uids[2:5], ["\\Answered"])
        c.delete_messages(uids[:2])
        c.expunge()
        c.append("INBOX", real_mail[20], flags=["\\Seen"])
    report = sync(cfg)
    inbox = next(f for f in report.folders if f.folder == "INBOX")
    assert (inbox.new, inbox.flags, inbox.expunged) == (1, 3, 2)
    assert_mirrored(box, cfg)


def test_include_and_exclude_patterns(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:3])
    imap_box.fill("Work/a", real_mail[3:5])
    imap_box.fill("Work/b", real_mail[5:7])
    imap_box.fill("Junk", real_mail[7:9])
    cfg = imap_box.config(folders=["INBOX", "Work/*", "Junk"], exclude=["Work/b"])
    report = sync(cfg)
    assert {f.folder for f in report.folders} == {"INBOX", "Work/a", "Junk"}


def test_one_message_in_two_folders_is_stored_once_with_two_locations(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:3])
    imap_box.fill("All Mail", real_mail[:3])
    cfg = imap_box.config()
    sync(cfg)
    assert_mirrored(imap_box, cfg)
    with _store(cfg) as store:
        ids = store.message_ids_in(store.account_id("test"))
        assert len(ids) == 3
        assert all(store.meta(i).folders == ("All Mail", "INBOX") for i in ids)


def test_renamed_folder_is_mirrored_without_downloading_and_deleted_folder_is_dropped(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:2])
    imap_box.fill("Projects", real_mail[2:12])
    imap_box.fill("Old", real_mail[12:15])
    cfg = imap_box.config()
    sync(cfg)
    with _store(cfg) as store:
        before = sorted(store.message_ids_in(store.account_id("test")))
    with imap_box.client() as c:
        c.rename_folder("Projects", "Projects 2024")
        c.subscribe_folder("Projects 2024")
        c.delete_folder("Old")
    report = sync(cfg)
    assert report.renamed == (("Projects", "Projects 2024"),)
    assert report.deleted == ("Old",)
    assert sum(f.bytes for f in report.folders) == 0, "a renamed folder's mail was downloaded again"
    assert_mirrored(imap_box, cfg)
    with _store(cfg) as store:
        after = sorted(store.message_ids_in(store.account_id("test")))
    assert set(after) < set(before) and len(after) == 12


def test_uidvalidity_change_rematches_without_download_duplicate_or_loss(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:20])
    cfg = imap_box.config()
    sync(cfg)
    with _store(cfg) as store:
        before = sorted(store.message_ids_in(store.account_id("test")))
    with imap_box.client() as c:
        c.select_folder("INBOX")
        uids = c.search("ALL")
        c.add_flags(uids[:2], ["\\Seen"])
        c.delete_messages(uids[-1:])
        c.expunge()
        c.close_folder()
        uv = c.select_folder("INBOX")[b"UIDVALIDITY"]
    imap_box.doveadm("mailbox update", "--uid-validity", str(uv + 1000), "INBOX")
    imap_box.fill("INBOX", real_mail[20:22])
    report = sync(cfg)
    inbox = report.folders[0]
    assert inbox.uidvalidity_changed
    assert inbox.matched == 19 and inbox.new == 2 and inbox.expunged == 1
    assert inbox.bytes == sum(len(m) for m in real_mail[20:22]), "matched messages were downloaded again"
    assert_mirrored(imap_box, cfg)
    with _store(cfg) as store:
        after = sorted(store.message_ids_in(store.account_id("test")))
        assert store.folder(store.account_id("test"), "INBOX").uidvalidity == uv + 1000
    assert set(before) - set(after) and len(set(before) & set(after)) == 19, "Oaken ids kept for matched mail"


def test_deleted_and_recreated_folder_is_a_new_folder_and_is_mirrored(imap_box: Mailbox, real_mail):
    """Dovecot names the new mailbox with another X-GUID: the old folder is dropped and the new one
    mirrored, though three messages are the same (tests/test_folder_identity.py has the rest)."""
    imap_box.fill("INBOX", real_mail[:1])
    imap_box.fill("Box", real_mail[1:6])
    cfg = imap_box.config()
    sync(cfg)
    with imap_box.client() as c:
        c.delete_folder("Box")
    imap_box.fill("Box", real_mail[3:8])
    report = sync(cfg)
    assert report.deleted == ("Box",) and report.renamed == ()
    box = next(f for f in report.folders if f.folder == "Box")
    assert not box.uidvalidity_changed and box.matched == 0 and box.new == 5
    assert_mirrored(imap_box, cfg)


def test_dovecot_script_starts_and_stops_a_private_server():
    script = Path(__file__).resolve().parent.parent / "scripts" / "dovecot.py"
    started = subprocess.run([sys.executable, str(script), "start"], capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    state = json.loads(started.stdout)
    try:
        ctx = ssl.create_default_context(cafile=state["ca_file"])
        with IMAPClient("127.0.0.1", state["ssl_port"], ssl=True, ssl_context=ctx, timeout=5) as c:
            user, password = next(iter(state["users"].items()))
            c.login(user, password)
            assert c.has_capability("QRESYNC")
        plain = IMAPClient("127.0.0.1", state["port"], ssl=False, timeout=5)
        plain.starttls(ctx)
        plain.login(user, password)
        plain.logout()
    finally:
        stopped = subprocess.run([sys.executable, str(script), "stop", state["dir"]], capture_output=True,
                                 text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert not Path(state["dir"]).exists()


class _Progress:
    def __init__(self) -> None:
        self.total: int | None = None
        self.done = 0

    def set_total(self, total: int) -> None:
        self.total = total

    def __call__(self, n: int) -> None:
        self.done += n


def test_first_sync_announces_its_total_and_advances_per_batch(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:23])
    imap_box.fill("Other", real_mail[23:30])
    cfg = imap_box.config(batch_size=5)
    bar = _Progress()
    sync(cfg, progress=bar)
    assert (bar.total, bar.done) == (30, 30)
    later = _Progress()
    imap_box.fill("INBOX", real_mail[30:31])
    sync(cfg, progress=later)
    assert (later.total, later.done) == (0, 1)  # no bar for an incremental sync: nothing to announce


def _untimed(answer: tuple) -> tuple:
    """A tagged answer without the timings Dovecot appends to its text, which differ run to run."""
    import re

    typ, text, untagged = answer
    return typ, re.sub(rb" \([0-9.+ ]+ secs\)", b"", text), untagged


def test_fast_body_fetch_parser_agrees_with_imapclient_and_falls_back(imap_box: Mailbox, real_mail):
    from imapclient.response_parser import parse_fetch_response

    from oaken.sync.imap import connect
    from oaken.sync.imap_syntax import _fast_fetch

    imap_box.fill("INBOX", real_mail[:8], flags=("\\Flagged", "$Work"))
    conn = connect(imap_box.config().accounts["test"])
    try:
        conn.select("INBOX")
        line = b"UID FETCH 1:8 (UID FLAGS INTERNALDATE BODY.PEEK[] MODSEQ)"
        typ, text, untagged = conn.finish(conn.send(line), line)
        data = untagged["FETCH"]
        # the fast reader collects what imaplib collects, literal for literal, and leaves no tag open
        # (the tagged text carries Dovecot's timings, "(0.002 + 0.000 + 0.001 secs)": not compared)
        assert _untimed(conn._answer(conn.send(line), line)) == _untimed((typ, text, untagged))
        headers = b"UID FETCH 1:8 (BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)] BODY.PEEK[TEXT])"
        fast_answer = conn._answer(conn.send(headers), headers)
        assert _untimed(fast_answer) == _untimed(conn.finish(conn.send(headers), headers))
        assert not conn.client._imap.tagged_commands
    finally:
        conn.close()
    fast = _fast_fetch(data)
    general = parse_fetch_response(data, False, True)
    assert fast is not None and set(fast) == set(general) == set(range(1, 9))
    for uid, item in general.items():
        assert fast[uid][b"BODY[]"] == item[b"BODY[]"] and fast[uid][b"MODSEQ"] == item[b"MODSEQ"]
        assert set(fast[uid][b"FLAGS"]) == set(item[b"FLAGS"])
        assert fast[uid][b"INTERNALDATE"] == int(item[b"INTERNALDATE"].timestamp())
    assert _fast_fetch([(data[0][0].replace(b"BODY[]", b"BODY[TEXT]"), data[0][1]), b")"]) is None
    assert _fast_fetch([data[0], b" X-EXTRA 1)"]) is None


def test_stopped_between_batches_the_open_connection_serves_the_next_pass(imap_box: Mailbox, real_mail):
    """The batch read ahead (and the FETCH already sent) is drained, so the daemon's connection
    is left ready for its next command; the next pass resumes where the stop left off."""
    import threading

    from oaken.sync.runner import AccountSync, account_config

    imap_box.fill("INBOX", real_mail[:40])
    cfg = imap_box.config(batch_size=5)
    stop = threading.Event()
    syncer = AccountSync(cfg, account_config(cfg, None))
    try:
        first = syncer.run(stop=stop, on_batch=lambda n: stop.set())
        assert not first.complete and first.new == 5
        conn = syncer.conn
        assert conn is not None and not conn.client._imap.tagged_commands  # no answer left unread
        stop.clear()
        second = syncer.run(stop=stop)
        assert syncer.conn is conn and second.complete and second.new == 35
    finally:
        syncer.close()
    assert_mirrored(imap_box, cfg)


def test_junk_and_trash_by_their_usual_names_on_a_server_without_special_use(oaken_home: Path, real_mail):
    """A server that flags no folder \\Junk or \\Trash (no RFC 6154): its Junk, Spam, Trash and
    Deleted Items are still not searched by default; named exactly in `folders` they are. Where
    the server does flag its junk folder, another folder called Spam is the user's own: synced."""
    import os

    from scripts.dovecot import Dovecot
    from tests.dovecot_fixtures import _mailbox

    server = Dovecot(special_use=False, owner_pid=os.getpid()).start()
    try:
        box = _mailbox(server, oaken_home)
        for i, folder in enumerate(["INBOX", "Work", "Junk", "Deleted Items", "Lists/Spam", "Trash"]):
            box.fill(folder, real_mail[2 * i : 2 * i + 2])
        report = sync(box.config())
        assert {f.folder for f in report.folders} == {"INBOX", "Work"}
        report = sync(box.config(folders=["*", "Junk"]))
        assert {f.folder for f in report.folders} == {"INBOX", "Work", "Junk"}
    finally:
        server.stop(remove=True)


def test_a_folder_named_spam_is_synced_where_the_server_flags_its_junk_folder(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:2])
    imap_box.fill("Junk", real_mail[2:4])  # flagged \Junk by this server
    imap_box.fill("Spam", real_mail[4:6])  # a folder of the user's own
    report = sync(imap_box.config())
    assert {f.folder for f in report.folders} == {"INBOX", "Spam"}
