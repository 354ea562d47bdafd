#!/usr/bin/env python3
"""Issue #14 goal (c): a no-change `oaken sync` of F folders against a local Dovecot, cold process,
against `mbsync -a` on the same server and mail, in the same rounds.

N real messages (scripts/bench_sync.py's Enron load) spread over F subscribed folders of a private
Dovecot (scripts/dovecot.py, implicit TLS with its own certificate), mirrored once by each tool;
then each round runs, in turn (the order rotating each round): `mbsync -a`, `oaken sync --once`
through the console script as pip installs it (oaken.fastpath: the no-change check of
oaken/sync/nochange.py), and the same through the full command (`oaken.cli:main`, what the
console script ran before). Medians of wall and CPU time (user + system of the process and its
children; Dovecot's not counted), the ratios to mbsync, the load average.

    .venv/bin/python scripts/bench_sync_nochange.py [--messages 10000] [--folders 10] [--runs 15] [--work DIR]
    .venv/bin/python scripts/bench_sync_nochange.py --maildir /work/scale/maildir-1000000 --runs 7 --work DIR

`--maildir`: the server holds that Maildir (INBOX and its `.Folder`s; bench_scale.py's generated
mailbox of a million), hard-linked into Dovecot's mail folder instead of appended message by
message, so a no-change pass is measured at a large mailbox's size.

`oaken` runs as bench_cold.py runs it: a private venv whose site-packages links this checkout, its
bytecode compiled once. Prints figures; asserts nothing but that every oaken run found nothing new.
"""

from __future__ import annotations

import argparse
import os
import pwd
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

from bench_cold import installed_like  # noqa: E402
from bench_searchable import fill, folder_names, make_folders, oaken_home  # noqa: E402
from bench_sync import PASSWORD, USER, load_messages, mbsync_config  # noqa: E402
from dovecot import Dovecot  # noqa: E402


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout) of one process and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd="/")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {(out.stderr or out.stdout)[-600:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), out.stdout


def imports(cmd: list[str], env: dict[str, str]) -> None:
    """The largest imports of one run (`python -X importtime`, cumulative microseconds)."""
    out = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], env=env, capture_output=True, text=True, cwd="/")
    rows = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _self, cumulative, name = line[len("import time:") :].split("|")
            rows.append((int(cumulative), name.rstrip()))
    print("largest imports of one run, cumulative (python -X importtime):")
    for us, name in sorted(rows, reverse=True)[:14]:
        print(f"  {us / 1000:6.1f} ms {name}")


