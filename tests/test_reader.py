"""Opening a message shows it and marks it read, locally at once and on the server via the queue."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import oaken
from oaken import config as config_mod
from oaken.errors import NotFound
from oaken.store import open_store
from oaken.sync.runner import sync
from tests.dovecot_fixtures import Mailbox, assert_mirrored

ROOT = Path(__file__).resolve().parent.parent


def _first(cfg: config_mod.Config) -> int:
    with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
        inbox = store.folder(store.account_id("test"), "INBOX")
        return min(store.folder_uids(inbox.id, inbox.uidvalidity).items())[1][0]


def test_open_returns_headers_and_text_and_marks_read_then_sync_tells_the_server(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:3])
    cfg = imap_box.config()
    sync(cfg)
    message = _first(cfg)
    peeked = oaken.open(message, peek=True, config=cfg)
    assert peeked.unread and peeked.was_unread and peeked.queued == 0
    opened = oaken.open(message, config=cfg)
    assert opened.was_unread and not opened.unread and opened.queued == 1
    headers = dict(opened.headers)
    assert headers["Subject"] == opened.subject and "Message-ID" in headers
    assert opened.text.strip() and opened.folders == ("INBOX",)
    with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
        assert not store.meta(message).unread
        assert len(store.pending_flag_changes()) == 1
    assert not any("\\Seen" in f for _m, _fo, f in imap_box.server_state())  # not yet: queued
    sync(cfg)
    seen = [mid for mid, _fo, f in imap_box.server_state() if "\\Seen" in f]
    assert seen == [opened.message_id]
    assert_mirrored(imap_box, cfg)
    again = oaken.open(message, config=cfg)
    assert not again.was_unread and again.queued == 0


def test_show_command_prints_the_message_and_peek_leaves_it_unread(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:2])
    imap_box.write_config()
    cfg = config_mod.load()
    sync(cfg)
    message = _first(cfg)

    def show(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "oaken.cli", "show", str(message), *extra],
                              capture_output=True, text=True, timeout=30, cwd=ROOT)

    out = show("--peek", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["unread"] and data["id"] == message
    out = show()
    assert out.returncode == 0 and out.stdout.startswith("From: ")
    assert "\nSubject: " + data["subject"] in out.stdout and data["text"].strip()[:40] in out.stdout
    with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
        assert not store.meta(message).unread
    missing = subprocess.run([sys.executable, "-m", "oaken.cli", "show", "999999"], capture_output=True,
                             text=True, timeout=30, cwd=ROOT)
    assert missing.returncode == 1 and "no message with id 999999" in missing.stderr


def test_open_of_an_unknown_id_names_it():
    with pytest.raises(NotFound, match="424242"):
        oaken.open(424242, config=config_mod.Config())
