from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oaken import api
from oaken.config import Config
from oaken.errors import ImportFailed
from oaken.store import open_store

DATA = Path(__file__).parent / "data" / "foundation"


def oaken(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "oaken.cli", *args], capture_output=True, text=True)


def test_maildir_tree_imported_once_with_folders_as_labels(oaken_home: Path) -> None:
    report = api.import_mail([DATA / "notmuch-default"], config=Config())
    assert report.seen == 53 and report.added == 52 and report.new_locations == 1
    again = api.import_mail([DATA / "notmuch-default"], config=Config())
    assert again.added == 0 and again.new_locations == 0
    assert again.unchanged == 53  # nothing changed on disk: no file was read again
    with open_store(oaken_home) as store:
        assert store.message_count() == 52
        folders = {f.name for f in store.folders(store.account_id("local"))}
        assert folders == {"notmuch-default", "foo", "bar", "foo/baz", "bar/baz"}
        # bar/18:2, and cur/51:2, are the same bytes: one message, two labels
        ids = [r[0] for r in store.db.execute(
            "SELECT message FROM locations GROUP BY message HAVING count(*) = 2")]
        assert len(ids) == 1
        assert set(store.meta(ids[0]).labels) == {"bar", "notmuch-default"}


def test_maildir_flags_become_read_state(oaken_home: Path, tmp_path: Path) -> None:
    box = tmp_path / "Mail"
    for sub in ("cur", "new", "tmp"):
        (box / sub).mkdir(parents=True)
    src = sorted((DATA / "notmuch-default" / "cur").iterdir())
    shutil.copy(src[0], box / "cur" / "1.host:2,S")
    shutil.copy(src[1], box / "cur" / "2.host:2,FR")
    shutil.copy(src[2], box / "new" / "3.host")
    api.import_mail([box], config=Config())
    with open_store(oaken_home) as store:
        metas = store.metas(store.all_message_ids()).values()
        assert sorted((m.unread, m.starred) for m in metas) == [(False, False), (True, False), (True, True)]


def test_malformed_mail_is_stored_raw_and_flagged(oaken_home: Path) -> None:
    report = api.import_mail([DATA / "malformed"], config=Config())
    # 4 files + an mbox of two, the second of which is empty (an unquoted "From " in CPython's test)
    assert report.seen == 6 and report.added == 5
    assert report.with_problems == 3
    assert report.skipped == [f"{DATA / 'malformed' / 'mailbox_01.mbox'}#1: empty, nothing to store"]
    with open_store(oaken_home) as store:
        problems = {m.problem for m in store.metas(store.all_message_ids()).values() if m.problem}
        assert any("no headers" in p for p in problems)
        assert any("unreadable Date" in p for p in problems)
        assert any("Outlook" in p for p in problems)
        raw = {store.raw(i) for i in store.all_message_ids()}
        assert (DATA / "malformed" / "mail_outlook_1").read_bytes() in raw


def test_single_file_and_mbox(oaken_home: Path) -> None:
    one = api.import_mail([DATA / "malformed" / "msg_16.txt"], config=Config())
    box = api.import_mail([DATA / "malformed" / "mailbox_01.mbox"], config=Config())
    assert one.added == 1 and box.added == 1
    with open_store(oaken_home) as store:
        assert "mailbox_01" in {f.name for f in store.folders(store.account_id("local"))}


def test_missing_path_is_a_clear_error(oaken_home: Path, tmp_path: Path) -> None:
    with pytest.raises(ImportFailed, match="no such file"):
        api.import_mail([tmp_path / "nope"], config=Config())
    run = oaken("import", str(tmp_path / "nope"))
    assert run.returncode == 1 and "no such file" in run.stderr


def test_cli_import_status_and_triage(oaken_home: Path) -> None:
    run = oaken("import", "--json", str(DATA / "notmuch-default"))
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["added"] == 52
    assert out["index"]["indexed"] == 52  # imported mail is searchable at once
    found = json.loads(oaken("search", "--json", "--no-daemon", "notmuch").stdout)
    assert found["hits"]
    status = json.loads(oaken("status", "--json").stdout)
    assert status["messages"] == 52
    assert status["accounts"]["local"]["messages"] == 52
    assert "index" in status and "coverage" in status["vectors"]
    assert oaken("status").returncode == 0
    ok = oaken("triage", "1", "--category", "work", "--priority", "2", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout) == {"category": "work", "priority": 2, "disposition": "inbox"}
    bad = oaken("triage", "1", "--category", "nope")
    assert bad.returncode == 2 and "expected one of work" in bad.stderr  # a bad value: a usage error
    usage = oaken("triage", "1")
    assert usage.returncode == 2


