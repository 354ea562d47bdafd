"""The embedding cache: real SQLite in a temp dir, the concept embedder as the encoder."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import apsw
import numpy as np
import pytest

from oaken.index.concept import ConceptEmbedder
from oaken.index.embed_cache import EmbedCache, embed_cached, open_cache, text_hash


class Counting:
    """The concept embedder, counting the texts it is asked to encode."""

    def __init__(self) -> None:
        self.embedder = ConceptEmbedder()
        self.seen: list[str] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        return self.embedder.embed_documents(texts)


def test_each_text_is_encoded_once_across_calls_repeats_and_reopening(tmp_path: Path) -> None:
    enc = Counting()
    dim, model = enc.embedder.dim, enc.embedder.fingerprint
    texts = ["the flight to Lisbon", "invoice INV-1005 is due", "the flight to Lisbon", "weekly sync moved"]
    with open_cache(tmp_path) as cache:
        first, n = embed_cached(texts, model=model, dim=dim, cache=cache, encode=enc)
    assert n == 3 and enc.seen == ["the flight to Lisbon", "invoice INV-1005 is due", "weekly sync moved"]
    assert np.allclose(first, enc.embedder.embed_documents(texts), atol=1e-6)
    with open_cache(tmp_path) as cache:  # a rebuild, a re-sync: another process, same file
        again, n = embed_cached(list(reversed(texts)) + ["a new text"], model=model, dim=dim, cache=cache,
                                encode=enc)
        assert cache.count(model) == 4
    assert n == 1 and enc.seen[-1] == "a new text"
    assert np.array_equal(again[:4], first[::-1])


def test_vectors_are_kept_per_model_and_length(tmp_path: Path) -> None:
    with EmbedCache(tmp_path / "c.db") as cache:
        h = text_hash("hello")
        cache.put_many("a:4", [(h, np.array([1, 0, 0, 0], np.float32))])
        assert np.array_equal(cache.get_many("a:4", [h], 4)[h], [1, 0, 0, 0])
        assert cache.get_many("b:4", [h], 4) == {}  # another model's vector is not this one's
        assert cache.get_many("a:4", [h], 8) == {}  # nor one of another length
        cache.put_many("b:4", [(h, np.array([0, 1, 0, 0], np.float32))])
        assert cache.drop_other_models("b:4") == 1
        assert cache.count() == 1 and cache.count("b:4") == 1


def test_an_encoder_returning_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    with open_cache(tmp_path) as cache:
        with pytest.raises(ValueError, match=r"returned shape \(1, 3\) for 2 texts"):
            embed_cached(["a", "b"], model="m", dim=3, cache=cache, encode=lambda t: np.zeros((1, 3), np.float32))
        assert cache.count() == 0


def test_hash_is_of_the_exact_text() -> None:
    assert text_hash("Lisbon") != text_hash("lisbon") != text_hash("Lisbon ")
    assert len(text_hash("x")) == 16 and text_hash("x") == text_hash("x")
    assert text_hash("\ud800 lone surrogate") != text_hash("lone surrogate")


def test_a_cache_of_the_first_schema_keeps_its_vectors(tmp_path: Path) -> None:
    path = tmp_path / "embed_cache.db"
    old = apsw.Connection(str(path))
    old.execute("CREATE TABLE vectors(model TEXT NOT NULL, hash BLOB NOT NULL, vector BLOB NOT NULL, "
                "PRIMARY KEY(model, hash)) WITHOUT ROWID")
    kept = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    old.execute("INSERT INTO vectors VALUES (?, ?, ?)", ("m", text_hash("kept"), kept.tobytes()))
    old.close()
    with EmbedCache(path) as cache:
        vectors, encoded = embed_cached(["kept"], model="m", dim=3, cache=cache,
                                        encode=lambda t: np.zeros((len(t), 3), np.float32))
        assert encoded == 0 and np.array_equal(vectors[0], kept)  # found, not computed again
        assert cache.db.execute("SELECT name FROM sqlite_master WHERE name = 'vectors'").fetchall() == []
    with EmbedCache(path) as cache:  # opening again changes nothing
        assert cache.count("m") == 1


def test_the_cache_file_is_private(tmp_path: Path) -> None:
    """It is keyed by the text of the user's mail: readable by its owner only, like raw.db."""
    import stat

    with open_cache(tmp_path / "data") as cache:
        path = cache.path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
