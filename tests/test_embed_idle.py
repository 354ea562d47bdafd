"""The embedding pass touches the model only when there is something to embed: `oaken reindex`
on an empty store, or with nothing changed, or after a triage (fields only), loads no model.

Real parts: raw.db, index.db and LanceDB in a temp dir, real mail from tests/data/search, the
concept embedder (and, in a fresh interpreter, the configured all-MiniLM-L6-v2). Loads are
counted by wrapping the real `load_embedder`, never by time.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oaken import api
from oaken.config import Config, EmbedderConfig
from oaken.index import embedders, embedding, indexer, vector_files
from oaken.index.keyword import KeywordIndex
from oaken.index.vectors import VectorFilters, VectorStore
from oaken.store import open_store
from tests.search_fixtures import ACCOUNT, config_for, ids_by_subject, token_message

ROOT = Path(__file__).resolve().parent.parent
AWARD = "Employee Stock Option Award"


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each call of the pass's `load_embedder`, by model name (the real one still loads)."""
    seen: list[str] = []
    real = embedding.load_embedder

    def counting(config: Config, **kw: object) -> object:
        seen.append(config.embedder.model)
        return real(config, **kw)

    monkeypatch.setattr(embedding, "load_embedder", counting)
    return seen


def test_an_empty_store_loads_no_model(tmp_path: Path, loads: list[str]) -> None:
    cfg = config_for(tmp_path / "home", model="concept")
    (tmp_path / "home").mkdir()
    open_store(tmp_path / "home").close()  # raw.db with no mail (as `oaken show 1` leaves it)
    report = indexer.reindex(cfg)
    assert report.indexed == 0 and report.vectors is not None and report.vectors["embedded"] == 0
    assert loads == [] and not (tmp_path / "home" / "vectors").exists()


def test_nothing_changed_or_fields_only_load_no_model(own_search_mailbox: Path, tmp_path: Path,
                                                      loads: list[str]) -> None:
    cfg = config_for(own_search_mailbox, model="concept")
    first = indexer.reindex(cfg).vectors
    assert first is not None and first["embedded"] > 0 and loads == ["concept"]

    again = indexer.reindex(cfg).vectors  # nothing changed
    assert again is not None and (again["embedded"], again["pending"]) == (0, 0) and loads == ["concept"]

    target = ids_by_subject(own_search_mailbox)[AWARD]
    api.set_triage(target, disposition="archived", config=cfg)
    fields = indexer.reindex(cfg).vectors  # triage: the rows' fields follow, no vector is made
    assert fields is not None and fields["refreshed"] >= 1 and fields["embedded"] == 0
    assert loads == ["concept"]
    store = VectorStore(own_search_mailbox)
    rows = store.rows_of([target], ("message", "disposition"))
    assert rows and {r["disposition"] for r in rows} == {"archived"}

    new = tmp_path / "extra"
    new.mkdir()
    (new / "token.eml").write_bytes(token_message("zeppelin"))
    api.import_mail([new], account=ACCOUNT, config=cfg)  # new mail: now the model is needed
    more = indexer.reindex(cfg).vectors
    assert more is not None and more["embedded"] > 0 and loads == ["concept", "concept"]

    other = dataclasses.replace(cfg, embedder=EmbedderConfig(model="all-MiniLM-L6-v2", backend="torch"))
    assert vector_files.read_last_pass(own_search_mailbox, other) is None  # another model: its own check


def _embedded_then_new_mail(home: Path, tmp_path: Path, n: int) -> Config:
    """The mailbox indexed and embedded, then `n` new messages imported into raw.db alone."""
    cfg = config_for(home, model="concept")
    indexer.reindex(cfg)
    new = tmp_path / "extra"
    new.mkdir()
    for i in range(n):
        (new / f"token-{i}.eml").write_bytes(token_message(f"zeppelin{i}", i))
    api.import_mail([new], account=ACCOUNT, config=cfg)
    return cfg


def _stopped_after_one_window(cfg: Config, monkeypatch: pytest.MonkeyPatch) -> embedding.EmbedReport:
    """A pass stopped (the daemon's SIGTERM) while its first window, of one message, is embedded."""
    import threading

    stop = threading.Event()
    real = embedding.embed_cached

    def then_stop(*args: object, **kw: object) -> object:
        stop.set()
        return real(*args, **kw)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(embedding, "STOPPABLE_WINDOW_CHUNKS", 1)
        m.setattr(embedding, "embed_cached", then_stop)
        return embedding.embed_pending(cfg, stop=stop)


def _count_whole_plans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each pass that compared every row with every chunk (12 s at a million messages)."""
    from oaken.index import vector_plan

    calls: list[int] = []
    real = vector_plan.whole_plan

    def counting(*args: object, **kw: object) -> object:
        calls.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(vector_plan, "whole_plan", counting)
    return calls


def test_a_pass_that_read_raw_db_ahead_of_index_db_leaves_the_rest_to_the_next(
    own_search_mailbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's case: sync stores mail while a vector pass loads its model, so the pass reads
    raw.db's seq past what index.db has indexed. It embeds index.db's chunks; the next pass, after
    the keyword pass, must embed the new messages (it followed raw.db's feed from the seq the first
    recorded and found nothing: 48 of 100 messages never embedded, the fault suite's real-model run)."""
    cfg = _embedded_then_new_mail(own_search_mailbox, tmp_path, 3)  # raw.db only: no keyword pass yet
    behind = embedding.embed_pending(cfg)  # index.db behind raw.db: its chunks are all embedded
    assert (behind.embedded, behind.pending) == (0, 0)
    indexer.update(cfg, keyword_only=True)
    plans = _count_whole_plans(monkeypatch)
    caught_up = embedding.embed_pending(cfg)
    assert caught_up.embedded >= 3 and caught_up.pending == 0
    assert plans == []  # found by following raw.db's feed from the record, not by reading every row
    store = VectorStore(own_search_mailbox)
    with KeywordIndex(own_search_mailbox) as index:
        wanted = index.chunk_ids("embedded")
    assert set(store.chunk_messages()) == wanted  # every body chunk has its vector
    assert embedding.embed_pending(cfg).embedded == 0  # and the record now says so