def test_set_triage_api(oaken_home: Path) -> None:
    api.import_mail([DATA / "malformed" / "msg_16.txt"], config=Config())
    import oaken

    t = oaken.set_triage(1, disposition="archived", config=Config())
    assert t.disposition == "archived"


def test_a_notmuch_database_beside_the_mail_is_not_imported(oaken_home: Path, tmp_path: Path) -> None:
    """notmuch keeps its Xapian database in .notmuch/ inside the Maildir it indexes: a notmuch
    user's mail folder holds it, and its files (flintlock, iamglass: no suffix) are not mail."""
    box = tmp_path / "Mail"
    for sub in ("cur", "new", "tmp"):
        (box / sub).mkdir(parents=True)
    src = sorted((DATA / "notmuch-default" / "cur").iterdir())
    shutil.copy(src[0], box / "cur" / "1.host:2,S")
    xapian = box / ".notmuch" / "xapian"
    xapian.mkdir(parents=True)
    (xapian / "flintlock").write_bytes(b"")
    (xapian / "iamglass").write_bytes(b"\x00\x01glass\x00" * 20)
    sent = box / ".Sent"  # a Maildir++ folder is hidden too, and is mail
    for sub in ("cur", "new", "tmp"):
        (sent / sub).mkdir(parents=True)
    shutil.copy(src[1], sent / "cur" / "2.host:2,S")
    report = api.import_mail([box], config=Config())
    assert report.added == 2
    assert any(".notmuch" in s and "not a Maildir" in s for s in report.skipped)
    with open_store(oaken_home) as store:
        folders = {f.name for f in store.folders(store.account_id("local"))}
        assert folders == {"Mail", "Sent"}
        assert not [m for m in store.metas(store.all_message_ids()).values() if m.problem]


def test_show_prints_the_date_in_the_configured_time_zone(oaken_home: Path) -> None:
    oaken_home.mkdir(parents=True, exist_ok=True)
    (oaken_home / "config.toml").write_text('[search]\ntime_zone = "Asia/Tokyo"\n')
    report = api.import_mail([DATA / "notmuch-default" / "cur"], config=config_mod_load())
    assert report.added == 26  # cur/ and new/ of the Maildir named by its cur/ (nothing before)
    with open_store(oaken_home) as store:
        message = store.all_message_ids()[0]
        when = store.meta(message).date
    out = oaken("show", "--peek", str(message))
    assert out.returncode == 0, out.stderr
    date_line = next(line for line in out.stdout.splitlines() if line.startswith("Date: "))
    from datetime import datetime, timedelta, timezone

    expected = datetime.fromtimestamp(when, tz=timezone(timedelta(hours=9))).strftime("%a, %d %b %Y %H:%M:%S +0900")
    assert date_line == f"Date: {expected}"


def config_mod_load() -> Config:
    from oaken import config as config_mod

    return config_mod.load()


