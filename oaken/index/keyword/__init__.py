"""index.db: the FTS5 keyword index. Every SQL statement against index.db lives in this module.

index.db is derived and disposable: `oaken reindex --rebuild` makes it again from raw.db, so it
is written with durability off (a crash costs a rebuild, never mail).

Layout
  messages   one row per message (id = raw.db's message id) with the fields filters need
  tags       labels ('l') and folders ('f') of each message
  chunks     the text of each chunk; kind 'body' (the author's words, embedded by the vector side)
             or 'quoted' (quoted replies and signatures: keyword-only, low weight)
  fts        FTS5 over the view `fts_content` (external content: the text is stored once), columns
             subject, sender, recipients, body, quoted, attachments; one row per chunk; every row
             repeats the subject, sender and attachment names of its message, so a chunk can hold
             every word of a query even when one of them is in the subject. Recipients (often long
             lists) are on the first chunk only: a quarter less text to index on the Enron corpus.

API for the search layer (stable; see each docstring)
  KeywordIndex(data_dir, index_config).query(match, filters, limit) -> list[KeywordChunkHit]
      `match` is an FTS5 MATCH expression built from already-quoted tokens (see `quote`), or
      "" for none. Hits are chunks, best first; `score` is -bm25 (higher is better). Each hit
      says which columns matched and which phrases of `match` (0-based, in the order they
      appear in the expression) the chunk holds: chunks holding every word rank above chunks
      holding some when the caller sorts by (len(phrases), score).
  KeywordIndex.newest(filters, limit, offset) -> list[KeywordMessageHit]   (queries with no words)
  KeywordIndex.tokens_present(messages, tokens) -> {message: frozenset(tokens it holds)}
  KeywordIndex.chunks_of(messages) / body_chunks(after_id, limit)  (for the vector side)
  KeywordFilters: frozen; every field optional; all given fields must hold (AND); within a
      field: senders/to/cc/folders/dispositions match any, labels and subject/filename terms all.
  Errors: a missing, corrupt or locked index.db raises IndexUnavailable (code
      "keyword_index_unavailable") on open or on query; a malformed MATCH raises QueryError.
  status(data_dir) -> {"state": "ok"|"missing"|"corrupt"|"locked", "messages", "chunks", "seq", ...}
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import apsw

from oaken.config import IndexConfig
from oaken.errors import IndexUnavailable, QueryError

INDEX_FILE = "index.db"
SCHEMA_VERSION = 2  # 2: recipients on a message's first chunk only
COLUMNS = ("subject", "sender", "recipients", "body", "quoted", "attachments")
SNIPPET_OPEN = "[["
SNIPPET_CLOSE = "]]"
SNIPPET_ELLIPSIS = "…"
UNAVAILABLE = "keyword_index_unavailable"

_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE messages(
    id INTEGER PRIMARY KEY,
    account TEXT NOT NULL,
    message_id TEXT,
    content_hash TEXT NOT NULL,
    date INTEGER NOT NULL,
    subject TEXT NOT NULL,
    sender_name TEXT NOT NULL,
    sender_addr TEXT NOT NULL,
    recipients TEXT NOT NULL,
    cc TEXT NOT NULL,
    thread INTEGER NOT NULL,
    disposition TEXT NOT NULL,
    has_attachment INTEGER NOT NULL,
    attachment_names TEXT NOT NULL,
    attachment_types TEXT NOT NULL,
    problem TEXT,
    chunker_version INTEGER NOT NULL
);
CREATE INDEX messages_account_date ON messages(account, date);
CREATE INDEX messages_thread ON messages(thread);
CREATE TABLE tags(
    kind TEXT NOT NULL,
    value TEXT NOT NULL COLLATE NOCASE,
    message INTEGER NOT NULL,
    PRIMARY KEY(kind, value, message)
) WITHOUT ROWID;
CREATE INDEX tags_message ON tags(message);
CREATE TABLE chunks(
    id INTEGER PRIMARY KEY,
    message INTEGER NOT NULL,
    ord INTEGER NOT NULL,
    kind TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX chunks_message ON chunks(message);
CREATE VIEW fts_content AS
    SELECT c.id AS id, m.subject AS subject,
           m.sender_name || ' ' || m.sender_addr AS sender,
           CASE c.ord WHEN 0 THEN m.recipients || char(10) || m.cc ELSE '' END AS recipients,
           CASE c.kind WHEN 'body' THEN c.text ELSE '' END AS body,
           CASE c.kind WHEN 'quoted' THEN c.text ELSE '' END AS quoted,
           m.attachment_names AS attachments
    FROM chunks c JOIN messages m ON m.id = c.message;
CREATE VIRTUAL TABLE fts USING fts5({", ".join(COLUMNS)}, content='fts_content', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2');
INSERT INTO meta VALUES ('schema', {SCHEMA_VERSION}), ('seq', 0);
"""


