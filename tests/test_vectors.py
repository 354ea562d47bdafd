"""vectors/: the LanceDB store, on real LanceDB in a temp dir, with small hand-made vectors."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from oaken import chunking
from oaken import config as config_mod
from oaken.daemon.index_worker import IndexWorker
from oaken.errors import VectorUnavailable
from oaken.index import coverage, embedding, indexer, vector_ann, vector_fragments, vectors
from oaken.index.embedders import load_embedder
from oaken.index.keyword import KeywordIndex
from oaken.index.vector_rows import arrow_table
from oaken.index.vectors import (ChunkVector, Fingerprint, MessageFields, VectorFilters, VectorStore, drop,
                                 open_for_search, read_state, where_sql)
from oaken.store import open_store
from tests.index_fixtures import message_id_of

FP = Fingerprint("toy:8", 8, "1")


def unit(*xs: float) -> np.ndarray:
    v = np.zeros(8, dtype=np.float32)
    v[: len(xs)] = xs
    return v / np.linalg.norm(v)


def fields(m: int, *, account: str = "work", date: int = 0, sender: str = "Alex Doe <alex@example.com>",
           labels: tuple[str, ...] = ("INBOX",), folders: tuple[str, ...] = ("INBOX",),
           disposition: str = "inbox", thread: int | None = None, to: str = "sam@example.com") -> MessageFields:
    return MessageFields(m, account, date or 1_700_000_000 + m * 86400, sender, to, "", labels, folders,
                         disposition, thread if thread is not None else m)


def new_store(tmp_path: Path, **kw) -> VectorStore:
    store = VectorStore(tmp_path, create=True, **kw)
    store.ensure(FP)
    return store


def ids(hits) -> list[int]:
    return [h.message for h in hits]


def test_upsert_search_replace_and_delete_by_message(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.upsert({1: fields(1), 2: fields(2)},
                 [ChunkVector(10, 1, unit(1)), ChunkVector(11, 1, unit(1, 1)), ChunkVector(20, 2, unit(0, 1))])
    hits = store.search(unit(1), limit=10)
    assert [(h.chunk_id, h.message) for h in hits] == [(10, 1), (11, 1), (20, 2)]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[1].score == pytest.approx(0.7071, abs=1e-3)
    # re-chunked message 1: its old chunks go, the new one stays, message 2 is untouched
    store.upsert({1: fields(1)}, [ChunkVector(12, 1, unit(0, 0, 1))])
    assert store.chunk_messages() == {12: 1, 20: 2}
    assert store.delete_messages([2]) == 1
    assert store.chunk_messages() == {12: 1}
    assert store.delete_chunks([12]) == 1
    assert store.count() == 0


@pytest.mark.parametrize("flt, expected", [
    (VectorFilters(account="home"), [3]),
    (VectorFilters(senders=("ALEX@",)), [1, 2]),
    (VectorFilters(senders=("nobody", "kim")), [3]),
    (VectorFilters(to=("sam@",)), [1, 2, 3]),
    (VectorFilters(after=1_700_000_000 + 2 * 86400), [2, 3]),
    (VectorFilters(before=1_700_000_000 + 2 * 86400), [1]),
    (VectorFilters(labels=("lists",)), [2, 3]),
    (VectorFilters(labels=("Lists", "Work")), [3]),
    (VectorFilters(folders=("archive", "nowhere")), [2]),
    (VectorFilters(dispositions=("archived", "discarded")), [2, 3]),
    (VectorFilters(thread=7), [1, 3]),
    (VectorFilters(include_ids=frozenset({1, 3})), [1, 3]),
    (VectorFilters(include_ids=frozenset()), []),
    (VectorFilters(exclude_ids=frozenset({1})), [2, 3]),
])
def test_prefilters(tmp_path: Path, flt: VectorFilters, expected: list[int]) -> None:
    store = new_store(tmp_path)
    store.upsert({1: fields(1, thread=7), 2: fields(2, labels=("INBOX", "Lists"), folders=("Archive",),
                                                    disposition="archived"),
                  3: fields(3, account="home", sender="Kim <kim@example.org>", labels=("Lists", "work"),
                            disposition="discarded", thread=7)},
                 [ChunkVector(1, 1, unit(1)), ChunkVector(2, 2, unit(1, 0.5)), ChunkVector(3, 3, unit(1, 1))])
    assert ids(store.search(unit(1), flt, limit=10)) == expected


def test_values_cannot_escape_their_quotes(tmp_path: Path) -> None:
    sneaky = VectorFilters(labels=("x') OR true --",), senders=("o'brien",))
    assert where_sql(sneaky) == "(contains(sender, 'o''brien')) AND array_has(labels, 'x'') or true --')"
    store = new_store(tmp_path)
    store.upsert({1: fields(1), 2: fields(2, sender="O'Brien <ob@example.com>", labels=("x') OR true --",))},
                 [ChunkVector(1, 1, unit(1)), ChunkVector(2, 2, unit(1))])
    assert ids(store.search(unit(1), sneaky)) == [2]
    assert ids(store.search(unit(1), VectorFilters(labels=("x') OR true --", "other")))) == []


def test_update_fields_changes_filters_and_keeps_vectors(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.upsert({1: fields(1), 2: fields(2)}, [ChunkVector(1, 1, unit(1)), ChunkVector(2, 1, unit(0, 1)),
                                                ChunkVector(3, 2, unit(1, 1))])
    assert ids(store.search(unit(1), VectorFilters(labels=("receipts",)))) == []
    store.update_fields([fields(1, labels=("Receipts",), folders=("Archive",), disposition="archived")])
    found = store.search(unit(1), VectorFilters(labels=("receipts",), folders=("archive",),
                                                dispositions=("archived",)))
    assert [(h.chunk_id, round(h.score, 4)) for h in found] == [(1, 1.0), (2, 0.0)]
    assert ids(store.search(unit(1), VectorFilters(dispositions=("inbox",)))) == [2]


def test_a_field_update_leaves_every_index_covering_the_rows_it_did_not_touch(tmp_path: Path) -> None:
    """A triage rewrote the changed columns in place, and each scalar index on them dropped every
    fragment it touched: at a million messages 2.3M rows fell outside chunk_id's b-tree and the
    prefilter's, and the next triage took a second. Whole rows keep the indexes whole."""
    store = new_store(tmp_path)
    rng = np.random.default_rng(5)
    msgs = {m: fields(m) for m in range(1, 301)}
    store.upsert(msgs, [ChunkVector(m, m, rng.normal(size=8).astype(np.float32)) for m in msgs])
    store.maintain(index=False)
    names = [str(i.name) for i in store.table().describe_indices()]
    assert {"chunk_id_idx", "disposition_idx", "labels_idx"} <= set(names)
    store.update_fields([fields(7, labels=("Receipts",), disposition="archived")])
    for name in names:
        stats = store.table().stats.index_stats(name)
        assert stats["num_unindexed_rows"] <= 1, (name, stats)
    assert store.count() == 300
    assert ids(store.search(unit(1), VectorFilters(labels=("receipts",), dispositions=("archived",)))) == [7]
    assert store.rows_of([7], ("chunk_id", "message", "disposition")) == [
        {"chunk_id": 7, "message": 7, "disposition": "archived"}]


