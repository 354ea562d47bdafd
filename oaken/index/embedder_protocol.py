"""What an embedder is: the interface the embedding pass, the vector retriever, the backends and
the fidelity check share. A leaf: it imports no other part of oaken.index, so each of them may
import it without importing the others."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:
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
