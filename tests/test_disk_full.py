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


def _mount(size: str) -> Path:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the project's machines and CI run as root)")
    mount = Path(tempfile.mkdtemp(prefix="oaken-full-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True)
    return mount


def _unmount(mount: Path) -> None:
    subprocess.run(["umount", "-l", str(mount)], check=False)
    mount.rmdir()


@pytest.fixture
def small_disk() -> Iterator[Path]:
    mount = _mount("1m")
    try:
        yield mount
    finally:
        _unmount(mount)


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


@pytest.fixture
def disk_6m() -> Iterator[Path]:
    mount = _mount("6m")
    try:
        yield mount
    finally:
        _unmount(mount)


def _grow(mount: Path) -> None:
    """Space freed: the same file system, made larger."""
    subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)


def _home(mount: Path, model: str) -> dict[str, str]:
    home = mount / "home"
    home.mkdir()
    # no background search server: it would hold the mount's files open past the test
    (home / "config.toml").write_text(f'[embedder]\nmodel = "{model}"\n\n[search]\nserver_idle_minutes = 0\n')
    return {**os.environ, "OAKEN_HOME": str(home)}


def _oaken(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oaken.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def _two_batches(tmp_path: Path) -> tuple[Path, Path]:
    """100 messages (word w3x5 in the fourth), then 400 others (v3x5 in their fourth)."""
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    mail(first, 100)
    mail(second, 400)
    for f in second.iterdir():
        f.write_bytes(f.read_bytes().replace(b"<full-", b"<fullb-").replace(b" w", b" v"))
    return first, second


def _hit_ids(env: dict[str, str], query: str) -> tuple[list[str], bool]:
    import json

    proc = _oaken(env, "search", "--json", query)
    assert proc.returncode == 0, proc.stderr
    reply = json.loads(proc.stdout)
    return [h["message_id"] for h in reply["hits"]], reply["degraded"]


def _says_full_not_damaged(text: str, file: str) -> None:
    assert f"{file}: the disk is full" in text and "MB free" in text, text
    assert "is damaged" not in text and "--rebuild" not in text and "Traceback" not in text, text
    assert "restore" not in text, text


def test_keyword_index_on_a_full_disk_says_so_and_goes_on_once_space_is_freed(disk_6m: Path,
                                                                              tmp_path: Path) -> None:
    """Before: `SQLite: FullError`, or the index called damaged with advice to --rebuild it."""
    env = _home(disk_6m, "none")
    first, second = _two_batches(tmp_path)
    assert _oaken(env, "import", str(first)).returncode == 0
    proc = _oaken(env, "import", str(second))  # raw.db takes it; index.db's share does not fit
    assert proc.returncode == 1, proc.stderr
    _says_full_not_damaged(proc.stderr, "index.db")
    assert "400 new" in proc.stdout and "stored in raw.db" in proc.stderr  # the mail is kept, and said so
    assert _hit_ids(env, "w3x5") == (["full-3@oaken.test"], False)  # the index as it was stays whole
    proc = _oaken(env, "reindex")
    assert proc.returncode == 1
    _says_full_not_damaged(proc.stderr, "index.db")

    _grow(disk_6m)
    proc = _oaken(env, "reindex")
    assert proc.returncode == 0, proc.stderr
    assert "400 messages indexed" in proc.stdout and "rebuilt" not in proc.stdout  # followed on, not rebuilt
    assert _hit_ids(env, "v3x5") == (["fullb-3@oaken.test"], False)
    assert _hit_ids(env, "w3x5") == (["full-3@oaken.test"], False)


def test_vectors_on_a_full_disk_say_so_and_go_on_once_space_is_freed(tmp_path: Path) -> None:
    """Before: LanceDB's RuntimeError "No space left on device (os error 28)" as a traceback."""
    mount = _mount("8m")
    try:
        env = _home(mount, "concept")
        first, second = _two_batches(tmp_path)
        assert _oaken(env, "import", str(first)).returncode == 0
        assert _oaken(env, "import", str(second)).returncode == 0  # the keyword index fits; vectors do not
        proc = _oaken(env, "reindex")
        assert proc.returncode == 1, proc.stderr
        _says_full_not_damaged(proc.stderr, "vectors")

        _grow(mount)
        proc = _oaken(env, "reindex")
        assert proc.returncode == 0, proc.stderr
        status = _oaken(env, "status", "--json")
        import json

        vectors = json.loads(status.stdout)["vectors"]
        assert vectors["rows"] == vectors["chunks"] == json.loads(status.stdout)["index"]["chunks"]
        assert _hit_ids(env, "v3x5") == (["fullb-3@oaken.test"], False)
    finally:
        _unmount(mount)


def test_search_on_a_full_disk_never_calls_raw_db_damaged(disk_6m: Path, tmp_path: Path) -> None:
    """SQLite cannot grow raw.db's -shm on a full disk, even to read. Before: "raw.db: cannot be read
    (disk I/O error); restore it from a backup" - advice that could cost a user their mail."""
    env = _home(disk_6m, "none")
    first, _ = _two_batches(tmp_path)
    assert _oaken(env, "import", str(first)).returncode == 0
    filler = disk_6m / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    (disk_6m / "home" / "raw.db-shm").unlink(missing_ok=True)  # as after the last writer closed
    proc = _oaken(env, "search", "--json", "w3x5")
    if proc.returncode == 0:  # right, or degraded saying the disk is full
        import json

        reply = json.loads(proc.stdout)
        if reply["degraded"]:
            _says_full_not_damaged(" ".join(reply["warnings"]), "index.db")
        else:
            assert [h["message_id"] for h in reply["hits"]] == ["full-3@oaken.test"]
    else:
        _says_full_not_damaged(proc.stderr, "raw.db")
    filler.unlink()
    assert _hit_ids(env, "w3x5") == (["full-3@oaken.test"], False)
