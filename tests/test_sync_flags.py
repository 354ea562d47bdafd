"""Local flag changes: pushed before the pull, never reverted, refused ones reported."""

from __future__ import annotations

from oaken import config as config_mod
from oaken.store import open_store
from oaken.sync.imap import connect
from oaken.sync.runner import sync
from tests.dovecot_fixtures import Mailbox, assert_mirrored


def _open(cfg: config_mod.Config):
    return open_store(config_mod.resolve_data_dir(cfg))


def _by_uid(store) -> list[int]:
    """Oaken ids of INBOX in server UID order."""
    inbox = store.folder(store.account_id("test"), "INBOX")
    return [m for _uid, (m, _f) in sorted(store.folder_uids(inbox.id, inbox.uidvalidity).items())]


def _synced(box: Mailbox, real_mail: list[bytes], n: int) -> config_mod.Config:
    """n messages in INBOX, mirrored once."""
    box.fill("INBOX", real_mail[:n])
    cfg = box.config()
    sync(cfg)
    return cfg


def _server_flags(box: Mailbox, folder: str = "INBOX") -> dict[str, set[str]]:
    return {mid: set(flags) for mid, f, flags in box.server_state() if f == folder}


def test_marking_read_is_pushed_before_the_pull_and_never_reverted(imap_box: Mailbox, real_mail):
    cfg = _synced(imap_box, real_mail, 5)
    with _open(cfg) as store, store.transaction():
        first = _by_uid(store)[0]
        mid = store.meta(first).message_id
        assert store.mark_read(first) == 1
    report = sync(cfg)
    assert report.folders[0].pushed == 1
    assert "\\Seen" in _server_flags(imap_box)[mid]
    assert_mirrored(imap_box, cfg)
    with _open(cfg) as store:
        assert not store.meta(first).unread
        assert not store.pending_flag_changes()


def test_flags_changed_and_messages_expunged_by_another_client_while_a_local_change_waits(
        imap_box: Mailbox, real_mail):
    cfg = _synced(imap_box, real_mail, 6)
    with _open(cfg) as store, store.transaction():
        ids = _by_uid(store)
        store.mark_read(ids[0])  # the other client flags this one meanwhile
        store.mark_read(ids[1])  # and expunges this one
        kept = store.meta(ids[0]).message_id
    with imap_box.client() as c:
        c.select_folder("INBOX")
        uids = c.search("ALL")
        c.add_flags(uids[0], ["\\Flagged"])
        c.delete_messages(uids[1])
        c.expunge()
    report = sync(cfg)
    assert report.folders[0].rejected == 0 and not report.rejected_flag_changes
    assert _server_flags(imap_box)[kept] == {"\\Seen", "\\Flagged"}  # both changes, neither lost
    assert_mirrored(imap_box, cfg)
    with _open(cfg) as store:
        assert not store.pending_flag_changes()


def test_a_change_the_server_refuses_is_reported_and_kept(imap_box: Mailbox, real_mail):
    cfg = _synced(imap_box, real_mail, 2)
    with _open(cfg) as store, store.transaction():
        message = _by_uid(store)[0]
        location = store.locations(message)[0].id
        store.queue_flag_change(location, "+", "\\Recent")  # no client may set \Recent: BAD
    report = sync(cfg)
    assert report.folders[0].rejected == 1
    assert [(m, op, flag) for m, op, flag, _e in report.rejected_flag_changes] == [(message, "+", "\\Recent")]
    assert report.rejected_flag_changes[0][3]  # the server's reason
    with _open(cfg) as store:
        assert store.status()["flag_changes"]["rejected"] == 1
    assert_mirrored(imap_box, cfg)


def test_flag_push_without_condstore(basic_imap_box: Mailbox, real_mail):
    box = basic_imap_box
    cfg = _synced(box, real_mail, 3)
    with _open(cfg) as store, store.transaction():
        first = _by_uid(store)[0]
        mid = store.meta(first).message_id
        store.mark_read(first)
    assert sync(cfg).folders[0].pushed == 1
    assert "\\Seen" in _server_flags(box)[mid]
    assert_mirrored(box, cfg)


def test_conditional_store_reports_a_message_changed_since_our_modseq(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:1])
    account = imap_box.config().accounts["test"]
    conn = connect(account)
    try:
        sel = conn.select("INBOX")
        uid = sel.uidnext - 1
        ours = conn.fetch([uid], b"UID FLAGS MODSEQ")[uid]
        with imap_box.client() as other:
            other.select_folder("INBOX")
            other.add_flags([uid], ["$Other"])
        stale = conn.store_flag(uid, "+", "\\Seen", unchangedsince=int(ours[b"MODSEQ"][0]))
        assert stale.ok and stale.modified  # refused by UNCHANGEDSINCE, not applied
        fresh = conn.fetch([uid], b"UID FLAGS MODSEQ")[uid]
        assert b"\\Seen" not in fresh[b"FLAGS"]
        done = conn.store_flag(uid, "+", "\\Seen", unchangedsince=int(fresh[b"MODSEQ"][0]))
        assert done.ok and not done.modified and set(done.flags or ()) - {"\\Recent"} == {"\\Seen", "$Other"}
    finally:
        conn.close()
