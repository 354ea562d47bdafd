"""What index.db stores, read back as it is (no ranking): the chunks the vector side embeds and
the near-duplicate fold compares, subjects and dates. KeywordIndex (oaken.index.keyword.reader)
has them; its searches are there."""

from __future__ import annotations

import json
from typing import Iterable, Sequence

from oaken.index.keyword.records import StoredChunk
from oaken.index.keyword.schema import EMBEDDED_SQL


class StoredReads:
    """The stored reads of KeywordIndex, through its `_run`."""

    def _run(self, sql: str, params: Sequence[object] | dict) -> list[tuple]:
        raise NotImplementedError  # KeywordIndex's: its errors say which file and what to do

    _CHUNK_SQL = (
        "SELECT c.id, c.message, c.ord, c.kind, c.tokens, c.text, m.subject FROM chunks c "
        "JOIN messages m ON m.id = c.message"
    )

    def subjects(self, messages: Iterable[int]) -> dict[int, str]:
        """message -> subject, for the messages index.db holds."""
        return dict(
            self._run(
                "SELECT id, subject FROM messages WHERE id IN (SELECT value FROM json_each(?))",
                [json.dumps(sorted(set(messages)))],
            )
        )

    def chunks_of(self, messages: Iterable[int], kind: str | None = "body") -> list[StoredChunk]:
        """The chunks of these messages in order (kind None: quoted ones too)."""
        sql = self._CHUNK_SQL + " WHERE c.message IN (SELECT value FROM json_each(?))"
        params: list[object] = [json.dumps(sorted(set(messages)))]
        if kind == "embedded":  # what the vector side embeds: body and attachment chunks
            sql += " AND c." + EMBEDDED_SQL
        elif kind is not None:
            sql += " AND c.kind = ?"
            params.append(kind)
        return [StoredChunk(*r) for r in self._run(sql + " ORDER BY c.message, c.ord", params)]

    def body_chunks(self, after_id: int = 0, limit: int = 1000) -> list[StoredChunk]:
        """Body chunks with id > after_id, by id: the vector side walks the index with this."""
        return [
            StoredChunk(*r)
            for r in self._run(
                self._CHUNK_SQL + " WHERE c.id > ? AND c." + EMBEDDED_SQL + " ORDER BY c.id LIMIT ?", [after_id, limit]
            )
        ]

    def body_chunk_pairs(self, messages: Iterable[int]) -> list[tuple[int, int]]:
        """(chunk id, message) of the body chunks of `messages`: by the message index, not a scan."""
        return [
            (int(r[0]), int(r[1]))
            for r in self._run(
                # CROSS JOIN: the ids first, each message's chunks by its index, whatever the statistics
                # say (on a small index.db SQLite chose to scan every chunk)
                "SELECT c.id, c.message FROM json_each(?) AS j CROSS JOIN chunks AS c ON c.message = j.value "
                "WHERE c." + EMBEDDED_SQL,
                [json.dumps(sorted(set(messages)))],
            )
        ]

    def chunk_ids(self, kind: str = "embedded") -> set[int]:
        if kind == "embedded":
            return {r[0] for r in self._run("SELECT id FROM chunks WHERE " + EMBEDDED_SQL, [])}
        return {r[0] for r in self._run("SELECT id FROM chunks WHERE kind = ?", [kind])}

    def message_dates(self, messages: Iterable[int]) -> dict[int, int]:
        return dict(
            self._run(
                "SELECT m.id, m.date FROM json_each(?) AS j CROSS JOIN messages AS m ON m.id = j.value",
                [json.dumps(sorted(set(messages)))],
            )
        )
