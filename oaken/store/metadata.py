"""raw.db's metadata reads: a stored message without its bytes (MessageMeta), and the filters on
read state and triage that only raw.db can answer."""

from __future__ import annotations

from typing import Iterable, Sequence

from oaken.errors import NotFound
from oaken.store.feed import ChangeFeed
from oaken.store.locations import UNREAD_SQL
from oaken.store.records import FLAGGED, MessageMeta, Triage, split_lines


class Metadata(ChangeFeed):
    """What search results and the indexer read of a message: everything but its bytes."""

    _META_SQL = f"""
        SELECT m.id, a.name, m.message_id, m.content_hash, m.date, m.subject, m.sender_name, m.sender_addr,
               m.to_addrs, m.cc_addrs, m.thread_id, m.problem, m.size,
               t.category, t.priority, coalesce(t.disposition, 'inbox'),
               (SELECT group_concat(f.name, char(10)) FROM locations l JOIN folders f ON f.id = l.folder_id
                 WHERE l.message = m.id),
               (SELECT group_concat(l.flags, ' ') FROM locations l WHERE l.message = m.id),
               (SELECT group_concat(label, char(10)) FROM labels WHERE message = m.id),
               {UNREAD_SQL}
        FROM messages m JOIN accounts a ON a.id = m.account_id LEFT JOIN triage t ON t.message = m.id
    """

    def _meta(self, row: Sequence) -> MessageMeta:
        (
            mid,
            account,
            message_id,
            digest,
            date,
            subject,
            sname,
            saddr,
            to,
            cc,
            thread,
            problem,
            size,
            category,
            priority,
            disposition,
            folders,
            flags,
            labels,
            unread,
        ) = row
        folder_list = tuple(sorted(set(split_lines(folders or ""))))
        flag_list = (flags or "").split()
        keywords = {f for f in flag_list if not f.startswith("\\")}
        return MessageMeta(
            id=mid,
            account=account,
            message_id=message_id,
            content_hash=digest,
            date=date,
            subject=subject,
            sender_name=sname,
            sender_addr=saddr,
            to=split_lines(to),
            cc=split_lines(cc),
            thread=thread,
            folders=folder_list,
            labels=tuple(sorted(set(folder_list) | keywords | set(split_lines(labels or "")))),
            unread=bool(unread),
            starred=FLAGGED in flag_list,
            triage=Triage(category, priority, disposition),
            problem=problem,
            size=size,
        )

    def meta(self, message: int) -> MessageMeta:
        row = self.db.execute(self._META_SQL + " WHERE m.id = ?", (message,)).fetchone()
        if not row:
            raise NotFound(f"no message with id {message}; `oaken search` shows ids")
        return self._meta(row)

    def metas(self, messages: Iterable[int]) -> dict[int, MessageMeta]:
        ids = list(dict.fromkeys(messages))
        out: dict[int, MessageMeta] = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            for row in self.db.execute(self._META_SQL + f" WHERE m.id IN ({marks})", part):
                meta = self._meta(row)
                out[meta.id] = meta
        return out

    def message_ids_in(self, account_id: int) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT id FROM messages WHERE account_id = ?", (account_id,))]

    def all_message_ids(self) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT id FROM messages ORDER BY id")]

    def unread_ids(self, account: str, limit: int) -> list[int] | None:
        """The account's unread messages, in no order (index.db orders them by date, from its own
        copy, without a read of each message's row here: 49 ms at a million messages); None when
        there are more than `limit` (then judging candidates one by one is the cheaper way)."""
        rows = [
            r[0]
            for r in self.db.execute(
                "SELECT u.message FROM unread u JOIN accounts a ON a.id = u.account_id WHERE a.name = ? LIMIT ?",
                (account, limit + 1),
            )
        ]
        return None if len(rows) > limit else rows

    def filter_messages(
        self,
        messages: Iterable[int],
        *,
        unread: bool | None = None,
        starred: bool | None = None,
        categories: Sequence[str] = (),
        min_priority: int | None = None,
        dispositions: Sequence[str] | None = None,
        account: str | None = None,
    ) -> set[int]:
        """The subset of `messages` whose read state and triage match: these live only here (and,
        given, of that account: for a caller without index.db)."""
        ids = list(dict.fromkeys(messages))
        keep: set[int] = set()
        conds: list[str] = []
        params: list[object] = []
        if unread is not None:
            conds.append(("" if unread else "NOT ") + UNREAD_SQL)  # unread while any copy lacks \Seen
        if starred is not None:
            conds.append(
                ("" if starred else "NOT ")
                + "EXISTS (SELECT 1 FROM locations l WHERE l.message = m.id AND ' ' || l.flags || ' ' LIKE '% \\Flagged %')"
            )
        if categories:
            conds.append(f"t.category IN ({','.join('?' * len(categories))})")
            params.extend(categories)
        if min_priority is not None:
            conds.append("t.priority >= ?")
            params.append(min_priority)
        if dispositions is not None:
            conds.append(f"coalesce(t.disposition, 'inbox') IN ({','.join('?' * len(dispositions))})")
            params.extend(dispositions)
        if account is not None:
            conds.append("m.account_id = (SELECT id FROM accounts WHERE name = ?)")
            params.append(account)
        where = " AND ".join(conds) or "1"
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            sql = (
                f"SELECT m.id FROM messages m LEFT JOIN triage t ON t.message = m.id "
                f"WHERE m.id IN ({marks}) AND {where}"
            )
            keep.update(r[0] for r in self.db.execute(sql, [*part, *params]))
        return keep
