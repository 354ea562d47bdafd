"""A first sync stores INBOX first and each folder newest first; UIDNEXT waits until the oldest
batch is stored, and a pass interrupted half way resumes exactly, whatever changed meanwhile, on
servers with QRESYNC, with CONDSTORE only, and with neither."""

from __future__ import annotations

import threading

import pytest

from oaken import config as config_mod
from oaken.store import open_store
from oaken.sync.runner import AccountSync, account_config, sync
from tests.dovecot_fixtures import Mailbox, assert_mirrored


def _first_batch_only(cfg: config_mod.Config):
    """One pass stopped after its first stored batch."""
    stop = threading.Event()
    syncer = AccountSync(cfg, account_config(cfg, None))
    try:
        return syncer.run(stop=stop, on_batch=lambda _n: stop.set())
    finally:
        syncer.close()


def _inbox(cfg: config_mod.Config) -> tuple[list[int], int | None, dict[str, int]]:
    """INBOX's stored UIDs and UIDNEXT, and how many locations each folder has."""
    with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
        aid = store.account_id("test")
        counts = {f.name: len(store.folder_uids(f.id, f.uidvalidity)) for f in store.folders(aid)}
        inbox = store.folder(aid, "INBOX")
        assert inbox is not None
        return sorted(store.folder_uids(inbox.id, inbox.uidvalidity)), inbox.uidnext, counts


@pytest.mark.parametrize("server", ["imap_box", "condstore_imap_box", "basic_imap_box"])
def test_an_interrupted_first_sync_resumes_with_changes_made_meanwhile(request: pytest.FixtureRequest,
                                                                      real_mail: list[bytes], server: str):
    box: Mailbox = request.getfixturevalue(server)
    box.fill("Archive", real_mail[45:52])
    box.fill("INBOX", real_mail[:40])
    cfg = box.config(batch_size=10)
    first = _first_batch_only(cfg)
    assert not first.complete and first.new == 10
    uids, uidnext, counts = _inbox(cfg)
    assert uids == list(range(31, 41)) and uidnext == 1  # INBOX's newest batch; nothing else yet
    assert sum(counts.values()) == 10
    with box.client() as c:  # meanwhile: a stored and a missing message flagged, one of each expunged
        c.select_folder("INBOX")
        c.add_flags([35, 5], [b"\\Flagged"])
        c.delete_messages([38, 3])
        c.expunge()
    box.fill("INBOX", real_mail[40:45])  # and new mail, UIDs 41-45
    report = sync(cfg)
    assert report.complete
    assert report.new == 29 + 5 + 7  # INBOX 1-30 but 3, its new mail, Archive
    downloaded = real_mail[:2] + real_mail[3:30] + real_mail[40:52]
    assert sum(f.bytes for f in report.folders) == sum(len(m) for m in downloaded)  # nothing fetched twice
    inbox = next(f for f in report.folders if f.folder == "INBOX")
    assert (inbox.expunged, inbox.flags) == (1, 1)
    assert_mirrored(box, cfg)
    uids, uidnext, _ = _inbox(cfg)
    assert uidnext == 46 and len(uids) == 43
    again = sync(cfg)
    assert again.new == 0 and not any(f.expunged or f.flags for f in again.folders)
    assert_mirrored(box, cfg)


def test_the_first_batch_is_small_and_the_rest_follow_newest_first(imap_box: Mailbox, real_mail: list[bytes],
                                                                   monkeypatch: pytest.MonkeyPatch):
    from oaken.sync import folder

    monkeypatch.setattr(folder, "FIRST_BATCH", 4)
    imap_box.fill("INBOX", real_mail[:30])
    cfg = imap_box.config(batch_size=10)
    stored: list[list[int]] = []
    stop = threading.Event()

    def seen(_n: int) -> None:
        stored.append(_inbox(cfg)[0])
        if len(stored) == 2:
            stop.set()

    syncer = AccountSync(cfg, account_config(cfg, None))
    try:
        syncer.run(stop=stop, on_batch=seen)
    finally:
        syncer.close()
    assert stored == [list(range(27, 31)), list(range(17, 31))]
    assert sync(cfg).new == 16
    assert _inbox(cfg)[1] == 31
    assert_mirrored(imap_box, cfg)


class _Progress:
    def __init__(self) -> None:
        self.total: int | None = None
        self.done = 0

    def set_total(self, total: int) -> None:
        self.total = total

    def __call__(self, n: int) -> None:
        self.done += n


def test_a_resumed_first_sync_announces_what_is_left(imap_box: Mailbox, real_mail: list[bytes]):
    imap_box.fill("INBOX", real_mail[:30])
    cfg = imap_box.config(batch_size=10)
    assert _first_batch_only(cfg).new == 10
    bar = _Progress()
    assert sync(cfg, progress=bar).new == 20
    assert (bar.total, bar.done) == (20, 20)
    imap_box.fill("INBOX", real_mail[30:31])
    later = _Progress()
    assert sync(cfg, progress=later).new == 1
    assert later.total == 0  # an incremental sync announces nothing
