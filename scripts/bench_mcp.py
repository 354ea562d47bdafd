#!/usr/bin/env python3
"""Benchmark of `oaken mcp` as an agent's client sees it: first-call and warm latency through the
MCP SDK's real stdio client, with the warm daemon answering and without it.

Each round starts a fresh `oaken mcp` (the way an MCP client starts it) and times, on the client's
clock: the start (process, SDK import, handshake, tool listing), the first search call, then one warm call of
each query. Rounds alternate between a server whose searches a running daemon answers and one
started with --no-daemon (searching in its own process, the model loaded there: in the background
from its start, so the first call waits for whatever is left of it).

    .venv/bin/python scripts/bench_mcp.py [--work DIR] [--rounds 5] [--model all-MiniLM-L6-v2|concept]

The data: Enron (/work/shared/corpora/enron-lay-skilling, 6,148 messages) imported into
DIR/oaken-home and embedded, as scripts/bench_hybrid.py --size 6148 leaves it (a --work of that
script is reused as it is). Prints figures; asserts nothing but that each mode is the one measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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

from bench_hybrid import SERVE, _embed, _p95  # noqa: E402
from bench_search import CORPUS, EXTRA, QUERIES, build_enron  # noqa: E402

OAKEN = Path(sys.executable).with_name("oaken")


async def _round(home: Path, daemon: bool) -> dict[str, object]:
    """One fresh `oaken mcp`: its start, its first search, then a warm call of each query (ms)."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    command, args = (str(OAKEN), []) if OAKEN.exists() else (sys.executable, ["-m", "oaken.cli"])
    params = StdioServerParameters(
        command=command,
        args=[*args, "mcp", *([] if daemon else ["--no-daemon"])],
        env={"OAKEN_HOME": str(home), "HF_HUB_OFFLINE": "1"},
    )
    queries = QUERIES + EXTRA
    start = time.perf_counter()
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):  # noqa: SIM115
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()  # as a client does on connecting, to show the agent the tools
            started = time.perf_counter()
            first = await session.call_tool("search", {"query": queries[0], "limit": 10})
            first_ms = (time.perf_counter() - started) * 1000
            if first.is_error:
                raise SystemExit(f"search: {first.content[0].text}")  # type: ignore[union-attr]
            answer = json.loads(first.content[0].text)  # type: ignore[union-attr]
            warm, modes = [], {(answer["served_by"], answer["mode"], answer["degraded_reason"])}
            for q in queries[1:] + queries[:1]:
                t = time.perf_counter()
                result = await session.call_tool("search", {"query": q, "limit": 10})
                warm.append((time.perf_counter() - t) * 1000)
                if result.is_error:
                    raise SystemExit(f"search {q!r}: {result.content[0].text}")  # type: ignore[union-attr]
                answer = json.loads(result.content[0].text)  # type: ignore[union-attr]
                modes.add((answer["served_by"], answer["mode"], answer["degraded_reason"]))
    # the last warm call is the first query again: the first call's cost beside its own warm cost
    return {"start": (started - start) * 1000, "first": first_ms, "again": warm[-1], "warm": warm, "modes": modes}


def _socket_pass(config: Path) -> list[float]:
    """One pass of the queries asked of the daemon's socket directly, as `oaken search` asks it (ms):
    what the MCP layer adds is the difference."""
    from oaken import config as config_mod
    from oaken.search import client

    cfg = config_mod.load(config)
    times = []
    for q in QUERIES + EXTRA:
        start = time.perf_counter()
        assert client.ask_raw(cfg, q, {"limit": 10}) is not None, "the socket did not answer"
        times.append((time.perf_counter() - start) * 1000)
    return times


def _write_config(home: Path, model: str) -> Path:
    path = home / "config.toml"
    path.write_text(f'[paths]\ndata_dir = "{home}"\n\n[embedder]\nmodel = "{model}"\n')
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", help="folder for the data (default: a temp dir, removed after)")
    p.add_argument("--rounds", type=int, default=5, help="fresh servers per mode (default 5)")
    p.add_argument("--model", default="all-MiniLM-L6-v2", choices=["all-MiniLM-L6-v2", "concept"])
    args = p.parse_args(argv)
    if not CORPUS.exists():
        print("needs /work/shared/corpora", file=sys.stderr)
        return 2
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="oaken-bench-mcp-"))
    home = work / "oaken-home"
    server = None
    try:
        print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; data in {work}")
        if not (home / "raw.db").exists():
            build_enron(home)
        config = _write_config(home, args.model)
        _embed(home, config)
        env = {**os.environ, "OAKEN_HOME": str(home), "PYTHONPATH": str(ROOT)}
        server = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert server.stdout is not None
        for line in server.stdout:  # the model's loaders may print first
            if line.strip() == "ready":
                break
        else:
            raise SystemExit("the search server did not start")
        results: dict[str, list[dict[str, object]]] = {"daemon": [], "in-process": []}
        socket_ms: list[float] = []
        for _ in range(args.rounds):  # interleaved: a shared machine's load falls on all alike
            for mode in results:
                results[mode].append(asyncio.run(_round(home, daemon=mode == "daemon")))
            socket_ms += _socket_pass(config)
        n = len(QUERIES) + len(EXTRA)
        print(
            f"\n`oaken mcp` through the SDK's stdio client, {args.model}, limit 10: {args.rounds} fresh servers per "
            f"mode, each a first search then {n} warm ones (ms, client wall)"
        )
        for mode, rounds in results.items():
            modes = set().union(*(r["modes"] for r in rounds))  # type: ignore[arg-type]
            assert all(m[0] == mode for m in modes), f"{mode}: answered by {modes}"
            start = statistics.median(r["start"] for r in rounds)  # type: ignore[misc]
            first = statistics.median(r["first"] for r in rounds)  # type: ignore[misc]
            again = statistics.median(r["again"] for r in rounds)  # type: ignore[misc]
            warm = [ms for r in rounds for ms in r["warm"]]  # type: ignore[attr-defined]
            print(
                f"  {mode:10}  start {start:7.1f}   first search {first:7.1f} (the same, warm {again:5.1f})   warm p50 "
                f"{statistics.median(warm):6.1f}  p95 {_p95(warm):6.1f}  ({len(warm)} searches)"
            )
            print(f"  {'':10}  modes: {sorted(modes, key=str)}")
        print(
            f"  the same searches straight to the daemon's socket (no MCP): p50 {statistics.median(socket_ms):6.1f}  "
            f"p95 {_p95(socket_ms):6.1f}  ({len(socket_ms)} searches)"
        )
        print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    finally:
        if server is not None:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(30)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
