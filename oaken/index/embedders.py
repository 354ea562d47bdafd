"""Embedders behind one interface: the real all-MiniLM-L6-v2 and the deterministic concept
stand-in. Implementations live in their own modules and are imported only when used, since
importing sentence-transformers alone costs seconds."""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np


class Embedder(Protocol):
    """Unit-norm float32 vectors; the fingerprint names model, dimension and anything else that
    makes two vectors incomparable (a stored vector with another fingerprint is stale)."""

    name: str  # the [embedder] model name, e.g. "all-MiniLM-L6-v2" or "concept"
    dim: int

    @property
    def fingerprint(self) -> str: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...  # shape (len(texts), dim)

    def embed_query(self, text: str) -> np.ndarray: ...  # shape (dim,)
