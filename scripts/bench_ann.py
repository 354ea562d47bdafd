#!/usr/bin/env python3
"""Benchmark of the vector store's ANN path (IVF_RQ + exact re-scoring) on real MiniLM vectors.

Why: `VectorStore.search` trusts LanceDB's index past `ann_min_rows`; this measures what that
costs in recall against exact search, and what the index parameters buy in query time, at the
sizes a mailbox reaches, so the constants in oaken/index/vectors.py are chosen by figures.

1. Real vectors: the corpora (default: all of ../shared/corpora) are imported into a private data
   dir (`--work`/home) and embedded by Oaken's own pipeline (`oaken import`, `oaken reindex`,
   all-MiniLM-L6-v2 on the `auto` backend); the chunk vectors and their message ids are read back
   from vectors/ and cached as .npy. Query sets: `text`, short questions written for these
   corpora, embedded with the same embedder (`embed_query`); `neardup`, real chunk vectors with
   small Gaussian noise.
2. Sizes: `real` (every chunk), and synthetic sizes (100k, 1M) made by copying whole real messages
   (all their chunks, so chunks per message and within-message structure stay real) with Gaussian
   noise of `--sigma` per dimension added to each chunk vector, renormalised. The nearest-neighbour
   cosines of real and synthetic sets are printed side by side, so the noise can be judged.
3. Each store is built by VectorStore itself: `insert` in windows of 8,192 chunks (the embedding
   pass's window) and one `maintain()`, which builds the index past ann_min_rows (10,000, as in the
   product). The inserted store is kept under --work and copied for each build setting, so the
   build time is `maintain()` alone.
4. Per build setting (num_partitions rule, RaBitQ bits) and query setting (nprobes, refine;
   module constants of oaken.index.vectors patched in this process), per query set:
   message recall@10 of a 10-message vector page (limit 30, doubled while the chunks collapse to
   fewer than 10 messages, up to 500, as vector_retriever does), of a limit-500 search's top 10 (a
   hybrid search's candidates), chunk recall@10 of a limit-10 search, all against exact numpy
   search over every vector (chunks collapse to messages by their best chunk; ties at the cut
   count as hits); warm p50/p95 of `search` at limits 10, 150 and 500 and of the page; build time
   (maintain()); disk size of vectors/.

    .venv/bin/python scripts/bench_ann.py [--work DIR] [--sizes real,100k,1m] [--sweep-sizes 100k]
        [--partitions sqrt,n/4096] [--bits 5] [--nprobes 100,200] [--refine 1,2]
        [--settings 'parts=sqrt,bits=5,nprobes=200,refine=2'] [--queries text,neardup]
        [--sigma 0.025] [--keep-index] [--prepare]

The full grid (--partitions x --bits x --nprobes x --refine) runs on --sweep-sizes; the other
sizes run only --settings (the candidates to confirm). A 1M build takes ~2 min on 2 loaded cores: `--prepare` makes the inserted stores alone, `--keep-index` keeps each
built index under --work and reuses it for later query settings. Prints a table and
the settings that meet the target (message recall@10 >= 0.98 on every size and query set), fastest
first; writes every figure to --work/results-<sizes>.json. Asserts nothing. Figures: docs/ann-recall.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORPORA = ROOT.parent / "shared" / "corpora"
DEFAULT_CORPORA = ("enron-lay-skilling", "notmuch-lkml", "notmuch-default", "cpython-email", "mail-parser-tests")
MODEL = "all-MiniLM-L6-v2"
WINDOW = 8192  # oaken.index.embedding.WINDOW_CHUNKS: the embedding pass writes this many chunks at a time
LIMITS = (10, 150, 500)  # 10: chunk recall; 500: a hybrid search's candidates (max_candidates)
PAGE_FIRST, PAGE_MAX = 30, 500  # vector_retriever: 3 chunks per message wanted, doubled up to max_candidates
TARGET_RECALL = 0.98
TARGET_P50_MS = 15.0

# Questions a user of these corpora might type: Enron (energy trading, California, the company's
# officers), the Linux kernel and notmuch lists, the Python email package and mail parsing.
QUERIES = [
    "when is the next board meeting", "agenda for the executive committee meeting",
    "who is attending the management conference in houston", "quarterly earnings release conference call",
    "california power crisis and electricity prices", "rolling blackouts in california",
    "natural gas trading positions", "energy trading risk management", "broadband services business plan",
    "stock price drop and analyst downgrade", "employee stock options and retirement savings",
    "merger with dynegy", "bankruptcy filing chapter 11", "congressional testimony about energy markets",
    "ferc order on wholesale electricity markets", "meeting with the governor about deregulation",
    "charitable donation to the united way campaign", "thank you for your support",
    "speech at the annual shareholders meeting", "draft of the press release",
    "hiring a new vice president", "performance review process and rankings",
    "travel arrangements for the trip to washington", "flight schedule and hotel reservation",
    "dinner invitation next week", "golf tournament sponsorship", "university recruiting program",
    "request for a letter of recommendation", "invitation to speak at a conference",
    "birthday party for my wife", "congratulations on your promotion", "condolences on the loss",
    "contract negotiation with the pipeline company", "power plant project in india", "dabhol power project",
    "water business azurix", "wind energy investment", "weather derivatives trading",
    "online trading platform enrononline", "credit rating agencies moody's and standard and poor's",
    "accounting for special purpose entities", "lawsuit filed by shareholders",
    "political contributions to candidates", "presidential campaign fundraiser",
    "environmental regulations and emissions trading", "public relations strategy for the media",
    "interview request from a journalist", "article in the wall street journal",
    "company-wide email from the chairman", "new organizational announcement",
    "resignation of the chief executive", "restructuring of the wholesale services group",
    "budget planning for next year", "expense report approval", "schedule a call for tomorrow morning",
    "please review the attached document", "can we move the meeting to friday",
    "out of the office until monday", "year end bonus payments", "health insurance benefits enrollment",
    "security badge and building access", "information technology outage", "new email system rollout",
    "kernel panic on boot", "null pointer dereference in a driver", "memory leak in the network stack",
    "patch to fix a race condition", "locking problem with spinlocks", "scheduler latency regression",
    "file system corruption after crash", "ext4 journal error", "usb device not recognized",
    "build failure with the latest compiler", "git bisect points to this commit",
    "please pull these changes for the next merge window", "reviewed-by and signed-off-by tags",
    "power management suspend and resume bug", "pci device enumeration", "virtual memory page faults",
    "performance benchmark results", "documentation update for the api", "deprecate an old interface",
    "security vulnerability and a fix", "notmuch search is slow", "tagging messages in notmuch",
    "emacs interface for reading mail", "xapian database upgrade", "threading of replies in the mail client",
    "encrypted mail with gpg", "python bindings for notmuch", "configuration file options",
    "test suite failures", "release announcement of a new version", "mailing list etiquette",
    "parsing a multipart mime message", "decoding quoted printable text", "base64 encoded attachment",
    "non ascii characters in the subject header", "rfc 2047 encoded words", "charset utf-8 and latin-1",
    "content-type header parameters", "email with an image attachment", "boundary missing in multipart",
    "malformed header line", "date header in the wrong format", "message-id and in-reply-to headers",
    "mbox file format from lines", "html email with inline images", "forwarded message as attachment",
    "calendar invitation ics file", "spam filter and junk mail", "unsubscribe from the newsletter",
    "password reset request", "invoice for services rendered", "payment overdue reminder",
    "order confirmation and shipping", "job offer and salary", "moving to a new apartment",
    "sick leave and doctor appointment", "family vacation plans", "weekend plans with friends",
]


@dataclass(frozen=True)
class Build:
    """The index build: IVF partitions as a rule of the row count, and RaBitQ's bits a dimension."""

    parts: str  # "default" (LanceDB's), "sqrt", an integer, or "n/K" (rows / K, at least 1)
    bits: int = 5

    def partitions(self, rows: int) -> int | None:
        if self.parts == "default":
            return None
        if self.parts == "sqrt":
            return max(1, int(math.sqrt(rows)))
        if self.parts.startswith("n/"):
            return max(1, round(rows / int(self.parts[2:])))
        return int(self.parts)

    def label(self) -> str:
        return f"parts={self.parts},bits={self.bits}"


