"""Which backends built the stored vectors (state.json records them, oaken.index.vectors), and
whether a query's backend may search them: the cached fidelity checks decide
(oaken.index.backends.compatible). The embedding pass rebuilds the vectors of a backend that may
not be mixed with the configured one's; a search leaves them out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from oaken.index.backends import REFERENCE
from oaken.index.embedders import backend_of
from oaken.index.minilm import NAME as MINILM

if TYPE_CHECKING:
    from oaken.index.embedder_protocol import Embedder
    from oaken.index.vectors import VectorStore


def stored_backends(store: VectorStore) -> list[str]:
    """The backends that built the stored vectors; a store from before the record, holding rows
    of all-MiniLM-L6-v2, was built by torch fp32 (the only backend then)."""
    recorded = store.backends()
    if recorded or not store.exists() or store.count() == 0:
        return recorded
    fp = store.fingerprint()
    return [REFERENCE] if fp is not None and fp.model.startswith(f"{MINILM}:") else []


def incompatible_with(doc_backends: Sequence[str], query_backend: str, data_dir: Path) -> list[str]:
    """The stored backends whose vectors must not be searched with `query_backend`'s vectors
    (oaken.index.backends.compatible: the cached fidelity checks decide). Only backends of
    all-MiniLM-L6-v2 constrain each other; any other embedder (concept, one registered by a
    test or plugin) is judged by its fingerprint alone, which the store has checked already."""
    from oaken.index import backends

    known = {*backends.BACKENDS, *backends.ALIASES}
    if backends.canonical(query_backend) not in known:
        return []
    return [
        b
        for b in doc_backends
        if b in known
        and backends.canonical(b) != backends.canonical(query_backend)
        and not backends.compatible(b, query_backend, data_dir)
    ]


def incompatible_backend(store: VectorStore, embedder: Embedder, data_dir: Path) -> bool:
    """True when vectors/ holds rows of a backend whose vectors may not meet `embedder`'s."""
    if store.count() == 0:
        return False
    bad = incompatible_with(stored_backends(store), backend_of(embedder), data_dir)
    if bad:
        from oaken import log

        log.get().warning(
            "vectors_rebuilt_for_backend",
            stored=bad,
            backend=backend_of(embedder),
            note="the fidelity checks do not allow mixing them",
        )
    return bool(bad)


REPAIRS_FILE = "vector-repairs.json"  # in the data directory: repairs of stored vectors done once
INT8_32 = "openvino-int8-32"


def int8_repair_due(embedder: Embedder, data_dir: Path) -> bool:
    """True once when the embedding cache and vectors/ may hold openvino-int8 vectors an older
    Oaken computed for batches of exactly 32 tokens on a CPU whose int8 kernel is wrong there
    (oaken.index.backends.openvino.INT8_BAD_LENGTHS): every text of such a batch got a wrong
    vector. Decided by running the loaded int8 kernel both ways (milliseconds); a CPU that gets
    it right is recorded at once. The cache is asked about too, not only vectors/: it is keyed by
    the model, so a rebuilt or deleted vectors/ would be filled from it again."""
    if _repairs(data_dir).get(INT8_32):
        return False
    probe = getattr(embedder, "wrong_without_padding", None)
    if backend_of(embedder) != "openvino-int8" or probe is None:
        return False  # the kernel that may have written them is not loaded: asked on a later pass
    if probe():
        return True
    int8_repair_done(data_dir)
    return False


def int8_repair_done(data_dir: Path) -> None:
    from oaken.index.vector_files import write_json

    write_json(Path(data_dir) / REPAIRS_FILE, {**_repairs(data_dir), INT8_32: True})


def _repairs(data_dir: Path) -> dict:
    try:
        record = json.loads((Path(data_dir) / REPAIRS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}
