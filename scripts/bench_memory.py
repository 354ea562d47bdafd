#!/usr/bin/env python3
"""Memory benchmark (issue #19 item 7): peak RSS of `oaken import` of one large message,
keyword index pass included, against the same for a tiny message (the process's fixed cost).

    .venv/bin/python scripts/bench_memory.py [--mb 30] [--kind KIND ...] [--sync]

Each message is built deterministically in a temp dir:
- attachments: a short text body, a PDF-like binary and a zip, both base64 (what most large mail is);
- plain: one huge text/plain part (a log or a dump pasted into the body);
- html: one huge text/html part beside a small attachment (a multipart, so mail-parser's path);
- utf8: one huge text/plain part of Russian words, 8-bit UTF-8 (the email package holds such
  bytes as surrogates, two bytes each);
- utf8-1para: the same without a blank line: one paragraph, which chunking counts with the real
  tokenizer in one call (MAX_TEXT characters of it: some 230 MB, whatever the message's size).
Each import runs as its own `oaken import` process into a fresh OAKEN_HOME (keyword index only:
embedder "none"), started by a fresh interpreter that reads its peak RSS from os.wait4 (of the
child and whatever it waited for).
Prints, per kind: message size, peak RSS, the tiny message's peak (fixed cost) and
(peak - fixed) / size. With --sync, the same for `oaken sync --once` (its index pass included) of
the message APPENDed to a private Dovecot (scripts/dovecot.py), one IMAP user per message.
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import random
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20
KINDS = ("attachments", "plain", "html", "utf8", "utf8-1para")
_WORDS = ("quarterly report meeting budget invoice contract pipeline schedule review draft analysis "
          "forecast revenue customer shipment warehouse agreement signature deadline proposal").split()
_RUSSIAN = "отчёт встреча бюджет счёт договор поставка склад подпись срок предложение выручка клиент".split()


def _header(subject: str, content_type: str, extra: str = "") -> bytes:
    return (f"From: Bench Sender <sender@example.com>\r\nTo: reader@example.com\r\n"
            f"Subject: {subject}\r\nDate: Mon, 01 Jan 2024 10:00:00 +0000\r\n"
            f"Message-ID: <bench-{subject.replace(' ', '-')}@example.com>\r\nMIME-Version: 1.0\r\n"
            f"Content-Type: {content_type}\r\n{extra}\r\n").encode()


def _base64_lines(data: bytes) -> bytes:
    text = base64.b64encode(data)
    return b"".join(text[i:i + 76] + b"\r\n" for i in range(0, len(text), 76))


def _words(rng: random.Random, size: int, words: list[str] = _WORDS, paragraphs: bool = True) -> str:
    """About `size` bytes (as UTF-8) of words, in lines and (unless not `paragraphs`) paragraphs."""
    out: list[str] = []
    n = 0
    while n < size:
        line = " ".join(rng.choices(words, k=12))
        out.append(line)
        n += len(line.encode()) + 2
        if paragraphs and rng.random() < 0.2:
            out.append("")
    return "\r\n".join(out) + "\r\n"


def _part(content_type: str, body: bytes, *, filename: str | None = None, encoding: str = "7bit") -> bytes:
    disposition = f'Content-Disposition: attachment; filename="{filename}"\r\n' if filename else ""
    return (f"Content-Type: {content_type}\r\nContent-Transfer-Encoding: {encoding}\r\n{disposition}\r\n"
            ).encode() + body


def _multipart(subject: str, parts: list[bytes]) -> bytes:
    boundary = "=_bench_boundary_0001"
    out = [_header(subject, f'multipart/mixed; boundary="{boundary}"'), b"This is a MIME message.\r\n"]
    for p in parts:
        out.append(f"--{boundary}\r\n".encode() + p + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out)


def build(kind: str, size: int) -> bytes:
    """A message of about `size` bytes of the given kind (the same bytes on every run)."""
    rng = random.Random(f"{kind}-{size}")
    note = _part("text/plain; charset=utf-8", _words(rng, 2000).encode())
    if kind == "tiny":
        return _header("tiny", "text/plain; charset=utf-8") + _words(rng, 2000).encode()
    if kind == "attachments":
        raw_total = size * 3 // 4  # base64 with line ends: about 4/3 of the bytes
        pdf = b"%PDF-1.4\n" + rng.randbytes(raw_total * 3 // 5) + b"\n%%EOF\n"
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            info = zipfile.ZipInfo("data.bin", date_time=(2024, 1, 1, 0, 0, 0))
            z.writestr(info, rng.randbytes(raw_total * 2 // 5))
        return _multipart("attachments", [
            note,
            _part("application/pdf", _base64_lines(pdf), filename="report.pdf", encoding="base64"),
            _part("application/zip", _base64_lines(buf.getvalue()), filename="data.zip", encoding="base64"),
        ])
    if kind == "plain":
        return _header("plain", "text/plain; charset=utf-8") + _words(rng, size).encode()
    if kind in ("utf8", "utf8-1para"):
        return _header(kind, "text/plain; charset=utf-8", "Content-Transfer-Encoding: 8bit\r\n") + \
            _words(rng, size, _RUSSIAN, paragraphs=kind == "utf8").encode()
    if kind == "html":
        html = "<html><body>" + "".join(f"<p>{line}</p>\r\n" for line in _words(rng, size).split("\r\n")) \
            + "</body></html>\r\n"
        small = _base64_lines(rng.randbytes(50_000))
        return _multipart("html", [_part("text/html; charset=utf-8", html.encode()),
                                   _part("application/octet-stream", small, filename="a.bin", encoding="base64")])
    raise ValueError(f"unknown kind {kind!r}")


# Run from a fresh interpreter: a child's peak RSS starts at its parent's size (Linux counts the
# memory a forked child shares with its parent until exec), and this process holds the messages
# it built. The runner reaps its child with wait4 to read the child's own rusage.
_RUNNER = """
import json, os, subprocess, sys, threading
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
got = {}
readers = [threading.Thread(target=lambda f=f, k=k: got.__setitem__(k, f.read()))
           for f, k in ((proc.stdout, "out"), (proc.stderr, "err"))]
