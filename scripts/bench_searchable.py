#!/usr/bin/env python3
"""Speed as users wait (issue #14 item 6): Oaken against mbsync + mu on one private Dovecot.

N real messages (the Enron messages of ../shared/corpora, as scripts/bench_sync.py loads them) are
spread over F folders of a private Dovecot (scripts/dovecot.py) once; then each round runs, the
tools alternating which goes first:

(a) server -> searchable by keyword, from nothing: `oaken sync --once` from an empty OAKEN_HOME
    (keyword index only: `[embedder] model = "none"`) then `oaken search --json QUERY` until it
    finds the known messages, against `mbsync -a` into an empty Maildir then `mu init`, `mu index`
    and `mu find QUERY`. The known messages are the oldest of each folder, each holding a word no
    other message holds; QUERY is those words OR'd, so one search proves every folder searchable.
(b) the raw mirror alone: `oaken sync --once --no-index` against `mbsync -a`, each into an empty
    mirror; one more Oaken run per round logs its own time split (debug log line "sync timing":
    process start, connect and login, commands, waiting on the network, on the header worker,
    SQLite, worker start/stop).
(c) a no-change sync of every folder: `oaken sync --once` on the mirror of (a) against `mbsync -a`
    on its Maildir (median of several runs per round).
(d) first messages searchable: `oaken sync --daemon` from an empty OAKEN_HOME while
    `oaken search --json WORD` (WORD a word only the newest message of INBOX holds) runs every 100 ms;
    the time from the daemon's start to the end of the first search that finds it. The peer is
    the same poll of `mu find` while mbsync and then `mu index` run; mu can answer only after
    mbsync has finished and mu index has committed. The same daemon run also gives the time until
    the known messages of (a) are searchable (everything synced and indexed), polled every 0.5 s.

Medians over the rounds; the load average is printed, since the machine may be shared (the peers
run in the same rounds, so the ratios are fair).

    .venv/bin/python scripts/bench_searchable.py [--messages 10000] [--folders 10] [--rounds 3] [--work DIR]
        [--keep]   # leave the server and the mirrors in place to look at
        [--steps c]   # only these of (a)-(d); (c) alone still builds its mirrors once, with (a)'s commands
        [--compare-tree DIR ...]   # (c) also for the Oaken in DIR (a checkout), in the same rounds

`--steps c --compare-tree DIR` measures the no-change sync of another checkout (the code before a
change) against this one and mbsync in the same rounds: its `oaken` runs from DIR, which must read
the same raw.db schema.

Prints one line per round, then the table (oaken, the peer, the ratio of the medians, the goal),
the ratio in each round, client CPU seconds, the parts of (a) and (b)'s time split. Results and
what they mean: docs/sync-speed.md.
"""

from __future__ import annotations

import argparse
import email
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_sync import PASSWORD, USER, load_messages, mbsync_config  # noqa: E402
from dovecot import Dovecot  # noqa: E402

OAKEN = [sys.executable, "-m", "oaken.cli"]
# what the `oaken` command runs first (its console script): the fast paths of a warm search and a
# no-change sync; a checkout from before it has only oaken.cli
ENTRY = [sys.executable, "-m", "oaken.fastpath"]
FOLDERS = [
    "INBOX",
    "Archive",
    "Projects",
    "Trading",
    "Legal",
    "Travel",
    "Finance",
    "Lists",
    "Family",
    "Notes",
    "Meetings",
    "Contracts",
    "Reports",
    "Press",
    "Misc",
    "Old",
]
POLL_SECONDS = 0.1
# a plain word: not in an address, a URL or a contraction (tokenizers differ there)
WORD = re.compile(r"(?<![\w@./='’-])[a-z]{7,14}(?![\w@/='’-])(?!\.\w)")
PREFIX = re.compile(r"[a-z]{5,}")


# ---- the server and the messages ----------------------------------------------------------------


@dataclass
class Target:
    """Messages to look for, by words each of which only one message of the whole load holds."""

    message_ids: set[str]
    words: list[str]

    @property
    def query(self) -> str:
        return " OR ".join(self.words)


