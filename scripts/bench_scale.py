#!/usr/bin/env python3
"""Scale benchmark: 10k, 100k and 1M messages, Oaken against notmuch and mu on the same Maildir, same run.

Per size, on a Maildir made by scripts/gen_mailbox.py (real mail recombined; seeded):
1. Import + keyword index throughput (msgs/s), CPU seconds and peak RSS: `oaken import --no-index`
   + `oaken reindex --keyword-only`, against `notmuch new` and `mu index` on the same files.
2. Disk: raw.db, index.db, vectors/ beside the Maildir itself, notmuch's and mu's databases.
3. Warm search p50 / p95 through a warm search server's socket (what `oaken sync --daemon` runs),
   per query shape: one word, a three-word question, a quoted phrase, filters only
   (`from:x after:y`), a listing with no words, `is:unread`; plus the server's RSS idle and under
   that search loop.
4. Cold `oaken search --no-daemon` wall time (median), one word.
5. Cost of a change, where it must follow the change and not the mailbox: a no-change
   `oaken reindex`, a no-change `oaken import` of the same Maildir, `oaken status`, 100 new
   messages imported and indexed, a triage change reaching the indexes (triage + reindex).
6. With --vectors: vectors for every chunk by the `concept` stand-in embedder (the real model
   embeds about 450 chunks/s here: hours at 1M; the stand-in is given the real model's width,
   384 by default (--vector-dim; OAKEN_CONCEPT_DIM), so the store, its ANN index and the search
   path cost what they would), then hybrid warm p50 / p95
   and the server's RSS. Query embedding by the real model (a few ms, scripts/bench_hybrid.py)
   is not in these figures: the report says so.

    .venv/bin/python scripts/bench_scale.py --work /work/scale --sizes 10000,100000 [--vectors] [--runs 20]

Built Maildirs and homes are kept under --work and reused (pass --fresh to rebuild a size).
Needs ../shared/corpora (or --corpora), notmuch and mu (scripts/setup.sh installs them). Prints
figures and writes them to WORK/results-<size>.json. Checks what they stand on, not the times
(`correctness`: every message held, the indexes level, warm answers equal to a new process's, a
word notmuch finds found); a failed check ends the run (tests/test_bench_scale.py runs it small).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_index  # noqa: E402 - a sibling script: measure(), the peers' runs
from bench_cold import installed_like  # noqa: E402 - `oaken` as pip installs it
from bench_search import _SERVE as SERVE  # noqa: E402 - the same warm search server
import gen_mailbox  # noqa: E402

PY = str(ROOT / ".venv" / "bin" / "python")
OAKEN = [PY, "-m", "oaken.cli"]

# Query shapes; each is asked with several values so one lucky posting list does not decide.
SHAPES: dict[str, list[str]] = {
    "one word": ["pipeline", "dabhol", "reception", "broadband", "invoice"],
    "three-word question": [
        "california power prices",
        "who approved the budget",
        "board meeting agenda",
        "stock option grants",
        "energy trading losses",
    ],
    "quoted phrase": ['"board of directors"', '"natural gas"', '"conference call"', '"press release"'],
    "filters only": [
        "from:enron.com after:2020-01-01",
        "from:kenneth.lay@enron.com after:2010-06-01",
        "after:2024-01-01 before:2024-03-01",
    ],
    "no words": ["in:Sent", "label:Archive", "is:flagged"],
    "is:unread": ["is:unread"],
}



def du(path: Path) -> int:
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def mb(n: int) -> float:
    return round(n / 1e6, 1)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * len(s))) - 1))]


def run(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if out.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.decode(errors='replace')[-1500:]}")
    return time.perf_counter() - start


def median_run(cmd: list[str], env: dict[str, str], runs: int) -> float:
    return statistics.median(run(cmd, env) for _ in range(runs))


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@contextlib.contextmanager
def serving(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen, str]]:
    """A warm search server on the home of `env` (what the daemon runs), and its socket's path."""
    from oaken import config as config_mod
    from oaken.search import client

    server = subprocess.Popen([PY, "-c", SERVE], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready", "search server did not start"
        old = os.environ.get("OAKEN_HOME")
        os.environ["OAKEN_HOME"] = env["OAKEN_HOME"]
        try:
            where = str(client.socket_path(config_mod.load()))
        finally:
            if old is None:
                os.environ.pop("OAKEN_HOME", None)
            else:
                os.environ["OAKEN_HOME"] = old
        yield server, where
    finally:
        server.communicate("")


def warm_searches(env: dict[str, str], runs: int) -> dict:
    """p50/p95 per shape through a warm server's socket, and the server's RSS."""
    from oaken.search import client

    with serving(env) as (server, where):
        for qs in SHAPES.values():  # one warm-up round: the page cache, not Oaken, is what this warms
            for q in qs:
                client.ask_at(where, q, {"limit": 10})
        time.sleep(1.0)
        idle = rss_mb(server.pid)
        out: dict = {"rss_idle_mb": round(idle, 1)}
        peak = idle
        modes: set[str] = set()
        for shape, qs in SHAPES.items():
            times: list[float] = []
            for i in range(runs):
                q = qs[i % len(qs)]
                start = time.perf_counter()
                answer = client.ask_at(where, q, {"limit": 10})
                times.append((time.perf_counter() - start) * 1000)
                if answer is None:
                    raise SystemExit("the search server did not answer")
                if answer.get("degraded"):
                    modes.add(f"degraded: {answer.get('reason')}")
                modes.add(str(answer.get("mode", "")))
            peak = max(peak, rss_mb(server.pid))
            out[shape] = {"p50_ms": round(statistics.median(times), 1), "p95_ms": round(pct(times, 0.95), 1)}
        out["rss_under_load_mb"] = round(peak, 1)
        out["modes"] = sorted(m for m in modes if m)
        return out


# What a user of each tool types for the word shapes of SHAPES and its filters: the peers' dates.
PEER_FILTERS = {
    "from:enron.com after:2020-01-01": ("from:enron.com date:2020-01-01..", "from:enron.com date:20200101.."),
    "from:kenneth.lay@enron.com after:2010-06-01": (
        "from:kenneth.lay@enron.com date:2010-06-01..",
        "from:kenneth.lay@enron.com date:20100601..",
    ),
    "after:2024-01-01 before:2024-03-01": ("date:2024-01-01..2024-02-29", "date:20240101..20240229"),
}
PEER_SHAPES = ("one word", "three-word question", "quoted phrase", "filters only")


def cli_vs_peers(
    env: dict[str, str], maildir: Path, peer_dir: Path, runs: int, peers: tuple[str, ...] = ("notmuch search", "mu find")
) -> dict:
    """Whole commands, as a user types them: `oaken search --limit 10 Q` (bin/oaken installed as a
    wheel installs it, bench_cold.installed_like) answered by a warm server,
    `notmuch search --limit=10 Q` and `mu find --maxnum=10 Q` (newest first, as both show mail) on
    the same Maildir; interleaved, median wall ms per shape. Oaken ranks by relevance, the peers
    sort by date: the same work of finding the matches, not the same order."""
    nm_env = {**os.environ, "NOTMUCH_CONFIG": str(peer_dir / "notmuch-config")}
    venv = installed_like(peer_dir.parent)  # `oaken` as a wheel installs it: no editable install's finder
    user_env = {k: v for k, v in env.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    user_env["PYTHONPYCACHEPREFIX"] = str(peer_dir.parent / "pycache")
    tools = {
        "oaken search": ([str(venv / "bin" / "python"), str(venv / "bin" / "oaken"), "search", "--limit", "10"],
                         user_env, lambda q: q),
        "notmuch search": (["notmuch", "search", "--limit=10"], nm_env, lambda q: PEER_FILTERS.get(q, (q,))[0]),
        "mu find": (
            ["mu", "find", f"--muhome={peer_dir / 'mu'}", "--maxnum=10", "--sortfield=date", "--reverse", "--"],
            dict(os.environ),
            lambda q: PEER_FILTERS.get(q, (q, q))[1],
        ),
        # the floor under any Python command: the interpreter's own start
        "python -c pass": ([str(venv / "bin" / "python"), "-c", "pass"], user_env, lambda q: ""),
    }
    tools = {name: tool for name, tool in tools.items() if name in peers or name in ("oaken search", "python -c pass")}
    out: dict = {}
    with serving(env):
        for shape in PEER_SHAPES:
            qs = SHAPES[shape]
            times: dict[str, list[float]] = {name: [] for name in tools}
            for i in range(len(qs) + runs):  # the first round of each query warms the page cache
                q = qs[i % len(qs)]
                for name, (cmd, tool_env, spell) in tools.items():
                    start = time.perf_counter()
                    argv = [*cmd, spell(q)] if spell(q) else cmd
                    done = subprocess.run(argv, env=tool_env, capture_output=True, check=False)
                    if done.returncode not in (0, 2, 4):  # mu: 2 or 4 when nothing matches
                        raise SystemExit(f"{name} {spell(q)!r} failed ({done.returncode}): {done.stderr[-500:]!r}")
                    if i >= len(qs):
                        times[name].append((time.perf_counter() - start) * 1000)
            out[shape] = {name: round(statistics.median(t), 1) for name, t in times.items()}
    return out


def correctness(env: dict[str, str], home: Path, maildir: Path, peer_dir: Path, fresh: bool, peers: bool) -> dict:
    """What the figures stand on, checked (a smoke run at 10k or 100k is for this, not for its
    times); SystemExit on a failure. Oaken holds every generated message (exactly, on a home this
    run built; added ones on top otherwise) and both indexes are level with raw.db; each warm
    answer is the answer of a new process searching without the server (the library); a word or
    phrase notmuch finds, Oaken finds; notmuch holds every generated message."""
    want = json.loads((maildir / "oakengen.json").read_text())["count"]
    status = json.loads(subprocess.run([*OAKEN, "status", "--json"], env=env, capture_output=True, text=True,
                                       check=True).stdout)
    held, index = status["messages"], status["index"]
    failures = []
    if held < want or (fresh and held != want):
        failures.append(f"raw.db holds {held} messages, the Maildir {want}")
    if index.get("state") != "ok" or index.get("messages") != held:
        failures.append(f"index.db is not level with raw.db: {index.get('state')}, {index.get('messages')} of {held}")
    text = index.get("text")
    if text is not None and text.get("state") != "ok":
        failures.append(f"the text index does not rank: {text}")
    from oaken.search import client

    nm_env = {**os.environ, "NOTMUCH_CONFIG": str(peer_dir / "notmuch-config")}
    asked = 0
    with serving(env) as (_, where):
        for shape in ("one word", "three-word question", "quoted phrase", "filters only", "no words"):
            for q in SHAPES[shape]:
                answer = client.ask_at(where, q, {"limit": 10})
                warm = [str(h["id"]) for h in (answer or {}).get("hits", [])]
                cold = subprocess.run([*OAKEN, "search", "--no-daemon", "--format", "ids", "--limit", "10", q],
                                      env=env, capture_output=True, text=True, check=True).stdout.split()
                if warm != cold:
                    failures.append(f"{q!r}: the warm server answered {warm}, a new process {cold}")
                if peers and shape in ("one word", "quoted phrase") and not warm:
                    found = subprocess.run(["notmuch", "count", q], env=nm_env, capture_output=True, text=True,
                                           check=True).stdout.strip()
                    if found != "0":
                        failures.append(f"{q!r}: notmuch finds {found} messages, Oaken none")
                asked += 1
    if peers:
        found = subprocess.run(["notmuch", "count", "*"], env=nm_env, capture_output=True, text=True,
                               check=True).stdout.strip()
        if found != str(want):
            failures.append(f"notmuch holds {found} messages, the Maildir {want}: its figures are not of the same mail")
    if failures:
        raise SystemExit("correctness checks failed:\n  " + "\n  ".join(failures))
    return {"messages": held, "searches_compared": asked, "passed": True}


def message_ids(home: Path, limit: int) -> list[str]:
    env = {**os.environ, "OAKEN_HOME": str(home)}
    out = subprocess.run([*OAKEN, "search", "--no-daemon", "--format", "ids", "--limit", str(limit), "pipeline"],
                         env=env, capture_output=True, text=True, check=True)
    return [line for line in out.stdout.split() if line]


# The same changes in one warm process, as the daemon makes them: LanceDB imported once (2 s of
# CPU here), the first pass of the process (its integrity check) done before the clock starts.
WARM = """
import json, sys, time
from pathlib import Path
from oaken import api, config
from oaken.index import indexer
cfg = config.load()
keyword_only = cfg.embedder.model == "none"
if not keyword_only:
    import lance  # noqa: F401 - what a running daemon has loaded already
# as the daemon's passes: the vector store's upkeep, when one falls due, is left for a quiet moment
indexer.update(cfg, keyword_only=keyword_only, upkeep_later=True)
out = {}
def timed(name, fn):
    t = time.perf_counter(); fn(); out[name] = round(time.perf_counter() - t, 3)
timed("nochange_pass_s", lambda: indexer.update(cfg, keyword_only=keyword_only, upkeep_later=True))
timed("status_s", lambda: api.status(config=cfg))
ids = json.loads(sys.argv[1])
def triage():
    api.set_triage(ids[0], category="travel", priority=1, config=cfg)
    indexer.update(cfg, keyword_only=keyword_only, upkeep_later=True)
timed("triage_to_indexes_s", triage)
def add():
    api.import_mail([Path(sys.argv[2])], config=cfg)
    indexer.update(cfg, keyword_only=keyword_only, upkeep_later=True)
timed("add100_import_and_index_s", add)
# the pass the daemon then starts once nothing has changed for a few seconds (None: none was due)
out["quiet_upkeep_s"] = None
if indexer.upkeep_due(cfg):
    timed("quiet_upkeep_s", lambda: indexer.update(cfg, keyword_only=keyword_only))
print(json.dumps(out))
"""


def warm_change_costs(home: Path, work: Path, size: int, corpora: Path = gen_mailbox.CORPORA) -> dict:
    env = {**os.environ, "OAKEN_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    extra = work / f"add100w-{size}-{time.time_ns()}"
    gen_mailbox.generate(extra, 100, seed=size + 7 + int(time.time()) % 1000, workers=1, corpora=corpora)
    try:
        out = subprocess.run([PY, "-c", WARM, json.dumps(message_ids(home, 3)[1:]), str(extra)], env=env,
                             capture_output=True, text=True, check=False)
    finally:
        shutil.rmtree(extra, ignore_errors=True)
    if out.returncode != 0:
        raise SystemExit(f"warm change costs failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def change_costs(home: Path, maildir: Path, work: Path, size: int, runs: int, vectors: bool,
                 corpora: Path = gen_mailbox.CORPORA) -> dict:
    env = {**os.environ, "OAKEN_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    reindex = [*OAKEN, "reindex"] if vectors else [*OAKEN, "reindex", "--keyword-only"]
    out = {
        "nochange_reindex_s": round(median_run(reindex, env, runs), 3),
        "nochange_import_s": round(median_run([*OAKEN, "import", "--no-index", str(maildir)], env, 1), 3),
        "status_s": round(median_run([*OAKEN, "status"], env, runs), 3),
    }
    # Three times each, the median reported: one run of a few seconds moves with whatever else the
    # machine does (a single run read 2.03 s where the warm path took 0.96).
    adds = []
    for i in range(3):
        extra = work / f"add100-{size}-{time.time_ns()}"
        seed = size + 7919 * i + int(time.time()) % 100_000
        gen_mailbox.generate(extra, 100, seed=seed, workers=1, corpora=corpora)
        # New Message-IDs: the generator's ids depend on the seed and the index only.
        adds.append(run([*OAKEN, "import", "--no-index", str(extra)], env) + run(reindex, env))
        shutil.rmtree(extra, ignore_errors=True)
    out["add100_import_and_index_s"] = round(statistics.median(adds), 3)
    out["add100_runs_s"] = [round(a, 3) for a in adds]
    triages = [
        run([*OAKEN, "triage", m, "--category", "finance", "--priority", "2"], env) + run(reindex, env)
        for m in message_ids(home, 3)
    ]
    if triages:
        out["triage_to_indexes_s"] = round(statistics.median(triages), 3)
        out["triage_runs_s"] = [round(t, 3) for t in triages]
    return out


def home_config(model: str, engine: str) -> str:
    return (f'[embedder]\nmodel = "{model}"\n[index]\nkeyword_engine = "{engine}"\n'
            '[search]\nserver_idle_minutes = 0\n')


def build(size: int, work: Path, fresh: bool, runs: int, peers: bool, vectors: bool, engine: str = "fts5",
          corpora: Path = gen_mailbox.CORPORA, vector_dim: int = 384) -> dict:
    maildir = work / f"maildir-{size}"
    home = work / f"oaken-{size}"
    peer_dir = work / f"peers-{size}"
    if fresh:
        for p in (maildir, home, peer_dir):
            shutil.rmtree(p, ignore_errors=True)
    result: dict = {"size": size, "load_before": os.getloadavg()[0]}
    if not (maildir / "oakengen.json").exists():
        shutil.rmtree(maildir, ignore_errors=True)
        stats = gen_mailbox.generate(maildir, size, seed=1, workers=os.cpu_count() or 1, corpora=corpora)
        print(f"  generated {size:,} messages ({mb(stats['bytes'])} MB) in {stats['seconds']} s")
    for p in maildir.rglob("*"):  # warm the page cache for every tool alike
        if p.is_file() and ".notmuch" not in p.parts:  # the mail, not notmuch's database inside it
            p.read_bytes()
    result["maildir_mb"] = mb(du(maildir) - du(maildir / ".notmuch"))

    env = {**os.environ, "OAKEN_HOME": str(home), "HF_HUB_OFFLINE": "1", "OAKEN_CONCEPT_DIM": str(vector_dim)}
    built_here = not (home / "raw.db").exists()
    if built_here:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(home_config("none", "fts5"))
        imp = bench_index.measure([[*OAKEN, "import", "--no-index", str(maildir)]], env)
        idx = bench_index.measure([[*OAKEN, "reindex", "--keyword-only"]], env)
        total = imp.seconds + idx.seconds
        result["oaken_import_index"] = {
            "msgs_per_s": round(size / total), "seconds": round(total, 1), "import_s": round(imp.seconds, 1),
            "index_s": round(idx.seconds, 1), "cpu_s": round(imp.cpu_seconds + idx.cpu_seconds, 1),
            "peak_rss_mb": round(max(imp.peak_mb, idx.peak_mb), 1),
        }
        (home / "bench-import.json").write_text(json.dumps(result["oaken_import_index"]))
    elif (home / "bench-import.json").exists():
        result["oaken_import_index"] = json.loads((home / "bench-import.json").read_text())
    if peers:
        peer_dir.mkdir(parents=True, exist_ok=True)
        if not (peer_dir / "notmuch.json").exists():
            r = bench_index.bench_notmuch(maildir, peer_dir, size)
            (peer_dir / "notmuch.json").write_text(json.dumps(r.__dict__))
        if not (peer_dir / "mu.json").exists():
            r = bench_index.bench_mu(maildir, peer_dir, size)
            (peer_dir / "mu.json").write_text(json.dumps(r.__dict__))
        for name in ("notmuch", "mu"):
            r = json.loads((peer_dir / f"{name}.json").read_text())
            result[name] = {"msgs_per_s": round(r["per_second"]), "seconds": round(r["seconds"], 1),
                            "cpu_s": round(r["cpu_seconds"], 1), "peak_rss_mb": round(r["peak_mb"], 1),
                            "nochange_s": round(r["nochange_seconds"], 3)}
        result["notmuch"]["disk_mb"] = mb(du(maildir / ".notmuch"))
        result["mu"]["disk_mb"] = mb(du(peer_dir / "mu"))
    (home / "config.toml").write_text(home_config("none", engine))
    if engine != "fts5":  # the text index built by a keyword pass (nothing else to do in it)
        t = bench_index.measure([[*OAKEN, "reindex", "--keyword-only"]], env)
        result["text_index"] = {"seconds": round(t.seconds, 1), "peak_rss_mb": round(t.peak_mb, 1),
                                "disk_mb": mb(sum(du(p) for p in home.glob("text-*")))}
    result["keyword_engine"] = engine
    result["checks"] = correctness(env, home, maildir, peer_dir, built_here, peers)
    result["keyword"] = warm_searches(env, runs)
    if peers:
        result["cli_vs_peers"] = cli_vs_peers(env, maildir, peer_dir, max(3, runs // 2))
    result["cold_no_daemon_s"] = round(median_run([*OAKEN, "search", "--no-daemon", "--limit", "10", "pipeline"], env,
                                                  max(3, runs // 4)), 3)
    if vectors:
        (home / "config.toml").write_text(home_config("concept", engine))
        built = home / "bench-vectors.json"  # the first build's figures: a later run's reindex has nothing to do
        if built.exists() and json.loads(built.read_text()).get("dim") != vector_dim:
            built.unlink()  # vectors of another width: all embedded again, and timed
        if not built.exists():
            t = bench_index.measure([[*OAKEN, "reindex"]], env)
            built.write_text(json.dumps({"seconds": round(t.seconds, 1), "peak_rss_mb": round(t.peak_mb, 1),
                                         "embedder": "concept (stand-in)", "dim": vector_dim}))
        result["vectors_build"] = json.loads(built.read_text())
        result["hybrid"] = warm_searches(env, runs)
        degraded = [m for m in result["hybrid"]["modes"] if m.startswith("degraded")]
        if degraded:  # the vector side did not answer: these are not hybrid figures
            raise SystemExit(f"hybrid searches were answered degraded ({degraded}): is vectors/ complete? "
                             "(`oaken status`; a new width is embedded by the next passes)")
    result["changes"] = change_costs(home, maildir, work, size, max(3, runs // 4), vectors, corpora)
    result["changes_warm"] = warm_change_costs(home, work, size, corpora)
    result["disk_mb"] = {name: mb(du(home / name)) for name in ("raw.db", "index.db", "vectors")}
    result["disk_mb"]["text"] = mb(sum(du(p) for p in home.glob("text-*")))  # the text index, per generation
    index_real = home / "index.db"
    if index_real.is_symlink():
        result["disk_mb"]["index.db"] = mb(du(index_real.resolve()))
    result["load_after"] = os.getloadavg()[0]
    return result


def report(r: dict) -> str:
    lines = [f"== {r['size']:,} messages (load average {r['load_before']:.1f} -> {r['load_after']:.1f}, "
             f"{os.cpu_count()} cores) =="]
    if "text_index" in r:
        t = r["text_index"]
        lines.append(f"  keyword engine {r['keyword_engine']}: text index built by `oaken reindex --keyword-only` in "
                     f"{t['seconds']} s, peak {t['peak_rss_mb']} MB, {t['disk_mb']} MB on disk")
    o = r.get("oaken_import_index")
    if o:
        lines.append(f"  import + keyword index: oaken {o['msgs_per_s']:,} msg/s ({o['seconds']} s, CPU {o['cpu_s']} s, "
                     f"peak {o['peak_rss_mb']} MB)")
    for peer in ("notmuch", "mu"):
        if peer in r:
            p = r[peer]
            ratio = f"; oaken/{peer} {o['msgs_per_s'] / p['msgs_per_s']:.2f}x" if o else ""
            lines.append(f"  {peer}: {p['msgs_per_s']:,} msg/s ({p['seconds']} s, CPU {p['cpu_s']} s, peak "
                         f"{p['peak_rss_mb']} MB, no-change {p['nochange_s']} s, db {p['disk_mb']} MB){ratio}")
    d = r["disk_mb"]
    lines.append(f"  disk MB: maildir {r['maildir_mb']}, raw.db {d['raw.db']}, index.db {d['index.db']}, "
                 f"vectors {d['vectors']}, text index {d.get('text', 0)}")
    for side in ("keyword", "hybrid"):
        if side not in r:
            continue
        s = r[side]
        label = side + (" (stand-in vectors; query embedding excluded)" if side == "hybrid" else "")
        lines.append(f"  warm {label}: server RSS idle {s['rss_idle_mb']} MB, under load {s['rss_under_load_mb']} MB; "
                     f"modes {', '.join(s['modes']) or '-'}")
        for shape in SHAPES:
            lines.append(f"    {shape:22} p50 {s[shape]['p50_ms']:7.1f} ms   p95 {s[shape]['p95_ms']:7.1f} ms")
    if "cli_vs_peers" in r:
        lines.append("  whole commands, median wall ms (oaken search through its warm server; peers sort by date):")
        for shape, by_tool in r["cli_vs_peers"].items():
            mine = by_tool["oaken search"]
            lines.append(f"    {shape:22} " + "   ".join(
                f"{name} {ms:.1f}" + ("" if name in ("oaken search", "python -c pass")
                                      else f" (oaken/{name.split()[0]} {mine / ms:.2f}x)")
                for name, ms in by_tool.items()))
    lines.append(f"  cold `oaken search --no-daemon pipeline`: {r['cold_no_daemon_s']} s")
    if "vectors_build" in r:
        v = r["vectors_build"]
        lines.append(f"  vectors built in {v['seconds']} s by {v['embedder']}, {v.get('dim', 256)} dimensions, "
                     f"peak {v['peak_rss_mb']} MB")
    c = r["changes"]
    lines.append("  changes, each a new `oaken` process: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    w = r.get("changes_warm", {})
    lines.append("  changes in a warm process (as the daemon): " + ", ".join(f"{k} {v}" for k, v in w.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=20, help="searches per shape")
    ap.add_argument("--vectors", action="store_true")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--vector-dim", type=int, default=384,
                    help="the stand-in embedder's width with --vectors (all-MiniLM-L6-v2's: 384)")
    ap.add_argument("--corpora", type=Path, default=gen_mailbox.CORPORA,
                    help="the real mail the mailbox is made of (default ../shared/corpora)")
    ap.add_argument("--keyword-engine", choices=("fts5", "tantivy"), default="tantivy",
                    help="what ranks word searches ([index] keyword_engine; tantivy: the text index is built first)")
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    os.environ["OAKEN_CONCEPT_DIM"] = str(a.vector_dim)  # every oaken process of the run, and this one
    for size in (int(s) for s in a.sizes.split(",")):
        r = build(size, a.work, a.fresh, a.runs, not a.no_peers, a.vectors, a.keyword_engine, a.corpora, a.vector_dim)
        (a.work / f"results-{size}.json").write_text(json.dumps(r, indent=2))
        print(report(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
