"""raw.db's accounts and folders: the places messages live in, and each folder's sync state."""

from __future__ import annotations

import time

from oaken.errors import NotFound
from oaken.sqlite_rows import one_row, one_value
from oaken.store.feed import ChangeFeed
from oaken.store.records import Folder, json_list


class Folders(ChangeFeed):
    """Accounts by name, folders by account and name, and where a folder's sync stopped."""

    def ensure_account(self, name: str) -> int:
        row = self.db.execute("SELECT id FROM accounts WHERE name = ?", (name,)).fetchone()
        if row:
            return row[0]
        return one_value(self.db, "INSERT INTO accounts(name) VALUES (?) RETURNING id", (name,))

    def account_id(self, name: str) -> int:
        row = self.db.execute("SELECT id FROM accounts WHERE name = ?", (name,)).fetchone()
        if not row:
            known = ", ".join(self.account_names()) or "none yet"
            raise NotFound(f"no account {name!r} in {self.path} (accounts: {known})")
        return row[0]

    def account_names(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT name FROM accounts ORDER BY id")]

    _FOLDER_COLS = (
        "id, account_id, name, delimiter, special_use, uidvalidity, uidnext, highestmodseq, exists_count, mailbox_id"
    )

    def ensure_folder(
        self,
        account_id: int,
        name: str,
        *,
        delimiter: str | None = None,
        special_use: str | None = None,
        mailbox_id: str | None = None,
    ) -> Folder:
        """The folder of that name, made if new. `mailbox_id` (the server's id of the mailbox) is
        recorded where none was; a folder whose mailbox changed under its name is the caller's to
        drop first (oaken/sync/runner.py)."""
        self.db.execute(
            "INSERT INTO folders(account_id, name, delimiter, special_use, mailbox_id) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(account_id, name) DO UPDATE SET "
            "delimiter = coalesce(excluded.delimiter, delimiter), "
            "special_use = coalesce(excluded.special_use, special_use), "
            "mailbox_id = coalesce(mailbox_id, excluded.mailbox_id)",
            (account_id, name, delimiter, special_use, mailbox_id),
        )
        return Folder(
            *one_row(
                self.db,
                f"SELECT {self._FOLDER_COLS} FROM folders WHERE account_id = ? AND name = ?",
                (account_id, name),
            )
        )

    def folder(self, account_id: int, name: str) -> Folder | None:
        row = self.db.execute(
            f"SELECT {self._FOLDER_COLS} FROM folders WHERE account_id = ? AND name = ?", (account_id, name)
        ).fetchone()
        return Folder(*row) if row else None

    def folders(self, account_id: int) -> list[Folder]:
        return [
            Folder(*r)
            for r in self.db.execute(
                f"SELECT {self._FOLDER_COLS} FROM folders WHERE account_id = ? ORDER BY name", (account_id,)
            )
        ]

    def set_folder_state(
        self,
        folder_id: int,
        *,
        uidvalidity: int | None,
        uidnext: int | None,
        highestmodseq: int | None,
        exists_count: int | None = None,
    ) -> None:
        """Saved in the same transaction as the folder's messages, so a restart resumes exactly."""
        self.db.execute(
            "UPDATE folders SET uidvalidity = ?, uidnext = ?, highestmodseq = ?, exists_count = ?, synced_at = ? "
            "WHERE id = ?",
            (uidvalidity, uidnext, highestmodseq, exists_count, time.time(), folder_id),
        )

    def rename_folder(self, folder_id: int, new_name: str, *, bump: bool = True) -> None:
        """`bump=False`: a step on the way to another name in the same transaction."""
        self.db.execute("UPDATE folders SET name = ? WHERE id = ?", (new_name, folder_id))
        if not bump:
            return
        # labels come from folder names: every message there changed (a no-op UPDATE of locations
        # would not fire its trigger, so bump them directly)
        self.bump(
            r[0] for r in self.db.execute("SELECT DISTINCT message FROM locations WHERE folder_id = ?", (folder_id,))
        )

    def identity_sample(
        self, folder_id: int, uidvalidity: int | None, size: int = 20
    ) -> list[tuple[int, str | None, int]]:
        """Up to `size` (uid, Message-ID, size) of a folder's mirrored messages at evenly spaced
        positions from the oldest to the newest: what recognises the folder under another name on a
        server without mailbox ids. Spread over the whole folder, so that expunging its oldest (or
        any few) messages leaves most of the sample in place."""
        uids = [
            r[0]
            for r in self.db.execute(
                "SELECT uid FROM locations WHERE folder_id = ? AND uidvalidity IS ? AND uid IS NOT NULL ORDER BY uid",
                (folder_id, uidvalidity),
            )
        ]
        if not uids:
            return []
        n = min(size, len(uids))
        picked = sorted({uids[round(i * (len(uids) - 1) / (n - 1))] if n > 1 else uids[-1] for i in range(n)})
        return [
            tuple(r)
            for r in self.db.execute(
                "SELECT l.uid, m.message_id, m.size FROM locations l JOIN messages m ON m.id = l.message "
                "WHERE l.folder_id = ? AND l.uidvalidity IS ? AND l.uid IN (SELECT value FROM json_each(?)) ORDER BY l.uid",
                (folder_id, uidvalidity, json_list(picked)),
            )
        ]

    def delete_folder(self, folder_id: int, *, defer: bool = False) -> int:
        """Forget a folder; messages left with no location are deleted (`defer`: at the end of the
        sync pass, see delete_orphans). Returns how many were deleted now."""
        affected = [
            r[0] for r in self.db.execute("SELECT DISTINCT message FROM locations WHERE folder_id = ?", (folder_id,))
        ]
        self.db.execute("DELETE FROM locations WHERE folder_id = ?", (folder_id,))
        self.db.execute("DELETE FROM folders WHERE id = ?", (folder_id,))
        return self.delete_orphans(affected, defer=defer)
