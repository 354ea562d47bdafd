"""raw.db's messages: storing a batch of them, each once per (Message-ID, content), with the
places they live; finding a message and reading its bytes."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Iterable, Sequence

from oaken.errors import NotFound
from oaken.sqlite_rows import one_value
from oaken.store.feed import ChangeFeed
from oaken.store.records import AddResult, Incoming, flags_text, json_list

if TYPE_CHECKING:  # the envelope reader's regexes are loaded by writers only, not by a search
    from oaken.envelope import Envelope


class Messages(ChangeFeed):
    """Stores messages and their new locations (threaded on the way in), and reads them back raw."""

    def add_message(
        self,
        account_id: int,
        raw: bytes,
        *,
        folder_id: int,
        uidvalidity: int | None = None,
        uid: int | None = None,
        flags: Iterable[str | bytes] = (),
        internaldate: int | None = None,
        source: str | None = None,
        modseq: int | None = None,
        read: tuple[str, Envelope] | None = None,
    ) -> AddResult:
        """Store a message once per (Message-ID, content) and record one more place it lives.
        `read`: (content hash, envelope) already computed from `raw`, e.g. by sync in a worker process."""
        from oaken import envelope

        digest, env = read if read is not None else (envelope.content_hash(raw), envelope.read(raw))
        return self.add_messages(
            account_id,
            [Incoming(raw, digest, env, folder_id, uidvalidity, uid, tuple(flags), internaldate, source, modseq)],
        )[0]

    def add_messages(self, account_id: int, items: Sequence[Incoming]) -> list[AddResult]:
        """add_message for a whole batch, in order, as if each were added alone: a handful of
        statements per batch instead of a dozen per message (a first sync stores 10,000s)."""
        from oaken import envelope
        from oaken.store.threads import Threads  # here: only a writer threads, never a search

        if not items:
            return []
        known = self._find_messages(account_id, {(it.envelope.message_id or "", it.digest) for it in items})
        slots: list[int] = []  # per item: a stored message id (>= 0) or -1 - index into `rows`
        rows: list[list] = []  # messages to insert; thread_id (Threads.COLUMN) may change as threads merge
        pending: dict[tuple[str, str], int] = {}
        fresh = [it for it in items if (it.envelope.message_id or "", it.digest) not in known]
        threads = Threads(self, account_id, fresh) if fresh else None
        now = time.time()
        for it in items:
            key = (it.envelope.message_id or "", it.digest)
            if key in known:
                slots.append(known[key])
                continue
            if key not in pending:
                assert threads is not None
                pending[key] = len(rows)
                env = it.envelope
                arrived = it.internaldate if it.internaldate is not None else envelope.now()
                date, date_source = envelope.effective_date(env.date, arrived)
                if date_source == "arrival" and it.internaldate is None:
                    date_source = "import"
                rows.append(
                    [
                        account_id,
                        env.message_id,
                        it.digest,
                        it.raw,
                        len(it.raw),
                        date,
                        date_source,
                        env.subject,
                        env.sender_name,
                        env.sender_addr,
                        "\n".join(env.to),
                        "\n".join(env.cc),
                        " ".join(env.in_reply_to),
                        " ".join(env.references),
                        threads.place(env, rows),
                        env.problem,
                        now,
                    ]
                )
            slots.append(-1 - pending[key])
        ids: list[int] = []
        if rows:
            assert threads is not None
            threads.save()
            # fresh change seqs for the new rows, so no trigger rewrites a row (and its raw bytes)
            # to bump it
            first = self.take_seqs(len(rows))
            ids = [
                r[0]
                for r in self.db.executemany(
                    "INSERT INTO messages(account_id, message_id, content_hash, raw, size, date, date_source, subject, "
                    "sender_name, sender_addr, to_addrs, cc_addrs, in_reply_to, refs, thread_id, problem, added_at, "
                    "change_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    [(*row, first + n) for n, row in enumerate(rows)],
                )
            ]
            # no triage row until triage is set: every reader LEFT JOINs it with disposition 'inbox'
        results = self._add_locations(items, [s if s >= 0 else ids[-1 - s] for s in slots], set(ids))
        out = []
        seen_new: set[int] = set()
        for it, slot, (message, new_location) in zip(items, slots, results):
            new_message = slot < 0 and slot not in seen_new
            seen_new.add(slot)
            out.append(AddResult(message, new_message, new_location, it.envelope.problem if new_message else None))
        return out

    def _add_locations(self, items: Sequence[Incoming], messages: list[int], fresh: set[int]) -> list[tuple[int, bool]]:
        """One location per item unless that place is taken already: (message, new location).
        A message stored before (not in `fresh`) that gains a location is bumped in the feed."""
        taken: set[tuple] = set()
        by_uid: dict[tuple[int, int | None], list[int]] = {}
        for it in items:
            if it.uid is not None:
                by_uid.setdefault((it.folder_id, it.uidvalidity), []).append(it.uid)
        for (folder_id, uidvalidity), uids in by_uid.items():
            taken.update(
                (folder_id, uidvalidity, r[0])
                for r in self.db.execute(
                    "SELECT uid FROM locations WHERE folder_id = ? AND uidvalidity IS ? AND uid IN "
                    "(SELECT value FROM json_each(?))",
                    (folder_id, uidvalidity, json_list(uids)),
                )
            )
        out: list[tuple[int, bool]] = []
        new: list[tuple] = []
        for it, message in zip(items, messages):
            if it.uid is not None:
                key: tuple = (it.folder_id, it.uidvalidity, it.uid)
            else:
                key = (it.folder_id, message)
                if (
                    key not in taken
                    and message not in fresh
                    and self.db.execute(
                        "SELECT 1 FROM locations WHERE folder_id = ? AND message = ? AND uid IS NULL", key
                    ).fetchone()
                ):
                    taken.add(key)
            if key in taken:
                out.append((message, False))
                continue
            taken.add(key)
            new.append(
                (
                    message,
                    it.folder_id,
                    it.uidvalidity,
                    it.uid,
                    it.source,
                    flags_text(it.flags),
                    it.modseq,
                    it.internaldate,
                )
            )
            out.append((message, True))
        if new:
            self.db.executemany(
                "INSERT INTO locations(message, folder_id, uidvalidity, uid, source, flags, modseq, internaldate) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                new,
            )
            self.bump(dict.fromkeys(row[0] for row in new if row[0] not in fresh))
        return out

    def find_message(self, account_id: int, message_id: str | None, content_hash: str) -> int | None:
        row = self.db.execute(
            "SELECT id FROM messages WHERE account_id = ? AND coalesce(message_id, '') = ? AND content_hash = ?",
            (account_id, message_id or "", content_hash),
        ).fetchone()
        return row[0] if row else None

    def _find_messages(self, account_id: int, keys: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """find_message for many (Message-ID or '', content hash) keys in one query; CROSS JOIN
        keeps SQLite on the identity index, key by key."""
        return {
            (m, h): i
            for i, m, h in self.db.execute(
                "SELECT m.id, coalesce(m.message_id, ''), m.content_hash FROM json_each(?2) AS j CROSS JOIN messages AS m "
                "WHERE m.account_id = ?1 AND coalesce(m.message_id, '') = j.value ->> 0 AND m.content_hash = j.value ->> 1",
                (account_id, json_list(keys)),
            )
        }

    def raw(self, message: int) -> bytes:
        row = self.db.execute("SELECT raw FROM messages WHERE id = ?", (message,)).fetchone()
        if not row:
            raise NotFound(f"no message with id {message}; `oaken search` shows ids")
        return bytes(row[0])

    def message_count(self, account_id: int | None = None) -> int:
        # the counters migration m008 keeps: a count(*) reads a whole index (1M entries at 1M messages)
        if account_id is None:
            return one_value(self.db, "SELECT coalesce(sum(messages), 0) FROM account_totals")
        return one_value(
            self.db, "SELECT coalesce(sum(messages), 0) FROM account_totals WHERE account_id = ?", (account_id,)
        )
