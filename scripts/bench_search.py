#!/usr/bin/env python3
"""Benchmark of keyword search, measured against peers in the same run.

1. Cold: the same queries through `oaken search` (a new process each time; searching in its own
   process with --no-daemon, and answered by a warm daemon's socket), `notmuch search` and bare
   Python starts, on the Enron corpus (6,148 real messages): median wall and CPU times, ratios.
   notmuch sorts by date; Oaken ranks by relevance.
2. In-process: keyword search p50 and p95 at 10k and 100k messages. Beyond the real 6,148, messages
   are synthesised by replicating Enron messages with new Message-IDs and shifted dates.

    .venv/bin/python scripts/bench_search.py [--work DIR] [--sizes 10000,100000] [--runs 7]

Needs /work/shared/corpora (not part of a clone) and Debian's notmuch. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORPUS = Path("/work/shared/corpora/enron-lay-skilling")
QUERIES = ["california power", "stock options", "dabhol", "ken lay donate", "invoice", "board meeting",
           "skilling", "energy crisis", "houston reception", "broadband"]
# In-process only: operators Oaken has and the cold peers would spell differently.
EXTRA = ["from:kenneth.lay", "is:unread invoice", "when will the california energy crisis end?",
         '"stock options" -donate', "", "label:inbox after:2001-01-01 power"]


def _median_ms(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(median wall ms, median CPU ms of the child process, user + system)."""
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


_SERVE = """
import sys, threading
from oaken import config
from oaken.search.server import SearchServer
stop = threading.Event()
SearchServer(config.load(), stop).start()
print("ready", flush=True)
sys.stdin.read()
stop.set()
"""


def _config(home: Path):  # type: ignore[no-untyped-def]
    from oaken.config import Config, EmbedderConfig, PathsConfig

    return Config(paths=PathsConfig(data_dir=str(home)), embedder=EmbedderConfig(model="none"))


def _index(home: Path) -> float:
    from oaken.index import indexer

    start = time.perf_counter()
    indexer.update(_config(home))
    return time.perf_counter() - start


def build_enron(home: Path) -> None:
    from oaken import api

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[embedder]\nmodel = "none"\n')
    start = time.perf_counter()
    api.import_mail([CORPUS / "lay-k", CORPUS / "skilling-j"], account="enron", config=_config(home))
    print(f"  imported 6,148 Enron messages in {time.perf_counter() - start:.1f} s; "
          f"indexed in {_index(home):.1f} s")


_MSGID = re.compile(rb"^Message-ID:[^\n]*\n", re.I | re.M)
_DATE = re.compile(rb"^Date:[^\n]*\n", re.I | re.M)


def grow(home: Path, target: int, seed: int = 5) -> None:
    """Add replicas of the stored Enron messages until raw.db holds `target` messages."""
    from email.utils import format_datetime
    from datetime import datetime, timedelta, timezone

    from oaken.store import Store

    rng = random.Random(seed)
    with Store(home / "raw.db") as store:
        have = store.message_count()
        if have >= target:
            return
        originals = [store.raw(m) for m in store.all_message_ids()[:6148]]
        account = store.account_id("enron")
        folder = store.ensure_folder(account, "replicas").id
        start = time.perf_counter()
        n = have
        while n < target:
            with store.transaction():
                for _ in range(min(2000, target - n)):
                    raw = rng.choice(originals).replace(b"\r\n", b"\n")
                    when = datetime(1999, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=rng.randrange(3 * 525600))
                    head = f"Message-ID: <replica-{n}@bench.oaken>\nDate: {format_datetime(when)}\n".encode()
                    raw = head + _DATE.sub(b"", _MSGID.sub(b"", raw, count=1), count=1)
                    store.add_message(account, raw, folder_id=folder, flags=("\\Seen",) if n % 3 else ())
                    n += 1
        print(f"  added {target - have:,} replicas in {time.perf_counter() - start:.1f} s; "
              f"indexed in {_index(home):.1f} s")


def in_process(home: Path, runs: int) -> tuple[float, float, float, float, int]:
    """(wall p50, wall p95, CPU p50, CPU p95, searches). CPU time is this process's own: on a shared
    machine it shows what a search costs, where wall time also counts waiting for a core."""
    from oaken.search.engine import search

    cfg = _config(home)
    for q in QUERIES:  # one warm-up round: the OS file cache, not Oaken, is what this warms
        search(q, config=cfg)
    wall, cpu = [], []
    for _ in range(runs):
        for q in QUERIES + EXTRA:
            start, start_cpu = time.perf_counter(), time.process_time()
            search(q, limit=10, config=cfg)
            wall.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - start_cpu) * 1000)

    def p95(values: list[float]) -> float:
        return sorted(values)[int(len(values) * 0.95) - 1]

    return statistics.median(wall), p95(wall), statistics.median(cpu), p95(cpu), len(wall)


