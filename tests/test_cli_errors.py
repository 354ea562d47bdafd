"""What `oaken` says when it cannot go on: one line naming the file or argument at fault and what
to do, and the exit code (0 done, 1 a failure, 2 a usage error or a bad value); never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from oaken.cli import main

DATA = Path(__file__).parent / "data" / "foundation" / "notmuch-default"

pytestmark = pytest.mark.usefixtures("cli_log")  # the commands bind the log to pytest's stderr of the moment


def _run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def home(oaken_home: Path, capsys: pytest.CaptureFixture) -> Path:
    """OAKEN_HOME with 52 real messages imported and keyword-indexed; no embedding model."""
    oaken_home.mkdir(parents=True)
    (oaken_home / "config.toml").write_text('[embedder]\nmodel = "none"\n')
    assert main(["import", str(DATA)]) == 0
    capsys.readouterr()
    return oaken_home


def damage(raw_db: Path, how: str) -> None:
    """Damage raw.db as a failing disk or a stray write would: every page after the first torn
    (the schema still reads, the mail does not), or the header overwritten."""
    assert not Path(str(raw_db) + "-wal").exists() or Path(str(raw_db) + "-wal").stat().st_size == 0
    data = bytearray(raw_db.read_bytes())
    if how == "torn":
        page = int.from_bytes(data[16:18], "big")
        data[page:] = b"\xff" * (len(data) - page)
    else:
        data[:100] = b"not a database " * 6 + b"!" * 10
    raw_db.write_bytes(bytes(data))


def assert_one_line_naming_raw_db(rc: int, err: str, raw_db: Path, what: str) -> None:
    assert rc == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[-1] == (f"oaken: {raw_db}: cannot be read ({what}); restore it from a backup, or sync or "
                         "import again into a new data directory"), err


COMMANDS = {
    "status": ["status"],
    "show": ["show", "5", "--peek"],
    "triage": ["triage", "5", "--priority", "2"],
    "import": ["import", str(DATA)],
    "reindex": ["reindex", "--keyword-only", "--rebuild"],
}


@pytest.mark.parametrize("family", sorted(COMMANDS))
def test_a_torn_raw_db_is_one_line_and_rc_1(home: Path, capsys: pytest.CaptureFixture, family: str) -> None:
    damage(home / "raw.db", "torn")
    rc, _out, err = _run(capsys, *COMMANDS[family])
    assert_one_line_naming_raw_db(rc, err, home / "raw.db", "database disk image is malformed")


@pytest.mark.parametrize("family", ["status", "show", "reindex"])
def test_a_raw_db_that_is_not_a_database_is_one_line(home: Path, capsys: pytest.CaptureFixture,
                                                     family: str) -> None:
    damage(home / "raw.db", "header")
    rc, _out, err = _run(capsys, *COMMANDS[family])
    assert_one_line_naming_raw_db(rc, err, home / "raw.db", "file is not a database")


def test_sync_into_a_damaged_raw_db_is_one_line(imap_box, real_mail, capsys: pytest.CaptureFixture) -> None:
    imap_box.write_config()
    imap_box.fill("INBOX", real_mail[:5])
    assert main(["sync", "--once", "--no-index"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    damage(imap_box.home / "raw.db", "torn")
    imap_box.fill("INBOX", real_mail[5:8])
    rc, _out, err = _run(capsys, "sync", "--once", "--no-index")
    assert_one_line_naming_raw_db(rc, err, imap_box.home / "raw.db", "database disk image is malformed")


def test_damage_is_a_store_error_for_library_callers_too(home: Path) -> None:
    from oaken import api
    from oaken.config import load
    from oaken.errors import StoreError

    damage(home / "raw.db", "torn")
    with pytest.raises(StoreError, match="raw.db: cannot be read"):
        api.set_triage(5, priority=1, config=load())


# ---- reading commands on a data directory with no mail ---------------------------------------

def test_show_and_status_of_a_missing_data_dir_create_nothing(oaken_home: Path, capsys) -> None:
    assert not oaken_home.exists()
    rc, _out, err = _run(capsys, "show", "1")
    assert rc == 1 and "no mail yet: run `oaken sync` or `oaken import`" in err
    assert "Traceback" not in err
    rc, out, _err = _run(capsys, "status")
    assert rc == 0 and "no mail yet: run `oaken sync` or `oaken import`" in out
    assert not oaken_home.exists()  # neither made the data directory, nor an empty raw.db in it


def test_show_in_an_empty_data_dir_makes_no_raw_db(oaken_home: Path, capsys) -> None:
    oaken_home.mkdir()
    rc, _out, err = _run(capsys, "show", "1", "--peek")
    assert rc == 1 and "no mail yet" in err
    assert list(oaken_home.iterdir()) == []


# ---- usage errors ------------------------------------------------------------------------------

def test_usage_errors_name_the_command_once(oaken_home: Path, capsys) -> None:
    rc, _out, err = _run(capsys, "search", "virus", "-outlook")
    assert rc == 2
    assert err.strip() == ("oaken search: unrecognized arguments: -outlook; a query with -exclusions goes after "
                           "--: oaken search -- virus -outlook")
    rc, _out, err = _run(capsys, "search", "--jsn", "virus")  # a mistyped option: no hint about --
    assert rc == 2 and err.strip() == "oaken search: unrecognized arguments: --jsn"
    rc, _out, err = _run(capsys, "status", "--bogus")
    assert rc == 2 and err.strip() == "oaken status: unrecognized arguments: --bogus"
    rc, _out, err = _run(capsys)
    assert rc == 2 and err.startswith("oaken: give a command: init, import, status")
    rc, _out, err = _run(capsys, "triage", "x")
    assert rc == 2 and err.startswith("oaken triage: argument id: invalid int value")
    for line in err.splitlines():
        assert "oaken: oaken" not in line


def test_a_bad_triage_value_is_a_usage_error(home: Path, capsys) -> None:
    rc, _out, err = _run(capsys, "triage", "3", "--category", "nope")
    assert rc == 2 and err.startswith("oaken triage: category 'nope': expected one of work")
    rc, _out, err = _run(capsys, "triage", "3", "--priority", "9")
    assert rc == 2 and "priority 9" in err
    rc, _out, err = _run(capsys, "triage", "3")
    assert rc == 2 and err.startswith("oaken triage: give at least one of")


# ---- what status and triage print ----------------------------------------------------------------

def test_status_and_triage_speak_plainly(home: Path, capsys) -> None:
    (home / "config.toml").write_text('[embedder]\nmodel = "concept"\n')
    assert main(["reindex"]) == 0
    capsys.readouterr()
    rc, out, _err = _run(capsys, "status")
    assert rc == 0
    assert "account local: 52 messages, 52 unread, 0 with parse problems" in out
    assert "flagged" not in out  # read as the \Flagged flag
    vectors = next(line for line in out.splitlines() if line.startswith("vectors: "))
    assert "fingerprint (" in vectors and "{" not in vectors and "'" not in vectors
    assert "None" not in out
    rc, out, _err = _run(capsys, "triage", "3", "--priority", "2")
    assert rc == 0 and out.strip() == "3: category none, priority 2, disposition inbox"


def test_a_query_that_is_not_text_is_a_usage_error(oaken_home: Path) -> None:
    """A query with bytes the locale cannot decode (kept by Python as surrogates) is said as a
    usage error, rc 2, by the command and its fast path alike (found by review: a traceback)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "OAKEN_HOME": str(oaken_home), "PYTHONPATH": str(root)}
    for entry in (["-m", "oaken.cli"], ["-m", "oaken.fastpath"]):
        proc = subprocess.run(
            [sys.executable, *entry, "search", b"caf\xff"], capture_output=True, env=env, timeout=120
        )
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 2 and "Traceback" not in err, err
        assert "holds bytes that are not text" in err and "caf" in err
