#!/usr/bin/env python3
"""What it costs a search that raw.db, not index.db's copy, decides disposition.

On a copy of a data directory (model "none"; e.g. the one `scripts/bench_search.py --work DIR`
builds, 100k messages), in-process searches are timed with `filters.as_of` (the copy is trusted
only for messages unchanged since the index) and, as the peer in the same run, with the copy
trusted blindly (the code before; wrong after a triage, which the hit counts show):
  - index current, nothing triaged;
  - 1 and 200 messages archived after the index was written (no reindex);
  - UNSURE_MAX + 1 archived (the copy is then not used at all: raw.db filters every candidate);
  - all of those indexed (the copy current again).

    .venv/bin/python scripts/bench_disposition.py --home DIR [--runs 15]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUERIES = ["in:archived", "", "invoice", "invoice in:archived", "in:anywhere power"]


def _config(home: Path):  # type: ignore[no-untyped-def]
    from oaken.config import Config, EmbedderConfig, PathsConfig

    return Config(paths=PathsConfig(data_dir=str(home)), embedder=EmbedderConfig(model="none"))


def _time(cfg, runs: int) -> tuple[float, float, dict[str, int]]:  # type: ignore[no-untyped-def]
    """(wall p50 ms, CPU p50 ms, hits per query) over QUERIES x runs."""
    from oaken.search.engine import search

    hits = {q: len(search(q, config=cfg, limit=10).hits) for q in QUERIES}  # warm-up
    wall, cpu = [], []
    for _ in range(runs):
        for q in QUERIES:
            start, start_cpu = time.perf_counter(), time.process_time()
            search(q, limit=10, config=cfg)
            wall.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - start_cpu) * 1000)
    return statistics.median(wall), statistics.median(cpu), hits


def _both(label: str, cfg, runs: int) -> None:  # type: ignore[no-untyped-def]
    from oaken.search import filters, listing, retrievers

    real = filters.as_of
    w, c, hits = _time(cfg, runs)
    # the peer: index.db's copy trusted blindly
    retrievers.as_of = listing.as_of = lambda cons, store, seq: cons  # type: ignore[assignment]
    try:
        pw, pc, phits = _time(cfg, runs)
    finally:
        retrievers.as_of = listing.as_of = real
    print(f"  {label:34} raw.db decides: wall p50 {w:6.2f} CPU {c:6.2f} | copy trusted: wall p50 {pw:6.2f} "
          f"CPU {pc:6.2f} | ratio {w / pw:4.2f}")
    print(f"  {'':34} hits {hits}" + ("" if hits == phits else f"; trusting the copy: {phits}"))
    for q in ("in:archived", ""):
        start, start_cpu = time.perf_counter(), time.process_time()
        from oaken.search.engine import search

        for _ in range(runs):
            search(q, limit=10, config=cfg)
        print(f"  {'':34} {q or '(no words)'!r}: {(time.perf_counter() - start) * 1000 / runs:.2f} ms wall, "
              f"{(time.process_time() - start_cpu) * 1000 / runs:.2f} ms CPU per search")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--home", required=True, help="a data directory (model none) to copy and search")
    p.add_argument("--runs", type=int, default=15)
    args = p.parse_args(argv)
    from oaken import api
    from oaken.index import indexer
    from oaken.search import filters
    from oaken.store import Store

    work = Path(tempfile.mkdtemp(prefix="oaken-disposition-"))
    try:
        home = work / "home"
        shutil.copytree(args.home, home, ignore=shutil.ignore_patterns("*.sock", "daemon.lock"))
        cfg = _config(home)
        indexer.update(cfg, keyword_only=True)
        with Store(home / "raw.db", readonly=True) as store:
            ids = store.all_message_ids()
        print(f"{len(ids):,} messages; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
        rng = random.Random(3)
        picked = rng.sample(ids, filters.UNSURE_MAX + 1)
        _both("index current, none archived", cfg, args.runs)
        done = 0
        for n in (1, 200, filters.UNSURE_MAX + 1):
            for m in picked[done:n]:
                api.set_triage(m, disposition="archived", config=cfg)
            done = n
            _both(f"{n} archived since the index", cfg, args.runs)
        start = time.perf_counter()
        indexer.update(cfg, keyword_only=True)
        print(f"  (reindex of {done} triaged messages: {time.perf_counter() - start:.2f} s)")
        _both(f"{done} archived, index current", cfg, args.runs)
        print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
