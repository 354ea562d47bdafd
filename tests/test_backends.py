"""Fast embedding backends: a real export of the installed weights, a real fidelity check against
torch fp32 on a slice of the shipped Enron sample, refusal of a backend that fails it, the auto
order, and which backends' vectors may be mixed. CI installs oaken[fast], so none is skipped."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from oaken.config import Config, EmbedderConfig
from oaken.errors import ConfigError, VectorUnavailable
from oaken.index import backends, fidelity
from oaken.index.backends import artifacts, onnx, openvino
from oaken.index.backends.batching import Batch, Tokenizer

FAST = ("torch-bf16", "onnx-fp32", "onnx-int8", "openvino", "openvino-int8")
SAMPLE = fidelity.load_sample().subset(40, 10)  # 40 chunks of 20-230 words, 10 short queries
CALIBRATION = fidelity.load_sample().calibration[:24]  # int8 calibration kept small for test time


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data directory for the module: each model is exported once, as a user's would be."""
    where = tmp_path_factory.mktemp("backends-data")
    model_dir = artifacts.weights_dir()
    openvino.int8_artifact(where, model_dir, CALIBRATION)  # before any load, with a small calibration
    return where


@pytest.fixture(scope="module")
def loaded(data_dir: Path) -> dict[str, object]:
    """Every backend loaded through the public entry, with its fidelity check on the small sample."""
    return {name: backends.load_backend(name, data_dir, sample=SAMPLE) for name in (backends.REFERENCE, *FAST)}


TEXTS = [*SAMPLE.documents[:12], "", "x"]  # mixed lengths, some past 256 word pieces, an empty one


@pytest.fixture(scope="module")
def fp32_vectors(loaded: dict) -> np.ndarray:
    return loaded[backends.REFERENCE].embed_documents(TEXTS)


def _config(backend: str, data_dir: Path) -> Config:
    return dataclasses.replace(Config(), embedder=EmbedderConfig(backend=backend),
                               paths=dataclasses.replace(Config().paths, data_dir=str(data_dir)))


def test_the_fast_extra_is_installed() -> None:
    """CI installs .[dev,fast]: a missing package here would hide the fast backends' tests."""
    assert backends.available() == {name: None for name in backends.BACKENDS}


@pytest.mark.parametrize("name", FAST)
def test_every_fast_backend_passes_its_check_and_is_cached(name: str, data_dir: Path, loaded: dict) -> None:
    result = fidelity.FidelityStore(artifacts.models_root(data_dir, artifacts.weights_dir())).result(name)
    assert result is not None and result.passed, result
    assert (result.documents, result.queries) == (40, 10)
    assert result.cos_mean >= fidelity.COS_MEAN and result.cos_min >= fidelity.COS_MIN
    assert result.overlap >= fidelity.OVERLAP
    assert loaded[name].backend == name


@pytest.mark.parametrize("name", FAST)
def test_vectors_are_unit_norm_in_the_callers_order_and_close_to_fp32(name: str, loaded: dict,
                                                                     fp32_vectors: np.ndarray) -> None:
    texts, ref = TEXTS, fp32_vectors
    got = loaded[name].embed_documents(texts)
    assert got.shape == (len(texts), 384) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
    assert np.min(np.sum(got * ref, axis=1)) > fidelity.COS_MIN
    reordered = loaded[name].embed_documents(texts[::-1])
    assert np.allclose(reordered[::-1], got, atol=2e-3)  # batching by length keeps each row's text
    query = loaded[name].embed_query(texts[1])  # alone: int8 activations are scaled per batch
    assert query.shape == (384,) and float(query @ ref[1]) > fidelity.COS_MIN


class _Refuses:
    """Stands where an embedder would: the check must come from the cache and not embed."""

    def embed_documents(self, texts):
        raise AssertionError("the fidelity check ran again instead of reading its cached result")


@pytest.mark.parametrize("name", ["onnx-int8", "openvino-int8"])
def test_a_check_runs_once_per_data_dir(name: str, data_dir: Path, loaded: dict) -> None:
    first = backends.fidelity_store(data_dir).result(name)
    again = backends.check(name, _Refuses(), data_dir, sample=SAMPLE)
    assert again == first and again.passed
    with pytest.raises(AssertionError, match="ran again"):  # another sample is another check
        backends.check(name, _Refuses(), data_dir, sample=fidelity.load_sample().subset(41, 10))


