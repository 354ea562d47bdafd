"""index.db on disk: where it is, its schema and version, and opening it.

A failure to open or read it becomes IndexUnavailable with a state ("missing", "corrupt",
"locked", "stale") and the fix; the reader, the writer and `status` all report through here.
There are no migrations: index.db is derived, so another SCHEMA_VERSION means "stale", and
`oaken reindex --rebuild` makes it again from raw.db.

A whole index.db (a first build or a rebuild) is built beside the live one as
`index-<generation>.db` and published by pointing the symbolic link `index.db` at it (whole.py):
SQLite names a database's -wal and -shm files after the file the link resolves to, so readers of
the old and of the new index.db never share them. (Renaming the new file over the old one would:
a reader of the new file would read the old file's WAL frames as its own, and the last reader of
the old file would delete the new one's -wal and -shm on closing.) An index.db made before this
is a plain file, written in place until its first rebuild.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from oaken.errors import IndexUnavailable
from oaken.index.keyword import tokenizer
from oaken.index.keyword.tokenizer import TOKENIZE

INDEX_FILE = "index.db"
BUILD_PREFIX = "index-"  # index-<generation>.db: a whole index.db, being built or published
# 2: recipients on a message's first chunk only; 3: the oaken_cjk tokenizer (tokenizer.py). An
# 4: attachment chunks (kind 'attachment', counted with the body chunks the vector side embeds) and
# messages.attachments_unread. An
# index.db of another version is "stale": the indexer builds a new one beside it and swaps it in
# (oaken.index.indexer), and until then a search says so instead of answering from it: an index
# made by another tokenizer cannot find what the query's tokens now say.
SCHEMA_VERSION = 4
COLUMNS = ("subject", "sender", "recipients", "body", "quoted", "attachments")
UNAVAILABLE = "keyword_index_unavailable"

# `in:archived` lists the newest archived mail by this, not by reading all mail newest first (at
# 100k messages with few archived: 0.03 against 97 ms); index.db files made before get it on the
# writer's next open (KeywordWriter), so the schema version stays
DISPOSITION_INDEX = "CREATE INDEX IF NOT EXISTS messages_disposition ON messages(account, disposition, date)"
# Every keyword pass asks whether another chunker made some message's chunks (an upgrade): without
# it a scan of every message, ~200 ms of each pass at a million; with it two seeks. Added to older
# index.db files like DISPOSITION_INDEX.
CHUNKER_INDEX = "CREATE INDEX IF NOT EXISTS messages_chunker ON messages(chunker_version)"

# Counts `oaken status`, the coverage of the vectors and every keyword pass read, kept by
# triggers in meta: count(*) reads a whole table's smallest index (4M chunks at 1M messages). An
# index.db made before them gets them on the writer's next open (KeywordWriter), counted once.
COUNTERS = ("messages", "chunks", "body_chunks")  # body_chunks: the chunks the vector side embeds (EMBEDDED)
EMBEDDED = ("body", "attachment")  # chunk kinds the vector side embeds; "quoted" is keyword only
EMBEDDED_SQL = "kind IN ('body', 'attachment')"
COUNTER_TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS count_message_insert AFTER INSERT ON messages BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'messages';
END;
CREATE TRIGGER IF NOT EXISTS count_message_delete AFTER DELETE ON messages BEGIN
    UPDATE meta SET value = value - 1 WHERE key = 'messages';
END;
CREATE TRIGGER IF NOT EXISTS count_chunk_insert AFTER INSERT ON chunks BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'chunks' OR (key = 'body_chunks' AND NEW.kind IN ('body', 'attachment'));
END;
CREATE TRIGGER IF NOT EXISTS count_chunk_delete AFTER DELETE ON chunks BEGIN
    UPDATE meta SET value = value - 1 WHERE key = 'chunks' OR (key = 'body_chunks' AND OLD.kind IN ('body', 'attachment'));
END;
CREATE TRIGGER IF NOT EXISTS count_chunk_kind AFTER UPDATE OF kind ON chunks WHEN OLD.kind != NEW.kind BEGIN
    UPDATE meta SET value = value + (NEW.kind IN ('body', 'attachment')) - (OLD.kind IN ('body', 'attachment'))
        WHERE key = 'body_chunks';
END;
"""
COUNT_NOW = """
INSERT OR REPLACE INTO meta VALUES ('messages', (SELECT count(*) FROM messages));
INSERT OR REPLACE INTO meta VALUES ('chunks', (SELECT count(*) FROM chunks));
INSERT OR REPLACE INTO meta VALUES ('body_chunks', (SELECT count(*) FROM chunks WHERE kind IN ('body', 'attachment')));
"""

SCHEMA = f"""
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
    chunker_version INTEGER NOT NULL,
    attachments_unread TEXT  -- attachments whose words could not be read, and why (one a line)
);
CREATE INDEX messages_account_date ON messages(account, date);
CREATE INDEX messages_attachments_unread ON messages(id) WHERE attachments_unread IS NOT NULL;
{DISPOSITION_INDEX};
{CHUNKER_INDEX};
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
           CASE c.kind WHEN 'attachment' THEN c.text || char(10) || m.attachment_names
                ELSE m.attachment_names END AS attachments
    FROM chunks c JOIN messages m ON m.id = c.message;
CREATE VIRTUAL TABLE fts USING fts5({", ".join(COLUMNS)}, content='fts_content', content_rowid='id',
    tokenize='{TOKENIZE}');
INSERT INTO meta VALUES ('schema', {SCHEMA_VERSION}), ('seq', 0), ('messages', 0), ('chunks', 0), ('body_chunks', 0);
{COUNTER_TRIGGERS}
"""


