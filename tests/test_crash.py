"""kill -9 at any moment of an import, then the same import again, ends with exactly what an
uninterrupted import stores. Named crash points prove where each kill landed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from oaken.store import Store

TOTAL = 1_234  # three batches of 500


def make_maildir(root: Path) -> Path:
    box = root / "Mail"
    for sub in ("cur", "new", "tmp"):
        (box / sub).mkdir(parents=True)
    for i in range(TOTAL):
        folder = "cur" if i % 3 else "new"
        name = f"{i}.host:2,S" if folder == "cur" else f"{i}.host"
        refs = f"References: <m{i - 1}@crash.test>\r\n" if i % 5 else ""
        (box / folder / name).write_bytes(
            f"From: Sender {i % 17} <s{i % 17}@example.com>\r\nTo: me@example.com\r\n"
            f"Subject: message {i}\r\nDate: Mon, 04 Mar 2024 10:{i % 60:02d}:00 +0000\r\n"
            f"Message-ID: <m{i}@crash.test>\r\n{refs}\r\nbody of message {i}\r\n".encode())
    return box


def run_import(home: Path, box: Path, crash_at: str | None = None, log: Path | None = None) -> int:
    env = dict(os.environ, OAKEN_HOME=str(home))
    if crash_at:
        env["OAKEN_CRASH_AT"] = crash_at
        env["OAKEN_CRASH_LOG"] = str(log)
    return subprocess.run([sys.executable, "-m", "oaken.cli", "import", str(box)], env=env,
                          capture_output=True).returncode


def snapshot(home: Path) -> set[tuple]:
    s = Store(home / "raw.db")
    try:
        assert s.integrity_check() == "ok"
        return {
            (m.message_id, m.content_hash, m.folders, m.unread, m.date)
            for m in s.metas(s.all_message_ids()).values()
        }
    finally:
        s.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[tuple]]:
    root = tmp_path_factory.mktemp("crash")
    box = make_maildir(root)
    home = root / "clean"
    assert run_import(home, box) == 0
    snap = snapshot(home)
    assert len(snap) == TOTAL
    return box, snap


@pytest.mark.parametrize("point, stored_before", [
    ("import.mid_batch:1", 0),  # inside the first transaction: nothing committed yet
    ("import.mid_batch:2", 500),  # inside the second: the first batch is safe
    ("import.after_commit:2", 1000),  # between two batches
])
def test_kill_9_then_import_again(reference: tuple[Path, set[tuple]], tmp_path: Path, point: str,
                                  stored_before: int) -> None:
    box, expected = reference
    home, log = tmp_path / "home", tmp_path / "crash.log"
    assert run_import(home, box, point, log) == -9  # SIGKILL, not a clean exit
    name, _, nth = point.partition(":")
    lines = log.read_text().splitlines()
    assert lines[-1].startswith(f"{name} pass={nth}")  # the kill landed at that point
    s = Store(home / "raw.db")
    assert s.integrity_check() == "ok"
    assert s.message_count() == stored_before  # the batch in flight was lost whole, no part of it kept
    s.close()
    assert run_import(home, box) == 0
    assert snapshot(home) == expected


def test_kill_9_at_random_moments(reference: tuple[Path, set[tuple]], tmp_path: Path) -> None:
    """Killed from outside at several moments, resumed each time: still exactly the reference."""
    box, expected = reference
    home = tmp_path / "home"
    env = dict(os.environ, OAKEN_HOME=str(home))
    for delay in (0.35, 0.5, 0.65, 0.8):
        p = subprocess.Popen([sys.executable, "-m", "oaken.cli", "import", str(box)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            p.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        snapshot(home) if (home / "raw.db").exists() else None
    assert run_import(home, box) == 0
    assert snapshot(home) == expected
