"""The fidelity check: does a fast backend still give torch fp32's vectors, closely enough?

Run the first time a backend is used in a data directory, on a fixed sample of Enron text shipped
with Oaken (oaken.index.fidelity_sample reads oaken/index/backends/enron_sample.json: 300 chunks of
20-230 words and 60 short queries, from messages the int8 calibration never saw). Three measures
against torch fp32:
  cos_mean, cos_min  cosine between the backend's vector and fp32's for the same chunk;
  overlap            top-10 overlap: each query's 10 nearest chunks, backend against backend,
                     compared with fp32 against fp32 (the share of the ten they agree on).
A backend passes when all three reach the thresholds below. The result and the backend's vectors
of the sample are cached in data_dir/models/<weights>/fidelity/, keyed by the backend's identity
(exported artifact, runtime version, sample), so the check runs once.

The same cached vectors decide whether documents embedded by one backend may be searched with
queries of another (`compatible`): the top-10 overlap of the mixed pair against fp32 must pass the
same overlap threshold, and both must have passed their own check.

Thresholds, from measurements on this sample with the installed weights (2026-11, 2 cores,
AVX512-VNNI/BF16; scripts/bench_embed_backends.py prints the same measures):
                     cos mean / cos min / top-10 overlap
  passing backends   onnx-fp32 1.0000 / 1.0000 / 1.000; openvino (bf16) 1.0000 / 0.9999 / 0.992;
                     torch-bf16 1.0000 / 0.9999 / 0.987; openvino-int8 0.9963 / 0.9899 / 0.937;
                     onnx-int8 0.9922 / 0.9802 / 0.863 (its recall@10 on an Enron task was
                     unchanged: 0.415 against fp32's 0.41, machine-facts.md)
  failing variants   per-tensor int8 weights 0.9501 / 0.8884 / 0.777; reading only 128 word
                     pieces 0.9657 / 0.5632 / 0.853; only 64: 0.9059 / 0.3609 / 0.712; another
                     model's space (model2vec of the same model): overlap 0.18, recall 0.41 -> 0.31
  Each threshold sits about midway between the worst passing backend and the best failing
  variant: COS_MEAN 0.98 (0.9922 / 0.9657), COS_MIN 0.93 (0.9802 / 0.8884), OVERLAP 0.82
  (0.863 / 0.777). Truncation keeps the overlap (short queries barely move) and is caught by the
  cosines, which is why all three are needed.
  Mixed pairs (documents of one, queries of another) all kept an overlap of 0.89 or more, e.g.
  onnx-int8 documents with fp32 queries 0.895, openvino-int8 documents with fp32 queries 0.943.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from oaken.errors import VectorUnavailable
from oaken.index.fidelity_sample import SAMPLE_FILE, Sample, load_sample  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from oaken.index.embedder_protocol import Embedder

REFERENCE = "torch-fp32"
COS_MEAN = 0.98
COS_MIN = 0.93
OVERLAP = 0.82
TOP_K = 10
CHECK_VERSION = 1  # bump when the measures or thresholds change: cached results are redone


@dataclass(frozen=True)
class Vectors:
    """One backend's vectors of the sample."""

    documents: np.ndarray  # (n_docs, dim), unit norm
    queries: np.ndarray  # (n_queries, dim), unit norm
    sample: str = ""  # digest of the sample they embed: vectors of different samples never meet


@dataclass(frozen=True)
class Fidelity:
    backend: str
    identity: str  # what was checked: the backend's artifact, runtime and the sample
    documents: int
    queries: int
    cos_mean: float
    cos_min: float
    overlap: float
    passed: bool
    reason: str  # why it failed, or "" when it passed

    def describe(self) -> str:
        return (
            f"cosine to torch fp32 {self.cos_mean:.4f} mean / {self.cos_min:.4f} min, "
            f"top-{TOP_K} overlap {self.overlap:.3f} on {self.documents} chunks and {self.queries} queries"
        )


def embed_sample(embedder: Embedder, sample: Sample) -> Vectors:
    return Vectors(
        np.asarray(embedder.embed_documents(list(sample.documents)), dtype=np.float32),
        np.asarray(embedder.embed_documents(list(sample.queries)), dtype=np.float32),
        sample.digest(),
    )


def top_k(queries: np.ndarray, documents: np.ndarray, k: int = TOP_K) -> np.ndarray:
    """Indices of each query's k nearest documents by cosine (rows are unit norm)."""
    k = min(k, documents.shape[0])
    scores = queries @ documents.T
    return np.argpartition(-scores, k - 1, axis=1)[:, :k]


def overlap(queries: np.ndarray, documents: np.ndarray, ref: Vectors, k: int = TOP_K) -> float:
    """Mean share of each query's top k that `queries` on `documents` shares with fp32 on fp32."""
    got, want = top_k(queries, documents, k), top_k(ref.queries, ref.documents, k)
    shared = [len(set(a.tolist()) & set(b.tolist())) / got.shape[1] for a, b in zip(got, want)]
    return float(np.mean(shared)) if shared else 1.0


