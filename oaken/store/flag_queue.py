"""raw.db's queue of local flag changes for the server, and read state: opening a message sets
\\Seen at once on every copy of it (each location: every UID in every folder) and queues one change
per copy, which sync pushes by that copy's UID before it pulls."""

from __future__ import annotations

import time

from oaken.errors import NotFound
from oaken.store.locations import Locations
from oaken.store.records import SEEN, FlagChange, flags_text


class FlagQueue(Locations):
    """Flag changes made here and waiting for the server, and what became of them."""

    def mark_read(self, message: int, read: bool = True) -> int:
        """Set or clear \\Seen on every copy at once (two UIDs in one folder are two copies), and
        queue one change per server copy that differs: a message counts unread while any copy lacks
        \\Seen (locations.UNREAD_SQL), so reading it must reach them all. Returns changes queued."""
        queued = 0
        for loc in self.locations(message):
            has = SEEN in loc.flags
            if has == read:
                continue
            new = set(loc.flags) | {SEEN} if read else set(loc.flags) - {SEEN}
            self.db.execute("UPDATE locations SET flags = ? WHERE id = ?", (flags_text(new), loc.id))
            if loc.uid is not None:
                self._queue(message, loc.id, "+" if read else "-", SEEN)
                queued += 1
        return queued

    def pending_flag_changes(self, folder_id: int | None = None) -> list[FlagChange]:
        sql = (
            "SELECT q.id, q.message, q.location, l.folder_id, l.uidvalidity, l.uid, q.op, q.flag, l.modseq "
            "FROM flag_queue q JOIN locations l ON l.id = q.location WHERE q.state = 'pending'"
        )
        params: tuple = ()
        if folder_id is not None:
            sql += " AND l.folder_id = ?"
            params = (folder_id,)
        return [FlagChange(*r) for r in self.db.execute(sql + " ORDER BY q.id", params)]

    def finish_flag_change(self, change_id: int, *, error: str | None = None) -> None:
        self.db.execute(
            "UPDATE flag_queue SET state = ?, error = ?, attempts = attempts + 1 WHERE id = ?",
            ("rejected" if error else "done", error, change_id),
        )

    def rejected_flag_changes(self) -> list[tuple[int, str, str, str]]:
        return [
            tuple(r)
            for r in self.db.execute(
                "SELECT message, op, flag, coalesce(error, '') FROM flag_queue WHERE state = 'rejected'"
            )
        ]

    def drop_orphan_flag_changes(self) -> None:
        """A change whose location was expunged has nothing left to change on the server."""
        self.db.execute(
            "UPDATE flag_queue SET state = 'done', error = 'location gone' "
            "WHERE state = 'pending' AND location NOT IN (SELECT id FROM locations)"
        )

    def queue_flag_change(self, location: int, op: str, flag: str) -> None:
        """Queue one flag change of one location for the server (mark_read does this for \\Seen)."""
        row = self.db.execute("SELECT message FROM locations WHERE id = ?", (location,)).fetchone()
        if not row:
            raise NotFound(f"no location {location}")
        self._queue(row[0], location, op, flag)

    def _queue(self, message: int, location: int, op: str, flag: str) -> None:
        self.db.execute(
            "INSERT INTO flag_queue(message, location, op, flag, created_at) VALUES (?, ?, ?, ?, ?)",
            (message, location, op, flag, time.time()),
        )
