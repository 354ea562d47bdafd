"""raw.db's schema as ordered, numbered migrations (the store applies them; see oaken/store/).

Kept apart from the store's queries so that each file does one job; every statement against
raw.db still lives in the oaken.store package.
"""

from __future__ import annotations

# Ordered, numbered migrations; a database records the last one applied in user_version.
MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "m001_initial",
        """
CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO meta VALUES ('seq', 0);
CREATE TABLE accounts(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE folders(
    id INTEGER PRIMARY KEY,
    account_id INTEGER NOT NULL REFERENCES accounts(id),
    name TEXT NOT NULL,
    delimiter TEXT,
    special_use TEXT,
    uidvalidity INTEGER,
    uidnext INTEGER,
    highestmodseq INTEGER,
    exists_count INTEGER,
    synced_at REAL,
    UNIQUE(account_id, name)
);
CREATE TABLE messages(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id INTEGER NOT NULL REFERENCES accounts(id),
    message_id TEXT,
    content_hash TEXT NOT NULL,
    raw BLOB NOT NULL,
    size INTEGER NOT NULL,
    date INTEGER NOT NULL,
    date_source TEXT NOT NULL,
    subject TEXT NOT NULL DEFAULT '',
    sender_name TEXT NOT NULL DEFAULT '',
    sender_addr TEXT NOT NULL DEFAULT '',
    to_addrs TEXT NOT NULL DEFAULT '',
    cc_addrs TEXT NOT NULL DEFAULT '',
    in_reply_to TEXT NOT NULL DEFAULT '',
    refs TEXT NOT NULL DEFAULT '',
    thread_id INTEGER NOT NULL,
    problem TEXT,
    added_at REAL NOT NULL,
    change_seq INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX messages_identity ON messages(account_id, coalesce(message_id, ''), content_hash);
CREATE INDEX messages_date ON messages(account_id, date);
CREATE INDEX messages_thread ON messages(thread_id);
CREATE INDEX messages_seq ON messages(change_seq);
CREATE INDEX messages_hash ON messages(account_id, content_hash);
CREATE TABLE thread_refs(
    account_id INTEGER NOT NULL,
    ref TEXT NOT NULL,
    thread_id INTEGER NOT NULL,
    PRIMARY KEY(account_id, ref)
) WITHOUT ROWID;
CREATE INDEX thread_refs_thread ON thread_refs(thread_id);
CREATE TABLE thread_subjects(
    account_id INTEGER NOT NULL,
    subject TEXT NOT NULL,
    thread_id INTEGER NOT NULL,
    PRIMARY KEY(account_id, subject)
) WITHOUT ROWID;
CREATE TABLE locations(
    id INTEGER PRIMARY KEY,
    message INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    folder_id INTEGER NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
    uidvalidity INTEGER,
    uid INTEGER,
    source TEXT,
    flags TEXT NOT NULL DEFAULT '',
    modseq INTEGER,
    internaldate INTEGER
);
CREATE UNIQUE INDEX locations_uid ON locations(folder_id, uidvalidity, uid) WHERE uid IS NOT NULL;
CREATE UNIQUE INDEX locations_local ON locations(folder_id, message) WHERE uid IS NULL;
CREATE INDEX locations_message ON locations(message);
CREATE TABLE labels(
    message INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    label TEXT NOT NULL,
    PRIMARY KEY(message, label)
) WITHOUT ROWID;
CREATE TABLE triage(
    message INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    category TEXT,
    priority INTEGER CHECK (priority BETWEEN 0 AND 3),
    disposition TEXT NOT NULL DEFAULT 'inbox' CHECK (disposition IN ('inbox', 'archived', 'discarded')),
    updated_at REAL NOT NULL
);
CREATE TABLE flag_queue(
    id INTEGER PRIMARY KEY,
    message INTEGER NOT NULL,
    location INTEGER NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('+', '-')),
    flag TEXT NOT NULL,
    created_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'rejected')),
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX flag_queue_pending ON flag_queue(state, location);
CREATE TABLE tombstones(
    message INTEGER PRIMARY KEY,
    account_id INTEGER NOT NULL,
    change_seq INTEGER NOT NULL
);
CREATE INDEX tombstones_seq ON tombstones(change_seq);

CREATE TRIGGER bump_msg_insert AFTER INSERT ON messages BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    UPDATE messages SET change_seq = (SELECT value FROM meta WHERE key = 'seq') WHERE id = NEW.id;
END;
CREATE TRIGGER bump_msg_delete AFTER DELETE ON messages BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    INSERT OR REPLACE INTO tombstones VALUES (OLD.id, OLD.account_id, (SELECT value FROM meta WHERE key = 'seq'));
END;
CREATE TRIGGER bump_loc_insert AFTER INSERT ON locations BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    UPDATE messages SET change_seq = (SELECT value FROM meta WHERE key = 'seq') WHERE id = NEW.message;
END;
CREATE TRIGGER bump_loc_update AFTER UPDATE OF flags, folder_id, message ON locations
WHEN OLD.flags IS NOT NEW.flags OR OLD.folder_id IS NOT NEW.folder_id OR OLD.message IS NOT NEW.message BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    UPDATE messages SET change_seq = (SELECT value FROM meta WHERE key = 'seq')
        WHERE id IN (NEW.message, OLD.message);
END;
CREATE TRIGGER bump_loc_delete AFTER DELETE ON locations BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    UPDATE messages SET change_seq = (SELECT value FROM meta WHERE key = 'seq') WHERE id = OLD.message;
END;
CREATE TRIGGER bump_label_insert AFTER INSERT ON labels BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    UPDATE messages SET change_seq = (SELECT value FROM meta WHERE key = 'seq') WHERE id = NEW.message;
END;
CREATE TRIGGER bump_label_delete AFTER DELETE ON labels BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    UPDATE messages SET change_seq = (SELECT value FROM meta WHERE key = 'seq') WHERE id = OLD.message;
END;
CREATE TRIGGER bump_triage_insert AFTER INSERT ON triage BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    UPDATE messages SET change_seq = (SELECT value FROM meta WHERE key = 'seq') WHERE id = NEW.message;
END;
CREATE TRIGGER bump_triage_update AFTER UPDATE ON triage BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    UPDATE messages SET change_seq = (SELECT value FROM meta WHERE key = 'seq') WHERE id = NEW.message;
END;
""",
    ),
    # A batch of new messages (Store.add_messages) takes its change seqs itself, one per message,
    # in the INSERT; the triggers then leave those rows alone instead of rewriting each one (raw
    # bytes and all) twice. meta 'batch_floor', set only inside such a batch's transaction, is
    # the first seq it took: a new location of a message at or above it is already in the feed.
    (
        "m002_batch_change_seqs",
        """
DROP TRIGGER bump_msg_insert;
CREATE TRIGGER bump_msg_insert AFTER INSERT ON messages WHEN NEW.change_seq = 0 BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    UPDATE messages SET change_seq = (SELECT value FROM meta WHERE key = 'seq') WHERE id = NEW.id;
END;
DROP TRIGGER bump_loc_insert;
CREATE TRIGGER bump_loc_insert AFTER INSERT ON locations
WHEN NOT EXISTS (SELECT 1 FROM messages WHERE id = NEW.message
                 AND change_seq >= (SELECT value FROM meta WHERE key = 'batch_floor')) BEGIN
    UPDATE meta SET value = value + 1 WHERE key = 'seq';
    UPDATE messages SET change_seq = (SELECT value FROM meta WHERE key = 'seq') WHERE id = NEW.message;
END;
""",
    ),
    # Every location is inserted by Store._add_locations, which bumps the messages that gained one
    # (a seq each, once per batch): a trigger program run per row cost a fifth of storing a batch.
    (
        "m003_locations_bumped_by_the_store",
        """
DROP TRIGGER bump_loc_insert;
""",
    ),
    # Store._find_messages looks a batch up by the identity index: this one only cost its upkeep.
    (
        "m004_no_hash_index",
        """
DROP INDEX messages_hash;
""",
    ),
    # The server's lasting id of each folder's mailbox (RFC 8474 MAILBOXID, or Dovecot's X-GUID):
    # the same id under a new name is a rename, another id under the same name a new folder.
    # NULL where the server has none (folders are then recognised by their messages) and in
    # folders synced before this migration, until their next sync.
    (
        "m005_folder_mailbox_id",
        """
ALTER TABLE folders ADD COLUMN mailbox_id TEXT;
""",
    ),
    # messages a sync pass left with no location: kept until the pass is over, so one moved to a
    # folder synced later in the pass (or in the next full pass) keeps its id, triage and labels
    (
        "m006_orphan_candidates",
        """
CREATE TABLE orphan_candidates(message INTEGER PRIMARY KEY) WITHOUT ROWID;
""",
    ),
    # the unread messages (a copy lacking \Seen: locations.UNREAD_SQL), kept by triggers on
    # locations: `is:unread` reads this short list instead of every message's locations (917 ms at
    # 100k messages with none unread). Its own table: a column on messages would rewrite each
    # message's row, raw bytes and all, on every flag change.
    (
        "m007_unread",
        """
CREATE TABLE unread(
    message INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    account_id INTEGER NOT NULL
);
CREATE INDEX unread_account ON unread(account_id);
INSERT INTO unread SELECT m.id, m.account_id FROM messages m WHERE EXISTS (SELECT 1 FROM locations l
    WHERE l.message = m.id AND ' ' || l.flags || ' ' NOT LIKE '% \\Seen %');
CREATE TRIGGER unread_loc_insert AFTER INSERT ON locations
WHEN ' ' || NEW.flags || ' ' NOT LIKE '% \\Seen %' BEGIN
    INSERT OR IGNORE INTO unread SELECT id, account_id FROM messages WHERE id = NEW.message;
END;
CREATE TRIGGER unread_loc_update AFTER UPDATE OF flags, message ON locations BEGIN
    DELETE FROM unread WHERE message IN (OLD.message, NEW.message) AND NOT EXISTS (SELECT 1 FROM locations l
        WHERE l.message = unread.message AND ' ' || l.flags || ' ' NOT LIKE '% \\Seen %');
    INSERT OR IGNORE INTO unread SELECT m.id, m.account_id FROM messages m WHERE m.id IN (OLD.message, NEW.message)
        AND EXISTS (SELECT 1 FROM locations l WHERE l.message = m.id AND ' ' || l.flags || ' ' NOT LIKE '% \\Seen %');
END;
CREATE TRIGGER unread_loc_delete AFTER DELETE ON locations BEGIN
    DELETE FROM unread WHERE message = OLD.message AND NOT EXISTS (SELECT 1 FROM locations l
        WHERE l.message = OLD.message AND ' ' || l.flags || ' ' NOT LIKE '% \\Seen %');
END;
""",
    ),
    # what `oaken status` counts, kept by triggers: counting and summing messages read every row,
    # and a row's size and problem sit after its raw bytes, so each read walked the message's
    # overflow pages: the whole of raw.db (4 GB at a million messages) for one status. Folders
    # count their locations the same way (an imported location has no uid, so no index held them).
    (
        "m008_totals",
        """
CREATE TABLE account_totals(
    account_id INTEGER PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    messages INTEGER NOT NULL DEFAULT 0,
    bytes INTEGER NOT NULL DEFAULT 0
);
INSERT INTO account_totals SELECT a.id, count(m.id), coalesce(sum(m.size), 0) FROM accounts a
    LEFT JOIN messages m ON m.account_id = a.id GROUP BY a.id;
CREATE TRIGGER totals_account_insert AFTER INSERT ON accounts BEGIN
    INSERT OR IGNORE INTO account_totals(account_id) VALUES (NEW.id);
END;
CREATE TRIGGER totals_message_insert AFTER INSERT ON messages BEGIN
    INSERT OR IGNORE INTO account_totals(account_id) VALUES (NEW.account_id);
    UPDATE account_totals SET messages = messages + 1, bytes = bytes + NEW.size WHERE account_id = NEW.account_id;
END;
CREATE TRIGGER totals_message_delete AFTER DELETE ON messages BEGIN
    UPDATE account_totals SET messages = messages - 1, bytes = bytes - OLD.size WHERE account_id = OLD.account_id;
END;
CREATE TRIGGER totals_message_update AFTER UPDATE OF size, account_id ON messages BEGIN
    UPDATE account_totals SET messages = messages - 1, bytes = bytes - OLD.size WHERE account_id = OLD.account_id;
    INSERT OR IGNORE INTO account_totals(account_id) VALUES (NEW.account_id);
    UPDATE account_totals SET messages = messages + 1, bytes = bytes + NEW.size WHERE account_id = NEW.account_id;
END;
CREATE INDEX messages_problem ON messages(id) WHERE problem IS NOT NULL;
ALTER TABLE folders ADD COLUMN locations INTEGER NOT NULL DEFAULT 0;
UPDATE folders SET locations = (SELECT count(*) FROM locations l WHERE l.folder_id = folders.id);
CREATE TRIGGER folder_count_insert AFTER INSERT ON locations BEGIN
    UPDATE folders SET locations = locations + 1 WHERE id = NEW.folder_id;
END;
CREATE TRIGGER folder_count_delete AFTER DELETE ON locations BEGIN
    UPDATE folders SET locations = locations - 1 WHERE id = OLD.folder_id;
END;
CREATE TRIGGER folder_count_update AFTER UPDATE OF folder_id ON locations WHEN OLD.folder_id != NEW.folder_id BEGIN
    UPDATE folders SET locations = locations - 1 WHERE id = OLD.folder_id;
    UPDATE folders SET locations = locations + 1 WHERE id = NEW.folder_id;
END;
""",
    ),
    (
        # the files an import stored, by path: an import of a few new files looks up the ones
        # under its paths, not every file the account ever imported (0.75 s at a million)
        "m009_local_sources",
        """
CREATE INDEX locations_source ON locations(source) WHERE uid IS NULL AND source IS NOT NULL;
""",
    ),
    (
        # a Maildir's cur/ or new/ an import listed whole, by its mtime: while that is the same,
        # no file was added, renamed or removed there, and a no-change import lists nothing
        "m010_import_dirs",
        """
CREATE TABLE import_dirs(
    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    mtime_ns INTEGER NOT NULL,
    files INTEGER NOT NULL,
    PRIMARY KEY (account_id, path)
) WITHOUT ROWID;
""",
    ),
)
