"""Embedders behind one interface: the factory, the concept stand-in through it, and the real
all-MiniLM-L6-v2 (installed with the package; a few small texts, loaded once)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from oaken import config as config_mod
from oaken.errors import ConfigError, VectorUnavailable
from oaken.index import embedders
from oaken.index.embedders import load_embedder
from oaken.index.minilm import MiniLMEmbedder, model_path


def cfg(**embedder) -> config_mod.Config:
    return config_mod.from_dict({"embedder": embedder})


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder.load(threads=0, batch_size=8)


def test_none_is_keyword_mode_and_concept_comes_through_the_factory() -> None:
    assert load_embedder(cfg(model="none")) is None
    concept = load_embedder(cfg(model="concept"))
    assert concept is not None and concept.name == "concept"
    assert load_embedder(cfg(model="concept")) is concept  # loaded once per process
    vectors = concept.embed_documents(["the flight to Lisbon", "an invoice is due"])
    assert vectors.dtype == np.float32 and vectors.shape == (2, concept.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_an_unregistered_model_is_a_configuration_error() -> None:
    config = cfg(model="concept")
    other = config_mod.Config(embedder=config_mod.EmbedderConfig(model="word2vec"), source="x.toml")
    with pytest.raises(ConfigError, match=r"x.toml: \[embedder\] model: unknown model 'word2vec'"):
        load_embedder(other)
    assert load_embedder(config) is not None


def test_another_backend_can_register_a_model_name() -> None:
    made: list[str] = []

    def factory(config: config_mod.Config) -> embedders.Embedder:
        made.append(config.embedder.model)
        return load_embedder(cfg(model="concept"))  # type: ignore[return-value]

    saved = dict(embedders._FACTORIES)
    try:
        embedders.register("none-but-registered", factory)
        weird = config_mod.Config(embedder=config_mod.EmbedderConfig(model="none-but-registered"))
        assert load_embedder(weird, cached=False).name == "concept"
        assert made == ["none-but-registered"]
    finally:
        embedders._FACTORIES.clear()
        embedders._FACTORIES.update(saved)


def test_the_real_model_loads_from_the_installed_package_offline(minilm: MiniLMEmbedder) -> None:
    assert model_path().is_dir() and (model_path() / "model.safetensors").is_file()
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert minilm.name == "all-MiniLM-L6-v2" and minilm.dim == 384
    assert minilm.fingerprint == "all-MiniLM-L6-v2:384"
    texts = ["When does my plane to Portugal leave?", "The Lisbon flight departs at nine tomorrow.",
             "Please find attached the quarterly invoice for printer toner."]
    v = minilm.embed_documents(texts)
    assert v.dtype == np.float32 and v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2  # meaning, not words
    q = minilm.embed_query(texts[0])
    assert q.shape == (384,) and float(q @ v[0]) == pytest.approx(1.0, abs=1e-4)
    assert minilm.embed_documents([]).shape == (0, 384)


def test_batched_encoding_equals_one_by_one(minilm: MiniLMEmbedder) -> None:
    texts = [f"note {i}: " + "the meeting moved to Thursday " * (i % 5 + 1) for i in range(6)]
    together = minilm.embed_documents(texts)
    alone = np.stack([minilm.embed_query(t) for t in texts])
    assert np.allclose(together, alone, atol=1e-4)


def test_a_missing_model_or_backend_is_no_embedder_with_a_fix(tmp_path: Path) -> None:
    with pytest.raises(VectorUnavailable) as e:
        MiniLMEmbedder.load(path=tmp_path / "nowhere")
    assert e.value.code == "no_embedder"
    assert "modules.json missing" in str(e.value) and "model = \"none\"" in str(e.value)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "modules.json").write_text("[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"nope.Module\"}]")
    with pytest.raises(VectorUnavailable) as e:
        MiniLMEmbedder.load(path=broken)
    assert e.value.code == "no_embedder" and str(broken) in str(e.value)
    with pytest.raises(VectorUnavailable) as e:
        MiniLMEmbedder.load(backend="quantum")
    assert e.value.code == "no_embedder" and "'quantum'" in str(e.value)


def test_the_real_model_through_the_pipeline_and_the_retriever(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    """Two short real messages embedded by MiniLM, stored, and found again by meaning."""
    import shutil

    from oaken.api import import_mail
    from oaken.index import coverage, embedding, indexer
    from oaken.index.vectors import VectorFilters
    from oaken.search.vector_retriever import VectorRetriever
    from tests.index_fixtures import INDEX_DATA

    inbox = tmp_path / "INBOX"
    inbox.mkdir()
    for name in ("notmuch-03.eml", "enron-lay-inbox-461.eml"):
        shutil.copyfile(INDEX_DATA / name, inbox / name)
    config = config_mod.Config()
    import_mail([inbox], account="work", config=config)
    indexer.update(config, keyword_only=True)
    report = embedding.embed_pending(config, embedder=minilm)
    assert report.model == "all-MiniLM-L6-v2:384" and report.embedded == report.chunks > 0
    assert coverage.status(config)["state"] == "ready"
    result = VectorRetriever(config, embedder=minilm).retrieve("energy company business", VectorFilters(), want=2)
    assert result.state == "ok" and len(result.hits) == 2 and -1.0 <= result.best_cosine <= 1.0


def test_the_stand_in_takes_a_model_s_width_for_benchmarks(monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/bench_scale.py gives the stand-in all-MiniLM-L6-v2's 384 dimensions
    (OAKEN_CONCEPT_DIM), so a million messages' vectors cost what the real model's would."""
    monkeypatch.setenv("OAKEN_CONCEPT_DIM", "384")
    wide = load_embedder(cfg(model="concept"), cached=False)
    assert wide is not None and wide.embed_query("board meeting").shape == (384,)
    assert ":384:" in wide.fingerprint  # vectors of another width are embedded again, never mixed
    for bad in ("abc", "0", "99999"):
        monkeypatch.setenv("OAKEN_CONCEPT_DIM", bad)
        with pytest.raises(VectorUnavailable, match="OAKEN_CONCEPT_DIM"):
            load_embedder(cfg(model="concept"), cached=False)


def test_a_pass_under_another_stand_in_width_is_not_the_last_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass decides from the last pass's record whether the model need not be loaded: a
    width given after it must not be taken for the same settings (a benchmark's `oaken reindex`
    returned at once, and the next pass embedded the million again)."""
    from oaken.index.vector_files import _settings

    monkeypatch.delenv("OAKEN_CONCEPT_DIM", raising=False)
    plain = _settings(cfg(model="concept"))
    monkeypatch.setenv("OAKEN_CONCEPT_DIM", "384")
    assert _settings(cfg(model="concept")) != plain
    assert _settings(cfg(model="none")) == _settings(cfg(model="none"))  # other models: as before
