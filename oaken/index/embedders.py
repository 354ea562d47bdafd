"""Embedders behind one interface (oaken.index.embedder_protocol): the real all-MiniLM-L6-v2
and the deterministic concept stand-in. Implementations live in their own modules and are
imported only when used, since importing sentence-transformers alone costs seconds."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Callable

from oaken.errors import ConfigError, VectorUnavailable
from oaken.index.embedder_protocol import Embedder

if TYPE_CHECKING:
    from oaken.config import Config


# The [embedder] model names and how each is built. Another backend or model registers here
# (see `register`); "none" is keyword mode by choice and builds nothing.
EmbedderFactory = Callable[["Config"], Embedder]
_FACTORIES: dict[str, EmbedderFactory] = {}
_LOADED: dict[tuple, Embedder] = {}
_LOCK = threading.RLock()  # a factory may build on another model through load_embedder


def register(name: str, factory: EmbedderFactory) -> None:
    """Make `[embedder] model = name` build its embedder with `factory(config)`."""
    _FACTORIES[name] = factory


def _minilm(config: Config) -> Embedder:
    """all-MiniLM-L6-v2 on `[embedder] backend` (oaken.index.backends): every backend keeps the
    fingerprint "all-MiniLM-L6-v2:384", so a backend change keeps the table; which backends built
    the stored vectors is recorded beside them (see oaken.index.embedding)."""
    from oaken.index import backends

    return backends.load(config)


def backend_of(embedder: Embedder) -> str:
    """The name of what runs `embedder`: a backend of all-MiniLM-L6-v2, or the model's own name."""
    return str(getattr(embedder, "backend", embedder.name))


def _concept(config: Config) -> Embedder:
    try:
        from oaken.index.concept import ConceptEmbedder
    except ImportError as exc:
        raise VectorUnavailable("no_embedder", f"embedder 'concept': cannot be imported: {exc}") from exc
    # benchmarks give the stand-in a model's width (all-MiniLM-L6-v2: 384), so a million
    # messages' vectors cost to store and search what the real model's would (scripts/bench_scale.py)
    width = os.environ.get("OAKEN_CONCEPT_DIM", "")
    if not width:
        return ConceptEmbedder()
    if not width.isdigit() or not 8 <= int(width) <= 4096:
        raise VectorUnavailable("no_embedder", f"OAKEN_CONCEPT_DIM={width!r}: give a width from 8 to 4096, or unset it")
    return ConceptEmbedder(int(width))


def _mpnet(config: Config) -> Embedder:
    """all-mpnet-base-v2 (the `mpnet` extra): its own backends, weights checked by hash."""
    from oaken.index import mpnet

    return mpnet.load(config)


register("all-MiniLM-L6-v2", _minilm)
register("all-mpnet-base-v2", _mpnet)
register("concept", _concept)


def load_embedder(config: Config, *, cached: bool = True) -> Embedder | None:
    """The embedder `[embedder] model` names, or None for "none" (keyword mode by choice).

    Loaded once per process and kept (the daemon answers searches with it warm). Raises
    VectorUnavailable("no_embedder") when it cannot be loaded, and never downloads anything."""
    e = config.embedder
    if e.model == "none":
        return None
    factory = _FACTORIES.get(e.model)
    if factory is None:
        raise ConfigError(
            f"{config.source or 'config'}: [embedder] model: unknown model {e.model!r}; "
            f"known: {', '.join([*_FACTORIES, 'none'])}"
        )
    key = (e.model, e.backend, e.threads, e.batch_size)
    with _LOCK:
        if cached and key in _LOADED:
            return _LOADED[key]
        embedder = factory(config)
        if cached:
            _LOADED[key] = embedder
        return embedder
