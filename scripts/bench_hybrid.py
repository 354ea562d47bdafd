#!/usr/bin/env python3
"""Benchmark of hybrid search through the warm daemon's socket, measured against peers in the same run.

1. Warm: hybrid search (keyword + all-MiniLM-L6-v2 + RRF) at 10k messages, asked through the
   search socket of a warm process (the SearchServer `oaken sync --daemon` starts), p50 and p95
   wall time per query as the client sees it, beside the same searches in-process.
2. Cold: `oaken search` as a new process answered by that socket, a keyword-only `oaken search
   --no-daemon` (model "none"), and a bare `python -c pass` on the same interpreter, in
   interleaved rounds (so a shared machine's load falls on all alike): medians and ratios.

    .venv/bin/python scripts/bench_hybrid.py [--work DIR] [--size 10000] [--runs 15] [--root DIR] [--model M]

Enron (/work/shared/corpora/enron-lay-skilling, 6,148 messages) plus replicas up to --size;
replicas repeat Enron's texts, which the embedding cache embeds once. `--root` runs the cold
part's `oaken` from another checkout (e.g. an older commit unpacked with `git archive`) for a
before/after. Bytecode is compiled once into a private cache first, as an installed package has
it (this machine sets PYTHONDONTWRITEBYTECODE). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_search import CORPUS, EXTRA, QUERIES, build_enron, grow  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
SERVE = """
import sys, threading, time
from oaken import config
from oaken.search.server import SearchServer
cfg = config.load(sys.argv[1])
s = SearchServer(cfg, threading.Event()).start()
s.warm()
print("ready", flush=True)
sys.stdin.read()  # until the benchmark closes our stdin
"""


def _write_configs(home: Path) -> tuple[Path, Path]:
    hybrid, keyword = home / "config.toml", home / "keyword.toml"
    hybrid.write_text(f'[paths]\ndata_dir = "{home}"\n\n[embedder]\nmodel = "{MODEL}"\n')
    keyword.write_text(f'[paths]\ndata_dir = "{home}"\n\n[embedder]\nmodel = "none"\n')
    return hybrid, keyword


def _embed(home: Path, config_file: Path) -> None:
    from oaken import config as config_mod
    from oaken.index import indexer

    start = time.perf_counter()
    report = indexer.update(config_mod.load(config_file))
    print(f"  vectors brought up to date in {time.perf_counter() - start:.1f} s ({report.vectors})")


def _p95(values: list[float]) -> float:
    return sorted(values)[max(int(len(values) * 0.95) - 1, 0)]


def warm(home: Path, config_file: Path, runs: int) -> None:
    from oaken import config as config_mod
    from oaken.search import client
    from oaken.search.engine import search

    cfg = config_mod.load(config_file)
    queries = QUERIES + EXTRA
    for q in queries:
        assert client.ask_raw(cfg, q, {}) is not None, "the socket did not answer"
        search(q, config=cfg)  # loads the model here too, outside the figures
    socket_ms, server_ms, local_ms, modes = [], [], [], set()
    for _ in range(runs):
        for q in queries:
            start = time.perf_counter()
            answer = client.ask_raw(cfg, q, {"limit": 10})
            socket_ms.append((time.perf_counter() - start) * 1000)
            assert answer is not None
            server_ms.append(answer["timings"]["total"])
            modes.add((answer["mode"], answer["degraded_reason"]))
            start = time.perf_counter()
            search(q, limit=10, config=cfg)
            local_ms.append((time.perf_counter() - start) * 1000)
    print(f"  modes seen: {sorted(modes, key=str)}")
    for name, values in (("through the socket (client wall)", socket_ms), ("  of which the server's search", server_ms),
                         ("in-process, same searches", local_ms)):
        print(f"  {name:34} p50 {statistics.median(values):6.1f}  p95 {_p95(values):6.1f}  ({len(values)} searches)")
    print(f"  target: p50 under 30 ms through the socket; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _once(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall ms, CPU ms) of one process. CPU time is its own cost; on a shared machine wall time
    also counts waiting for a core."""
    start, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[-400:]}")
    return (time.perf_counter() - start) * 1000, (_children_cpu() - cpu) * 1000


