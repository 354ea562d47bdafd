"""The counters `oaken status` reads (migration m008) stay equal to a recount through every change
a sync or an import makes: messages added twice, copies in two folders, locations removed until a
message is an orphan, a folder deleted, a message moved between folders."""

from __future__ import annotations

from pathlib import Path

from oaken.store import Store

MAIL = sorted((Path(__file__).parent / "data" / "foundation" / "notmuch-default" / "cur").iterdir())[:12]


def recount(store: Store) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
    accounts = {
        aid: (n, size)
        for aid, n, size in store.db.execute(
            "SELECT a.id, count(m.id), coalesce(sum(m.size), 0) FROM accounts a "
            "LEFT JOIN messages m ON m.account_id = a.id GROUP BY a.id"
        )
    }
    folders = {
        fid: n
        for fid, n in store.db.execute(
            "SELECT f.id, count(l.id) FROM folders f LEFT JOIN locations l ON l.folder_id = f.id GROUP BY f.id"
        )
    }
    return accounts, folders


def counters(store: Store) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
    accounts = {
        aid: (n, size)
        for aid, n, size in store.db.execute(
            "SELECT a.id, coalesce(t.messages, 0), coalesce(t.bytes, 0) FROM accounts a "
            "LEFT JOIN account_totals t ON t.account_id = a.id"
        )
    }
    folders = {fid: n for fid, n in store.db.execute("SELECT id, locations FROM folders")}
    return accounts, folders


def test_status_counters_follow_every_change(tmp_path: Path) -> None:
    with Store(tmp_path / "raw.db") as store:
        work, home = store.ensure_account("work"), store.ensure_account("home")
        inbox = store.ensure_folder(work, "INBOX").id
        archive = store.ensure_folder(work, "Archive").id
        other = store.ensure_folder(home, "INBOX").id
        assert counters(store) == recount(store)
        with store.transaction():
            for uid, path in enumerate(MAIL, start=1):
                raw = path.read_bytes()
                store.add_message(work, raw, folder_id=inbox, uidvalidity=1, uid=uid, flags=("\\Seen",))
                store.add_message(work, raw, folder_id=archive, uidvalidity=1, uid=uid)  # a second copy
                if uid % 3 == 0:
                    store.add_message(home, raw, folder_id=other, uidvalidity=7, uid=uid)
        assert counters(store) == recount(store)
        assert counters(store)[0][work][0] == len(MAIL) and counters(store)[1][archive] == len(MAIL)

        with store.transaction():
            store.remove_uids(inbox, 1, [1, 2, 3])  # copies left in Archive: messages stay
        assert counters(store) == recount(store) and counters(store)[0][work][0] == len(MAIL)
        with store.transaction():
            store.remove_uids(archive, 1, [1, 2])  # no copy left: two messages deleted
        assert counters(store) == recount(store) and counters(store)[0][work][0] == len(MAIL) - 2

        with store.transaction():
            store.db.execute("UPDATE locations SET folder_id = ?, uid = 500 WHERE folder_id = ? AND uid = 5", (inbox, archive))
        assert counters(store) == recount(store)
        with store.transaction():
            store.relocate(inbox, 1, 6, 2, 60, ("\\Seen",))
            store.drop_stale_uidvalidity(inbox, 2)
        assert counters(store) == recount(store)
        with store.transaction():
            store.delete_folder(other)
        assert counters(store) == recount(store)
        assert store.message_count() == sum(n for n, _ in recount(store)[0].values())
        assert store.location_count(inbox) == recount(store)[1][inbox]
