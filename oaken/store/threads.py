"""raw.db's threads: messages are threaded as they are stored (JWZ-style), and thread_refs,
thread_subjects and meta's 'thread' counter remember which thread each Message-ID and base
subject belongs to. Loaded by writers only: a search reads a message's thread, never computes it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from oaken.store.feed import ChangeFeed
from oaken.store.records import Incoming, json_list

if TYPE_CHECKING:
    from oaken.envelope import Envelope


class Threads:
    """JWZ-style threading of a batch of new messages, in order, as if each were stored alone: by
    Message-ID, References and In-Reply-To, merging the threads a message joins; the subject is a
    fallback only for a reply that carries neither header. Looked up once per batch."""

    COLUMN = 14  # thread_id's place in add_messages' rows

    def __init__(self, store: ChangeFeed, account_id: int, items: Sequence[Incoming]):
        from oaken import envelope

        self.store = store
        self.db = store.db
        self.account_id = account_id
        self.bases = {subject: envelope.base_subject(subject) for subject in {it.envelope.subject for it in items}}
        self.refs = self._known_refs(r for it in items for r in _thread_ids(it.envelope))
        self.subjects = self._known_subjects(set(self.bases.values()) - {""})
        self.new_refs: list[str] = []
        self.new_subjects: list[str] = []
        self.last: int | None = None  # the thread counter, read when a new thread is needed
        self.changed = False

    def place(self, env: Envelope, rows: list[list]) -> int:
        """The thread of one more message; `rows` (messages not inserted yet) follow a merge."""
        ids = _thread_ids(env)
        has_refs = len(ids) > (1 if env.message_id else 0)
        found = {self.refs[r] for r in ids if r in self.refs}
        base = self.bases[env.subject]
        if not found and not has_refs and base and base != env.subject.strip().lower() and base in self.subjects:
            found.add(self.subjects[base])
        if found:
            thread = min(found)
            for other in sorted(found - {thread}):
                self._merge(thread, other)
                for table in (self.refs, self.subjects):
                    for k, v in table.items():
                        if v == other:
                            table[k] = thread
                for row in rows:
                    if row[self.COLUMN] == other:
                        row[self.COLUMN] = thread
        else:
            self.last = (self._last_thread() if self.last is None else self.last) + 1
            self.changed = True
            thread = self.last
        for ref in ids:
            if ref not in self.refs:
                self.refs[ref] = thread
                self.new_refs.append(ref)
        if base and base not in self.subjects:
            self.subjects[base] = thread
            self.new_subjects.append(base)
        return thread

    def save(self) -> None:
        """Remember the batch's new thread ids, references and base subjects for later batches."""
        if self.changed:
            self.db.execute(
                "INSERT INTO meta(key, value) VALUES ('thread', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (self.last,),
            )
        if self.new_refs:
            self.db.executemany(
                "INSERT OR IGNORE INTO thread_refs(account_id, ref, thread_id) VALUES (?, ?, ?)",
                [(self.account_id, r, self.refs[r]) for r in self.new_refs],
            )
        if self.new_subjects:
            self.db.executemany(
                "INSERT OR IGNORE INTO thread_subjects(account_id, subject, thread_id) VALUES (?, ?, ?)",
                [(self.account_id, s, self.subjects[s]) for s in self.new_subjects],
            )

    def _known_refs(self, refs: Iterable[str]) -> dict[str, int]:
        refs = set(refs)
        if not refs:
            return {}
        return dict(
            self.db.execute(
                "SELECT ref, thread_id FROM thread_refs WHERE account_id = ? AND ref IN (SELECT value FROM json_each(?))",
                (self.account_id, json_list(refs)),
            )
        )

    def _known_subjects(self, subjects: Iterable[str]) -> dict[str, int]:
        subjects = set(subjects)
        if not subjects:
            return {}
        return dict(
            self.db.execute(
                "SELECT subject, thread_id FROM thread_subjects WHERE account_id = ? AND subject IN "
                "(SELECT value FROM json_each(?))",
                (self.account_id, json_list(subjects)),
            )
        )

    def _last_thread(self) -> int:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'thread'").fetchone()
        return row[0] if row else 0

    def _merge(self, thread: int, other: int) -> None:
        """A message joined two threads: `other` becomes `thread`, and its messages changed."""
        self.db.execute("UPDATE thread_refs SET thread_id = ? WHERE thread_id = ?", (thread, other))
        self.db.execute("UPDATE thread_subjects SET thread_id = ? WHERE thread_id = ?", (thread, other))
        moved = [r[0] for r in self.db.execute("SELECT id FROM messages WHERE thread_id = ?", (other,))]
        self.db.execute("UPDATE messages SET thread_id = ? WHERE thread_id = ?", (thread, other))
        self.store.bump(moved)


def _thread_ids(env: Envelope) -> list[str]:
    """The Message-ID, then References and In-Reply-To: the ids that tie a message to a thread."""
    return ([env.message_id] if env.message_id else []) + [r for r in (*env.references, *env.in_reply_to) if r]
