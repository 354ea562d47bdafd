"""raw.db's accounts and folders: the places messages live in, and each folder's sync state."""

from __future__ import annotations

import time

from oaken.errors import NotFound
from oaken.store.feed import ChangeFeed
from oaken.store.records import Folder


class Folders(ChangeFeed):
    """Accounts by name, folders by account and name, and where a folder's sync stopped."""

    def ensure_account(self, name: str) -> int:
        row = self.db.execute("SELECT id FROM accounts WHERE name = ?", (name,)).fetchone()
        if row:
            return row[0]
        return self.db.execute("INSERT INTO accounts(name) VALUES (?) RETURNING id", (name,)).fetchone()[0]

    def account_id(self, name: str) -> int:
        row = self.db.execute("SELECT id FROM accounts WHERE name = ?", (name,)).fetchone()
        if not row:
            known = ", ".join(self.account_names()) or "none yet"
            raise NotFound(f"no account {name!r} in {self.path} (accounts: {known})")
        return row[0]

    def account_names(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT name FROM accounts ORDER BY id")]

    _FOLDER_COLS = "id, account_id, name, delimiter, special_use, uidvalidity, uidnext, highestmodseq, exists_count"

    def ensure_folder(self, account_id: int, name: str, *, delimiter: str | None = None,
                      special_use: str | None = None) -> Folder:
        self.db.execute(
            "INSERT INTO folders(account_id, name, delimiter, special_use) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(account_id, name) DO UPDATE SET "
            "delimiter = coalesce(excluded.delimiter, delimiter), special_use = coalesce(excluded.special_use, special_use)",
            (account_id, name, delimiter, special_use),
        )
        return self.folder(account_id, name)  # type: ignore[return-value]

    def folder(self, account_id: int, name: str) -> Folder | None:
        row = self.db.execute(
            f"SELECT {self._FOLDER_COLS} FROM folders WHERE account_id = ? AND name = ?", (account_id, name)
        ).fetchone()
        return Folder(*row) if row else None

    def folders(self, account_id: int) -> list[Folder]:
        return [Folder(*r) for r in self.db.execute(
            f"SELECT {self._FOLDER_COLS} FROM folders WHERE account_id = ? ORDER BY name", (account_id,))]

    def set_folder_state(self, folder_id: int, *, uidvalidity: int | None, uidnext: int | None,
                         highestmodseq: int | None, exists_count: int | None = None) -> None:
        """Saved in the same transaction as the folder's messages, so a restart resumes exactly."""
        self.db.execute(
            "UPDATE folders SET uidvalidity = ?, uidnext = ?, highestmodseq = ?, exists_count = ?, synced_at = ? "
            "WHERE id = ?",
            (uidvalidity, uidnext, highestmodseq, exists_count, time.time(), folder_id),
        )

    def rename_folder(self, folder_id: int, new_name: str) -> None:
        self.db.execute("UPDATE folders SET name = ? WHERE id = ?", (new_name, folder_id))
        # labels come from folder names: every message there changed (a no-op UPDATE of locations
        # would not fire its trigger, so bump them directly)
        self.bump(r[0] for r in self.db.execute(
            "SELECT DISTINCT message FROM locations WHERE folder_id = ?", (folder_id,)))

    def delete_folder(self, folder_id: int) -> int:
        """Forget a folder; messages left with no location are deleted. Returns how many."""
        affected = [r[0] for r in self.db.execute(
            "SELECT DISTINCT message FROM locations WHERE folder_id = ?", (folder_id,))]
        self.db.execute("DELETE FROM locations WHERE folder_id = ?", (folder_id,))
        self.db.execute("DELETE FROM folders WHERE id = ?", (folder_id,))
        return self.delete_orphans(affected)
