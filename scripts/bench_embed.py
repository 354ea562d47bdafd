#!/usr/bin/env python3
"""Benchmark the vector side: embedding through Oaken's pipeline against raw model.encode on the
same chunks, and vector search at 100k chunks with and without the ANN index.

1. Embedding. N real messages of ../shared/corpora/enron-lay-skilling are imported and keyword
   indexed in a temp data dir; the body chunks index.db then holds are embedded twice, by the
   `[embedder] backend` given (--backend, default auto: the backend Oaken would pick here):
   - raw: the backend's own `embed_documents(texts)` on the distinct texts the pipeline would
     embed (subject + chunk), in one call (every backend sorts by length and batches);
   - pipeline: `embed_pending` from an empty vectors/ and an empty embedding cache (reading
     index.db and raw.db, the cache, LanceDB writes overlapped with encoding).
   Raw and pipeline runs alternate (raw first and last) and medians are compared, by wall time
   and by this process's CPU time (less sensitive to other load on a shared machine).
   Unless the backend is torch-fp32 itself, raw torch fp32 is timed once on the same texts too
   (the issue's target: the pipeline at 3x torch fp32 or more). A fast backend is exported on
   first use into the temp data dir; --models DIR reuses an earlier export (a data dir's models/).
2. Search. 100k synthetic unit vectors in 384 dimensions (clustered like real embeddings:
   500 centres, noise around them) in a real VectorStore: p50/p95 of a query by brute force,
   the ANN index's build time, p50/p95 through the index, recall@10 of the index against brute
   force, and both with a selective date prefilter.

    .venv/bin/python scripts/bench_embed.py [--messages 400] [--rounds 2] [--backend auto] [--models DIR]
                                            [--chunks 100000] [--queries 40] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpora" / "enron-lay-skilling"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_embedding(corpus: Path, n_messages: int, rounds: int, work: Path, backend: str = "auto",
                    models: Path | None = None) -> dict:
    os.environ["OAKEN_HOME"] = str(work / "home")
    from oaken import config as config_mod
    from oaken.api import import_mail
    from oaken.index import embed_cache, embedding, indexer, vectors
    from oaken.index.embedders import load_embedder
    from oaken.index.keyword import KeywordIndex

    mail = work / "mail" / "INBOX"
    mail.mkdir(parents=True)
    for i, path in enumerate(sorted(corpus.rglob("*.eml"))[:n_messages]):
        shutil.copyfile(path, mail / f"{i}.eml")
    cfg = dataclasses.replace(config_mod.Config(), embedder=config_mod.EmbedderConfig(backend=backend))
    if models is not None:
        (work / "home").mkdir(parents=True, exist_ok=True)
        (work / "home" / "models").symlink_to(models.resolve())
    import_mail([mail], account="bench", config=cfg)
    indexer.update(cfg, keyword_only=True)
    data_dir = config_mod.resolve_data_dir(cfg)
    with KeywordIndex(data_dir) as index:
        chunks = index.chunks_of(index.message_dates(_messages(data_dir)), kind="body")
    texts = list(dict.fromkeys(embedding.embed_text(c) for c in chunks))
    t = time.perf_counter()
    embedder = load_embedder(cfg)
    load_s = time.perf_counter() - t
    embedder.embed_documents(texts[:32])  # warm-up, as the pipeline's own is
    t = time.perf_counter()
    import lance  # noqa: F401  (once per process: the daemon or `oaken reindex` pays it once, not per chunk)

    lance_import_s = time.perf_counter() - t

    def raw(peer=embedder) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        peer.embed_documents(texts)  # the backend alone: no index.db, cache or LanceDB
        return time.perf_counter() - t0, time.process_time() - c0

    def pipeline() -> tuple[float, float, object]:
        vectors.drop(data_dir)  # from nothing: no vectors, no cached embeddings
        (data_dir / embed_cache.CACHE_FILE).unlink(missing_ok=True)
        t0, c0 = time.perf_counter(), time.process_time()
        report = embedding.embed_pending(cfg, embedder=embedder)
        return time.perf_counter() - t0, time.process_time() - c0, report

    raws = [raw()]
    pipes = []
    for _ in range(rounds):  # alternate, so a busier stretch of the machine hits both sides
        pipes.append(pipeline())
        raws.append(raw())
    report = pipes[-1][2]
    raw_s = statistics.median(r[0] for r in raws)
    pipe_s = statistics.median(p[0] for p in pipes)
    raw_cpu = statistics.median(r[1] for r in raws)
    pipe_cpu = statistics.median(p[1] for p in pipes)
    tokens = sum(c.tokens for c in chunks)
    torch: dict = {}
    if getattr(embedder, "backend", "") != "torch-fp32":
        from oaken.index import backends

        fp32 = backends.load_backend("torch-fp32", data_dir, threads=cfg.embedder.threads,
                                     batch_size=cfg.embedder.batch_size)
        fp32.embed_documents(texts[:32])
        torch_s, torch_cpu = raw(fp32)
        torch = {"torch_fp32_raw_wall_s": round(torch_s, 2), "torch_fp32_raw_cpu_s": round(torch_cpu, 2),
                 "torch_fp32_chunks_per_s": round(len(texts) / torch_s, 1),
                 "pipeline_vs_torch_fp32_wall": round(torch_s / pipe_s, 2),
                 "pipeline_vs_torch_fp32_cpu": round(torch_cpu / pipe_cpu, 2), "torch_target": ">= 3"}
    return {
        "backend": getattr(embedder, "backend", embedder.name),
        "messages": n_messages, "body_chunks": len(chunks), "distinct_texts": len(texts),
        "encoded_by_pipeline": report.encoded, "embedded_rows": report.embedded,
        "approx_tokens": tokens, "model_load_s": round(load_s, 2),
        "lance_import_s (before timing)": round(lance_import_s, 2),
        "raw_encode_wall_s": [round(r[0], 2) for r in raws],
        "raw_encode_cpu_s": [round(r[1], 2) for r in raws],
        "pipeline_wall_s": [round(p[0], 2) for p in pipes],
        "pipeline_cpu_s": [round(p[1], 2) for p in pipes],
        "raw_chunks_per_s": round(len(texts) / raw_s, 1),
        "pipeline_chunks_per_s": round(len(texts) / pipe_s, 1),
        "pipeline_vs_raw_wall": round(raw_s / pipe_s, 3),
        "pipeline_vs_raw_cpu": round(raw_cpu / pipe_cpu, 3),
        "target": ">= 0.9",
        **torch,
    }


def _messages(data_dir: Path) -> list[int]:
    from oaken.store import open_store

    with open_store(data_dir) as raw:
        return raw.all_message_ids()


def bench_search(n: int, queries: int, work: Path) -> dict:
    import numpy as np

    from oaken.index.vectors import ChunkVector, Fingerprint, MessageFields, VectorFilters, VectorStore

    dim = 384
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((500, dim)).astype(np.float32)
    data = centres[rng.integers(0, 500, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    store = VectorStore(work / "search", create=True, ann_min_rows=n, maintain_every=10**9)
    store.ensure(Fingerprint("bench:384", dim, "1"))
    t0 = time.perf_counter()
    step = 10_000
    for start in range(0, n, step):
        ids = range(start, min(n, start + step))
        fields = {m: MessageFields(m, "bench", 1_600_000_000 + m * 60, "s", "", "", ("inbox",), ("inbox",),
                                   "inbox", m) for m in ids}
        store.upsert(fields, [ChunkVector(m, m, data[m]) for m in ids])
    load_s = time.perf_counter() - t0
    store.maintain(index=False)
    qs = data[rng.integers(0, n, queries)] + 0.3 * rng.standard_normal((queries, dim)).astype(np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    recent = VectorFilters(after=1_600_000_000 + (n - n // 20) * 60)  # the newest 5 %

    def timed(flt: VectorFilters) -> tuple[list[float], list[list[int]]]:
        store.search(qs[0], flt, 10)
        times, results = [], []
        for q in qs:
            t = time.perf_counter()
            hits = store.search(q, flt, 10)
            times.append((time.perf_counter() - t) * 1000)
            results.append([h.chunk_id for h in hits])
        return times, results

    brute, exact = timed(VectorFilters())
    brute_f, exact_f = timed(recent)
    t0 = time.perf_counter()
    store.maintain(index=True)
    build_s = time.perf_counter() - t0
    assert store.has_index()
    ann, approx = timed(VectorFilters())
    ann_f, approx_f = timed(recent)

    def recall(a: list[list[int]], b: list[list[int]]) -> float:
        return round(statistics.mean(len(set(x) & set(y)) / max(1, len(y)) for x, y in zip(a, b)), 3)

    return {
        "chunks": n, "dim": dim, "queries": queries, "load_s": round(load_s, 1),
        "brute_p50_ms": round(pct(brute, 0.5), 1), "brute_p95_ms": round(pct(brute, 0.95), 1),
        "brute_prefiltered_p50_ms": round(pct(brute_f, 0.5), 1),
        "index_build_s": round(build_s, 1),
        "ann_p50_ms": round(pct(ann, 0.5), 1), "ann_p95_ms": round(pct(ann, 0.95), 1),
        "ann_prefiltered_p50_ms": round(pct(ann_f, 0.5), 1),
        "ann_recall_at_10": recall(approx, exact), "ann_prefiltered_recall_at_10": recall(approx_f, exact_f),
        "speedup": round(pct(brute, 0.5) / max(pct(ann, 0.5), 1e-6), 1),
        "folder_mb": round(store.size_bytes() / 1e6, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--messages", type=int, default=400)
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2, help="pipeline runs, each followed by a raw run")
    ap.add_argument("--backend", default="auto", help="[embedder] backend (oaken.index.backends)")
    ap.add_argument("--models", type=Path, help="reuse this export (a data dir's models/) instead of exporting")
    ap.add_argument("--skip", choices=("embed", "search"), action="append", default=[])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out: dict = {"cores": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="oaken-bench-embed-") as tmp:
        work = Path(tmp)
        if "embed" not in args.skip:
            if not args.corpus.is_dir():
                print(f"{args.corpus}: no such corpus; pass --corpus DIR", file=sys.stderr)
                return 1
            out["embedding"] = bench_embedding(args.corpus, args.messages, args.rounds, work / "embed",
                                               args.backend, args.models)
            _print("embedding", out["embedding"], args.json)
        if "search" not in args.skip:
            out["search"] = bench_search(args.chunks, args.queries, work)
            _print("vector search", out["search"], args.json)
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


def _print(title: str, figures: dict, quiet: bool) -> None:
    if quiet:
        return
    print(f"== {title}")
    for k, v in figures.items():
        print(f"  {k:32} {v}")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
