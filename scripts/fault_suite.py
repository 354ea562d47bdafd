#!/usr/bin/env python3
"""Oaken's fault suite (issue #19, item 8): the faults of the original probe, kept in the repo.

Real parts only: a private Dovecot (scripts/dovecot.py) on loopback, real `oaken` processes (the
venv's `oaken` command), real mail from tests/data. Each scenario ends by comparing what Oaken
holds with the truth (what was put on the server or given to `oaken import`):

- lost: a message given but not in raw.db (or missing one of its folders), or stored but not
  found by a search for its own word once everything is said to be complete;
- duplicated: a message stored twice, a location twice, a message or chunk twice in index.db, a
  vector row twice or for a chunk index.db does not hold;
- wrong: a search for a message's own word that does not return it first while saying
  `degraded: false`; for the socket scenario also every reply that is not a clear refusal.

Every message carries a word of its own (`fzq<seed>t<n>`, planted in its Subject) and a
Message-ID made from it. A table is printed at the end; the exit status is 1 if any count is not 0
or a scenario could not run.

    .venv/bin/python scripts/fault_suite.py --quick            # every scenario once, small
    .venv/bin/python scripts/fault_suite.py --seed 7 --rounds 5 --work /tmp/faults
    .venv/bin/python scripts/fault_suite.py --only kill9 --only socket

Mounting the small disk needs root (the project's machines and CI run as root); without it the
disk-full scenario is reported as skipped. docs/fault-suite.md describes each scenario.
"""

from __future__ import annotations

import argparse
import collections
import errno
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

TOKEN_RE = re.compile(rb"fzq[0-9a-f]{4}t[0-9]{5}z")
PYTHON_ERROR = re.compile(r"Traceback|File \"|\b[A-Z][A-Za-z]*(Error|Exception)\b")
DISK_FULL = re.compile(r"disk is full|disk full", re.I)
FOLDERS = ("INBOX", "Lists", "Archive/2009", "Work")


# ---- results -------------------------------------------------------------------------------------

@dataclass
class Result:
    scenario: str
    lost: int = 0
    duplicated: int = 0
    wrong: int = 0
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the scenario could not run to its end
    skipped: str | None = None

    def add(self, counts: "Counts", where: str = "") -> None:
        self.lost += counts.lost
        self.duplicated += counts.duplicated
        self.wrong += counts.wrong
        for n in counts.notes:
            self.notes.append(f"{where}: {n}" if where else n)

    def note(self, text: str) -> None:
        self.notes.append(text)

    @property
    def failed(self) -> bool:
        return bool(self.error or self.lost or self.duplicated or self.wrong)


@dataclass
class Counts:
    lost: int = 0
    duplicated: int = 0
    wrong: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Msg:
    """One message of the truth: its word, its Message-ID, its bytes and where it was put."""

    token: str
    message_id: str | None
    raw: bytes
    folder: str = "INBOX"
    kind: str = "real"  # real, or the hostile kind
    body_word: str | None = None  # hostile mail: a word only its body holds (reported, not counted)

    def expected(self) -> dict[str, Any]:
        return {"token": self.token, "message_id": self.message_id, "folder": self.folder, "kind": self.kind,
                "body_word": self.body_word}


# ---- real mail, each message given a word of its own ---------------------------------------------

def real_mail() -> list[bytes]:
    """Every distinct real message in tests/data (by Message-ID), CRLF line ends."""
    seen: set[bytes] = set()
    out: list[bytes] = []
    paths = sorted(p for sub in ("sync", "index", "search", "copies", "evals/enron", "foundation/notmuch-default")
                   for p in (DATA / sub).rglob("*") if p.is_file() and p.suffix not in (".md", ".json", ".jsonl"))
    for p in paths:
        raw = p.read_bytes().replace(b"\r\n", b"\n")
        m = re.search(rb"(?im)^message-id:[ \t]*(\S+)", raw.partition(b"\n\n")[0])
        key = m.group(1) if m else raw[:200]
        if key in seen or b"\n\n" not in raw:
            continue
        seen.add(key)
        out.append(raw.replace(b"\n", b"\r\n"))
    return out


def _header_lines(head: bytes) -> list[bytes]:
    """Header lines with their folded continuations joined to them (CRLF kept inside)."""
    lines: list[bytes] = []
    for line in head.split(b"\r\n"):
        if lines and line[:1] in (b" ", b"\t"):
            lines[-1] += b"\r\n" + line
        else:
            lines.append(line)
    return lines


