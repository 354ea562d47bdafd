#!/usr/bin/env python3
"""The demo: real mail on a local IMAP server, synced, indexed both ways, and searched.

A private Dovecot (scripts/dovecot.py) on loopback gets a demo mailbox by MULTIAPPEND: the
notmuch list archive and 299 Enron messages from tests/data, in a few folders, some read. Then
`oaken sync --once`, `oaken reindex` (keyword index, then vectors with the real
all-MiniLM-L6-v2) and a few searches, through the `oaken` command as a person would run it.
Everything lives in .oaken-demo/ (OAKEN_HOME); the server is stopped at the end.

    scripts/demo [--keep] [--model concept|all-MiniLM-L6-v2|none]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import tomli_w
from imapclient import IMAPClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from dovecot import Dovecot  # noqa: E402

HOME = ROOT / ".oaken-demo"
DATA = ROOT / "tests" / "data"
FOLDERS = {
    "INBOX": sorted((DATA / "evals" / "enron" / "lay-k").rglob("*.eml")),
    "Archive": sorted((DATA / "evals" / "enron" / "skilling-j").rglob("*.eml")),
    "Lists/notmuch": sorted(p for p in (DATA / "foundation" / "notmuch-default").rglob("*") if p.is_file()),
}
SEARCHES = [
    ["California power crisis"],
    ['"ERV Notification"', "10/19/2001"],
    ["warning about malicious programs infecting PCs"],  # the mail says "virus", not these words
    ["from:cworth", "notmuch", "tags"],
    ["is:unread", "label:Archive", "board meeting"],
]


def oaken(*args: str) -> None:
    print(f"\n$ oaken {' '.join(args)}", flush=True)
    env = {**os.environ, "OAKEN_HOME": str(HOME)}
    subprocess.run([str(ROOT / ".venv" / "bin" / "oaken"), *args], env=env, check=True)


def load_mailbox(server: Dovecot, user: str, password: str) -> int:
    count = 0
    with IMAPClient("127.0.0.1", port=server.port, ssl=False) as c:
        c.login(user, password)
        for folder, files in FOLDERS.items():
            if folder != "INBOX":
                c.create_folder(folder)
                c.subscribe_folder(folder)  # Oaken syncs subscribed folders, as mail clients show them
            batch = [{"msg": p.read_bytes(), "flags": ["\\Seen"] if i % 3 else []} for i, p in enumerate(files)]
            for i in range(0, len(batch), 100):
                c.multiappend(folder, batch[i:i + 100])
            count += len(batch)
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", action="store_true", help="leave the server running and .oaken-demo in place")
    ap.add_argument("--model", default="all-MiniLM-L6-v2", choices=["all-MiniLM-L6-v2", "concept", "none"])
    args = ap.parse_args()
    # a fresh mirror each run; the exported fast embedding models (data_dir/models) are kept,
    # since exporting them is a one-off cost of about a minute
    HOME.mkdir(mode=0o700, exist_ok=True)
    for entry in HOME.iterdir():
        if entry.name != "models":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    server = Dovecot(owner_pid=None if args.keep else os.getpid()).start()
    user, password = "demo", "demo-password"
    server.add_user(user, password)
    try:
        started = time.time()
        n = load_mailbox(server, user, password)
        print(f"Dovecot on 127.0.0.1:{server.ssl_port} (IMAPS, self-signed) serves {n} real messages "
              f"in {len(FOLDERS)} folders to user {user!r}")
        (HOME / "password").write_text(password)
        os.chmod(HOME / "password", 0o600)
        config = {
            "default_account": "demo",
            "accounts": {"demo": {
                "host": "127.0.0.1", "port": server.ssl_port, "tls": "implicit", "ca_file": server.ca_file,
                "username": user, "password_file": str(HOME / "password"),
            }},
            "embedder": {"model": args.model},
            # each search loads the model itself: a background search server (what a first search
            # starts without a daemon) would answer the first ones from keywords alone while it
            # loads, and outlive the demo by its idle time
            "search": {"server_idle_minutes": 0},
        }
        with open(HOME / "config.toml", "wb") as f:
            tomli_w.dump(config, f)
        os.chmod(HOME / "config.toml", 0o600)
        oaken("sync", "--once", "--no-index")
        oaken("reindex")
        oaken("status")
        for query in SEARCHES:
            oaken("search", "--limit", "5", "--", *query)
        print(f"\ndemo done in {time.time() - started:.0f} s; data in {HOME}")
    finally:
        if args.keep:
            print(f"server left running: python scripts/dovecot.py stop {server.dir}")
        else:
            server.stop(remove=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
