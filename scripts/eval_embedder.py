"""Compare sentence embedders on the real-mail questions at full scale: the vector side alone,
exact cosine search, the dev half only (issue #13; docs/meaning-at-scale.md).

    .venv/bin/python scripts/eval_embedder.py --model all-MiniLM-L6-v2
    nice -n 10 .venv/bin/python scripts/eval_embedder.py --model all-mpnet-base-v2
    .venv/bin/python scripts/eval_embedder.py --model all-MiniLM-L6-v2 --model all-mpnet-base-v2  # cached: seconds
    nice -n 10 .venv/bin/python scripts/eval_embedder.py --model all-mpnet-base-v2@openvino-int8  # a fast backend
    nice -n 10 .venv/bin/python scripts/eval_embedder.py --model all-MiniLM-L6-v2@openvino-int8 --text sender

A model may carry a backend after "@": torch-fp32 (sentence-transformers, the default),
onnx-fp32, onnx-int8, openvino, openvino-int8. For all-MiniLM-L6-v2 those are oaken's own
backends (oaken.index.backends, exports under /work/bench-embed/models); for any other model,
scripts/eval_embedder_backends.py's exports of it under --cache/<model>/<backend>/. Vectors are
cached per model and backend (--cache/<model>[@<backend>]/). --text sender embeds each chunk as
"From: <sender name>\n<subject>\n<text>" (the sender's address when the name is empty, as for
96 % of the real mailbox's messages; --text sender-derived guesses a name from the address's
local part instead) rather than the pass's "<subject>\n<text>"; the run's label then ends in
"+sender" (or "+sender-derived").

What it does, per model (one after the other, never two encoders at once):
  1. reads the body chunks of a kept eval data dir's index.db (read-only; default the full real
     mailbox built by `python -m oaken.evals retrieval --real --live --keep /work/evalreal`) and
     forms each chunk's text with oaken.index.embedding.embed_text, the function the embedding
     pass uses (subject line, then the chunk's words);
  2. embeds each distinct text once (as the pass's cache does), length-sorted windows, torch with
     --threads threads, unit norm; the vectors are cached as .npy under
     --cache/<model>/ window by window, so an interrupted run resumes and a rerun is free;
  3. embeds each dev question as the engine's vector side does: oaken.search.query.parse, then
     oaken.search.vector_side.embedded_text (the free text; operators are not embedded, no
     prefix or other transformation), one question at a time (query latency, warm);
  4. scores by exact cosine (numpy) against every chunk; a message scores its best chunk; the
     query's operators (from:, after:, ...) restrict the messages through the engine's own
     Constraints.admit over raw.db and index.db, as the vector side's prefilters and admit do;
  5. prints, per kind: message recall@10 and MRR@10 (oaken.evals.retrieval's definitions), the
     share of questions with a right answer in the top 10, and for paraphrases the rank of the
     first right answer; then the best cosines of answerable against unanswerable questions and
     the share of unanswerable ones a low_confidence threshold would flag when it flags at most
     10 % of answerable ones.

Near-duplicate folding (Hit.copies) is ignored: a hit is right when its Message-ID is one of
the question's relevant Message-IDs, and every message takes its own place in the ranking.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sqlite3
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from oaken import config as config_mod
from oaken.evals import harness
from oaken.evals import questions as questions_mod
from oaken.evals.questions import ANSWERABLE, Question
from oaken.evals.retrieval import recall_at, reciprocal_rank
from oaken.index.embedding import embed_text
from oaken.index.keyword import KeywordIndex
from oaken.search import filters
from oaken.search import query as query_mod
from oaken.search.vector_side import embedded_text
from oaken.store import Store

DEFAULT_DATA = Path("/work/evalreal/data")
DEFAULT_CACHE = Path("/work/bench-embed/fullscale")
OAKEN_DATA_DIR = Path("/work/bench-embed")  # oaken's MiniLM exports: /work/bench-embed/models/
KNOWN = {"all-MiniLM-L6-v2": None,  # the packaged weights Oaken loads (oaken.index.minilm.model_path)
         "all-mpnet-base-v2": Path("/work/mpnet/model/all-mpnet-base-v2")}
WINDOW = 1024  # distinct texts per encode call and per cached part
RANK_BINS = (("1", 1, 1), ("2-10", 2, 10), ("11-30", 11, 30), ("31-100", 31, 100), (">100", 101, 10**9))
MAX_ANSWERABLE_FLAGGED = 0.10


# ---- the mailbox --------------------------------------------------------------------------------


@dataclass
class Corpus:
    chunk_ids: np.ndarray  # body chunk ids, ascending
    chunk_msg: np.ndarray  # per chunk: row of its message in `messages`
    chunk_text: np.ndarray  # per chunk: row of its text in `texts`
    texts: list[str]  # distinct texts, in order of first chunk
    messages: np.ndarray  # oaken message ids holding a body chunk
    message_ids: list[str]  # their Message-IDs
    digest: str  # of the distinct texts: names the cached vectors


def chunk_text_of(c, text_format: str, sender: dict[int, str]) -> str:
    """What a chunk is embedded as: the pass's embed_text, or that with a "From: <sender>" line first."""
    t = embed_text(c)
    if text_format in ("sender", "sender-derived") and sender.get(c.message):
        return f"From: {sender[c.message]}\n{t}"
    return t