def folder_names(n: int) -> list[str]:
    if n > len(FOLDERS):
        return FOLDERS + [f"Folder{i:02d}" for i in range(len(FOLDERS), n)]
    return FOLDERS[:n]


def message_id(raw: bytes) -> str | None:
    m = re.search(rb"(?im)^Message-ID:\s*<([^>\r\n]+)>", raw)
    return m.group(1).decode("ascii", "replace") if m else None


def text_of(raw: bytes) -> str:
    """Subject and text/plain, decoded: words every tool indexes the same way."""
    msg = email.message_from_bytes(raw)
    parts = [str(msg.get("Subject", ""))]
    for part in msg.walk():
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            if isinstance(payload, bytes):
                parts.append(payload.decode("latin-1"))
    return "\n".join(parts).lower()


def unique_words(messages: list[bytes], want: int) -> list[tuple[int, str]]:
    """`want` messages, each with a word of 7-14 letters that no other message of the load holds,
    nor any word with its first five letters (so no stemmer finds it elsewhere either), and a
    subject of its own (so it is no near-copy of another, which search would fold into one hit);
    the corpus is repeated to reach N, so only messages without a copy qualify. From the middle out."""
    texts = [text_of(raw) for raw in messages]
    df: Counter[str] = Counter()
    for raw, text in zip(messages, texts):
        df.update({w[:5] for w in PREFIX.findall(raw.decode("latin-1").lower() + "\n" + text)})
    subjects = Counter(text.split("\n", 1)[0].strip() for text in texts)
    mid = len(messages) // 2
    order = sorted(range(len(messages)), key=lambda i: abs(i - mid))
    out: list[tuple[int, str]] = []
    for i in order:
        if not message_id(messages[i]) or subjects[texts[i].split("\n", 1)[0].strip()] != 1:
            continue
        words = sorted(w for w in set(WORD.findall(texts[i])) if df[w[:5]] == 1)
        if words:
            out.append((i, words[0]))
            if len(out) == want:
                return out
    raise SystemExit(f"only {len(out)} messages with a word of their own; {want} needed")


def make_folders(server: Dovecot, names: list[str]) -> list[str]:
    """Create and subscribe the folders; returns them in Oaken's sync order (INBOX first, then the
    server's LIST order), which the messages are spread in."""
    import ssl

    from imapclient import IMAPClient

    ctx = ssl.create_default_context(cafile=server.ca_file)
    with IMAPClient("127.0.0.1", server.ssl_port, ssl=True, ssl_context=ctx, timeout=120) as c:
        c.login(USER, PASSWORD)
        for name in names:
            if name != "INBOX":
                c.create_folder(name)
                c.subscribe_folder(name)
        listed = [f[2] if isinstance(f[2], str) else f[2].decode() for f in c.list_folders()]
    return ["INBOX"] + [f for f in listed if f != "INBOX" and f in names]