def test_exports_live_in_the_data_dir_and_are_reused(data_dir: Path, loaded: dict) -> None:
    root = artifacts.models_root(data_dir, artifacts.weights_dir())
    for folder, file in ((onnx.FP32, onnx.MODEL_FILE), (onnx.INT8, onnx.MODEL_FILE),
                         (openvino.FLOAT, openvino.MODEL_FILE), (openvino.INT8, openvino.MODEL_FILE)):
        assert (root / folder / file).is_file()
    before = (root / onnx.INT8 / onnx.MODEL_FILE).stat().st_mtime_ns
    again = backends.load_backend("onnx-int8", data_dir, sample=SAMPLE)
    assert again.model_file == root / onnx.INT8 / onnx.MODEL_FILE
    assert (root / onnx.INT8 / onnx.MODEL_FILE).stat().st_mtime_ns == before
    assert not [p for p in root.iterdir() if p.name.startswith(".") and p.is_dir()]  # no half export left


class _Truncating:
    """A real ONNX Runtime backend that reads only the first 16 word pieces: right on short
    texts, wrong on long ones, the kind of fault the check exists for."""

    def __init__(self, data_dir: Path):
        model_dir = artifacts.weights_dir()
        self.inner = onnx.OnnxEmbedder("onnx-trunc16", onnx.fp32_artifact(data_dir, model_dir), model_dir)
        self.inner._tokenizer = Tokenizer(model_dir, max_tokens=16)
        self.name, self.dim, self.backend = self.inner.name, self.inner.dim, "onnx-trunc16"
        self.fingerprint = self.inner.fingerprint

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


@pytest.fixture
def truncating_backend(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    backend = backends.Backend("onnx-trunc16", "ONNX Runtime reading 16 word pieces", ("onnxruntime",),
                               lambda d, t, b: _Truncating(d), lambda: "onnx-trunc16-test")
    monkeypatch.setitem(backends.BACKENDS, backend.name, backend)
    return backend.name


def test_a_backend_failing_its_check_is_refused_by_name(truncating_backend: str, data_dir: Path,
                                                        loaded: dict) -> None:
    with pytest.raises(VectorUnavailable) as err:
        backends.load(_config(truncating_backend, data_dir), sample=SAMPLE)
    assert err.value.code == "no_embedder"
    message = str(err.value)
    assert "'onnx-trunc16' failed its fidelity check against torch fp32" in message
    assert "cosine min" in message and 'backend = "auto"' in message
    store = backends.fidelity_store(data_dir)
    assert store.result(truncating_backend).passed is False
    # its vectors never mix with anyone's
    assert not fidelity.compatible(truncating_backend, backends.REFERENCE, store)
    assert not fidelity.compatible(backends.REFERENCE, truncating_backend, store)


def test_auto_skips_a_failing_backend_and_takes_the_next(truncating_backend: str, data_dir: Path, loaded: dict,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "AUTO_ORDER", (truncating_backend, "onnx-int8", backends.REFERENCE))
    chosen = backends.load(_config("auto", data_dir), sample=SAMPLE)
    assert chosen.backend == "onnx-int8"


def test_auto_takes_the_first_backend_of_the_fixed_order(data_dir: Path, loaded: dict) -> None:
    chosen = backends.load(_config("auto", data_dir), sample=SAMPLE)
    expected = next(n for n in backends.AUTO_ORDER if backends.BACKENDS[n].auto_needs() is None)
    assert chosen.backend == expected
    assert expected == "openvino-int8"  # needs no particular CPU feature, first in the order


def test_names_and_aliases(data_dir: Path, loaded: dict) -> None:
    assert backends.load(_config("torch", data_dir), sample=SAMPLE).backend == backends.REFERENCE
    with pytest.raises(ConfigError, match=r"\[embedder\] backend: unknown backend 'onnx'; expected one of auto"):
        backends.load(_config("onnx", data_dir))


def test_which_backends_may_search_each_others_vectors(data_dir: Path, loaded: dict) -> None:
    store = backends.fidelity_store(data_dir)
    for a in (backends.REFERENCE, *FAST):
        for b in (backends.REFERENCE, *FAST):
            assert fidelity.compatible(a, b, store), (a, b)  # all passed; on this sample every pair holds
    assert backends.compatible("torch", "onnx-int8", data_dir)  # the alias names the reference
    assert not fidelity.compatible("onnx-int8", "never-checked", store)


def test_tokenizer_batches_cover_every_text_once_sorted_by_length() -> None:
    tok = Tokenizer(artifacts.weights_dir())
    texts = ["a", "a b c d e f", "word " * 400, "", "a b c"]
    batches = list(tok.batches(texts, max_batch=2, budget=600))
    rows = sorted(int(r) for b in batches for r in b.rows)
    assert rows == list(range(len(texts)))
    lengths = [b.input_ids.shape[1] for b in batches]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] == 256  # truncated at 256 word pieces
    assert all(b.input_ids.shape[0] * b.input_ids.shape[1] <= 600 or b.input_ids.shape[0] == 1 for b in batches)
    for b in batches:
        assert (b.attention_mask.sum(1) >= 2).all()  # [CLS] and [SEP] at least


