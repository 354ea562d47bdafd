"""Backends of all-MiniLM-L6-v2: the same weights run by different engines, chosen by
`[embedder] backend`.

| backend        | engine                                      | needs              |
|----------------|---------------------------------------------|--------------------|
| torch-fp32     | sentence-transformers, float32 (reference)  | (base install)     |
| torch-bf16     | transformers in bfloat16                    | (base install)     |
| onnx-fp32      | ONNX Runtime, own export of the weights     | oaken[fast]        |
| onnx-int8      | ONNX Runtime, int8 weights (dynamic)        | oaken[fast]        |
| openvino       | OpenVINO at the CPU's own precision (bf16)  | oaken[fast]        |
| openvino-int8  | OpenVINO, static int8 calibrated by NNCF    | oaken[fast]        |

"torch" is another name for torch-fp32. "auto" (the default) takes the first backend of
AUTO_ORDER that is installed, suits this CPU, loads and passes its fidelity check against torch
fp32 (oaken.index.fidelity); torch-fp32 is last and always qualifies. The order is fixed (from
measured throughput, ../shared/notes/machine-facts.md) and no timing is taken at run time, so the
choice cannot flip with noise. A backend named explicitly that fails its check is refused with
VectorUnavailable("no_embedder"); under "auto" the failure is logged and the next one is tried.

Exports live in data_dir/models/ (oaken.index.backends.artifacts) and are made once, offline.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from oaken.errors import ConfigError, VectorUnavailable

if TYPE_CHECKING:
    from oaken.config import Config
    from oaken.index.embedder_protocol import Embedder
    from oaken.index.fidelity import Fidelity
    from oaken.index.fidelity_sample import Sample

IN_CHILD = "OAKEN_BACKEND_PREPARE"  # set by oaken.index.backends.prepare: load_backend then works in-process
_STOP_PREPARING = threading.Event()  # set once, when the process is shutting down
AUTO = "auto"
REFERENCE = "torch-fp32"
ALIASES = {"torch": REFERENCE}


@dataclass(frozen=True)
class Backend:
    name: str
    summary: str
    modules: tuple[str, ...]  # Python packages it runs on
    load: Callable[[Path, int, int], Embedder]  # (data_dir, threads, batch_size)
    artifact: Callable[[], str]  # identity of what runs: export version and runtime versions
    auto_needs: Callable[[], str | None] = lambda: None  # why "auto" skips it on this CPU, or None


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "missing"


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _needs_bf16() -> str | None:
    flags = _cpu_flags()
    return None if {"avx512_bf16", "amx_bf16"} & flags else "this CPU has no native bf16 (AVX512-BF16 or AMX)"


def _cpu_tag() -> str:
    flags = _cpu_flags()
    return "+".join(f for f in ("avx512_vnni", "avx512_bf16", "amx_bf16", "avx2") if f in flags) or "plain"


def _load_torch_fp32(data_dir: Path, threads: int, batch_size: int) -> Embedder:
    from oaken.index.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder.load(threads=threads, batch_size=batch_size, backend="torch")
    embedder.backend = REFERENCE
    return embedder


def _load_torch_bf16(data_dir: Path, threads: int, batch_size: int) -> Embedder:
    from oaken.index.backends.torch_bf16 import TorchBf16Embedder

    return TorchBf16Embedder.load(threads=threads, batch_size=batch_size)


def _load_onnx(int8: bool) -> Callable[[Path, int, int], Embedder]:
    def load(data_dir: Path, threads: int, batch_size: int) -> Embedder:
        from oaken.index.backends import onnx

        return (onnx.load_int8 if int8 else onnx.load_fp32)(data_dir, threads=threads, batch_size=batch_size)

    return load


def _load_openvino(int8: bool) -> Callable[[Path, int, int], Embedder]:
    def load(data_dir: Path, threads: int, batch_size: int) -> Embedder:
        from oaken.index.backends import openvino

        return (openvino.load_int8 if int8 else openvino.load_float)(data_dir, threads=threads, batch_size=batch_size)

    return load


def _art(name: str, *dists: str) -> Callable[[], str]:
    return lambda: "|".join([name, *(f"{d}=={_version(d)}" for d in dists), _cpu_tag()])


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "torch-fp32",
            "sentence-transformers in float32: the reference",
            ("torch", "sentence_transformers"),
            _load_torch_fp32,
            _art("st", "torch", "sentence-transformers", "transformers"),
        ),
        Backend(
            "torch-bf16",
            "transformers in bfloat16",
            ("torch", "transformers"),
            _load_torch_bf16,
            _art("bf16-v1", "torch", "transformers"),
            _needs_bf16,
        ),
        Backend(
            "onnx-fp32",
            "ONNX Runtime, float32 export",
            ("onnxruntime",),
            _load_onnx(False),
            _art("onnx-fp32-v1", "onnxruntime", "torch"),
        ),
        Backend(
            "onnx-int8",
            "ONNX Runtime, int8 weights per channel",
            ("onnxruntime", "onnx"),
            _load_onnx(True),
            _art("onnx-int8-v1", "onnxruntime", "onnx", "torch"),
        ),
        Backend(
            "openvino",
            "OpenVINO at the CPU's precision (bf16 where native)",
            ("openvino",),
            _load_openvino(False),
            _art("openvino-v1", "openvino", "torch"),
            _needs_bf16,
        ),
        Backend(
            "openvino-int8",
            "OpenVINO, static int8 calibrated on the shipped Enron sample",
            ("openvino", "nncf"),
            _load_openvino(True),
            _art("openvino-int8-v1", "openvino", "nncf", "torch"),
        ),
    )
}

# Fastest first, as measured on 2 cores (tokens/s at ~200-token chunks): openvino-int8 20.6k,
# openvino (bf16) 13.9k, onnx-int8 13.5k, torch-bf16 10.3k, onnx-fp32 6.5k, torch-fp32 5.4k.
AUTO_ORDER = ("openvino-int8", "openvino", "onnx-int8", "torch-bf16", "onnx-fp32", "torch-fp32")
NAMES = (AUTO, *BACKENDS, *ALIASES)


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def installed(name: str) -> str | None:
    """Why `name` cannot run here (a package missing), or None when its packages are installed."""
    missing = [m for m in BACKENDS[name].modules if importlib.util.find_spec(m) is None]
    if missing:
        return f"{', '.join(missing)} not installed (pip install -c constraints.txt -e '.[fast]')"
    return None


def available() -> dict[str, str | None]:
    """Every backend with the reason it cannot run here, or None when it can be tried."""
    return {name: installed(name) for name in BACKENDS}


def fidelity_store(data_dir: Path):
    from oaken.index.backends import artifacts
    from oaken.index.fidelity import FidelityStore

    return FidelityStore(artifacts.models_root(data_dir, artifacts.weights_dir()))


def check(
    name: str,
    embedder: Embedder,
    data_dir: Path,
    *,
    threads: int = 0,
    batch_size: int = 64,
    sample: Sample | None = None,
) -> Fidelity:
    """The fidelity of `embedder` (backend `name`) against torch fp32, cached in data_dir."""
    from oaken.index import fidelity

    store = fidelity_store(data_dir)
    ref = BACKENDS[REFERENCE]
    if name == REFERENCE:
        return fidelity.Fidelity(REFERENCE, "", 0, 0, 1.0, 1.0, 1.0, True, "")
    return fidelity.check(
        name,
        embedder,
        store=store,
        artifact=BACKENDS[name].artifact(),
        reference_artifact=ref.artifact(),
        load_reference=lambda: ref.load(data_dir, threads, batch_size),
        sample=sample,
    )


def load_backend(
    name: str, data_dir: Path, *, threads: int = 0, batch_size: int = 64, sample: Sample | None = None
) -> Embedder:
    """Backend `name`, exported if needed and checked; VectorUnavailable if it cannot be used."""
    from oaken.index import fidelity

    name = canonical(name)
    missing = installed(name)
    if missing:
        raise VectorUnavailable("no_embedder", f"[embedder] backend {name!r}: {missing}")
    if sample is None and not _prepared(name, Path(data_dir)):
        _prepare_in_child(name, Path(data_dir), threads, batch_size)
    try:
        embedder = BACKENDS[name].load(Path(data_dir), threads, batch_size)
        result = check(name, embedder, Path(data_dir), threads=threads, batch_size=batch_size, sample=sample)
    except (VectorUnavailable, ConfigError):
        raise
    except Exception as exc:  # an engine that cannot compile or run the model on this machine
        raise VectorUnavailable(
            "no_embedder", f"[embedder] backend {name!r} cannot run here: {type(exc).__name__}: {exc}"
        ) from exc
    fidelity.require(result)
    return embedder


def _prepared(name: str, data_dir: Path) -> bool:
    """Exported and checked already (the check is cached only after the export loaded), or
    being prepared by this very process (the child of _prepare_in_child)?"""
    if name == REFERENCE or os.environ.get(IN_CHILD):
        return True
    from oaken.index import fidelity

    identity = fidelity.identity_of(name, BACKENDS[name].artifact(), fidelity.load_sample())
    return fidelity_store(data_dir).result(name, identity) is not None


def _prepare_in_child(name: str, data_dir: Path, threads: int, batch_size: int) -> None:
    """Export and check `name` in a child process (oaken.index.backends.prepare says why)."""
    import json
    import subprocess
    import sys

    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "oaken.index.backends.prepare",
                name,
                str(data_dir),
                str(threads),
                str(batch_size),
                str(os.getpid()),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
    except OSError:  # no interpreter to start (an embedding application): the caller prepares it here
        return
    while True:
        try:
            out, _ = proc.communicate(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if _STOP_PREPARING.is_set():
                proc.terminate()  # the export's lock and temporary folder make this harmless
                proc.communicate()
                raise VectorUnavailable(
                    "no_embedder",
                    f"[embedder] backend {name!r}: export interrupted because "
                    "Oaken is stopping; it starts again on the next run",
                ) from None
    try:
        answer = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        answer = {
            "ok": False,
            "error": f"[embedder] backend {name!r}: preparing it in a child process failed "
            f"(exit status {proc.returncode}); its log is above",
        }
    if not answer.get("ok"):
        raise VectorUnavailable("no_embedder", str(answer.get("error")))


def stop_preparing() -> None:
    """Interrupt exports under way in child processes, now and later in this process: the daemon
    calls it when it stops, so that no thread of it waits a minute for an export."""
    _STOP_PREPARING.set()


def choose(data_dir: Path, *, threads: int = 0, batch_size: int = 64, sample: Sample | None = None) -> Embedder:
    """The first backend of AUTO_ORDER that can run here and passes its check."""
    from oaken import log

    skipped: list[str] = []
    for name in AUTO_ORDER:
        reason = installed(name) or BACKENDS[name].auto_needs()
        if reason is not None:  # not for this install or CPU: expected, not worth a warning
            skipped.append(f"{name}: {reason}")
            continue
        try:
            return load_backend(name, data_dir, threads=threads, batch_size=batch_size, sample=sample)
        except VectorUnavailable as exc:
            if name == REFERENCE:
                raise
            log.get().warning("embedder_backend_refused", backend=name, reason=str(exc))
            skipped.append(f"{name}: {exc}")
    raise VectorUnavailable("no_embedder", "no embedding backend can run: " + "; ".join(skipped))


def load(config: Config, *, data_dir: Path | None = None, sample: Sample | None = None) -> Embedder:
    """The embedder for `[embedder] backend` (all-MiniLM-L6-v2 only): "auto" or one of BACKENDS.
    The returned embedder's `backend` attribute names the backend that runs it."""
    from oaken.config import ensure_data_dir

    e = config.embedder
    name = canonical(e.backend)
    if name != AUTO and name not in BACKENDS:
        raise ConfigError(
            f"{config.source or 'config'}: [embedder] backend: unknown backend {e.backend!r}; "
            f"expected one of {', '.join(NAMES)}"
        )
    where = Path(data_dir) if data_dir is not None else ensure_data_dir(config)
    if name == AUTO:
        return choose(where, threads=e.threads, batch_size=e.batch_size, sample=sample)
    return load_backend(name, where, threads=e.threads, batch_size=e.batch_size, sample=sample)


def compatible(doc_backend: str, query_backend: str, data_dir: Path) -> bool:
    """May vectors stored by `doc_backend` be searched with `query_backend`'s queries in this
    data directory? Decided by the cached fidelity checks (oaken.index.fidelity.compatible)."""
    from oaken.index import fidelity

    return fidelity.compatible(canonical(doc_backend), canonical(query_backend), fidelity_store(Path(data_dir)))