def derived_name(addr: str) -> str:
    """A name guessed from an address's local part ("rosalee.fleming@enron.com" -> "Rosalee Fleming");
    the address itself when its local part is one word."""
    local = addr.split("@", 1)[0]
    words = [w for w in local.replace("_", ".").replace("-", ".").split(".") if w]
    return " ".join(w.capitalize() for w in words) if len(words) > 1 else addr


def body_chunks(data_dir: Path) -> list:
    """Every body chunk of a data dir's index.db (the ones the vector side embeds), by id."""
    with KeywordIndex(data_dir) as index:
        chunks = []
        after = 0
        while batch := index.body_chunks(after_id=after, limit=5000):
            chunks.extend(batch)
            after = batch[-1].id
    return chunks


def read_corpus(data_dir: Path, text_format: str = "subject") -> Corpus:
    chunks = body_chunks(data_dir)
    msgs = sorted({c.message for c in chunks})
    # Message-IDs straight from raw.db, read-only: Store.metas reads tables a newer schema adds,
    # and a kept data dir is not migrated by a read-only open
    raw = sqlite3.connect(f"file:{data_dir / 'raw.db'}?mode=ro", uri=True)
    try:
        mid_of = dict(raw.execute("SELECT id, message_id FROM messages"))
        sender = {i: (name or "").strip() or (derived_name((addr or "").strip()) if text_format == "sender-derived"
                                              else (addr or "").strip())
                  for i, name, addr in raw.execute("SELECT id, sender_name, sender_addr FROM messages")}
    finally:
        raw.close()
    row_of_msg = {m: i for i, m in enumerate(msgs)}
    text_row: dict[str, int] = {}
    chunk_text = []
    for c in chunks:
        t = chunk_text_of(c, text_format, sender)
        chunk_text.append(text_row.setdefault(t, len(text_row)))
    texts = list(text_row)
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    return Corpus(np.array([c.id for c in chunks]), np.array([row_of_msg[c.message] for c in chunks]),
                  np.array(chunk_text), texts, np.array(msgs),
                  [mid_of.get(m) or f"oaken:{m}" for m in msgs], h.hexdigest()[:16])


# ---- the model ------------------------------------------------------------------------------------


def split_backend(name: str) -> tuple[str, str]:
    """"model@backend" -> (model, backend); no "@": torch-fp32."""
    if "@" in name:
        base, backend = name.rsplit("@", 1)
        return base, backend
    return name, "torch-fp32"


def model_path(name: str) -> Path:
    name = split_backend(name)[0]
    if "=" in name:
        return Path(name.split("=", 1)[1])
    if name in KNOWN:
        if KNOWN[name] is None:
            from oaken.index.minilm import model_path as minilm_path

            return minilm_path()
        return KNOWN[name]  # type: ignore[return-value]
    return Path(name)


