"""A cold `oaken sync` that finds nothing new is answered by oaken.sync.nochange, which writes
nothing; any change on the server (or waiting locally) goes to the full pass, which mirrors it.
Against a real Dovecot (tests/dovecot_fixtures.py), with the real messages of tests/data/sync."""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from oaken import cli, fastpath
from oaken import config as config_mod
from oaken.store import open_store
from oaken.sync import credentials, light_imap, nochange
from oaken.sync.imap import connect
from tests.dovecot_fixtures import Mailbox, assert_mirrored

pytestmark = pytest.mark.dovecot


class _Summary(str):
    """Equal to any no-change summary line of the test account."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(re.match(r"^test: 0 new, .* (\d+) of \1 folders unchanged; ", other))

    __hash__ = str.__hash__


ANY_SUMMARY = _Summary()
SUMMARY = re.compile(r"^test: (\d+) new, .* (\d+) of (\d+) folders unchanged; \d+\.\d\d s$")


def files_of(home: Path) -> dict[str, tuple[int, str]]:
    """raw.db and its WAL as they are on disk: (mtime, content hash) of each that holds bytes."""
    out = {}
    for name in ("raw.db", "raw.db-wal"):
        p = home / name
        if p.exists() and p.stat().st_size:
            out[name] = (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def oaken(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> tuple[int, str, bool]:
    """`oaken ARGV` through the console script's entry point: (exit code, stdout, whether the
    full command ran)."""
    ran: list[list[str] | None] = []
    real = cli.main

    def full(args: list[str] | None = None) -> int:
        ran.append(args)
        return real(args)

    monkeypatch.setattr(sys, "argv", ["oaken", *argv])
    with monkeypatch.context() as m:
        m.setattr(cli, "main", full)
        code = fastpath.main()
    return code, capsys.readouterr().out, bool(ran)


def keyword_config(box: Mailbox, **over: Any) -> Path:
    """The box's config with keyword search only: what is tested here is the sync, and the model's
    load and embedding made each test's first sync ~10 s of torch."""
    data = box.config_dict(**over)
    data["embedder"] = {"model": "none"}
    return box.write_config(data)


@pytest.fixture
def mirrored(imap_box: Mailbox, real_mail: list[bytes]) -> Mailbox:
    """INBOX, Archive and Work/Reports on the server, a Junk folder left out, all synced once."""
    imap_box.fill("INBOX", real_mail[:10])
    imap_box.fill("Archive", real_mail[10:16], flags=("\\Seen",))
    imap_box.fill("Work/Reports", real_mail[16:20])
    imap_box.fill("Junk", real_mail[20:22])
    keyword_config(imap_box)
    assert cli.main(["sync", "--once"]) == 0
    return imap_box