def test_an_import_reads_only_the_stored_files_under_its_paths(
    oaken_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#16: importing a few new files into a large account must not read every file it ever
    imported (a million rows: 0.75 s). The rows read are counted; the same paths again are all
    recognised, and a sibling folder whose name starts the same is not read for another."""
    from oaken.store import Store

    big, few = tmp_path / "mail", tmp_path / "mail-new"
    shutil.copytree(DATA / "notmuch-default", big)
    shutil.copytree(DATA / "notmuch-default" / "bar", few)
    read: list[int] = []
    real = Store.local_sources

    def counted(self: Store, account_id: int, under: object = None) -> dict:
        found = real(self, account_id, under)  # type: ignore[arg-type]
        read.append(len(found))
        return found

    monkeypatch.setattr(Store, "local_sources", counted)
    assert api.import_mail([big], config=Config()).seen == 53
    report = api.import_mail([few], config=Config())
    assert report.unchanged == 0 and read[-1] == 0  # none of big's 53 rows read
    again = api.import_mail([few, big], config=Config())
    assert again.unchanged == again.seen and read[-1] == again.seen
    from oaken.store.locations import SOURCES_UNDER

    with open_store(oaken_home) as store:  # the rows are found through the index on source, not by a walk
        plan = " ".join(str(r) for r in store.db.execute("EXPLAIN QUERY PLAN " + SOURCES_UNDER, ("a", "b", 1)))
        assert "USING INDEX locations_source (source>? AND source<?)" in plan, plan


def test_a_maildir_folder_unchanged_since_it_was_listed_is_not_listed_again(
    oaken_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#16: a no-change import of a million-file Maildir stat'ed every file (76-100 s). A cur/ or
    new/ listed whole, every file stored, is recorded with its mtime; while that is the same no
    file was added, renamed (a flag) or removed there, and it is not listed again. A folder
    changed within the last seconds is not recorded (a file added in the same clock tick), nor one
    holding a file that could not be stored."""
    import os
    import time

    from oaken import importer

    mail = tmp_path / "mail"
    shutil.copytree(DATA / "notmuch-default", mail)
    hour_ago = time.time() - 3600

    def settle(when: float) -> None:
        for d in [mail, *mail.rglob("*")]:
            if d.is_dir():
                os.utime(d, (when, when))

    settle(hour_ago)
    loose = sum(1 for p in mail.rglob("*") if p.is_file() and p.parent.name not in ("cur", "new"))
    stats: list[str] = []
    real = importer._mtime
    monkeypatch.setattr(importer, "_mtime", lambda p: stats.append(str(p)) or real(p))

    first = api.import_mail([mail], config=Config())
    assert first.seen == 53 and len(stats) == 53
    stats.clear()
    again = api.import_mail([mail], config=Config())
    assert (again.seen, again.unchanged, again.added) == (53, 53, 0)
    assert len(stats) == loose  # the Maildir folders' files: not one stat'ed, nor listed
    stats.clear()
    assert importer.count([mail]) == 53 and len(stats) == loose  # the progress bar's count stats none either
    listings: list[str] = []
    real_scandir = os.scandir
    monkeypatch.setattr(importer.os, "scandir", lambda d: listings.append(str(d)) or real_scandir(d))
    assert api.import_count([mail], config=Config()) == 53  # the bar's total, from raw.db's record
    assert not [d for d in listings if Path(d).name in ("cur", "new")]
    ticks: list[int] = []
    assert api.import_mail([mail], config=Config(), progress=ticks.append).seen == 53
    assert sum(ticks) == 53  # the folders not listed pass on the bar too
    monkeypatch.setattr(importer.os, "scandir", real_scandir)

    cur = mail / "foo" / "cur"
    src = next(p for p in cur.iterdir() if p.is_file())
    (cur / "new-one:2,S").write_bytes(src.read_bytes().replace(b"Message-Id: <", b"Message-Id: <x-", 1)
                                     .replace(b"Message-ID: <", b"Message-ID: <x-", 1))
    stats.clear()
    added = api.import_mail([mail], config=Config())
    assert added.seen == 54 and added.unchanged == 53 and added.new_locations + added.added == 1
    assert {Path(p).parent for p in stats} - {p.parent for p in mail.rglob("*") if p.is_file()
                                               and p.parent.name not in ("cur", "new")} == {cur}
    stats.clear()
    api.import_mail([mail], config=Config())  # foo/cur changed a moment ago: listed again, not trusted yet
    assert {Path(p).parent for p in stats if Path(p).parent.name == "cur"} == {cur}

    (mail / "bar" / "new" / "empty").write_bytes(b"")  # a file that cannot be stored
    settle(hour_ago + 60)
    for _ in range(2):  # listed each time, and said each time
        stats.clear()
        report = api.import_mail([mail], config=Config())
        assert any("empty, nothing to store" in s for s in report.skipped)
        assert str(mail / "bar" / "new" / "empty") in stats
    stats.clear()
    api.import_mail([mail], config=Config())
    assert [p for p in stats if Path(p).parent == cur] == []  # settled since: recorded, not listed