def test_prefilters_through_the_scalar_indexes_keep_exactly_the_rows_they_name(tmp_path: Path) -> None:
    """maintain() indexes the prefilter's columns (bitmaps, b-trees, label lists: a 500-candidate
    search at 100,000 messages took 43 ms with the account and disposition filter, 24 ms with
    them): every filter still keeps exactly the rows a plain reading of the fields keeps, also for
    rows whose fields were rewritten after the indexes were built."""
    rng = np.random.default_rng(3)
    store = new_store(tmp_path)
    n = 600
    msgs = {}
    for m in range(1, n + 1):
        msgs[m] = fields(m, account=("work", "home")[m % 2], date=1_600_000_000 + m * 3600,
                         labels=(("INBOX",), ("Receipts",), ("INBOX", "Travel"))[m % 3],
                         folders=(("INBOX",), ("Archive",), ("Sent",), ("INBOX", "Archive"))[m % 4],
                         disposition=("inbox", "archived", "spam")[m % 5 % 3], thread=m % 7)
    vecs = rng.normal(size=(n, 8)).astype(np.float32)
    store.upsert(msgs, [ChunkVector(m, m, vecs[m - 1]) for m in msgs])
    store.maintain(index=False)
    indexed = {c for i in store.table().describe_indices() for c in i.field_names}
    assert {"account", "disposition", "date", "thread", "labels", "folders"} <= indexed
    changed = [dataclasses.replace(msgs[m], labels=("Receipts",), disposition="archived") for m in range(1, 40)]
    store.update_fields(changed)  # after the indexes: these rows are read outside them until the next upkeep
    for f in changed:
        msgs[f.message] = f

    def kept(flt: VectorFilters) -> list[int]:
        return sorted(m for m, f in msgs.items()
                      if (flt.account is None or f.account == flt.account)
                      and (not flt.dispositions or f.disposition in flt.dispositions)
                      and (flt.after is None or f.date >= flt.after) and (flt.before is None or f.date < flt.before)
                      and all(x.lower() in [y.lower() for y in f.labels] for x in flt.labels)
                      and (not flt.folders or any(x.lower() in [y.lower() for y in f.folders] for x in flt.folders))
                      and (flt.thread is None or f.thread == flt.thread))

    for flt in (VectorFilters(account="work", dispositions=("inbox", "archived")),
                VectorFilters(account="home", after=1_600_000_000 + 100 * 3600, before=1_600_000_000 + 300 * 3600),
                VectorFilters(labels=("receipts",), dispositions=("archived",)),
                VectorFilters(folders=("archive", "sent")),
                VectorFilters(thread=3, account="work")):
        assert sorted(ids(store.search(vecs[0], flt, limit=n))) == kept(flt), flt


def test_missing_store_stale_fingerprint_and_empty_store_have_their_codes(tmp_path: Path) -> None:
    with pytest.raises(VectorUnavailable) as e:
        open_for_search(tmp_path, FP)
    assert e.value.code == "no_vector_store"
    store = new_store(tmp_path)
    with pytest.raises(VectorUnavailable) as e:
        open_for_search(tmp_path, FP)
    assert e.value.code == "no_vectors"
    store.upsert({1: fields(1)}, [ChunkVector(1, 1, unit(1))])
    assert open_for_search(tmp_path, FP).count() == 1
    for other in (Fingerprint("toy:8", 8, "2"), Fingerprint("other:8", 8, "1"), Fingerprint("toy:8", 16, "1")):
        with pytest.raises(VectorUnavailable) as e:
            open_for_search(tmp_path, other)
        assert e.value.code == "model_mismatch"
        assert "oaken reindex" in str(e.value)


