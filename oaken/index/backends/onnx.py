"""ONNX Runtime backends of all-MiniLM-L6-v2: "onnx-fp32" and "onnx-int8".

The graph is exported once, offline, from the installed weights: BertModel with eager attention,
mean pooling over the attention mask and L2 normalisation, through torch's TorchScript exporter
(`dynamo=False`, opset 17; the dynamo exporter's graph runs ~8 % slower here). "onnx-int8"
quantizes that graph's weights to int8, per channel (dynamic quantization: activations are
scaled at run time, so it needs no calibration); per-tensor int8 ruins fidelity and QUInt8
weights are 40 % slower on this CPU (../shared/notes/machine-facts.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from oaken.errors import VectorUnavailable
from oaken.index.backends import artifacts
from oaken.index.backends.batching import Batch, BatchedEmbedder, Tokenizer, threads_for

OPSET = 17
EXPORT_VERSION = 1  # bump when the exported graph changes: the folder name carries it
FP32 = f"onnx-fp32-v{EXPORT_VERSION}"
INT8 = f"onnx-int8-v{EXPORT_VERSION}"
MODEL_FILE = "model.onnx"


def graph_inputs(model_dir: Path) -> tuple[str, ...]:
    """What the model's graph reads: BERT takes token type ids, MPNet (one token type) does not."""
    import json

    cfg = json.loads((model_dir / "config.json").read_text())
    if cfg.get("model_type") == "mpnet" or cfg.get("type_vocab_size", 2) <= 1:
        return ("input_ids", "attention_mask")
    return ("input_ids", "attention_mask", "token_type_ids")


def export_fp32(model_dir: Path, out: Path) -> None:
    """Write out/model.onnx: token ids in, unit-norm sentence vectors out (dynamic batch, length)."""
    import torch
    from transformers import AutoModel

    names = graph_inputs(model_dir)

    class Pooled(torch.nn.Module):
        def __init__(self, bert: torch.nn.Module):
            super().__init__()
            self.bert = bert  # the attribute's name is in the graph's weight names: kept as first exported

        def forward(self, input_ids, attention_mask, *rest):
            extra = {"token_type_ids": rest[0]} if rest else {}
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    bert = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager", local_files_only=True)
    module = Pooled(bert).eval()
    ids = torch.ones((2, 16), dtype=torch.int64)
    axes = {0: "batch", 1: "tokens"}
    with torch.inference_mode():
        torch.onnx.export(
            module,
            (ids, torch.ones_like(ids), torch.zeros_like(ids))[: len(names)],
            str(out / MODEL_FILE),
            dynamo=False,
            opset_version=OPSET,
            input_names=list(names),
            output_names=["embedding"],
            dynamic_axes={**{n: axes for n in names}, "embedding": {0: "batch"}},
        )


def quantize_int8(fp32_model: Path, out: Path) -> None:
    """Weights to int8 per channel (QInt8); activations quantized dynamically at run time."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(fp32_model), str(out / MODEL_FILE), per_channel=True, weight_type=QuantType.QInt8)


def fp32_artifact(data_dir: Path, model_dir: Path) -> Path:
    root = artifacts.models_root(data_dir, model_dir)
    return artifacts.artifact(root, FP32, lambda tmp: export_fp32(model_dir, tmp), done=MODEL_FILE) / MODEL_FILE


def int8_artifact(data_dir: Path, model_dir: Path) -> Path:
    fp32 = fp32_artifact(data_dir, model_dir)
    root = artifacts.models_root(data_dir, model_dir)
    return artifacts.artifact(root, INT8, lambda tmp: quantize_int8(fp32, tmp), done=MODEL_FILE) / MODEL_FILE


class OnnxEmbedder(BatchedEmbedder):
    """all-MiniLM-L6-v2 through ONNX Runtime on the CPU; the vectors live in torch fp32's space
    (fingerprint unchanged) as far as oaken.index.fidelity has measured."""

    def __init__(self, backend: str, model_file: Path, model_dir: Path, *, threads: int = 0, batch_size: int = 64):
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise VectorUnavailable(
                "no_embedder",
                f"[embedder] backend {backend!r}: onnxruntime is not installed; "
                "install the extra with `pip install -c constraints.txt "
                "-e '.[fast]'`",
            ) from exc
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads_for(threads)
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        self.backend = backend
        self.batch_size = max(1, batch_size)
        self.model_file = model_file
        self._session = ort.InferenceSession(str(model_file), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer(model_dir)

    def _run(self, batch: Batch) -> np.ndarray:
        feeds = {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "token_type_ids": batch.token_type_ids,
        }
        return self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]


def load_fp32(data_dir: Path, *, threads: int = 0, batch_size: int = 64) -> OnnxEmbedder:
    model_dir = artifacts.weights_dir()
    return OnnxEmbedder(
        "onnx-fp32", fp32_artifact(data_dir, model_dir), model_dir, threads=threads, batch_size=batch_size
    )


def load_int8(data_dir: Path, *, threads: int = 0, batch_size: int = 64) -> OnnxEmbedder:
    model_dir = artifacts.weights_dir()
    return OnnxEmbedder(
        "onnx-int8", int8_artifact(data_dir, model_dir), model_dir, threads=threads, batch_size=batch_size
    )