# ---- boundary types --------------------------------------------------------------------------

@dataclass(frozen=True)
class KeywordFilters:
    """Filters the index can apply itself. Triage and read state live in raw.db (Store.filter_messages)."""

    account: str | None = None
    senders: tuple[str, ...] = ()  # any; substring of the sender's name or address, case-insensitive
    to: tuple[str, ...] = ()  # any; substring of a To address or name
    cc: tuple[str, ...] = ()  # any; substring of a Cc address or name
    subject_terms: tuple[str, ...] = ()  # all; words in the subject (stemmed like the text)
    after: int | None = None  # unix seconds, inclusive
    before: int | None = None  # unix seconds, exclusive
    labels: tuple[str, ...] = ()  # all; labels include folder names and IMAP keywords
    folders: tuple[str, ...] = ()  # any
    thread: int | None = None
    dispositions: tuple[str, ...] = ()  # any; empty: no restriction
    has_attachment: bool | None = None
    filename_terms: tuple[str, ...] = ()  # all; substring of an attachment's name or MIME type
    include_ids: frozenset[int] | None = None  # only these messages (Oaken ids)
    exclude_ids: frozenset[int] = frozenset()  # never these messages


@dataclass(frozen=True)
class KeywordChunkHit:
    message: int  # Oaken's message id
    chunk: int  # chunk id (stable until the message is re-chunked)
    score: float  # -bm25 with the [index] column weights: higher is better
    snippet: str  # matched words between SNIPPET_OPEN and SNIPPET_CLOSE
    columns: tuple[str, ...]  # the columns of COLUMNS where a phrase matched
    phrases: tuple[int, ...]  # 0-based indexes of the phrases of `match` found in this chunk


@dataclass(frozen=True)
class KeywordMessageHit:
    message: int
    date: int


@dataclass(frozen=True)
class StoredChunk:
    id: int
    message: int
    ord: int
    kind: str  # "body" or "quoted"
    tokens: int  # word pieces, estimated, subject included
    text: str
    subject: str


@dataclass(frozen=True)
class MessageFields:
    """What the index keeps of one message besides its text."""

    id: int
    account: str
    message_id: str | None
    content_hash: str
    date: int
    subject: str
    sender_name: str
    sender_addr: str
    to: tuple[str, ...]
    cc: tuple[str, ...]
    thread: int
    disposition: str
    labels: tuple[str, ...]
    folders: tuple[str, ...]
    attachment_names: tuple[str, ...] = ()
    attachment_types: tuple[str, ...] = ()
    problem: str | None = None


@dataclass(frozen=True)
class ChunkText:
    """One chunk to write: the indexer converts chunking.Chunk to this."""

    kind: str
    tokens: int
    text: str


def quote(token: str) -> str:
    """A token as an FTS5 string: nothing inside it is syntax."""
    return '"' + token.replace('"', '""') + '"'


def index_path(data_dir: Path) -> Path:
    return Path(data_dir) / INDEX_FILE


def _unavailable(path: Path, state: str, detail: str) -> IndexUnavailable:
    what = {"missing": "does not exist yet", "corrupt": "is damaged", "locked": "is locked by another process",
            "stale": "was made by another version of Oaken"}[state]
    fix = "run `oaken reindex` to build it" if state == "missing" else "run `oaken reindex --rebuild` to repair it"
    if state == "locked":
        fix = "wait for the other process (another `oaken reindex`?) or run `oaken reindex --rebuild`"
    err = IndexUnavailable(f"{path}: keyword index {what} ({detail}); {fix}")
    err.code = UNAVAILABLE  # type: ignore[attr-defined]
    err.state = state  # type: ignore[attr-defined]
    return err


