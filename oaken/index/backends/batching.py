"""Tokenization and length-sorted batching shared by the backends that run their own graph.

The fast tokenizer of the packaged weights (tokenizer.json, the same one sentence-transformers
uses) truncates at the model's 256 word pieces. Texts are sorted by token count and cut into
batches under a token budget, so a batch pads to a length close to its longest text: on a
backfill of mixed chunks this spends compute on words, not on padding.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

MAX_TOKENS = 256  # all-MiniLM-L6-v2 reads at most 256 word pieces (sentence_bert_config.json)
TOKEN_BUDGET = 8192  # padded tokens per batch: large enough to keep the cores busy, small for cache


def cores() -> int:
    """The cores this process may run on (a container can allow fewer than the machine has)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def threads_for(threads: int) -> int:
    """[embedder] threads: 0 means every core."""
    return threads if threads > 0 else cores()


@dataclass(frozen=True)
class Batch:
    rows: np.ndarray  # positions in the caller's list
    input_ids: np.ndarray  # (n, length) int64
    attention_mask: np.ndarray  # (n, length) int64
    token_type_ids: np.ndarray  # (n, length) int64


class Tokenizer:
    """The packaged model's word-piece tokenizer with truncation and no padding."""

    def __init__(self, model_dir: Path, max_tokens: int | None = None):
        from tokenizers import Tokenizer as HFTokenizer

        self.max_tokens = max_tokens or _max_seq_length(model_dir)
        self._tok = HFTokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tok.enable_truncation(self.max_tokens)
        self._tok.no_padding()

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(list(texts))]

    def batches(self, texts: Sequence[str], *, max_batch: int = 64, budget: int = TOKEN_BUDGET) -> Iterator[Batch]:
        """Batches of texts of similar length, longest first; every text appears once."""
        ids = self.encode(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
        start = 0
        while start < len(order):
            length = len(ids[order[start]])
            size = max(1, min(max_batch, budget // max(1, length)))
            rows = order[start : start + size]
            yield _pad(rows, ids, length)
            start += size


def _pad(rows: list[int], ids: list[list[int]], length: int) -> Batch:
    n = len(rows)
    input_ids = np.zeros((n, length), dtype=np.int64)
    mask = np.zeros((n, length), dtype=np.int64)
    for r, i in enumerate(rows):
        seq = ids[i]
        input_ids[r, : len(seq)] = seq
        mask[r, : len(seq)] = 1
    return Batch(np.asarray(rows, dtype=np.int64), input_ids, mask, np.zeros_like(input_ids))


def _max_seq_length(model_dir: Path) -> int:
    try:
        return int(json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, KeyError, ValueError):
        return MAX_TOKENS


def embed_batched(
    tokenizer: Tokenizer, texts: Sequence[str], run: Callable[[Batch], np.ndarray], *, dim: int, max_batch: int
) -> np.ndarray:
    """Run `run` (a batch to its (n, dim) vectors) over length-sorted batches and return unit-norm
    float32 rows in the caller's order. Re-normalised here: a bf16 or int8 graph's own
    normalisation is only as exact as its arithmetic."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for batch in tokenizer.batches(texts, max_batch=max_batch):
        out[batch.rows] = np.asarray(run(batch), dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12)


class BatchedEmbedder:
    """What the backends that run their own graph share: the Embedder protocol on top of `_run`
    (one padded batch to its pooled vectors), batched by length."""

    name = "all-MiniLM-L6-v2"
    dim = 384
    backend = ""
    batch_size = 64
    _tokenizer: Tokenizer

    @property
    def fingerprint(self) -> str:
        """The same as torch fp32's: a backend that passed its check makes comparable vectors."""
        return f"{self.name}:{self.dim}"

    def _run(self, batch: Batch) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return embed_batched(self._tokenizer, texts, self._run, dim=self.dim, max_batch=self.batch_size)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]