def measure(backend: str, identity: str, vectors: Vectors, ref: Vectors) -> Fidelity:
    cos = np.sum(vectors.documents * ref.documents, axis=1)
    qcos = np.sum(vectors.queries * ref.queries, axis=1)
    allcos = np.concatenate([cos, qcos])
    cos_mean, cos_min = float(allcos.mean()), float(allcos.min())
    ov = overlap(vectors.queries, vectors.documents, ref)
    failures = [
        f"{name} {value:.4f} < {limit}"
        for name, value, limit in (
            ("cosine mean", cos_mean, COS_MEAN),
            ("cosine min", cos_min, COS_MIN),
            ("top-10 overlap", ov, OVERLAP),
        )
        if value < limit
    ]
    return Fidelity(backend, identity, len(cos), len(qcos), cos_mean, cos_min, ov, not failures, "; ".join(failures))


class FidelityStore:
    """data_dir/models/<weights>/fidelity/: <backend>.json (the result) and <backend>.npz (vectors)."""

    def __init__(self, root: Path):
        self.root = Path(root) / "fidelity"

    def _paths(self, backend: str) -> tuple[Path, Path]:
        return self.root / f"{backend}.json", self.root / f"{backend}.npz"

    def result(self, backend: str, identity: str | None = None) -> Fidelity | None:
        """The cached result, if one was made for `identity` (any identity when None)."""
        path, _ = self._paths(backend)
        try:
            result = Fidelity(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        return result if identity is None or result.identity == identity else None

    def vectors(self, backend: str, identity: str | None = None) -> Vectors | None:
        """The backend's cached vectors of the sample (checked against its result's identity)."""
        if backend != REFERENCE and self.result(backend, identity) is None:
            return None
        _, path = self._paths(backend)
        try:
            with np.load(path) as z:
                if identity is not None and str(z["identity"]) != identity:
                    return None
                return Vectors(z["documents"], z["queries"], str(z["sample"]))
        except (OSError, KeyError, ValueError):
            return None

    def save(self, backend: str, identity: str, vectors: Vectors, result: Fidelity | None) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        path, npz = self._paths(backend)
        tmp = npz.with_suffix(".tmp.npz")
        np.savez(
            tmp,
            documents=vectors.documents,
            queries=vectors.queries,
            identity=np.array(identity),
            sample=np.array(vectors.sample),
        )
        tmp.replace(npz)
        if result is not None:
            tmp_json = path.with_suffix(".tmp")
            tmp_json.write_text(json.dumps(asdict(result), indent=1) + "\n")
            tmp_json.replace(path)


def identity_of(backend: str, artifact: str, sample: Sample) -> str:
    return f"{backend}|{artifact}|{sample.digest()}|check-v{CHECK_VERSION}"


def reference_vectors(
    store: FidelityStore, sample: Sample, artifact: str, load_reference: Callable[[], Embedder]
) -> Vectors:
    """torch fp32's vectors of the sample, computed once per data directory and weights."""
    identity = identity_of(REFERENCE, artifact, sample)
    ref = store.vectors(REFERENCE, identity)
    if ref is None:
        ref = embed_sample(load_reference(), sample)
        store.save(REFERENCE, identity, ref, None)
    return ref


def check(
    backend: str,
    embedder: Embedder,
    *,
    store: FidelityStore,
    artifact: str,
    reference_artifact: str,
    load_reference: Callable[[], Embedder],
    sample: Sample | None = None,
) -> Fidelity:
    """The cached result for this backend's identity, or a new measurement (then cached)."""
    sample = sample or load_sample()
    identity = identity_of(backend, artifact, sample)
    cached = store.result(backend, identity)
    if cached is not None:
        return cached
    vectors = embed_sample(embedder, sample)
    ref = reference_vectors(store, sample, reference_artifact, load_reference)
    result = measure(backend, identity, vectors, ref)
    store.save(backend, identity, vectors, result)
    return result


def require(result: Fidelity) -> None:
    """Refuse a backend that failed its check, saying by how much and what to do."""
    if not result.passed:
        raise VectorUnavailable(
            "no_embedder",
            f"[embedder] backend {result.backend!r} failed its fidelity check against torch fp32 "
            f'({result.reason}; {result.describe()}): it is not used; set [embedder] backend = "auto" '
            f'or "torch-fp32"',
        )


def compatible(doc_backend: str, query_backend: str, store: FidelityStore) -> bool:
    """May chunks embedded by `doc_backend` be searched with `query_backend`'s query vectors?
    Yes for the same backend; otherwise both must have passed their checks here and the mixed
    pair must keep the top-10 overlap threshold against fp32 on fp32. Unknown: no."""
    if doc_backend == query_backend:
        return True
    ref = store.vectors(REFERENCE)
    docs = _passed_vectors(store, doc_backend)
    queries = _passed_vectors(store, query_backend)
    if (
        ref is None
        or docs is None
        or queries is None
        or not ref.sample
        or {docs.sample, queries.sample} != {ref.sample}
    ):
        return False
    return overlap(queries.queries, docs.documents, ref) >= OVERLAP


def _passed_vectors(store: FidelityStore, backend: str) -> Vectors | None:
    if backend == REFERENCE:
        return store.vectors(REFERENCE)
    result = store.result(backend)
    if result is None or not result.passed:
        return None
    return store.vectors(backend, result.identity)