def test_ensure_drops_a_stale_table_and_drop_removes_the_folder(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.upsert({1: fields(1)}, [ChunkVector(1, 1, unit(1))])
    assert store.ensure(FP) is False and store.count() == 1
    wider = Fingerprint("toy:16", 16, "1")
    assert store.ensure(wider) is True
    assert store.count() == 0 and store.fingerprint() == wider
    assert read_state(tmp_path)["fingerprint"]["dim"] == 16
    # a table of an older Oaken layout (other columns) is stale too, even with the same fingerprint;
    # made by LanceDB, as Oaken 0.1 wrote vectors/: the same Lance table
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(str(tmp_path / "vectors"))
    db.drop_table("chunks")
    db.create_table("chunks", schema=pa.schema([("chunk_id", pa.int64()), ("vector", pa.list_(pa.float32(), 16))],
                                               metadata={b"oaken.fingerprint": wider.key().encode()}))
    assert store.fingerprint() == wider and store.table().schema.names == ["chunk_id", "vector"]
    assert store.ensure(wider) is True and "labels" in store.table().schema.names
    drop(tmp_path)
    assert not (tmp_path / "vectors").exists()
    with pytest.raises(VectorUnavailable) as e:
        VectorStore(tmp_path)
    assert e.value.code == "no_vector_store"


def test_ann_index_is_built_above_the_threshold_and_still_finds_the_nearest(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    n, dim = 600, 16
    fp = Fingerprint("toy:16", dim, "1")
    store = VectorStore(tmp_path, create=True, ann_min_rows=500)
    store.ensure(fp)
    data = rng.standard_normal((n, dim)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    half = n // 2
    store.upsert({m: fields(m) for m in range(half)}, [ChunkVector(m, m, data[m]) for m in range(half)])
    assert store.maintain()["indexed"] is False  # below the threshold: brute force
    store.upsert({m: fields(m) for m in range(half, n)}, [ChunkVector(m, m, data[m]) for m in range(half, n)])
    assert store.maintain()["indexed"] is True
    assert store.has_index()
    hits = store.search(data[123], limit=10)
    assert hits[0].chunk_id == 123 and hits[0].score == pytest.approx(1.0, abs=0.02)
    # a selective filter is searched exactly, past the index
    assert ids(store.search(data[5], VectorFilters(include_ids=frozenset({5, 6})), limit=10))[0] == 5


def test_a_field_change_deletes_no_row_and_the_upkeep_purges_where_cheap(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A deleted row anywhere makes every ANN search build a bitset over each partition's rows
    (145 against 29-36 ms at a million messages). A triage's new rows are appended and the old
    ones superseded, deleted by nothing; the upkeep deletes them for real in small fragments it
    then rewrites, keeps those of big ones hidden (row addresses intact through the compaction),
    and past SUPERSEDED_MAX_SHARE deletes those too and rewrites the big fragments."""
    from oaken.index import vector_upkeep

    monkeypatch.setattr(vector_fragments, "MATERIALIZE_MAX_ROWS", 100)  # the 600-row base counts as big
    rng = np.random.default_rng(5)
    dim, base, recent = 16, 600, 40
    fp = Fingerprint("toy:16", dim, "1")
    store = VectorStore(tmp_path, create=True, ann_min_rows=500, retention_seconds=0.0, maintain_every=10**6)
    store.ensure(fp)
    data = rng.standard_normal((base + recent, dim)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    store.upsert({m: fields(m) for m in range(base)}, [ChunkVector(m, m, data[m]) for m in range(base)])
    store.maintain()  # the ANN index over the base's fragment
    ms = range(base, base + recent)
    store.upsert({m: fields(m) for m in ms}, [ChunkVector(m, m, data[m]) for m in ms])
    store.maintain()  # a delta over the recent fragment

    def deleted_in() -> list[int]:  # rows of each fragment that holds deleted rows
        return sorted(f.metadata.physical_rows for f in store.table().get_fragments() if f.metadata.deletion_file)

    def base_segment() -> str:  # Lance remaps (rewrites) a segment covering a rewritten fragment
        index = next(i for i in store.table().describe_indices() if "vector" in i.field_names)
        return str(max(index.segments, key=lambda seg: len(seg.fragment_ids)).uuid)

    def hidden() -> int:
        return int(store.superseded.hidden(store.table().version).size)

    def right(changes: dict[int, str]) -> None:
        assert store.count() == base + recent
        for m, label in changes.items():
            hits = store.search(data[m], VectorFilters(labels=(label,)), limit=3)
            assert [h.chunk_id for h in hits] == [m] and hits[0].score == pytest.approx(1.0, abs=1e-5)
            assert store.search(data[m], limit=2)[1].chunk_id != m  # its old row is not found
            assert store.rows_of([m]) == [{"chunk_id": m, "message": m}]
            assert store.fields_between(m, m)[m].labels == (label,)
        assert len(store.search(data[0], limit=base + recent + 10)) == base + recent  # no row lost or doubled
        assert sorted(store.chunk_messages()) == list(range(base + recent))

    built = base_segment()
    changes = {3: "old", base + 5: "new"}
    store.update_fields([fields(m, labels=(label,)) for m, label in changes.items()])
    assert deleted_in() == [] and hidden() == 2
    right(changes)
    store.maintain()
    assert deleted_in() == [] and base_segment() == built  # the recent fragment rewritten alone
    assert hidden() == 1  # the base's row: hidden still
    right(changes)
    changes[base + 6] = "newer"
    store.update_fields([fields(base + 6, labels=("newer",))])
    store.maintain()
    assert hidden() == 1 and deleted_in() == []
    right(changes)
    monkeypatch.setattr(vector_upkeep, "SUPERSEDED_MAX_SHARE", 0.0)
    store.maintain()
    assert hidden() == 0 and deleted_in() == []  # deleted, and the base rewritten without it
    right(changes)


def test_a_deletion_hides_rows_and_an_append_that_died_is_settled(tmp_path: Path) -> None:
    """Deleting rows writes no Lance version; an append recorded as pending is dated when it
    committed and dropped when it did not (a writer killed in between)."""
    data = np.random.default_rng(2).standard_normal((30, 8)).astype(np.float32)
    store = VectorStore(tmp_path, create=True, maintain_every=10**6)
    store.ensure(Fingerprint("toy:8", 8, "1"))
    store.upsert({m: fields(m) for m in range(30)}, [ChunkVector(m, m, data[m]) for m in range(30)])
    version = store.table().version
    store.update_fields([fields(9), fields(10)])  # as stored (a read-state change): nothing written
    assert store.table().version == version and not store.superseded.file.exists()
    assert store.delete_messages([4, 5]) == 2 and store.delete_chunks([6]) == 1
    assert store.table().version == version and store.count() == 27
    assert {h.message for h in store.search(data[4], limit=30)} == set(range(30)) - {4, 5, 6}
    assert store.delete_messages([4]) == 0  # hidden already
    # an append that never committed: its entry goes, the old rows stay seen
    old = store.live(["message"], "message = 7").column("_rowid").to_numpy()
    store.superseded.hide_after(old.tolist(), store.table().version)
    assert store.count() == 27  # a pending entry hides nothing
    store.settle()
    assert store.superseded.pending().size == 0 and store.count() == 27
    # one that committed: dated with the version it made
    store.superseded.hide_after(old.tolist(), store.table().version)
    store.table().insert(arrow_table(store.fingerprint(), {7: fields(7, labels=("x",))}, [ChunkVector(7, 7, data[7])]))
    store.settle()
    assert store.count() == 27 and store.fields_between(7, 7)[7].labels == ("x",)
    assert [r["chunk_id"] for r in store.rows_of([7])] == [7]
    # found by review: a writer died with an entry pending and no append made; the next write,
    # whatever it is, settles first, so its own commit does not date the entry
    old = store.live(["message"], "message = 8").column("_rowid").to_numpy()
    store.superseded.hide_after(old.tolist(), store.table().version)
    store.insert({30: fields(30)}, [ChunkVector(30, 30, data[0])])
    assert store.count() == 28 and [r["chunk_id"] for r in store.rows_of([8])] == [8]
    # found by review: the append committed, the writer died before dating it; the next change of
    # the same message reads its rows only after settling, so no chunk is stored twice
    old = store.live(["message"], "message = 9").column("_rowid").to_numpy()
    store.superseded.hide_after(old.tolist(), store.table().version)
    store.table().insert(arrow_table(store.fingerprint(), {9: fields(9, labels=("y",))}, [ChunkVector(9, 9, data[9])]))
    store.update_fields([fields(9, labels=("z",))])
    assert store.rows_of([9], ("chunk_id", "labels")) == [{"chunk_id": 9, "labels": ["z"]}] and store.count() == 28
    # a rebuilt table starts with none
    store.ensure(Fingerprint("toy:8", 8, "1"), rebuild=True)
    assert not store.superseded.file.exists()


def test_a_fragment_holding_superseded_rows_is_never_compacted(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: without an ANN index (or under one segment) Lance's compaction merges
    fragments freely, and a merged fragment's rows get new addresses: a superseded row would come
    back and its entry would hide nothing (or another row)."""

    monkeypatch.setattr(vector_fragments, "MATERIALIZE_MAX_ROWS", 100)  # the 600-row fragment is big
    data = np.random.default_rng(3).standard_normal((640, 8)).astype(np.float32)
    store = VectorStore(tmp_path, create=True, maintain_every=10**6, ann_min_rows=10**9)
    store.ensure(FP)
    for ms in (range(600), range(600, 640)):
        store.upsert({m: fields(m) for m in ms}, [ChunkVector(m, m, data[m]) for m in ms])
    store.update_fields([fields(3, labels=("x",))])
    store.maintain()
    assert store.count() == 640
    assert store.rows_of([3], ("chunk_id", "labels")) == [{"chunk_id": 3, "labels": ["x"]}]
    assert [h.chunk_id for h in store.search(data[3], limit=2)][0] == 3
    assert [h.chunk_id for h in store.search(data[3], limit=2)][1] != 3


def test_a_reader_of_an_older_version_keeps_rows_the_upkeep_deleted_hidden(tmp_path: Path) -> None:
    """Found by review: the upkeep deletes superseded rows of small fragments for real; a search
    that opened the version before still reads them, so their entries stay until no such version
    is left on disk."""
    import lance

    data = np.random.default_rng(4).standard_normal((40, 8)).astype(np.float32)
    store = VectorStore(tmp_path, create=True, maintain_every=10**6, retention_seconds=3600.0)
    store.ensure(FP)
    store.upsert({m: fields(m) for m in range(40)}, [ChunkVector(m, m, data[m]) for m in range(40)])
    store.update_fields([fields(5, labels=("x",))])
    assert store.delete_messages([6]) == 1
    before = store.table().version
    pinned = store.superseded.hidden(before)
    assert pinned.size == 2
    store.maintain()  # deleted for real and the small fragment rewritten; older versions kept an hour
    assert store.count() == 39 and store.superseded.hidden(store.table().version).size == 0
    assert before in [int(v["version"]) for v in store.table().versions()]
    assert set(store.superseded.hidden(before).tolist()) == set(pinned.tolist())  # still hidden from it
    old = lance.dataset(str(store.uri), version=before)
    assert old.count_rows() - store.superseded.hidden(before).size == 39  # its count still right
    store.retention_seconds = 0.0
    store.maintain()  # no version before the deletion is left: the entries go
    assert before not in [int(v["version"]) for v in store.table().versions()]
    assert store.superseded.entries().size == 0


def test_a_small_fragment_the_base_index_covers_is_not_rewritten(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: after a rebuild the base ANN segment covers recent fragments too, and
    Lance remaps every segment covering a rewritten fragment: the whole base index (~27 s at a
    million messages, and every searching process loads it again)."""

    monkeypatch.setattr(vector_fragments, "MATERIALIZE_MAX_ROWS", 100)
    data = np.random.default_rng(1).standard_normal((640, 16)).astype(np.float32)
    store = VectorStore(tmp_path, create=True, ann_min_rows=500, maintain_every=10**6)
    store.ensure(Fingerprint("toy:16", 16, "1"))
    for ms in (range(600), range(600, 640)):
        store.upsert({m: fields(m) for m in ms}, [ChunkVector(m, m, data[m]) for m in ms])
    store._build_index(store.table())  # one segment over the 600-row and the 40-row fragment
    store.table().delete("chunk_id = 605")  # as Oaken before superseded rows deleted them

    def segments() -> list[str]:
        return [str(seg.uuid) for i in store.table().describe_indices() if "vector" in i.field_names for seg in i.segments]

    before = segments()
    vector_fragments.materialize_small(store.table(), [])
    assert segments() == before
    assert [f.metadata.physical_rows for f in store.table().get_fragments() if f.metadata.deletion_file] == [40]


def test_the_daemons_indexing_thread_runs_the_upkeep_once_quiet(indexed: config_mod.Config,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop itself, on its own thread as in the daemon: a pass that follows a change leaves
    the maintenance due, and the thread runs it once nothing has changed for a while."""
    cfg = concept(indexed)
    data_dir = config_mod.resolve_data_dir(cfg)
    embedding.embed_pending(cfg)
    calls = _counting_maintenances(monkeypatch)
    state = read_state(data_dir)
    state["writes_since_upkeep"] = vectors.MAINTAIN_EVERY - 1
    vectors.write_json(vectors.vectors_path(data_dir) / vectors.STATE_FILE, state)
    monkeypatch.setattr(IndexWorker, "UPKEEP_QUIET_SECONDS", 1.5)
    worker = IndexWorker(cfg).start()
    try:
        target = message_id_of(cfg, "enron-lay-business-2.eml")
        with open_store(data_dir) as raw, raw.transaction():
            raw.set_triage(target, categories=cfg.triage.categories, disposition="archived")
        deadline = time.monotonic() + 60
        while not indexer.upkeep_due(cfg) and not calls and time.monotonic() < deadline:
            time.sleep(0.05)
        assert indexer.upkeep_due(cfg) and calls == []  # the change's pass left it
        while indexer.upkeep_due(cfg) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not indexer.upkeep_due(cfg) and calls == [True]
        assert read_state(data_dir)["writes_since_upkeep"] == 0
    finally:
        worker.stop()


def test_a_daemon_pass_still_builds_the_first_ann_index(tmp_path: Path) -> None:
    """Found by review: the daemon's passes defer the counted maintenance, and a deferred first
    ANN index would wait for a quiet moment a long first sync may not have."""
    store = VectorStore(tmp_path, create=True, ann_min_rows=500, upkeep_later=True)
    store.ensure(Fingerprint("toy:16", 16, "1"))
    rng = np.random.default_rng(6)
    data = rng.standard_normal((600, 16)).astype(np.float32)
    store.upsert({m: fields(m) for m in range(600)}, [ChunkVector(m, m, data[m]) for m in range(600)])
    store.finish_pass(600)
    assert store.has_index()


def test_a_big_first_delta_of_a_scalar_index_is_not_merged_again_and_again(tmp_path: Path) -> None:
    """Found by review: a long first pass lands as one big delta beside a small first segment;
    measured against the biggest segment, every bound merged the small deltas into that big one
    again (the whole-table cost the deltas avoid, every few upkeeps)."""
    import lance
    import pyarrow as pa

    from oaken.index import vector_upkeep

    def batch(lo: int, n: int) -> pa.Table:
        ids = list(range(lo, lo + n))
        return pa.table({"id": pa.array(ids, pa.int64()), "account": pa.array(["a" if i % 3 else "b" for i in ids])})

    uri = str(tmp_path / "t.lance")
    ds = lance.write_dataset(batch(0, 200), uri)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("account", "BITMAP")

    def big_segments() -> set[str]:  # the segments over 20,000 rows or more, by uuid
        rows = {int(f.fragment_id): int(f.metadata.physical_rows) for f in ds.get_fragments()}
        return {f"{i.name}:{seg.uuid}" for i in ds.describe_indices() for seg in i.segments
                if sum(rows.get(int(f), 0) for f in seg.fragment_ids) >= 20_000}

    added, written = 200, set()
    for n in [20_000] + [10] * 20:  # one big pass, then small ones
        ds = lance.write_dataset(batch(added, n), uri, mode="append")
        added += n
        ds.optimize.optimize_indices(num_indices_to_merge=0)
        vector_fragments.bound_scalar_deltas(ds, ["id_idx", "account_idx"])
        written |= big_segments()
        assert all(len(i.segments) <= vector_upkeep.MAX_INDEX_DELTAS + 1 for i in ds.describe_indices())
    # each index: the big delta, then one whole merge once the deltas outgrew the first segment
    assert len(written) <= 4, sorted(written)
    assert ds.count_rows("account = 'b'") == len([i for i in range(added) if i % 3 == 0])
    assert ds.to_table(filter="id = 20150").num_rows == 1


def test_ann_index_deltas_stay_few_and_searches_stay_exact(tmp_path: Path) -> None:
    """Each maintenance that finds new rows adds them to the ANN index as a delta index, which every
    search then visits (one a day for a daemon that gets mail): they are merged past
    MAX_INDEX_DELTAS, and the index is built again once they hold REBUILD_SHARE of its rows."""
    from oaken.index import vector_upkeep

    rng = np.random.default_rng(4)
    dim, base = 16, 600
    fp = Fingerprint("toy:16", dim, "1")
    store = VectorStore(tmp_path, create=True, ann_min_rows=500, retention_seconds=0.0)
    store.ensure(fp)
    data = rng.standard_normal((base + 20 * 12, dim)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    store.upsert({m: fields(m) for m in range(base)}, [ChunkVector(m, m, data[m]) for m in range(base)])
    assert store.maintain()["indexed"] is True
    assert store.index_deltas() == (0, base)

    def scalar_segments() -> dict[str, list[str]]:
        return {str(i.name): [str(seg.uuid) for seg in i.segments]
                for i in store.table().describe_indices() if "vector" not in i.field_names}

    first = {name: uuids[0] for name, uuids in scalar_segments().items()}
    assert len(first) == len(VectorStore.FILTER_INDEXES) + 2  # chunk_id's and message's too
    merged, most = 0, 0
    for day in range(12):  # 20 new rows a day, each day's maintenance folds them into the index
        lo = base + 20 * day
        store.upsert({m: fields(m, thread=m % 7) for m in range(lo, lo + 20)},
                     [ChunkVector(m, m, data[m]) for m in range(lo, lo + 20)])
        out = store.maintain()
        assert "index_merge_failed" not in out and "index_rebuilt" not in out
        merged += out.get("index_deltas_merged", 0)
        deltas, indexed = store.index_deltas()
        most = max(most, deltas)
        assert indexed == lo + 20
        # the scalar indexes get the day's rows as deltas, kept few; their first segment, over
        # the whole base, is not rewritten for 20 rows (1.26 s of every upkeep at 1M messages)
        for name, uuids in scalar_segments().items():
            assert uuids[0] == first[name] and len(uuids) <= vector_upkeep.MAX_INDEX_DELTAS + 1, name
    assert merged > 0 and most <= vector_upkeep.MAX_INDEX_DELTAS
    hits = store.search(data[base + 7], VectorFilters(thread=(base + 7) % 7), limit=300)
    threads = {**{m: m for m in range(base)}, **{m: m % 7 for m in range(base, base + 240)}}
    assert sorted(h.chunk_id for h in hits) == [m for m, t in threads.items() if t == (base + 7) % 7]
    # a new process reads the base it was built over from the state file
    assert VectorStore(tmp_path)._ann_base_rows == base
    for i in (3, base + 7, base + 20 * 11 + 5):  # in the base, the merged deltas, the last delta
        hits = store.search(data[i], limit=5)
        assert hits[0].chunk_id == i and hits[0].score == pytest.approx(1.0, abs=1e-5)
        exact = np.argsort(-(data[: base + 240] @ data[i]), kind="stable")[:5]
        assert [h.chunk_id for h in hits] == exact.tolist()
    # deltas holding half the base's rows: the index is built again over every row
    lo = base + 240
    more = rng.standard_normal((360, dim)).astype(np.float32)
    more /= np.linalg.norm(more, axis=1, keepdims=True)
    rebuilt = False
    for day in range(6):
        ms = range(lo + 60 * day, lo + 60 * (day + 1))
        store.upsert({m: fields(m) for m in ms}, [ChunkVector(m, m, more[m - lo]) for m in ms])
        rebuilt = rebuilt or "index_rebuilt" in store.maintain()
    assert rebuilt and store.index_deltas()[0] <= vector_upkeep.MAX_INDEX_DELTAS
    assert store._ann_base_rows is not None and store._ann_base_rows > base * (1 + vector_fragments.REBUILD_SHARE)


def test_maintenance_keeps_the_ann_partitions_and_adds_new_rows_as_a_delta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LanceDB's optimize() lets Lance rebalance the IVF partitions: one under a quarter of its
    target size is joined to another, which merges every delta and builds every partition's graph
    again (at a million messages, tens of minutes of the daemon's index pass). A maintenance keeps
    the partitions the store chose and adds new rows as a delta."""
    monkeypatch.setattr(vector_ann, "ann_partitions", lambda rows: 4)  # partitions Lance finds too small
    rng = np.random.default_rng(8)
    dim, base = 16, 2000
    store = VectorStore(tmp_path, create=True, ann_min_rows=500, retention_seconds=0.0)
    store.ensure(Fingerprint("toy:16", dim, "1"))
    data = rng.standard_normal((base + 100, dim)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)

    def partitions() -> list[int]:
        stats = store.table().stats.index_stats(store._vector_index_name())
        return [int(i["num_partitions"]) for i in stats["indices"]]

    store.upsert({m: fields(m) for m in range(base)}, [ChunkVector(m, m, data[m]) for m in range(base)])
    store.maintain()
    assert partitions() == [4]
    store.upsert({m: fields(m) for m in range(base, base + 100)}, [ChunkVector(m, m, data[m]) for m in range(base, base + 100)])
    store.maintain()
    assert partitions() == [4, 4] and store.index_deltas() == (1, base + 100)
    hits = store.search(data[base + 50], limit=5)
    assert [h.chunk_id for h in hits] == np.argsort(-(data @ data[base + 50]), kind="stable")[:5].tolist()


def test_an_index_of_another_type_is_built_again_as_ivf_rq(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store from before IVF_RQ holds an IVF-HNSW-SQ index (a 2 GB graph at a million messages,
    recall 0.957 there): the next maintenance builds it again as vector_ann.ANN_INDEX_TYPE, once,
    and searches give the exact nearest chunks before and after."""
    rng = np.random.default_rng(11)
    dim, n = 16, 1500
    data = rng.standard_normal((n, dim)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    store = VectorStore(tmp_path, create=True, ann_min_rows=500, retention_seconds=0.0)
    store.ensure(Fingerprint("toy:16", dim, "1"))
    store.upsert({m: fields(m) for m in range(n)}, [ChunkVector(m, m, data[m]) for m in range(n)])
    store.table().create_index("vector", index_type="IVF_HNSW_SQ", metric="cosine", num_partitions=1)

    def kind() -> str:
        return str(store.table().stats.index_stats(store._vector_index_name())["index_type"])

    def nearest(i: int) -> list[int]:
        return [h.chunk_id for h in store.search(data[i], limit=5)]

    exact = {i: np.argsort(-(data @ data[i]), kind="stable")[:5].tolist() for i in (3, 700, 1400)}
    assert kind() == "IVF_HNSW_SQ" and store._index_outdated()
    assert "index_rebuilt" not in store.maintain(index=False)  # a pass's mid-way maintenance builds nothing
    assert "index_rebuilt" in store.maintain()
    assert kind() == vector_ann.ANN_INDEX_TYPE and not store._index_outdated()
    assert {i: nearest(i) for i in exact} == exact
    assert "index_rebuilt" not in store.maintain()  # once


READER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import numpy as np
    from oaken.index.vectors import VectorStore
    data_dir, stop, ready = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    store = VectorStore(data_dir)
    ready.touch()
    q = np.ones(8, dtype=np.float32) / np.sqrt(8)
    ok, errors = 0, []
    while not stop.exists():
        try:
            if store.search(q, limit=5):
                ok += 1
        except Exception as e:
            errors.append(repr(e)[:300])
    print(json.dumps({"ok": ok, "errors": errors[:5], "n_errors": len(errors)}))
""")


def _random_unit(rng: np.random.Generator, n: int = 1) -> np.ndarray:
    v = rng.standard_normal((n, 8)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_five_hundred_write_cycles_leave_the_folder_within_its_bound(tmp_path: Path) -> None:
    """The stated bound: vectors/ holds the live rows plus the versions of about two retention
    periods and maintain_every writes. Without cleanup this run leaves ~4 MB of old versions
    (7.8 KB a write, measured)."""
    rng = np.random.default_rng(0)
    store = new_store(tmp_path, retention_seconds=0.3, maintain_every=20)
    store.upsert({m: fields(m) for m in range(50)},
                 [ChunkVector(m * 2 + k, m, _random_unit(rng)[0]) for m in range(50) for k in (0, 1)])
    sizes = []
    for i in range(500):
        m = i % 50
        if i % 4 == 3:
            store.update_fields([fields(m, labels=(f"l{i}",))])
        else:
            store.upsert({m: fields(m)}, [ChunkVector(1000 + i * 2 + k, m, v) for k, v in enumerate(_random_unit(rng, 2))])
        if i in (199, 499):
            sizes.append(store.size_bytes())
    assert store.count() == 100
    # 4 MB without cleanup; bounded, the folder stays far below. (Not compared with sizes[0]: how
    # many versions are younger than the retention depends on how fast this machine writes, and
    # under load it doubled.)
    assert sizes[1] < 1_500_000, sizes
    assert len(store.table().versions()) < 200  # of more than 500 written


def test_cleanup_never_breaks_a_concurrent_reader(tmp_path: Path) -> None:
    """A reader in another process searches while every write is followed by a cleanup. The same
    loop with LanceDB's cleanup_older_than=0 makes that reader fail with "Not found: ...lance"
    (measured on this table size), which is why maintain keeps recently superseded versions."""
    rng = np.random.default_rng(0)
    store = new_store(tmp_path, retention_seconds=0.3, maintain_every=1)
    n = 20_000
    store.upsert({m: fields(m) for m in range(n)}, [ChunkVector(m, m, v) for m, v in enumerate(_random_unit(rng, n))])
    stop = tmp_path / "stop"
    ready = tmp_path / "ready"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(tmp_path), str(stop), str(ready)],
                              stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and reader.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        for i in range(120):
            store.upsert({i: fields(i)}, [ChunkVector(n + i, i, _random_unit(rng)[0])])
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=60)
    result = json.loads(out)
    assert result["n_errors"] == 0, result["errors"]
    assert result["ok"] > 0
    assert store.count() == n


def test_the_filter_every_search_has_gives_the_exact_answer_whether_applied_first_or_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The account and disposition filter is applied to the nearest rows when most rows pass (at
    3.5M rows evaluating it first cost 115 ms a search) and first when too few of those pass:
    either way the hits are the exact nearest rows that pass, as numpy finds them."""
    rng = np.random.default_rng(3)
    store = new_store(tmp_path)
    n = 600
    vecs = _random_unit(rng, n)
    disposition = ["spam" if m % 7 == 0 else "inbox" for m in range(n)]
    account = ["home" if m % 25 == 0 else "work" for m in range(n)]
    store.upsert({m: fields(m, account=account[m], disposition=disposition[m]) for m in range(n)},
                 [ChunkVector(m, m, vecs[m]) for m in range(n)])
    calls: list[bool] = []
    real = VectorStore._nearest
    monkeypatch.setattr(VectorStore, "_nearest", lambda self, *a, **kw: calls.append(kw["prefilter"]) or real(self, *a, **kw))
    for i in range(12):
        q = _random_unit(rng)[0]
        for acct, limit in (("work", 5), ("work", 40), ("home", 5), ("home", 40)):
            flt = VectorFilters(account=acct, dispositions=("inbox",))
            keep = [m for m in range(n) if account[m] == acct and disposition[m] == "inbox"]
            exact = sorted(keep, key=lambda m: (-float(vecs[m] @ q), m))[:limit]
            assert ids(store.search(q, flt, limit)) == exact, (i, acct, limit)
    assert False in calls and True in calls  # both ways were taken: nearest first, and filter first


def test_what_a_maintenance_superseded_is_removed_once_its_retention_has_passed(tmp_path: Path) -> None:
    """A build's last maintenance supersedes every window it wrote a moment before; those stay
    through the retention for readers, and were left until the next maintenance (vectors/ at
    ~3.5x its size at 100,000 messages). The first pass after the retention removes them."""
    rng = np.random.default_rng(0)
    store = new_store(tmp_path, retention_seconds=1.0)
    for m in range(8):  # a build: one version a batch
        store.insert({m: fields(m)}, [ChunkVector(m * 10 + k, m, v) for k, v in enumerate(_random_unit(rng, 50))])
    store.maintain()
    kept = len(store.table().versions())
    size = store.size_bytes()
    assert kept > 1  # inside the retention: kept for readers that opened them
    assert vectors.cleanup_after(read_state(tmp_path)) is not None and not vectors.cleanup_due(tmp_path)
    VectorStore(tmp_path, retention_seconds=1.0).finish_pass(0)  # too early: nothing removed
    assert len(store.table().versions()) == kept
    deadline = time.monotonic() + 30
    while not vectors.cleanup_due(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert vectors.cleanup_due(tmp_path)
    later = VectorStore(tmp_path, retention_seconds=1.0)  # another pass, maybe another process
    later.finish_pass(0)
    assert len(later.table().versions()) == 1
    assert later.size_bytes() < size
    assert later.count() == 400
    assert vectors.cleanup_after(read_state(tmp_path)) is None  # once per maintenance
    q = _random_unit(rng)[0]
    assert len(later.search(q, VectorFilters(), 10)) == 10


def test_a_no_change_pass_does_the_cleanup_when_it_is_due(indexed: config_mod.Config) -> None:
    """A pass with nothing to embed is found without LanceDB, so it would never reach the
    cleanup; when one is due it opens the store for it. The daemon asks the same question."""
    cfg = concept(indexed)
    cfg = dataclasses.replace(cfg, index=dataclasses.replace(cfg.index, vector_retention_seconds=0.5))
    data_dir = config_mod.resolve_data_dir(cfg)
    embedding.embed_pending(cfg)
    VectorStore(data_dir, retention_seconds=0.5).maintain()
    assert not indexer.upkeep_due(cfg)
    deadline = time.monotonic() + 30
    while not indexer.upkeep_due(cfg) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert indexer.upkeep_due(cfg)
    assert len(VectorStore(data_dir).table().versions()) > 1
    worker = IndexWorker(cfg)  # the daemon starts a pass for it once quiet, and not again every second
    assert not worker._upkeep_wanted()  # it has just started: as after a change
    worker._changed -= worker.UPKEEP_QUIET_SECONDS
    assert (worker._upkeep_wanted(), worker._upkeep_wanted()) == (True, False)
    report = embedding.embed_pending(cfg)
    assert (report.embedded, report.removed) == (0, 0)
    assert len(VectorStore(data_dir).table().versions()) == 1
    assert not indexer.upkeep_due(cfg)
    none = dataclasses.replace(cfg, embedder=config_mod.EmbedderConfig(model="none"))
    assert not indexer.upkeep_due(none)


def test_state_file_tells_status_what_is_stored_without_lancedb(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.upsert({1: fields(1)}, [ChunkVector(1, 1, unit(1)), ChunkVector(2, 1, unit(0, 1))])
    store.maintain()
    state = read_state(tmp_path)
    assert state["rows"] == 2
    assert Fingerprint.from_key(json.dumps(state["fingerprint"])) == FP
    assert vectors.read_state(tmp_path / "elsewhere") is None


# ---- the embedding pass: index.db (real mail, tests/data/index) -> vectors/ ---------------------

def concept(cfg: config_mod.Config) -> config_mod.Config:
    return dataclasses.replace(cfg, embedder=config_mod.EmbedderConfig(model="concept"))


def test_embedding_pass_covers_index_db_once_then_has_nothing_to_do(indexed: config_mod.Config) -> None:
    cfg = concept(indexed)
    before = coverage.status(cfg)
    assert before["state"] == "missing" and before["coverage"] == 0.0 and before["chunks"] > 0
    seen: list[int] = []
    report = embedding.embed_pending(cfg, progress=seen.append)
    assert report.embedded == report.chunks == before["chunks"] == sum(seen)
    assert 0 < report.encoded <= report.embedded and report.pending == 0 and not report.rebuilt
    status = coverage.status(cfg)
    assert status["state"] == "ready" and status["coverage"] == 1.0 and status["rows"] == report.chunks
    again = embedding.embed_pending(cfg)
    assert (again.embedded, again.encoded, again.removed, again.pending) == (0, 0, 0, 0)
    assert not VectorStore(config_mod.resolve_data_dir(cfg)).has_index()  # 10,000 rows by default


def test_an_unreadable_list_of_superseded_rows_degrades_search_until_the_pass_rebuilds(
        indexed: config_mod.Config) -> None:
    """Without superseded.npy no reader can tell which rows count: a search says so (the vector
    side degraded, with the file and the fix), and the next pass builds vectors/ again."""
    from oaken.search.vector_retriever import VectorRetriever

    cfg = concept(indexed)
    chunks = embedding.embed_pending(cfg).chunks
    data_dir = config_mod.resolve_data_dir(cfg)
    store = VectorStore(data_dir)
    store.superseded.file.write_bytes(b"not an array")
    result = VectorRetriever(cfg).retrieve("gas pipeline", VectorFilters(), want=5)
    assert result.state == "error" and "superseded.npy" in result.warnings[0]
    assert "builds vectors/ again" in result.warnings[0]
    from oaken import api

    api.set_triage(message_id_of(cfg, "enron-lay-business-2.eml"), priority=2, config=cfg)  # mail changes
    report = embedding.embed_pending(cfg)
    assert report.rebuilt and report.embedded == chunks and vectors.rebuilding(data_dir) is None
    assert not store.superseded.file.exists()
    assert VectorRetriever(cfg).retrieve("gas pipeline", VectorFilters(), want=5).state == "ok"


def test_the_ann_threshold_is_a_setting(indexed: config_mod.Config) -> None:
    cfg = concept(indexed)
    cfg = dataclasses.replace(cfg, index=dataclasses.replace(cfg.index, vector_ann_min_rows=100))
    report = embedding.embed_pending(cfg)
    assert report.chunks >= 100
    store = VectorStore(config_mod.resolve_data_dir(cfg))
    assert store.has_index()
    q = load_embedder(cfg).embed_query("natural gas pipeline")
    assert len(store.search(q, VectorFilters(), 10)) == 10


def test_newest_mail_is_embedded_first(indexed: config_mod.Config) -> None:
    cfg = concept(indexed)
    data_dir = config_mod.resolve_data_dir(cfg)
    with KeywordIndex(data_dir) as index:
        body = index.chunks_of(index.message_dates(_all_messages(cfg)), kind="body")
        dates = index.message_dates({c.message for c in body})
    newest = max(dates, key=lambda m: (dates[m], m))
    report = embedding.embed_pending(cfg, limit=1)
    assert report.pending > 0 and coverage.status(cfg)["state"] == "building"
    stored = set(VectorStore(data_dir).chunk_messages().values())
    assert stored == {newest}


def _label_archive_and_delete(cfg: config_mod.Config) -> tuple[Path, int, int]:
    """Embed everything, then in raw.db label and archive one message and delete another:
    (data dir, the labelled one, the deleted one)."""
    data_dir = config_mod.resolve_data_dir(cfg)
    embedding.embed_pending(cfg)
    target = message_id_of(cfg, "enron-lay-business-2.eml")
    gone = message_id_of(cfg, "notmuch-23.eml")
    with open_store(data_dir) as raw, raw.transaction():
        raw.add_label(target, "Receipts")
        raw.set_triage(target, categories=cfg.triage.categories, disposition="archived")
        raw.delete_messages([gone])
    indexer.update(cfg, keyword_only=True)
    return data_dir, target, gone


def test_labels_disposition_and_deletion_follow_raw_db(indexed: config_mod.Config) -> None:
    cfg = concept(indexed)
    data_dir, target, gone = _label_archive_and_delete(cfg)
    report = embedding.embed_pending(cfg)
    assert report.refreshed >= 1 and report.removed >= 1 and report.embedded == 0
    store = VectorStore(data_dir)
    assert gone not in set(store.chunk_messages().values())
    q = load_embedder(cfg).embed_query("anything at all")
    found = {h.message for h in store.search(q, VectorFilters(labels=("receipts",), dispositions=("archived",)), 50)}
    assert found == {target}


def test_without_a_cursor_every_stored_message_is_compared_and_only_the_changed_written(
    indexed: config_mod.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a store from before the cursor, or restored from elsewhere: replaying the whole feed wrote
    # every message's fields again (at 1M messages a thousand merges, 20+ minutes)
    from oaken.index.vector_files import CURSOR_FILE, vectors_path

    cfg = concept(indexed)
    data_dir, target, gone = _label_archive_and_delete(cfg)
    (vectors_path(data_dir) / CURSOR_FILE).unlink()
    written: list[list[int]] = []
    update = VectorStore.update_fields

    def counted(self: VectorStore, fields) -> None:
        written.append([f.message for f in fields])
        update(self, fields)

    monkeypatch.setattr(VectorStore, "update_fields", counted)
    report = embedding.embed_pending(cfg)
    assert written == [[target]] and report.refreshed == 1 and report.removed >= 1
    store = VectorStore(data_dir)
    assert gone not in set(store.chunk_messages().values())
    q = load_embedder(cfg).embed_query("anything at all")
    assert {h.message for h in store.search(q, VectorFilters(labels=("receipts",)), 50)} == {target}
    assert embedding.embed_pending(cfg).refreshed == 0  # the cursor is back


def test_another_chunker_or_model_rebuilds_from_the_cache(indexed: config_mod.Config,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = concept(indexed)
    first = embedding.embed_pending(cfg)
    monkeypatch.setattr(chunking, "CHUNKER_VERSION", chunking.CHUNKER_VERSION + 1)
    assert coverage.status(cfg)["state"] == "stale"
    rebuilt = embedding.embed_pending(cfg)
    assert rebuilt.rebuilt and rebuilt.embedded == first.embedded
    assert rebuilt.encoded == 0  # the same texts by the same model: every vector from the cache
    drop(config_mod.resolve_data_dir(cfg))
    again = embedding.embed_pending(cfg)
    assert again.embedded == first.embedded and again.encoded == 0


def test_model_none_embeds_nothing(indexed: config_mod.Config) -> None:
    cfg = dataclasses.replace(indexed, embedder=config_mod.EmbedderConfig(model="none"))
    report = embedding.embed_pending(cfg)
    assert report.model is None and report.embedded == 0
    assert coverage.status(cfg)["state"] == "off"
    assert not (config_mod.resolve_data_dir(cfg) / "vectors").exists()


def _all_messages(cfg: config_mod.Config) -> list[int]:
    with open_store(config_mod.resolve_data_dir(cfg)) as raw:
        return raw.all_message_ids()


def test_coverage_for_responses_is_none_when_off_and_follows_the_pass(indexed: config_mod.Config) -> None:
    cfg = concept(indexed)
    assert coverage.vector_coverage(dataclasses.replace(cfg, embedder=config_mod.EmbedderConfig(model="none"))) is None
    assert coverage.vector_coverage(cfg, max_age=0) == 0.0
    embedding.embed_pending(cfg, limit=1)
    partial = coverage.vector_coverage(cfg, max_age=0)
    assert 0.0 < partial < 1.0
    embedding.embed_pending(cfg)
    assert coverage.vector_coverage(cfg, max_age=3600) == partial  # a warm process reuses a recent figure
    assert coverage.vector_coverage(cfg, max_age=0) == 1.0
    assert coverage.status(cfg)["bytes"] > 0


def test_insert_appends_what_upsert_would_store_for_new_messages(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    appended, merged = new_store(tmp_path / "a"), new_store(tmp_path / "b")
    rows = [ChunkVector(m * 10 + k, m, _random_unit(rng)[0]) for m in range(5) for k in range(3)]
    appended.insert({m: fields(m) for m in range(5)}, rows)
    merged.upsert({m: fields(m) for m in range(5)}, rows)
    assert appended.chunk_messages() == merged.chunk_messages() and appended.count() == 15
    q = rows[4].vector
    assert [(h.chunk_id, round(h.score, 5)) for h in appended.search(q, limit=5)] == \
        [(h.chunk_id, round(h.score, 5)) for h in merged.search(q, limit=5)]
    appended.upsert({1: fields(1)}, [ChunkVector(99, 1, _random_unit(rng)[0])])  # later changes replace
    assert sorted(c for c, m in appended.chunk_messages().items() if m == 1) == [99]


def test_a_pass_after_changes_reads_only_the_changed_messages(indexed: config_mod.Config,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """At a million messages vectors/ holds ~4M rows and index.db ~4M body chunks: a pass after a
    triage change or a few new messages must not read them all. It follows raw.db's feed and
    compares the changed messages only, and ends where a whole comparison would: the same
    (chunk, message) rows, each with the vector of its own text, also when a deleted message's
    chunk ids are given to a new one."""
    from oaken.api import import_mail

    cfg = concept(indexed)
    data_dir = config_mod.resolve_data_dir(cfg)
    embedding.embed_pending(cfg)  # the first pass compares everything
    # rows are found by chunk and message through b-tree indexes: a merge or a delete joins
    # against them instead of every row
    indexed_columns = {c for i in VectorStore(data_dir).table().describe_indices() for c in i.field_names}
    assert {"chunk_id", "message"} <= indexed_columns
    whole_reads: list[str] = []
    real_rows, real_ids = VectorStore.chunk_messages, KeywordIndex.chunk_ids
    monkeypatch.setattr(VectorStore, "chunk_messages", lambda self: whole_reads.append("rows") or real_rows(self))
    monkeypatch.setattr(KeywordIndex, "chunk_ids", lambda self, kind="body": whole_reads.append("ids") or real_ids(self, kind))

    with KeywordIndex(data_dir) as index:
        last = max(index.body_chunk_pairs(_all_messages(cfg)))[1]  # holds the highest chunk ids
        last_ids = {c for c, m in index.body_chunk_pairs([last])}
    target = message_id_of(cfg, "enron-lay-business-2.eml")
    with open_store(data_dir) as raw, raw.transaction():
        raw.set_triage(target, categories=cfg.triage.categories, disposition="archived")
        raw.delete_messages([last])
    indexer.update(cfg, keyword_only=True)
    new_mail = sorted((Path(__file__).parent / "data" / "foundation" / "notmuch-default" / "cur").iterdir())[:3]
    box = data_dir.parent / "new-mail"
    box.mkdir()
    for p in new_mail:
        (box / p.name).write_bytes(p.read_bytes())
    import_mail([box], account="work", config=cfg)
    indexer.update(cfg, keyword_only=True)
    report = embedding.embed_pending(cfg)
    assert report.embedded > 0 and report.removed > 0 and report.refreshed >= 1
    assert whole_reads == []  # neither every row nor every chunk id was read

    monkeypatch.setattr(VectorStore, "chunk_messages", real_rows)
    store = VectorStore(data_dir)
    with KeywordIndex(data_dir) as index:
        pairs = set(index.body_chunk_pairs(_all_messages(cfg)))
        assert set(store.chunk_messages().items()) == pairs
        new_ids = {m for _, m in pairs} - {m for m in _all_messages(cfg) if m <= last}
        chunks = index.chunks_of(sorted(new_ids), kind="body")
    assert last_ids & {c.id for c in chunks}  # index.db gave the deleted message's ids to new mail
    embedder = load_embedder(cfg)
    expected = embedder.embed_documents([embedding.embed_text(c) for c in chunks])
    rows = {r["chunk_id"]: r["vector"] for r in store.rows_of(new_ids, columns=("chunk_id", "vector"))}
    for c, v in zip(chunks, expected):
        assert np.allclose(rows[c.id], v, atol=1e-5), c.id
    q = embedder.embed_query("anything at all")
    assert {h.message for h in store.search(q, VectorFilters(dispositions=("archived",)), 50)} == {target}
    assert embedding.embed_pending(cfg).embedded == 0


def _counting_maintenances(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A list that gets an item for every VectorStore.maintain from now on."""
    calls: list[bool] = []
    real = VectorStore.maintain
    monkeypatch.setattr(VectorStore, "maintain", lambda self, **kw: calls.append(True) or real(self, **kw))
    return calls


def test_a_triage_pass_leaves_maintenance_to_the_upkeep(indexed: config_mod.Config,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass that only rewrote a message's fields does not compact the table (0.6 s of a triage at
    100k messages); a pass whose store has grown past ann_min_rows without an index does, and
    builds it. Either way `oaken status` reads the pass's state."""
    cfg = concept(indexed)
    data_dir = config_mod.resolve_data_dir(cfg)
    embedding.embed_pending(cfg)
    calls = _counting_maintenances(monkeypatch)
    target = message_id_of(cfg, "enron-lay-business-2.eml")
    with open_store(data_dir) as raw, raw.transaction():
        raw.set_triage(target, categories=cfg.triage.categories, disposition="archived")
    report = embedding.embed_pending(cfg)
    assert report.refreshed >= 1 and report.embedded == 0 and calls == []
    assert coverage.status(cfg)["state"] == "ready"

    rows = VectorStore(data_dir).count()
    low = dataclasses.replace(cfg, index=dataclasses.replace(cfg.index, vector_ann_min_rows=rows))
    with open_store(data_dir) as raw, raw.transaction():
        raw.set_triage(target, categories=cfg.triage.categories, disposition="inbox")
    embedding.embed_pending(low)
    assert calls and VectorStore(data_dir).has_index()


def test_a_daemon_pass_leaves_the_upkeep_for_when_nothing_changes(indexed: config_mod.Config,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The maintenance every maintain_every writes costs 2-3 s at a million messages, and the
    triage whose write fell on it paid it. A daemon's pass (upkeep_later) leaves it due in the
    state file; once nothing has changed for a few seconds the daemon starts a pass for it alone.
    A daemon that is never quiet still maintains past DEFER_LIMIT times maintain_every writes."""
    from oaken.daemon.index_worker import index_now
    from oaken.index.vector_upkeep import DEFER_LIMIT

    cfg = concept(indexed)
    data_dir = config_mod.resolve_data_dir(cfg)
    embedding.embed_pending(cfg)
    calls = _counting_maintenances(monkeypatch)
    target = message_id_of(cfg, "enron-lay-business-2.eml")

    def triage_after(writes: int, disposition: str) -> embedding.EmbedReport:
        state = read_state(data_dir)
        state["writes_since_upkeep"] = writes  # as after that many earlier passes
        vectors.write_json(vectors.vectors_path(data_dir) / vectors.STATE_FILE, state)
        with open_store(data_dir) as raw, raw.transaction():
            raw.set_triage(target, categories=cfg.triage.categories, disposition=disposition)
        return embedding.embed_pending(cfg, upkeep_later=True)

    assert triage_after(vectors.MAINTAIN_EVERY - 1, "archived").refreshed >= 1
    assert calls == [] and indexer.upkeep_due(cfg)
    assert read_state(data_dir)["writes_since_upkeep"] == vectors.MAINTAIN_EVERY
    assert embedding.embed_pending(cfg, upkeep_later=True).refreshed == 0 and calls == []  # still later

    worker = IndexWorker(cfg)
    assert not worker._upkeep_wanted()  # a change has just been indexed
    worker._changed -= worker.UPKEEP_QUIET_SECONDS
    assert worker._upkeep_wanted()
    assert index_now(cfg, stop=worker.stopping)  # what the daemon's loop runs then
    assert calls == [True] and not indexer.upkeep_due(cfg)
    assert read_state(data_dir)["writes_since_upkeep"] == 0

    calls.clear()
    triage_after(DEFER_LIMIT * vectors.MAINTAIN_EVERY - 1, "inbox")
    assert calls == [True] and not indexer.upkeep_due(cfg)


def test_upkeep_counts_writes_across_stores_and_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pass opens its own store: the writes since the last maintenance are counted in the
    state file, so a daemon's stream of small passes still compacts and folds rows into the index
    every maintain_every writes (found by review: a per-instance count never got there)."""
    calls = _counting_maintenances(monkeypatch)
    new_store(tmp_path, maintain_every=3)
    for m in range(1, 8):  # one small pass per message, each with a store of its own
        store = VectorStore(tmp_path, maintain_every=3)
        store.upsert({m: fields(m)}, [ChunkVector(m, m, unit(1, m))])
        store.finish_pass(1)
    assert len(calls) >= 2
    assert VectorStore(tmp_path, maintain_every=3)._writes < 3


class _Int8Kernel:
    """The concept embedder under the name of openvino-int8, with a kernel that is wrong at 32
    tokens or not (`wrong`): what oaken.index.backend_record.int8_repair_due asks."""

    backend = "openvino-int8"

    def __init__(self, inner, wrong: bool):
        self._inner, self.wrong = inner, wrong
        self.name, self.dim, self.fingerprint = inner.name, inner.dim, inner.fingerprint

    def wrong_without_padding(self) -> bool:
        return self.wrong

    def embed_documents(self, texts):
        return self._inner.embed_documents(texts)

    def embed_query(self, text):
        return self._inner.embed_query(text)


@pytest.mark.parametrize("wrong", [True, False])
def test_openvino_int8_vectors_of_an_older_oaken_are_rebuilt_once_where_the_kernel_was_wrong(
        indexed: config_mod.Config, wrong: bool) -> None:
    """openvino-int8 gave wrong vectors to every text of a 32-token batch on some CPUs: a store an
    older Oaken filled with it (no repairs record) is rebuilt once, the cache forgotten so the
    vectors are encoded again, where this CPU's kernel is wrong; elsewhere nothing is redone."""
    from oaken.index import backend_record
    from oaken.index.embed_cache import open_cache

    cfg = concept(indexed)
    data_dir = config_mod.resolve_data_dir(cfg)
    fake = _Int8Kernel(load_embedder(cfg), wrong)
    first = embedding.embed_pending(cfg, embedder=fake)
    assert first.embedded > 0 and first.encoded > 0
    assert (data_dir / backend_record.REPAIRS_FILE).exists()  # checked on the first pass: nothing to redo
    (data_dir / backend_record.REPAIRS_FILE).unlink()  # as an older Oaken left it
    with open_cache(data_dir) as cache:
        cached = cache.count()
    assert cached > 0

    again = embedding.embed_pending(cfg, embedder=fake)
    assert again.rebuilt is wrong
    assert again.encoded == (first.encoded if wrong else 0)  # encoded again, not read from the cache
    assert json.loads((data_dir / backend_record.REPAIRS_FILE).read_text()) == {backend_record.INT8_32: True}
    third = embedding.embed_pending(cfg, embedder=fake)
    assert (third.rebuilt, third.encoded) == (False, 0)  # once


@pytest.mark.parametrize("wrong", [True, False])
def test_a_deleted_vector_store_is_not_filled_again_from_wrong_cached_int8_vectors(
        indexed: config_mod.Config, wrong: bool) -> None:
    """vectors/ is disposable, but the embedding cache beside it is keyed by the model: deleting
    vectors/ of an older Oaken's openvino-int8 store would fill it again from the wrong cached
    vectors. Where the kernel was wrong, the cache is forgotten and the vectors encoded again."""
    from oaken.index import backend_record

    cfg = concept(indexed)
    data_dir = config_mod.resolve_data_dir(cfg)
    fake = _Int8Kernel(load_embedder(cfg), wrong)
    first = embedding.embed_pending(cfg, embedder=fake)
    (data_dir / backend_record.REPAIRS_FILE).unlink()  # as an older Oaken left it
    drop(data_dir)  # the user deletes the derived store
    again = embedding.embed_pending(cfg, embedder=fake)
    assert again.embedded == first.embedded
    assert again.encoded == (first.encoded if wrong else 0)


@pytest.mark.parametrize("ann", [False, True], ids=["exact", "ann"])
def test_searches_among_many_superseded_rows_agree_with_brute_force(tmp_path: Path, ann: bool) -> None:
    """The 400 rows nearest the query changed three times (1,200 superseded rows where the search
    looks first): no hit twice, none from a superseded row, and the hits brute force finds over
    the live rows, unfiltered, with the filter every search has and with a prefilter."""
    rng = np.random.default_rng(1)
    n = 3000
    data = rng.standard_normal((n, 8)).astype(np.float32)
    store = VectorStore(tmp_path, create=True, maintain_every=10**6, ann_min_rows=500 if ann else 10**9)
    store.ensure(FP)

    def account(m: int) -> str:
        return "work" if m % 3 else "home"

    def fs(m: int, label: str = "inbox") -> MessageFields:
        return fields(m, account=account(m), labels=(label,))

    store.upsert({m: fs(m) for m in range(n)}, [ChunkVector(m, m, data[m]) for m in range(n)])
    store.maintain()
    assert store.has_index() == ann
    q = data[0]
    cos = data @ q / np.linalg.norm(data, axis=1) / np.linalg.norm(q)
    near = {int(m) for m in np.argsort(-cos)[:400]}
    for round_ in range(3):
        store.update_fields([fs(m, f"l{round_}") for m in sorted(near)])
    assert store.superseded.hidden(store.table().version).size == 1200 and store.count() == n
    for filters, passes in ((VectorFilters(), lambda m: True),
                            (VectorFilters(account="work"), lambda m: account(m) == "work"),
                            (VectorFilters(account="work", labels=("l2",)), lambda m: account(m) == "work" and m in near)):
        for limit in (10, 100):
            got = [h.chunk_id for h in store.search(q, filters, limit=limit)]
            truth = [int(m) for m in np.lexsort((np.arange(n), -cos)) if passes(int(m))][:limit]
            assert len(got) == len(set(got)) == limit
            assert all(passes(m) for m in got)
            assert len(set(got) & set(truth)) >= (limit if not ann else 0.95 * limit)
    assert store.search(q, VectorFilters(labels=("l0",)), limit=10) == []  # superseded labels are not found


def test_every_pass_leaves_the_ann_index_covering_every_row(tmp_path: Path) -> None:
    """Rows no ANN segment covers cost every search an allow list over each partition it visits
    (179 against 43 ms at a million messages): a pass that appended rows ends by adding them as a
    delta, and merges the newest small deltas once there are more than MAX_INDEX_DELTAS."""
    from oaken.index import vector_upkeep

    data = np.random.default_rng(6).standard_normal((700, 8)).astype(np.float32)
    store = VectorStore(tmp_path, create=True, ann_min_rows=500, maintain_every=10**6)
    store.ensure(FP)
    store.insert({m: fields(m) for m in range(600)}, [ChunkVector(m, m, data[m]) for m in range(600)])
    store.finish_pass(600)  # the first ANN index
    assert store.has_index()

    def uncovered() -> set[int]:
        table = store.table()
        index = next(i for i in table.describe_indices() if "vector" in i.field_names)
        covered = {int(f) for seg in index.segments for f in seg.fragment_ids}
        return {int(f.fragment_id) for f in table.get_fragments()} - covered

    def segments() -> int:
        return len(next(i for i in store.table().describe_indices() if "vector" in i.field_names).segments)

    for i in range(12):  # a pass of new mail, then a triage: both append
        ms = range(600 + 5 * i, 605 + 5 * i)
        store.insert({m: fields(m) for m in ms}, [ChunkVector(m, m, data[m]) for m in ms])
        store.finish_pass(5)
        assert uncovered() == set() and segments() <= 1 + vector_upkeep.MAX_INDEX_DELTAS
        store.update_fields([fields(600 + 5 * i, labels=(f"l{i}",))])
        store.finish_pass(0)
        assert uncovered() == set() and segments() <= 1 + vector_upkeep.MAX_INDEX_DELTAS
    for m in (0, 601, 659):
        assert store.search(data[m], limit=1)[0].chunk_id == m
    assert len(store.search(data[0], limit=700)) == 660