def cold(home: Path, keyword_config: Path, runs: int, root: Path, pycache: Path, daemon: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(OAKEN_HOME=str(home), PYTHONPATH=str(root), PYTHONPYCACHEPREFIX=str(pycache))
    oaken = [sys.executable, "-m", "oaken.cli", "search", "--limit", "10"]
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "oaken search (daemon socket)": oaken,
        "oaken search --no-daemon, keyword": [*oaken[:3], "--config", str(keyword_config), *oaken[3:], "--no-daemon"],
    }
    if not daemon:
        del commands["oaken search (daemon socket)"]
    query = ["stock options"]
    for cmd in commands.values():  # compile bytecode once, as an installed package has it
        _once(cmd + (query if "search" in cmd else []), env, root)  # `-m` puts the cwd first on sys.path
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for i in range(runs):  # interleaved: each round runs every command once
        q = [QUERIES[i % len(QUERIES)]]
        for name, cmd in commands.items():
            times[name].append(_once(cmd + (q if "search" in cmd else []), env, root))
    bare = [statistics.median(x[i] for x in times["python -c pass"]) for i in (0, 1)]
    print(f"  oaken from {root}")
    for name, values in times.items():
        wall, cpu = (statistics.median(x[i] for x in values) for i in (0, 1))
        print(f"  {name:36} wall {wall:6.1f} ms ({wall / bare[0]:4.2f}x a bare start)   "
              f"CPU {cpu:6.1f} ms ({cpu / bare[1]:4.2f}x)")
    print(f"  target: within 2x a bare start; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main(argv: list[str] | None = None) -> int:
    global MODEL
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", help="folder for the data (default: a temp dir, removed after)")
    p.add_argument("--size", type=int, default=10000)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--root", help="checkout whose `oaken` the cold part runs (default: this one)")
    p.add_argument("--model", default=MODEL, help=f"the [embedder] model (default {MODEL}; all-mpnet-base-v2)")
    p.add_argument("--keyword-only", action="store_true",
                   help="no model, no daemon: only the cold keyword figures (for a --root without the socket)")
    args = p.parse_args(argv)
    MODEL = args.model
    if not CORPUS.exists():
        print("needs /work/shared/corpora", file=sys.stderr)
        return 2
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="oaken-bench-hybrid-"))
    home = work / "oaken-home"
    server = None
    try:
        print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; data in {work}")
        if not (home / "raw.db").exists():
            build_enron(home)
        grow(home, args.size)
        hybrid_config, keyword_config = _write_configs(home)
        if args.keyword_only:
            print(f"\ncold process per search, median of {args.runs} interleaved rounds (ms)")
            cold(home, keyword_config, args.runs, Path(args.root).resolve() if args.root else ROOT, work / "pycache",
                 daemon=False)
            return 0
        _embed(home, hybrid_config)
        env = {**os.environ, "OAKEN_HOME": str(home), "PYTHONPATH": str(ROOT)}
        server = subprocess.Popen([sys.executable, "-c", SERVE, str(hybrid_config)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=env, text=True)
        assert server.stdout is not None
        for line in server.stdout:  # the model's loaders may print first
            if line.strip() == "ready":
                break
        else:
            raise SystemExit("the search server did not start")
        print(f"\nwarm hybrid search at {args.size:,} messages (ms), limit 10, {len(QUERIES) + len(EXTRA)} "
              f"queries x {args.runs} runs")
        warm(home, hybrid_config, args.runs)
        print(f"\ncold process per search, median of {args.runs} interleaved rounds (ms)")
        cold(home, keyword_config, args.runs, Path(args.root).resolve() if args.root else ROOT, work / "pycache",
             daemon=True)
    finally:
        if server is not None:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(30)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