def cold(home: Path, work: Path, runs: int) -> None:
    nm_db = work / "notmuch-db"
    nm_conf = work / "notmuch-config"
    if not nm_db.exists():
        nm_db.mkdir(parents=True)
        nm_conf.write_text(f"[database]\npath={nm_db}\nmail_root={CORPUS}\n[new]\ntags=inbox\n"
                           "[search]\nexclude_tags=\n[maildir]\nsynchronize_flags=false\n")
        start = time.perf_counter()
        subprocess.run(["notmuch", f"--config={nm_conf}", "new"], check=True, stdout=subprocess.DEVNULL)
        print(f"  notmuch indexed the same mail in {time.perf_counter() - start:.1f} s")
    env = {**os.environ, "OAKEN_HOME": str(home)}
    oaken = [sys.executable, "-m", "oaken.cli", "search", "--limit", "10"]
    # Three bare starts: this venv's interpreter (what `oaken` runs on), the system's, and whatever
    # `python3` is on PATH (here possibly a pyenv shim, a shell script: say which).
    path_py = shutil.which("python3") or "python3"
    shim = path_py if Path(path_py).read_bytes()[:2] == b"#!" else None
    bares = {"venv py": [sys.executable, "-c", "pass"], "/usr/bin/py3": ["/usr/bin/python3", "-c", "pass"],
             "PATH py3": [path_py, "-c", "pass"]}
    # `oaken search` twice: searching in its own process (--no-daemon), and answered by a warm
    # daemon's socket (the process then only parses arguments, asks and prints)
    daemon = subprocess.Popen([sys.executable, "-c", _SERVE], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert daemon.stdout is not None and daemon.stdout.readline().strip() == "ready", "search server did not start"
        rows = []
        for q in QUERIES:
            rows.append((q, _median_ms([*oaken, "--no-daemon", q], runs, env), _median_ms([*oaken, q], runs, env),
                         _median_ms(["notmuch", f"--config={nm_conf}", "search", "--limit=10", q], runs),
                         *(_median_ms(cmd, runs) for cmd in bares.values())))
    finally:
        daemon.communicate("")
    names = ["oaken", "oaken+d", "notmuch", *bares]
    print("  wall ms (CPU ms of the process in brackets); oaken = --no-daemon, oaken+d = a daemon answers")
    print(f"  {'query':18}" + "".join(f" {k:>14}" for k in names) + f" {'oaken/venv':>11} {'oaken+d/venv':>13}")
    cols = list(zip(*[r[1:] for r in rows]))
    med = ("median", *((statistics.median(w for w, _ in col), statistics.median(c for _, c in col)) for col in cols))
    for q, *cells in [*rows, med]:
        o, d, _n, venv = cells[0], cells[1], cells[2], cells[3]
        print(f"  {q:18}" + "".join(f" {w:6.1f} [{c:5.1f}]" for w, c in cells)
              + f" {o[0] / venv[0]:5.2f} [{o[1] / venv[1]:4.2f}] {d[0] / venv[0]:6.2f} [{d[1] / venv[1]:4.2f}]")
    m = dict(zip(names, med[1:]))
    print(f"  ratios of medians, wall: oaken / PATH python3 {m['oaken'][0] / m['PATH py3'][0]:.2f}, "
          f"oaken / notmuch {m['oaken'][0] / m['notmuch'][0]:.1f}, oaken+d / notmuch {m['oaken+d'][0] / m['notmuch'][0]:.1f}")
    if shim:
        print(f"  (PATH python3 is {shim}, a script: a pyenv shim starts a shell before Python)")
    print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", help="folder for the data (default: a temp dir, removed after)")
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--skip-cold", action="store_true", help="only the in-process figures")
    args = p.parse_args(argv)
    if not CORPUS.exists() or not shutil.which("notmuch"):
        print("needs /work/shared/corpora and notmuch (apt-get install notmuch)", file=sys.stderr)
        return 2
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="oaken-bench-"))
    home = work / "oaken-home"
    try:
        print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; data in {work}")
        if not (home / "raw.db").exists():
            build_enron(home)
        if not args.skip_cold:
            print(f"\ncold process per query, median of {args.runs} runs (ms), Enron 6,148 messages")
            cold(home, work, args.runs)
        print("\nin-process keyword search (ms), limit 10, "
              f"{len(QUERIES) + len(EXTRA)} queries x {args.runs} runs")
        for size in (int(s) for s in args.sizes.split(",") if s):
            grow(home, size)
            from oaken.store import Store

            with Store(home / "raw.db", readonly=True) as store:
                held = store.message_count()  # a reused --work may hold more than asked
            p50, p95, c50, c95, n = in_process(home, args.runs)
            print(f"  {held:>7,} messages: wall p50 {p50:6.2f}  p95 {p95:6.2f};  CPU p50 {c50:6.2f}  p95 {c95:6.2f}  "
                  f"({n} searches; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
