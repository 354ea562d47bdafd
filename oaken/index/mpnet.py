"""`[embedder] model = "all-mpnet-base-v2"`: the stronger embedder, for a user who will trade
indexing time for meaning search (docs/meaning-at-scale.md: on the real dev questions it puts a
right answer of a paraphrase in the vector side's top 10 for 0.63 of them against MiniLM's 0.46,
at about 9x MiniLM's CPU per chunk and 768 dimensions).

Backends: "openvino" (the float graph at the CPU's own precision, bf16 where native; the only fast
recipe that passed the fidelity bar: both int8 recipes measured failed it) and "torch-fp32"
(sentence-transformers, the reference). "auto" takes openvino when the `fast` extra is installed
and its fidelity check against torch fp32 passes, else torch. The weights are checked against the
published model's hashes first (oaken.index.mpnet_weights).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from oaken.errors import VectorUnavailable
from oaken.index.mpnet_weights import INSTALL, NAME, models_root, weights_dir

if TYPE_CHECKING:
    from oaken.config import Config
    from oaken.index.embedder_protocol import Embedder

DIM = 768
BACKENDS = ("auto", "torch", "torch-fp32", "openvino")
OPENVINO = f"{NAME}@openvino"
TORCH = f"{NAME}@torch-fp32"


def load(config: Config, *, data_dir: Path | None = None) -> Embedder:
    from oaken import log
    from oaken.config import ensure_data_dir

    e = config.embedder
    backend = "torch-fp32" if e.backend == "torch" else e.backend
    if backend not in BACKENDS:
        raise VectorUnavailable(
            "no_embedder",
            f"{config.source or 'config'}: [embedder] backend {e.backend!r} is not available for {NAME} "
            f"(its int8 recipes fail the fidelity check); use one of {', '.join(BACKENDS)}",
        )
    where = Path(data_dir) if data_dir is not None else ensure_data_dir(config)
    weights = weights_dir(where)
    if backend == "torch-fp32":
        return load_torch(weights, e.threads, e.batch_size)
    if backend == "auto":
        from oaken.index.backends import installed

        missing = installed("openvino")
        if missing is not None:
            return load_torch(weights, e.threads, e.batch_size)
        try:
            return load_openvino(where, weights, e.threads, e.batch_size)
        except VectorUnavailable as exc:
            log.get().warning("embedder_backend_refused", backend=OPENVINO, reason=str(exc))
            return load_torch(weights, e.threads, e.batch_size)
    return load_openvino(where, weights, e.threads, e.batch_size)


def load_torch(weights: Path, threads: int, batch_size: int) -> Embedder:
    from oaken.index.minilm import MiniLMEmbedder, _dimension, load_sentence_transformer

    model = load_sentence_transformer(weights, threads, NAME, INSTALL)
    if _dimension(model) != DIM:
        raise VectorUnavailable(
            "no_embedder", f"embedder {NAME}: the model at {weights} does not give {DIM} dimensions"
        )
    embedder = MiniLMEmbedder(model, batch_size=batch_size, backend=TORCH)
    embedder.name, embedder.dim = NAME, DIM
    return embedder


def load_openvino(data_dir: Path, weights: Path, threads: int, batch_size: int) -> Embedder:
    """The float graph, exported once (ONNX, then OpenVINO IR) and checked once against torch fp32
    on the shipped sample (oaken.index.fidelity; the reference's vectors are cached beside it)."""
    from oaken.index import fidelity
    from oaken.index.backends import _art, artifacts, onnx, openvino

    root = models_root(data_dir)
    try:
        source = artifacts.artifact(
            root, onnx.FP32, lambda tmp: onnx.export_fp32(weights, tmp), done=onnx.MODEL_FILE, model=NAME
        )
        ir = artifacts.artifact(
            root,
            openvino.FLOAT,
            lambda tmp: openvino.convert(source / onnx.MODEL_FILE, tmp),
            done=openvino.MODEL_FILE,
            model=NAME,
        )
        embedder = openvino.OpenVinoEmbedder(
            OPENVINO, ir / openvino.MODEL_FILE, weights, threads=threads, batch_size=batch_size
        )
    except VectorUnavailable:
        raise
    except Exception as exc:  # an engine that cannot compile or run the model on this machine
        raise VectorUnavailable("no_embedder", f"[embedder] backend {OPENVINO!r} cannot run here: {exc}") from exc
    embedder.name, embedder.dim = NAME, DIM
    result = fidelity.check(
        "openvino",
        embedder,
        store=fidelity.FidelityStore(root),
        artifact=_art("openvino-v1", "openvino", "torch")(),
        reference_artifact=_art("st", "torch", "sentence-transformers", "transformers")(),
        load_reference=lambda: load_torch(weights, threads, batch_size),
    )
    fidelity.require(result)
    return embedder
