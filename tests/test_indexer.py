"""The indexer follows raw.db's change feed: new bytes are parsed, label/folder/disposition changes
touch only the filter fields, deletions leave, and index.db can always be rebuilt."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from oaken import cli
from oaken import config as config_mod
from oaken.api import import_mail
from oaken.config import Config
from oaken.index import indexer, keyword
from oaken.index.keyword import KeywordFilters, quote
from oaken.store import open_store
from tests.index_fixtures import INDEX_DATA, message_id_of, open_index


def chunk_ids_of(cfg: Config, message: int) -> list[int]:
    with open_index(cfg) as idx:
        return [c.id for c in idx.chunks_of([message], kind=None)]


def test_first_run_indexes_everything_and_a_second_run_nothing(mailbox: Config) -> None:
    first = indexer.update(mailbox, keyword_only=True)
    assert first.indexed == 14 and first.problems == 0 and first.chunks > 13
    again = indexer.update(mailbox, keyword_only=True)
    assert (again.indexed, again.updated, again.deleted) == (0, 0, 0)
    assert again.seq == first.seq
    status = keyword.status(config_mod.resolve_data_dir(mailbox))
    assert status["state"] == "ok" and status["messages"] == 14 and status["chunks"] == first.chunks


def test_label_and_triage_changes_update_fields_without_reparsing(indexed: Config) -> None:
    msg = message_id_of(indexed, "enron-lay-inbox-461.eml")
    before = chunk_ids_of(indexed, msg)
    with open_store(config_mod.resolve_data_dir(indexed)) as store, store.transaction():
        store.add_label(msg, "Family")
        store.set_triage(msg, categories=indexed.triage.categories, disposition="archived")
    report = indexer.update(indexed, keyword_only=True)
    assert (report.indexed, report.updated) == (0, 1)
    assert chunk_ids_of(indexed, msg) == before  # the text was not touched
    with open_index(indexed) as idx:
        hits = idx.newest(KeywordFilters(labels=("family", "INBOX"), dispositions=("archived",)), 10)
        assert [h.message for h in hits] == [msg]
    with open_store(config_mod.resolve_data_dir(indexed)) as store, store.transaction():
        store.remove_label(msg, "Family")
    indexer.update(indexed, keyword_only=True)
    with open_index(indexed) as idx:
        assert idx.newest(KeywordFilters(labels=("family",)), 10) == []


def test_deleted_messages_leave_and_new_ones_arrive(indexed: Config, tmp_path: Path) -> None:
    gone = message_id_of(indexed, "notmuch-03.eml")
    with open_store(config_mod.resolve_data_dir(indexed)) as store, store.transaction():
        store.delete_messages([gone])
    report = indexer.update(indexed, keyword_only=True)
    assert report.deleted == 1 and report.indexed == 0
    with open_index(indexed) as idx:
        assert gone not in {h.message for h in idx.query(quote("mairix"), KeywordFilters(), 10)}
        assert idx.chunks_of([gone], kind=None) == []
    again = tmp_path / "again"
    again.mkdir()
    (again / "03.eml").write_bytes((INDEX_DATA / "notmuch-03.eml").read_bytes())
    import_mail([again], account="work", config=indexed)
    assert indexer.update(indexed, keyword_only=True).indexed == 1
    with open_index(indexed) as idx:
        assert message_id_of(indexed, "notmuch-03.eml") in {h.message for h in idx.query(quote("mairix"),
                                                                                             KeywordFilters(), 10)}


def test_message_that_cannot_be_parsed_is_found_by_its_headers(mailbox: Config, tmp_path: Path) -> None:
    depth = 3000  # nesting deeper than Python's parser can follow
    parts = [b"From: Alex <alex@example.com>\r\nTo: sam@example.com\r\nSubject: Quarterly zebra report\r\n"
             b"Message-ID: <nested@example.com>\r\nMIME-Version: 1.0\r\n"]
    for i in range(depth):
        parts.append(b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (i, i))
    parts.append(b"Content-Type: text/plain\r\n\r\ninnermost words\r\n")
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "nested.eml").write_bytes(b"".join(parts))
    import_mail([folder], account="work", config=mailbox)
    report = indexer.update(mailbox, keyword_only=True)
    assert report.indexed == 15 and report.problems == 1
    with open_index(mailbox) as idx:
        hits = idx.query(quote("zebra"), KeywordFilters(), 5)
        assert len({h.message for h in hits}) == 1 and "subject" in hits[0].columns
        assert idx.newest(KeywordFilters(senders=("alex@example.com",)), 5)


def test_missing_index_is_rebuilt_by_the_next_update(indexed: Config) -> None:
    data_dir = config_mod.resolve_data_dir(indexed)
    keyword.drop(data_dir)
    report = indexer.update(indexed, keyword_only=True)
    assert report.indexed == 14


def test_corrupt_index_is_rebuilt_by_the_next_update_and_by_rebuild(indexed: Config) -> None:
    """index.db is derived: a file that is not a database at all is built again, and the report
    says why (it used to be refused until `--rebuild`)."""
    data_dir = config_mod.resolve_data_dir(indexed)
    keyword.drop(data_dir)
    keyword.index_path(data_dir).write_bytes(b"garbage, not SQLite" * 500)
    report = indexer.update(indexed, keyword_only=True)
    assert report.rebuilt and report.indexed == 14 and "damaged" in (report.rebuild_reason or "")
    assert keyword.status(data_dir)["state"] == "ok"
    report = indexer.reindex(indexed, rebuild=True, keyword_only=True)
    assert report.rebuilt and report.indexed == 14
    assert keyword.status(data_dir)["state"] == "ok"


def test_raw_db_replaced_under_the_index_rebuilds_it(indexed: Config, tmp_path: Path) -> None:
    data_dir = config_mod.resolve_data_dir(indexed)
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(data_dir / "raw.db") + suffix)
        if p.exists():
            os.unlink(p)
    one = tmp_path / "one"
    one.mkdir()
    (one / "53.eml").write_bytes((INDEX_DATA / "notmuch-53.eml").read_bytes())
    import_mail([one], account="work", config=indexed)
    report = indexer.update(indexed, keyword_only=True)
    assert report.rebuilt and report.indexed == 1
    with open_index(indexed) as idx:
        assert idx.counts()[0] == 1


def test_cli_reindex_json_and_status(mailbox: Config, capsys: pytest.CaptureFixture[str], cli_log: None) -> None:
    assert cli.main(["reindex", "--keyword-only", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["indexed"] == 14 and out["rebuilt"] is False
    assert cli.main(["reindex", "--rebuild", "--keyword-only"]) == 0
    assert "14 messages indexed" in capsys.readouterr().out
    assert cli.main(["status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["index"]["state"] == "ok" and status["index"]["messages"] == 14


def test_cli_reindex_without_mail_says_what_to_do(oaken_home: Path, capsys: pytest.CaptureFixture[str],
                                                  cli_log: None) -> None:
    assert cli.main(["reindex", "--keyword-only"]) == 1
    assert "oaken import" in capsys.readouterr().err


def test_index_of_another_schema_version_is_rebuilt(indexed: Config) -> None:
    import apsw

    data_dir = config_mod.resolve_data_dir(indexed)
    db = apsw.Connection(str(keyword.index_path(data_dir)))
    db.execute("UPDATE meta SET value = 1 WHERE key = 'schema'")  # as an older Oaken left it
    db.close()
    assert keyword.status(data_dir)["state"] == "stale"
    report = indexer.update(indexed, keyword_only=True)
    assert report.rebuilt and report.indexed == 14
    assert keyword.status(data_dir)["state"] == "ok"


def test_reindex_runs_the_vector_pass_after_the_keyword_pass(mailbox: Config) -> None:
    cfg = config_mod.from_dict({"embedder": {"model": "concept"}})
    report = indexer.reindex(cfg, keyword_only=False)
    assert report.indexed == 14
    assert report.vectors is not None and report.vectors["embedded"] > 0
    with open_index(cfg) as idx:
        assert report.vectors["chunks"] == len(idx.chunk_ids("embedded"))
    keyword_only = indexer.update(cfg, keyword_only=True)
    assert keyword_only.vectors is None


def test_index_of_another_chunker_version_is_rebuilt(indexed: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """An upgrade that changes the chunker re-chunks every message on the next pass (a pass that
    only followed the change feed would keep the old chunks, and vectors made of them)."""
    from oaken import chunking

    monkeypatch.setattr(chunking, "CHUNKER_VERSION", chunking.CHUNKER_VERSION + 1)
    report = indexer.update(indexed, keyword_only=True)
    assert report.rebuilt and report.indexed == 14
    with open_index(indexed) as idx:
        assert {v for _, v in idx._run("SELECT id, chunker_version FROM messages", [])} == {chunking.CHUNKER_VERSION}


def test_vectors_follow_a_rebuilt_index(indexed: Config) -> None:
    """A rebuilt index.db numbers its chunks again: vectors keyed by the old ids would stand for
    other text. Until the embedding pass follows, the vector side says its vectors are stale;
    after it, every row is the chunk of the same id in the new index.db."""
    import dataclasses

    from oaken.index.embedding import embed_pending
    from oaken.index.vectors import VectorFilters, VectorStore
    from oaken.search.vector_retriever import VectorRetriever

    cfg = dataclasses.replace(indexed, embedder=config_mod.EmbedderConfig(model="concept"))
    embed_pending(cfg)
    data_dir = config_mod.resolve_data_dir(cfg)
    warm = VectorRetriever(cfg)  # one retriever across the rebuild, as the daemon keeps one
    assert warm.retrieve("search mail", VectorFilters(), want=5).state == "ok"
    with open_index(cfg) as idx:
        before = idx.generation()
    keyword.drop(data_dir)
    indexer.update(cfg, keyword_only=True)
    with open_index(cfg) as idx:
        assert idx.generation() != before
    for retriever in (VectorRetriever(cfg), warm):
        stale = retriever.retrieve("search mail", VectorFilters(), want=5)
        assert stale.degraded_reason == "model_mismatch" and "rebuilt" in stale.warnings[0]
    report = embed_pending(cfg)
    assert report.rebuilt and report.pending == 0
    with open_index(cfg) as idx:
        chunks = {c: m for c, m in idx._run("SELECT id, message FROM chunks WHERE kind IN ('body', 'attachment')", [])}
        assert VectorStore(data_dir).chunk_messages() == chunks
        assert VectorStore(data_dir).generation() == idx.generation()
    assert VectorRetriever(cfg).retrieve("search mail", VectorFilters(), want=5).state == "ok"
    assert warm.retrieve("search mail", VectorFilters(), want=5).state == "ok"


def _in_use_pages(path: Path) -> tuple[int, dict[str, list[int]]]:
    """(page size, the pages of each table and index, from SQLite's dbstat)."""
    import apsw

    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        size = db.execute("PRAGMA page_size").fetchone()[0]
        pages: dict[str, list[int]] = {}
        for name, page in db.execute("SELECT name, pageno FROM dbstat ORDER BY pageno"):
            pages.setdefault(name, []).append(page)
        return size, pages
    finally:
        db.close()


@pytest.mark.parametrize("where", ["header", "schema", "messages", "chunks", "fts", "last"])
def test_damaged_index_db_is_reported_in_one_line_and_rebuilt_by_reindex(
        indexed: Config, where: str, capsys: pytest.CaptureFixture[str], cli_log: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Garbage written into index.db: `oaken status` says so in one line naming the file and the
    fix (not SQLite's `*** in database main ***` report), and a plain `oaken reindex` finds it
    (quick_check), says so and builds index.db again, where it used to report success and leave
    search finding nothing."""
    import random

    data_dir = config_mod.resolve_data_dir(indexed)
    path = keyword.index_path(data_dir)
    size, pages = _in_use_pages(path)
    page = {"messages": pages["messages"][-1], "chunks": pages["chunks"][len(pages["chunks"]) // 2],
            "fts": pages["fts_data"][-1], "last": max(p for ps in pages.values() for p in ps)}.get(where)
    offset = {"header": 0, "schema": 100}.get(where, ((page or 1) - 1) * size)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(random.Random(where).randbytes(512))
    assert keyword.status(data_dir)["state"] == "corrupt"

    assert cli.main(["status"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("keyword index:")]
    assert len(lines) == 1 and "***" not in lines[0], lines
    assert str(path) in lines[0] and "damaged" in lines[0] and "`oaken reindex --rebuild`" in lines[0]
    assert not any(ln.startswith(("Page ", "Tree ", "On tree", "row ")) for ln in capsys.readouterr().out.splitlines())

    # `oaken reindex` is a process of its own: it has not checked this file yet (this one built it)
    monkeypatch.setattr(indexer, "_SOUND", set(), raising=False)
    assert cli.main(["reindex", "--keyword-only"]) == 0
    out = capsys.readouterr().out
    assert "14 messages indexed" in out and "(rebuilt)" in out and "damaged" in out
    status = keyword.status(data_dir)
    assert (status["state"], status["messages"]) == ("ok", 14)
    with open_index(indexed) as idx:
        assert message_id_of(indexed, "notmuch-03.eml") in {h.message for h in idx.query(quote("mairix"),
                                                                                         KeywordFilters(), 10)}
    again = indexer.update(indexed, keyword_only=True)
    assert not again.rebuilt and again.indexed == 0


def _count_checks(monkeypatch: pytest.MonkeyPatch, *, status_too: bool = False) -> list[str]:
    """A list that grows by one with every quick_check the indexer (and, `status_too`, status) runs."""
    from oaken.index.keyword import whole as whole_mod
    from oaken.index.keyword import writer as writer_mod

    ran: list[str] = []
    real = writer_mod.damage

    def counted(db: object) -> str | None:
        ran.append("check")
        return real(db)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_mod, "damage", counted)
    if status_too:
        monkeypatch.setattr(whole_mod, "damage", counted)
    return ran


def test_damage_is_checked_once_per_process_and_file(indexed: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """quick_check reads every page (0.2 s on the Enron mailboxes' 26 MB index.db): the daemon's
    passes, one per batch of new mail, run it on the first pass only, and never on an index.db
    this process built."""
    checks = _count_checks(monkeypatch)
    monkeypatch.setattr(indexer, "_SOUND", set())
    for _ in range(3):
        indexer.update(indexed, keyword_only=True)
    assert len(checks) == 1
    indexer.reindex(indexed, rebuild=True, keyword_only=True)
    indexer.update(indexed, keyword_only=True)
    assert len(checks) == 1


def test_a_large_index_is_checked_once_a_day_not_by_every_process(
    indexed: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """quick_check reads every page and FTS5's whole index: at a million messages it would make
    each `oaken reindex` and `oaken status` cost half a minute. Over checks.ALWAYS_BYTES (lowered
    here, not in the product) a sound check is remembered for a day; a small index.db is still
    checked by every process, and status never runs the long check."""
    from oaken.index.keyword import checks as checks_mod

    data_dir = config_mod.resolve_data_dir(indexed)
    path = keyword.index_path(data_dir)
    ran = _count_checks(monkeypatch, status_too=True)

    def new_process() -> None:
        monkeypatch.setattr(indexer, "_SOUND", set())

    # small: every process checks, and status checks too
    for _ in range(2):
        new_process()
        indexer.update(indexed, keyword_only=True)
    keyword.status(data_dir)
    assert len(ran) == 3

    monkeypatch.setattr(checks_mod, "ALWAYS_BYTES", 1)
    ran.clear()
    new_process()
    indexer.update(indexed, keyword_only=True)  # checked just now (status above): not due
    status = keyword.status(data_dir)
    assert ran == [] and status["state"] == "ok" and status["checked"] != "never"

    checks_mod.mark_checked(path, when=time.time() - checks_mod.EVERY_SECONDS - 60)  # a day has passed
    for _ in range(3):
        new_process()
        indexer.update(indexed, keyword_only=True)
    assert ran == ["check"]  # due once, then remembered
    keyword.status(data_dir)
    assert ran == ["check"]


def _recount(path: Path) -> tuple[int, int, int]:
    import apsw

    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return tuple(db.execute(  # type: ignore[return-value]
            "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM chunks), "
            "(SELECT count(*) FROM chunks WHERE kind IN ('body', 'attachment'))").fetchone())
    finally:
        db.close()


def test_index_counters_follow_deletes_rebuilds_and_old_files(indexed: Config, tmp_path: Path) -> None:
    """status, the vectors' coverage and each keyword pass read counts the triggers keep in meta
    instead of counting 4M chunks at a million messages: they must stay equal to a recount."""
    data_dir = config_mod.resolve_data_dir(indexed)
    path = keyword.index_path(data_dir)

    def counters() -> tuple[int, int, int]:
        with keyword.KeywordIndex(data_dir) as idx:
            return (*idx.counts(), idx.body_chunk_count())

    assert counters() == _recount(path) and counters()[0] == 14
    with open_store(data_dir) as store, store.transaction():
        store.delete_messages([message_id_of(indexed, "notmuch-03.eml"), message_id_of(indexed, "enron-lay-business-2.eml")])
    indexer.update(indexed, keyword_only=True)
    assert counters() == _recount(path) and counters()[0] == 12
    import_mail([INDEX_DATA], account="work", config=indexed)  # the deleted two come back as new messages
    indexer.update(indexed, keyword_only=True)
    assert counters() == _recount(path) and counters()[0] == 14
    indexer.reindex(indexed, rebuild=True, keyword_only=True)
    assert counters() == _recount(path)

    # an index.db made before the counters: a reader counts, the next writer adds them
    import apsw

    db = apsw.Connection(str(path))
    db.execute("DROP TRIGGER count_message_insert; DROP TRIGGER count_message_delete; DROP TRIGGER count_chunk_insert; "
               "DROP TRIGGER count_chunk_delete; DROP TRIGGER count_chunk_kind; "
               "DELETE FROM meta WHERE key IN ('messages', 'chunks', 'body_chunks')")
    db.close()
    assert counters() == _recount(path)
    indexer.update(indexed, keyword_only=True)
    with keyword.KeywordIndex(data_dir) as idx:
        assert idx._run("SELECT count(*) FROM meta WHERE key IN ('messages', 'chunks', 'body_chunks')", []) == [(3,)]
    assert counters() == _recount(path)


def _segments(path: Path) -> int:
    import apsw

    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return int(db.execute("SELECT count(DISTINCT segid) FROM fts_idx").fetchone()[0])
    finally:
        db.close()


def test_a_bulk_load_leaves_one_full_text_segment(mailbox: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch commits an FTS5 segment, and a search looks each term up in every segment: a
    build (and a pass that at least doubles index.db) merges them into one; a few new messages
    do not rewrite the index."""
    cfg = dataclasses.replace(mailbox, index=dataclasses.replace(mailbox.index, batch_size=2))
    monkeypatch.setattr(indexer, "BULK_MESSAGES", 4)
    path = keyword.index_path(config_mod.resolve_data_dir(cfg))
    indexer.update(cfg, keyword_only=True)  # a build, in batches of two messages
    assert _segments(path) == 1
    with open_index(cfg) as idx:
        assert idx.query(quote("mairix"), KeywordFilters(), 10)

    data_dir = config_mod.resolve_data_dir(cfg)
    with open_store(data_dir) as store, store.transaction():
        store.delete_messages(store.all_message_ids()[:12])
    indexer.update(cfg, keyword_only=True)
    import_mail([INDEX_DATA], account="work", config=cfg)  # 12 come back: doubles what index.db holds
    monkeypatch.setattr(keyword.KeywordWriter, "merge_segments", lambda self: merged.append(1))
    merged: list[int] = []
    indexer.update(cfg, keyword_only=True)
    assert merged == [1]
    with open_store(data_dir) as store, store.transaction():
        store.delete_messages(store.all_message_ids()[-1:])
    import_mail([INDEX_DATA], account="work", config=cfg)  # one message: no merge
    indexer.update(cfg, keyword_only=True)
    assert merged == [1]


def test_a_no_change_pass_a_triage_and_status_read_no_table_whole(indexed: Config,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost of a pass follows the change, not the mailbox: SQLite counts the rows each
    statement stepped through in a full scan, and none may do one (the schema's own table aside).
    Found by this test: the chunker check of every pass scanned every message (~200 ms at a
    million), and three lookups by id scanned where SQLite's statistics said the table was small."""
    import apsw

    from oaken import api

    cfg = dataclasses.replace(indexed, embedder=config_mod.EmbedderConfig(model="concept"))
    indexer.update(cfg)  # the vectors, so the vector pass runs below too
    ran: list[tuple[str, int]] = []

    def count_scans(con: apsw.Connection) -> None:
        def profile(event: dict) -> None:
            ran.append((event["sql"], (event.get("stmt_status") or {}).get("SQLITE_STMTSTATUS_FULLSCAN_STEP", 0)))

        con.trace_v2(apsw.SQLITE_TRACE_PROFILE, profile)

    monkeypatch.setattr(apsw, "connection_hooks", [*apsw.connection_hooks, count_scans])
    assert indexer.update(cfg) is not None
    api.set_triage(message_id_of(cfg, "notmuch-03.eml"), category="finance", priority=2, config=cfg)
    indexer.update(cfg)
    api.status(config=cfg)
    assert any("chunker_version" in sql for sql, _ in ran)  # the hook saw the passes' statements
    assert [(sql, steps) for sql, steps in ran if steps and "sqlite_master" not in sql] == []
