"""A cold `oaken sync --once` that finds nothing new imports only what such a pass needs: not the
download machinery (folder sync, fetch thread, header worker, envelope parser), which a folder
that STATUS proves unchanged never uses. docs/sync-speed.md, goal (c)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.dovecot_fixtures import Mailbox

ROOT = Path(__file__).resolve().parent.parent
DOWNLOAD_ONLY = (
    "oaken.sync.folder",
    "oaken.sync.fetcher",
    "oaken.envelope",
    "oaken.sync.flag_push",
    "oaken.sync.rematch",
    "oaken.crashpoints",
)


def _imported(args: list[str]) -> tuple[set[str], str]:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "oaken.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return set(re.findall(r"^import time:.*\|\s*([\w.]+)$", out.stderr, re.M)), out.stdout


def test_a_sync_with_nothing_new_imports_no_download_machinery(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:3])
    imap_box.fill("Other", real_mail[3:5])
    imap_box.write_config()
    first, _ = _imported(["sync", "--once", "--no-index"])
    assert "oaken.sync.folder" in first  # the first pass downloads: the check below is not vacuous
    again, stdout = _imported(["sync", "--once", "--no-index"])
    assert " 0 new," in stdout and "2 of 2 folders unchanged" in stdout, stdout
    assert not again & set(DOWNLOAD_ONLY), sorted(again & set(DOWNLOAD_ONLY))
