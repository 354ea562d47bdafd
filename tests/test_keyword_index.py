"""index.db on real mail: FTS5 ranking with the quoted column low, filters, snippets, the query
primitives the search layer uses, and a missing, corrupt or locked index reported as such."""

from __future__ import annotations

import os
import threading

import apsw
import pytest

from oaken import config as config_mod
from oaken.config import Config
from oaken.errors import IndexUnavailable, QueryError
from oaken.index import keyword
from oaken.index.keyword import KeywordFilters, quote
from oaken.store import open_store
from tests.index_fixtures import message_id_of, open_index


def ids(hits: list) -> list[int]:
    return list(dict.fromkeys(h.message for h in hits))


def test_fact_ranks_first_where_it_was_written(indexed: Config) -> None:
    original = message_id_of(indexed, "notmuch-03.eml")
    reply = message_id_of(indexed, "notmuch-41.eml")
    with open_index(indexed) as idx:
        hits = idx.query(quote("mairix"), KeywordFilters(), 10)
    assert ids(hits)[:2] == [original, reply]
    by_message = {h.message: h for h in hits}
    assert "body" in by_message[original].columns
    assert by_message[reply].columns == ("quoted",)
    assert keyword.SNIPPET_OPEN + "mairix" + keyword.SNIPPET_CLOSE in by_message[original].snippet


def test_forward_whose_original_is_absent_is_still_found(indexed: Config) -> None:
    fwd = message_id_of(indexed, "enron-lay-sent-4.eml")
    with open_index(indexed) as idx:
        hits = idx.query(f"{quote('eagle')} {quote('transaction')}", KeywordFilters(), 5)
    assert ids(hits) == [fwd]
    assert "quoted" in hits[0].columns and "body" not in hits[0].columns


def test_attachment_names_and_contents_are_indexed_as_attachments(indexed: Config) -> None:
    msg = message_id_of(indexed, "mailparser-test-3.eml")
    with open_index(indexed) as idx:
        inside = idx.query(quote("firebox"), KeywordFilters(), 10)  # a word only inside message.txt
        assert ids(inside) == [msg] and inside[0].columns == ("attachments",)
        assert inside[0].snippet.startswith("[message.txt]")  # the hit names its file
        by_name = idx.query(quote("message.txt"), KeywordFilters(), 10)
        assert msg in ids(by_name) and all(h.columns == ("attachments",) for h in by_name)
        assert ids(idx.newest(KeywordFilters(filename_terms=("message.txt",)), 10)) == [msg]
        assert msg in ids(idx.newest(KeywordFilters(filename_terms=("text/plain",)), 10))
        patches = {message_id_of(indexed, "notmuch-05.eml"), message_id_of(indexed, "notmuch-23.eml")}
        assert set(ids(idx.newest(KeywordFilters(filename_terms=("patch",), has_attachment=True), 10))) == patches
        assert ids(idx.newest(KeywordFilters(filename_terms=("patch", "x-diff")), 10)) == [
            message_id_of(indexed, "notmuch-05.eml")]


def test_diacritics_stemming_and_tokens_that_look_like_syntax(indexed: Config) -> None:
    french = message_id_of(indexed, "notmuch-53.eml")
    with open_index(indexed) as idx:
        assert french in ids(idx.query(quote("accentue"), KeywordFilters(), 10))  # subject "Essai accentué"
        flowers = message_id_of(indexed, "enron-lay-inbox-461.eml")
        assert flowers in ids(idx.query(quote("flower"), KeywordFilters(), 10))  # porter: flowers -> flower
        idx.query(quote("INV-1005") + " OR " + quote("sender:x") + " OR " + quote('a"b'), KeywordFilters(), 5)
        with pytest.raises(QueryError):
            idx.query('"unterminated', KeywordFilters(), 5)
        with pytest.raises(QueryError):
            idx.query("", KeywordFilters(), 5)


def test_phrases_matched_per_chunk_for_graded_matching(indexed: Config) -> None:
    match = " OR ".join(quote(w) for w in ("mairix", "maildir", "zzznotaword"))
    with open_index(indexed) as idx:
        hits = idx.query(match, KeywordFilters(), 20)
        assert hits and all(set(h.phrases) <= {0, 1} for h in hits)
        assert any(h.phrases == (0, 1) for h in hits)  # a chunk holding both words says so
        original = message_id_of(indexed, "notmuch-03.eml")
        present = idx.tokens_present([original, message_id_of(indexed, "enron-lay-sent-4.eml")],
                                     ["mairix", "maildir", "eagle", "zzznotaword"])
        assert present[original] == frozenset({"mairix", "maildir"})
        assert present[message_id_of(indexed, "enron-lay-sent-4.eml")] == frozenset({"eagle"})
        # a subject filter adds phrases of its own to the MATCH: the numbers stay those of `match`
        with_subject = idx.query(match, KeywordFilters(subject_terms=("working", "storage")), 20)
        assert original in {h.message for h in with_subject}
        assert any(h.phrases == (0, 1) for h in with_subject)
        assert all(set(h.phrases) <= {0, 1} for h in with_subject)


