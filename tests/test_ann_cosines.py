"""One cosine on every path: past `vector_ann_min_rows` (lowered here, not in the product) the
ANN index answers, and its hits and scores must be those of exact search. Real Enron mail from
tests/data/evals/enron, embedded by the concept stand-in through the real pipeline.

Before the fix the ANN path scored 1 - _distance where LanceDB's ANN distance is about
2(1 - cos): a hit of true cosine 0.4 read as -0.2 and the meaning floor removed it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oaken import api
from oaken import config as config_mod
from oaken.config import Config
from oaken.index import indexer
from oaken.index.embedders import load_embedder
from oaken.index.embedding import embed_pending
from oaken.index.vectors import VectorFilters, VectorStore

ENRON = Path(__file__).parent / "data" / "evals" / "enron"
QUERIES = (
    "warning about malicious programs infecting PCs",
    "wildlife holiday in Tanzania with his son",
    "will families keep health insurance after being laid off?",
    "safety precautions for staff flying after the September terror attacks",
    "gas pipeline capacity in California",
    "board meeting agenda",
    "charity bike ride",
    "stock price and analysts",
)


def _config(home: Path, ann_min_rows: int) -> Config:
    return config_mod.from_dict({"paths": {"data_dir": str(home / "data")}, "embedder": {"model": "concept"},
                                 "index": {"vector_ann_min_rows": ann_min_rows}}, source="test")


@pytest.fixture(scope="module")
def ann_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, VectorStore]:
    home = tmp_path_factory.mktemp("ann")
    cfg = _config(home, ann_min_rows=256)
    report = api.import_mail([ENRON], account="eval", config=cfg)
    assert report.added == 299
    indexer.update(cfg)
    embed_pending(cfg)
    store = VectorStore(cfg.data_dir)
    assert store.count() >= 256, "the test store must pass the lowered threshold"
    assert store.has_index(), "past vector_ann_min_rows the embedding pass builds the ANN index"
    return cfg, store


def _exact(store: VectorStore, q: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The oracle: every stored vector read back and scored by numpy."""
    t = store.live(["chunk_id", "vector"])
    m = np.asarray(t.column("vector").to_pylist(), dtype=np.float64)
    ids = np.asarray(t.column("chunk_id").to_pylist())
    cos = (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    order = np.lexsort((ids, -cos))[:k]
    return [(int(ids[i]), float(cos[i])) for i in order]


def test_ann_path_gives_exact_hits_and_true_cosines(ann_store: tuple[Config, VectorStore]) -> None:
    cfg, store = ann_store
    embedder = load_embedder(cfg)
    assert embedder is not None
    for text in QUERIES:
        q = np.asarray(embedder.embed_query(text), dtype=np.float64)
        ann = store.search(q, VectorFilters(account="eval"), limit=10)  # not selective: the index
        exact = _exact(store, q, 10)
        assert [h.chunk_id for h in ann] == [c for c, _ in exact], text
        for hit, (_, cos) in zip(ann, exact):
            assert hit.score == pytest.approx(cos, abs=1e-3), text


def test_ann_and_bypassed_index_agree(ann_store: tuple[Config, VectorStore]) -> None:
    """A selective filter bypasses the index; its cosines must be the ANN path's."""
    cfg, store = ann_store
    embedder = load_embedder(cfg)
    assert embedder is not None
    q = np.asarray(embedder.embed_query(QUERIES[0]), dtype=np.float32)
    ann = store.search(q, VectorFilters(), limit=20)
    messages = frozenset(h.message for h in ann)
    exact = store.search(q, VectorFilters(include_ids=messages), limit=20)
    assert {h.chunk_id: round(h.score, 3) for h in ann} == {h.chunk_id: round(h.score, 3) for h in exact}


def test_ann_path_leaves_out_the_messages_already_read(ann_store: tuple[Config, VectorStore]) -> None:
    """A round past max_candidates excludes the messages read (oaken.search.vector_retriever
    PAST_ROUNDS): on the ANN path it must give the next messages, with exact cosines."""
    cfg, store = ann_store
    embedder = load_embedder(cfg)
    assert embedder is not None
    q = np.asarray(embedder.embed_query(QUERIES[0]), dtype=np.float64)
    first = store.search(q, VectorFilters(account="eval"), limit=30)
    read = frozenset(h.message for h in first)
    more = store.search(q, VectorFilters(account="eval", exclude_ids=read), limit=10)
    assert more and not read & {h.message for h in more}
    t = store.live(["chunk_id", "message", "vector"])
    keep = [i for i, m in enumerate(t.column("message").to_pylist()) if m not in read]
    m = np.asarray([t.column("vector").to_pylist()[i] for i in keep], dtype=np.float64)
    ids = np.asarray([t.column("chunk_id").to_pylist()[i] for i in keep])
    cos = (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    order = np.lexsort((ids, -cos))[:10]
    assert [h.chunk_id for h in more] == [int(ids[i]) for i in order]
    for hit, i in zip(more, order):
        assert hit.score == pytest.approx(float(cos[i]), abs=1e-3)


def test_meaning_floor_keeps_hits_on_the_ann_path(ann_store: tuple[Config, VectorStore],
                                                   tmp_path: Path) -> None:
    """The same question over the same mail answers alike below and above the ANN threshold,
    floor (vector_min_cosine) and low_confidence included."""
    cfg, _ = ann_store
    small = _config(tmp_path, ann_min_rows=10_000_000)
    api.import_mail([ENRON], account="eval", config=small)
    indexer.update(small)
    embed_pending(small)
    assert not VectorStore(small.data_dir).has_index()
    from oaken.search.engine import search

    for text in QUERIES[:4]:
        above = search(text, config=cfg, account="eval", limit=10, retrievers=("vector",))
        below = search(text, config=small, account="eval", limit=10, retrievers=("vector",))
        assert [(h.message_id, _cosine(h)) for h in above.hits] == [(h.message_id, _cosine(h)) for h in below.hits]
        both = search(text, config=cfg, account="eval", limit=10)
        both_small = search(text, config=small, account="eval", limit=10)
        assert [h.message_id for h in both.hits] == [h.message_id for h in both_small.hits], text
        assert both.low_confidence == both_small.low_confidence, text


def _cosine(hit) -> str:
    """The vector side's cosine as --explain words it ("cosine 0.412; ...")."""
    return next(w.detail for w in hit.why if w.retriever == "vector").split(";")[0]