@dataclass(frozen=True)
class Query:
    """The search-time constants of oaken.index.vectors."""

    nprobes: int | None
    refine: int

    def label(self) -> str:
        return f"nprobes={'default' if self.nprobes is None else self.nprobes},refine={self.refine}"


@dataclass
class Row:
    size: str
    rows: int
    messages: int
    build: str
    partitions: int | None
    build_s: float
    disk_mb: float
    query: str
    qset: str
    n_queries: int
    msg_recall_page: float  # message recall@10 of a 10-message page (limit 30, widened as the retriever does)
    msg_recall_500: float  # message recall@10 of a limit-500 search's top 10
    chunk_recall_10: float  # chunk recall@10 of a limit-10 search
    msg_recall_page_min: float  # the worst single query
    page_rounds: float  # searches per page (1 unless 30 chunks held fewer than 10 messages)
    p50: dict[int | str, float] = field(default_factory=dict)  # limit (or "page") -> ms
    p95: dict[int | str, float] = field(default_factory=dict)


# ---- real vectors --------------------------------------------------------------------------------


def _oaken(home: Path, *args: str) -> None:
    env = dict(os.environ, OAKEN_HOME=str(home), HF_HUB_OFFLINE="1")
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "oaken"), *args], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"oaken {' '.join(args)} failed: {proc.stderr[-800:]}")


