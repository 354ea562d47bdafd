"""The "torch-bf16" backend: the installed weights in bfloat16 on torch, no extra dependency.

On a CPU with AVX512-BF16 or AMX this runs about twice as fast as fp32 with vectors that agree to
a cosine of 0.9999; elsewhere bf16 is emulated and slower than fp32, so "auto" only picks it on
such a CPU. Pooling and normalisation run in fp32 on the bf16 hidden states.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from oaken.errors import VectorUnavailable
from oaken.index.backends import artifacts
from oaken.index.backends.batching import Batch, BatchedEmbedder, Tokenizer, threads_for


class TorchBf16Embedder(BatchedEmbedder):
    backend = "torch-bf16"

    def __init__(self, model: Any, model_dir: Path, *, batch_size: int = 64):
        self._model = model
        self.batch_size = max(1, batch_size)
        self._tokenizer = Tokenizer(model_dir)

    @classmethod
    def load(cls, *, threads: int = 0, batch_size: int = 64) -> TorchBf16Embedder:
        model_dir = artifacts.weights_dir()
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            import torch
            from transformers import AutoModel
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
            torch.set_num_threads(threads_for(threads))
            model = AutoModel.from_pretrained(str(model_dir), dtype=torch.bfloat16, local_files_only=True).eval()
        except Exception as exc:
            raise VectorUnavailable(
                "no_embedder", f"[embedder] backend 'torch-bf16': cannot load {model_dir}: {type(exc).__name__}: {exc}"
            ) from exc
        return cls(model, model_dir, batch_size=batch_size)

    def _run(self, batch: Batch) -> np.ndarray:
        import torch

        with torch.inference_mode():
            mask = torch.from_numpy(batch.attention_mask)
            hidden = self._model(
                input_ids=torch.from_numpy(batch.input_ids),
                attention_mask=mask,
                token_type_ids=torch.from_numpy(batch.token_type_ids),
            ).last_hidden_state
            m = mask.unsqueeze(-1).to(torch.float32)
            pooled = (hidden.to(torch.float32) * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return pooled.numpy()