def test_a_failed_export_leaves_nothing_and_says_where(tmp_path: Path) -> None:
    def build(folder: Path) -> None:
        (folder / "model.onnx.partial").write_bytes(b"half a model")
        raise OSError("No space left on device")

    with pytest.raises(VectorUnavailable, match=r"exporting onnx-int8-v1 into .*onnx-int8-v1 failed: OSError: No space"):
        artifacts.artifact(tmp_path, "onnx-int8-v1", build, done="model.onnx")
    assert [p.name for p in tmp_path.iterdir()] == [".lock"]


def test_an_export_killed_midway_is_cleared_by_the_next(tmp_path: Path) -> None:
    stale = tmp_path / ".onnx-int8-v1-abc123"  # what a SIGKILL during an export leaves
    stale.mkdir()
    (stale / "model.onnx").write_bytes(b"half a model")
    built = artifacts.artifact(tmp_path, "onnx-int8-v1", lambda f: (f / "model.onnx").write_bytes(b"model"),
                               done="model.onnx")
    assert (built / "model.onnx").read_bytes() == b"model"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "onnx-int8-v1"]


def test_openvino_tools_report_nothing_about_the_user(loaded: dict) -> None:
    """OpenVINO's converter and NNCF send usage telemetry unless the user opted out in their home
    directory; Oaken blocks the telemetry package, so both fall back to their stubs."""
    import sys

    import openvino.tools.ovc.convert_impl as convert_impl

    assert sys.modules["openvino_telemetry"] is None
    assert convert_impl.tm.__name__ == "openvino.tools.ovc.telemetry_stub"
    with pytest.raises(ImportError):
        import openvino_telemetry  # noqa: F401


def _one_text_batches(loaded: dict) -> Iterator[Batch]:
    """One text alone, cut at every length from 2 to 256 tokens."""
    ids = loaded["onnx-fp32"]._tokenizer.encode([" ".join(SAMPLE.documents[:3])])[0]
    assert len(ids) == 256  # the longest the model reads
    for length in range(2, 257):
        seq = np.array([ids[:length]], dtype=np.int64)
        yield Batch(np.arange(1), seq, np.ones_like(seq), np.zeros_like(seq))


@pytest.fixture(scope="module")
def fp32_by_length(loaded: dict) -> list[np.ndarray]:
    """The reference's vector of each of _one_text_batches, computed once for every backend."""
    return [loaded["onnx-fp32"]._run(batch)[0] for batch in _one_text_batches(loaded)]


@pytest.mark.parametrize("name", ("onnx-int8", "openvino-int8"))
def test_every_length_gives_the_same_vector_as_fp32(name: str, loaded: dict, fp32_by_length: list) -> None:
    """One text alone, at every length from 2 to 256 tokens: OpenVINO's int8 graph was wrong at
    exactly 32 tokens on some CPUs (cosine 0.87) while the sample, padded longer, passed."""
    backend = loaded[name]
    worst = []
    for batch, ref in zip(_one_text_batches(loaded), fp32_by_length, strict=True):
        length = batch.input_ids.shape[1]
        got = backend._run(batch)[0]
        cos = float(got @ ref / (np.linalg.norm(got) * np.linalg.norm(ref)))
        worst.append((round(cos, 3), length))
    assert min(worst)[0] > fidelity.COS_MIN, sorted(worst)[:5]
    if name == "openvino-int8":  # what the embedding pass asks before repairing an older store
        assert isinstance(backend.wrong_without_padding(), bool)
