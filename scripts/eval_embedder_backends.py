"""Fast backends of any sentence-transformers model (mean pooling, unit norm) for
scripts/eval_embedder.py: the model exported to ONNX, then run by ONNX Runtime (fp32, or int8
weights quantized dynamically per channel) or by OpenVINO (its own CPU precision, bf16 on this
CPU; or static int8 calibrated by NNCF), the recipes oaken.index.backends uses for MiniLM,
applied to another folder of weights. Nothing is downloaded.

    .venv/bin/python scripts/eval_embedder_backends.py export --model all-mpnet-base-v2

The exports live in <cache>/<model>/<backend>/ (default cache /work/bench-embed/fullscale), made
once. Texts are tokenized by the model's own tokenizer.json (truncated at the model's
max_seq_length), cut into length-sorted batches under a token budget and re-normalised in fp32.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]  # as oaken's openvino backend

from oaken.index.backends.batching import Tokenizer  # noqa: E402

BACKENDS = ("onnx-fp32", "onnx-int8", "openvino", "openvino-int8")
TORCH = "torch-fp32"


def _graph_inputs(model_dir: Path) -> list[str]:
    from oaken.index.backends.onnx import graph_inputs

    return list(graph_inputs(model_dir))


def export_fp32(model_dir: Path, out: Path) -> None:
    """out/model.onnx: token ids in, unit-norm mean-pooled vectors out: oaken.index.backends.onnx's
    own export, which reads the model's inputs from its config (MPNet takes no token type ids)."""
    from oaken.index.backends.onnx import export_fp32 as oaken_export

    oaken_export(model_dir, out)


def quantize_ort_int8(fp32: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(fp32), str(out / "model.onnx"), per_channel=True, weight_type=QuantType.QInt8)


def convert_ov(fp32: Path, out: Path) -> None:
    import openvino as ov

    ov.save_model(ov.convert_model(str(fp32)), str(out / "model.xml"), compress_to_fp16=False)


def quantize_ov_int8(ir: Path, model_dir: Path, calibration: Sequence[str], out: Path) -> None:
    """Static int8 by NNCF (oaken.index.backends.openvino.quantize_int8): one calibration text per
    sample, at its own length."""
    import nncf
    import openvino as ov

    names = _graph_inputs(model_dir)
    tok = Tokenizer(model_dir)
    samples = []
    for ids in tok.encode(calibration):
        a = np.asarray([ids], dtype=np.int64)
        feeds = {"input_ids": a, "attention_mask": np.ones_like(a), "token_type_ids": np.zeros_like(a)}
        samples.append({k: feeds[k] for k in names})
    model = ov.Core().read_model(str(ir))
    q = nncf.quantize(model, nncf.Dataset(samples), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(samples))
    ov.save_model(q, str(out / "model.xml"), compress_to_fp16=False)


def calibration_texts() -> list[str]:
    """The calibration text oaken's openvino-int8 uses: the shipped Enron sample's calibration part."""
    from oaken.index.fidelity_sample import load_sample

    return list(load_sample().calibration)


def _build(final: Path, done: str, build) -> Path:
    if (final / done).is_file():
        return final / done
    tmp = final.with_name(final.name + ".tmp")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    t = time.perf_counter()
    build(tmp)
    (tmp / "build.json").write_text(json.dumps({"seconds": round(time.perf_counter() - t, 1)}))
    tmp.rename(final)
    print(f"built {final} in {time.perf_counter() - t:.0f} s", flush=True)
    return final / done


def artifact(backend: str, model_dir: Path, folder: Path) -> Path:
    """The model file of `backend`, exported into folder/<backend>/ if absent."""
    fp32 = _build(folder / "onnx-fp32", "model.onnx", lambda tmp: export_fp32(model_dir, tmp))
    if backend == "onnx-fp32":
        return fp32
    if backend == "onnx-int8":
        return _build(folder / "onnx-int8", "model.onnx", lambda tmp: quantize_ort_int8(fp32, tmp))
    ir = _build(folder / "openvino", "model.xml", lambda tmp: convert_ov(fp32, tmp))
    if backend == "openvino":
        return ir
    if backend == "openvino-int8":
        return _build(folder / "openvino-int8", "model.xml",
                      lambda tmp: quantize_ov_int8(ir, model_dir, calibration_texts(), tmp))
    raise ValueError(f"unknown backend {backend!r}; one of {', '.join(BACKENDS)}")


class GraphEncoder:
    """One exported graph behind the two calls eval_embedder needs: encode(texts, batch) -> unit
    rows in the caller's order, and max_seq_length."""

    fast_backend = True

    def __init__(self, backend: str, model_dir: Path, folder: Path, threads: int, budget: int = 8192):
        self.backend = backend
        self.model_file = artifact(backend, model_dir, folder)
        self.tokenizer = Tokenizer(model_dir)
        self.max_seq_length = self.tokenizer.max_tokens
        self.budget = budget
        self.names = _graph_inputs(model_dir)
        if backend.startswith("onnx"):
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.log_severity_level = 3
            session = ort.InferenceSession(str(self.model_file), opts, providers=["CPUExecutionProvider"])
            self.precision = "fp32 graph" if backend == "onnx-fp32" else "int8 weights, dynamic activations"

            def run(feeds: dict) -> np.ndarray:
                return session.run(None, feeds)[0]
        else:
            import openvino as ov

            core = ov.Core()
            compiled = core.compile_model(core.read_model(str(self.model_file)), "CPU",
                                          {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"})
            request = compiled.create_infer_request()
            self.precision = str(compiled.get_property("INFERENCE_PRECISION_HINT"))

            def run(feeds: dict) -> np.ndarray:
                request.infer(feeds)
                return request.get_output_tensor(0).data.copy()
        self._run = run

    def _batch(self, batch) -> np.ndarray:
        feeds = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask,
                 "token_type_ids": batch.token_type_ids}
        return self._run({k: feeds[k] for k in self.names})

    def encode(self, texts: list[str], batch: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        out = None
        for b in self.tokenizer.batches(texts, max_batch=batch, budget=self.budget):
            v = np.asarray(self._batch(b), dtype=np.float32)
            if out is None:
                out = np.zeros((len(texts), v.shape[1]), dtype=np.float32)
            out[b.rows] = v
        assert out is not None
        return np.ascontiguousarray(out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12))


def main(argv: list[str] | None = None) -> int:
    import eval_embedder as ee  # noqa: PLC0415  (scripts/ is on sys.path when run as a script)

    p = argparse.ArgumentParser(description="export a model's fast backends for eval_embedder")
    p.add_argument("command", choices=["export"])
    p.add_argument("--model", default="all-mpnet-base-v2")
    p.add_argument("--backend", action="append", choices=BACKENDS)
    p.add_argument("--cache", type=Path, default=ee.DEFAULT_CACHE)
    args = p.parse_args(argv)
    for b in args.backend or BACKENDS:
        print(b, artifact(b, ee.model_path(args.model), args.cache / ee.model_name(args.model)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
