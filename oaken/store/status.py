"""What raw.db holds, for `oaken status`: counts per account and folder, the flag queue, the
messages stored with a parse problem."""

from __future__ import annotations

import os

from oaken.store.messages import Messages


class Status(Messages):
    """Counts and sizes of what raw.db holds."""

    def status(self) -> dict:
        accounts: dict[str, dict] = {}
        for aid, name in self.db.execute("SELECT id, name FROM accounts ORDER BY id").fetchall():
            count, size = self.db.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM messages WHERE account_id = ?", (aid,)).fetchone()
            flagged = self.db.execute(
                "SELECT count(*) FROM messages WHERE account_id = ? AND problem IS NOT NULL", (aid,)).fetchone()[0]
            unread = self.db.execute(
                "SELECT count(*) FROM messages m WHERE account_id = ? AND NOT EXISTS (SELECT 1 FROM locations l "
                "WHERE l.message = m.id AND ' ' || l.flags || ' ' LIKE '% \\Seen %')", (aid,)).fetchone()[0]
            folders = {
                fname: {"messages": n, "uidvalidity": uv, "synced_at": synced}
                for fname, n, uv, synced in self.db.execute(
                    "SELECT f.name, count(l.id), f.uidvalidity, f.synced_at FROM folders f "
                    "LEFT JOIN locations l ON l.folder_id = f.id WHERE f.account_id = ? GROUP BY f.id ORDER BY f.name",
                    (aid,))
            }
            accounts[name] = {"messages": count, "bytes": size, "unread": unread, "flagged": flagged,
                              "folders": folders}
        pending = self.db.execute("SELECT count(*) FROM flag_queue WHERE state = 'pending'").fetchone()[0]
        rejected = self.db.execute("SELECT count(*) FROM flag_queue WHERE state = 'rejected'").fetchone()[0]
        return {
            "messages": self.message_count(),
            "accounts": accounts,
            "flag_changes": {"pending": pending, "rejected": rejected},
            "raw_db_bytes": self.path.stat().st_size + _size(str(self.path) + "-wal"),
        }

    def flagged_messages(self, limit: int = 50) -> list[tuple[int, str, str]]:
        """Messages stored with a parse problem: (id, subject, problem)."""
        return [tuple(r) for r in self.db.execute(  # type: ignore[misc]
            "SELECT id, subject, problem FROM messages WHERE problem IS NOT NULL ORDER BY id LIMIT ?", (limit,))]


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