def test_no_change_is_answered_without_the_full_pass_and_writes_nothing(
    mirrored: Mailbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    capsys.readouterr()
    before = files_of(mirrored.home)
    code, out, full = oaken(["sync", "--once"], monkeypatch, capsys)
    assert (code, full) == (0, False)
    assert SUMMARY.match(out.strip()).groups() == ("0", "3", "3")  # type: ignore[union-attr]
    assert files_of(mirrored.home) == before
    # the same summary as the full pass prints, seconds aside
    assert cli.main(["sync", "--once"]) == 0
    slow = capsys.readouterr().out
    assert re.sub(r"\d+\.\d\d s", "", slow) == re.sub(r"\d+\.\d\d s", "", out)
    for argv in (
        ["sync"],
        ["sync", "--no-index", "--account", "test"],
        ["--config", str(mirrored.home / "config.toml"), "sync", "--account=test", "--once"],
    ):
        code, out, full = oaken(argv, monkeypatch, capsys)
        assert (code, full) == (0, False) and " 3 of 3 folders unchanged" in out, argv
    assert files_of(mirrored.home) == before
    with mirrored.client() as c:  # the check above can see a write: one new message is one
        c.append("INBOX", b"Subject: x\r\nMessage-ID: <fast-sync-1@test>\r\n\r\nx\r\n")
    assert oaken(["sync"], monkeypatch, capsys)[2]
    assert files_of(mirrored.home) != before


def _change(box: Mailbox, kind: str, real_mail: list[bytes]) -> None:
    with box.client() as c:
        if kind == "new message":
            c.append("Archive", real_mail[30])
        elif kind == "flag change":
            c.select_folder("INBOX")
            c.add_flags(c.search("ALL")[3:4], ["\\Flagged"])
        elif kind == "flag removed":
            c.select_folder("Archive")
            c.remove_flags(c.search("ALL")[:1], ["\\Seen"])
        elif kind == "deleted message":
            c.select_folder("Work/Reports")
            c.delete_messages(c.search("ALL")[:1])
            c.expunge()
        elif kind == "new folder":
            c.create_folder("Projects")
            c.subscribe_folder("Projects")
            c.append("Projects", real_mail[31])
        elif kind == "renamed folder":
            c.rename_folder("Work/Reports", "Work/Old Reports")
            c.subscribe_folder("Work/Old Reports")
        elif kind == "deleted folder":
            c.delete_folder("Archive")
        else:
            raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    ["new message", "flag change", "flag removed", "deleted message", "new folder", "renamed folder", "deleted folder"],
)
def test_every_change_goes_to_the_full_pass(
    kind: str,
    mirrored: Mailbox,
    real_mail: list[bytes],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    _change(mirrored, kind, real_mail)
    capsys.readouterr()
    code, out, full = oaken(["sync", "--once"], monkeypatch, capsys)
    assert (code, full) == (0, True), out
    assert_mirrored(mirrored, config_mod.load())
    code, out, full = oaken(["sync", "--once"], monkeypatch, capsys)  # and then nothing is new again
    assert (code, full) == (0, False), out


def test_a_local_flag_change_waiting_goes_to_the_full_pass(
    mirrored: Mailbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    cfg = config_mod.load()
    with open_store(cfg.data_dir) as store:
        for message in store.message_ids_in(store.account_id("test")):
            with store.transaction():
                store.mark_read(message, True)  # an unread one queues \Seen for the server
            if store.pending_flag_changes():
                break
        assert store.pending_flag_changes()
    capsys.readouterr()
    code, out, full = oaken(["sync", "--once"], monkeypatch, capsys)
    assert (code, full) == (0, True)
    assert "1 local changes pushed" in out
    assert_mirrored(mirrored, cfg)


def test_the_password_command_runs_once_when_the_full_pass_follows(
    mirrored: Mailbox, real_mail: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    runs = tmp_path / "runs"
    keyword_config(mirrored, password_command=f"echo x >> {runs}; printf %s {mirrored.password}")
    _change(mirrored, "new message", real_mail)
    code, out, full = oaken(["sync"], monkeypatch, capsys)
    assert (code, full) == (0, True) and out.startswith("test: 1 new,")
    assert runs.read_text().count("x") == 1  # the no-change check read it and handed it over
    assert credentials._handed == {}
    code, out, full = oaken(["sync"], monkeypatch, capsys)
    assert (code, full) == (0, False) and runs.read_text().count("x") == 2


def test_a_failing_password_command_runs_once_and_is_said_once(
    mirrored: Mailbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A command that prompts (pass, gpg's pinentry) and is cancelled is not asked again by the
    full pass: the full pass reports the check's failure, the same error it would have raised."""
    runs, secret = tmp_path / "runs", tmp_path / "secret"
    secret.write_text(mirrored.password)
    keyword_config(mirrored, password_command=f"echo x >> {runs}; cat {secret}")
    assert oaken(["sync"], monkeypatch, capsys)[::2] == (0, True)  # the config is checked once
    assert oaken(["sync"], monkeypatch, capsys)[::2] == (0, False)  # then the light check answers
    assert runs.read_text().count("x") == 2
    secret.unlink()  # the command now fails, as a cancelled prompt does
    monkeypatch.setattr(sys, "argv", ["oaken", "sync"])
    code = fastpath.main()
    err = capsys.readouterr().err
    assert code != 0, err
    assert runs.read_text().count("x") == 3, "the password command ran twice for one sync"
    assert err.count("password_command: the command exited with status 1") == 1, err
    assert credentials._failed == {}


def test_without_condstore_every_pass_is_the_full_one(
    basic_imap_box: Mailbox, real_mail: list[bytes], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    basic_imap_box.fill("INBOX", real_mail[:5])
    keyword_config(basic_imap_box)
    for _ in range(2):
        code, out, full = oaken(["sync"], monkeypatch, capsys)
        assert (code, full) == (0, True)


def test_what_it_does_not_read_goes_to_the_full_pass(
    mirrored: Mailbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    for argv in (["sync", "--daemon", "--print-unit"], ["sync", "--acc", "test"], ["sync", "-h"]):
        assert nochange.parse_argv(argv) is None
    config = mirrored.home / "config.toml"
    good = config.read_text()
    for extra, why in (('\n[log]\nlevel = "debug"\n', "debug"), ("\n[paths]\ndata_dir = 3\n", "bad value")):
        config.write_text(good + extra)
        code, out, full = oaken(["sync"], monkeypatch, capsys)
        assert full, why
    config.write_text(good)
    code, out, full = oaken(["sync", "--account", "nobody"], monkeypatch, capsys)
    assert (code, full) == (2, True)  # the full command names the accounts there are


def test_a_wrong_value_in_a_table_it_does_not_read_is_still_refused(
    mirrored: Mailbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The check reads only the accounts, [paths] and [log]: it answers only for a config file the
    full reader accepted as it is now, so `[search] rrf_k = 0` is refused (exit 2, naming the key)
    even when the server has nothing new (found by review: it exited 0)."""
    config = mirrored.home / "config.toml"
    good = config.read_text()
    assert oaken(["sync"], monkeypatch, capsys)[:3:2] == (0, False)  # accepted by the full pass before
    config.write_text(good + "\n[search]\nrrf_k = 0\n")
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["oaken", "sync"])
    assert fastpath.main() == 2 and "rrf_k" in capsys.readouterr().err
    config.write_text(good)  # the same bytes again, but a file the full reader has not seen since
    code, _out, full = oaken(["sync"], monkeypatch, capsys)
    assert (code, full) == (0, True)
    assert oaken(["sync"], monkeypatch, capsys)[:3:2] == (0, False)  # and once it has, the check answers


def _both_lists(box: Mailbox) -> tuple[list[Any], list[Any]]:
    """(Connection.list_folders, the light session's list_folders) of the same server, same user."""
    account = box.config().accounts["test"]
    conn = connect(account)
    try:
        full = conn.list_folders()
        caps = conn.caps
    finally:
        conn.close()
    session = light_imap.Session(account, box.password)
    try:
        assert session.caps == caps
        return full, session.list_folders()
    finally:
        session.logout()


def _seen(folders: list[Any]) -> list[tuple]:
    return sorted(
        (f.name, f.delimiter, f.flags, f.subscribed, f.special_use, f.selectable, f.mailbox_id)
        + ((f.status.messages, f.status.uidnext, f.status.uidvalidity, f.status.highestmodseq) if f.status else ())
        for f in folders
    )


@pytest.mark.parametrize("kind", ["imap", "condstore", "basic"])  # LIST-STATUS; one STATUS per folder
def test_the_light_session_lists_what_the_full_one_lists(kind: str, request, real_mail: list[bytes]) -> None:
    box: Mailbox = request.getfixturevalue("imap_box" if kind == "imap" else f"{kind}_imap_box")
    names = ["INBOX", 'Quote "this"', "Work/2024", "Work/Sub folder", "2024", "Junk", "Sent Items"]
    if kind == "imap":
        names += ["Entwürfe", "A & B"]  # in modified UTF-7 on the wire: read back by both
    for name in names:
        box.fill(name, real_mail[:1])
    with box.client() as c:
        c.create_folder("Unsubscribed")
    full, light = _both_lists(box)
    assert _seen(light) == _seen(full)
    assert {*names, "Unsubscribed"} <= {f.name for f in light}
    assert any(f.status and f.status.highestmodseq for f in light) == (kind != "basic")
    if kind == "condstore":  # a name its STATUS would have to write in modified UTF-7: the full pass's
        box.fill("Entwürfe", real_mail[:1])
        with pytest.raises(light_imap.Refused):
            _both_lists(box)


def test_a_server_without_list_status_is_checked_folder_by_folder(
    condstore_imap_box: Mailbox, real_mail: list[bytes], monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    box = condstore_imap_box
    box.fill("INBOX", real_mail[:6])
    box.fill("Archive", real_mail[6:9])
    keyword_config(box)
    assert oaken(["sync"], monkeypatch, capsys)[2]  # the first pass: the full one
    assert oaken(["sync"], monkeypatch, capsys)[1:] == (ANY_SUMMARY, False)
    _change(box, "flag change", real_mail)
    code, out, full = oaken(["sync"], monkeypatch, capsys)
    assert (code, full) == (0, True) and "1 flag changes" in out
    assert_mirrored(box, config_mod.load())


def test_a_fresh_process_imports_no_full_sync(mirrored: Mailbox) -> None:
    import subprocess

    code = (
        "import sys\n"
        "sys.argv = ['oaken', 'sync', '--once']\n"
        "from oaken.fastpath import main\n"
        "rc = main()\n"
        "heavy = sorted(m for m in ('imapclient', 'imaplib', 'structlog', 'apsw', 'oaken.config', 'oaken.store',"
        " 'oaken.sync.runner', 'oaken.cli', 'argparse', 'dataclasses') if m in sys.modules)\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stderr and " 3 of 3 folders unchanged" in proc.stdout
