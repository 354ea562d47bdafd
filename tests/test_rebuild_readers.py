"""Rebuilds are atomic for readers (issue #19): while `oaken reindex --rebuild` runs, every search
gets the whole answer or one flagged degraded, never a part of the mail presented as all of it.

Real raw.db, index.db and LanceDB on real mail (tests/data/index), the concept embedder. Searches
run in a loop on another thread during the rebuild, and also at every batch the rebuild writes
(its progress callbacks), so the states in between are seen for certain and not only by luck."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from pathlib import Path

import apsw
import pytest

from oaken import config as config_mod
from oaken.config import Config
from oaken.errors import IndexUnavailable
from oaken.index import embedding, indexer, keyword
from oaken.index.keyword import KeywordFilters
from oaken.search.engine import search
from oaken.store import open_store
from tests.index_fixtures import message_id_of

QUESTION = "the meeting about money"  # 2 messages by its words, 8 more by meaning: 10 hits
LOOKUP = "mail"  # 5 messages hold it


@pytest.fixture
def concept(mailbox: Config) -> Config:
    """The mailbox indexed whole, with the concept embedder; rebuilds write 2 messages a batch."""
    cfg = dataclasses.replace(mailbox, embedder=config_mod.EmbedderConfig(model="concept"),
                              index=dataclasses.replace(mailbox.index, batch_size=2))
    report = indexer.reindex(cfg)
    assert report.vectors is not None and report.vectors["pending"] == 0
    return cfg


def _answer(cfg: Config, query: str) -> tuple[tuple[int, ...], bool, str | None]:
    r = search(query, config=cfg, limit=10)
    return tuple(h.id for h in r.hits), r.degraded, r.degraded_reason


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_searches_during_a_rebuild_get_the_whole_answer_or_a_degraded_one(
        concept: Config, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    keyword_only = mode == "keyword"
    if keyword_only:  # `oaken reindex --rebuild --keyword-only`, searched in keyword mode by choice
        concept = dataclasses.replace(concept, embedder=config_mod.EmbedderConfig(model="none"))
    whole = {q: _answer(concept, q) for q in (QUESTION, LOOKUP)}
    assert len(whole[QUESTION][0]) == (2 if keyword_only else 10) and len(whole[LOOKUP][0]) == 5
    assert not whole[QUESTION][1] and not whole[LOOKUP][1]
    monkeypatch.setattr(embedding, "WINDOW_CHUNKS", 1)  # the vectors come back a message at a time

    seen: list[tuple[str, str, tuple[int, ...], bool, str | None]] = []
    lock = threading.Lock()

    def look(where: str) -> None:
        for q in (QUESTION, LOOKUP):
            answer = _answer(concept, q)
            with lock:
                seen.append((where, q, *answer))

    stop = threading.Event()
    errors: list[BaseException] = []

    def loop() -> None:
        try:
            while not stop.is_set():
                look("thread")
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    reader = threading.Thread(target=loop, name="test-searches")
    reader.start()
    try:
        report = indexer.reindex(concept, rebuild=True, keyword_only=keyword_only,
                                 progress=lambda n: look("keyword batch"), vector_progress=lambda n: look("vector window"))
    finally:
        stop.set()
        reader.join(60)
    assert not errors, errors
    assert report.rebuilt and report.indexed == 14
    assert keyword_only or (report.vectors and report.vectors["pending"] == 0)

    wrong = [s for s in seen if s[2] != whole[s[1]][0] and not s[3]]
    assert not wrong, f"{len(wrong)} of {len(seen)} answers were partial but not flagged degraded: {wrong[:3]}"
    assert sum(s[0] == "keyword batch" for s in seen) >= 2 * 7  # 14 messages, 2 a batch
    # while the old index.db serves, the answer is whole; once the vectors are being rebuilt, degraded
    batches = [s for s in seen if s[0] == "keyword batch"]
    assert all(s[2] == whole[s[1]][0] and not s[3] for s in batches), [s for s in batches if s[2] != whole[s[1]][0] or s[3]][:3]
    if not keyword_only:
        assert sum(s[0] == "vector window" for s in seen) >= 2 * 10
        windows = [s for s in seen if s[0] == "vector window" and s[1] == QUESTION]
        assert all(s[3] and s[4] in ("no_vectors", "no_vector_store", "model_mismatch", "error") for s in windows)
    assert {q: _answer(concept, q) for q in whole} == whole  # and whole again afterwards


def test_rebuilt_index_db_is_private_and_leaves_no_old_file(concept: Config) -> None:
    data_dir = config_mod.resolve_data_dir(concept)
    first = os.path.realpath(keyword.index_path(data_dir))
    indexer.reindex(concept, rebuild=True, keyword_only=True)
    live = os.path.realpath(keyword.index_path(data_dir))
    assert live != first and not os.path.exists(first)
    assert os.stat(live).st_mode & 0o777 == 0o600
    left = sorted(n for n in os.listdir(data_dir) if n.startswith("index"))
    assert left == sorted(["index.db", os.path.basename(live), "index.lock"])


_OLD_READER = """
import sys
from oaken.index import keyword
idx = keyword.KeywordIndex(sys.argv[1])
print(idx.counts()[0], flush=True)
sys.stdin.readline()  # the test rebuilds meanwhile
print(idx.counts()[0], flush=True)
idx.close()
"""


def test_a_reader_of_the_old_index_db_never_disturbs_the_new_one(concept: Config) -> None:
    """The reason index.db is a link to the generation's file rather than a file renamed over the
    old one: SQLite names -wal and -shm after the database file, so after a rename the new file's
    readers would take the old file's WAL frames (still there while an old reader holds it) for
    their own, and that reader's close would delete the new file's -wal and -shm. The old reader
    is another process, as a search is."""
    data_dir = config_mod.resolve_data_dir(concept)
    msg = message_id_of(concept, "enron-lay-inbox-461.eml")
    old = subprocess.Popen([sys.executable, "-c", _OLD_READER, str(data_dir)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert old.stdout is not None and old.stdin is not None
        assert old.stdout.readline().strip() == "14"
        with open_store(data_dir) as store, store.transaction():
            store.add_label(msg, "Family")
            store.delete_messages([message_id_of(concept, "notmuch-05.eml")])
        indexer.update(concept, keyword_only=True)  # frames in the old file's WAL, kept by the old reader
        indexer.reindex(concept, rebuild=True, keyword_only=True)
        with open_store(data_dir) as store, store.transaction():
            store.delete_messages([message_id_of(concept, "notmuch-03.eml")])
        new = keyword.KeywordIndex(data_dir)
        assert new.counts()[0] == 13
        assert [h.message for h in new.newest(KeywordFilters(labels=("family",)))] == [msg]
        indexer.update(concept, keyword_only=True)  # the new file's own WAL
        out, _ = old.communicate("go\n", timeout=60)
        assert out.strip() == "13"  # the old file, as it was: a reader keeps what it opened
    finally:
        if old.poll() is None:
            old.kill()
    with keyword.KeywordIndex(data_dir) as idx:
        assert idx.counts()[0] == 12 and [h.message for h in idx.newest(KeywordFilters(labels=("family",)))] == [msg]
        assert idx.db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    assert new.counts()[0] == 12
    new.close()
    assert keyword.status(data_dir)["state"] == "ok"


def test_vectors_being_rebuilt_are_not_searched_until_whole(concept: Config) -> None:
    """A vector table built again (here for a rebuilt index.db) holds part of the mail until the
    embedding pass ends: the vector side says so (degraded), rather than rank from that part."""
    from oaken.index.embedding import embed_pending
    from oaken.index.vectors import VectorFilters, VectorStore, rebuilding
    from oaken.search.vector_retriever import VectorRetriever

    data_dir = config_mod.resolve_data_dir(concept)
    indexer.reindex(concept, rebuild=True, keyword_only=True)
    partial = embed_pending(concept, limit=40)
    assert partial.rebuilt and partial.pending > 0 and 0 < VectorStore(data_dir).count() < partial.chunks
    assert rebuilding(data_dir) is not None
    during = VectorRetriever(concept).retrieve(QUESTION, VectorFilters(), want=10)
    assert during.degraded_reason == "no_vectors" and "being rebuilt" in during.warnings[0]
    r = search(QUESTION, config=concept, limit=10)
    assert r.degraded and r.degraded_reason == "no_vectors" and r.mode == "keyword"
    rest = embed_pending(concept)
    assert rest.pending == 0 and rebuilding(data_dir) is None
    assert VectorRetriever(concept).retrieve(QUESTION, VectorFilters(), want=10).state == "ok"


def test_an_unfinished_build_is_discarded_and_the_live_index_kept(concept: Config,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebuild that fails half way leaves the live index.db as it was (and its file is gone)."""
    data_dir = config_mod.resolve_data_dir(concept)
    live = os.path.realpath(keyword.index_path(data_dir))

    def fail(*args: object, **kwargs: object) -> None:
        raise apsw.FullError("disk full")

    monkeypatch.setattr(keyword.KeywordWriter, "publish", fail)
    with pytest.raises(IndexUnavailable, match="the disk is full"):  # said as such, not as SQLite's FullError
        indexer.reindex(concept, rebuild=True, keyword_only=True)
    assert os.path.realpath(keyword.index_path(data_dir)) == live
    assert sorted(n for n in os.listdir(data_dir) if n.startswith("index-")) == [Path(live).name]
    assert _answer(concept, LOOKUP)[1:] == (False, None)