def plant(raw: bytes, token: str, message_id: str | None) -> bytes:
    """The message with `token` at the end of its Subject and `message_id` as its Message-ID."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = [ln for ln in _header_lines(head) if not ln.lower().startswith(b"message-id:")]
    for i, line in enumerate(lines):
        if line.lower().startswith(b"subject:"):
            lines[i] = line + b" " + token.encode()
            break
    else:
        lines.append(b"Subject: " + token.encode())
    if message_id:
        lines.append(f"Message-ID: <{message_id}>".encode())
    return b"\r\n".join(lines) + (sep or b"\r\n\r\n") + body


class Words:
    """Unique words and Message-IDs for one run: fzq<seed as 4 hex digits>t<counter>z; each
    scenario counts from its own 10,000s, so a scenario run alone gets the words of a whole run."""

    def __init__(self, seed: int, start: int = 0):
        self.prefix = f"fzq{seed & 0xFFFF:04x}t"
        self.n = start

    def next(self) -> tuple[str, str]:
        self.n += 1
        token = f"{self.prefix}{self.n:05d}z"
        return token, f"{token}@faults.oaken.test"


def make_messages(pool: list[bytes], words: Words, rng: random.Random, n: int,
                  folders: Iterable[str] = ("INBOX",)) -> list[Msg]:
    """n messages made from the real ones (each used once before any is used again), each with a
    word of its own, spread over `folders`."""
    folders = list(folders)
    order: list[bytes] = []
    out = []
    for _ in range(n):
        if not order:
            order = rng.sample(pool, len(pool))
        token, mid = words.next()
        out.append(Msg(token, mid, plant(order.pop(), token, mid), rng.choice(folders)))
    return out


# ---- hostile mail -------------------------------------------------------------------------------

def hostile_mail(words: Words, rng: random.Random, pool: list[bytes]) -> list[Msg]:
    """Mail built to break parsers: size, part count, nesting, NUL bytes, broken and 8-bit headers.
    Each still has its word in the Subject, so it is findable by its headers at least."""
    out: list[Msg] = []

    def add(kind: str, build: Callable[[str, str], bytes], with_id: bool = True, body_word: bool = False) -> None:
        token, mid = words.next()
        out.append(Msg(token, mid if with_id else None, build(token, mid), "INBOX", kind,
                       f"{token}body" if body_word else None))

    def head(token: str, mid: str, extra: str = "", ctype: str = "text/plain; charset=utf-8") -> bytes:
        return (f"From: Hostile Sender <hostile@example.com>\r\nTo: me@example.com\r\n"
                f"Subject: hostile {token}\r\nDate: Mon, 04 Mar 2024 10:00:00 +0000\r\n"
                f"Message-ID: <{mid}>\r\nMIME-Version: 1.0\r\nContent-Type: {ctype}\r\n{extra}\r\n").encode()

    text = pool[0].partition(b"\r\n\r\n")[2][:2000]

    def big(token: str, mid: str) -> bytes:  # 30 MB: a text part and a base64 attachment
        b = "bigbound"
        blob = rng.randbytes(22_000_000)
        import base64
        enc = base64.encodebytes(blob).replace(b"\n", b"\r\n")
        return (head(token, mid, ctype=f'multipart/mixed; boundary="{b}"') +
                f"--{b}\r\nContent-Type: text/plain\r\n\r\n".encode() + text + f"\r\n{token}body\r\n".encode() +
                f"--{b}\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n"
                f'Content-Disposition: attachment; filename="big.bin"\r\n\r\n'.encode() + enc +
                f"\r\n--{b}--\r\n".encode())

    def parts(token: str, mid: str) -> bytes:  # 5,000 MIME parts
        b = "manyparts"
        body = b"".join(f"--{b}\r\nContent-Type: text/plain\r\n\r\npart {i} of many\r\n".encode()
                        for i in range(4999))
        body += f"--{b}\r\nContent-Type: text/plain\r\n\r\nlast part {token}body\r\n--{b}--\r\n".encode()
        return head(token, mid, ctype=f'multipart/mixed; boundary="{b}"') + body

    def nested(token: str, mid: str) -> bytes:  # 200 multiparts, each inside the one before
        depth = 200
        opening = b"".join(f"--n{i}\r\nContent-Type: multipart/mixed; boundary=\"n{i + 1}\"\r\n\r\n".encode()
                           for i in range(depth - 1))
        inner = (f"--n{depth - 1}\r\nContent-Type: text/plain\r\n\r\ndeep inside {token}body\r\n"
                 f"--n{depth - 1}--\r\n").encode()
        closing = b"".join(f"--n{i}--\r\n".encode() for i in reversed(range(depth - 1)))
        return head(token, mid, ctype='multipart/mixed; boundary="n0"') + opening + inner + closing

    def nul(token: str, mid: str) -> bytes:
        return (head(token, mid, extra="X-Nul: before\x00after\r\n") +
                b"text\x00with NUL\x00bytes\r\n\x00\x00\x00" + token.encode() + b"body\x00\r\n" + text)

    def first_folded(token: str, mid: str) -> bytes:  # a continuation line first, an mbox From_ line next
        return (f" folded line before any header\r\nFrom hostile@example.com Mon Mar  4 10:00:00 2024\r\n"
                f"Subject: first line folded {token}\r\nMessage-ID: <{mid}>\r\n\r\n").encode() + text

    def broken(token: str, mid: str) -> bytes:
        return ((f"Subject: broken headers {token}\r\nMessage-ID: <{mid}>\r\nthis line has no colon\r\n"
                 f"From: =?x-unknown?Q?broken=ZZ?= <@@bad@@>\r\nTo: ,,,;;; <>\r\n"
                 f"Date: Tue, 45 Fooember 20x4 27:99:99 +9999\r\n"
                 f"Content-Type: multipart/mixed\r\nContent-Transfer-Encoding: base64\r\n"
                 f"X-Long: {'y' * 100_000}\r\n\r\n").encode() + b"@@@ not base64 \r\n" + text)

    def eight_bit(token: str, mid: str) -> bytes:
        return (f"From: Jürgen Größe <jg@example.com>\r\nTo: Émilie <e@example.com>\r\n"
                f"Subject: Grüße {token} ünd mehr\r\nMessage-ID: <{mid}>\r\n"
                f"Date: Mon, 04 Mar 2024 10:00:00 +0000\r\n".encode() +
                b"X-Latin1: caf\xe9 cr\xe8me\r\nX-Broken-UTF8: \xc3\x28\xa0\xa1\r\n\r\n" + text)

    def no_id(token: str, mid: str) -> bytes:
        return plant(rng.choice(pool), token, None)

    def headers_only(token: str, mid: str) -> bytes:
        return f"From: a@example.com\r\nSubject: only headers {token}\r\nMessage-ID: <{mid}>".encode()

    def malformed_real(name: str) -> Callable[[str, str], bytes]:
        def build(token: str, mid: str) -> bytes:
            raw = (DATA / "foundation" / "malformed" / name).read_bytes().replace(b"\r\n", b"\n")
            raw = raw.replace(b"\n", b"\r\n")
            if name == "msg_19.txt":  # no headers at all: it gets a Subject and a Message-ID only
                return f"Subject: {token}\r\nMessage-ID: <{mid}>\r\n\r\n".encode() + raw
            return plant(raw, token, mid)
        return build

    def outlook(token: str, mid: str) -> bytes:  # a binary Outlook .msg after a minimal header
        raw = (DATA / "foundation" / "malformed" / "mail_outlook_1").read_bytes()
        return f"Subject: outlook {token}\r\nMessage-ID: <{mid}>\r\n\r\n".encode() + raw

    add("30 MB message", big, body_word=True)
    add("5,000 MIME parts", parts, body_word=True)
    add("200 nested multiparts", nested, body_word=True)
    add("NUL bytes", nul, body_word=True)
    add("broken headers", broken)
    add("first line folded", first_folded)
    add("8-bit headers", eight_bit)
    add("no Message-ID", no_id, with_id=False)
    add("headers only", headers_only)
    add("no headers (CPython msg_19)", malformed_real("msg_19.txt"))
    add("hour 27 (CPython msg_47)", malformed_real("msg_47_variant-2e31ff5.txt"))
    add("Outlook .msg body", outlook)
    return out


# ---- processes ----------------------------------------------------------------------------------

def oaken_command() -> list[str]:
    exe = ROOT / ".venv" / "bin" / "oaken"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "oaken.cli"]


@dataclass
class Run:
    rc: int
    out: str
    err: str
    seconds: float
    peak_mb: float


VERBOSE = False


def say(text: str) -> None:
    """A progress line on stderr with --verbose."""
    if VERBOSE:
        print(f"    [{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def run(home: Path, *args: str, timeout: float = 600) -> Run:
    """`oaken ARGS` with OAKEN_HOME=home; its exit code, output and peak memory."""
    say(f"oaken {' '.join(a[:40] for a in args)}")
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([*oaken_command(), *args], env=env_for(home), stdout=out, stderr=err,
                             stdin=subprocess.DEVNULL, cwd=ROOT)
        rc, peak = wait_rusage(p, timeout)
        out.seek(0)
        err.seek(0)
        return Run(rc, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                   time.monotonic() - start, peak)


def wait_rusage(p: subprocess.Popen, timeout: float) -> tuple[int, float]:
    """Wait for `p` (SIGKILL after `timeout`): its exit code (-signal) and peak RSS in MB."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return p.returncode, usage.ru_maxrss / 1024
        if time.monotonic() > deadline:
            os.kill(p.pid, signal.SIGKILL)
            _, status, usage = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            return p.returncode, usage.ru_maxrss / 1024
        time.sleep(0.02)


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OAKEN_")}
    env.update(OAKEN_HOME=str(home), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1",
               XDG_CONFIG_HOME=str(home / ".xdg-config"), XDG_DATA_HOME=str(home / ".xdg-data"))
    return env


def one_line(text: str, width: int = 140) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= width else last[:width - 3] + "..."


