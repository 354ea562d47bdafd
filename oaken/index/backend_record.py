"""Which backends built the stored vectors (state.json records them, oaken.index.vectors), and
whether a query's backend may search them: the cached fidelity checks decide
(oaken.index.backends.compatible). The embedding pass rebuilds the vectors of a backend that may
not be mixed with the configured one's; a search leaves them out."""

from __future__ import annotations

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


def int8_repair_due(store: VectorStore, embedder: Embedder, data_dir: Path) -> bool:
    """True once when vectors/ (and the embedding cache) may hold openvino-int8 vectors an older
    Oaken computed for batches of exactly 32 tokens on a CPU whose int8 kernel is wrong there
    (oaken.index.backends.openvino.INT8_BAD_LENGTHS): every text of such a batch got a wrong
    vector. Decided by running this CPU's kernel both ways (milliseconds); on a CPU that gets it
    right, or a store without openvino-int8 rows, nothing is rebuilt. Recorded in REPAIRS_FILE
    by `int8_repair_done` so the check runs once per data directory."""
    import json

    try:
        done = json.loads((Path(data_dir) / REPAIRS_FILE).read_text()).get(INT8_32, False)
    except (OSError, ValueError, AttributeError):
        done = False
    if done:
        return False
    if store.count() == 0 or "openvino-int8" not in stored_backends(store):
        int8_repair_done(data_dir)  # rows written from now on carry the fix
        return False
    probe = getattr(embedder, "wrong_without_padding", None)
    if backend_of(embedder) != "openvino-int8" or probe is None:
        return False  # the kernel that wrote them is not loaded: asked again on a later pass
    if probe():
        return True
    int8_repair_done(data_dir)
    return False


def int8_repair_done(data_dir: Path) -> None:
    import json

    from oaken.index.vector_files import write_json

    path = Path(data_dir) / REPAIRS_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        record = {}
    if not isinstance(record, dict):
        record = {}
    write_json(path, {**record, INT8_32: True})
