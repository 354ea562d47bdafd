"""raw.db's change feed, which the indexes follow instead of diffing the store: every change to a
message gives it a new change seq (by trigger for flags, labels and triage; here for new messages,
new locations and thread merges), and a deleted message leaves a tombstone with a seq of its own.

Every other part of the store builds on ChangeFeed: it names the connection they share.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import apsw

from oaken.sqlite_rows import one_value
from oaken.store.records import Change


class ChangeFeed:
    """The connection every part of the store shares (opened by Store), and the feed's seqs."""

    db: apsw.Connection
    path: Path

    def seq(self) -> int:
        return one_value(self.db, "SELECT value FROM meta WHERE key = 'seq'")

    def take_seqs(self, count: int) -> int:
        """Reserve `count` new change seqs in one statement; returns the first of them."""
        top = one_value(self.db, "UPDATE meta SET value = value + ? WHERE key = 'seq' RETURNING value", (count,))
        return top - count + 1

    def bump(self, messages: Iterable[int]) -> None:
        """Put messages in the feed again after a change no trigger sees."""
        ids = list(messages)
        if not ids:
            return
        # a seq of its own for each message: a reader paging the feed never cuts a run of equal seqs
        first = self.take_seqs(len(ids))
        self.db.executemany(
            "UPDATE messages SET change_seq = ? WHERE id = ?", ((first + n, m) for n, m in enumerate(ids))
        )

    def delete_messages(self, messages: Iterable[int]) -> None:
        self.db.executemany("DELETE FROM messages WHERE id = ?", ((m,) for m in messages))

    def delete_orphans(self, candidates: Iterable[int], *, defer: bool = False) -> int:
        """Delete those of `candidates` left with no location. Returns how many.

        `defer` (a sync pass): only note them; sweep_orphans deletes those still nowhere once the
        pass is over. Another client's MOVE is an expunge here and an APPEND there: deleting at
        once would store the message again under a new id in the folder synced next, losing its
        triage and labels. Returns 0 when deferred."""
        if defer:
            self.db.executemany("INSERT OR IGNORE INTO orphan_candidates VALUES (?)", ((m,) for m in set(candidates)))
            return 0
        gone = [
            m
            for m in set(candidates)
            if not self.db.execute("SELECT 1 FROM locations WHERE message = ? LIMIT 1", (m,)).fetchone()
        ]
        self.delete_messages(gone)
        return len(gone)

    def sweep_orphans(self, account_id: int) -> int:
        """Delete the account's messages sync passes left with no location that found none since
        (the end of a whole pass over the account's folders). Returns how many."""
        candidates = [
            r[0]
            for r in self.db.execute(
                "DELETE FROM orphan_candidates WHERE message IN (SELECT o.message FROM orphan_candidates o "
                "JOIN messages m ON m.id = o.message WHERE m.account_id = ?) RETURNING message",
                (account_id,),
            )
        ]
        self.db.execute("DELETE FROM orphan_candidates WHERE message NOT IN (SELECT id FROM messages)")
        return self.delete_orphans(candidates) if candidates else 0

    def changes_since(self, seq: int, limit: int = 1000) -> list[Change]:
        """The change feed: messages changed or deleted after `seq`, oldest change first."""
        rows = self.db.execute(
            "SELECT id, change_seq, 0, content_hash FROM messages WHERE change_seq > ?1 "
            "UNION ALL SELECT message, change_seq, 1, NULL FROM tombstones WHERE change_seq > ?1 "
            "ORDER BY 2 LIMIT ?2",
            (seq, limit),
        )
        return [Change(m, s, bool(d), h) for m, s, d, h in rows]

    def count_changes_since(self, seq: int) -> int:
        """How many entries changes_since(seq) would list in all (a progress bar's total)."""
        return one_value(
            self.db,
            "SELECT (SELECT count(*) FROM messages WHERE change_seq > ?1) + "
            "(SELECT count(*) FROM tombstones WHERE change_seq > ?1)",
            (seq,),
        )
