#!/usr/bin/env python3
"""Benchmark of `oaken search` from a cold process with vectors present, against peers in the same run.

1. First search: `oaken search Q` with no search server running before it (the previous one
   stopped and its exit waited for), so it answers from keywords and starts the background
   server (oaken.search.background); the same search in its own process as before it
   (`--no-daemon`: LanceDB and the model loaded); `notmuch search --limit=10 Q` on the same mail;
   a bare Python start. Interleaved rounds, medians of wall and CPU time (the background server's
   own CPU is not counted: it runs after the answer).
2. Warm: `oaken search Q` end to end (process start, socket, answer, print) answered by that
   server (hybrid), and by a keyword-only server (model "none", a copy of raw.db and index.db),
   beside a bare start, notmuch and mu (`mu find`, Debian's maildir-utils, on a Maildir copy of
   the same mail); the keyword server's answer also through the full command (oaken.cli.main: what
   the console script ran before oaken.fastpath), the server's own search time (the answer's
   timings.total), the part of the figure the client cannot change, and a process that only
   imports what the fast client of the socket needs (_socket, _json): the client's floor.

    .venv/bin/python scripts/bench_cold.py --home DIR [--runs 9]      # a data dir with vectors
    .venv/bin/python scripts/bench_cold.py --work DIR [--runs 9]      # builds Enron + all-MiniLM-L6-v2 first
    .venv/bin/python scripts/bench_cold.py --home DIR --warm-only     # part 2 alone

`oaken` runs as an installed command would: a private venv whose site-packages links this
checkout's package (no editable-install finder, which costs this machine's venv 20-60 ms a start)
and sees this venv's dependencies; bytecode compiled once into a private cache. Needs Debian's
notmuch and maildir-utils for their rows (left out without them). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_search import CORPUS, QUERIES  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
# what the fast client of the socket starts with: the interpreter, the socket's and the JSON
# scanner's C halves (the daemon renders the answer: oaken.protocol)
FLOOR = "python -c 'import _socket, _json'"
SERVE = """
import sys, threading
from oaken import config
from oaken.search.server import SearchServer
s = SearchServer(config.load(sys.argv[1]), threading.Event()).start()
s.warm()
print("ready", flush=True)
sys.stdin.read()
"""


def installed_like(work: Path) -> Path:
    """A venv whose `oaken` is this checkout installed as a wheel installs it (a package directory
    in site-packages, a console script), with this venv's packages on its path."""
    venv = work / "venv"
    if not (venv / "bin" / "oaken").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = Path(
            subprocess.check_output(
                [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                text=True,
            ).strip()
        )
        (site / "oaken").symlink_to(ROOT / "oaken")
        (site / "oaken-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # the `oaken` command as pip installs it from the wheel (bin/oaken, its `#!python` line pointed
    # at the venv's python), and pip's console script for the full command: the row before the fast path
    script = (ROOT / "bin" / "oaken").read_text()
    (venv / "bin" / "oaken").write_text(f"#!{venv / 'bin' / 'python'}\n" + script.split("\n", 1)[1])
    (venv / "bin" / "oaken-full").write_text(console_script(venv / "bin" / "python", "oaken.cli:main"))
    for name in ("oaken", "oaken-full"):
        (venv / "bin" / name).chmod(0o755)
    return venv


def console_script(python: Path, target: str) -> str:
    """What pip writes for an entry point `module:function` (its template, its `import re` included)."""
    module, _, function = target.partition(":")
    return (
        f"#!{python}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom {module} import {function}\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        f"    sys.exit({function}())\n"
    )


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(cmd: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    """(wall ms, CPU ms, stderr) of one process."""
    start, cpu = time.perf_counter(), _cpu()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd="/", text=True)
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr[-400:]}")
    return (time.perf_counter() - start) * 1000, (_cpu() - cpu) * 1000, proc.stderr


def server_pid(home: Path) -> int | None:
    try:
        record = json.loads((home / "search-server.lock").read_text() or "{}")
    except (FileNotFoundError, ValueError):
        return None
    return record.get("pid") if record.get("role") == "background" else None


def stop_server(home: Path) -> None:
    """Stop the background server, and wait until its lock is free: the next search starts cold."""
    pid = server_pid(home)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    lock = home / "search-server.lock"
    if not lock.exists():
        return
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the server has exited
    finally:
        os.close(fd)


def wait_ready(home: Path, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            record = json.loads((home / "search-server.lock").read_text() or "{}")
        except (FileNotFoundError, ValueError):
            record = {}
        if record.get("state") == "ready":
            return
        time.sleep(0.1)
    raise SystemExit("the background search server did not become ready")


def notmuch_config(work: Path) -> Path | None:
    if not shutil.which("notmuch"):
        return None
    db, conf = work / "notmuch-db", work / "notmuch-config"
    if not db.exists():
        db.mkdir(parents=True)
        conf.write_text(
            f"[database]\npath={db}\nmail_root={CORPUS}\n[new]\ntags=inbox\n"
            "[search]\nexclude_tags=\n[maildir]\nsynchronize_flags=false\n"
        )
        subprocess.run(["notmuch", f"--config={conf}", "new"], check=True, stdout=subprocess.DEVNULL)
    return conf


def mu_home(work: Path) -> Path | None:
    """A mu database of the same mail (a Maildir copy: mu reads only Maildirs), built once."""
    if not shutil.which("mu"):
        return None
    home = work / "mu"
    if not (home / "xapian").exists():
        from eval_peers import layout

        layout([CORPUS], work / "mu-mail")
        env = {**os.environ, "XDG_CACHE_HOME": str(work / "xdg"), "XDG_CONFIG_HOME": str(work / "xdg")}
        for step in (["init", f"--maildir={work / 'mu-mail'}"], ["index"]):
            subprocess.run(["mu", step[0], f"--muhome={home}", *step[1:], "--quiet"], check=True, env=env)
    return home


def server_ms(cmd: list[str], env: dict[str, str]) -> tuple[float, str | None, int]:
    """(the server's own search time (timings.total), why it was degraded if it was, how many hits)
    of an answer, read from `--format json`: a degraded answer is not the search measured."""
    out = json.loads(
        subprocess.run([*cmd, "--format", "json"], capture_output=True, env=env, cwd="/", text=True).stdout
    )
    return float(out["timings"].get("total", 0.0)), out.get("degraded_reason"), len(out["hits"])


def show(title: str, times: dict[str, list[tuple[float, float]]]) -> None:
    print(title)
    bare = statistics.median(w for w, _ in times["python -c pass"])
    for name, values in times.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(f"  {name:46} wall {wall:7.1f} ms  CPU {cpu:7.1f} ms  ({wall / bare:5.2f}x a bare start)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--home", help="a data directory with raw.db, index.db and vectors/ of all-MiniLM-L6-v2")
    p.add_argument("--work", help="folder for the venv, notmuch and (without --home) the data; default: a temp dir")
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--warm-only", action="store_true", help="part 2 alone: the searches a running server answers")
    args = p.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="oaken-bench-cold-"))
    work.mkdir(parents=True, exist_ok=True)
    home = Path(args.home) if args.home else work / "oaken-home"
    if not args.home and not (home / "vectors").exists():
        from bench_hybrid import _embed, _write_configs
        from bench_search import build_enron

        build_enron(home)
        _embed(home, _write_configs(home)[0])
    # each server's config as a user has it: config.toml in OAKEN_HOME, no --config (which reads it whole)
    hybrid_home = work / "hybrid-config"
    hybrid_home.mkdir(exist_ok=True)
    (hybrid_home / "config.toml").write_text(f'[paths]\ndata_dir = "{home}"\n\n[embedder]\nmodel = "{MODEL}"\n')
    keyword_home = work / "keyword-home"
    keyword_home.mkdir(exist_ok=True)
    for name in ("raw.db", "index.db"):
        shutil.copyfile(home / name, keyword_home / name)
    keyword_config = keyword_home / "config.toml"
    keyword_config.write_text(f'[paths]\ndata_dir = "{keyword_home}"\n\n[embedder]\nmodel = "none"\n')

    venv = installed_like(work)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(PYTHONPYCACHEPREFIX=str(work / "pycache"), OAKEN_HOME=str(hybrid_home), HF_HUB_OFFLINE="1")
    keyword_env = {**env, "OAKEN_HOME": str(keyword_home)}
    py, oaken = str(venv / "bin" / "python"), str(venv / "bin" / "oaken")
    search = [py, oaken, "search", "--limit", "10"]
    full = [py, str(venv / "bin" / "oaken-full"), "search", "--limit", "10"]
    nm = notmuch_config(work)
    nm_search = ["notmuch", f"--config={nm}", "search", "--limit=10"] if nm else None
    mu = mu_home(work)
    mu_search = ["mu", "find", f"--muhome={mu}", "--maxnum=10", "--"] if mu else None
    mu_env = {**env, "XDG_CACHE_HOME": str(work / "xdg"), "XDG_CONFIG_HOME": str(work / "xdg")}
    print(
        f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; data {home}; load average "
        f"{os.getloadavg()[0]:.1f}"
    )

    stop_server(home)
    once([*search, "--no-daemon", "warm up"], env)  # compiles the bytecode, fills the OS's page cache
    once([*search, "warm up"], env)
    stop_server(home)
    if not args.warm_only:
        cold_rounds(args.runs, search, nm_search, py, env, home)
    warm_rounds(args.runs, search, full, nm_search, (mu_search, mu_env), py, (env, keyword_env, keyword_config), home)
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def cold_rounds(
    runs: int, search: list[str], nm_search: list[str] | None, py: str, env: dict[str, str], home: Path
) -> None:
    """Part 1: each first search with no server before it, beside the same search in its own process."""
    cold: dict[str, list[tuple[float, float]]] = {
        "python -c pass": [],
        "oaken search, first (starts the server)": [],
        "oaken search --no-daemon (model in process)": [],
    }
    if nm_search:
        cold["notmuch search"] = []
    reasons = set()
    for i in range(runs):
        q = QUERIES[i % len(QUERIES)]
        cold["python -c pass"].append(once([py, "-c", "pass"], env)[:2])
        wall, cpu, err = once([*search, q], env)
        cold["oaken search, first (starts the server)"].append((wall, cpu))
        reasons.add("vector_starting" in err)
        stop_server(home)  # before the next row: its warm-up must not share the cores with it
        cold["oaken search --no-daemon (model in process)"].append(once([*search, "--no-daemon", q], env)[:2])
        if nm_search:
            cold["notmuch search"].append(once([*nm_search, q], env)[:2])
    show(f"\ncold, median of {runs} interleaved rounds (each first search with no server before it)", cold)
    print(f"  every first search said vector_starting: {reasons == {True}}")


