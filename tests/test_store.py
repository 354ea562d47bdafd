from __future__ import annotations

import os
import stat
from pathlib import Path

import apsw
import pytest

from oaken import envelope
from oaken import store as store_mod
from oaken.errors import NotFound, StoreError, TriageError
from oaken.config import DEFAULT_CATEGORIES
from oaken.store import Store
from oaken.store.migrations import MIGRATIONS


def msg(mid: str | None, subject: str = "hello", refs: str = "", irt: str = "", date: str = "Mon, 04 Mar 2024 10:00:00 +0000",
        body: str = "body\n", sender: str = "Alex Example <alex@example.com>") -> bytes:
    lines = [f"From: {sender}", "To: Sam <sam@example.com>", f"Subject: {subject}"]
    if date:
        lines.append(f"Date: {date}")
    if mid:
        lines.append(f"Message-ID: <{mid}>")
    if refs:
        lines.append(f"References: {refs}")
    if irt:
        lines.append(f"In-Reply-To: {irt}")
    return ("\r\n".join(lines) + "\r\n\r\n" + body).encode()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "raw.db")
    yield s
    s.close()


def add(store: Store, raw: bytes, folder: str = "INBOX", account: str = "a", **kw):
    aid = store.ensure_account(account)
    fid = store.ensure_folder(aid, folder).id
    with store.transaction():
        return store.add_message(aid, raw, folder_id=fid, **kw)


def test_raw_db_is_private_wal_and_migrated(tmp_path: Path) -> None:
    s = Store(tmp_path / "raw.db")
    assert stat.S_IMODE((tmp_path / "raw.db").stat().st_mode) == 0o600
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert s.db.execute("PRAGMA page_size").fetchone()[0] == store_mod.PAGE_SIZE
    assert s.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    s.close()
    Store(tmp_path / "raw.db").close()  # reopening applies nothing twice


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    s = Store(tmp_path / "raw.db")
    s.db.execute("PRAGMA user_version=99")
    s.close()
    with pytest.raises(StoreError, match="newer Oaken"):
        Store(tmp_path / "raw.db")


def _open_at_once(path: str, ready, go, answers) -> None:  # a child process of the test below
    ready.release()
    go.wait()
    try:
        Store(path).close()
        answers.put("ok")
    except Exception as e:  # noqa: BLE001 - reported to the test
        answers.put(f"{type(e).__name__}: {e}")


def test_processes_creating_raw_db_at_once_all_open_it(tmp_path: Path) -> None:
    """The daemon's first start beside an `oaken import` or a search: each read schema version 0
    outside a transaction and migrated, and one failed on "table meta already exists" (how the
    daemon's first sync timed out in CI); switching to WAL answered BUSY at once as well."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for i in range(12):
        path = str(tmp_path / f"raw-{i}.db")
        ready, go, answers = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_open_at_once, args=(path, ready, go, answers)) for _ in range(3)]
        for p in procs:
            p.start()
        for _ in procs:
            assert ready.acquire(timeout=30)
        go.set()
        got = [answers.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert got == ["ok"] * 3, got
        with Store(path, readonly=True) as store:
            assert store.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_a_search_never_creates_the_schema_another_process_is_creating(tmp_path: Path) -> None:
    """A read-only open of a raw.db still at schema 0 (a file another process has just made) is
    'no mail yet', not an upgrade that races that process's own migration."""
    path = tmp_path / "raw.db"
    apsw.Connection(str(path)).close()  # the empty file a first writer makes before its migration
    with pytest.raises(StoreError, match="no mail yet"):
        Store(path, readonly=True)
    check = apsw.Connection(str(path))
    assert check.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    check.close()


def test_message_stored_once_with_a_location_per_folder(store: Store) -> None:
    raw = msg("one@x")
    r1 = add(store, raw, "INBOX", uidvalidity=7, uid=1)
    r2 = add(store, raw, "[Gmail]/All Mail", uidvalidity=9, uid=5)
    r3 = add(store, raw, "INBOX", uidvalidity=7, uid=1)
    assert r1.new_message and not r2.new_message and r1.message == r2.message == r3.message
    assert r2.new_location and not r3.new_location
    meta = store.meta(r1.message)
    assert meta.folders == ("INBOX", "[Gmail]/All Mail")
    assert set(meta.labels) == {"INBOX", "[Gmail]/All Mail"}
    assert store.message_count() == 1
    assert store.raw(r1.message) == raw


