"""The vector retriever on real mail (tests/data/index), real index.db and LanceDB, with the concept
embedder; every degraded case maps to its DESIGN.md code."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Sequence

import pytest

from oaken import chunking
from oaken import config as config_mod
from oaken.errors import ConfigError
from oaken.index import embedding
from oaken.index.embedders import load_embedder
from oaken.index.keyword import KeywordFilters
from oaken.index.vectors import VectorFilters, VectorStore
from oaken.search.vector_retriever import VectorRetriever, low_cosine, needs_admit_for, prefilters, rewrite
from tests.index_fixtures import message_id_of

QUESTION = "natural gas pipeline business and energy trading"


def with_(cfg: config_mod.Config, *, model: str = "concept", backend: str = "auto", **search) -> config_mod.Config:
    return dataclasses.replace(cfg, embedder=config_mod.EmbedderConfig(model=model, backend=backend),
                               search=dataclasses.replace(cfg.search, **search))


@pytest.fixture
def embedded(indexed: config_mod.Config) -> config_mod.Config:
    cfg = with_(indexed)
    embedding.embed_pending(cfg)
    return cfg


def test_chunks_collapse_to_ranked_messages(embedded: config_mod.Config) -> None:
    result = VectorRetriever(embedded).retrieve(QUESTION, VectorFilters(account="work"), want=20)
    assert result.state == "ok" and result.degraded_reason is None
    messages = [h.message for h in result.hits]
    assert len(messages) == len(set(messages)) > 3
    assert [h.rank for h in result.hits] == list(range(1, len(messages) + 1))
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True) and result.best_cosine == scores[0]
    multi = [h for h in result.hits if h.matched_chunks]
    assert multi, "a long message (enron-lay-business-2) has several chunks"
    chunk_owner = VectorStore(Path(config_mod.resolve_data_dir(embedded))).chunk_messages()
    for h in result.hits:
        assert chunk_owner[h.chunk] == h.message and all(chunk_owner[c] == h.message for c in h.matched_chunks)
    assert result.embedded_text == QUESTION
    assert result.rounds > 1  # 13 messages cannot fill 20: it widened until the store ran out
    top3 = VectorRetriever(embedded).retrieve(QUESTION, VectorFilters(), want=3)
    assert [h.message for h in top3.hits] == messages[:3]  # one long message's chunks do not crowd the rest


def test_prefilters_and_admit_bind_the_vector_side_and_widening_finds_enough(embedded: config_mod.Config) -> None:
    r = VectorRetriever(embedded)
    assert r.retrieve(QUESTION, VectorFilters(account="elsewhere"), want=5).hits == ()
    everything = [h.message for h in r.retrieve(QUESTION, VectorFilters(), want=50).hits]
    last = everything[-1]
    # only the least similar message is admitted (a phrase only it holds, say): widening reaches it
    result = r.retrieve(QUESTION, VectorFilters(), want=1, admit=lambda ids: [m for m in ids if m == last])
    assert [h.message for h in result.hits] == [last] and result.hits[0].rank == 1
    assert result.rounds > 1 and result.candidates > 1
    excluded = everything[0]
    result = r.retrieve(QUESTION, VectorFilters(), want=50, admit=lambda ids: [m for m in ids if m != excluded])
    assert excluded not in {h.message for h in result.hits} and result.hits[0].message == everything[1]


def test_loose_filters_are_searched_first_and_the_full_ones_when_too_few_pass(
        embedded: config_mod.Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """The filter every search has (account, dispositions) is judged by `admit` for the candidates
    instead of LanceDB reading it for each (25-45 ms at a million messages): searched loose first;
    when too few candidates pass even at max_candidates (a small account), LanceDB gets the
    filters after all."""
    everything = [h.message for h in VectorRetriever(embedded).retrieve(QUESTION, VectorFilters(), want=50).hits]
    seen: list[VectorFilters] = []
    real = VectorStore.search

    def recorded(self: VectorStore, q, filters: VectorFilters = VectorFilters(), limit: int = 50):  # type: ignore[no-untyped-def]
        seen.append(filters)
        return real(self, q, filters, limit)

    monkeypatch.setattr(VectorStore, "search", recorded)
    r = VectorRetriever(with_(embedded, max_candidates=4))
    result = r.retrieve(QUESTION, VectorFilters(account="work"), want=1, admit=lambda ids: list(ids),
                        loose=VectorFilters())
    assert seen == [VectorFilters()] and [h.message for h in result.hits] == everything[:1]
    seen.clear()
    last = everything[-1]
    strict = VectorFilters(include_ids=frozenset({last}))
    result = r.retrieve(QUESTION, strict, want=1, admit=lambda ids: [m for m in ids if m == last],
                        loose=VectorFilters())
    assert seen[-1] == strict and set(seen[:-1]) == {VectorFilters()}  # widened loose, then strict
    assert [h.message for h in result.hits] == [last]
    seen.clear()  # without an admit to judge them, the filters are never loosened
    assert r.retrieve(QUESTION, VectorFilters(account="elsewhere"), want=1, loose=VectorFilters()).hits == ()
    assert seen == [VectorFilters(account="elsewhere")]


def test_widening_stops_at_max_candidates(embedded: config_mod.Config) -> None:
    cfg = with_(embedded, max_candidates=4)
    result = VectorRetriever(cfg).retrieve(QUESTION, VectorFilters(), want=2, admit=lambda ids: [])
    assert result.hits == () and result.candidates == 4 and result.state == "ok"


def test_model_none_is_off_not_degraded(indexed: config_mod.Config) -> None:
    result = VectorRetriever(with_(indexed, model="none")).retrieve(QUESTION, VectorFilters(), want=5)
    assert result.state == "off" and result.degraded_reason is None and result.hits == ()


def test_no_embedder(indexed: config_mod.Config) -> None:
    cfg = with_(indexed, model="all-MiniLM-L6-v2", backend="quantum")
    result = VectorRetriever(cfg).retrieve(QUESTION, VectorFilters(), want=5)
    assert result.degraded_reason == "no_embedder" and "'quantum'" in result.warnings[0]


def test_no_vector_store_then_no_vectors(indexed: config_mod.Config) -> None:
    cfg = with_(indexed)
    r = VectorRetriever(cfg)
    assert r.retrieve(QUESTION, VectorFilters(), want=5).degraded_reason == "no_vector_store"
    store = VectorStore(config_mod.resolve_data_dir(cfg), create=True)
    store.ensure(embedding.fingerprint_of(load_embedder(cfg)))
    result = r.retrieve(QUESTION, VectorFilters(), want=5)
    assert result.degraded_reason == "no_vectors" and "oaken reindex" in result.warnings[0]


def test_vectors_of_another_chunker_are_a_model_mismatch(embedded: config_mod.Config,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    r = VectorRetriever(embedded)
    assert r.retrieve(QUESTION, VectorFilters(), want=5).state == "ok"
    monkeypatch.setattr(chunking, "CHUNKER_VERSION", chunking.CHUNKER_VERSION + 1)
    result = r.retrieve(QUESTION, VectorFilters(), want=5)
    assert result.degraded_reason == "model_mismatch" and "stale" in result.warnings[0]
    embedding.embed_pending(embedded)  # the rebuild makes them current again
    assert r.retrieve(QUESTION, VectorFilters(), want=5).state == "ok"


def test_timeout_covers_every_round(embedded: config_mod.Config) -> None:
    cfg = with_(embedded, vector_timeout_seconds=0.2)

    def slow(ids: Sequence[int]) -> list[int]:
        time.sleep(0.15)  # each round takes most of the budget, and nothing is admitted
        return []

    result = VectorRetriever(cfg).retrieve(QUESTION, VectorFilters(), want=5, admit=slow)
    assert result.degraded_reason == "timeout" and "vector_timeout_seconds" in result.warnings[0]


def test_an_exception_is_error_and_the_next_search_works(embedded: config_mod.Config) -> None:
    r = VectorRetriever(embedded)

    def broken(ids: Sequence[int]) -> list[int]:
        raise RuntimeError("index.db went away")

    result = r.retrieve(QUESTION, VectorFilters(), want=5, admit=broken)
    assert result.degraded_reason == "error" and "RuntimeError: index.db went away" in result.warnings[0]
    assert r.retrieve(QUESTION, VectorFilters(), want=5).state == "ok"


def test_no_free_text_skips_the_vector_side(embedded: config_mod.Config) -> None:
    result = VectorRetriever(embedded).retrieve("   ", VectorFilters(), want=5)
    assert result.state == "skipped" and result.degraded_reason is None


# ---- llm_rewrite ------------------------------------------------------------------------------

def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("import sys, time\n" + body + "\n")
    return f"{sys.executable} {path}"


def test_rewrite_changes_only_the_embedded_text(embedded: config_mod.Config, tmp_path: Path) -> None:
    cmd = script(tmp_path, "rw.py", "text = sys.stdin.read()\nprint('gas pipeline ' + text.upper())")
    cfg = with_(embedded, llm_rewrite=True, rewrite_command=cmd)
    result = VectorRetriever(cfg).retrieve("where is the energy", VectorFilters(), want=5)
    assert result.state == "ok" and result.warnings == ()
    assert result.embedded_text == "gas pipeline WHERE IS THE ENERGY"


@pytest.mark.parametrize("body, timeout, expect", [
    ("sys.exit(3)", 5.0, "exited with status 3"),
    ("sys.stderr.write('no model\\n'); sys.exit(1)", 5.0, "status 1: no model"),
    ("pass", 5.0, "printed nothing"),
    ("time.sleep(5); print('late')", 0.3, "took longer than 0.3 s"),
])
def test_a_failing_or_slow_rewrite_keeps_the_original_with_a_warning(tmp_path: Path, body: str, timeout: float,
                                                                     expect: str) -> None:
    text, warning = rewrite(script(tmp_path, "rw.py", body), "original words", timeout)
    assert text == "original words" and warning is not None and expect in warning


def test_a_missing_rewrite_command_warns_and_search_still_answers(embedded: config_mod.Config) -> None:
    cfg = with_(embedded, llm_rewrite=True, rewrite_command="/nonexistent/rewriter --fast")
    result = VectorRetriever(cfg).retrieve(QUESTION, VectorFilters(), want=5)
    assert result.state == "ok" and result.embedded_text == QUESTION
    assert "cannot run" in result.warnings[0] and "/nonexistent/rewriter" in result.warnings[0]


def test_llm_rewrite_without_a_command_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="rewrite_command: required when llm_rewrite = true"):
        config_mod.from_dict({"search": {"llm_rewrite": True}})


# ---- helpers the engine uses --------------------------------------------------------------------

def test_keyword_filters_become_prefilters_and_the_rest_is_left_to_admit() -> None:
    kf = KeywordFilters(account="work", senders=("alex",), labels=("Lists",), after=10, before=20, thread=3,
                        dispositions=("inbox",), exclude_ids=frozenset({9}))
    vf = prefilters(kf)
    assert (vf.account, vf.senders, vf.labels, vf.after, vf.before, vf.thread, vf.dispositions, vf.exclude_ids) == (
        "work", ("alex",), ("Lists",), 10, 20, 3, ("inbox",), frozenset({9}))
    assert not needs_admit_for(kf)
    assert needs_admit_for(KeywordFilters(subject_terms=("budget",)))
    assert needs_admit_for(KeywordFilters(has_attachment=True))


def test_low_cosine_uses_the_threshold_of_the_model_in_use(indexed: config_mod.Config) -> None:
    cfg = with_(indexed, low_confidence_cosine={"concept": 0.5})
    assert low_cosine(cfg, 0.2) and low_cosine(cfg, None) and not low_cosine(cfg, 0.7)
    assert not low_cosine(with_(indexed, model="none"), 0.1)  # no threshold: never claimed weak


def test_an_admit_that_sees_deleted_messages_keeps_them_out(embedded: config_mod.Config) -> None:
    from oaken.store import open_store

    gone = message_id_of(embedded, "enron-lay-business-2.eml")
    data_dir = config_mod.resolve_data_dir(embedded)
    with open_store(data_dir) as raw, raw.transaction():
        raw.delete_messages([gone])
    with open_store(data_dir) as raw:
        def admit(ids: Sequence[int]) -> list[int]:
            alive = raw.metas(ids)
            return [m for m in ids if m in alive]

        result = VectorRetriever(embedded).retrieve(QUESTION, VectorFilters(), want=50, admit=admit)
    assert result.hits and gone not in {h.message for h in result.hits}