def instructions(cmd: list[str], env: dict[str, str]) -> float:
    """Instructions one run executes, counted by callgrind: the same whatever else the machine does."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        env=env,
        capture_output=True,
        text=True,
        cwd="/",
    )
    counted = [line for line in out.stderr.splitlines() if "Collected" in line]
    return float(counted[-1].split()[-1]) if counted else float("nan")


def serve_maildir(server: Dovecot, maildir: Path) -> tuple[list[str], int]:
    """The server's mail is `maildir`: hard links to its files (Dovecot renames them, never writes
    them; the original's names stay), its folders subscribed. (folders in sync order, messages)."""
    assert server.dir is not None
    target = server.dir / "mail" / USER
    subprocess.run(["cp", "-al", str(maildir), str(target)], check=True)
    shutil.rmtree(target / ".notmuch", ignore_errors=True)  # notmuch's database, if it was indexed there
    (target / "oakengen.json").unlink(missing_ok=True)
    nobody = pwd.getpwnam("nobody")
    for folder, dirs, _ in os.walk(target):  # Dovecot (as nobody) writes its index and uidlist beside the mail
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    names = sorted(d.name[1:] for d in target.iterdir() if d.is_dir() and d.name.startswith(".") and (d / "cur").is_dir())
    server.doveadm("mailbox", "subscribe", "-u", USER, "INBOX", *names)
    count = sum(len(os.listdir(d / sub)) for d in [target, *(target / f".{n}" for n in names)] for sub in ("cur", "new"))
    return ["INBOX", *names], count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--folders", type=int, default=10)
    ap.add_argument("--runs", type=int, default=15, help="rounds; each runs every command once")
    ap.add_argument("--work", type=Path, help="working folder (default: a new temporary one, removed at the end)")
    ap.add_argument("--maildir", type=Path, help="serve this Maildir instead of --messages in --folders (see above)")
    ap.add_argument("--importtime", action="store_true", help="also print the largest imports of one no-change run")
    ap.add_argument(
        "--instructions", action="store_true", help="also count each command's instructions (valgrind): load-free"
    )
    args = ap.parse_args()
    for tool in ("mbsync", "dovecot"):
        if not shutil.which(tool) and not Path("/usr/sbin/dovecot").exists():
            raise SystemExit(f"{tool} not found: apt-get install isync dovecot-imapd")
    work = args.work or Path(tempfile.mkdtemp(prefix="oaken-nochange-"))
    work.mkdir(parents=True, exist_ok=True)
    venv = installed_like(work)
    server = Dovecot().start()
    try:
        server.add_user(USER, PASSWORD)
        if args.maildir:
            order, count = serve_maildir(server, args.maildir)
        else:
            messages = load_messages(args.messages)
            count = len(messages)
            order = make_folders(server, folder_names(args.folders))
            fill(
                server,
                {
                    name: messages[k * len(messages) // len(order) : (k + 1) * len(messages) // len(order)]
                    for k, name in enumerate(order)
                },
            )
        env = oaken_home(work / "oaken-home", server)  # [log] level = "warning", keyword index only
        env = {k: v for k, v in env.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        fast = [str(venv / "bin" / "python"), str(venv / "bin" / "oaken"), "sync", "--once"]
        full = [str(venv / "bin" / "python"), str(venv / "bin" / "oaken-full"), "sync", "--once"]
        shutil.rmtree(work / "mbsync", ignore_errors=True)  # a mirror of an earlier run's server
        mbsync = ["mbsync", "-q", "-c", str(mbsync_config(work / "mbsync", server)), "-a"]
        first = timed([*full, "--no-index"], env)
        peer_first = timed(mbsync, env)
        print(
            f"{count} messages in {len(order)} folders ({', '.join(order)}); first oaken sync "
            f"{first[0]:.1f} s: {first[2].strip()}; first mbsync {peer_first[0]:.1f} s",
            flush=True,
        )
        commands = {"mbsync -a": mbsync, "oaken sync --once": fast, "  the same, full command (before)": full}
        for cmd in commands.values():  # bytecode, page cache
            timed(cmd, env)
        wall: dict[str, list[float]] = {k: [] for k in commands}
        cpu: dict[str, list[float]] = {k: [] for k in commands}
        loads = [os.getloadavg()[0]]
        names = list(commands)
        for n in range(args.runs):
            for name in names[n % 3 :] + names[: n % 3]:
                w, c, out = timed(commands[name], env)
                if name != "mbsync -a" and " 0 new," not in out:
                    raise SystemExit(f"{name} found something new: {out.strip()}")
                if name == "oaken sync --once" and f"{len(order)} of {len(order)} folders unchanged" not in out:
                    raise SystemExit(f"not every folder unchanged: {out.strip()}")
                wall[name].append(w)
                cpu[name].append(c)
            loads.append(os.getloadavg()[0])
        peer_w, peer_c = statistics.median(wall["mbsync -a"]), statistics.median(cpu["mbsync -a"])
        print(f"\nno-change sync of {len(order)} folders, cold process, median of {args.runs} interleaved rounds")
        for name in commands:
            w, c = statistics.median(wall[name]), statistics.median(cpu[name])
            print(
                f"  {name:36} wall {w * 1000:7.1f} ms ({w / peer_w:4.2f}x mbsync)  CPU {c * 1000:6.1f} ms ({c / peer_c:4.2f}x)"
            )
        print(f"  load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
        if args.importtime:
            imports(fast, env)
        if args.instructions and shutil.which("valgrind"):
            print("instructions of one run (valgrind --tool=callgrind; the process alone, not Dovecot):")
            for name, cmd in commands.items():
                print(f"  {name:36} {instructions(cmd, env) / 1e6:7.1f} M")
    finally:
        server.stop(remove=True)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
