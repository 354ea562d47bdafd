"""Read state per server copy (issue #14 item 4): a message held twice in one folder and once in
another is unread while any copy lacks \\Seen, and opening it (as `oaken show` does) sets \\Seen on
every copy, each pushed to the server by its own UID; marking it unread clears every copy alike.

Real parts throughout: a real message APPENDed to a real Dovecot (tests/dovecot_fixtures.py),
`oaken.sync`, the keyword index and `oaken.search`, and `oaken.open` as `oaken show` calls it.
"""

from __future__ import annotations

import collections

import pytest

from oaken import api, envelope
from oaken import config as config_mod
from oaken.index import indexer
from oaken.search.engine import search
from oaken.store import SEEN, open_store
from oaken.sync.runner import sync
from tests.dovecot_fixtures import Mailbox, assert_mirrored

READ = frozenset({SEEN})
UNREAD: frozenset[str] = frozenset()


def keyword_config(box: Mailbox) -> config_mod.Config:
    """The box's account, searched by keywords alone (no model to load)."""
    return config_mod.from_dict({**box.config_dict(), "embedder": {"model": "none"}}, source="test-config")


def copies_on_server(box: Mailbox, message_id: str) -> collections.Counter:
    """(folder, flags) of every copy of one message on the server, read back over IMAP."""
    return collections.Counter({(folder, flags): n for (mid, folder, flags), n in box.server_state().items()
                                if mid == message_id})


def found(cfg: config_mod.Config, query: str) -> list[int]:
    indexer.update(cfg, keyword_only=True)
    return sorted(h.id for h in search(query, config=cfg, limit=20).hits)


def the_message(cfg: config_mod.Config, message_id: str) -> int:
    with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
        [m] = [m for m in store.message_ids_in(store.account_id("test")) if store.meta(m).message_id == message_id]
        return m


def held_three_times(box: Mailbox, raw: bytes, *, inbox: tuple[tuple[str, ...], tuple[str, ...]],
                     archive: tuple[str, ...]) -> None:
    """`raw` twice in INBOX (two UIDs, flags `inbox`) and once in Archive."""
    box.fill("INBOX", [raw], flags=inbox[0])
    box.fill("INBOX", [raw], flags=inbox[1])
    box.fill("Archive", [raw], flags=archive)


def test_a_copy_without_seen_keeps_it_unread_and_opening_it_reads_every_copy(imap_box: Mailbox,
                                                                            real_mail: list[bytes]) -> None:
    raw, other = real_mail[0], real_mail[1]
    mid, other_mid = envelope.read(raw).message_id, envelope.read(other).message_id
    assert mid and other_mid and mid != other_mid
    held_three_times(imap_box, raw, inbox=((), (SEEN,)), archive=())
    imap_box.fill("INBOX", [other], flags=(SEEN,))  # read everywhere: the control
    cfg = keyword_config(imap_box)
    sync(cfg)
    assert copies_on_server(imap_box, mid) == {("INBOX", READ): 1, ("INBOX", UNREAD): 1, ("Archive", UNREAD): 1}
    assert_mirrored(imap_box, cfg)
    message, control = the_message(cfg, mid), the_message(cfg, other_mid)

    # one message with three copies; the \Seen one does not make it read
    with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
        assert sorted((loc.folder, SEEN in loc.flags) for loc in store.locations(message)) == [
            ("Archive", False), ("INBOX", False), ("INBOX", True)]
        assert store.meta(message).unread and not store.meta(control).unread
        assert store.filter_messages([message, control], unread=True) == {message}
        assert store.filter_messages([message, control], unread=False) == {control}
        assert store.status()["accounts"]["test"]["unread"] == 1
    assert found(cfg, "is:unread") == [message]
    assert found(cfg, "is:read") == [control]

    opened = api.open(message, config=cfg)  # what `oaken show` does
    assert opened.was_unread and not opened.unread
    assert opened.queued == 2  # the two copies that lacked \Seen, each by its own location
    assert found(cfg, "is:unread") == []  # at once, before any sync
    assert found(cfg, "is:read") == sorted([message, control])

    report = sync(cfg)
    assert sum(f.pushed for f in report.folders) == 2 and not report.rejected_flag_changes
    assert copies_on_server(imap_box, mid) == {("INBOX", READ): 2, ("Archive", READ): 1}
    assert_mirrored(imap_box, cfg)
    with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
        assert not store.pending_flag_changes()
        assert not store.meta(message).unread
    assert found(cfg, "is:unread") == []