def test_a_stopped_pass_is_finished_from_the_feed(own_search_mailbox: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon stopped in the middle of embedding new mail: the next pass embeds the rest,
    following raw.db's feed from the last complete pass rather than reading every row."""
    cfg = _embedded_then_new_mail(own_search_mailbox, tmp_path, 4)
    indexer.update(cfg, keyword_only=True)
    first = _stopped_after_one_window(cfg, monkeypatch)
    assert first.pending > 0  # stopped with messages left
    plans = _count_whole_plans(monkeypatch)
    rest = embedding.embed_pending(cfg)
    assert rest.embedded > 0 and rest.pending == 0 and plans == []
    with KeywordIndex(own_search_mailbox) as index:
        wanted = index.chunk_ids("embedded")
    assert set(VectorStore(own_search_mailbox).chunk_messages()) == wanted
    assert first.embedded + rest.embedded >= 4


def test_a_rebuild_that_was_stopped_is_finished_whole(own_search_mailbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vectors/ dropped for a rebuild (another backend, a repair) and that pass stopped: the last
    complete pass's record still matches raw.db and index.db, but the table is nearly empty; the
    next pass must fill it again, not only the messages changed since the record."""
    cfg = config_for(own_search_mailbox, model="concept")
    indexer.reindex(cfg)
    store = VectorStore(own_search_mailbox)
    assert store.ensure(store.fingerprint(), rebuild=True, reason="test: a repair")
    _stopped_after_one_window(cfg, monkeypatch)
    embedding.embed_pending(cfg)
    with KeywordIndex(own_search_mailbox) as index:
        wanted = index.chunk_ids("embedded")
    assert set(VectorStore(own_search_mailbox).chunk_messages()) == wanted
    assert not vector_files.rebuilding(own_search_mailbox)


def test_a_record_of_the_old_format_is_not_trusted(own_search_mailbox: Path) -> None:
    """Records before LAST_PASS_VERSION 2 could say a store complete that missed messages (above):
    the first pass after the upgrade compares every row instead."""
    cfg = config_for(own_search_mailbox, model="concept")
    indexer.reindex(cfg)
    path = own_search_mailbox / "vectors" / vector_files.LAST_PASS_FILE
    record = json.loads(path.read_text())
    assert record["version"] == vector_files.LAST_PASS_VERSION
    del record["version"]
    path.write_text(json.dumps(record))
    assert vector_files.read_last_pass(own_search_mailbox, cfg) is None


def test_a_record_that_no_longer_describes_vectors_is_not_trusted(own_search_mailbox: Path,
                                                                   loads: list[str]) -> None:
    """vectors/ rebuilt by another embedder behind the record's back: the next pass loads and
    rebuilds instead of calling the store current."""
    cfg = config_for(own_search_mailbox, model="concept")
    indexer.reindex(cfg)
    record = vector_files.read_last_pass(own_search_mailbox, cfg)
    assert record is not None
    path = own_search_mailbox / "vectors" / vector_files.LAST_PASS_FILE
    saved = path.read_text()
    other = embedders.load_embedder(dataclasses.replace(cfg, embedder=EmbedderConfig(model="concept")))
    assert other is not None
    VectorStore(own_search_mailbox).ensure(dataclasses.replace(embedding.fingerprint_of(other), dim=7))
    path.write_text(saved)  # the record says the store is current; the table says otherwise
    api.set_triage(ids_by_subject(own_search_mailbox)[AWARD], priority=2, config=cfg)
    report = indexer.reindex(cfg).vectors
    assert report is not None and report["rebuilt"] and report["embedded"] == report["chunks"] > 0
    assert loads == ["concept", "concept"]
    assert VectorStore(own_search_mailbox).search(other.embed_query("stock option"), VectorFilters(), 3)


_PROBE = """
import json, sys
from oaken import api
report = api.reindex(api.load_config())
heavy = [m for m in ("torch", "sentence_transformers", "onnxruntime", "openvino", "lancedb", "lance") if m in sys.modules]
print(json.dumps({"heavy": heavy, "vectors": report.vectors}))
"""


def test_reindex_of_an_empty_store_imports_no_model_in_a_fresh_process(oaken_home: Path) -> None:
    """The trial's case: `oaken reindex` on 0 messages with the default model used to load (or
    first export) all-MiniLM-L6-v2."""
    oaken_home.mkdir(parents=True)
    (oaken_home / "config.toml").write_text('[embedder]\nmodel = "all-MiniLM-L6-v2"\n')
    open_store(oaken_home).close()
    env = {**os.environ, "OAKEN_HOME": str(oaken_home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["heavy"] == [] and out["vectors"]["embedded"] == 0
    assert not (oaken_home / "vectors").exists() and not (oaken_home / "models").exists()