def test_same_message_id_other_content_is_kept_apart(store: Store) -> None:
    a = add(store, msg("dup@x", body="one\n"))
    b = add(store, msg("dup@x", body="two\n"))
    assert a.message != b.message and store.message_count() == 2


def test_messages_without_message_id_told_apart_by_content(store: Store) -> None:
    a = add(store, msg(None, body="one\n"))
    b = add(store, msg(None, body="two\n"))
    c = add(store, msg(None, body="one\n"))
    assert a.message != b.message and c.message == a.message


def test_accounts_are_separate(store: Store) -> None:
    a = add(store, msg("x@x"), account="work")
    b = add(store, msg("x@x"), account="home")
    assert a.message != b.message


def test_threads_from_references_in_any_order(store: Store) -> None:
    # the reply arrives before its parent, and a grandchild references only the parent
    reply = add(store, msg("b@x", "Re: plan", irt="<a@x>")).message
    other = add(store, msg("z@x", "unrelated")).message
    grandchild = add(store, msg("c@x", "Re: plan", refs="<a@x> <b@x>")).message
    root = add(store, msg("a@x", "plan")).message
    sibling = add(store, msg("d@x", "Re: plan", refs="<a@x>")).message
    threads = {m: store.meta(m).thread for m in (reply, other, grandchild, root, sibling)}
    assert threads[reply] == threads[grandchild] == threads[root] == threads[sibling]
    assert threads[other] != threads[root]


def test_threads_merge_when_a_message_joins_two(store: Store) -> None:
    x = add(store, msg("x@x", "one", irt="<p@x>")).message
    y = add(store, msg("y@x", "two", irt="<q@x>")).message
    assert store.meta(x).thread != store.meta(y).thread
    add(store, msg("m@x", "both", refs="<p@x> <q@x>"))
    assert store.meta(x).thread == store.meta(y).thread


def test_subject_fallback_only_without_headers(store: Store) -> None:
    root = add(store, msg("r@x", "Budget 2024")).message
    reply = add(store, msg("s@x", "RE: Budget 2024")).message  # a client that sends no References
    fresh = add(store, msg("t@x", "Budget 2024")).message  # same subject, not a reply
    assert store.meta(reply).thread == store.meta(root).thread
    assert store.meta(fresh).thread != store.meta(root).thread


def test_date_falls_back_to_arrival(store: Store) -> None:
    ok = add(store, msg("d1@x"), internaldate=1709600000).message
    assert store.meta(ok).date == 1709546400  # the Date header
    bad = add(store, msg("d2@x", date="Tue, 06 Jun 2017 27:39:33 +0600"), internaldate=1709600000).message
    assert store.meta(bad).date == 1709600000
    future = add(store, msg("d3@x", date="Mon, 04 Mar 2030 10:00:00 +0000"), internaldate=1709600000).message
    assert store.meta(future).date == 1709600000
    missing = add(store, msg("d4@x", date=""), internaldate=1709600000).message
    assert store.meta(missing).date == 1709600000
    assert "unreadable Date" in (store.meta(bad).problem or "")


def test_unread_starred_and_keywords_as_labels(store: Store) -> None:
    m = add(store, msg("f@x"), "INBOX", uidvalidity=1, uid=1, flags=[b"\\Flagged", b"$Work"]).message
    add(store, msg("f@x"), "Archive", uidvalidity=1, uid=3, flags=[b"\\Seen"])
    meta = store.meta(m)
    assert meta.unread  # unread while any copy lacks \Seen (the INBOX one here)
    store.set_flags(store.folder(store.account_id("a"), "INBOX").id, 1, 1, [b"\\Flagged", b"$Work", b"\\Seen"])
    assert not store.meta(m).unread  # every copy read
    assert meta.starred
    assert "$Work" in meta.labels and "\\Flagged" not in meta.labels


def test_triage_vocabulary(store: Store) -> None:
    m = add(store, msg("t@x")).message
    assert store.meta(m).triage.disposition == "inbox"
    t = store.set_triage(m, categories=DEFAULT_CATEGORIES, category="finance", priority=2)
    assert (t.category, t.priority, t.disposition) == ("finance", 2, "inbox")
    t = store.set_triage(m, categories=DEFAULT_CATEGORIES, disposition="discarded")
    assert (t.category, t.priority, t.disposition) == ("finance", 2, "discarded")
    for kwargs, text in (({"category": "nope"}, "expected one of work"), ({"priority": 9}, "0-3"),
                         ({"disposition": "trash"}, "inbox, archived, discarded")):
        with pytest.raises(TriageError, match=text):
            store.set_triage(m, categories=DEFAULT_CATEGORIES, **kwargs)
    with pytest.raises(NotFound):
        store.set_triage(999, categories=DEFAULT_CATEGORIES, priority=1)