@pytest.mark.parametrize("server", ["imap_box", "condstore_imap_box", "basic_imap_box"])
def test_marking_unread_clears_seen_on_every_copy_and_reading_sets_it_again(
        server: str, request: pytest.FixtureRequest, real_mail: list[bytes]) -> None:
    """Both INBOX copies change together: two UIDs of one message pushed in one folder's pass,
    with QRESYNC, with CONDSTORE alone, and with neither."""
    box: Mailbox = request.getfixturevalue(server)
    raw = real_mail[2]
    mid = envelope.read(raw).message_id
    assert mid
    held_three_times(box, raw, inbox=((SEEN,), (SEEN,)), archive=(SEEN,))
    cfg = keyword_config(box)
    sync(cfg)
    message = the_message(cfg, mid)
    assert found(cfg, "is:read") == [message]

    with open_store(config_mod.resolve_data_dir(cfg)) as store, store.transaction():
        assert store.mark_read(message, read=False) == 3  # every copy, each queued on its own
        changes = store.pending_flag_changes()
        assert sorted((c.location, c.op, c.flag) for c in changes) == sorted(
            (loc.id, "-", SEEN) for loc in store.locations(message))
        inbox = store.folder(store.account_id("test"), "INBOX")
        assert len({c.uid for c in changes if c.folder_id == inbox.id}) == 2  # two UIDs in one folder
    assert found(cfg, "is:unread") == [message]
    report = sync(cfg)
    assert sum(f.pushed for f in report.folders) == 3 and not report.rejected_flag_changes
    assert copies_on_server(box, mid) == {("INBOX", UNREAD): 2, ("Archive", UNREAD): 1}
    assert_mirrored(box, cfg)

    # another client marks one INBOX copy read: the message stays unread while the others are not
    with box.client() as c:
        c.select_folder("INBOX")
        c.add_flags(c.search("ALL")[:1], [SEEN])
    sync(cfg)
    assert copies_on_server(box, mid) == {("INBOX", READ): 1, ("INBOX", UNREAD): 1, ("Archive", UNREAD): 1}
    assert found(cfg, "is:unread") == [message]

    opened = api.open(message, config=cfg)
    assert opened.was_unread and opened.queued == 2
    report = sync(cfg)
    assert sum(f.pushed for f in report.folders) == 2
    assert copies_on_server(box, mid) == {("INBOX", READ): 2, ("Archive", READ): 1}
    assert_mirrored(box, cfg)
    assert found(cfg, "is:read") == [message]


def test_mark_read_queues_one_change_per_copy_lacking_the_flag(imap_box: Mailbox, real_mail: list[bytes]) -> None:
    """Store level, on what sync stored: a copy already as wanted queues nothing; the rest queue one each."""
    raw = real_mail[3]
    mid = envelope.read(raw).message_id
    assert mid
    held_three_times(imap_box, raw, inbox=((), ()), archive=(SEEN,))
    cfg = keyword_config(imap_box)
    sync(cfg)
    message = the_message(cfg, mid)
    with open_store(config_mod.resolve_data_dir(cfg)) as store:
        inbox = store.folder(store.account_id("test"), "INBOX")
        with store.transaction():
            assert store.mark_read(message) == 2
        changes = store.pending_flag_changes()
        assert [c.folder_id for c in changes] == [inbox.id, inbox.id]
        assert sorted(c.uid for c in changes) == sorted(
            uid for uid, (m, _flags) in store.folder_uids(inbox.id, inbox.uidvalidity).items() if m == message)
        assert all(SEEN in loc.flags for loc in store.locations(message))
        with store.transaction():
            assert store.mark_read(message) == 0  # every copy read already
    sync(cfg)
    assert copies_on_server(imap_box, mid) == {("INBOX", READ): 2, ("Archive", READ): 1}
