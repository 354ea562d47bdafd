"""Searching index.db: ranked chunks for a MATCH expression, and which words a message holds.
Newest messages for a query of filters only are listing.py's, the stored chunks and fields the
vector side and the fold read are stored.py's, the figures figures.py's, which columns and phrases
a ranked chunk matched details.py's: KeywordIndex has them all."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable, Sequence

import apsw

from oaken import extras
from oaken.config import IndexConfig
from oaken.errors import QueryError
from oaken.index.keyword import snippets as snippets_mod  # `snippets` is a parameter below
from oaken.index.keyword.details import ChunkDetails, match_cols, matched_in
from oaken.index.keyword.figures import IndexFigures
from oaken.index.keyword.filters import filter_sql, subject_terms
from oaken.index.keyword.listing import Listing
from oaken.index.keyword.pool import POOL
from oaken.index.keyword.records import (
    KeywordChunkHit,
    KeywordFilters,
    quote,
)
from oaken.index.keyword.schema import (
    check_version,
    classify,
    connect,
    index_path,
    known_damage,
    unavailable,
)
from oaken.index.keyword.stored import StoredReads
from oaken.index.keyword.text.ranking import TextRanking

# a chunk's snippet around its matches, with the markers the table and --json show (snippets.py)
_SNIPPET = snippets_mod.SQL
_SNIPPET_MARKS = snippets_mod.MARKS


class KeywordIndex(IndexFigures, Listing, StoredReads, ChunkDetails, TextRanking):
    """An open index.db for searching. Raises IndexUnavailable when it is missing, corrupt or locked."""

    def __init__(
        self, data_dir: Path, index_config: IndexConfig = IndexConfig(), *, busy_ms: int = 2000, fresh: bool = False
    ):
        """`fresh`: a new connection, not one a search left open (an integrity check must read the
        file, not pages a connection cached before something outside SQLite wrote over them), and
        closed after, not kept: a writer's process (the text index's pass) leaves none open."""
        self.path = index_path(data_dir)
        c = index_config
        self.weights = self.weights_of(c)
        self._bm25 = f"bm25(fts, {', '.join(repr(float(w)) for w in self.weights)})"
        self._text = c.keyword_engine == "tantivy" and not extras.tantivy_missing()  # rank with it when level
        if not self.path.exists():
            raise unavailable(self.path, "missing", "no file")
        found = known_damage(self.path)
        if found is not None:  # a quick_check (status, reindex) found it damaged: no answer as if whole
            raise unavailable(self.path, "corrupt", found)
        self._busy_ms = busy_ms
        self._twin: apsw.Connection | None = None  # the second connection of a split ranking
        self._middle: int | None = None
        self._failed = False  # a statement failed: the connections are closed, not kept (pool.py)
        self._closed = False
        self._fresh = fresh
        try:
            self._real = os.path.realpath(self.path)  # the file behind the index.db link
            self.db = self._connection()
        except apsw.CantOpenError:  # swapped for a rebuilt index.db between finding and opening it
            self._real = os.path.realpath(self.path)
            try:
                self.db = self._connection()
            except apsw.Error as e:
                raise unavailable(self.path, classify(e, self.path), str(e)) from None
        except apsw.Error as e:
            raise unavailable(self.path, classify(e, self.path), str(e)) from None

    @staticmethod
    def weights_of(c: IndexConfig) -> tuple[float, ...]:
        """The column weights, in the fts table's column order."""
        return (
            c.weight_subject,
            c.weight_sender,
            c.weight_recipients,
            c.weight_body,
            c.weight_quoted,
            c.weight_attachments,
        )

    def _connection(self) -> apsw.Connection:
        """A read connection to the file behind index.db: one a finished search left open in the
        pool (oaken.index.keyword.pool), or a new one, checked and given this module's functions."""
        db = None if self._fresh else POOL.take(self._real, self._busy_ms)
        if db is not None:
            return db
        db = connect(Path(self._real), write=False, busy_ms=self._busy_ms)
        try:
            check_version(db, self.path)
            db.register_fts5_function("oaken_match", match_cols)
            snippets_mod.register(db)
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        """Give the connections back to the pool for the next search (closed instead after a
        failure: a damaged or locked file is opened anew)."""
        if self._closed:
            return  # given back once: two searches must never share a connection
        self._closed = True
        for db in (self._twin, self.db):
            if db is None:
                continue
            if self._failed or self._fresh:
                db.close()
            else:
                POOL.give(self._real, self._busy_ms, db)
        self._twin = None

    def __enter__(self) -> KeywordIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, sql: str, params: Sequence[object] | dict, *, db: apsw.Connection | None = None) -> list[tuple]:
        try:
            return (db or self.db).execute(sql, params).fetchall()
        except BaseException as e:
            self._failed = True  # whatever it was, these connections are not kept for another search
            found = self._reported(e)
            if found is None:
                raise
            raise found from None

    def _reported(self, e: BaseException) -> Exception | None:
        """What a failed statement is reported as (None: raised as it is)."""
        if isinstance(e, apsw.SQLError):
            return QueryError(
                f"keyword query could not be run ({e}); build MATCH from tokens quoted with oaken.index.keyword.quote"
            )
        if isinstance(
            e,
            (
                apsw.CorruptError,
                apsw.NotADBError,
                apsw.BusyError,
                apsw.LockedError,
                apsw.IOError,
                apsw.CantOpenError,
                apsw.SchemaChangeError,
            ),
        ):
            return unavailable(self.path, classify(e, self.path), str(e))
        if isinstance(e, UnicodeDecodeError):  # garbage inside a sound page: quick_check does not see it
            return unavailable(self.path, "corrupt", f"text that is not UTF-8 ({e.reason})")
        return None

    def query(
        self,
        match: str,
        filters: KeywordFilters = KeywordFilters(),
        limit: int = 50,
        *,
        details: bool = True,
        snippets: bool = True,
        columns: bool = True,
        text: bool = True,
    ) -> list[KeywordChunkHit]:
        """Best chunks for an FTS5 MATCH expression, within the filters, best first. Without
        `details` no snippet, columns or phrases (empty): the caller asks `chunk_details` for the
        few it shows, since looking up hundreds of chunks again costs more than ranking them.
        Without `snippets`, columns and phrases but no snippet (a question's order needs which
        words each chunk holds; reading and cutting its text is for the page only); without
        `columns` either, the phrases (and, when FTS5 reads them, the columns too): the text index
        says which phrases cheaper when it ranked. Without `text`, FTS5 ranks (scores that are
        merged with another list's from FTS5 must be FTS5's too: the two BM25s differ)."""
        conds, params, subject = filter_sql(filters)
        expr, n_subject = self._expression(match, subject, filters)
        first = self._text_first(expr, conds, params, limit, filters.exclude_ids) if self._text and text else None
        if first is not None and details and not snippets and not columns:
            held = self._text_held(expr, [r[0] for r in first[0]], n_subject)
            if held is not None:
                return [KeywordChunkHit(m, c, -rank, "", (), held.get(c, ())) for c, m, rank in first[0]]
        if first is None:
            first = self._ranked_first(expr, conds, params, limit)
        matches = None  # how many chunks match, when every one was ranked
        if first is not None:
            ranked, matches = first
        else:
            halves = self._halves(
                f"SELECT fts.rowid, c.message, {self._bm25} AS rank FROM fts "
                f"JOIN chunks c ON c.id = fts.rowid JOIN messages m ON m.id = c.message "
                f"WHERE fts MATCH ? {{rowids}} {''.join(' AND ' + c for c in conds)} ORDER BY rank, fts.rowid LIMIT ?",
                [expr],
                [*params, limit],
            )
            ranked = sorted((r for half in halves for r in half), key=lambda r: (r[2], r[0]))[:limit]
        if not ranked:
            return []
        walk = self._walk(expr, matches, len(ranked)) if details else False
        extra = self._details(expr, n_subject, [r[0] for r in ranked], snippets=snippets, walk=walk) if details else {}
        return [
            KeywordChunkHit(message, chunk, -rank, *extra.get(chunk, ("", (), ()))) for chunk, message, rank in ranked
        ]

    def chunk_details(
        self, match: str, filters: KeywordFilters, chunks: Iterable[int]
    ) -> dict[int, tuple[str, tuple[str, ...], tuple[int, ...]]]:
        """(snippet, columns, phrases) of these chunks for the MATCH `query` took with these filters."""
        expr, n_subject = self._expression(match, filter_sql(filters)[2], filters)
        return self._details(expr, n_subject, chunks)

    @staticmethod
    def _expression(match: str, subject: str, filters: KeywordFilters) -> tuple[str, int]:
        """`match` within the subject filter's MATCH (`subject`, from filter_sql), and how many
        phrases that filter puts first: FTS5 numbers phrases in order, one per subject term, so the
        phrases of `match` are numbered from there on (no need to parse `match` to count them)."""
        expr = " AND ".join(f"({p})" for p in (subject, match.strip()) if p)
        if not expr:
            raise QueryError("keyword query with no words: use KeywordIndex.newest for a query of filters only")
        return expr, len(subject_terms(filters))

    # Joining every matching chunk to its message costs more than ranking it (a word in every
    # chunk of 100k messages: ~45 ms to rank, ~120 ms ranked and joined), so the best chunks are
    # ranked alone first and only they are joined and filtered.
    RANK_FIRST = 8
    FEW_CANDIDATES = 200
    COMMON_ROWS = 5000

    def _ranked_first(
        self, expr: str, conds: list[str], params: list[object], limit: int
    ) -> tuple[list[tuple], int | None] | None:
        """The filtered best `limit` chunks, found among the best limit x RANK_FIRST unfiltered ones,
        and how many chunks match when every one was ranked (else None); None when too few of
        those pass the filters (the caller then filters every match). The
        answer is the same: if `limit` filtered chunks are among the best, no other can beat them.
        Split (`_halves`), each half finds its own best `limit` so, and the best of both are the
        best of all; a half with too few sends the search to the caller's way too."""
        probe = max(limit, 1) * self.RANK_FIRST
        where = " AND ".join(conds) or "1"
        halves = self._halves(
            f"WITH top AS MATERIALIZED (SELECT fts.rowid AS id, {self._bm25} AS rank FROM fts "
            f"WHERE fts MATCH ? {{rowids}} ORDER BY rank, fts.rowid LIMIT ?) "
            f"SELECT top.id, c.message, top.rank, (SELECT count(*) FROM top) FROM top "
            f"JOIN chunks c ON c.id = top.id JOIN messages m ON m.id = c.message "
            f"WHERE {where} ORDER BY top.rank, top.id LIMIT ?",
            [expr],
            [probe, *params, limit],
        )
        rows: list[tuple] = []
        counted: list[list[tuple]] | None = None
        matches: int | None = 0
        for i, found in enumerate(halves):
            if len(found) >= limit or (found and found[0][3] < probe):  # enough, or every match ranked
                rows.extend(r[:3] for r in found)
                every = bool(found) and found[0][3] < probe  # none found at limit 0: not counted
                matches = matches + found[0][3] if every and matches is not None else None
                continue
            if found:  # too few passed, and more matches wait
                return None
            if counted is None:  # none passed: were there more matches than were ranked?
                counted = self._halves(
                    "SELECT count(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ? {rowids} LIMIT ?)", [expr], [probe]
                )
            if counted[i][0][0] >= probe:
                return None
            matches = matches + counted[i][0][0] if matches is not None else None
        return sorted(rows, key=lambda r: (r[2], r[0]))[:limit], matches

    # Ranking scores every chunk that holds the words (FTS5's bm25, ~0.75 us a match: 36 ms for
    # the 46,202 chunks holding "broadband" at a million messages), and SQLite runs a statement on
    # one core. In a large index the ranking runs as two halves of the rowid range at once, the
    # upper half on a second connection in a thread (apsw lets go of the GIL while SQLite works),
    # and the halves' best rows are merged: the same rows in the same order. At a million
    # messages (3.96M chunks) a search took 0.72-0.94x the time; at 100,000 (347,192 chunks) the
    # second connection's first statement and the thread cost what the halves gained.
    SPLIT_MIN_CHUNKS = 1_000_000

    def _halves(self, sql: str, head: list[object], tail: list[object]) -> list[list[tuple]]:
        """The rows of `sql` for each half of the rowid range (one list, the whole range, when the
        ranking is not split); its `{rowids}` takes the range, between the parameters `head` and
        `tail`."""
        middle = self._split_at()
        if middle is None:
            return [self._run(sql.format(rowids=""), [*head, *tail])]
        ranged = sql.format(rowids="AND fts.rowid > ? AND fts.rowid <= ?")
        twin = self._twin_db()
        upper: dict[str, Any] = {}

        def rank_upper() -> None:
            try:
                upper["rows"] = self._run(ranged, [*head, middle, 2**63 - 1, *tail], db=twin)
            except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
                upper["error"] = e

        thread = threading.Thread(target=rank_upper, name="oaken-rank-upper", daemon=True)
        thread.start()
        try:
            lower = self._run(ranged, [*head, -(2**63), middle, *tail])
        finally:
            thread.join()
        if "error" in upper:
            raise upper["error"]
        return [lower, upper["rows"]]

    def _split_at(self) -> int | None:
        """The rowid the ranking is split at, or None to rank in one go (a small index, one core)."""
        if self._middle is None:
            big = (os.cpu_count() or 1) >= 2 and self.counts()[1] >= self.SPLIT_MIN_CHUNKS
            top = self._run("SELECT max(id) FROM chunks", [])[0][0] if big else None
            self._middle = top // 2 if top else 0
        return self._middle or None

    def _twin_db(self) -> apsw.Connection:
        """A second connection to the very file the first has open (index.db is a link that a
        rebuild moves to another file)."""
        if self._twin is None:
            try:
                self._twin = self._connection()
            except apsw.Error as e:
                raise unavailable(self.path, classify(e, self.path), str(e)) from None
        return self._twin

    def tokens_present(self, messages: Iterable[int], tokens: Sequence[str]) -> dict[int, frozenset[str]]:
        """For each message, which of the tokens (plain words, quoted here) it holds in any column."""
        quoted = {quote(t): t for t in dict.fromkeys(tokens) if t.strip()}
        held = self.expressions_present(messages, list(quoted))
        return {m: frozenset(quoted[e] for e in found) for m, found in held.items()}

    def expressions_present(self, messages: Iterable[int], expressions: Sequence[str]) -> dict[int, frozenset[str]]:
        """For each message, which of these MATCH expressions (built from `quote`d tokens: a word, a
        phrase, a prefix `"deploy"*`) one of its chunks matches, in any column."""
        wanted = sorted(set(messages))
        asked = [e for e in dict.fromkeys(expressions) if e.strip()]
        if self._text and wanted and asked:
            held = self._text_present(asked, wanted)
            if held is not None:
                return {m: frozenset(asked[i] for i in found) for m, found in held.items() if found}
        ids = json.dumps(wanted)
        by_doclist = (
            "SELECT DISTINCT c.message FROM fts JOIN chunks c ON c.id = fts.rowid "
            "WHERE fts MATCH ?1 AND c.message IN (SELECT value FROM json_each(?2))"
        )
        # A common word's whole doclist costs ~50 ms to walk at 100k messages; a few candidates'
        # chunks looked up in FTS5 by rowid cost ~7 ms. For a rare word or many candidates, walk.
        by_rowid = (
            "SELECT DISTINCT c.message FROM json_each(?2) j CROSS JOIN chunks c ON c.message = j.value "
            "CROSS JOIN fts ON fts.rowid = c.id WHERE fts MATCH ?1"
        )
        found: dict[int, set[str]] = {}
        for expr in dict.fromkeys(expressions):
            if not expr.strip():
                continue
            sql = by_doclist
            if len(wanted) <= self.FEW_CANDIDATES:
                common = (
                    self._run(
                        "SELECT count(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ? LIMIT ?)", [expr, self.COMMON_ROWS]
                    )[0][0]
                    >= self.COMMON_ROWS
                )
                sql = by_rowid if common else by_doclist
            for (message,) in self._run(sql, [expr, ids]):
                found.setdefault(message, set()).add(expr)
        return {m: frozenset(t) for m, t in found.items()}

    def query_within(self, match: str, messages: Iterable[int]) -> list[KeywordChunkHit]:
        """The chunks of these few messages that match, in chunk order, with no score: whether
        messages another retriever found hold the query's words (they get no keyword rank). Each
        message's chunks are looked up by rowid, so a common word's whole doclist is not walked
        (filters are the caller's: none applied here). No bm25: FTS5 counts each phrase's rows over
        the whole index once per cursor, and each rowid looked up is a cursor of its own: at 1M
        messages an OR-ed question with a common word paid ~23 ms a chunk, 1.1-1.7 s a page."""
        rows = self._run(
            f"SELECT fts.rowid, c.message, {_SNIPPET}, {snippets_mod.LABEL_SQL}, "
            f"oaken_match(fts) FROM json_each(?) j CROSS JOIN chunks c ON c.message = j.value "
            f"CROSS JOIN fts ON fts.rowid = c.id WHERE fts MATCH ? ORDER BY fts.rowid",
            [*_SNIPPET_MARKS, json.dumps(sorted(set(messages))), match.strip()],
        )
        return [
            KeywordChunkHit(message, chunk, 0.0, snippets_mod.labelled(label, snippet), *matched_in(info))
            for chunk, message, snippet, label, info in rows
        ]

    def matches_anything(self, match: str) -> bool:
        """Whether any chunk at all matches (no ranking: the first row of the doclist answers)."""
        return bool(self._run("SELECT 1 FROM fts WHERE fts MATCH ? LIMIT 1", [match]))