def place_targets(messages: list[bytes], folders: int) -> tuple[Target, Target]:
    """Swap messages with a word of their own into the places looked for: the newest (last) of
    INBOX, and the oldest (first) of every folder. Returns (newest of INBOX, oldest of each)."""
    n = len(messages)
    firsts = [k * n // folders for k in range(folders)]
    newest_at = n // folders - 1
    places = [newest_at, *firsts]
    chosen = unique_words(messages, len(places) + 4)
    picks = [c for c in chosen if c[0] not in places][: len(places)]
    if len(picks) < len(places):
        raise SystemExit(
            f"only {len(picks)} messages with a word of their own outside the places; "
            f"{len(places)} needed (more --messages?)"
        )
    words = {}
    for place, (i, word) in zip(places, picks):
        messages[place], messages[i] = messages[i], messages[place]
        words[place] = word
    newest = Target({message_id(messages[newest_at])}, [words[newest_at]])  # type: ignore[arg-type]
    oldest = Target({message_id(messages[p]) for p in firsts}, [words[p] for p in firsts])  # type: ignore[misc]
    return newest, oldest


def fill(server: Dovecot, by_folder: dict[str, list[bytes]]) -> None:
    """MULTIAPPEND each folder's messages in order: UIDs ascending = the corpus order."""
    import ssl

    from imapclient import IMAPClient

    ctx = ssl.create_default_context(cafile=server.ca_file)
    with IMAPClient("127.0.0.1", server.ssl_port, ssl=True, ssl_context=ctx, timeout=120) as c:
        c.login(USER, PASSWORD)
        for name, messages in by_folder.items():
            for i in range(0, len(messages), 500):
                c.multiappend(name, messages[i : i + 500])


# ---- the tools ----------------------------------------------------------------------------------


def oaken_home(path: Path, server: Dovecot, *, debug_log: Path | None = None) -> dict[str, str]:
    """An empty OAKEN_HOME with the account, keyword search only; returns the environment."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(mode=0o700, parents=True)
    log = (
        f'[log]\nlevel = "debug"\nformat = "json"\nfile = "{debug_log}"\n'
        if debug_log
        else '[log]\nlevel = "warning"\n'
    )
    conf = path / "config.toml"
    conf.write_text(f"""default_account = "bench"
[accounts.bench]
host = "127.0.0.1"
port = {server.ssl_port}
tls = "implicit"
ca_file = "{server.ca_file}"
username = "{USER}"
password_env = "BENCH_IMAP_PASSWORD"
[embedder]
model = "none"
{log}""")
    os.chmod(conf, 0o600)
    return {**os.environ, "OAKEN_HOME": str(path), "BENCH_IMAP_PASSWORD": PASSWORD, "HF_HUB_OFFLINE": "1"}


def cpu() -> float:
    """CPU seconds (user + system) of the children waited for so far (their own children too)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(
    cmd: list[str], env: dict[str, str], *, check: bool = True, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """`cwd`: where `python -m oaken.cli` finds its `oaken` (another checkout, for --compare-tree)."""
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=cwd)
    if check and out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {(out.stderr or out.stdout).strip()[-800:]}")
    return out


def oaken_finds(env: dict[str, str], t: Target) -> bool:
    """Whether `oaken search --json` finds every message of `t` (one query, its words OR'd)."""
    out = run([*OAKEN, "search", "--json", "--limit", "50", "--", t.query], env, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        return False
    try:
        hits = json.loads(out.stdout).get("hits", [])
    except ValueError:
        return False
    return t.message_ids <= {h.get("message_id") for h in hits}


def mu_env(muhome: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(muhome / "cache")}


def mu_finds(muhome: Path, t: Target) -> bool:
    out = run(["mu", "find", f"--muhome={muhome}", "--fields", "i", t.query], mu_env(muhome), check=False)
    return out.returncode == 0 and t.message_ids <= {line.strip() for line in out.stdout.splitlines()}


@dataclass
class Round:
    cpu: dict[str, float] = field(default_factory=dict)  # client CPU seconds of (a) and (b), by tool
    a_oaken: float = 0.0
    a_oaken_parts: tuple[float, float] = (0.0, 0.0)  # sync (with its keyword pass), the search
    a_mu: float = 0.0
    a_mu_parts: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # mbsync, mu init, mu index, mu find
    b_oaken: float = 0.0
    b_mbsync: float = 0.0
    split: dict[str, float] = field(default_factory=dict)
    c_oaken: float = 0.0
    c_mbsync: float = 0.0
    c_trees: dict[str, float] = field(default_factory=dict)  # --compare-tree: (c) of each other checkout
    c_cpu: dict[str, float] = field(default_factory=dict)  # (c) client CPU seconds: oaken, mbsync, each tree
    d_oaken: float = 0.0
    d_oaken_started: float = 0.0  # when the search that first found it started
    d_oaken_all: float = 0.0  # the daemon: everything searchable (the target of (a))
    d_mu: float = 0.0
    load: float = 0.0


def a_oaken(work: Path, server: Dovecot, t: Target, r: Round) -> Path:
    home = work / "a-oaken"
    env = oaken_home(home, server)
    c0, t0 = cpu(), time.perf_counter()
    run([*OAKEN, "sync", "--once"], env)
    t1 = time.perf_counter()
    if not oaken_finds(env, t):
        raise SystemExit(f"oaken search {t.query!r} did not find {t.message_ids} after oaken sync --once")
    t2 = time.perf_counter()
    r.a_oaken, r.a_oaken_parts = t2 - t0, (t1 - t0, t2 - t1)
    r.cpu["a_oaken"] = cpu() - c0
    return home


def a_mu(work: Path, server: Dovecot, t: Target, r: Round) -> Path:
    base = work / "a-mbsync"
    shutil.rmtree(base, ignore_errors=True)
    conf = mbsync_config(base, server)
    maildir, muhome = base / "mbsync-mail", base / "mu"
    env = mu_env(muhome)
    c0, t0 = cpu(), time.perf_counter()
    run(["mbsync", "-q", "-c", str(conf), "-a"], env)
    t1 = time.perf_counter()
    run(["mu", "init", f"--muhome={muhome}", f"--maildir={maildir}", "--quiet"], env)
    t2 = time.perf_counter()
    run(["mu", "index", f"--muhome={muhome}", "--quiet"], env)
    t3 = time.perf_counter()
    if not mu_finds(muhome, t):
        raise SystemExit(f"mu find {t.query!r} did not find {t.message_ids}")
    t4 = time.perf_counter()
    r.a_mu, r.a_mu_parts = t4 - t0, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)
    r.cpu["a_mu"] = cpu() - c0
    return base


def b_oaken(work: Path, server: Dovecot, n: int, r: Round) -> None:
    env = oaken_home(work / "b-oaken", server)
    c0, t0 = cpu(), time.perf_counter()
    out = run([*OAKEN, "sync", "--once", "--no-index"], env)
    r.b_oaken = time.perf_counter() - t0
    r.cpu["b_oaken"] = cpu() - c0
    if not out.stdout.startswith(f"bench: {n} new,"):
        raise SystemExit(f"oaken stored less than {n}: {out.stdout.strip()}")


def b_split(work: Path, server: Dovecot, r: Round) -> None:
    """One more --no-index sync logging its time split (debug lines; the timers are a few
    perf_counter calls per batch)."""
    log = work / "split.log"
    log.unlink(missing_ok=True)
    env = oaken_home(work / "b-split", server, debug_log=log)
    t0 = time.perf_counter()
    run([*OAKEN, "sync", "--once", "--no-index"], env)
    wall = time.perf_counter() - t0
    timing = None
    for line in log.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "sync timing":
            timing = event
    if timing is None:
        r.split = {"wall": wall}
        return
    parts = {k: float(v) for k, v in timing.items() if isinstance(v, (int, float)) and k != "folders"}
    parts["process start and exit"] = wall - parts.get("total", 0.0)
    parts["wall"] = wall
    r.split = parts


def b_mbsync(work: Path, server: Dovecot, n: int, r: Round) -> None:
    base = work / "b-mbsync"
    shutil.rmtree(base, ignore_errors=True)
    conf = mbsync_config(base, server)
    c0, t0 = cpu(), time.perf_counter()
    run(["mbsync", "-q", "-c", str(conf), "-a"], os.environ.copy())
    r.b_mbsync = time.perf_counter() - t0
    r.cpu["b_mbsync"] = cpu() - c0
    stored = sum(1 for p in (base / "mbsync-mail").glob("*/*/*") if p.parent.name in ("cur", "new"))
    if stored != n:
        raise SystemExit(f"mbsync stored {stored} of {n}")


def c_nochange(oaken_home_dir: Path, mbsync_base: Path, repeat: int, r: Round, trees: list[Path]) -> None:
    """Cold no-change syncs, each tool (and each --compare-tree checkout) once per run, in turn;
    medians of wall and client CPU seconds (CPU is steadier than wall on a shared machine)."""
    env = {**os.environ, "OAKEN_HOME": str(oaken_home_dir), "BENCH_IMAP_PASSWORD": PASSWORD}
    mbsync = ["mbsync", "-q", "-c", str(mbsync_base / "mbsyncrc"), "-a"]
    tools = {"oaken": ROOT, **{str(t): t for t in trees}, "mbsync": None}
    wall: dict[str, list[float]] = {k: [] for k in tools}
    used: dict[str, list[float]] = {k: [] for k in tools}
    for _ in range(repeat):
        for name, tree in tools.items():
            c0, t0 = cpu(), time.perf_counter()
            if tree is None:
                run(mbsync, os.environ.copy())
            else:
                entry = ENTRY if (Path(tree) / "oaken" / "fastpath.py").exists() else OAKEN
                out = run([*entry, "sync", "--once"], env, cwd=tree)
                if " 0 new," not in out.stdout:
                    raise SystemExit(f"the no-change oaken sync ({tree}) found changes: {out.stdout.strip()}")
            wall[name].append(time.perf_counter() - t0)
            used[name].append(cpu() - c0)
    r.c_oaken, r.c_mbsync = statistics.median(wall["oaken"]), statistics.median(wall["mbsync"])
    r.c_trees = {str(t): statistics.median(wall[str(t)]) for t in trees}
    r.c_cpu = {k: statistics.median(v) for k, v in used.items()}


def d_oaken(work: Path, server: Dovecot, newest: Target, everything: Target, r: Round) -> None:
    home = work / "d-oaken"
    env = oaken_home(home, server)
    t0 = time.perf_counter()
    daemon = subprocess.Popen(
        [*OAKEN, "sync", "--daemon"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        first = None
        while first is None:
            started = time.perf_counter()
            if oaken_finds(env, newest):
                first = time.perf_counter() - t0
                r.d_oaken, r.d_oaken_started = first, started - t0
                break
            if daemon.poll() is not None:
                raise SystemExit(f"oaken sync --daemon ended ({daemon.returncode}): {daemon.stderr.read()[-800:]}")
            if time.perf_counter() - t0 > 300:
                raise SystemExit("oaken: the newest message was not searchable after 300 s")
            time.sleep(max(0.0, POLL_SECONDS - (time.perf_counter() - started)))
        while True:
            started = time.perf_counter()
            if oaken_finds(env, everything):
                r.d_oaken_all = time.perf_counter() - t0
                break
            if daemon.poll() is not None or time.perf_counter() - t0 > 600:
                raise SystemExit("oaken sync --daemon: the oldest message never became searchable")
            time.sleep(max(0.0, 0.5 - (time.perf_counter() - started)))
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def d_mu(work: Path, server: Dovecot, newest: Target, r: Round) -> None:
    """mbsync, mu init, mu index one after another (as a script would) while mu find polls."""
    base = work / "d-mbsync"
    shutil.rmtree(base, ignore_errors=True)
    conf = mbsync_config(base, server)
    maildir, muhome = base / "mbsync-mail", base / "mu"
    env = mu_env(muhome)
    script = (
        f"mbsync -q -c '{conf}' -a && mu init --muhome='{muhome}' --maildir='{maildir}' --quiet "
        f"&& mu index --muhome='{muhome}' --quiet"
    )
    t0 = time.perf_counter()
    chain = subprocess.Popen(
        ["sh", "-c", script], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        while True:
            started = time.perf_counter()
            if (muhome / "xapian").exists() and mu_finds(muhome, newest):
                r.d_mu = time.perf_counter() - t0
                break
            if chain.poll() is not None and chain.returncode != 0:
                raise SystemExit(f"mbsync + mu failed ({chain.returncode}): {chain.stderr.read()[-800:]}")
            if time.perf_counter() - t0 > 600:
                raise SystemExit("mu: the newest message was not searchable after 600 s")
            time.sleep(max(0.0, POLL_SECONDS - (time.perf_counter() - started)))
    finally:
        chain.wait()


# ---- the report ---------------------------------------------------------------------------------


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


# the debug line "sync timing" (oaken/sync/runner.py, folder.py) grouped as issue #14 asks
SPLIT_GROUPS = [
    ("process start, imports and exit", ("process start and exit",)),
    ("network: connect + TLS + login, LIST, SELECT, SEARCH", ("connect", "list", "select", "search")),
    ("network: waiting for FETCH answers", ("wait_fetch",)),
    ("parsing: waiting for the header worker, rows", ("wait_headers", "rows")),
    ("SQLite: open, folder rows, batches, commits", ("open", "folder_rows", "sqlite", "end")),
    ("threading: worker fork/stop, fetch thread, callbacks", ("workers", "threads", "callbacks")),
    ("other (the folders' untimed rest)", ("folder",)),
]
SUBTRACT = {
    "other (the folders' untimed rest)": (
        "select",
        "search",
        "wait_fetch",
        "wait_headers",
        "rows",
        "sqlite",
        "callbacks",
        "workers",
        "threads",
    )
}


def daemon_cycle(home: Path, runs: int = 20) -> float | None:
    """Median no-change cycle of a warm AccountSync, as the daemon runs it (bench_sync's measure)."""
    from bench_sync import daemon_cycle as cycle

    try:
        return cycle(home, runs)
    except AssertionError as e:
        print(f"daemon cycle not measured: {e}")
        return None


def report(rounds: list[Round], args: argparse.Namespace, size: float, loads: list[float], cycle: float | None) -> None:
    def col(name: str) -> list[float]:
        return [getattr(r, name) for r in rounds]

    steps = args.steps
    n = len(rounds)
    print(
        f"\n{args.messages} messages ({size / 1e6:.1f} MB) in {args.folders} folders; medians of {n} rounds; "
        f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
    )
    head = f"{'':58}{'oaken':>9}{'peer':>9}{'ratio':>7}  goal"
    print(head)
    rows = [
        ("a", "(a) server -> searchable (sync + keyword index + search)", "a_oaken", "a_mu", "mbsync + mu index", 0.5),
        ("b", "(b) raw mirror alone (--no-index)", "b_oaken", "b_mbsync", "mbsync", 1.5),
        ("c", f"(c) no-change sync of {args.folders} folders", "c_oaken", "c_mbsync", "mbsync", 1.0),
        ("d", "(d) first message searchable (daemon, newest first)", "d_oaken", "d_mu", "mbsync + mu index", None),
    ]
    for step, label, mine, peer_col, peer, goal in rows:
        if step not in steps:
            continue
        o, p = med(col(mine)), med(col(peer_col))
        ratio = o / p
        if goal is None:
            verdict = f"<= 2 s: {'met' if o <= 2.0 else 'MISSED'}"
        else:
            verdict = f"<= {goal:g}x {peer}: {'met' if ratio <= goal else 'MISSED'}"
        print(f"{label:58}{o:9.2f}{p:9.2f}{ratio:7.2f}  {verdict}")
        if step == "c":
            for tree in args.compare_tree:
                t = med([r.c_trees[str(tree)] for r in rounds])
                print(f"{'    the same, oaken from ' + str(tree):58}{t:9.3f}{p:9.3f}{t / p:7.2f}")
            peer_cpu = med([r.c_cpu["mbsync"] for r in rounds])
            for name in ["oaken", *map(str, args.compare_tree)]:
                t = med([r.c_cpu[name] for r in rounds])
                label = "    client CPU seconds, oaken" + ("" if name == "oaken" else " from " + name)
                print(f"{label:58}{t:9.3f}{peer_cpu:9.3f}{t / peer_cpu:7.2f}")
    if "d" in steps:
        print(
            f"{'    daemon: everything searchable (same runs as (d))':58}{med(col('d_oaken_all')):9.2f}"
            f"{med(col('a_mu')) if 'a' in steps else float('nan'):9.2f}"
            f"{med(col('d_oaken_all')) / med(col('a_mu')) if 'a' in steps else float('nan'):7.2f}"
        )
    ratios = {
        line: [getattr(r, o) / getattr(r, p) for r in rounds]
        for line, o, p in (
            ("a", "a_oaken", "a_mu"),
            ("b", "b_oaken", "b_mbsync"),
            ("c", "c_oaken", "c_mbsync"),
            ("d", "d_oaken", "d_mu"),
        )
        if line in steps
    }
    print(
        "ratio in each round: "
        + "; ".join(f"({k}) " + " ".join(f"{x:.2f}" for x in v) + f" (median {med(v):.2f})" for k, v in ratios.items())
    )
    if "a" in steps and "b" in steps:
        c = {k: med([r.cpu[k] for r in rounds]) for k in ("a_oaken", "a_mu", "b_oaken", "b_mbsync")}
        print(
            "client CPU seconds (user + system, every process of the tool; Dovecot's not counted), medians: "
            f"(a) oaken {c['a_oaken']:.2f}, mbsync + mu {c['a_mu']:.2f} ({c['a_oaken'] / c['a_mu']:.2f}); "
            f"(b) oaken {c['b_oaken']:.2f}, mbsync {c['b_mbsync']:.2f} ({c['b_oaken'] / c['b_mbsync']:.2f})"
        )
    print()
    if "a" in steps:
        print(
            "(a) parts, medians: oaken sync --once {:.2f} + search {:.2f}; mbsync {:.2f} + mu init {:.2f} + "
            "mu index {:.2f} + mu find {:.2f}".format(
                med([r.a_oaken_parts[0] for r in rounds]),
                med([r.a_oaken_parts[1] for r in rounds]),
                *(med([r.a_mu_parts[i] for r in rounds]) for i in range(4)),
            )
        )
    if "d" in steps:
        print(
            "(d) oaken: the first search that found it started at {:.2f} s (median), ended at {:.2f} s".format(
                med(col("d_oaken_started")), med(col("d_oaken"))
            )
        )
    if any("total" in r.split for r in rounds):
        print(
            f"(b) oaken's time split: wall seconds of the thread that stores, by what it waited on (the fetch "
            f"thread and the header worker run beside it); medians of one logged --no-index run per round, "
            f"{med([r.split.get('wall', 0.0) for r in rounds]):.2f} s in all:"
        )
        for group, keys in SPLIT_GROUPS:
            minus = SUBTRACT.get(group, ())
            value = med(
                [sum(r.split.get(k, 0.0) for k in keys) - sum(r.split.get(k, 0.0) for k in minus) for r in rounds]
            )
            print(f"    {group:56}{value:7.3f}  ({' + '.join(keys)}{' - the rest' if minus else ''})")
        print(
            "    raw timers: "
            + ", ".join(f"{k} {med([r.split.get(k, 0.0) for r in rounds]):.3f}" for k in rounds[0].split if k != "wall")
        )
    if cycle is not None and "c" in steps:
        print(
            f"(c) for comparison, a no-change cycle of the running daemon (connection open, one LIST-STATUS): "
            f"{cycle * 1000:.1f} ms (median of 20), against mbsync's {med(col('c_mbsync')) * 1000:.0f} ms"
        )
    print("\nruns (seconds):")
    names = {
        "a": ("a_oaken", "a_mu"),
        "b": ("b_oaken", "b_mbsync"),
        "c": ("c_oaken", "c_mbsync"),
        "d": ("d_oaken", "d_mu", "d_oaken_all"),
    }
    for name in (x for step in "abcd" if step in steps for x in names[step]):
        print(f"    {name:12}" + " ".join(f"{x:7.3f}" for x in col(name)))
    for tree in args.compare_tree if "c" in steps else []:
        print(f"    c {tree}: " + " ".join(f"{r.c_trees[str(tree)]:7.3f}" for r in rounds))
    print("    load     " + " ".join(f"{r.load:7.1f}" for r in rounds))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--folders", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nochange-runs", type=int, default=3, help="no-change syncs of each tool per round (median)")
    ap.add_argument("--work", type=Path, help="working folder (default: a new temporary one, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the server and the working folder")
    ap.add_argument("--steps", default="abcd", help="which of (a)-(d) to run, e.g. c (default: abcd)")
    ap.add_argument(
        "--compare-tree",
        type=Path,
        action="append",
        default=[],
        help="(c) also for the oaken of this checkout, in the same rounds (repeatable)",
    )
    args = ap.parse_args()
    args.steps = "".join(sorted(set(args.steps.lower()) & set("abcd")))
    if not args.steps:
        raise SystemExit("--steps: name some of a, b, c, d")
    args.compare_tree = [t.resolve() for t in args.compare_tree]
    for tree in args.compare_tree:
        if not (tree / "oaken" / "cli.py").exists():
            raise SystemExit(f"--compare-tree {tree}: no oaken/cli.py there; give a checkout of Oaken")
    for tool in ("mbsync", "mu"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found: apt-get install isync maildir-utils")
    work = args.work or Path(tempfile.mkdtemp(prefix="oaken-searchable-"))
    work.mkdir(parents=True, exist_ok=True)
    # bytecode as an installed package has it: this tree may run with PYTHONDONTWRITEBYTECODE, which
    # would make every oaken process compile the modules changed since their last .pyc
    for tree in [ROOT, *args.compare_tree]:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(tree / "oaken")],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    server = Dovecot().start()
    loads: list[float] = []
    try:
        server.add_user(USER, PASSWORD)
        messages = load_messages(args.messages)
        size = sum(len(m) for m in messages)
        order = make_folders(server, folder_names(args.folders))
        newest, everything = place_targets(messages, args.folders)
        # contiguous runs of the corpus (related mail together) in equal parts
        by_folder = {
            name: messages[k * len(messages) // len(order) : (k + 1) * len(messages) // len(order)]
            for k, name in enumerate(order)
        }
        t0 = time.perf_counter()
        fill(server, by_folder)
        print(
            f"loaded {len(messages)} messages ({size / 1e6:.1f} MB) into {len(order)} folders "
            f"({', '.join(order)}) in {time.perf_counter() - t0:.1f} s"
        )
        print(f"newest of INBOX: {newest.query!r}; oldest of each folder: {everything.query!r}")
        rounds: list[Round] = []
        steps = args.steps
        if "c" in steps and "a" not in steps:  # (c) needs the mirrors (a) makes: made once, not measured
            a_home, a_base = a_oaken(work, server, everything, Round()), a_mu(work, server, everything, Round())
        for n in range(args.rounds):
            r = Round()
            oaken_first = n % 2 == 0
            loads.append(os.getloadavg()[0])
            if "a" in steps:
                steps_a = [partial(a_oaken, work, server, everything, r), partial(a_mu, work, server, everything, r)]
                homes = [f() for f in (steps_a if oaken_first else steps_a[::-1])]
                a_home, a_base = (homes[0], homes[1]) if oaken_first else (homes[1], homes[0])
            if "b" in steps:
                steps_b = [
                    partial(b_oaken, work, server, len(messages), r),
                    partial(b_mbsync, work, server, len(messages), r),
                ]
                for f in steps_b if oaken_first else steps_b[::-1]:
                    f()
                b_split(work, server, r)
            if "c" in steps:
                c_nochange(a_home, a_base, args.nochange_runs, r, args.compare_tree)
            if "d" in steps:
                steps_d = [
                    partial(d_oaken, work, server, newest, everything, r),
                    partial(d_mu, work, server, newest, r),
                ]
                for f in steps_d if oaken_first else steps_d[::-1]:
                    f()
            r.load = os.getloadavg()[0]
            loads.append(r.load)
            rounds.append(r)
            trees = "".join(f" [{t.name} {v:.3f}]" for t, v in zip(args.compare_tree, r.c_trees.values()))
            done = {
                "a": f"(a) {r.a_oaken:.2f} / {r.a_mu:.2f}",
                "b": f"(b) {r.b_oaken:.2f} / {r.b_mbsync:.2f}",
                "c": f"(c) {r.c_oaken:.3f} / {r.c_mbsync:.3f}{trees}",
                "d": f"(d) {r.d_oaken:.2f} / {r.d_mu:.2f} (all {r.d_oaken_all:.2f})",
            }
            print(f"round {n + 1}: " + "  ".join(done[k] for k in steps) + f"  load {r.load:.1f}", flush=True)
        cycle = daemon_cycle(work / "a-oaken") if "c" in steps else None
        report(rounds, args, size, loads, cycle)
    finally:
        if args.keep:
            print(f"kept: server {server.dir} (pid {server.pid}), work {work}")
        else:
            server.stop(remove=True)
            if args.work is None:
                shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
