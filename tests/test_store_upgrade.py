"""A raw.db made by an older Oaken is read after an upgrade: the first reader brings its schema up
to date (before: `oaken search` right after an upgrade failed with 'no such table: unread')."""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw

from oaken import api
from oaken.config import Config, EmbedderConfig, PathsConfig
from oaken.index import indexer
from oaken.search.engine import search
from oaken.store import Store, migrations

MAIL = Path(__file__).parent / "data" / "search"  # 12 real Enron messages (origin in its README)
LAST_RELEASE = 4  # the schema version of the code before migrations m005-m007


def test_a_search_first_after_an_upgrade_reads_an_older_raw_db(tmp_path: Path) -> None:
    src = tmp_path / "mail"
    shutil.copytree(MAIL, src)
    cfg = Config(paths=PathsConfig(data_dir=str(tmp_path / "home")), embedder=EmbedderConfig(model="none"))
    api.import_mail([src], config=cfg)
    indexer.reindex(cfg, keyword_only=True)
    raw = tmp_path / "home" / "raw.db"
    # back to the last release's schema: what m005-m008 added taken away again
    db = apsw.Connection(str(raw))
    for trigger in ("totals_account_insert", "totals_message_insert", "totals_message_delete",
                    "totals_message_update", "folder_count_insert", "folder_count_delete", "folder_count_update"):
        db.execute(f"DROP TRIGGER {trigger}")
    db.execute("DROP INDEX locations_source; DROP TABLE import_dirs")  # m009, m010
    db.execute("DROP TABLE account_totals; DROP INDEX messages_problem; ALTER TABLE folders DROP COLUMN locations")
    for trigger in ("unread_loc_insert", "unread_loc_update", "unread_loc_delete"):
        db.execute(f"DROP TRIGGER {trigger}")
    db.execute("DROP TABLE unread; DROP TABLE orphan_candidates; ALTER TABLE folders DROP COLUMN mailbox_id")
    db.execute(f"PRAGMA user_version={LAST_RELEASE}")
    db.close()
    with Store(raw, readonly=True) as store:  # what a search opens first
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == len(migrations.MIGRATIONS)
    unread = search("is:unread", config=cfg)
    assert unread.hits and all(h.unread for h in unread.hits)  # reads the table m007 made from locations
    assert search("meeting", config=cfg).hits
    status = api.status(config=cfg)["accounts"]["local"]
    assert status["unread"] == len(unread.hits)
    assert status["messages"] == 12 and status["bytes"] > 0  # the counters m008 made from the messages
    assert sum(f["messages"] for f in status["folders"].values()) >= 12
