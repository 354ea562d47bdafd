"""A full disk is said as a full disk, with the path and the space left, and raw.db stays whole.

raw.db lives on a 1 MB tmpfs mounted by the test (the tests run as root, as CI does); real
mail is imported until the disk fills. Before the fix the import ended with SQLite's
"cannot rollback - no transaction is active", hiding the cause."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from oaken.store import Store

DATA = Path(__file__).parent / "data" / "search" / "INBOX" / "cur" / "enron-lay-inbox-78!2,S"


@pytest.fixture
def small_disk() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the project's machines and CI run as root)")
    mount = Path(tempfile.mkdtemp(prefix="oaken-full-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        mount.rmdir()


def mail(folder: Path, n: int) -> None:
    """n real messages made distinct (Message-ID and a unique paragraph each)."""
    base = DATA.read_bytes().replace(b"\r\n", b"\n")
    head, _, body = base.partition(b"\n\n")
    lines = [ln for ln in head.split(b"\n") if not ln.lower().startswith(b"message-id:")]
    for i in range(n):
        extra = " ".join(f"w{i}x{j}" for j in range(300)).encode()
        (folder / f"{i}.eml").write_bytes(b"\n".join([*lines, f"Message-ID: <full-{i}@oaken.test>".encode()])
                                          + b"\n\n" + body + b"\n" + extra + b"\n")


def test_import_on_a_full_disk_says_so_and_keeps_raw_db_whole(small_disk: Path, tmp_path: Path) -> None:
    src = tmp_path / "mail"
    src.mkdir()
    mail(src, 600)  # ~3 MB of mail for a 1 MB disk
    env = {**os.environ, "OAKEN_HOME": str(small_disk / "home")}
    proc = subprocess.run([sys.executable, "-m", "oaken.cli", "import", str(src)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "the disk is full" in proc.stderr and "MB free" in proc.stderr and "raw.db" in proc.stderr
    assert "cannot rollback" not in proc.stderr and "Traceback" not in proc.stderr
    raw = small_disk / "home" / "raw.db"
    with Store(raw, readonly=True) as store:
        assert store.integrity_check() == "ok"
        stored = len(store.all_message_ids())
    assert stored < 600  # only whole batches land: what did is kept, the rest waits for a re-run
