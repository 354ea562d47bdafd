#!/usr/bin/env python3
"""Index throughput with the words of attachments read and not read (issue #17 item 4/5), against
notmuch and mu on the same Maildir in the same run.

The Maildir: real Enron messages (subject, sender, date, body), each sent again with one real
attachment, cycling through every PDF of pypdf's test resources (fetched into
/work/.mirror/py-pdf+pypdf; files its snapshot lacks are skipped) and the office files of
tests/data/attachments: base64, named, as a mail client sends them. Oaken runs `import --no-index`
+ `reindex --keyword-only` into a fresh home with `[index] attachment_text` true, then false;
notmuch (which reads text/* attachments only) and mu run on the same files. Prints messages/s,
CPU seconds and peak RSS, and the ratios. Asserts nothing.

    .venv/bin/python scripts/bench_attachments.py [--messages 2000] [--work DIR]
"""

from __future__ import annotations

import argparse
import email
import os
import shutil
import subprocess
import sys
import tempfile
from email.message import EmailMessage
from email.policy import compat32
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_index import OAKEN, bench_mu, bench_notmuch, measure  # noqa: E402

ENRON = Path("/work/shared/corpora/enron-lay-skilling")
PYPDF = Path("/work/.mirror/py-pdf+pypdf/repo")
OFFICE = ROOT / "tests" / "data" / "attachments"


def attachments() -> list[tuple[str, bytes]]:
    out = []
    names = subprocess.run(["git", "-C", str(PYPDF), "ls-tree", "-r", "--name-only", "HEAD", "resources"],
                           capture_output=True, text=True).stdout.split()
    for name in (n for n in names if n.endswith(".pdf")):
        blob = subprocess.run(["git", "-C", str(PYPDF), "show", f"HEAD:{name}"], capture_output=True)
        if blob.returncode == 0 and len(blob.stdout) < 5 * 1024 * 1024:
            out.append((Path(name).name, blob.stdout))
    out += [(p.name, p.read_bytes()) for p in sorted(OFFICE.iterdir()) if p.suffix in (".docx", ".odt", ".ods")]
    return out


def build(maildir: Path, count: int) -> tuple[int, int]:
    files = attachments()
    sources = sorted(p for p in ENRON.rglob("*.eml"))[:count]
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True, exist_ok=True)
    total = 0
    for i, path in enumerate(sources):
        old = email.message_from_bytes(path.read_bytes(), policy=compat32)
        body = old.get_payload(decode=True) if not old.is_multipart() else b""
        msg = EmailMessage()
        for h in ("From", "To", "Subject", "Date"):
            if old.get(h):
                msg[h] = str(old[h]).replace("\n", " ").replace("\r", " ")
        msg["Message-ID"] = f"<attach-bench-{i}@example.com>"
        msg.set_content((body or b"").decode("latin-1"))
        name, data = files[i % len(files)]
        msg.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
        raw = bytes(msg)
        total += len(raw)
        (maildir / "cur" / f"{i}.bench:2,S").write_bytes(raw)
    return len(sources), total


def oaken_run(maildir: Path, home: Path, on: bool) -> tuple[float, float, float]:
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "config.toml").write_text(f'[embedder]\nmodel = "none"\n\n[index]\nattachment_text = {str(on).lower()}\n')
    env = {**os.environ, "OAKEN_HOME": str(home)}
    imp = measure([[*OAKEN, "import", "--no-index", str(maildir)]], env)
    idx = measure([[*OAKEN, "reindex", "--keyword-only"]], env)
    return imp.seconds + idx.seconds, imp.cpu_seconds + idx.cpu_seconds, max(imp.peak_mb, idx.peak_mb)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--work", type=Path)
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="oaken-bench-attach-"))
    maildir = work / "Maildir"
    if not (maildir / "cur").exists():
        n, size = build(maildir, args.messages)
    else:
        n, size = len(list((maildir / "cur").iterdir())), sum(p.stat().st_size for p in (maildir / "cur").iterdir())
    print(f"{n} messages with one real attachment each ({size / 1048576:.0f} MB) in {maildir}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    rows = {}
    for on in (True, False):
        rows[f"oaken, attachment text {'on' if on else 'off'}"] = oaken_run(maildir, work / f"oaken-{on}", on)
    nm = bench_notmuch(maildir, work, n)
    rows["notmuch new"] = (nm.seconds, nm.cpu_seconds, nm.peak_mb)
    mu = bench_mu(maildir, work, n)
    rows["mu index"] = (mu.seconds, mu.cpu_seconds, mu.peak_mb)
    for name, (sec, cpu, peak) in rows.items():
        print(f"  {name:32} {n / sec:7.0f} msgs/s  {sec:6.1f} s  CPU {cpu:6.1f} s  peak {peak:6.0f} MB")
    on, off = rows["oaken, attachment text on"][0], rows["oaken, attachment text off"][0]
    print(f"  reading the attachments' words costs {on / off:.2f}x the time of names only; oaken with them "
          f"{rows['mu index'][0] / on:.2f}x mu's speed, {rows['notmuch new'][0] / on:.2f}x notmuch's")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