def _classify(e: apsw.Error) -> str:
    if isinstance(e, (apsw.BusyError, apsw.LockedError)):
        return "locked"
    return "corrupt"


def _connect(path: Path, *, write: bool, busy_ms: int) -> apsw.Connection:
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if write else 0)
    db = apsw.Connection(str(path), flags=flags)
    db.set_busy_timeout(busy_ms)
    return db


def _sql_like(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _filter_sql(f: KeywordFilters, alias: str = "m") -> tuple[list[str], list[object], str]:
    """SQL conditions over the messages table, and an FTS5 expression for the subject terms."""
    conds: list[str] = []
    params: list[object] = []
    if f.account is not None:
        conds.append(f"{alias}.account = ?")
        params.append(f.account)
    for field_terms, cols in ((f.senders, ("sender_name", "sender_addr")), (f.to, ("recipients",)), (f.cc, ("cc",))):
        if field_terms:
            ors = []
            for term in field_terms:
                for col in cols:
                    ors.append(f"{alias}.{col} LIKE ? ESCAPE '\\'")
                    params.append(_sql_like(term))
            conds.append("(" + " OR ".join(ors) + ")")
    if f.after is not None:
        conds.append(f"{alias}.date >= ?")
        params.append(f.after)
    if f.before is not None:
        conds.append(f"{alias}.date < ?")
        params.append(f.before)
    for label in f.labels:
        conds.append(f"EXISTS (SELECT 1 FROM tags t WHERE t.kind = 'l' AND t.value = ? AND t.message = {alias}.id)")
        params.append(label)
    if f.folders:
        marks = ",".join("?" * len(f.folders))
        conds.append(f"EXISTS (SELECT 1 FROM tags t WHERE t.kind = 'f' AND t.value IN ({marks}) "
                     f"AND t.message = {alias}.id)")
        params.extend(f.folders)
    if f.thread is not None:
        conds.append(f"{alias}.thread = ?")
        params.append(f.thread)
    if f.dispositions:
        conds.append(f"{alias}.disposition IN ({','.join('?' * len(f.dispositions))})")
        params.extend(f.dispositions)
    if f.has_attachment is not None:
        conds.append(f"{alias}.has_attachment = ?")
        params.append(1 if f.has_attachment else 0)
    for term in f.filename_terms:
        conds.append(f"({alias}.attachment_names LIKE ? ESCAPE '\\' OR {alias}.attachment_types LIKE ? ESCAPE '\\')")
        params.extend((_sql_like(term), _sql_like(term)))
    if f.include_ids is not None:
        conds.append(f"{alias}.id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(sorted(f.include_ids)))
    if f.exclude_ids:
        conds.append(f"{alias}.id NOT IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(sorted(f.exclude_ids)))
    subject = " AND ".join(f"subject : {quote(t)}" for t in _subject_terms(f))
    return conds, params, subject


def _subject_terms(f: KeywordFilters) -> list[str]:
    return [t for t in f.subject_terms if t.strip()]


def _match_cols(api: apsw.FTS5ExtensionApi, *args: object) -> str:
    """'columns;phrases' of the current row, e.g. '0,3;0,1' (registered as oaken_match)."""
    cols: set[int] = set()
    phrases = []
    for i in range(api.phrase_count):
        found = api.phrase_columns(i)
        if found:
            phrases.append(i)
            cols.update(found)
    return ",".join(map(str, sorted(cols))) + ";" + ",".join(map(str, phrases))


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


# ---- reading ---------------------------------------------------------------------------------

class KeywordIndex:
    """An open index.db for searching. Raises IndexUnavailable when it is missing, corrupt or locked."""

    def __init__(self, data_dir: Path, index_config: IndexConfig = IndexConfig(), *, busy_ms: int = 2000):
        self.path = index_path(data_dir)
        c = index_config
        self.weights = (c.weight_subject, c.weight_sender, c.weight_recipients, c.weight_body, c.weight_quoted,
                        c.weight_attachments)
        if not self.path.exists():
            raise _unavailable(self.path, "missing", "no file")
        try:
            self.db = _connect(self.path, write=False, busy_ms=busy_ms)
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except apsw.Error as e:
            raise _unavailable(self.path, _classify(e), str(e)) from None
        if not row or row[0] != SCHEMA_VERSION:
            raise _unavailable(self.path, "stale", f"schema {row[0] if row else None}, expected {SCHEMA_VERSION}")
        self.db.register_fts5_function("oaken_match", _match_cols)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "KeywordIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, sql: str, params: Sequence[object] | dict) -> list[tuple]:
        try:
            return self.db.execute(sql, params).fetchall()
        except apsw.SQLError as e:
            raise QueryError(f"keyword query could not be run ({e}); build MATCH from tokens quoted with "
                             "oaken.index.keyword.quote") from None
        except (apsw.CorruptError, apsw.NotADBError, apsw.BusyError, apsw.LockedError, apsw.IOError,
                apsw.CantOpenError, apsw.SchemaChangeError) as e:
            raise _unavailable(self.path, _classify(e), str(e)) from None

    def query(self, match: str, filters: KeywordFilters = KeywordFilters(), limit: int = 50) -> list[KeywordChunkHit]:
        """Best chunks for an FTS5 MATCH expression, within the filters, best first."""
        conds, params, subject = _filter_sql(filters)
        # FTS5 numbers phrases in order: the subject filter's come first, one per term, so the
        # phrases of `match` are numbered from n_subject on (no need to parse `match` to count them)
        n_subject = len(_subject_terms(filters))
        expr = " AND ".join(f"({p})" for p in (subject, match.strip()) if p)
        if not expr:
            raise QueryError("keyword query with no words: use KeywordIndex.newest for a query of filters only")
        where = " AND ".join(["fts MATCH ?", *conds])
        weights = ", ".join(repr(float(w)) for w in self.weights)
        ranked = self._ranked_first(expr, conds, params, weights, limit)
        if ranked is None:
            ranked = self._run(
                f"SELECT fts.rowid, c.message, bm25(fts, {weights}) AS rank FROM fts "
                f"JOIN chunks c ON c.id = fts.rowid JOIN messages m ON m.id = c.message "
                f"WHERE {where} ORDER BY rank LIMIT ?",
                [expr, *params, limit],
            )
        if not ranked:
            return []
        # snippets and matched columns only for the rows returned (a Python callback per row is dear)
        extra = {r[0]: (r[1], r[2]) for r in self._run(
            f"SELECT rowid, snippet(fts, -1, ?, ?, ?, 24), oaken_match(fts) FROM fts "
            f"WHERE fts MATCH ? AND rowid IN (SELECT value FROM json_each(?))",
            [SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS, expr, json.dumps([r[0] for r in ranked])],
        )}
        hits = []
        for chunk, message, rank in ranked:
            snippet, info = extra.get(chunk, ("", ";"))
            cols, _, phrases = info.partition(";")
            hits.append(KeywordChunkHit(
                message=message, chunk=chunk, score=-rank, snippet=snippet,
                columns=tuple(COLUMNS[i] for i in _ints(cols)),
                phrases=tuple(p - n_subject for p in _ints(phrases) if p >= n_subject),
            ))
        return hits

    # Joining every matching chunk to its message costs more than ranking it (a word in every
    # chunk of 100k messages: ~45 ms to rank, ~120 ms ranked and joined), so the best chunks are
    # ranked alone first and only they are joined and filtered.
    RANK_FIRST = 8
    FEW_CANDIDATES = 200
    COMMON_ROWS = 5000

    def _ranked_first(self, expr: str, conds: list[str], params: list[object], weights: str,
                      limit: int) -> list[tuple] | None:
        """The filtered best `limit` chunks, found among the best limit x RANK_FIRST unfiltered ones;
        None when too few of those pass the filters (the caller then filters every match). The
        answer is the same: if `limit` filtered chunks are among the best, no other can beat them."""
        probe = max(limit, 1) * self.RANK_FIRST
        where = " AND ".join(conds) or "1"
        rows = self._run(
            f"WITH top AS MATERIALIZED (SELECT rowid AS id, bm25(fts, {weights}) AS rank FROM fts "
            f"WHERE fts MATCH ? ORDER BY rank LIMIT ?) "
            f"SELECT top.id, c.message, top.rank, (SELECT count(*) FROM top) FROM top "
            f"JOIN chunks c ON c.id = top.id JOIN messages m ON m.id = c.message "
            f"WHERE {where} ORDER BY top.rank LIMIT ?",
            [expr, probe, *params, limit],
        )
        if len(rows) >= limit or (rows and rows[0][3] < probe):
            return [r[:3] for r in rows]
        if not rows:
            total = self._run("SELECT count(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ? LIMIT ?)", [expr, probe])
            if total[0][0] < probe:
                return []
        return None

    def newest(self, filters: KeywordFilters = KeywordFilters(), limit: int = 10, offset: int = 0
               ) -> list[KeywordMessageHit]:
        """Messages within the filters, newest first: a query with no words."""
        conds, params, subject = _filter_sql(filters)
        if subject:
            conds.append("m.id IN (SELECT c.message FROM fts JOIN chunks c ON c.id = fts.rowid WHERE fts MATCH ?)")
            params.append(subject)
        where = " AND ".join(conds) or "1"
        rows = self._run(f"SELECT m.id, m.date FROM messages m WHERE {where} ORDER BY m.date DESC, m.id DESC "
                         f"LIMIT ? OFFSET ?", [*params, limit, offset])
        return [KeywordMessageHit(*r) for r in rows]

    def tokens_present(self, messages: Iterable[int], tokens: Sequence[str]) -> dict[int, frozenset[str]]:
        """For each message, which of the tokens (plain words, quoted here) it holds in any column."""
        wanted = sorted(set(messages))
        ids = json.dumps(wanted)
        by_doclist = ("SELECT DISTINCT c.message FROM fts JOIN chunks c ON c.id = fts.rowid "
                      "WHERE fts MATCH ?1 AND c.message IN (SELECT value FROM json_each(?2))")
        # A common word's whole doclist costs ~50 ms to walk at 100k messages; a few candidates'
        # chunks looked up in FTS5 by rowid cost ~7 ms. For a rare word or many candidates, walk.
        by_rowid = ("SELECT DISTINCT c.message FROM json_each(?2) j CROSS JOIN chunks c ON c.message = j.value "
                    "CROSS JOIN fts ON fts.rowid = c.id WHERE fts MATCH ?1")
        found: dict[int, set[str]] = {}
        for token in dict.fromkeys(tokens):
            if not token.strip():
                continue
            sql = by_doclist
            if len(wanted) <= self.FEW_CANDIDATES:
                common = self._run("SELECT count(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ? LIMIT ?)",
                                   [quote(token), self.COMMON_ROWS])[0][0] >= self.COMMON_ROWS
                sql = by_rowid if common else by_doclist
            for (message,) in self._run(sql, [quote(token), ids]):
                found.setdefault(message, set()).add(token)
        return {m: frozenset(t) for m, t in found.items()}

    def matches_anything(self, match: str) -> bool:
        """Whether any chunk at all matches (no ranking: the first row of the doclist answers)."""
        return bool(self._run("SELECT 1 FROM fts WHERE fts MATCH ? LIMIT 1", [match]))

    _CHUNK_SQL = ("SELECT c.id, c.message, c.ord, c.kind, c.tokens, c.text, m.subject FROM chunks c "
                  "JOIN messages m ON m.id = c.message")

    def chunks_of(self, messages: Iterable[int], kind: str | None = "body") -> list[StoredChunk]:
        """The chunks of these messages in order (kind None: quoted ones too)."""
        sql = self._CHUNK_SQL + " WHERE c.message IN (SELECT value FROM json_each(?))"
        params: list[object] = [json.dumps(sorted(set(messages)))]
        if kind is not None:
            sql += " AND c.kind = ?"
            params.append(kind)
        return [StoredChunk(*r) for r in self._run(sql + " ORDER BY c.message, c.ord", params)]

    def body_chunks(self, after_id: int = 0, limit: int = 1000) -> list[StoredChunk]:
        """Body chunks with id > after_id, by id: the vector side walks the index with this."""
        return [StoredChunk(*r) for r in self._run(
            self._CHUNK_SQL + " WHERE c.id > ? AND c.kind = 'body' ORDER BY c.id LIMIT ?", [after_id, limit])]

    def chunk_ids(self, kind: str = "body") -> set[int]:
        return {r[0] for r in self._run("SELECT id FROM chunks WHERE kind = ?", [kind])}

    def message_dates(self, messages: Iterable[int]) -> dict[int, int]:
        return dict(self._run("SELECT id, date FROM messages WHERE id IN (SELECT value FROM json_each(?))",
                              [json.dumps(sorted(set(messages)))]))

    def counts(self) -> tuple[int, int]:
        m = self._run("SELECT count(*) FROM messages", [])[0][0]
        c = self._run("SELECT count(*) FROM chunks", [])[0][0]
        return m, c

    def seq(self) -> int:
        return self._run("SELECT value FROM meta WHERE key = 'seq'", [])[0][0]


# ---- writing ---------------------------------------------------------------------------------

class KeywordWriter:
    """index.db opened for writing by the indexer; creates it when missing.

    Durability is off (synchronous=OFF): index.db is rebuilt from raw.db after a crash.
    """

    def __init__(self, data_dir: Path, *, busy_ms: int = 30_000):
        self.path = index_path(data_dir)
        new = not self.path.exists()
        if new:
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)  # it holds mail text: private
            os.close(fd)
        try:
            self.db = _connect(self.path, write=True, busy_ms=busy_ms)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=OFF")
            self.db.execute("PRAGMA cache_size=-8000")  # 8 MB: the benchmark sums every process's memory
            self.db.execute("PRAGMA temp_store=MEMORY")
            if not self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                with self.transaction():  # another indexer may be creating it at the same moment
                    if not self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                        self.db.execute(_SCHEMA)
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except apsw.Error as e:
            raise _unavailable(self.path, _classify(e), str(e)) from None
        if not row or row[0] != SCHEMA_VERSION:
            raise _unavailable(self.path, "stale", f"schema {row[0] if row else None}, expected {SCHEMA_VERSION}")

    def close(self) -> None:
        try:
            self.db.execute("PRAGMA optimize")
        except apsw.Error:
            pass
        self.db.close()

    def __enter__(self) -> "KeywordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """`with writer.transaction():` one batch lands whole. The write lock is taken at the start
        (BEGIN IMMEDIATE), so two indexers (the daemon and `oaken reindex`) queue, never deadlock."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except apsw.BusyError as e:
            raise _unavailable(self.path, "locked", str(e)) from None
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def seq(self) -> int:
        return self.db.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()[0]

    def set_seq(self, seq: int) -> None:
        self.db.execute("UPDATE meta SET value = ? WHERE key = 'seq'", (seq,))

    def hashes(self, messages: Iterable[int]) -> dict[int, tuple[str, int]]:
        """message -> (content_hash, chunker_version) of what is indexed now."""
        return {r[0]: (r[1], r[2]) for r in self.db.execute(
            "SELECT id, content_hash, chunker_version FROM messages WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(set(messages))),))}

    def _delete_text(self, messages: list[int]) -> None:
        ids = json.dumps(messages)
        # external content: FTS5 is told the old values before the rows behind them go
        self.db.execute(
            f"INSERT INTO fts(fts, rowid, {', '.join(COLUMNS)}) SELECT 'delete', id, {', '.join(COLUMNS)} "
            "FROM fts_content WHERE id IN (SELECT id FROM chunks WHERE message IN (SELECT value FROM json_each(?)))",
            (ids,))
        self.db.execute("DELETE FROM chunks WHERE message IN (SELECT value FROM json_each(?))", (ids,))

    def delete(self, messages: Iterable[int]) -> None:
        ids = sorted(set(messages))
        if not ids:
            return
        self._delete_text(ids)
        js = json.dumps(ids)
        self.db.execute("DELETE FROM tags WHERE message IN (SELECT value FROM json_each(?))", (js,))
        self.db.execute("DELETE FROM messages WHERE id IN (SELECT value FROM json_each(?))", (js,))

    def _tags(self, fields: MessageFields) -> Iterator[tuple[str, str, int]]:
        for label in dict.fromkeys(fields.labels):
            yield ("l", label, fields.id)
        for folder in dict.fromkeys(fields.folders):
            yield ("f", folder, fields.id)

    def replace(self, docs: Sequence[tuple[MessageFields, Sequence[ChunkText]]], chunker_version: int) -> None:
        """Write messages and their chunks, replacing whatever was indexed for them."""
        if not docs:
            return
        self.delete(f.id for f, _ in docs)
        self.db.executemany(
            "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ((f.id, f.account, f.message_id, f.content_hash, f.date, f.subject, f.sender_name, f.sender_addr,
              "\n".join(f.to), "\n".join(f.cc), f.thread, f.disposition, 1 if f.attachment_names or
              f.attachment_types else 0, "\n".join(f.attachment_names), "\n".join(f.attachment_types), f.problem,
              chunker_version) for f, _ in docs))
        self.db.executemany("INSERT OR IGNORE INTO tags VALUES (?, ?, ?)",
                            (t for f, _ in docs for t in self._tags(f)))
        next_id = (self.db.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0]) + 1
        chunk_rows = []
        fts_rows = []
        for f, chunks in docs:
            sender = f"{f.sender_name} {f.sender_addr}"
            recipients = "\n".join(f.to) + "\n" + "\n".join(f.cc)
            names = "\n".join(f.attachment_names)
            for ord_, ch in enumerate(chunks):
                chunk_rows.append((next_id, f.id, ord_, ch.kind, ch.tokens, ch.text))
                body, quoted = (ch.text, "") if ch.kind == "body" else ("", ch.text)
                fts_rows.append((next_id, f.subject, sender, recipients if ord_ == 0 else "", body, quoted, names))
                next_id += 1
        self.db.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?)", chunk_rows)
        self.db.executemany(f"INSERT INTO fts(rowid, {', '.join(COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?)", fts_rows)

    def update_fields(self, fields: Sequence[MessageFields]) -> None:
        """Labels, folders, disposition and thread changed but not the bytes: no text is touched."""
        if not fields:
            return
        self.db.executemany("UPDATE messages SET thread = ?, disposition = ?, account = ? WHERE id = ?",
                            ((f.thread, f.disposition, f.account, f.id) for f in fields))
        self.db.execute("DELETE FROM tags WHERE message IN (SELECT value FROM json_each(?))",
                        (json.dumps([f.id for f in fields]),))
        self.db.executemany("INSERT OR IGNORE INTO tags VALUES (?, ?, ?)", (t for f in fields for t in self._tags(f)))

    def message_ids(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT id FROM messages")}

    def counts(self) -> tuple[int, int]:
        return (self.db.execute("SELECT count(*) FROM messages").fetchone()[0],
                self.db.execute("SELECT count(*) FROM chunks").fetchone()[0])


# ---- status and removal ----------------------------------------------------------------------

def status(data_dir: Path) -> dict:
    """What index.db holds, for `oaken status`: never raises."""
    path = index_path(data_dir)
    if not path.exists():
        return {"state": "missing", "messages": 0, "chunks": 0, "seq": 0, "path": str(path)}
    try:
        idx = KeywordIndex(data_dir)
    except IndexUnavailable as e:
        return {"state": getattr(e, "state", "corrupt"), "messages": 0, "chunks": 0, "seq": 0, "path": str(path),
                "problem": str(e)}
    try:
        check = idx.db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            return {"state": "corrupt", "messages": 0, "chunks": 0, "seq": 0, "path": str(path), "problem": check}
        messages, chunks = idx.counts()
        return {"state": "ok", "messages": messages, "chunks": chunks, "seq": idx.seq(), "path": str(path),
                "bytes": path.stat().st_size + _size(str(path) + "-wal")}
    except (IndexUnavailable, apsw.Error) as e:
        state = getattr(e, "state", None) or (_classify(e) if isinstance(e, apsw.Error) else "corrupt")
        return {"state": state, "messages": 0, "chunks": 0, "seq": 0, "path": str(path), "problem": str(e)}
    finally:
        idx.close()


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def drop(data_dir: Path) -> None:
    """Delete index.db and its WAL files (rebuild)."""
    path = index_path(data_dir)
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(str(path) + suffix)
        except FileNotFoundError:
            pass


__all__ = ["KeywordIndex", "KeywordWriter", "KeywordFilters", "KeywordChunkHit", "KeywordMessageHit", "StoredChunk",
           "MessageFields", "ChunkText", "quote", "status", "drop", "COLUMNS", "SNIPPET_OPEN", "SNIPPET_CLOSE",
           "UNAVAILABLE"]