def model_name(name: str) -> str:
    """The label of a run: the model's name, and "@backend" unless torch-fp32."""
    name, backend = split_backend(name)
    base = name.split("=", 1)[0] if "=" in name else Path(name).name if name not in KNOWN else name
    return base if backend in ("torch-fp32", "torch") else f"{base}@{backend}"


class OakenBackend:
    """all-MiniLM-L6-v2 through one of oaken's own backends (its exports, its batching)."""

    fast_backend = True

    def __init__(self, backend: str, threads: int, batch: int):
        from oaken.index.backends import BACKENDS

        self.embedder = BACKENDS[backend].load(OAKEN_DATA_DIR, threads, batch)
        self.backend = backend
        self.precision = str(getattr(self.embedder, "precision", backend))
        self.max_seq_length = int(getattr(getattr(self.embedder, "_tokenizer", None), "max_tokens", 256))

    def encode(self, texts: list[str], batch: int) -> np.ndarray:
        return np.ascontiguousarray(self.embedder.embed_documents(texts), dtype=np.float32)


def load(name: str, threads: int, batch: int = 32, cache: Path = DEFAULT_CACHE):
    base, backend = split_backend(name)
    if backend not in ("torch-fp32", "torch"):
        if base == "all-MiniLM-L6-v2":
            return OakenBackend(backend, threads, batch)
        from eval_embedder_backends import GraphEncoder

        return GraphEncoder(backend, model_path(name), cache / model_name(base), threads)
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    with contextlib.suppress(ImportError, AttributeError):  # an older transformers without these switches
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    return SentenceTransformer(str(model_path(name)), device="cpu", local_files_only=True)


def encode(model, texts: list[str], batch: int) -> np.ndarray:
    if getattr(model, "fast_backend", False):  # OakenBackend or GraphEncoder: their own batching
        return model.encode(texts, batch)
    v = model.encode(texts, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True,
                     show_progress_bar=False)
    return np.ascontiguousarray(v, dtype=np.float32)


