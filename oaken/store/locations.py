"""raw.db's locations: where each message lives (folder, UIDVALIDITY, UID) with its flags, as
sync mirrors them from the server and matches messages again without downloading them; and the
files an import stored."""

from __future__ import annotations

from typing import Iterable, Sequence

from oaken.sqlite_rows import one_value
from oaken.store.feed import ChangeFeed
from oaken.store.records import Location, flags_text, split_flags

# Read state (DESIGN.md): a message is unread while any of its copies (locations: each UID of
# each folder, each imported file) lacks \Seen, as a mail client showing that copy sees it. One
# SQL condition on a message row `m`, so every reader of read state (metadata, filters, status)
# judges alike.
UNREAD_SQL = "EXISTS (SELECT 1 FROM unread u WHERE u.message = m.id)"  # the table migration m007 keeps


class Locations(ChangeFeed):
    """The places of messages: read, moved, reflagged and dropped as the server says."""

    _LOC_SQL = (
        "SELECT l.id, l.message, l.folder_id, f.name, l.uidvalidity, l.uid, l.flags, l.modseq "
        "FROM locations l JOIN folders f ON f.id = l.folder_id"
    )

    def locations(self, message: int) -> list[Location]:
        return [
            Location(id_, m, folder_id, folder, uidvalidity, uid, split_flags(flags), modseq)
            for id_, m, folder_id, folder, uidvalidity, uid, flags, modseq in self.db.execute(
                self._LOC_SQL + " WHERE l.message = ? ORDER BY l.id", (message,)
            )
        ]

    def folder_uids(self, folder_id: int, uidvalidity: int | None) -> dict[int, tuple[int, tuple[str, ...]]]:
        """uid -> (message, flags) for one folder at one UIDVALIDITY."""
        return {
            r[0]: (r[1], split_flags(r[2]))
            for r in self.db.execute(
                "SELECT uid, message, flags FROM locations WHERE folder_id = ? AND uidvalidity IS ? AND uid IS NOT NULL",
                (folder_id, uidvalidity),
            )
        }

    def set_flags(
        self, folder_id: int, uidvalidity: int | None, uid: int, flags: Iterable[str | bytes], modseq: int | None = None
    ) -> None:
        self.db.execute(
            "UPDATE locations SET flags = ?, modseq = coalesce(?, modseq) WHERE folder_id = ? AND uidvalidity IS ? AND uid = ?",
            (flags_text(flags), modseq, folder_id, uidvalidity, uid),
        )

    def remove_uids(self, folder_id: int, uidvalidity: int | None, uids: Iterable[int], *, defer: bool = False) -> int:
        """Expunged on the server: drop those locations, and messages left nowhere (`defer`: at
        the end of the sync pass, see delete_orphans). Returns messages deleted now."""
        affected: list[int] = []
        for uid in uids:
            row = self.db.execute(
                "DELETE FROM locations WHERE folder_id = ? AND uidvalidity IS ? AND uid = ? RETURNING message",
                (folder_id, uidvalidity, uid),
            ).fetchone()
            if row:
                affected.append(row[0])
        return self.delete_orphans(affected, defer=defer)

    def relocate(
        self,
        folder_id: int,
        old_uidvalidity: int | None,
        old_uid: int,
        new_uidvalidity: int,
        new_uid: int,
        flags: Iterable[str | bytes],
        modseq: int | None = None,
    ) -> None:
        """A message matched again after UIDVALIDITY changed: move its location, keep the message."""
        self.db.execute(
            "UPDATE locations SET uidvalidity = ?, uid = ?, flags = ?, modseq = ? "
            "WHERE folder_id = ? AND uidvalidity IS ? AND uid = ?",
            (new_uidvalidity, new_uid, flags_text(flags), modseq, folder_id, old_uidvalidity, old_uid),
        )

    def drop_stale_uidvalidity(self, folder_id: int, keep_uidvalidity: int, *, defer: bool = False) -> int:
        affected = [
            r[0]
            for r in self.db.execute(
                "DELETE FROM locations WHERE folder_id = ? AND uid IS NOT NULL AND uidvalidity IS NOT ? RETURNING message",
                (folder_id, keep_uidvalidity),
            )
        ]
        return self.delete_orphans(affected, defer=defer)

    # ---- matching messages again without downloading them -------------------------------------

    def stale_locations(self, folder_id: int, keep_uidvalidity: int) -> list[tuple[int | None, int, str | None, int]]:
        """Locations of a folder left at another UIDVALIDITY: (uidvalidity, uid, Message-ID, size)."""
        return [
            tuple(r)
            for r in self.db.execute(
                "SELECT l.uidvalidity, l.uid, m.message_id, m.size FROM locations l JOIN messages m ON m.id = l.message "
                "WHERE l.folder_id = ? AND l.uid IS NOT NULL AND l.uidvalidity IS NOT ? ORDER BY l.uid",
                (folder_id, keep_uidvalidity),
            )
        ]

    def location_sample(self, folder_id: int, limit: int = 10) -> list[tuple[int, str | None, int]]:
        """Up to `limit` (uid, Message-ID, size) spread over a folder: enough to recognise it renamed."""
        rows = self.db.execute(
            "SELECT l.uid, m.message_id, m.size FROM locations l JOIN messages m ON m.id = l.message "
            "WHERE l.folder_id = ? AND l.uid IS NOT NULL ORDER BY l.uid",
            (folder_id,),
        ).fetchall()
        step = max(1, len(rows) // limit)
        return [tuple(r) for r in rows[::step][:limit]]  # type: ignore[misc]

    def location_count(self, folder_id: int) -> int:
        return one_value(self.db, "SELECT locations FROM folders WHERE id = ?", (folder_id,))  # kept by triggers (m008)

    def local_sources(self, account_id: int, under: Sequence[str] | None = None) -> dict[str, int | None]:
        """Files an import already stored (path -> mtime), so a re-import need not read them again;
        `under`: only those whose path starts with one of these (the paths an import was given),
        read through an index, so that 100 new files cost a few rows, not the account's every
        imported file (a million: 0.75 s)."""
        sql = (
            "SELECT l.source, l.internaldate FROM locations l JOIN folders f ON f.id = l.folder_id "
            "WHERE f.account_id = ? AND l.uid IS NULL AND l.source IS NOT NULL"
        )
        if under is None:
            return {r[0]: r[1] for r in self.db.execute(sql, (account_id,))}
        out: dict[str, int | None] = {}
        for prefix in dict.fromkeys(under):
            rows = self.db.execute(SOURCES_UNDER, (prefix, prefix + "\U0010ffff", account_id))
            out.update((r[0], r[1]) for r in rows)
        return out

    def import_dirs(self, account_id: int, under: Sequence[str] | None = None) -> dict[str, tuple[int, int]]:
        """The Maildir cur/ and new/ folders an import listed whole (path -> (mtime in ns, files)),
        under these paths (all the account's when None)."""
        sql = "SELECT path, mtime_ns, files FROM import_dirs WHERE account_id = ?"
        if under is None:
            return {r[0]: (r[1], r[2]) for r in self.db.execute(sql, (account_id,))}
        out: dict[str, tuple[int, int]] = {}
        for prefix in dict.fromkeys(under):
            rows = self.db.execute(sql + " AND path >= ? AND path < ?", (account_id, prefix, prefix + "\U0010ffff"))
            out.update((r[0], (r[1], r[2])) for r in rows)
        return out

    def set_import_dirs(self, account_id: int, dirs: Iterable[tuple[str, int, int]]) -> None:
        """Record folders an import listed whole and stored every file of: (path, mtime ns, files)."""
        self.db.executemany(
            "INSERT OR REPLACE INTO import_dirs(account_id, path, mtime_ns, files) VALUES (?, ?, ?, ?)",
            [(account_id, path, mtime, files) for path, mtime, files in dirs],
        )


# The stored files under one path, by the index on source (m009): left to choose, SQLite walks
# the account's folders and reads every location it imported (tests/test_import.py checks the plan).
SOURCES_UNDER = (
    "SELECT l.source, l.internaldate FROM locations l INDEXED BY locations_source "
    "WHERE l.uid IS NULL AND l.source IS NOT NULL AND l.source >= ? AND l.source < ? "
    "AND l.folder_id IN (SELECT id FROM folders WHERE account_id = ?)"
)