for t in readers:
    t.start()
_, status, usage = os.wait4(proc.pid, 0)
for t in readers:
    t.join()
print(json.dumps({"out": got["out"].decode(errors="replace"), "err": got["err"].decode(errors="replace")[-2000:],
                  "code": os.waitstatus_to_exitcode(status), "maxrss_kb": usage.ru_maxrss}))
"""


def run_measured(command: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """(peak RSS in bytes, stdout, stderr) of `command`, run from a fresh interpreter."""
    import json

    done = subprocess.run([sys.executable, "-c", _RUNNER, *command], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    if result["code"] != 0:
        raise RuntimeError(f"{command[3:]} failed ({result['code']}): {result['out'][-500:]} {result['err']}")
    return result["maxrss_kb"] * 1024, result["out"], result["err"]  # kilobytes on Linux


def oaken_env(home: Path) -> dict[str, str]:
    """A fresh OAKEN_HOME whose config indexes keywords only."""
    home.mkdir(parents=True)
    (home / "config.toml").write_text('[embedder]\nmodel = "none"\n')
    env = {**os.environ, "OAKEN_HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg-config"),
           "XDG_DATA_HOME": str(home / "xdg-data"), "HF_HUB_OFFLINE": "1"}
    env.pop("OAKEN_CRASH_AT", None)
    return env


def peak_rss(message: Path, home: Path) -> int:
    """Peak RSS in bytes of `oaken import` of `message` into a fresh home (with its index pass)."""
    peak, out, err = run_measured([sys.executable, "-m", "oaken.cli", "import", "--json", str(message)],
                                  oaken_env(home))
    if '"added": 1' not in out:
        raise RuntimeError(f"oaken import of {message} added nothing: {out[-500:]!r} {err[-1000:]}")
    return peak


def measure(kinds: list[str], size: int, work: Path) -> list[dict[str, float]]:
    tiny = work / "tiny.eml"
    tiny.write_bytes(build("tiny", 0))
    fixed = min(peak_rss(tiny, work / f"home-tiny-{i}") for i in range(2))
    rows = []
    for kind in kinds:
        path = work / f"{kind}.eml"
        path.write_bytes(build(kind, size))
        msg_size = path.stat().st_size
        peak = peak_rss(path, work / f"home-{kind}")
        rows.append({"kind": kind, "size": msg_size, "peak": peak, "fixed": fixed,
                     "ratio": (peak - fixed) / msg_size})
    return rows


def measure_sync(kinds: list[str], size: int, work: Path) -> list[dict[str, float]]:
    """measure() for `oaken sync --once` from a private Dovecot."""
    import ssl

    from dovecot import Dovecot
    from imapclient import IMAPClient

    server = Dovecot(owner_pid=os.getpid()).start()
    try:
        def sync_peak(name: str, message: bytes) -> int:
            user, password = f"bench-{name}", f"bench-{name}-password"
            server.add_user(user, password)
            with IMAPClient("127.0.0.1", server.ssl_port, ssl=True, timeout=120,
                            ssl_context=ssl.create_default_context(cafile=server.ca_file)) as c:
                c.login(user, password)
                c.append("INBOX", message)
            env = oaken_env(work / f"sync-{name}")
            (work / f"sync-{name}" / "config.toml").write_text(
                f'default_account = "bench"\n[embedder]\nmodel = "none"\n[accounts.bench]\nhost = "127.0.0.1"\n'
                f'port = {server.ssl_port}\ntls = "implicit"\nca_file = "{server.ca_file}"\nusername = "{user}"\n'
                f'password_env = "BENCH_IMAP_PASSWORD"\n')
            peak, out, err = run_measured([sys.executable, "-m", "oaken.cli", "sync", "--once"],
                                          {**env, "BENCH_IMAP_PASSWORD": password})
            if "1 new" not in out:
                raise RuntimeError(f"oaken sync of {name} stored nothing: {out[-500:]!r} {err[-1000:]}")
            return peak

        fixed = min(sync_peak(f"tiny{i}", build("tiny", 0)) for i in range(2))
        rows = []
        for kind in kinds:
            message = build(kind, size).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
            peak = sync_peak(kind, message)
            rows.append({"kind": kind, "size": len(message), "peak": peak, "fixed": fixed,
                         "ratio": (peak - fixed) / len(message)})
            del message
        return rows
    finally:
        server.stop(remove=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=30.0, help="size of each large message in MiB (default 30)")
    ap.add_argument("--kind", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--sync", action="store_true", help="also measure `oaken sync --once` from a private Dovecot")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="oaken-bench-memory-") as tmp:
        rows = [("import", r) for r in measure(args.kind, int(args.mb * MB), Path(tmp))]
        if args.sync:
            rows += [("sync", r) for r in measure_sync(args.kind, int(args.mb * MB), Path(tmp))]
    print(f"{'path':<7} {'message':<12} {'size MB':>8} {'peak RSS MB':>12} {'fixed MB':>9} {'(peak-fixed)/size':>18}")
    for path, r in rows:
        print(f"{path:<7} {r['kind']:<12} {r['size'] / MB:>8.1f} {r['peak'] / MB:>12.1f} {r['fixed'] / MB:>9.1f} "
              f"{r['ratio']:>18.2f}")


if __name__ == "__main__":
    main()