def test_filters(indexed: Config) -> None:
    flowers = message_id_of(indexed, "enron-lay-inbox-461.eml")
    patch = message_id_of(indexed, "notmuch-05.eml")
    everything = KeywordFilters()
    with open_index(indexed) as idx:
        all_ids = ids(idx.newest(everything, 100))
        assert len(all_ids) == 14
        assert ids(idx.newest(KeywordFilters(senders=("JESSICA@lplpi",)), 10)) == [flowers]
        assert ids(idx.newest(KeywordFilters(senders=("nobody-here", "jessica")), 10)) == [flowers]
        assert flowers in ids(idx.newest(KeywordFilters(subject_terms=("flowers",)), 10))
        assert ids(idx.newest(KeywordFilters(subject_terms=("flowers", "zzz")), 10)) == []
        assert ids(idx.newest(KeywordFilters(account="work"), 100)) == all_ids
        assert idx.newest(KeywordFilters(account="other"), 100) == []
        assert ids(idx.newest(KeywordFilters(labels=("INBOX",)), 100)) == all_ids
        assert ids(idx.newest(KeywordFilters(folders=("inbox", "Nope")), 100)) == all_ids
        assert ids(idx.newest(KeywordFilters(include_ids=frozenset({patch, flowers})), 10)) == sorted(
            [patch, flowers], key=all_ids.index)
        assert patch not in ids(idx.newest(KeywordFilters(exclude_ids=frozenset({patch})), 100))
        assert ids(idx.newest(KeywordFilters(dispositions=("discarded",)), 10)) == []
        assert ids(idx.newest(KeywordFilters(has_attachment=False), 100)) == [
            m for m in all_ids if m not in ids(idx.newest(KeywordFilters(has_attachment=True), 100))]
        dates = idx.message_dates(all_ids)
        assert [dates[m] for m in all_ids] == sorted(dates.values(), reverse=True)  # newest first
        cut = sorted(dates.values())[6]
        assert all(dates[m] >= cut for m in ids(idx.newest(KeywordFilters(after=cut), 100)))
        assert all(dates[m] < cut for m in ids(idx.newest(KeywordFilters(before=cut), 100)))
        assert ids(idx.newest(everything, 3, offset=3)) == all_ids[3:6]
        with open_store(config_mod.resolve_data_dir(indexed)) as store:
            thread = store.meta(flowers).thread
        assert ids(idx.newest(KeywordFilters(thread=thread), 10)) == [flowers]
        assert ids(idx.query(quote("flowers"), KeywordFilters(to=("jessica",)), 10)) == []
        assert ids(idx.query(quote("notmuch"), KeywordFilters(to=("notmuch@notmuchmail.org",)), 50))


def test_chunks_for_the_vector_side(indexed: Config) -> None:
    with open_index(indexed) as idx:
        reply = message_id_of(indexed, "notmuch-41.eml")
        own = idx.chunks_of([reply])
        assert own and all(c.kind == "body" and c.message == reply for c in own)
        assert len(idx.chunks_of([reply], kind=None)) > len(own)
        walked, after = [], 0
        while batch := idx.body_chunks(after, 7):
            walked.extend(batch)
            after = batch[-1].id
        assert {c.id for c in walked} == idx.chunk_ids("embedded")
        messages, chunks = idx.counts()
        assert messages == 14 and chunks >= len(walked)


def test_missing_index_is_unavailable(oaken_home: Config) -> None:
    data_dir = config_mod.resolve_data_dir(Config())
    with pytest.raises(IndexUnavailable) as e:
        keyword.KeywordIndex(data_dir)
    assert e.value.code == "keyword_index_unavailable" and e.value.state == "missing"
    assert "oaken reindex" in str(e.value)
    assert keyword.status(data_dir)["state"] == "missing"


def test_corrupt_index_is_unavailable_and_status_says_so(indexed: Config) -> None:
    data_dir = config_mod.resolve_data_dir(indexed)
    path = keyword.index_path(data_dir)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(str(path) + suffix):
            os.unlink(str(path) + suffix)
    size = path.stat().st_size
    with open(path, "r+b") as f:  # keep the header, scribble over the pages
        f.seek(4096)
        f.write(os.urandom(size - 4096))
    assert keyword.status(data_dir)["state"] == "corrupt"
    with pytest.raises(IndexUnavailable) as e:
        with keyword.KeywordIndex(data_dir) as idx:
            idx.query(quote("mairix"), KeywordFilters(), 5)
            idx.newest(KeywordFilters(), 5)
    assert e.value.code == "keyword_index_unavailable"
    assert "--rebuild" in str(e.value)
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(IndexUnavailable):
        keyword.KeywordIndex(data_dir)
    assert keyword.status(data_dir)["state"] == "corrupt"


def test_locked_index_is_unavailable(indexed: Config) -> None:
    data_dir = config_mod.resolve_data_dir(indexed)
    holder = apsw.Connection(str(keyword.index_path(data_dir)))
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE meta SET value = value WHERE key = 'seq'")
    try:
        with pytest.raises(IndexUnavailable) as e:
            idx = keyword.KeywordIndex(data_dir, busy_ms=50)
            idx.newest(KeywordFilters(), 5)
        assert e.value.state == "locked" and e.value.code == "keyword_index_unavailable"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with keyword.KeywordIndex(data_dir) as idx:
        assert idx.newest(KeywordFilters(), 1)


def test_readers_are_not_blocked_by_a_writer(indexed: Config) -> None:
    """WAL: a search during a long indexing transaction sees the last committed state."""
    data_dir = config_mod.resolve_data_dir(indexed)
    writer = keyword.KeywordWriter(data_dir)
    seen: list[int] = []
    with writer.transaction():
        writer.delete([message_id_of(indexed, "notmuch-03.eml")])

        def read() -> None:
            with keyword.KeywordIndex(data_dir, busy_ms=50) as idx:
                seen.append(len(idx.newest(KeywordFilters(), 100)))

        t = threading.Thread(target=read)
        t.start()
        t.join()
    writer.close()
    assert seen == [14]
    with keyword.KeywordIndex(data_dir) as idx:
        assert len(idx.newest(KeywordFilters(), 100)) == 13
