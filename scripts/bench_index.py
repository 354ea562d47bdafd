#!/usr/bin/env python3
"""Benchmark: parse and keyword-index a Maildir with oaken, `notmuch new` and `mu index`.

Same files, same run: ../shared/corpora/enron-lay-skilling is laid out as a Maildir tree in a
temp dir (one Maildir per original folder) and read once so every tool starts from a warm page
cache. For each tool: wall time, messages per second, peak memory (the resident memory of all its
processes summed, sampled from /proc every 10 ms), and the time of a second run that finds
nothing new; CPU time (user + system of all the tool's processes) beside wall time, since a
shared machine's load shows in wall time only. Oaken's figure is `oaken import` (Maildir -> raw.db) plus `oaken reindex
--keyword-only` (raw.db -> index.db), since the peers also read the files and index them in one
go; the index step alone is printed too. Ratios are against mu and notmuch measured here.

    .venv/bin/python scripts/bench_index.py [--corpus DIR] [--rounds N] [--json]

Measured 2026-11-29 on the 2-core project machine under load average 5-8 (three runs, medians of
3 rounds; ranges over the runs): mu 1.8 543-1,077 msg/s, 4.3-5.2 CPU s, 177 MB; notmuch 0.37
409-652 msg/s, 6.5-7.5 CPU s, 222 MB; oaken import + reindex 631-1,004 msg/s, 4.9-5.0 CPU s,
117-125 MB (0.93-1.30x mu by wall, 0.87-1.04x per CPU s); oaken reindex alone 1,120-1,626 msg/s,
3.1-3.2 CPU s (1.51-2.37x mu by wall, 1.35-1.65x per CPU s); no-change runs: mu 0.54-0.57 s,
notmuch 0.04-0.06 s, oaken import + reindex 1.7-2.9 s, reindex alone 0.20-0.42 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpora" / "enron-lay-skilling"
OAKEN = [str(ROOT / ".venv" / "bin" / "python"), "-m", "oaken.cli"]


@dataclass
class Run:
    seconds: float
    peak_mb: float
    cpu_seconds: float  # user + system of all the tool's processes: what load on a shared machine cannot inflate


@dataclass
class Result:
    tool: str
    messages: int
    seconds: float
    per_second: float
    peak_mb: float
    nochange_seconds: float
    cpu_seconds: float
    detail: str = ""

    @property
    def per_cpu_second(self) -> float:
        return self.messages / self.cpu_seconds if self.cpu_seconds else 0.0


def layout(corpus: Path, dest: Path) -> int:
    """Copy every message into dest/<mailbox>.<folder>/cur/<n>:2,S (a Maildir++-like tree)."""
    n = 0
    for path in sorted(corpus.rglob("*.eml")):
        rel = path.relative_to(corpus)
        folder = dest / ".".join(rel.parts[:-1])
        for sub in ("cur", "new", "tmp"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        n += 1
        shutil.copyfile(path, folder / "cur" / f"{int(time.time())}.{n}.bench:2,S")
    for path in dest.rglob("*"):  # warm the page cache for every tool alike
        if path.is_file():
            path.read_bytes()
    return n


def _tree_rss_kb(root_pid: int) -> int:
    """Resident memory of a process and all its descendants, summed."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/statm") as f:
                pages = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        pid = int(entry)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = pages * (os.sysconf("SC_PAGE_SIZE") // 1024)
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def measure(cmds: list[list[str]], env: dict[str, str]) -> Run:
    """Run commands one after another; wall time of all, and the highest summed RSS seen."""
    peak = 0
    started = time.perf_counter()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_before = usage.ru_utime + usage.ru_stime
    for cmd in cmds:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        done = threading.Event()
        box = {"peak": 0}

        def sample() -> None:
            while not done.is_set():
                box["peak"] = max(box["peak"], _tree_rss_kb(proc.pid))
                time.sleep(0.01)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        _, err = proc.communicate()
        done.set()
        t.join()
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
        peak = max(peak, box["peak"])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Run(time.perf_counter() - started, peak / 1024, usage.ru_utime + usage.ru_stime - cpu_before)


def bench_oaken(maildir: Path, work: Path, n: int) -> tuple[Result, Result]:
    home = work / "oaken"
    env = {**os.environ, "OAKEN_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    imp = measure([[*OAKEN, "import", "--no-index", str(maildir)]], env)
    idx = measure([[*OAKEN, "reindex", "--keyword-only"]], env)
    again = measure([[*OAKEN, "import", "--no-index", str(maildir)], [*OAKEN, "reindex", "--keyword-only"]], env)
    again_idx = measure([[*OAKEN, "reindex", "--keyword-only"]], env)
    total = imp.seconds + idx.seconds
    both = Result("oaken (import + reindex)", n, total, n / total, max(imp.peak_mb, idx.peak_mb), again.seconds,
                  imp.cpu_seconds + idx.cpu_seconds, f"import {imp.seconds:.2f} s, reindex {idx.seconds:.2f} s")
    alone = Result("oaken reindex alone (raw.db -> index.db)", n, idx.seconds, n / idx.seconds, idx.peak_mb,
                   again_idx.seconds, idx.cpu_seconds)
    return both, alone


def bench_notmuch(maildir: Path, work: Path, n: int) -> Result:
    cfg = work / "notmuch-config"
    cfg.write_text(f"[database]\npath={maildir}\n[new]\ntags=\n[user]\nname=Bench\nprimary_email=bench@example.com\n"
                   "[maildir]\nsynchronize_flags=false\n")
    env = {**os.environ, "NOTMUCH_CONFIG": str(cfg)}
    first = measure([["notmuch", "new", "--quiet"]], env)
    again = measure([["notmuch", "new", "--quiet"]], env)
    return Result("notmuch new", n, first.seconds, n / first.seconds, first.peak_mb, again.seconds, first.cpu_seconds)


def bench_mu(maildir: Path, work: Path, n: int) -> Result:
    home = work / "mu"
    env = dict(os.environ)
    subprocess.run(["mu", "init", f"--muhome={home}", f"--maildir={maildir}"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = measure([["mu", "index", f"--muhome={home}", "--quiet"]], env)
    again = measure([["mu", "index", f"--muhome={home}", "--quiet"]], env)
    return Result("mu index", n, first.seconds, n / first.seconds, first.peak_mb, again.seconds, first.cpu_seconds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--rounds", type=int, default=1, help="repeat and report the median round")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"{args.corpus}: no such corpus folder (see ../shared/corpora/README.md)", file=sys.stderr)
        return 2
    rounds: list[list[Result]] = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="oaken-bench-") as tmp:
            work = Path(tmp)
            maildir = work / "Maildir"
            n = layout(args.corpus, maildir)
            results = []
            # peers first and oaken last, then peers again? one order per round, alternated
            order = ["oaken", "mu", "notmuch"] if len(rounds) % 2 == 0 else ["notmuch", "mu", "oaken"]
            for tool in order:
                if tool == "oaken":
                    results.extend(bench_oaken(maildir, work, n))
                elif tool == "mu":
                    results.append(bench_mu(maildir, work, n))
                else:
                    results.append(bench_notmuch(maildir, work, n))
            rounds.append(sorted(results, key=lambda r: r.tool))
    final = []
    for i in range(len(rounds[0])):
        runs = [r[i] for r in rounds]
        med = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
        final.append(med)
    by = {r.tool.split()[0] if not r.tool.startswith("oaken reindex") else "oaken-index": r for r in final}
    if args.json:
        print(json.dumps([asdict(r) for r in final], indent=2))
        return 0
    load = os.getloadavg()[0]
    print(f"{final[0].messages} messages from {args.corpus.name}, {args.rounds} round(s), median shown; "
          f"load average {load:.1f} on {os.cpu_count()} cores")
    print(f"{'tool':44} {'msg/s':>8} {'seconds':>8} {'CPU s':>8} {'msg/CPU s':>10} {'peak MB':>8} {'no-change s':>12}")
    for r in final:
        print(f"{r.tool:44} {r.per_second:8.0f} {r.seconds:8.2f} {r.cpu_seconds:8.2f} {r.per_cpu_second:10.0f} "
              f"{r.peak_mb:8.1f} {r.nochange_seconds:12.2f}" + (f"   ({r.detail})" if r.detail else ""))
    oak, mu, nm = by["oaken"], by["mu"], by["notmuch"]
    print(f"oaken / mu      : {oak.per_second / mu.per_second:.2f}x messages/s (target >= 1.5x), "
          f"peak memory {oak.peak_mb / mu.peak_mb:.2f}x")
    print(f"oaken / notmuch : {oak.per_second / nm.per_second:.2f}x messages/s, peak memory {oak.peak_mb / nm.peak_mb:.2f}x")
    alone = by["oaken-index"]
    print(f"reindex alone / mu: {alone.per_second / mu.per_second:.2f}x messages/s")
    print(f"per CPU second (load-independent): oaken {oak.per_cpu_second / mu.per_cpu_second:.2f}x mu, "
          f"reindex alone {alone.per_cpu_second / mu.per_cpu_second:.2f}x mu, "
          f"oaken {oak.per_cpu_second / nm.per_cpu_second:.2f}x notmuch")
    print(f"no-change re-run: oaken {oak.nochange_seconds:.2f} s, mu {mu.nochange_seconds:.2f} s, "
          f"notmuch {nm.nochange_seconds:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
