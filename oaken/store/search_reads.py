"""raw.db's answers to the query operators that only raw.db can give as they are now: labels
(a label set a second ago filters right, whatever index.db copied), folders by their SPECIAL-USE
flag (in:sent), sizes, the Message-ID and thread of a message, and the headers raw.db keeps only
in the raw bytes (Bcc, Delivered-To, List-Id). Each judges a set of candidates, read-only."""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from oaken.store.feed import ChangeFeed
from oaken.store.records import json_list

# RFC 6154 flags, and the names servers without them use (matched on the last part of the name)
SPECIAL_USE = {"sent": "\\sent", "drafts": "\\drafts", "trash": "\\trash", "spam": "\\junk"}
COMMON_NAMES = {
    "sent": ("sent", "sent items", "sent messages", "sent mail", "sent-mail"),
    "drafts": ("drafts", "draft"),
    "trash": ("trash", "deleted items", "deleted messages", "bin"),
    "spam": ("spam", "junk", "junk e-mail", "junk email", "bulk mail"),
}
_LAST_PART = re.compile(r"[^/.\\]*$")
HEADER_BYTES = 65536  # a header block longer than this is read this far


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class SearchReads(ChangeFeed):
    """Read-only filters over candidate messages, for oaken.search."""

    def labelled(self, messages: Iterable[int], label: str) -> set[int]:
        """Those of `messages` holding `label` now (a folder they are in, an IMAP keyword on a copy,
        or a label set locally), case-insensitive as index.db's copy is."""
        keyword = "" if label.startswith("\\") else f"% {_like(label)} %"
        return {
            r[0]
            for r in self.db.execute(
                "SELECT j.value FROM json_each(?1) j WHERE "
                "EXISTS (SELECT 1 FROM locations l JOIN folders f ON f.id = l.folder_id "
                "        WHERE l.message = j.value AND f.name = ?2 COLLATE NOCASE) "
                "OR EXISTS (SELECT 1 FROM labels b WHERE b.message = j.value AND b.label = ?2 COLLATE NOCASE) "
                "OR (?3 != '' AND EXISTS (SELECT 1 FROM locations l WHERE l.message = j.value "
                "                         AND ' ' || l.flags || ' ' LIKE ?3 ESCAPE '\\'))",
                (json_list(sorted(set(messages))), label, keyword),
            )
        }

    def special_folders(self, account: str, kind: str) -> list[int]:
        """The account's folders of one SPECIAL-USE (`sent`, `drafts`, `trash`, `spam`); where no
        folder carries that flag, those with one of its common names (Sent Items, INBOX.Junk...)."""
        rows = [
            (int(fid), str(name), str(use or ""))
            for fid, name, use in self.db.execute(
                "SELECT f.id, f.name, f.special_use FROM folders f JOIN accounts a ON a.id = f.account_id "
                "WHERE a.name = ?",
                (account,),
            )
        ]
        flagged = [fid for fid, _name, use in rows if use.lower() == SPECIAL_USE[kind]]
        if flagged:
            return flagged
        names = COMMON_NAMES[kind]
        return [fid for fid, name, _use in rows if (m := _LAST_PART.search(name)) and m[0].lower() in names]

    def in_folders(self, messages: Iterable[int], folders: Sequence[int]) -> set[int]:
        """Those of `messages` with a copy in one of these folders."""
        if not folders:
            return set()
        return {
            r[0]
            for r in self.db.execute(
                "SELECT DISTINCT message FROM locations WHERE message IN (SELECT value FROM json_each(?)) "
                "AND folder_id IN (SELECT value FROM json_each(?))",
                (json_list(sorted(set(messages))), json_list(folders)),
            )
        }

    def sized(self, messages: Iterable[int], larger: int | None, smaller: int | None) -> set[int]:
        """Those of `messages` whose raw size in bytes is above `larger` and below `smaller`."""
        return {
            r[0]
            for r in self.db.execute(
                "SELECT id FROM messages WHERE id IN (SELECT value FROM json_each(?1)) "
                "AND (?2 IS NULL OR size > ?2) AND (?3 IS NULL OR size < ?3)",
                (json_list(sorted(set(messages))), larger, smaller),
            )
        }

    def by_message_id(self, account: str, message_ids: Sequence[str]) -> set[int]:
        """The account's messages with one of these Message-IDs (angle brackets removed)."""
        return {
            r[0]
            for r in self.db.execute(
                "SELECT m.id FROM messages m JOIN accounts a ON a.id = m.account_id "
                "WHERE a.name = ? AND coalesce(m.message_id, '') IN (SELECT value FROM json_each(?))",
                (account, json_list(message_ids)),
            )
        }

    def thread_members(self, account: str, threads: Sequence[int | str]) -> set[int]:
        """The account's messages in these threads, each named by its number or by the Message-ID
        of a message in it (thread:)."""
        numbers = [t for t in threads if isinstance(t, int)]
        ids = [t for t in threads if isinstance(t, str)]
        return {
            r[0]
            for r in self.db.execute(
                "SELECT m.id FROM messages m JOIN accounts a ON a.id = m.account_id WHERE a.name = ?1 AND m.thread_id IN "
                "(SELECT value FROM json_each(?2) UNION SELECT t.thread_id FROM messages t "
                " WHERE t.account_id = a.id AND coalesce(t.message_id, '') IN (SELECT value FROM json_each(?3)))",
                (account, json_list(numbers), json_list(ids)),
            )
        }

    def header_values(self, messages: Iterable[int], names: Sequence[str]) -> dict[int, dict[str, str]]:
        """{message: {header name (lower case): its values as text, joined by ", "}} for headers
        raw.db keeps only inside the raw bytes; read from each candidate's header block."""
        from oaken.header_text import block_charset, decode, header_text

        wanted = {n.lower() for n in names}
        out: dict[int, dict[str, str]] = {}
        for mid, head in self.db.execute(
            "SELECT id, substr(raw, 1, ?) FROM messages WHERE id IN (SELECT value FROM json_each(?))",
            (HEADER_BYTES, json_list(sorted(set(messages)))),
        ):
            block = bytes(head).replace(b"\r\n", b"\n").split(b"\n\n", 1)[0]
            charset = block_charset(block)
            found: dict[str, list[str]] = {}
            for line in re.sub(rb"\n[ \t]+", b" ", block).split(b"\n"):
                name, colon, value = line.partition(b":")
                key = name.strip().lower().decode("ascii", "replace")
                if colon and key in wanted:
                    found.setdefault(key, []).append(decode(header_text(value.strip(), charset), charset))
            out[mid] = {k: ", ".join(v) for k, v in found.items()}
        return out