def test_filters_for_read_state_and_triage(store: Store) -> None:
    a = add(store, msg("a@x"), uidvalidity=1, uid=1, flags=[b"\\Seen"]).message
    b = add(store, msg("b@x"), uidvalidity=1, uid=2).message
    store.set_triage(b, categories=DEFAULT_CATEGORIES, category="work", priority=3)
    store.set_triage(a, categories=DEFAULT_CATEGORIES, disposition="discarded")
    assert store.filter_messages([a, b], unread=True) == {b}
    assert store.filter_messages([a, b], unread=False) == {a}
    assert store.filter_messages([a, b], categories=["work", "travel"]) == {b}
    assert store.filter_messages([a, b], min_priority=2) == {b}
    assert store.filter_messages([a, b], dispositions=["inbox", "archived"]) == {b}
    account = store.meta(a).account
    assert store.filter_messages([a, b], account=account) == {a, b}
    assert store.filter_messages([a, b], account=account + "-other") == set()


def test_change_feed_follows_every_change_and_deletion(store: Store) -> None:
    m = add(store, msg("c@x"), uidvalidity=1, uid=1).message
    fid = store.meta(m) and store.folders(store.account_id("a"))[0].id
    seq = store.seq()
    assert [c.message for c in store.changes_since(0)] == [m]
    store.set_flags(fid, 1, 1, [b"\\Seen"])
    assert [c.message for c in store.changes_since(seq)] == [m]
    seq = store.seq()
    store.add_label(m, "later")
    assert store.changes_since(seq)[0].message == m
    seq = store.seq()
    assert store.remove_uids(fid, 1, [1]) == 1
    changes = store.changes_since(seq)
    assert changes == [store_mod.Change(m, changes[0].seq, True, None)]
    assert store.message_count() == 0


def test_mark_read_queues_a_change_for_the_server(store: Store) -> None:
    m = add(store, msg("q@x"), uidvalidity=4, uid=9).message
    assert store.meta(m).unread
    with store.transaction():
        assert store.mark_read(m) == 1
    assert not store.meta(m).unread
    [change] = store.pending_flag_changes()
    assert (change.uid, change.uidvalidity, change.op, change.flag) == (9, 4, "+", "\\Seen")
    store.finish_flag_change(change.id, error="server said NO")
    assert store.pending_flag_changes() == [] and store.rejected_flag_changes()[0][3] == "server said NO"
    assert store.mark_read(m) == 0  # already read: nothing queued


def test_status_shape(store: Store) -> None:
    add(store, msg("s@x"))
    add(store, b"no headers at all, just text\n")
    st = store.status()
    assert st["messages"] == 2
    acc = st["accounts"]["a"]
    assert acc["messages"] == 2 and acc["with_problems"] == 1 and acc["folders"]["INBOX"]["messages"] == 2


def test_integrity(store: Store) -> None:
    add(store, msg("i@x"))
    assert store.integrity_check() == "ok"


def _thread_groups(store: Store) -> set[frozenset[str]]:
    """Threads as sets of Message-IDs: comparable between two stores whatever the thread ids."""
    groups: dict[int, set[str]] = {}
    for m in store.all_message_ids():
        meta = store.meta(m)
        groups.setdefault(meta.thread, set()).add(meta.message_id or f"none:{meta.content_hash[:8]}")
    return {frozenset(g) for g in groups.values()}