def warm_rounds(
    runs: int,
    search: list[str],
    full: list[str],
    nm_search: list[str] | None,
    mu: tuple[list[str] | None, dict[str, str]],
    py: str,
    envs: tuple[dict[str, str], dict[str, str], Path],
    home: Path,
) -> None:
    """Part 2: end to end through the socket of a running server, interleaved with the peers."""
    (mu_search, mu_env), (env, keyword_env, keyword_config) = mu, envs
    once([*search, "start"], env)
    wait_ready(home)
    keyword_server = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(keyword_config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**env, "PYTHONPATH": str(ROOT)},
        text=True,
    )
    try:
        assert keyword_server.stdout is not None and keyword_server.stdout.readline().strip() == "ready"
        warm: dict[str, list[tuple[float, float]]] = {
            "python -c pass": [],
            "oaken search, warm hybrid server": [],
            "oaken search, warm keyword server": [],
            "  the same through the full command (before)": [],
            FLOOR: [],
        }
        if nm_search:
            warm["notmuch search"] = []
        if mu_search:
            warm["mu find"] = []
        for _ in range(3):
            once([*search, "x"], env), once([*search, "x"], keyword_env), once([*full, "x"], keyword_env)
        for i in range(runs * 2):
            q = QUERIES[i % len(QUERIES)]
            warm["python -c pass"].append(once([py, "-c", "pass"], env)[:2])
            warm["oaken search, warm hybrid server"].append(once([*search, q], env)[:2])
            warm["oaken search, warm keyword server"].append(once([*search, q], keyword_env)[:2])
            warm["  the same through the full command (before)"].append(once([*full, q], keyword_env)[:2])
            warm[FLOOR].append(once([py, "-c", "import _socket, _json"], env)[:2])
            if nm_search:
                warm["notmuch search"].append(once([*nm_search, q], env)[:2])
            if mu_search:
                warm["mu find"].append(once([*mu_search, q], mu_env, ok=(0, 2, 4))[:2])  # 2, 4: no match
        show(f"\nwarm: end to end through the socket, median of {runs * 2} interleaved rounds", warm)
        own = [server_ms([*search, q], keyword_env) for q in QUERIES for _ in range(3)]
        print(
            f"  the keyword server's own search time (timings.total), median: "
            f"{statistics.median(ms for ms, _, _ in own):.1f} ms; hits per answer, median: "
            f"{statistics.median(n for _, _, n in own)}; degraded: {sorted({r for _, r, _ in own if r}) or 'none'}"
        )
        oaken_ms = statistics.median(w for w, _ in warm["oaken search, warm keyword server"])
        for peer in ("notmuch search", "mu find"):
            if peer in warm:
                ratio = oaken_ms / statistics.median(w for w, _ in warm[peer])
                print(f"  oaken search (keyword server) / {peer}, wall: {ratio:.2f}")
    finally:
        assert keyword_server.stdin is not None
        keyword_server.stdin.close()
        keyword_server.wait(30)
        stop_server(home)


if __name__ == "__main__":
    sys.exit(main())