def real_vectors(work: Path, corpora: Sequence[Path]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vectors float32 (n, 384), message ids, chunk ids) of every chunk Oaken embedded from the
    corpora; imported and embedded once into work/home, then read from the .npy cache."""
    cache = [work / f"real_{name}.npy" for name in ("vectors", "messages", "chunks")]
    if all(p.exists() for p in cache):
        vectors, messages, chunks = (np.load(p) for p in cache)
        return vectors, messages, chunks
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "config.toml").exists():
        (home / "config.toml").write_text(f'[embedder]\nmodel = "{MODEL}"\n')
    if not (home / "vectors").is_dir():
        start = time.perf_counter()
        _oaken(home, "import", *map(str, corpora))
        _oaken(home, "reindex")
        print(f"imported and embedded {', '.join(p.name for p in corpora)} in {time.perf_counter() - start:.0f} s")
    from oaken.index.vectors import VectorStore

    t = VectorStore(home).live(["chunk_id", "message", "vector"])  # superseded rows left out
    order = np.lexsort((t.column("chunk_id").to_numpy(), t.column("message").to_numpy()))  # grouped by message
    vectors = t.column("vector").combine_chunks().flatten().to_numpy().reshape(t.num_rows, -1)[order]
    messages, chunks = t.column("message").to_numpy()[order], t.column("chunk_id").to_numpy()[order]
    for p, a in zip(cache, (vectors.astype(np.float32), messages.astype(np.int64), chunks.astype(np.int64))):
        np.save(p, a)
    return vectors.astype(np.float32), messages.astype(np.int64), chunks.astype(np.int64)


def text_queries(work: Path) -> np.ndarray:
    """QUERIES embedded by the configured embedder of work/home (the product's query path)."""
    path = work / "queries_text.npy"
    if path.exists() and len(np.load(path)) == len(QUERIES):
        return np.load(path)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["OAKEN_HOME"] = str(work / "home")  # the data dir (and its exported models) of the documents
    from oaken import config as config_mod
    from oaken.index.embedders import backend_of, load_embedder

    embedder = load_embedder(config_mod.load(work / "home" / "config.toml"))
    assert embedder is not None
    q = np.stack([embedder.embed_query(t) for t in QUERIES]).astype(np.float32)
    print(f"embedded {len(QUERIES)} query texts with {embedder.fingerprint} on {backend_of(embedder)}")
    np.save(path, q)
    return q


def _unit(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def noisy(vectors: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    return _unit(vectors + rng.standard_normal(vectors.shape, dtype=np.float32) * np.float32(sigma))


def synthetic(vectors: np.ndarray, messages: np.ndarray, rows: int, sigma: float, seed: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """`rows` chunk vectors made of whole real messages copied with noise: (vectors, message ids).
    Message ids are new (1..); chunk ids are the row numbers."""
    rng = np.random.default_rng(seed)
    starts = np.flatnonzero(np.r_[True, messages[1:] != messages[:-1]])  # rows are grouped by message
    bounds = np.r_[starts, len(messages)]
    picks: list[int] = []
    total = 0
    while total < rows:
        batch = rng.integers(0, len(starts), size=max(1024, (rows - total) // 3))
        for i in batch:
            picks.append(int(i))
            total += int(bounds[i + 1] - bounds[i])
            if total >= rows:
                break
    src = np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in picks])[:rows]
    msg = np.repeat(np.arange(1, len(picks) + 1, dtype=np.int64), [bounds[i + 1] - bounds[i] for i in picks])[:rows]
    out = np.empty((rows, vectors.shape[1]), dtype=np.float32)
    for lo in range(0, rows, 100_000):
        hi = min(rows, lo + 100_000)
        out[lo:hi] = noisy(vectors[src[lo:hi]], sigma, rng)
    return out, msg


def nn_cosines(vectors: np.ndarray, messages: np.ndarray, probe: np.ndarray) -> np.ndarray:
    """Cosine of each probe row's nearest chunk of another message (the structure noise must keep)."""
    out = np.empty(len(probe), dtype=np.float32)
    for lo in range(0, len(probe), 64):
        idx = probe[lo:lo + 64]
        s = vectors[idx] @ vectors.T
        s[messages[idx][:, None] == messages[None, :]] = -2.0
        out[lo:lo + 64] = s.max(axis=1)
    return out


# ---- exact search ----------------------------------------------------------------------------------


@dataclass
class Truth:
    chunks: list[set[int]]  # exact top-10 chunk rows per query
    chunk_cut: np.ndarray  # 10th best chunk cosine
    msgs: list[set[int]]  # exact top-10 messages per query
    msg_cut: np.ndarray  # 10th best message cosine (its best chunk)


def exact(vectors: np.ndarray, messages: np.ndarray, queries: np.ndarray, k: int = 10) -> Truth:
    """Exact top-k chunks and top-k messages (a message scores its best chunk) by numpy."""
    chunks, chunk_cut, msgs, msg_cut = [], [], [], []
    for lo in range(0, len(queries), 32):
        scores = queries[lo:lo + 32] @ vectors.T
        for s in scores:
            depth = 256
            while True:
                top = np.argpartition(-s, depth)[:depth]
                top = top[np.argsort(-s[top], kind="stable")]
                _, first = np.unique(messages[top], return_index=True)
                if len(first) >= k or depth >= len(s) - 1:
                    break
                depth = min(len(s) - 1, depth * 4)
            chunks.append(set(top[:k].tolist()))
            chunk_cut.append(s[top[k - 1]])
            best = np.sort(first)[:k]  # positions in `top` of each message's best chunk, best first
            msgs.append(set(messages[top[best]].tolist()))
            msg_cut.append(s[top[best[-1]]])
    return Truth(chunks, np.array(chunk_cut), msgs, np.array(msg_cut))


def _recall(found: list[tuple[int, float]], truth: set[int], cut: float, k: int = 10) -> float:
    """Share of the exact top k found among `found`'s first k; an item scoring at the cut (a tie
    with the k-th) counts as a hit, since either order is exact."""
    hits = sum(1 for key, score in found[:k] if key in truth or score >= cut - 1e-5)
    return min(hits, k) / k


def _messages(hits: Sequence[Any]) -> list[tuple[int, float]]:
    """Chunks collapsed to messages, as vector_retriever does: the best chunk stands for its message."""
    seen: dict[int, float] = {}
    for h in hits:
        if h.message not in seen:
            seen[h.message] = h.score
    return list(seen.items())


# ---- stores ----------------------------------------------------------------------------------------


def _fields(message: int) -> Any:
    from oaken.index.vectors import MessageFields

    return MessageFields(message=message, account="local", date=1_000_000_000 + message, sender="a <a@example.com>",
                         to_addrs="b@example.com", cc_addrs="", labels=("inbox",), folders=("inbox",),
                         disposition="", thread=message)


def base_store(path: Path, vectors: np.ndarray, messages: np.ndarray) -> float:
    """The rows inserted as the embedding pass writes them (windows of WINDOW chunks, its
    intermediate compactions), without the final maintain(); kept for reuse. Returns seconds."""
    marker = path / "inserted.json"
    if marker.exists() and json.loads(marker.read_text())["rows"] == len(vectors):
        return float(json.loads(marker.read_text())["seconds"])
    shutil.rmtree(path, ignore_errors=True)
    from oaken.index.vectors import ChunkVector, Fingerprint, VectorStore

    start = time.perf_counter()
    store = VectorStore(path, create=True, retention_seconds=0.0)
    store.ensure(Fingerprint(f"{MODEL}:384", vectors.shape[1], "bench"))
    lo = 0
    while lo < len(vectors):
        hi = min(len(vectors), lo + WINDOW)
        while hi < len(vectors) and messages[hi] == messages[hi - 1]:
            hi += 1  # whole messages per window
        ms = np.unique(messages[lo:hi])
        store.insert({int(m): _fields(int(m)) for m in ms},
                     [ChunkVector(i, int(messages[i]), vectors[i]) for i in range(lo, hi)])
        lo = hi
    seconds = time.perf_counter() - start
    marker.write_text(json.dumps({"rows": len(vectors), "seconds": seconds}))
    return seconds


def build(base: Path, dest: Path, b: Build, keep: bool = False) -> tuple[Any, float, int | None]:
    """A copy of the base store indexed by the product's maintain() under `b`: (store, seconds,
    partitions asked for). With `keep`, a store built before under `b` is reused (its build time
    is the one recorded then): a 1M build takes minutes."""
    import oaken.index.vector_ann as A
    import oaken.index.vectors as V

    marker = dest / "built.json"
    if keep and marker.exists() and json.loads(marker.read_text())["build"] == b.label():
        store = V.VectorStore(dest, retention_seconds=0.0)
        return store, float(json.loads(marker.read_text())["seconds"]), b.partitions(store.count())
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(base, dest)
    A.ANN_NUM_BITS = b.bits
    A.ann_partitions = b.partitions
    store = V.VectorStore(dest, retention_seconds=0.0)
    start = time.perf_counter()
    store.maintain()
    seconds = time.perf_counter() - start
    if keep:
        marker.write_text(json.dumps({"build": b.label(), "seconds": seconds}))
    return store, seconds, b.partitions(store.count())


def page(store: Any, v: np.ndarray, want: int = 10) -> tuple[list[tuple[int, float]], int]:
    """A vector-only page of `want` messages as vector_retriever asks for it: 3 chunks per message
    wanted, doubled while the chunks collapse to fewer messages, up to 500. (messages, rounds)"""
    candidates, rounds = PAGE_FIRST, 0
    while True:
        rounds += 1
        hits = store.search(v, limit=candidates)
        found = _messages(hits)
        if len(found) >= want or len(hits) < candidates or candidates >= PAGE_MAX:
            return found, rounds
        candidates = min(candidates * 2, PAGE_MAX)


def measure(store: Any, queries: np.ndarray, truth: Truth, q: Query) -> dict[str, Any]:
    """Recall and warm latency of store.search under `q` for one query set."""
    import oaken.index.vector_ann as A
    import oaken.index.vectors as V

    A.ANN_NPROBES, A.ANN_REFINE = q.nprobes, q.refine
    for v in queries[:10]:
        store.search(v, limit=10)  # warm this setting's path
    times: dict[int | str, list[float]] = {k: [] for k in (*LIMITS, "page")}
    rp, r500, c10, rounds = [], [], [], []
    for i, v in enumerate(queries):
        start = time.perf_counter()
        found, n = page(store, v)
        times["page"].append((time.perf_counter() - start) * 1000)
        rp.append(_recall(found, truth.msgs[i], truth.msg_cut[i]))
        rounds.append(n)
        for k in LIMITS:
            start = time.perf_counter()
            hits = store.search(v, limit=k)
            times[k].append((time.perf_counter() - start) * 1000)
            if k == 10:
                c10.append(_recall([(h.chunk_id, h.score) for h in hits], truth.chunks[i], truth.chunk_cut[i]))
            elif k == 500:
                r500.append(_recall(_messages(hits), truth.msgs[i], truth.msg_cut[i]))
    return {"msg_recall_page": float(np.mean(rp)), "msg_recall_500": float(np.mean(r500)),
            "chunk_recall_10": float(np.mean(c10)), "msg_recall_page_min": float(np.min(rp)),
            "page_rounds": float(np.mean(rounds)),
            "p50": {k: statistics.median(t) for k, t in times.items()},
            "p95": {k: float(np.percentile(t, 95)) for k, t in times.items()}}


# ---- the run ---------------------------------------------------------------------------------------


def _size(text: str) -> int | str:
    text = text.strip().lower()
    if text == "real":
        return "real"
    mult = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("km")) * mult)


def _name(size: int | str) -> str:
    if size == "real":
        return "real"
    assert isinstance(size, int)
    return f"{size // 1_000_000}m" if size % 1_000_000 == 0 else f"{size // 1000}k" if size % 1000 == 0 else str(size)


def _settings(text: str) -> list[tuple[Build, Query]]:
    out = []
    for item in filter(None, (s.strip() for s in text.split(";"))):
        kv = dict(part.split("=", 1) for part in item.split(","))
        out.append((Build(kv.get("parts", "sqrt"), int(kv.get("bits", 5))),
                    Query(None if kv.get("nprobes", "default") == "default" else int(kv["nprobes"]),
                          int(kv.get("refine", 2)))))
    return out


def _list(text: str, conv: Callable[[str], Any]) -> list[Any]:
    return [conv(s.strip()) for s in text.split(",") if s.strip()]


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024


def print_row(r: Row) -> None:
    lat = "  ".join(f"{r.p50[k]:6.1f}/{r.p95[k]:6.1f}" for k in (10, "page", 150, 500))
    print(f"{r.size:>5} {r.build:<22} {str(r.partitions):>5} {r.build_s:7.1f} {r.disk_mb:7.0f}  "
          f"{r.query:<32} {r.qset:<7} {r.msg_recall_page:6.3f} {r.msg_recall_page_min:4.1f} {r.page_rounds:4.2f} {r.msg_recall_500:6.3f} "
          f"{r.chunk_recall_10:6.3f}  {lat}", flush=True)


HEADER = (f"{'size':>5} {'build':<22} {'parts':>5} {'build s':>7} {'disk MB':>7}  {'query':<32} {'queries':<7} "
          f"{'msgR@p':>6} {'min':>4} {'rnds':>4} {'msgR500':>6} {'chkR10':>6}  "
          + "  ".join(f"{f'p50/p95 @{k}':>13}" for k in (10, "page", 150, 500)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/work/bench-ann"), help="cache and stores (reused)")
    ap.add_argument("--corpora", type=Path, nargs="*", default=[CORPORA / c for c in DEFAULT_CORPORA])
    ap.add_argument("--sizes", default="real,100k,1m", help="'real' and/or chunk counts (100k, 1m)")
    ap.add_argument("--sweep-sizes", default="100k", help="sizes on which the full grid runs (none: only --settings)")
    ap.add_argument("--queries", default="text,neardup", help="query sets: text, neardup")
    ap.add_argument("--neardup", type=int, default=150, help="near-duplicate queries")
    ap.add_argument("--partitions", default="sqrt,n/4096",
                    help="grid: partition rules (default = LanceDB's; sqrt; N; n/K = rows/K)")
    ap.add_argument("--bits", default="5", help="grid: RaBitQ bits a dimension")
    ap.add_argument("--nprobes", default="50,100,200", help="grid: 'default' (LanceDB's) or counts")
    ap.add_argument("--refine", default="1,2", help="grid: candidates fetched per chunk asked for")
    ap.add_argument("--settings", default="parts=sqrt,bits=5,nprobes=200,refine=2",
                    help="';'-separated settings run on every size (the candidates to confirm)")
    ap.add_argument("--sigma", type=float, default=0.025, help="synthetic noise per dimension")
    ap.add_argument("--query-sigma", type=float, default=0.01, help="near-duplicate query noise per dimension")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep-index", action="store_true",
                    help="keep each indexed store under --work/stores and reuse it when its build setting matches")
    ap.add_argument("--prepare", action="store_true", help="only make the vectors and inserted stores (to cache)")
    ap.add_argument("--out", type=Path, help="figures as JSON (default: --work/results-<sizes>.json)")
    args = ap.parse_args()

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    vectors, messages, _ = real_vectors(work, args.corpora)
    n_msgs = len(np.unique(messages))
    print(f"real: {len(vectors):,} chunks of {n_msgs:,} messages ({len(vectors) / n_msgs:.2f} chunks/message)")
    rng = np.random.default_rng(args.seed)
    qsets: dict[str, np.ndarray] = {}
    if "text" in args.queries:
        qsets["text"] = _unit(text_queries(work))
    if "neardup" in args.queries:
        qsets["neardup"] = noisy(vectors[rng.choice(len(vectors), args.neardup, replace=False)], args.query_sigma, rng)
    probe = rng.choice(len(vectors), 400, replace=False)
    real_nn = nn_cosines(vectors, messages, probe)

    grid_builds = [Build(p, b) for p in _list(args.partitions, str) for b in _list(args.bits, int)]
    grid_queries = [Query(None if n == "default" else int(n), r)
                    for n in _list(args.nprobes, str) for r in _list(args.refine, int)]
    confirm = _settings(args.settings)
    sweep = {_size(s) for s in args.sweep_sizes.split(",") if s.strip() and s.strip() != "none"}
    rows: list[Row] = []
    meta: dict[str, Any] = {"sigma": args.sigma, "query_sigma": args.query_sigma, "cpus": os.cpu_count(),
                            "load_start": os.getloadavg(), "sizes": {}}
    for size in (_size(s) for s in args.sizes.split(",") if s.strip()):
        name = _name(size)
        if size == "real":
            vs, ms = vectors, messages
        else:
            assert isinstance(size, int)
            cache = work / f"synth_{name}_s{args.sigma}_{args.seed}.npz"
            if cache.exists():
                z = np.load(cache)
                vs, ms = z["vectors"], z["messages"]
            else:
                vs, ms = synthetic(vectors, messages, size, args.sigma, args.seed)
                np.savez(cache, vectors=vs, messages=ms)
        nn = nn_cosines(vs, ms, np.random.default_rng(1).choice(len(vs), 400, replace=False)) if size != "real" else real_nn
        print(f"\n== {name}: {len(vs):,} chunks, {len(np.unique(ms)):,} messages; nearest other-message chunk cosine "
              f"p10/p50/p90 {np.percentile(nn, 10):.3f}/{np.percentile(nn, 50):.3f}/{np.percentile(nn, 90):.3f} "
              f"(real {np.percentile(real_nn, 10):.3f}/{np.percentile(real_nn, 50):.3f}/{np.percentile(real_nn, 90):.3f})")
        insert_s = base_store(work / "stores" / f"{name}-base", vs, ms)
        if args.prepare:
            print(f"   inserted in {insert_s:.1f} s")
            continue
        t0 = time.perf_counter()
        truths = {k: exact(vs, ms, q) for k, q in qsets.items()}
        exact_ms = (time.perf_counter() - t0) * 1000 / sum(len(q) for q in qsets.values())
        meta["sizes"][name] = {"rows": len(vs), "messages": int(len(np.unique(ms))), "insert_s": insert_s,
                               "exact_numpy_ms_per_query": exact_ms,
                               "nn_p10_p50_p90": [float(np.percentile(nn, p)) for p in (10, 50, 90)]}
        print(f"   insert (windows of {WINDOW}): {insert_s:.1f} s; exact numpy search {exact_ms:.1f} ms a query")
        plan: dict[Build, list[Query]] = {}
        if size in sweep:
            for b in grid_builds:
                plan[b] = list(grid_queries)
        for b, q in confirm:  # on a sweep size, a confirmed build gets the whole query grid too
            for x in ([q, *grid_queries] if size in sweep else [q]):
                if x not in plan.setdefault(b, []):
                    plan[b].append(x)
        print(HEADER)
        for b, queries in plan.items():
            dest = work / "stores" / (f"{name}-{b.label()}" if args.keep_index else f"{name}-idx")
            store, build_s, parts = build(work / "stores" / f"{name}-base", dest, b, args.keep_index)
            disk = store.size_bytes() / 1e6
            stats = _index_stats(store)
            if parts is None and stats:
                meta["sizes"][name].setdefault("index_stats", {})[b.label()] = stats
            for q in queries:
                if parts == 1 and q.nprobes not in (None,) and any(x.nprobes is None
                                                                 and x.refine == q.refine for x in queries):
                    continue  # one partition: nprobes changes nothing
                for qname, qv in qsets.items():
                    m = measure(store, qv, truths[qname], q)
                    row = Row(name, len(vs), int(len(np.unique(ms))), b.label(), parts, build_s, disk, q.label(), qname,
                              len(qv), **m)
                    rows.append(row)
                    print_row(row)
            del store
        shutil.rmtree(work / "stores" / f"{name}-idx", ignore_errors=True)
        print(f"   peak memory so far {_peak_gb():.1f} GB; {time.perf_counter() - started:.0f} s elapsed")
    meta["load_end"] = os.getloadavg()
    meta["peak_gb"] = _peak_gb()
    meta["seconds"] = time.perf_counter() - started
    out = args.out or work / f"results-{args.sizes.replace(',', '-')}.json"
    out.write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=1))
    summarize(rows)
    print(f"\nload average {meta['load_start'][0]:.1f} at start, {meta['load_end'][0]:.1f} at end on {os.cpu_count()} "
          f"cores; peak memory {meta['peak_gb']:.1f} GB; {meta['seconds'] / 60:.1f} min; figures in {out}")


def _index_stats(store: Any) -> dict[str, Any] | None:
    """What Lance built (its default partition count is not documented as a number)."""
    try:
        for idx in store.table().describe_indices():
            s = store.table().stats.index_stats(idx.name)
            return {k: v for k, v in s.items() if isinstance(v, (int, float, str))}
    except Exception as exc:  # stats are a nicety: say so and go on
        return {"error": str(exc)}
    return None


def summarize(rows: list[Row]) -> None:
    """Settings (build + query) that meet the recall target on every size and query set they ran
    on, fastest first by p50 at limit 10 on the largest size."""
    by: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        by.setdefault((r.build, r.query), []).append(r)
    print("\nSettings meeting message recall@10 >= 0.98 (a page, and limit 500's top 10) on every size and "
          "query set they ran on, by p50 @10 on the largest size:")
    ok = []
    for key, rs in by.items():
        if all(r.msg_recall_page >= TARGET_RECALL and r.msg_recall_500 >= TARGET_RECALL for r in rs):
            big = max(r.rows for r in rs)
            top = [r for r in rs if r.rows == big]
            ok.append((max(r.p50[10] for r in top), key, big, top, sorted({r.size for r in rs})))
    for p50, key, big, top, sizes in sorted(ok)[:15]:
        p500 = max(r.p50[500] for r in top)
        verdict = "meets" if p50 <= TARGET_P50_MS and big >= 1_000_000 else ("misses" if big >= 1_000_000 else "n/a")
        print(f"  {key[0]:<22} {key[1]:<32} sizes {','.join(sizes):<14} p50 @10 {p50:5.1f} ms, @500 {p500:6.1f} ms "
              f"at {big:,} rows (15 ms at 1M: {verdict})")
    if not ok:
        print("  none")


if __name__ == "__main__":
    main()
