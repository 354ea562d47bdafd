"""Which backends built the stored vectors: recorded in vectors/state.json, kept across a change
to a backend that the fidelity check says is compatible (no re-embedding), rebuilt for one that is
not, and never searched with an incompatible query embedder (model_mismatch). Real all-MiniLM-L6-v2
on torch fp32 and bf16 (no export needed), real index.db and LanceDB, real mail (tests/data/index)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from oaken import config as config_mod
from oaken.index import backends, embedding, fidelity
from oaken.index.embed_cache import CACHE_FILE
from oaken.index.embedders import Embedder, backend_of
from oaken.index.vectors import VectorFilters, VectorStore
from oaken.search.vector_retriever import VectorRetriever

QUESTION = "natural gas pipeline business and energy trading"
SAMPLE = fidelity.load_sample().subset(24, 8)  # a small fidelity check keeps the test in seconds


def _with(cfg: config_mod.Config, backend: str) -> config_mod.Config:
    return dataclasses.replace(cfg, embedder=config_mod.EmbedderConfig(backend=backend))


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Embedder]]:
    """torch fp32 and bf16 loaded once, bf16 checked against fp32 in a data dir of the module."""
    where = tmp_path_factory.mktemp("checked")
    return where, {name: backends.load_backend(name, where, sample=SAMPLE) for name in ("torch-fp32", "torch-bf16")}


@pytest.fixture
def fp32_embedded(indexed: config_mod.Config, checked) -> tuple[config_mod.Config, dict[str, Embedder]]:
    """The test mailbox embedded by torch fp32, in a data dir holding the module's fidelity checks
    (copied: as if this data dir had loaded both backends before)."""
    where, loaded = checked
    cfg = _with(indexed, "torch")
    data_dir = Path(config_mod.resolve_data_dir(cfg))
    shutil.copytree(where / "models", data_dir / "models")
    if (where / CACHE_FILE).is_file():  # the same mail embedded by an earlier test: from the cache
        shutil.copyfile(where / CACHE_FILE, data_dir / CACHE_FILE)
    report = embedding.embed_pending(cfg, embedder=loaded["torch-fp32"])
    assert report.embedded == report.chunks > 0
    shutil.copyfile(data_dir / CACHE_FILE, where / CACHE_FILE)
    return cfg, loaded


def _store(cfg: config_mod.Config) -> VectorStore:
    return VectorStore(Path(config_mod.resolve_data_dir(cfg)))


def test_a_compatible_backend_change_keeps_the_vectors_and_is_recorded(fp32_embedded) -> None:
    cfg, loaded = fp32_embedded
    fp32, bf16 = loaded["torch-fp32"], loaded["torch-bf16"]
    assert _store(cfg).backends() == ["torch-fp32"]
    before = _store(cfg).chunk_messages()
    bf16_cfg = _with(cfg, "torch-bf16")
    assert backend_of(bf16) == "torch-bf16" and bf16.fingerprint == fp32.fingerprint
    assert backends.compatible("torch-fp32", "torch-bf16", Path(config_mod.resolve_data_dir(cfg)))
    report = embedding.embed_pending(bf16_cfg, embedder=bf16)
    assert not report.rebuilt and report.encoded == 0 and report.embedded == 0
    assert _store(cfg).chunk_messages() == before
    assert _store(cfg).backends() == ["torch-fp32", "torch-bf16"]
    result = VectorRetriever(bf16_cfg, embedder=bf16).retrieve(QUESTION, VectorFilters(), want=5)
    assert result.state == "ok" and len(result.hits) == 5


def test_an_incompatible_stored_backend_degrades_and_is_rebuilt(fp32_embedded) -> None:
    cfg, loaded = fp32_embedded
    fp32 = loaded["torch-fp32"]
    # onnx-int8 never ran its check in this data directory: nothing says its vectors may meet fp32's
    _store(cfg).record_backend("onnx-int8")
    assert _store(cfg).backends() == ["torch-fp32", "onnx-int8"]
    result = VectorRetriever(cfg, embedder=fp32).retrieve(QUESTION, VectorFilters(), want=5)
    assert result.state == "model_mismatch" and result.hits == ()
    assert "onnx-int8" in result.warnings[0] and "oaken reindex" in result.warnings[0]
    report = embedding.embed_pending(cfg, embedder=fp32)
    assert report.rebuilt and report.encoded > 0  # the cache held the mixed vectors too: re-encoded
    assert report.embedded == report.chunks
    assert _store(cfg).backends() == ["torch-fp32"]
    assert VectorRetriever(cfg, embedder=fp32).retrieve(QUESTION, VectorFilters(), want=5).state == "ok"
    # a store from before the record, with rows of all-MiniLM-L6-v2: torch fp32 was the only backend
    state = _store(cfg).path / "state.json"
    state.write_text(state.read_text().replace('"backends": ["torch-fp32"]', '"backends": null'))
    assert _store(cfg).backends() == [] and embedding.stored_backends(_store(cfg)) == ["torch-fp32"]


def test_the_config_lists_every_backend_and_refuses_others() -> None:
    field = next(f for f in dataclasses.fields(config_mod.EmbedderConfig) if f.name == "backend")
    assert set(field.metadata["choices"]) == set(backends.NAMES)
    assert config_mod.from_dict({"embedder": {"backend": "openvino-int8"}}).embedder.backend == "openvino-int8"
    with pytest.raises(config_mod.ConfigError, match="backend: expected one of .*'torch-bf16'.*got 'quantum'"):
        config_mod.from_dict({"embedder": {"backend": "quantum"}}, source="x.toml")