def embed_corpus(name: str, corpus: Corpus, cache: Path, threads: int, batch: int) -> tuple[np.ndarray, dict]:
    """The vectors of corpus.texts (rows in that order), from the cache or encoded now."""
    folder = cache / model_name(name)
    final = folder / f"texts-{corpus.digest}.npy"
    record_path = folder / f"texts-{corpus.digest}.json"
    if final.exists() and record_path.exists():
        return np.load(final), {**json.loads(record_path.read_text()), "cached": True}
    parts = folder / f"parts-{corpus.digest}"
    parts.mkdir(parents=True, exist_ok=True)
    # length-sorted windows: little padding, and a window's texts are alike in cost
    order = sorted(range(len(corpus.texts)), key=lambda i: (len(corpus.texts[i]), i))
    windows = [order[i:i + WINDOW] for i in range(0, len(order), WINDOW)]
    log_path = parts / "log.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {}
    model = None
    for w, rows in enumerate(windows):
        part = parts / f"part-{w:05d}.npy"
        if part.exists() and str(w) in log:
            continue
        if model is None:
            t = time.perf_counter()
            model = load(name, threads, batch, cache)
            print(f"[{model_name(name)}] loaded in {time.perf_counter() - t:.1f} s, max_seq_length "
                  f"{model.max_seq_length}; {len(windows)} windows of {WINDOW} distinct texts", flush=True)
        t, cpu = time.perf_counter(), time.process_time()
        vecs = encode(model, [corpus.texts[i] for i in rows], batch)
        seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
        np.save(part, vecs)
        log[str(w)] = {"texts": len(rows), "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                       "load": os.getloadavg()[0]}
        log_path.write_text(json.dumps(log))
        done = sum(x["texts"] for x in log.values())
        print(f"[{model_name(name)}] window {w + 1}/{len(windows)}: {len(rows)} texts in {seconds:.1f} s "
              f"({len(rows) / seconds:.1f}/s, {cpu:.0f} CPU s, load {os.getloadavg()[0]:.1f}); {done}/{len(order)} done",
              flush=True)
    out = None
    for w, rows in enumerate(windows):
        vecs = np.load(parts / f"part-{w:05d}.npy")
        if out is None:
            out = np.zeros((len(order), vecs.shape[1]), dtype=np.float32)
        out[rows] = vecs
    assert out is not None
    seconds = sum(x["seconds"] for x in log.values())
    timed = [x for x in log.values() if "cpu_seconds" in x]  # windows from before CPU time was logged lack it
    cpu_ms = round(1000 * sum(x["cpu_seconds"] for x in timed) / sum(x["texts"] for x in timed), 1) if timed else None
    record = {"model": model_name(name), "path": str(model_path(name)), "texts": len(order),
              "chunks": len(corpus.chunk_ids), "dim": int(out.shape[1]), "encode_seconds": round(seconds, 1),
              "texts_per_second": round(len(order) / seconds, 2),
              "chunks_per_second": round(len(corpus.chunk_ids) / seconds, 2),
              "cpu_ms_per_text": cpu_ms, "cpu_timed_texts": sum(x["texts"] for x in timed),
              "mean_load": round(statistics.mean(x["load"] for x in log.values()), 2),
              "threads": threads, "batch": batch, "window": WINDOW,
              "max_seq_length": int(model.max_seq_length) if model is not None else None,
              "backend": split_backend(name)[1],
              "precision": str(getattr(model, "precision", "fp32")) if model is not None else None}
    np.save(final, out)
    record_path.write_text(json.dumps(record, indent=1))
    return out, {**record, "cached": False}


# ---- the questions ----------------------------------------------------------------------------------


@dataclass
class Asked:
    question: Question
    text: str  # what is embedded
    allowed: np.ndarray | None  # bool per corpus message; None: no operator restricts


def ask_list(data_dir: Path, corpus: Corpus, qs: list[Question]) -> list[Asked]:
    cfg = config_mod.from_dict(harness.make_config(data_dir, live=True), source="eval_embedder")
    cats = cfg.triage.categories
    out = []
    everyone = [int(m) for m in corpus.messages]
    with KeywordIndex(data_dir) as index, Store(data_dir / "raw.db", readonly=True) as store:
        for q in qs:
            parsed = query_mod.parse(q.query, categories=cats)
            cons, _warned = filters.constraints(parsed, filters.Fields(), account="eval", categories=cats)
            allowed = None
            if cons.impossible:
                allowed = np.zeros(len(everyone), dtype=bool)
            else:  # every question through admit: one that restricts nothing keeps every message
                keep = set(cons.admit(index, store, everyone, index_filters_applied=False))
                if len(keep) < len(everyone):
                    allowed = np.array([m in keep for m in everyone])
            out.append(Asked(q, embedded_text(parsed), allowed))
    return out


def embed_queries(model, asked: list[Asked]) -> tuple[np.ndarray, list[float], list[float]]:
    """One question at a time, warm: the latency a search pays for its query vector (wall and
    process CPU milliseconds)."""
    for a in asked[:5]:
        encode(model, [a.text], 1)
    vecs, ms, cpu_ms = [], [], []
    for a in asked:
        t, c = time.perf_counter(), time.process_time()
        vecs.append(encode(model, [a.text], 1)[0])
        ms.append((time.perf_counter() - t) * 1000)
        cpu_ms.append((time.process_time() - c) * 1000)
    return np.stack(vecs), ms, cpu_ms


# ---- a faster query path (--onnx-query) --------------------------------------------------------------


def export_onnx(name: str, folder: Path) -> dict[str, Path]:
    """The model as ONNX fp32 (mean pooling and unit norm inside the graph, as oaken's onnx
    backend exports MiniLM; token ids and mask in, no token_type_ids) and its weights quantized to
    int8 per channel with dynamic activations (oaken's onnx-int8 recipe). Written once, kept."""
    out = {"onnx-fp32": folder / "onnx-fp32" / "model.onnx", "onnx-int8": folder / "onnx-int8" / "model.onnx"}
    if not out["onnx-fp32"].exists():
        import torch
        from transformers import AutoModel

        class Pooled(torch.nn.Module):
            def __init__(self, encoder: torch.nn.Module):
                super().__init__()
                self.encoder = encoder

            def forward(self, input_ids, attention_mask):
                hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

        encoder = AutoModel.from_pretrained(str(model_path(name)), attn_implementation="eager", local_files_only=True)
        module = Pooled(encoder).eval()
        ids = torch.ones((2, 16), dtype=torch.int64)
        axes = {0: "batch", 1: "tokens"}
        tmp = out["onnx-fp32"].parent.with_suffix(".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        with torch.inference_mode():
            torch.onnx.export(module, (ids, torch.ones_like(ids)), str(tmp / "model.onnx"), dynamo=False,
                              opset_version=17, input_names=["input_ids", "attention_mask"],
                              output_names=["embedding"],
                              dynamic_axes={"input_ids": axes, "attention_mask": axes, "embedding": {0: "batch"}})
        tmp.rename(out["onnx-fp32"].parent)
    if not out["onnx-int8"].exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = out["onnx-int8"].parent.with_suffix(".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        quantize_dynamic(str(out["onnx-fp32"]), str(tmp / "model.onnx"), per_channel=True, weight_type=QuantType.QInt8)
        tmp.rename(out["onnx-int8"].parent)
    return out


def onnx_queries(name: str, folder: Path, asked: list[Asked], threads: int, max_len: int) -> dict[str, dict]:
    """Each dev question through ONNX Runtime, one at a time, warm: tokenizing included."""
    import onnxruntime as ort
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_path(name)), local_files_only=True)
    out = {}
    for variant, path in export_onnx(name, folder).items():
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

        def run(text: str, session: ort.InferenceSession = session) -> np.ndarray:
            enc = tok([text], truncation=True, max_length=max_len, return_tensors="np")
            return session.run(None, {"input_ids": enc["input_ids"].astype(np.int64),
                                      "attention_mask": enc["attention_mask"].astype(np.int64)})[0][0]

        for a in asked[:5]:
            run(a.text)
        vecs, ms, cpu_ms = [], [], []
        for a in asked:
            t, c = time.perf_counter(), time.process_time()
            vecs.append(run(a.text))
            ms.append((time.perf_counter() - t) * 1000)
            cpu_ms.append((time.process_time() - c) * 1000)
        v = np.stack(vecs).astype(np.float32)
        out[variant] = {"vectors": v / np.linalg.norm(v, axis=1, keepdims=True),
                        "p50": round(float(np.percentile(ms, 50)), 1), "p90": round(float(np.percentile(ms, 90)), 1),
                        "cpu_p50": round(float(np.percentile(cpu_ms, 50)), 1)}
    return out


# ---- scoring ------------------------------------------------------------------------------------------


@dataclass
class Result:
    asked: Asked
    ranked: list[str]  # Message-IDs, best first (every message with a body chunk that is allowed)
    best: float  # best cosine over the allowed chunks (what low_confidence reads)
    first_right: int | None  # rank of the first relevant message, 1-based


def search(corpus: Corpus, doc: np.ndarray, qvecs: np.ndarray, asked: list[Asked]) -> list[Result]:
    chunk_vecs = doc[corpus.chunk_text]
    sims = qvecs @ chunk_vecs.T  # questions x chunks
    n = len(corpus.messages)
    out = []
    for i, a in enumerate(asked):
        best = np.full(n, -np.inf, dtype=np.float32)
        np.maximum.at(best, corpus.chunk_msg, sims[i])
        if a.allowed is not None:
            best[~a.allowed] = -np.inf
        order = np.argsort(-best, kind="stable")
        order = order[np.isfinite(best[order])]
        ranked = [corpus.message_ids[j] for j in order]
        rel = set(a.question.relevant)
        first = next((r for r, mid in enumerate(ranked, start=1) if mid in rel), None)
        out.append(Result(a, ranked, float(best[order[0]]) if len(order) else float("nan"), first))
    return out


def scores(results: list[Result]) -> dict:
    rows = {}
    for kind in (*ANSWERABLE, "overall"):
        mine = [r for r in results if r.asked.question.relevant and (kind == "overall" or r.asked.question.kind == kind)]
        if not mine:
            continue
        rows[kind] = {
            "n": len(mine),
            "recall_at_10": round(statistics.mean(recall_at(r.ranked, r.asked.question.relevant, 10) for r in mine), 3),
            "mrr_at_10": round(statistics.mean(reciprocal_rank(r.ranked[:10], r.asked.question.relevant)
                                               for r in mine), 3),
            "answered_at_10": round(statistics.mean(float(r.first_right is not None and r.first_right <= 10)
                                                    for r in mine), 3),
        }
    para = [r for r in results if r.asked.question.kind == "paraphrase"]
    rows["paraphrase_first_right"] = {label: sum(1 for r in para if r.first_right is not None and lo <= r.first_right <= hi)
                                      for label, lo, hi in RANK_BINS}
    rows["paraphrase_first_right"]["none"] = sum(1 for r in para if r.first_right is None)
    return rows


def separation(results: list[Result]) -> dict:
    """Best cosines of answerable vs unanswerable questions, and low_confidence thresholds."""
    un = np.array([r.best for r in results if not r.asked.question.relevant])
    out: dict = {"unanswerable": _quantiles(un)}
    for label, kinds in (("answerable", ANSWERABLE), ("paraphrase+mixed", ("paraphrase", "mixed"))):
        an = np.array([r.best for r in results if r.asked.question.relevant and r.asked.question.kind in kinds])
        # a question is flagged when its best cosine < T; the highest T flagging <= 10 % of `an`
        k = int(np.floor(MAX_ANSWERABLE_FLAGGED * len(an) + 1e-9))
        t = float(np.sort(an)[k]) if k < len(an) else 1.0
        auc = float(np.mean([(a > u) + 0.5 * (a == u) for a in an for u in un]))
        out[label] = {**_quantiles(an), "threshold": round(t, 4),
                      "answerable_flagged": round(float(np.mean(an < t)), 3),
                      "unanswerable_flagged": round(float(np.mean(un < t)), 3),
                      "auc": round(auc, 3)}
    return out


def _quantiles(x: np.ndarray) -> dict:
    q = np.quantile(x, [0.1, 0.25, 0.5, 0.75, 0.9])
    return {"n": len(x), "min": round(float(x.min()), 3), "p10": round(float(q[0]), 3),
            "p25": round(float(q[1]), 3), "median": round(float(q[2]), 3), "p75": round(float(q[3]), 3),
            "p90": round(float(q[4]), 3), "max": round(float(x.max()), 3)}


# ---- output ---------------------------------------------------------------------------------------------


def report(all_runs: dict[str, dict]) -> str:
    lines = ["| model | kind | n | R@10 | MRR@10 | answered@10 |", "|---|---|---|---|---|---|"]
    for name, run in all_runs.items():
        for kind, row in run["scores"].items():
            if kind == "paraphrase_first_right":
                continue
            lines.append(f"| {name} | {kind} | {row['n']} | {row['recall_at_10']:.3f} | {row['mrr_at_10']:.3f} | "
                         f"{row['answered_at_10']:.3f} |")
    lines += ["", "Paraphrases, rank of the first right answer (exact ranking over every message):", "",
              "| model | " + " | ".join(label for label, _, _ in RANK_BINS) + " |", "|---|" + "---|" * len(RANK_BINS)]
    for name, run in all_runs.items():
        d = run["scores"]["paraphrase_first_right"]
        lines.append(f"| {name} | " + " | ".join(str(d[label]) for label, _, _ in RANK_BINS) + " |")
    lines += ["", "Best cosine per question (dev), and a low_confidence threshold flagging <= 10 % of answerable:", "",
              ("| model | questions | n | p10 | p25 | median | p75 | p90 | max | T | answerable flagged | "
               "unanswerable flagged | AUC |"), "|---|" + "---|" * 12]
    for name, run in all_runs.items():
        s = run["separation"]
        for label in ("answerable", "paraphrase+mixed", "unanswerable"):
            q = s[label]
            extra = (f"{q['threshold']:.3f} | {q['answerable_flagged']:.3f} | {q['unanswerable_flagged']:.3f} | "
                     f"{q['auc']:.3f}") if "threshold" in q else " |  |  | "
            lines.append(f"| {name} | {label} | {q['n']} | {q['p10']:.3f} | {q['p25']:.3f} | {q['median']:.3f} | "
                         f"{q['p75']:.3f} | {q['p90']:.3f} | {q['max']:.3f} | {extra} |")
    lines += ["", ("| model | dim | max_seq_length | distinct texts | encode s | texts/s | chunks/s | CPU ms/text | "
                   "mean load | query p50 ms | query p90 ms | query CPU p50 ms |"), "|---|" + "---|" * 11]
    for name, run in all_runs.items():
        e, q = run["embedding"], run["query_ms"]
        lines.append(f"| {name} | {e['dim']} | {run['max_seq_length']} | {e['texts']} | {e['encode_seconds']} | "
                     f"{e['texts_per_second']} | {e['chunks_per_second']} | {e['cpu_ms_per_text']} | "
                     f"{e['mean_load']} | {q['p50']} | {q['p90']} | {q['cpu_p50']} |")
    if any("query_paths" in run for run in all_runs.values()):
        lines += ["", "Query paths (dev questions one at a time, warm, against the torch document vectors):", "",
                  ("| model | query path | p50 ms | p90 ms | CPU p50 ms | cos to torch mean / min | "
                   "paraphrase R@10 / MRR | overall R@10 / MRR |"), "|---|" + "---|" * 7]
        for name, run in all_runs.items():
            q, s = run["query_ms"], run["scores"]
            lines.append(f"| {name} | torch fp32 | {q['p50']} | {q['p90']} | {q['cpu_p50']} | 1 / 1 | "
                         f"{s['paraphrase']['recall_at_10']:.3f} / {s['paraphrase']['mrr_at_10']:.3f} | "
                         f"{s['overall']['recall_at_10']:.3f} / {s['overall']['mrr_at_10']:.3f} |")
            for variant, v in run.get("query_paths", {}).items():
                lines.append(f"| {name} | {variant} | {v['p50']} | {v['p90']} | {v['cpu_p50']} | "
                             f"{v['cos_to_torch_mean']:.4f} / {v['cos_to_torch_min']:.4f} | "
                             f"{v['paraphrase_recall_at_10']:.3f} / {v['paraphrase_mrr_at_10']:.3f} | "
                             f"{v['overall_recall_at_10']:.3f} / {v['overall_mrr_at_10']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", required=True,
                   help=f"{' or '.join(KNOWN)}, a sentence-transformers folder, or name=folder; repeatable")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"a kept eval data dir (default {DEFAULT_DATA})")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"vectors cache (default {DEFAULT_CACHE})")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--out", type=Path, help="also write the figures and every ranking here (JSON)")
    p.add_argument("--text", choices=("subject", "sender", "sender-derived"), default="subject",
                   help='what a chunk is embedded as: "subject" (the pass\'s "<subject>\\n<text>"), "sender" '
                        '("From: <sender name>\\n<subject>\\n<text>", the address when raw.db has no name) or '
                        '"sender-derived" (as sender, a name guessed from the address\'s local part instead)')
    p.add_argument("--onnx-query", action="store_true",
                   help="also embed the questions through ONNX Runtime fp32 and int8 exports of each model "
                        "(latency, and the scores of those query vectors against the torch document vectors)")
    args = p.parse_args(argv)

    t = time.perf_counter()
    corpus = read_corpus(args.data, args.text)
    files = sorted((REPO / "evals" / "questions").glob("*.jsonl"))
    qs = [q for f in files for q in questions_mod.load_jsonl(f)]
    dev, _test = questions_mod.split(qs)  # dev only: the test half is not asked
    asked = ask_list(args.data, corpus, dev)
    known = set(corpus.message_ids)
    unreachable = sorted({r for q in dev for r in q.relevant} - known)
    print(f"{len(corpus.chunk_ids)} body chunks ({len(corpus.texts)} distinct texts) of {len(corpus.messages)} "
          f"messages; {len(dev)} dev questions ({sum(a.allowed is not None for a in asked)} restricted by operators); "
          f"relevant Message-IDs without a body chunk: {len(unreachable)}; read in {time.perf_counter() - t:.1f} s",
          flush=True)

    runs: dict[str, dict] = {}
    rankings: dict[str, list] = {}
    for name in args.model:
        label = model_name(name) + ("" if args.text == "subject" else f"+{args.text}")
        t0 = time.perf_counter()
        doc, record = embed_corpus(name, corpus, args.cache, args.threads, args.batch)
        t = time.perf_counter()
        model = load(name, args.threads, args.batch, args.cache)
        load_s = time.perf_counter() - t
        qvecs, ms, cpu_ms = embed_queries(model, asked)
        t = time.perf_counter()
        results = search(corpus, doc, qvecs, asked)
        search_s = time.perf_counter() - t
        runs[label] = {"embedding": record, "max_seq_length": int(model.max_seq_length),
                       "load_seconds": round(load_s, 2), "search_seconds_all": round(search_s, 2),
                       "query_ms": {"p50": round(float(np.percentile(ms, 50)), 1),
                                    "p90": round(float(np.percentile(ms, 90)), 1),
                                    "cpu_p50": round(float(np.percentile(cpu_ms, 50)), 1)},
                       "load_at_queries": round(os.getloadavg()[0], 1),
                       "scores": scores(results), "separation": separation(results),
                       "seconds": round(time.perf_counter() - t0, 1)}
        if args.onnx_query and split_backend(name)[1] in ("torch-fp32", "torch"):
            runs[label]["query_paths"] = {}
            for variant, got in onnx_queries(name, args.cache / model_name(name), asked, args.threads,
                                             int(model.max_seq_length)).items():
                cos = (got["vectors"] * qvecs).sum(1)
                sc = scores(search(corpus, doc, got["vectors"], asked))
                runs[label]["query_paths"][variant] = {
                    "p50": got["p50"], "p90": got["p90"], "cpu_p50": got["cpu_p50"],
                    "cos_to_torch_mean": round(float(cos.mean()), 4), "cos_to_torch_min": round(float(cos.min()), 4),
                    "paraphrase_recall_at_10": sc["paraphrase"]["recall_at_10"],
                    "paraphrase_mrr_at_10": sc["paraphrase"]["mrr_at_10"],
                    "overall_recall_at_10": sc["overall"]["recall_at_10"], "overall_mrr_at_10": sc["overall"]["mrr_at_10"]}
        rankings[label] = [{"question": r.asked.question.id, "kind": r.asked.question.kind,
                            "embedded": r.asked.text, "best_cosine": round(r.best, 4), "first_right": r.first_right,
                            "top10": r.ranked[:10]} for r in results]
        print(f"[{label}] {'cached vectors' if record['cached'] else 'encoded'}; "
              f"{runs[label]['seconds']} s for this model", flush=True)
        del model
    print()
    print(f"Dev half ({len(dev)} questions), vector side alone, exact cosine search over "
          f"{len(corpus.chunk_ids)} body chunks; near-duplicate folding ignored.")
    print()
    print(report(runs))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"data": str(args.data), "split": "dev", "text": args.text, "questions": len(dev),
                                        "chunks": len(corpus.chunk_ids), "texts": len(corpus.texts),
                                        "messages": len(corpus.messages), "runs": runs,
                                        "rankings": rankings}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