def test_a_batch_is_stored_as_if_message_by_message(tmp_path: Path) -> None:
    earlier = [msg("x@x", "one", irt="<p@x>"), msg("y@x", "two", irt="<q@x>"), msg("r@x", "Budget")]
    batch = [
        msg("b@x", "Re: plan", irt="<a@x>"),  # a reply before its parent
        msg("c@x", "Re: plan", refs="<a@x> <b@x>"),
        msg("a@x", "plan"),
        msg("m@x", "both", refs="<p@x> <q@x>"),  # joins two threads stored earlier
        msg("n@x", "and", refs="<b@x> <m@x>"),  # then merges this batch's two threads
        msg("s@x", "RE: Budget"),  # subject fallback to an earlier thread
        msg("a@x", "plan"),  # the same message twice in one batch: stored once, two locations
        msg("x@x", "one", irt="<p@x>"),  # stored earlier: a location only
        msg(None, body="no id\n"), msg(None, body="no id\n"),
    ]
    stores = {name: Store(tmp_path / f"{name}.db") for name in ("single", "batch")}
    results = {}
    for name, s in stores.items():
        aid = s.ensure_account("a")
        fid = s.ensure_folder(aid, "INBOX").id
        with s.transaction():
            for uid, raw in enumerate(earlier, start=1):
                s.add_message(aid, raw, folder_id=fid, uidvalidity=1, uid=uid)
        seq = s.seq()
        with s.transaction():
            if name == "single":
                results[name] = [s.add_message(aid, raw, folder_id=fid, uidvalidity=1, uid=uid, internaldate=1709600000)
                                 for uid, raw in enumerate(batch, start=10)]
            else:
                items = [store_mod.Incoming(raw, envelope.content_hash(raw), envelope.read(raw), fid, 1, uid,
                                            internaldate=1709600000) for uid, raw in enumerate(batch, start=10)]
                results[name] = s.add_messages(aid, items)
            # the uid of the first location is taken: nothing new, whatever the bytes
            taken = s.add_message(aid, msg("late@x"), folder_id=fid, uidvalidity=1, uid=10)
            assert taken.new_message and not taken.new_location
        changes = s.changes_since(seq)
        assert len({c.seq for c in changes}) == len(changes)  # one seq per change: no run to cut
        assert {c.message for c in changes} >= {r.message for r in results[name]}
    single, batch_store = stores["single"], stores["batch"]
    flags = [(r.new_message, r.new_location) for r in results["single"]]
    assert flags == [(r.new_message, r.new_location) for r in results["batch"]]
    assert flags[6] == (False, True) and flags[7] == (False, True) and flags[9] == (False, True)
    assert _thread_groups(single) == _thread_groups(batch_store)
    assert {"m@x", "n@x", "x@x", "y@x", "a@x", "b@x", "c@x"} in _thread_groups(batch_store)
    assert {"s@x", "r@x"} in _thread_groups(batch_store)
    for m in batch_store.all_message_ids():
        assert batch_store.meta(m).folders == single.meta(m).folders
        assert len(batch_store.locations(m)) == len(single.locations(m))
    for s in stores.values():
        s.close()


def test_a_location_added_after_a_batch_is_in_the_change_feed(store: Store) -> None:
    aid = store.ensure_account("a")
    fid = store.ensure_folder(aid, "INBOX").id
    raw = msg("f@x")
    with store.transaction():
        [r] = store.add_messages(aid, [store_mod.Incoming(raw, envelope.content_hash(raw), envelope.read(raw), fid, 1, 1)])
    seq = store.seq()
    assert store.changes_since(0)[-1].message == r.message and store.changes_since(seq) == []
    other = store.ensure_folder(aid, "Archive").id
    with store.transaction():
        store.add_message(aid, raw, folder_id=other, uidvalidity=1, uid=1)
    assert [c.message for c in store.changes_since(seq)] == [r.message]


def test_a_database_of_the_first_schema_is_migrated_with_its_change_feed(tmp_path: Path) -> None:
    path = tmp_path / "raw.db"
    old = msg("old@x")
    db = apsw.Connection(str(path))
    db.execute(MIGRATIONS[0][1])
    db.execute("PRAGMA user_version=1")
    db.execute("INSERT INTO accounts(name) VALUES ('a')")
    db.execute("INSERT INTO folders(account_id, name) VALUES (1, 'INBOX')")
    db.execute("INSERT INTO messages(account_id, message_id, content_hash, raw, size, date, date_source, "
               "thread_id, added_at) VALUES (1, 'old@x', ?, ?, ?, 0, 'header', 1, 0)",
               (envelope.content_hash(old), old, len(old)))
    db.close()
    s = Store(path)
    assert s.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    seq = s.seq()
    assert seq == 1  # the old trigger numbered the old message
    r = add(s, old, "Archive", uidvalidity=1, uid=5)  # a new location of the old message is a change
    assert not r.new_message and r.new_location and r.message == 1
    assert [c.message for c in s.changes_since(seq)] == [1]
    seq = s.seq()
    new = add(s, msg("new@x"), uidvalidity=1, uid=6)
    assert [c.message for c in s.changes_since(seq)] == [new.message]
    s.close()