class Daemon:
    """One `oaken sync --daemon`, started in its own process group, killed by its pid."""

    def __init__(self, home: Path, log_name: str):
        self.home = home
        self.log_path = home.parent / f"{home.name}-{log_name}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([*oaken_command(), "sync", "--daemon"], env=env_for(home), stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                                     start_new_session=True)
        self.started = time.monotonic()

    @property
    def sock(self) -> Path:
        return self.home / "search.sock"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def why(self) -> str:
        """Its exit code, if it has one, and the last line of its log."""
        rc = self.proc.poll()
        last = one_line(self.log_path.read_text(errors="replace"), 160)
        return (f"exit {rc}: " if rc is not None else "") + last

    def kill9(self) -> list[int]:
        """SIGKILL the daemon alone, as a crash would; the pids of its children still alive 2 s later
        (then killed too, so they do not disturb what follows)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        left = _group(self.proc.pid)
        deadline = time.monotonic() + 2
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = _group(self.proc.pid)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()
        return left

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM: the daemon should commit its batch and exit 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.log.close()
                return -9
        self.log.close()
        return self.proc.returncode


def _group(pgid: int) -> list[int]:
    """Live processes of a process group (the daemon's workers after the daemon is gone)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry))
    return out


def wait_for(condition: Callable[[], bool], timeout: float, step: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


# ---- what the stores hold, read lightly while oaken writes ----------------------------------------

def progress(home: Path) -> tuple[int, int, int]:
    """(messages in raw.db, messages in index.db, vector rows): -1 where it cannot be read now."""
    import apsw

    def count(path: Path, sql: str) -> int:
        if not path.exists():
            return 0
        try:
            db = apsw.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
            try:
                db.setbusytimeout(50)
                return int(db.execute(sql).fetchone()[0])
            finally:
                db.close()
        except apsw.Error:
            return -1

    try:
        rows = int(json.loads((home / "vectors" / "state.json").read_text()).get("rows", 0))
    except (OSError, ValueError):
        rows = 0
    return (count(home / "raw.db", "SELECT count(*) FROM messages"),
            count(home / "index.db", "SELECT count(*) FROM messages"), rows)


def status(home: Path) -> dict[str, Any]:
    r = run(home, "status", "--json", timeout=60)
    if r.rc != 0:
        raise RuntimeError(f"oaken status --json: exit {r.rc}: {one_line(r.err)}")
    return json.loads(r.out)


def complete(home: Path, messages: int, vectors: bool) -> bool:
    """Whether raw.db holds `messages` and both indexes are caught up (oaken status --json, asked
    once the counts read directly say so)."""
    raw_n, index_n, _rows = progress(home)
    if raw_n != messages or index_n != messages:
        return False
    try:
        s = status(home)
    except (RuntimeError, ValueError):
        return False
    index, vec = s.get("index", {}), s.get("vectors", {})
    done = s.get("messages") == messages and index.get("state") == "ok" and index.get("messages") == messages
    return done and (not vectors or (vec.get("state") == "ready" and vec.get("coverage") == 1.0))


def wait_complete(home: Path, messages: int, vectors: bool, timeout: float, daemon: "Daemon") -> bool:
    """Until the daemon has stored and indexed everything; False on a timeout, and at once when the
    daemon has died (RuntimeError, saying how)."""
    done = wait_for(lambda: not daemon.alive() or complete(home, messages, vectors), timeout, step=0.5)
    if not daemon.alive():
        raise RuntimeError(f"the daemon died: {daemon.why()}")
    return done


# ---- comparing with the truth (in a fresh process: `fault_suite.py _inspect`) ----------------------

def inspect(work: Path, home: Path, msgs: list[Msg], *, final: bool = True, folders: bool = False,
            searchable: Iterable[str] | None = None, account: str | None = None) -> Counts:
    """Compare raw.db, index.db, vectors/ and searches with the truth `msgs`, in a new process (so no
    state of an earlier search is reused). final: every message must be stored and searchable; else
    (a moment mid-fault) only searches that answer wrongly without saying degraded count.
    searchable: the words to search for (default: every message's)."""
    say(f"inspect {home.name} ({len(msgs)} messages, final={final})")
    spec = work / f"expect-{home.name}-{time.monotonic_ns()}.json"
    spec.write_text(json.dumps({"messages": [m.expected() for m in msgs], "final": final, "folders": folders,
                                "search": None if searchable is None else sorted(searchable),
                                "account": account}))
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_inspect", str(home), str(spec)],
                       env=env_for(home), capture_output=True, text=True, timeout=1800, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"inspecting {home} failed: {p.stderr.strip()[-2000:]}")
    data = json.loads(p.stdout.strip().splitlines()[-1])
    return Counts(data["lost"], data["duplicated"], data["wrong"], data["notes"])


def _inspect_main(home: str, spec_path: str) -> int:
    """Runs in its own process: prints one JSON line {lost, duplicated, wrong, notes}."""
    import apsw

    from oaken import config as config_mod
    from oaken.errors import OakenError
    from oaken.index.keyword.schema import EMBEDDED_SQL
    from oaken.store import open_store

    spec = json.loads(Path(spec_path).read_text())
    final, check_folders = spec["final"], spec["folders"]
    expected = {m["token"]: m for m in spec["messages"]}
    cfg = config_mod.load()
    data_dir = config_mod.resolve_data_dir(cfg)
    notes: list[str] = []
    lost: set[str] = set()
    dup = wrong = 0

    # raw.db: which stored message carries which word
    carriers: dict[str, list[int]] = collections.defaultdict(list)
    locations: dict[int, collections.Counter] = {}
    raw_ids: list[int] = []
    problems = 0
    raw_read = False  # raw.db's messages known: what index.db holds is compared with them
    if (data_dir / "raw.db").exists():
        try:
            with open_store(data_dir, readonly=True) as store:
                integrity = store.integrity_check()
                if integrity != "ok":
                    notes.append(f"raw.db integrity_check: {integrity[:100]}")
                    dup += 1  # a damaged raw.db loses or doubles mail; count it once whatever it is
                raw_ids = store.all_message_ids()
                for mid in raw_ids:
                    raw = store.raw(mid)
                    for tok in set(TOKEN_RE.findall(raw)):
                        carriers[tok.decode()].append(mid)
                    locations[mid] = collections.Counter(loc.folder for loc in store.locations(mid))
                problems = sum(1 for m in store.metas(raw_ids).values() if m.problem)
                raw_read = True
        except (apsw.Error, OakenError) as e:  # a raw.db whose first migration met a full disk; a
            # reader refused on a full disk (SQLite cannot create the -shm file WAL mode maps)
            notes.append(f"raw.db unreadable: {type(e).__name__}: {str(e)[:80]}")
    extra = [i for i in raw_ids if not any(i in ids for ids in carriers.values())]
    if extra:
        dup += len(extra)
        notes.append(f"{len(extra)} messages in raw.db that were never given (ids {extra[:5]})")
    for tok, m in expected.items():
        ids = carriers.get(tok, [])
        if not ids:
            lost.add(tok)
            continue
        if len(ids) > 1:
            dup += len(ids) - 1
            notes.append(f"{m['kind']} message {tok} stored {len(ids)} times")
        if check_folders:
            where = locations[ids[0]]
            if where.get(m["folder"], 0) == 0:
                lost.add(tok)
                notes.append(f"{tok} not in its folder {m['folder']} (in {dict(where)})")
            doubled = sum(n - 1 for n in where.values() if n > 1)
            if doubled:
                dup += doubled
                notes.append(f"{tok}: a folder location stored twice ({dict(where)})")
    if lost and final:
        kinds = collections.Counter(expected[t]["kind"] for t in lost)
        notes.append(f"not in raw.db: {dict(kinds)} (e.g. {sorted(lost)[:3]})")
    elif not final:  # mid-fault: what is not stored yet is not lost
        notes.append(f"raw.db holds {len(expected) - len(lost)} of the {len(expected)} messages")
        lost.clear()

    # index.db: no message or chunk twice, nothing raw.db does not hold
    body_chunks: set[int] | None = None
    index_path = data_dir / "index.db"
    if index_path.exists():
        try:
            db = apsw.Connection(f"file:{index_path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
            try:
                db.setbusytimeout(5000)
                ids = [r[0] for r in db.execute("SELECT id FROM messages")]
                strays = set(ids) - set(raw_ids) if raw_read else set()
                twice = db.execute("SELECT count(*) - count(DISTINCT message || '/' || ord || '/' || kind) "
                                   "FROM chunks").fetchone()[0]
                orphans = db.execute("SELECT count(*) FROM chunks WHERE message NOT IN (SELECT id FROM messages)"
                                     ).fetchone()[0]
                # the chunks the embedding pass embeds (bodies and attachments' words), by its own rule
                body_chunks = {r[0] for r in db.execute(f"SELECT id FROM chunks WHERE {EMBEDDED_SQL}")}
            finally:
                db.close()
            if strays:
                dup += len(strays)
                notes.append(f"index.db holds {len(strays)} messages raw.db does not")
            if twice or orphans:
                dup += twice + orphans
                notes.append(f"index.db: {twice} chunks twice, {orphans} chunks of no message")
        except apsw.Error as e:
            notes.append(f"index.db unreadable ({type(e).__name__})")
            if final:
                lost.update(t for t in expected if t not in lost)  # nothing is searchable by keyword
    elif final:
        notes.append("no index.db")

    # vectors/: no row twice, none for a chunk index.db does not hold; in the end, every chunk embedded
    vectors_dir = data_dir / "vectors"
    if cfg.embedder.model != "none" and vectors_dir.exists() and body_chunks is not None:
        try:
            from oaken.index.vectors import VectorStore

            # the rows readers see: superseded ones stay on disk until the upkeep removes them
            rows = VectorStore(data_dir).live(["chunk_id", "message"])
            chunk_ids = rows.column("chunk_id").to_pylist()
            messages = rows.column("message").to_pylist()
            rebuilding = (vectors_dir / "rebuilding.json").exists()
            twice = len(chunk_ids) - len(set(chunk_ids))
            stale = len(set(chunk_ids) - body_chunks)
            if twice:
                dup += twice
                notes.append(f"vectors: {twice} chunk rows twice")
            if stale and (final or not rebuilding):
                dup += stale
                notes.append(f"vectors: {stale} rows for chunks index.db does not hold")
            if final:
                missing = body_chunks - set(chunk_ids)
                if missing:
                    with_vec = set(messages)
                    notes.append(f"vectors: {len(missing)} of {len(body_chunks)} body chunks not embedded "
                                 f"({len(set(raw_ids) - with_vec)} messages without any vector)")
                    lost.add("vectors-incomplete")
        except Exception as e:  # noqa: BLE001 - reported, and counted when the state should be whole
            notes.append(f"vectors unreadable: {type(e).__name__}: {str(e)[:100]}")
            if final:
                lost.add("vectors-unreadable")

    # searches: a message's own word must find it first, unless the search says it is degraded
    from oaken.search.engine import search

    to_search = spec["search"] if spec["search"] is not None else list(expected)
    unsearchable: list[str] = []
    wrong_examples: list[str] = []
    degraded_reasons: collections.Counter = collections.Counter()
    refused: collections.Counter = collections.Counter()
    for tok in to_search:
        ids = carriers.get(tok, [])
        message_id = expected[tok]["message_id"]
        if not ids and (final or not message_id):
            continue  # not stored: counted as lost above (mid-fault: raw.db may be unreadable, not the search)
        try:
            r = search(tok, config=cfg, limit=5, account=spec["account"])
        except Exception as e:  # noqa: BLE001 - a search must answer; an OakenError is a clear refusal
            from oaken.errors import OakenError

            if isinstance(e, OakenError):
                refused[str(e)[:120]] += 1
                unsearchable.append(tok)
            else:
                wrong += 1
                frames = [f for f in traceback.extract_tb(e.__traceback__) if "/oaken/" in f.filename]
                at = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} {frames[-1].name}" if frames else ""
                wrong_examples.append(f"{tok}: search raised {type(e).__name__}{at}: {str(e)[:80]}")
            continue
        first = r.hits[0] if r.hits else None
        if first is not None and (first.id in ids or any(c in ids for c in first.copies)
                                  or (message_id and first.message_id == message_id)):
            continue
        if r.degraded:
            degraded_reasons[r.degraded_reason] += 1
            unsearchable.append(tok)
        else:
            wrong += 1
            got = f"id {first.id} ({first.subject[:40]!r})" if first else "nothing"
            wrong_examples.append(f"{tok} ({expected[tok]['kind']}, id {ids[:1]}): got {got}, not degraded")
    if wrong_examples:
        notes.append(f"{wrong} searches wrong, e.g. {'; '.join(wrong_examples[:3])}")
    if refused:
        text, n = refused.most_common(1)[0]
        notes.append(f"{sum(refused.values())} searches refused with an error, e.g. {text[:90]!r}")
    if degraded_reasons:
        notes.append(f"{sum(degraded_reasons.values())} searches missed saying degraded ({dict(degraded_reasons)})")
    if unsearchable and final:
        lost.update(unsearchable)
        notes.append(f"{len(unsearchable)} stored messages not found by their word (degraded or refused)")
    if problems:
        notes.append(f"{problems} stored with a parse problem")
    body_found = []
    for tok, m in expected.items():  # hostile mail: is the word deep in its body found too? (not counted)
        if m.get("body_word") and carriers.get(tok):
            try:
                hits = search(m["body_word"], config=cfg, limit=3, account=spec["account"]).hits
            except Exception as e:  # noqa: BLE001 - reported only
                hits = ()
                body_found.append(f"{m['kind']}: {type(e).__name__}")
                continue
            found = any(h.id in carriers[tok] for h in hits)
            body_found.append(f"{m['kind']} {'yes' if found else 'NO'}")
    if body_found:
        notes.append("found by a word in its body (not counted): " + ", ".join(body_found))
    print(json.dumps({"lost": len(lost), "duplicated": dup, "wrong": wrong, "notes": notes}))
    return 0


# ---- the IMAP side ------------------------------------------------------------------------------

class Server:
    """The suite's Dovecot, a user per scenario, and the truth put on it."""

    def __init__(self) -> None:
        from dovecot import Dovecot

        self.dovecot = Dovecot(owner_pid=os.getpid()).start()
        self.users = 0

    def new_user(self) -> tuple[str, str]:
        self.users += 1
        user, password = f"fault{self.users}", f"pw-fault{self.users}-{os.getpid()}"
        self.dovecot.add_user(user, password)
        return user, password

    def client(self, user: tuple[str, str]) -> Any:
        from imapclient import IMAPClient

        ctx = ssl.create_default_context(cafile=self.dovecot.ca_file)
        c = IMAPClient("127.0.0.1", self.dovecot.ssl_port, ssl=True, ssl_context=ctx, timeout=120)
        c.login(*user)
        return c

    def fill(self, user: tuple[str, str], msgs: list[Msg]) -> None:
        by_folder: dict[str, list[Msg]] = collections.defaultdict(list)
        for m in msgs:
            by_folder[m.folder].append(m)
        with self.client(user) as c:
            for folder, items in by_folder.items():
                if folder != "INBOX" and not c.folder_exists(folder):
                    c.create_folder(folder)
                    c.subscribe_folder(folder)
                for i in range(0, len(items), 200):
                    c.multiappend(folder, [{"msg": m.raw} for m in items[i:i + 200]])

    def truth(self, user: tuple[str, str]) -> collections.Counter:
        """(word, folder) of every message the server holds, to check the truth was put there."""
        out: collections.Counter = collections.Counter()
        with self.client(user) as c:
            for flags, _d, name in c.list_folders():
                if any(f.lower() in (b"\\noselect", b"\\nonexistent") for f in flags):
                    continue
                c.select_folder(name, readonly=True)
                uids = c.search("ALL")
                for i in range(0, len(uids), 500):
                    for item in c.fetch(uids[i:i + 500], ["BODY.PEEK[HEADER.FIELDS (SUBJECT)]"]).values():
                        head = next(v for k, v in item.items() if k.startswith(b"BODY[HEADER"))
                        for tok in set(TOKEN_RE.findall(head)):
                            out[(tok.decode(), name)] += 1
        return out

    def stop(self) -> None:
        self.dovecot.stop(remove=True)


def write_config(home: Path, *, model: str, user: tuple[str, str] | None = None, server: Server | None = None,
                 port: int | None = None, batch_size: int = 10) -> None:
    import tomli_w

    home.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"embedder": {"model": model, "backend": "torch"},
                            "daemon": {"idle_folders": ["INBOX"], "poll_seconds": 5.0, "max_backoff_seconds": 2.0},
                            "log": {"level": "info"}}
    if user is not None and server is not None:
        data["default_account"] = "test"
        data["accounts"] = {"test": {
            "host": "127.0.0.1", "port": port or server.dovecot.ssl_port, "tls": "implicit",
            "ca_file": server.dovecot.ca_file, "username": user[0], "password_command": f"printf %s {user[1]}",
            "timeout_seconds": 5.0, "batch_size": batch_size}}
    fd = os.open(home / "config.toml", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        tomli_w.dump(data, f)


def truth_on_server(server: Server, user: tuple[str, str], msgs: list[Msg]) -> None:
    """The server holds exactly what the scenario put there (else the comparison means nothing)."""
    held = server.truth(user)
    want = collections.Counter((m.token, m.folder) for m in msgs)
    if held != want:
        raise RuntimeError(f"the server does not hold what was put there: {len(want - held)} missing, "
                           f"{len(held - want)} unexpected")


def oaken_error_is_clear(r: Run) -> str | None:
    """None when a failed command said its failure in a line, else what is wrong with its output."""
    if "Traceback" in r.err:
        return f"traceback: {one_line(r.err)}"
    if r.rc not in (0, 1):
        return f"exit {r.rc}: {one_line(r.err)}"
    return None


# ---- the scenarios -------------------------------------------------------------------------------

class Suite:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.quick = args.quick
        self.rng = random.Random(args.seed)
        self.work = Path(args.work)
        self.words = Words(args.seed)
        self.pool = real_mail()
        self.model = args.model
        self.vectors = args.model != "none"
        self._server: Server | None = None

    def begin(self, scenario: str) -> None:
        """Random choices and words of a scenario depend on the seed and its name only, so that
        `--seed S --only NAME` repeats what NAME did in a whole run with seed S."""
        self.rng = random.Random(f"{self.args.seed}/{scenario}")
        self.words = Words(self.args.seed, 10_000 * list(SCENARIOS).index(scenario))

    @property
    def server(self) -> Server:
        if self._server is None:
            self._server = Server()
        return self._server

    def size(self, quick: int, full: int) -> int:
        return quick if self.quick else full

    def inspect(self, home: Path, msgs: list[Msg], *, final: bool = True, folders: bool = False,
                searchable: Iterable[str] | None = None) -> Counts:
        """`inspect` with the words searched for: all of them, or in --quick 30 of them (every
        hostile message's among them); each message is still looked for in raw.db."""
        if searchable is None and self.quick:
            hostile = [m.token for m in msgs if m.kind != "real"]
            real = [m.token for m in msgs if m.kind == "real"]
            searchable = hostile + self.rng.sample(real, min(30, len(real)))
        elif searchable is not None and self.quick:
            searchable = list(searchable)
            searchable = self.rng.sample(searchable, min(30, len(searchable)))
        return inspect(self.work, home, msgs, final=final, folders=folders, searchable=searchable)

    def home(self, name: str) -> Path:
        path = self.work / name
        if path.exists():
            shutil.rmtree(path)
        return path

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()

    # -- kill -9 at random points of a daemon's sync and indexing --------------------------------

    def kill9(self, result: Result) -> None:
        """`oaken sync --daemon` against Dovecot, killed with SIGKILL at random moments of its sync,
        its keyword pass and its embedding pass (a new share of the mail arrives on the server before
        each restart), then left to finish."""
        from tests.tcp_proxy import TcpProxy

        rounds = self.args.rounds
        n = self.size(120, 360)
        user = self.server.new_user()
        msgs = make_messages(self.pool, self.words, self.rng, n, FOLDERS)
        first, rest = msgs[: n // 2], msgs[n // 2:]
        shares = [rest[i::rounds] for i in range(rounds)]
        self.server.fill(user, first)
        proxy = TcpProxy(self.server.dovecot.ssl_port)
        proxy.rate = sum(len(m.raw) for m in msgs) / self.size(3.0, 6.0)  # a full sync takes a few seconds
        home = self.home("kill9")
        write_config(home, model=self.model, user=user, server=self.server, port=proxy.port, batch_size=8)
        phases = ["sync", "keyword index", "vectors" if self.vectors else "sync", "any moment"]
        try:
            on_server = len(first)
            for k in range(rounds):
                phase = phases[k % len(phases)] if k < len(phases) else self.rng.choice(phases)
                daemon = Daemon(home, f"run{k}")
                at = self._kill_when(daemon, home, phase, on_server)
                left = daemon.kill9()
                raw_n, index_n, rows = progress(home)
                result.note(f"kill {k + 1} ({phase}) at {at:.2f} s: raw.db {raw_n}/{on_server}, index.db {index_n}, "
                            f"vector rows {rows}" + (f"; {len(left)} child processes outlived it" if left else ""))
                self.server.fill(user, shares[k])  # more mail while it is down
                on_server += len(shares[k])
            proxy.rate = None
            daemon = Daemon(home, "final")
            done = wait_complete(home, len(msgs), self.vectors, self.size(120, 600), daemon)
            if not done:
                result.note(f"not complete after the last start: {progress(home)}")
            wrong = self._socket_searches(daemon, msgs, result, self.size(25, 100))
            result.wrong += wrong
            rc = daemon.stop()
            if rc != 0:
                result.note(f"SIGTERM: daemon exited {rc}")
                result.wrong += 1
            truth_on_server(self.server, user, msgs)
            result.add(self.inspect(home, msgs, folders=True))
            self._log_tracebacks(home, result)
        finally:
            proxy.close()

    def _kill_when(self, daemon: Daemon, home: Path, phase: str, on_server: int) -> float:
        """Wait for a random moment of `phase`; seconds since the daemon started."""
        rng = self.rng
        base_raw, base_index, base_rows = progress(home)
        deadline = 60.0
        if phase == "sync":
            target = base_raw + max(1, int((on_server - base_raw) * rng.uniform(0.1, 0.9)))
            wait_for(lambda: progress(home)[0] >= target or not daemon.alive(), deadline)
        elif phase == "keyword index":
            target = base_index + max(1, int((on_server - base_index) * rng.uniform(0.2, 0.95)))
            wait_for(lambda: progress(home)[1] >= target or not daemon.alive(), deadline)
        elif phase == "vectors":
            wait_for(lambda: progress(home)[1] >= on_server or not daemon.alive(), deadline)
            target = base_rows + rng.randint(1, 40)
            wait_for(lambda: progress(home)[2] >= target or not daemon.alive(), rng.uniform(0.5, 3.0))
        else:
            time.sleep(rng.uniform(0.2, 4.0))
        return time.monotonic() - daemon.started

    def _socket_searches(self, daemon: Daemon, msgs: list[Msg], result: Result, sample: int) -> int:
        """Searches through the daemon's socket for a sample of the words: the right message first,
        unless degraded. Returns how many were wrong."""
        if not wait_for(lambda: daemon.sock.exists() or not daemon.alive(), 30, step=0.1) or not daemon.alive():
            result.note(f"the daemon's search socket never appeared: {daemon.why()}")
            return 1
        wrong = 0
        examples = []
        for m in self.rng.sample(msgs, min(sample, len(msgs))):
            answer = ask(daemon.sock, json_line({"query": m.token, "params": {"limit": 5}}))
            hits = answer.get("hits") if isinstance(answer, dict) else None
            if hits is None:
                wrong += 1
                examples.append(f"{m.token}: {str(answer)[:80]}")
            elif not (hits and hits[0]["message_id"] == m.message_id) and not answer.get("degraded"):
                wrong += 1
                examples.append(f"{m.token}: got {[h['message_id'] for h in hits[:2]]}")
        if wrong:
            result.note(f"daemon socket: {wrong} searches wrong, e.g. {examples[:2]}")
        return wrong

    def _log_tracebacks(self, home: Path, result: Result) -> None:
        logs = sorted(home.parent.glob(f"{home.name}-*.log"))
        tracebacks = sum(p.read_text(errors="replace").count("Traceback") for p in logs)
        errors = collections.Counter()
        for p in logs:
            for line in p.read_text(errors="replace").splitlines():
                if "[error" in line:
                    errors[re.sub(r"^\S+ \[error\s*\] ", "", line)[:90]] += 1
        if tracebacks:
            result.note(f"daemon logs hold {tracebacks} tracebacks")
        for text, n in errors.most_common(3):
            result.note(f"daemon log error x{n}: {text}")

    # -- Dovecot stopped mid-sync -----------------------------------------------------------------

    def dovecot_stop(self, result: Result) -> None:
        """Dovecot stopped twice in the middle of a sync (a running daemon's, then an `oaken sync
        --once`), started again after a random pause; the sync then completes."""
        from tests.tcp_proxy import TcpProxy

        n = self.size(100, 300)
        user = self.server.new_user()
        msgs = make_messages(self.pool, self.words, self.rng, n, FOLDERS)
        first, second = msgs[: n * 2 // 3], msgs[n * 2 // 3:]
        self.server.fill(user, first)
        proxy = TcpProxy(self.server.dovecot.ssl_port)
        proxy.rate = sum(len(m.raw) for m in first) / self.size(3.0, 6.0)
        home = self.home("dovecot-stop")
        write_config(home, model=self.model, user=user, server=self.server, port=proxy.port, batch_size=8)
        try:
            # 1: under a running daemon
            daemon = Daemon(home, "daemon")
            target = int(len(first) * self.rng.uniform(0.2, 0.8))
            wait_for(lambda: progress(home)[0] >= target or not daemon.alive(), 60)
            raw_n = progress(home)[0]
            self.server.dovecot.stop()
            pause = self.rng.uniform(0.5, 3.0)
            time.sleep(pause)
            self.server.dovecot.start()
            result.note(f"stop 1 (daemon) at raw.db {raw_n}/{len(first)}, down {pause:.1f} s")
            proxy.rate = None
            if not wait_complete(home, len(first), self.vectors, self.size(90, 300), daemon):
                result.note(f"daemon did not complete after the restart: {progress(home)}")
            rc = daemon.stop()
            if rc != 0:
                result.note(f"SIGTERM: daemon exited {rc}")
                result.wrong += 1
            # 2: under `oaken sync --once`
            self.server.fill(user, second)
            proxy.rate = sum(len(m.raw) for m in second) / self.size(2.0, 4.0)
            before = progress(home)[0]
            holder: dict[str, Run] = {}
            t = threading.Thread(target=lambda: holder.setdefault("run", run(home, "sync", "--once", timeout=300)))
            t.start()
            target = before + max(1, int(len(second) * self.rng.uniform(0.2, 0.8)))
            wait_for(lambda: progress(home)[0] >= target or not t.is_alive(), 60)
            raw_n = progress(home)[0]
            self.server.dovecot.stop()
            pause = self.rng.uniform(0.5, 4.0)
            time.sleep(pause)
            self.server.dovecot.start()
            t.join()
            r = holder["run"]
            result.note(f"stop 2 (sync --once) at raw.db {raw_n}/{len(msgs)}, down {pause:.1f} s: "
                        f"exit {r.rc}" + (f" ({one_line(r.err, 100)})" if r.rc else ""))
            bad = oaken_error_is_clear(r)
            if bad:
                result.note(f"sync --once: {bad}")
                result.wrong += 1
            proxy.rate = None
            again = run(home, "sync", "--once", timeout=300)  # indexes too
            if again.rc != 0:
                result.note(f"sync --once after the restart: exit {again.rc}: {one_line(again.err)}")
            truth_on_server(self.server, user, msgs)
            result.add(self.inspect(home, msgs, folders=True))
            self._log_tracebacks(home, result)
        finally:
            proxy.close()
            if self.server.dovecot.pid is None:
                self.server.dovecot.start()

    # -- malformed payloads on the daemon's search socket ----------------------------------------

    def socket(self, result: Result) -> None:
        """At least 25 kinds of malformed requests on a running daemon's search socket: each gets an
        error naming the problem, without Python exception text; the daemon stays up and a normal
        search still answers right, after each of them."""
        user = self.server.new_user()
        msgs = make_messages(self.pool, self.words, self.rng, self.size(30, 80), FOLDERS)
        self.server.fill(user, msgs)
        home = self.home("socket")
        write_config(home, model=self.model, user=user, server=self.server)
        daemon = Daemon(home, "daemon")
        try:
            if not wait_complete(home, len(msgs), self.vectors, 120, daemon):
                result.note(f"daemon did not complete: {progress(home)}")
            if not wait_for(lambda: daemon.sock.exists(), 30, step=0.1):
                raise RuntimeError(f"no search socket: {daemon.why()}")
            probe = self.rng.choice(msgs)
            slow = _SlowClient(daemon.sock)  # half a request, then silence: dropped after CLIENT_SECONDS
            failures: list[str] = []
            kinds = 0
            for name, payload, expect in malformed_payloads(probe.token, self.rng):
                kinds += 1
                problem = check_reply(daemon.sock, payload, expect)
                if problem:
                    failures.append(f"{name}: {problem}")
                if not daemon.alive():
                    failures.append(f"{name}: the daemon died (exit {daemon.proc.returncode})")
                    break
                answer = ask(daemon.sock, json_line({"query": probe.token, "params": {"limit": 3}}))
                hits = answer.get("hits") if isinstance(answer, dict) else None
                if not hits or hits[0]["message_id"] != probe.message_id:
                    if not (isinstance(answer, dict) and answer.get("degraded")):
                        failures.append(f"after {name}: a normal search answered {str(answer)[:80]}")
            kinds += 1
            late = slow.finish()
            if late:
                failures.append(f"half a request, then silence: {late}")
            kinds += 1
            many = many_clients(daemon.sock, 100, self.rng)
            if many:
                failures.append(f"100 clients at once: {many}")
            result.note(f"{kinds} kinds of payload sent")
            for f in failures:
                result.note(f)
            result.wrong += len(failures)
            if not daemon.alive():
                raise RuntimeError("the daemon is not running after the payloads")
            result.wrong += self._socket_searches(daemon, msgs, result, len(msgs))
            rc = daemon.stop()
            if rc != 0:
                result.note(f"SIGTERM: daemon exited {rc}")
                result.wrong += 1
            result.add(self.inspect(home, msgs, folders=True))
            self._log_tracebacks(home, result)
        finally:
            if daemon.alive():
                daemon.stop()

    # -- a full disk during import and during reindex ----------------------------------------------

    def disk_full(self, result: Result) -> None:
        """OAKEN_HOME on a small tmpfs filled up: `oaken import` with a few MB left, then `oaken
        reindex` (keyword pass, then vector pass) with the disk filled (to the last byte). Each
        must fail saying the disk is full; once space is freed the same commands finish the job."""
        if os.geteuid() != 0:
            result.skipped = "mounting a tmpfs needs root"
            return
        mount = self.work / "small-disk"
        mount.mkdir(exist_ok=True)
        size_mb = self.size(24, 48)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mount)], check=True)
        try:
            self._disk_full_on(mount, result)
        finally:
            subprocess.run(["umount", "-l", str(mount)], check=False)

    def _disk_full_on(self, mount: Path, result: Result) -> None:
        home = mount / "home"
        write_config(home, model=self.model)
        src1, src2 = self.work / "disk-full-mail-1", self.work / "disk-full-mail-2"
        msgs1 = make_messages(self.pool, self.words, self.rng, self.size(700, 1500))
        msgs2 = make_messages(self.pool, self.words, self.rng, self.size(150, 400))
        write_eml(src1, msgs1)
        write_eml(src2, msgs2)
        filler = mount / "filler"

        # 1: import with a few MB left (less than the mail needs)
        left = self.rng.randint(1500, 6000) * 1024
        fill_disk(filler, leave=left)
        r = run(home, "import", str(src1))
        result.note(f"import with {left // 1024} KB free: exit {r.rc}: {one_line(r.err, 110)}")
        self._said_full(r, "import", result)
        result.add(self.inspect(home, msgs1, final=False, searchable=()), "import on a full disk")
        filler.unlink()
        r = run(home, "import", str(src1))
        self._must_succeed(r, "import after freeing space", result)
        r = run(home, "reindex")
        self._must_succeed(r, "reindex after the import", result)
        if not self.quick:
            result.add(self.inspect(home, msgs1), "after the import")

        # 2: the keyword pass of reindex on a disk filled to the last byte
        r = run(home, "import", "--no-index", str(src2))
        self._must_succeed(r, "import --no-index", result)
        fill_disk(filler, leave=0)
        free = shutil.disk_usage(mount).free
        r = run(home, "reindex")
        result.note(f"reindex with {free} bytes free: exit {r.rc}: {one_line(r.err, 110)}")
        self._said_full(r, "reindex (keyword pass)", result)
        tokens1 = [m.token for m in msgs1]
        result.add(self.inspect(home, msgs1 + msgs2, final=False, searchable=tokens1), "reindex on a full disk")
        if not self.quick:
            r = run(home, "reindex", "--rebuild", "--keyword-only")
            result.note(f"reindex --rebuild with {free} bytes free: exit {r.rc}: {one_line(r.err, 90)}")
            self._said_full(r, "reindex --rebuild", result)
            result.add(self.inspect(home, msgs1 + msgs2, final=False, searchable=tokens1), "rebuild on a full disk")

        # 3: the vector pass on a full disk (the keyword pass done with room)
        filler.unlink()
        r = run(home, "reindex", "--keyword-only")
        self._must_succeed(r, "reindex --keyword-only after freeing space", result)
        if self.vectors:
            left = self.rng.randint(64, 512) * 1024  # room for index.db's reader, not for the vectors
            fill_disk(filler, leave=left)
            r = run(home, "reindex")
            result.note(f"vector pass with {left // 1024} KB free: exit {r.rc}: {one_line(r.out + r.err, 110)}")
            self._said_full(r, "reindex (vector pass)", result)
            result.add(self.inspect(home, msgs1 + msgs2, final=False), "vector pass on a full disk")
            filler.unlink()
        r = run(home, "reindex")
        self._must_succeed(r, "reindex after freeing space", result)
        result.add(self.inspect(home, msgs1 + msgs2), "the end")

    def _said_full(self, r: Run, what: str, result: Result) -> None:
        text = r.out + r.err
        if r.rc == 0 and not DISK_FULL.search(text):
            result.note(f"{what}: exit 0 on a full disk without saying so")
            result.wrong += 1
        elif not DISK_FULL.search(text):
            result.note(f"{what}: the error does not say the disk is full: {one_line(r.err)}")
            result.wrong += 1
        if "Traceback" in r.err:
            result.note(f"{what}: a traceback instead of a line: {one_line(r.err)}")
            result.wrong += 1

    def _must_succeed(self, r: Run, what: str, result: Result) -> None:
        if r.rc != 0:
            result.note(f"{what}: exit {r.rc}: {one_line(r.err)}")
            result.wrong += 1
        elif "vectors: not updated" in r.out:
            result.note(f"{what}: {one_line(r.out)}")

    # -- a corrupted index.db --------------------------------------------------------------------

    def corrupt_index(self, result: Result) -> None:
        """Garbage written at seeded offsets of a whole index.db (its header, a page in the middle,
        scattered bytes, its tail; also under a running daemon that had opened it): every search
        answers right or says degraded and `oaken status` names the damage; then `oaken reindex`
        on a corrupted index.db must rebuild it, after which everything is found again."""
        user = self.server.new_user()
        msgs = make_messages(self.pool, self.words, self.rng, self.size(40, 150), FOLDERS)
        self.server.fill(user, msgs)
        home = self.home("corrupt")
        write_config(home, model=self.model, user=user, server=self.server)
        r = run(home, "sync", "--once")  # indexes too: keyword and vectors
        self._must_succeed(r, "sync", result)
        if not self.quick:
            result.add(self.inspect(home, msgs), "before")
        live = Path(os.path.realpath(home / "index.db"))
        pristine = self.work / "index-pristine.db"
        shutil.copyfile(live, pristine)
        offline = ["header", "middle page", "scattered", "tail"]
        if self.quick:
            kinds = ["header", self.rng.choice(offline[1:]), "under a running daemon"]
        else:
            kinds = offline + ["under a running daemon"]
            kinds += [self.rng.choice(offline) for _ in range(max(0, self.args.rounds - len(kinds)))]
        sample = self.size(15, 60)
        for k, kind in enumerate(kinds):
            live = Path(os.path.realpath(home / "index.db"))  # a daemon may have rebuilt it
            shutil.copyfile(pristine, live)
            # the sound bytes back: the -wal/-shm and the damage a check noted belong to the old ones
            for suffix in ("-wal", "-shm", ".damaged"):
                Path(str(live) + suffix).unlink(missing_ok=True)
            daemon = Daemon(home, f"corrupt{k}") if kind == "under a running daemon" else None
            try:
                if daemon is not None:  # let it open and check index.db, and answer once, first
                    sock = daemon.sock
                    wait_for(sock.exists, 30, step=0.1)
                    ask(daemon.sock, json_line({"query": msgs[0].token}))
                live = Path(os.path.realpath(home / "index.db"))  # the daemon's first pass may have rebuilt it
                where = corrupt(live, kind if daemon is None else self.rng.choice(offline[1:3]), self.rng)
                s = run(home, "status", "--json")
                state = json.loads(s.out).get("index", {}).get("state") if s.rc == 0 else f"exit {s.rc}"
                result.note(f"{kind}: garbage at {where}; status says index {state}")
                if s.rc != 0 or "Traceback" in s.err:
                    result.note(f"{kind}: oaken status failed: {one_line(s.err)}")
                    result.wrong += 1
                tokens = [m.token for m in self.rng.sample(msgs, min(sample, len(msgs)))]
                if daemon is not None:
                    result.wrong += self._socket_searches(daemon, [m for m in msgs if m.token in tokens], result,
                                                          len(tokens))
                else:
                    result.add(self.inspect(home, msgs, final=False, searchable=tokens), kind)
                    if not self.quick:
                        c = run(home, "search", "--json", "--no-daemon", tokens[0])
                        if c.rc != 0 or "Traceback" in c.err:
                            result.note(f"{kind}: oaken search: exit {c.rc}: {one_line(c.err)}")
                            result.wrong += 1
            finally:
                if daemon is not None:
                    rc = daemon.stop()
                    if rc != 0:
                        result.note(f"{kind}: SIGTERM: daemon exited {rc}")
        # repair: reindex on a corrupted index.db must build it again
        live = Path(os.path.realpath(home / "index.db"))
        where = corrupt(live, "middle page", self.rng)
        r = run(home, "reindex")
        self._must_succeed(r, "reindex of the corrupted index", result)
        said = re.search(r"index\.db was built again[^\n]*", r.out)
        result.note(f"reindex after garbage at {where}: " + (said.group(0)[:90] if said else "did not rebuild"))
        result.add(self.inspect(home, msgs, folders=True), "after reindex")
        self._log_tracebacks(home, result)

    # -- hostile mail -----------------------------------------------------------------------------

    def hostile_sync(self, result: Result) -> None:
        """Hostile mail among real mail on the server; `oaken sync --once` and `oaken reindex` store
        and index all of it, hostile and not."""
        user = self.server.new_user()
        normal = make_messages(self.pool, self.words, self.rng, self.size(30, 100), FOLDERS)
        hostile = hostile_mail(self.words, self.rng, self.pool)
        msgs = normal[: len(normal) // 2] + hostile + normal[len(normal) // 2:]
        self.server.fill(user, msgs)
        home = self.home("hostile-sync")
        write_config(home, model=self.model, user=user, server=self.server)
        r = run(home, "sync", "--once", "--no-index", timeout=900)
        result.note(f"sync: exit {r.rc} in {r.seconds:.1f} s, peak {r.peak_mb:.0f} MB"
                    + (f": {one_line(r.err, 100)}" if r.rc else ""))
        if r.rc != 0:
            result.wrong += 1
        self._index_hostile(home, msgs, result, folders=True)

    def hostile_import(self, result: Result) -> None:
        """The same hostile mail as .eml files among real ones, through `oaken import`."""
        normal = make_messages(self.pool, self.words, self.rng, self.size(30, 100))
        hostile = hostile_mail(self.words, self.rng, self.pool)
        msgs = normal[: len(normal) // 2] + hostile + normal[len(normal) // 2:]
        src = self.work / "hostile-mail"
        write_eml(src, msgs)
        home = self.home("hostile-import")
        write_config(home, model=self.model)
        r = run(home, "import", "--no-index", str(src), timeout=900)
        result.note(f"import: exit {r.rc} in {r.seconds:.1f} s, peak {r.peak_mb:.0f} MB"
                    + (f": {one_line(r.err, 100)}" if r.rc else ""))
        if r.rc != 0:
            result.wrong += 1
        self._index_hostile(home, msgs, result, folders=False)

    def _index_hostile(self, home: Path, msgs: list[Msg], result: Result, folders: bool) -> None:
        r = run(home, "reindex", timeout=1800)
        result.note(f"reindex: exit {r.rc} in {r.seconds:.1f} s, peak {r.peak_mb:.0f} MB"
                    + (f": {one_line(r.err, 100)}" if r.rc else ""))
        if r.rc != 0:
            result.wrong += 1
        result.add(self.inspect(home, msgs, folders=folders))


SCENARIOS: dict[str, Callable[[Suite, Result], None]] = {
    "kill9": Suite.kill9,
    "dovecot-stop": Suite.dovecot_stop,
    "socket": Suite.socket,
    "disk-full": Suite.disk_full,
    "corrupt-index": Suite.corrupt_index,
    "hostile-sync": Suite.hostile_sync,
    "hostile-import": Suite.hostile_import,
}


# ---- helpers of the scenarios -------------------------------------------------------------------

def write_eml(folder: Path, msgs: list[Msg]) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for i, m in enumerate(msgs):
        (folder / f"{i:05d}.eml").write_bytes(m.raw)


def fill_disk(path: Path, leave: int = 0) -> None:
    """Fill the file system holding `path` with one file, to the last byte, then give back `leave` bytes."""
    size = 1 << 20
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while size >= 1:
            try:
                os.write(fd, b"\0" * size)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                size //= 2
    finally:
        os.close(fd)
    if leave:
        os.truncate(path, max(0, path.stat().st_size - leave))


def corrupt(path: Path, kind: str, rng: random.Random) -> str:
    """Write random bytes into the file at offsets chosen by kind; says where."""
    size = path.stat().st_size
    with open(path, "r+b") as f:
        if kind == "header":
            spots = [(rng.randint(0, 60), rng.randint(8, 40))]
        elif kind == "middle page":
            page = 4096
            at = rng.randint(1, max(1, size // page - 2)) * page
            spots = [(at, page)]
        elif kind == "scattered":
            spots = [(rng.randint(100, size - 300), rng.randint(16, 256)) for _ in range(12)]
        else:  # tail
            spots = [(max(0, size - 4096), 4096)]
        for at, n in spots:
            f.seek(at)
            f.write(bytes(rng.getrandbits(8) for _ in range(n)))
    return ", ".join(f"{at}+{n}" for at, n in spots[:4]) + (" ..." if len(spots) > 4 else "") + f" of {size} bytes"


def json_line(obj: Any) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def ask(path: Path, payload: bytes, *, shut: bool = False, timeout: float = 60) -> Any:
    """Send one payload to the socket; the decoded JSON answer, or a string saying what came back."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(path))
            s.sendall(payload)
            if shut:
                s.shutdown(socket.SHUT_WR)
            data = s.makefile("rb").readline()
        except OSError as e:
            return f"<{type(e).__name__}: {e}>"
    if not data:
        return "<connection closed without an answer>"
    try:
        return json.loads(data)
    except ValueError:
        return f"<not JSON: {data[:80]!r}>"


def malformed_payloads(token: str, rng: random.Random) -> Iterator[tuple[str, tuple[bytes, bool], str | None]]:
    """(kind, (bytes, shut the write side after sending), what the error must name). None: not
    malformed but odd; any answer but a Python error is right."""
    def req(params: dict[str, Any]) -> tuple[bytes, bool]:
        return json_line({"query": token, "params": params}), False

    def raw(data: bytes, shut: bool = False) -> tuple[bytes, bool]:
        return data, shut

    garbage = bytes(b for b in rng.randbytes(4096) if b != 0x0A)
    yield "not JSON", raw(b"find my invoice please\n"), "request"
    yield "an empty line", raw(b"\n"), "request"
    yield "bytes that are not UTF-8", raw(b'{"query": "\xff\xfe\xfd"}\n'), "request"
    yield "binary garbage with NUL bytes", raw(garbage + b"\n"), "request"
    yield "truncated JSON, then EOF", raw(b'{"query": "inv', shut=True), "request"
    yield "truncated JSON with a newline", raw(b'{"query": "invoice", "params": {"limit": 5\n'), "request"
    yield "nested 100,000 deep", raw(b"[" * 100_000 + b"\n"), "request"
    yield "nested 50,000 deep in a param", raw(b'{"query": "x", "params": {"limit": ' + b"[" * 50_000
                                               + b"]" * 50_000 + b"}}\n"), "request"
    yield "a line over 1 MB", raw(b'{"query": "' + b"a" * (1 << 20) + b'"}\n'), "request"
    yield "1 MB without a newline, then EOF", raw(b"x" * ((1 << 20) + 10), shut=True), "request"
    yield "a JSON array", raw(b'["query", "x"]\n'), "request"
    yield "a JSON string", raw(b'"invoice"\n'), "request"
    yield "JSON null", raw(b"null\n"), "request"
    yield "query a number", raw(b'{"query": 42}\n'), "query"
    yield "query a list", raw(b'{"query": ["a", "b"]}\n'), "query"
    yield "no query", raw(b'{"params": {"limit": 3}}\n'), "query"
    yield "duplicate key, the last not text", raw(b'{"query": "x", "query": {"a": 1}}\n'), "query"
    yield "an unknown field", raw(b'{"query": "x", "limit": 5}\n'), "limit"
    yield "protocol 99", raw(b'{"protocol": 99, "query": "x"}\n'), "protocol"
    yield "protocol a string", raw(b'{"protocol": "1; DROP", "query": "x"}\n'), "protocol"
    yield "id an object", raw(b'{"id": {"a": 1}, "query": "x"}\n'), "id"
    yield "id of 100 KB", raw(json_line({"id": "i" * 100_000, "query": "x"})), "id"
    yield "params a list", raw(b'{"query": "x", "params": [1, 2]}\n'), "params"
    yield "an unknown param", req({"drop_table": True}), "drop_table"
    yield "limit negative", req({"limit": -1}), "params.limit"
    yield "limit 10^40", req({"limit": 10 ** 40}), "params.limit"
    yield "limit a string", req({"limit": "10"}), "params.limit"
    yield "limit 2.5", req({"limit": 2.5}), "params.limit"
    yield "limit true", req({"limit": True}), "params.limit"
    yield "limit 1e400 (infinity)", raw(b'{"query": "x", "params": {"limit": 1e400}}\n'), "params.limit"
    yield "offset negative", req({"offset": -7}), "params.offset"
    yield "offset 2^63", req({"offset": 2 ** 63}), "params.offset"
    yield "offset NaN", raw(b'{"query": "x", "params": {"offset": NaN}}\n'), "params.offset"
    yield "thread a string", req({"thread": "abc"}), "params.thread"
    yield "thread negative", req({"thread": -1}), "params.thread"
    yield "after 2024-13-45", req({"after": "2024-13-45"}), "params.after"
    yield "before an object", req({"before": {"$gt": 1}}), "params.before"
    yield "labels not text", req({"labels": [1, None]}), "params.labels"
    yield "sender nested lists", req({"sender": [[["a"]]]}), "params.sender"
    yield "sort unknown", req({"sort": "random"}), "params.sort"
    yield "explain a string", req({"explain": "yes"}), "params.explain"
    yield "unread a number", req({"unread": 1}), "params.unread"
    yield "min_priority 99", req({"min_priority": 99}), "params.min_priority"
    yield "categories unknown", req({"categories": ["nope"]}), "params.categories"
    yield "disposition unknown", req({"disposition": "trash"}), "params.disposition"
    yield "account empty", req({"account": ""}), "params.account"
    # odd but well-formed: any answer will do, an internal error or a Python error will not
    yield "an unknown account", req({"account": "nosuch"}), None
    yield "FTS5 syntax as the query", raw(json_line({"query": '" NEAR( * ^ : -- OR AND NOT {col}: ) "'})), None
    yield "a NUL in the query", raw(json_line({"query": f"{token}\u0000x"})), None
    yield "a lone surrogate in the query", raw(b'{"query": "\\ud800 ' + token.encode() + b'"}\n'), None
    yield "a 500 KB query", raw(json_line({"query": " ".join(f"w{i}" for i in range(80_000))})), None
    yield "limit and offset at their maximum", req({"limit": 2 ** 31 - 1, "offset": 2 ** 31 - 1}), None


def check_reply(path: Path, payload: tuple[bytes, bool], expect: str | None) -> str | None:
    """None when the reply is right: a refusal (not an internal error) naming `expect`, without
    Python's words; for an odd but well-formed request (expect None) also an answer."""
    data, shut = payload
    started = time.monotonic()
    answer = ask(path, data, shut=shut)
    took = time.monotonic() - started
    if took > 20:
        return f"answered after {took:.0f} s"
    if not isinstance(answer, dict):
        return f"no JSON answer: {answer}"
    text = json.dumps(answer, ensure_ascii=False)
    if "error" in answer:
        error = str(answer.get("error"))
        if PYTHON_ERROR.search(error):
            return f"Python's words in the error: {error[:100]}"
        if answer.get("code") == "internal_error" or not answer.get("code"):
            return f"code {answer.get('code')!r}: {error[:100]}"
        if expect is not None and expect not in error:
            return f"the error does not name {expect!r}: {error[:100]}"
        return None
    if expect is not None:
        return f"answered instead of refusing: {text[:100]}"
    if PYTHON_ERROR.search(" ".join(answer.get("warnings", []))):
        return f"Python's words in a warning: {answer.get('warnings')}"
    return None


class _SlowClient:
    """Sends half a request and nothing more; the server should refuse it after its client timeout."""

    def __init__(self, path: Path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(str(path))
        self.sock.sendall(b'{"query": "half a req')
        self.started = time.monotonic()

    def finish(self) -> str | None:
        try:
            data = self.sock.makefile("rb").readline()
        except OSError as e:
            return f"{type(e).__name__}: {e}"
        finally:
            self.sock.close()
        took = time.monotonic() - self.started
        if not data:
            return f"closed after {took:.1f} s without saying why"
        try:
            answer = json.loads(data)
        except ValueError:
            return f"not JSON: {data[:60]!r}"
        if answer.get("code") != "bad_request" or "request" not in str(answer.get("error")):
            return f"answered {str(answer)[:80]}"
        return None


def many_clients(path: Path, n: int, rng: random.Random) -> str | None:
    """n clients at once, each sending garbage: each gets a refusal (or is dropped with one)."""
    problems: list[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        payload = rng.choice([b"garbage\n", b'{"query": 1}\n', b"[[[[\n"])
        answer = ask(path, payload, timeout=60)
        if not (isinstance(answer, dict) and answer.get("code") == "bad_request"):
            with lock:
                problems.append(str(answer)[:60])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if problems:
        return f"{len(problems)} of {n} not refused properly, e.g. {collections.Counter(problems).most_common(2)}"
    return None


# ---- main ---------------------------------------------------------------------------------------

def cpu_seconds() -> float:
    """CPU time of this process and of the children it has waited for (oaken's processes)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def print_table(results: list[Result], out: Any = sys.stdout) -> None:
    rows = [("scenario", "lost", "duplicated", "wrong", "notes")]
    for r in results:
        if r.skipped:
            rows.append((r.scenario, "-", "-", "-", f"skipped: {r.skipped}"))
            continue
        notes = list(r.notes)
        if r.error:
            notes.insert(0, f"ERROR: {r.error}")
        rows.append((r.scenario, str(r.lost), str(r.duplicated), str(r.wrong), notes[0] if notes else ""))
        rows.extend(("", "", "", "", n) for n in notes[1:])
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [row[j].rjust(widths[j]) for j in (1, 2, 3)] + [row[4]]
        print("  ".join(cells), file=out)
        if i == 0:
            print("  ".join("-" * w for w in widths) + "  " + "-" * 5, file=out)
    total = [sum(getattr(r, k) for r in results) for k in ("lost", "duplicated", "wrong")]
    print(f"TOTAL lost {total[0]}, duplicated {total[1]}, wrong {total[2]}; "
          f"{sum(1 for r in results if r.error)} scenarios failed to run", file=out)


def main(argv: list[str]) -> int:
    if argv[:1] == ["_inspect"]:
        return _inspect_main(argv[1], argv[2])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=None, help="random seed (default: a new one, printed)")
    p.add_argument("--rounds", type=int, default=None, help="kills of the daemon, corruptions of index.db "
                                                            "(default 5, --quick 3)")
    p.add_argument("--work", help="folder for the run's data (default: a new one under /tmp, removed "
                                  "unless something failed or --keep)")
    p.add_argument("--quick", action="store_true", help="every scenario once, small (about two minutes)")
    p.add_argument("--only", action="append", choices=list(SCENARIOS), help="run this scenario (repeatable)")
    p.add_argument("--model", default="concept", choices=["concept", "all-MiniLM-L6-v2", "none"],
                   help="the embedder (default: concept, the project's deterministic stand-in)")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("-v", "--verbose", action="store_true", help="say each step on stderr")
    args = p.parse_args(argv)
    global VERBOSE
    VERBOSE = args.verbose
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 16)
    if args.rounds is None:
        args.rounds = 3 if args.quick else 5
    given_work = args.work is not None
    args.work = args.work or tempfile.mkdtemp(prefix="oaken-faults-")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    print(f"fault suite: seed {args.seed}, rounds {args.rounds}, {'quick' if args.quick else 'full'}, "
          f"model {args.model}, work {args.work}", flush=True)
    suite = Suite(args)
    results: list[Result] = []
    started = time.monotonic()
    try:
        for name in args.only or list(SCENARIOS):
            suite.begin(name)
            result = Result(name)
            t0 = time.monotonic()
            cpu0 = cpu_seconds()
            try:
                SCENARIOS[name](suite, result)
            except Exception as e:  # noqa: BLE001 - one scenario's failure must not hide the others'
                result.error = f"{type(e).__name__}: {str(e)[:200]}"
                traceback.print_exc()
            result.note(f"{time.monotonic() - t0:.0f} s, {cpu_seconds() - cpu0:.0f} CPU s")
            results.append(result)
            print(f"  {name}: lost {result.lost}, duplicated {result.duplicated}, wrong {result.wrong}"
                  + (f", ERROR {result.error}" if result.error else "")
                  + (f", skipped: {result.skipped}" if result.skipped else ""), flush=True)
    finally:
        suite.close()
    print()
    print_table(results)
    print(f"seed {args.seed}; {time.monotonic() - started:.0f} s")
    failed = any(r.failed for r in results)
    if not failed and not args.keep and not given_work:
        shutil.rmtree(args.work, ignore_errors=True)
    elif failed:
        print(f"data kept in {args.work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
