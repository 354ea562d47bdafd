"""`is:unread` reads raw.db's list of unread messages (migration m007, kept by triggers on
locations) instead of the whole mailbox's date order: at 100k messages with none unread the old
listing read every message (917 ms). The trace's `candidates` counts the rows it read."""

from __future__ import annotations

import shutil
from pathlib import Path

from oaken import api
from oaken.config import Config, EmbedderConfig, PathsConfig
from oaken.search.engine import search
from oaken.store import open_store

MAIL = Path(__file__).parent / "data" / "sync"  # 52 real messages (origin in its README)


def _home(tmp_path: Path) -> Config:
    src = tmp_path / "mail"
    src.mkdir()
    for f in sorted(MAIL.glob("*.eml")):
        shutil.copy(f, src / f.name)
    cfg = Config(paths=PathsConfig(data_dir=str(tmp_path / "home")), embedder=EmbedderConfig(model="none"))
    api.import_mail([src], config=cfg)
    from oaken.index import indexer

    indexer.reindex(cfg, keyword_only=True)
    return cfg


def test_is_unread_reads_only_the_unread_messages(tmp_path: Path) -> None:
    cfg = _home(tmp_path)
    with open_store(tmp_path / "home") as store:
        ids = store.all_message_ids()
        with store.transaction():
            for m in ids[2:]:
                store.mark_read(m)
    response = search("is:unread", config=cfg, limit=10, explain=True)
    assert sorted(h.id for h in response.hits) == sorted(ids[:2])
    keyword = next(t for t in response.explain.retrievers if t.retriever == "keyword")
    assert keyword.candidates <= 2  # before: every message of the mailbox was read
    # the list follows read state both ways, and with no unread mail there is nothing to read
    with open_store(tmp_path / "home") as store, store.transaction():
        store.mark_read(ids[0])
        store.mark_read(ids[5], read=False)
    assert sorted(h.id for h in search("is:unread", config=cfg, limit=10).hits) == sorted([ids[1], ids[5]])
    with open_store(tmp_path / "home") as store, store.transaction():
        for m in (ids[1], ids[5]):
            store.mark_read(m)
    response = search("is:unread", config=cfg, limit=10, explain=True)
    assert response.hits == () and next(t for t in response.explain.retrievers).candidates == 0
    # with words, is:read still filters the words' hits by raw.db's read state
    read = search("is:read the", config=cfg, limit=50).hits
    assert read and not any(h.unread for h in read)


def test_the_unread_list_matches_the_rule_after_copies_come_and_go(tmp_path: Path) -> None:
    """Unread while any copy lacks \\Seen: the table agrees with the rule computed from locations."""
    cfg = _home(tmp_path)
    with open_store(tmp_path / "home") as store:
        ids = store.all_message_ids()
        with store.transaction():
            for m in ids[::3]:
                store.mark_read(m)
        listed = set(r[0] for r in store.db.execute("SELECT message FROM unread"))
        rule = set(r[0] for r in store.db.execute(
            "SELECT m.id FROM messages m WHERE EXISTS (SELECT 1 FROM locations l WHERE l.message = m.id "
            "AND ' ' || l.flags || ' ' NOT LIKE '% \\Seen %')"))
        assert listed == rule and len(listed) == len(ids) - len(ids[::3])
    assert search("is:unread", config=cfg, limit=100).hits


def test_the_date_walk_and_the_id_seeks_list_the_same_messages(tmp_path: Path, monkeypatch) -> None:
    """A long id list (is:unread's pool) is listed by walking the account's date order when that is
    cheaper (at a million messages: 1.2 ms against 20 for the first page); both plans give the same
    messages in the same order, at every depth, whatever the list."""
    import random

    from oaken.index.keyword import listing
    from oaken.index.keyword.reader import KeywordIndex
    from oaken.index.keyword.records import KeywordFilters

    cfg = _home(tmp_path)
    rng = random.Random(7)
    with KeywordIndex(tmp_path / "home") as index:
        everything = [h.message for h in index.newest(KeywordFilters(), limit=100)]
        account = index._run("SELECT account FROM messages LIMIT 1", [])[0][0]
        walked: list[bool] = []
        real = index._walk_dates
        monkeypatch.setattr(index, "_walk_dates", lambda f, d: walked.append(real(f, d)) or walked[-1])
        for size in (1, 5, 20, 40, len(everything)):
            ids = frozenset(rng.sample(everything, size))
            flt = KeywordFilters(account=account, include_ids=ids)
            for offset, limit in ((0, 10), (3, 5), (10, 50), (0, 100)):
                monkeypatch.setattr(listing, "WALK_MIN_IDS", 10**9)  # seek every id
                sought = index.newest(flt, limit=limit, offset=offset)
                monkeypatch.setattr(listing, "WALK_MIN_IDS", 1)  # walk the dates when the model says so
                assert index.newest(flt, limit=limit, offset=offset) == sought
                assert [h.message for h in sought] == [m for m in everything if m in ids][offset : offset + limit]
    assert True in walked and False in walked  # both plans ran