def index_path(data_dir: Path) -> Path:
    return Path(data_dir) / INDEX_FILE


def build_path(data_dir: Path, generation: str) -> Path:
    """Where a whole new index.db of this generation is built (and stays, once published)."""
    return Path(data_dir) / f"{BUILD_PREFIX}{generation}.db"


def unavailable(path: Path, state: str, detail: str) -> IndexUnavailable:
    if state == "full":  # not damage: the index is sound, the disk has no room for what comes next
        from oaken import diskspace

        err = IndexUnavailable(
            diskspace.full_message(
                path,
                fix="run the command again (`oaken reindex` goes on from where it stopped; the index is not damaged)",
            )
        )
        err.code = UNAVAILABLE
        err.state = state
        err.detail = detail
        return err
    what = {
        "missing": "does not exist yet",
        "corrupt": "is damaged",
        "locked": "is locked by another process",
        "stale": "was made by another version of Oaken",
    }[state]
    fix = "run `oaken reindex` to build it" if state == "missing" else "run `oaken reindex --rebuild` to repair it"
    if state == "locked":
        fix = "wait for the other process (another `oaken reindex`?) or run `oaken reindex --rebuild`"
    err = IndexUnavailable(f"{path}: keyword index {what} ({detail}); {fix}")
    err.code = UNAVAILABLE
    err.state = state
    err.detail = detail
    return err


def classify(e: apsw.Error, path: Path | None = None) -> str:
    """ "locked", "full" (the disk holding `path` has no room), or "corrupt"."""
    from oaken import diskspace

    if isinstance(e, (apsw.BusyError, apsw.LockedError)):
        return "locked"
    if diskspace.is_full(e, path):
        return "full"
    return "corrupt"


def connect(path: Path, *, write: bool, busy_ms: int) -> apsw.Connection:
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if write else 0)
    db = apsw.Connection(str(path), flags=flags)
    db.set_busy_timeout(busy_ms)
    try:
        tokenizer.register(db)  # the fts table cannot be opened without it
    except apsw.NoFTS5Error:
        # apsw reaches FTS5 through a statement, which a locked or damaged file fails, and then
        # says only "no FTS5": the file's own error (BusyError, CorruptError) says which it is
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchall()
        finally:
            db.close()
        raise
    return db


def check_version(db: apsw.Connection, path: Path) -> None:
    """Raises IndexUnavailable ("stale") unless index.db has this code's SCHEMA_VERSION. An
    apsw.Error from reading it is left to the caller, which classifies its own failures."""
    row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    if not row or row[0] != SCHEMA_VERSION:
        raise unavailable(path, "stale", f"schema {row[0] if row else None}, expected {SCHEMA_VERSION}")


DAMAGED_SUFFIX = ".damaged"  # beside the file index.db links to: what a quick_check found wrong in it


def mark_damaged(path: Path, found: str) -> None:
    """Remember that quick_check found this index.db damaged, so that every search says so until
    it is rebuilt (a search does not run the check: 0.2 s or more). A rebuilt index.db is another
    file, without the mark."""
    import os

    try:
        with open(os.path.realpath(path) + DAMAGED_SUFFIX, "w", encoding="utf-8") as f:
            f.write(found)
    except OSError:
        pass  # a read-only or full disk: the next check finds the damage again


def known_damage(path: Path) -> str | None:
    import os

    try:
        with open(os.path.realpath(path) + DAMAGED_SUFFIX, encoding="utf-8") as f:
            return f.read().strip() or "damaged"
    except OSError:
        return None


def damage(db: apsw.Connection) -> str | None:
    """None when SQLite's quick_check finds index.db sound, else what it found, as one line.

    It reads every page: 0.2 s for the 26 MB index.db of the Enron Lay and Skilling mailboxes,
    0.5 s for 100 MB (those mailboxes four times), 1.0 s for that from a cold page cache. The
    indexer runs it once per process and file (`oaken reindex` each time; the daemon on its first
    pass), not on every pass."""
    try:
        rows = [str(r[0]) for r in db.execute("PRAGMA quick_check(10)")]
    except (apsw.BusyError, apsw.LockedError):
        raise
    except apsw.Error as e:  # too damaged for the check to walk it
        return f"{type(e).__name__}: {e}"
    if rows == ["ok"]:
        return None
    return one_line(rows)


def one_line(report: list[str]) -> str:
    """SQLite's quick_check rows ("*** in database main ***", "Page 5: ...") as one line."""
    lines = [ln.strip() for row in report for ln in row.splitlines()]
    problems = [ln for ln in lines if ln and not ln.startswith("***")]
    if not problems:
        return "quick_check failed"
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    return f"quick_check: {problems[0]}{more}"
