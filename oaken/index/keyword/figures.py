"""The figures an open index.db answers about itself (counts, the writer's sequence number, its
generation, the messages whose attachments could not be read): what `oaken status` and the vector
side's "anything to do?" read, each from a counter or an index, never a scan of the mailbox.
KeywordIndex (oaken.index.keyword.reader) has them; its searches are there."""

from __future__ import annotations

from typing import Sequence

from oaken.index.keyword.schema import EMBEDDED_SQL


class IndexFigures:
    """The figures of KeywordIndex, read through its `_run`."""

    def _run(self, sql: str, params: Sequence[object] | dict) -> list[tuple]:
        raise NotImplementedError  # KeywordIndex's: its errors say which file and what to do

    def _counter(self, key: str, fallback: str) -> int:
        """A count the writer's triggers keep in meta; counted when an index.db made before the
        counters has not met a writer since (a reader never writes)."""
        row = self._run("SELECT value FROM meta WHERE key = ?", [key])
        return int(row[0][0]) if row else int(self._run(fallback, [])[0][0])

    def counts(self) -> tuple[int, int]:
        return (
            self._counter("messages", "SELECT count(*) FROM messages"),
            self._counter("chunks", "SELECT count(*) FROM chunks"),
        )

    def attachments_unread(self, limit: int = 50) -> tuple[int, list[tuple[int, str, str]]]:
        """(how many messages have attachments whose words could not be read, the first `limit`
        of them as (id, subject, why)): by a partial index, not a scan."""
        rows = self._run(
            "SELECT id, subject, attachments_unread FROM messages WHERE attachments_unread IS NOT NULL"
            " ORDER BY id LIMIT ?",
            [limit],
        )
        listed = [(int(i), str(s), str(w)) for i, s, w in rows]
        if len(rows) < limit:
            return len(rows), listed
        return int(self._run("SELECT count(*) FROM messages WHERE attachments_unread IS NOT NULL", [])[0][0]), listed

    def body_chunk_count(self) -> int:
        return self._counter("body_chunks", "SELECT count(*) FROM chunks WHERE " + EMBEDDED_SQL)

    def seq(self) -> int:
        return self._run("SELECT value FROM meta WHERE key = 'seq'", [])[0][0]

    def generation(self) -> str:
        """Which index.db this is: made anew by every rebuild, which numbers chunks from 1 again,
        so vectors/ (keyed by chunk id) can tell its rows belong to another one ("" for an
        index.db made before generations were recorded)."""
        row = self._run("SELECT value FROM meta WHERE key = 'generation'", [])
        return str(row[0][0]) if row else ""

    def chunk_state(self) -> tuple[int, int, int, str]:
        """(seq, chunks, highest chunk id, generation): equal figures mean the same chunks, so the
        vector side can tell it has nothing to do without reading them (a rebuild renumbers chunks,
        and is another generation even where the figures come out the same)."""
        row = self._run("SELECT (SELECT value FROM meta WHERE key = 'seq'), coalesce(max(id), 0) FROM chunks", [])[0]
        return int(row[0]), self._counter("chunks", "SELECT count(*) FROM chunks"), int(row[1]), self.generation()
