#!/usr/bin/env python3
"""A large mailbox for benchmarks, recombined from real mail: 10k, 100k or 1M messages as a Maildir.

Why recombined: embedding or indexing a million real messages needs a million real messages, and
the corpora here hold about 6,400. Replicating them whole would give an index of a thousand copies
of each message (every posting list 150x longer than in a real mailbox, every body a duplicate);
random words would give an index of nothing a user types. So each message is built from real
parts: a sender, recipients and a subject line from the real headers (drawn with their real
frequency), a body made of real paragraphs, and at realistic rates a reply in a thread (Re:,
In-Reply-To and References, the parent's text quoted, the parent's sender answered), an HTML
alternative, a base64 transfer encoding, an attachment (real text as .txt/.csv, or opaque bytes as
an image or a PDF-like binary), a sent message, an archived one, an unread one.

Reproducible: the same --seed and --count give the same bytes in every file, whatever --workers
is (every random choice is drawn up front by numpy from the seed; workers only format and write).
Dates run evenly over 20 years (2006-2026), oldest first, so threads stay in order.

    .venv/bin/python scripts/gen_mailbox.py --count 100000 --out /work/scale/m100k [--seed 1] [--workers 2]

Reads ../shared/corpora (not part of a clone). Prints counts, bytes and seconds.
"""

from __future__ import annotations

import argparse
import base64
import email.parser
import email.utils
import html
import json
import multiprocessing
import os
import re
import sys
import time
from dataclasses import dataclass
from email.policy import compat32
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"
SOURCES = ("enron-lay-skilling", "notmuch-lkml", "notmuch-default")
START = 1136073600  # 2006-01-01 UTC
SPAN = 20 * 365 * 86400
OWNER = ("Kim Oaken", "kim@oaken.example")

# Rates, per message (chosen from what mail clients' own test mailboxes and the corpora show; no
# figure here is measured from a real 1M mailbox, none being available).
REPLY = 0.40  # part of a thread, answering an earlier message
QUOTE = 0.6  # a reply quotes its parent
HTML = 0.25  # multipart/alternative with an HTML rendering
BASE64 = 0.10  # text sent base64 (otherwise 8bit UTF-8)
ATTACH = 0.06  # one attachment
ATTACH_BINARY = 0.5  # of attachments: opaque bytes rather than text
SENT = 0.15
ARCHIVE = 0.15
UNREAD = 0.01  # plus half of the newest 0.5 %
FLAGGED = 0.01
WHOLE_BODY = 0.3  # a real body kept whole; otherwise 1-4 real paragraphs from anywhere
MAX_PARAGRAPH = 2000


@dataclass
class Pool:
    """Parts of real mail, each list drawn from with its real frequency (repeats kept)."""

    people: list[str]  # formatted "Name <addr>"
    subjects: list[str]
    bodies: list[str]
    paragraphs: list[str]


_RE_PREFIX = re.compile(r"^\s*((re|fw|fwd|aw)\s*(\[\d+\])?\s*:\s*)+", re.I)


def _text_of(msg) -> str:
    for part in msg.walk():
        if part.get_content_type() == "text/plain" and not part.get_filename():
            raw = part.get_payload(decode=True) or b""
            charset = part.get_content_charset() or "utf-8"
            try:
                return raw.decode(charset, errors="replace")
            except LookupError:
                return raw.decode("utf-8", errors="replace")
    return ""


def _header(msg, name: str) -> str:
    value = msg.get(name)
    if value is None:
        return ""
    try:
        return str(email.header.make_header(email.header.decode_header(str(value))))
    except Exception:  # noqa: BLE001 - a broken header in the source is skipped, not fatal
        return str(value)


def load_pool(corpora: Path) -> Pool:
    import email.header  # noqa: F401 - used by _header

    parser = email.parser.BytesParser(policy=compat32)
    people: list[str] = []
    subjects: list[str] = []
    bodies: list[str] = []
    paragraphs: list[str] = []
    for source in SOURCES:
        base = corpora / source
        if not base.is_dir():
            raise SystemExit(f"{base}: not found; this script needs ../shared/corpora (not part of a clone)")
        for path in sorted(base.rglob("*")):
            if not path.is_file() or path.name.upper().startswith("README"):
                continue
            msg = parser.parsebytes(path.read_bytes())
            for name in ("From", "To"):
                for display, addr in email.utils.getaddresses([_header(msg, name)]):
                    if "@" in addr and len(addr) < 80:
                        people.append(email.utils.formataddr((display.strip(' "'), addr.lower())))
            subject = _RE_PREFIX.sub("", _header(msg, "Subject")).strip()
            if subject:
                subjects.append(subject.replace("\n", " ")[:200])
            body = _text_of(msg).replace("\r\n", "\n").strip()
            if len(body) > 20 and "<html" not in body[:2000].lower():
                bodies.append(body[:20000])
                for para in re.split(r"\n\s*\n", body):
                    para = para.strip()
                    if 40 <= len(para) and not para.startswith((">", "<")):
                        paragraphs.append(para[:MAX_PARAGRAPH])
    # Senders keep their real frequency (a few correspondents write most mail); subjects, bodies and
    # paragraphs are drawn once each, so Enron's 1,124 copies of one petition do not make a sixth
    # of a million messages one letter.
    unique = lambda xs: list(dict.fromkeys(xs))  # noqa: E731 - keeps first-seen order: reproducible
    return Pool(people, unique(subjects), unique(bodies), unique(paragraphs))


@dataclass
class Plan:
    """Every random choice for every message, drawn up front from the seed."""

    count: int
    seed: int
    parent: np.ndarray  # -1: starts a thread
    sender: np.ndarray
    to: np.ndarray
    cc: np.ndarray  # -1: none
    subject: np.ndarray  # thread root's subject index
    whole: np.ndarray
    body: np.ndarray
    paras: np.ndarray  # (count, 4) paragraph indexes
    npara: np.ndarray
    quote: np.ndarray
    html: np.ndarray
    b64: np.ndarray
    attach: np.ndarray  # 0 none, 1 text, 2 binary
    attach_size: np.ndarray
    folder: np.ndarray  # 0 inbox, 1 sent, 2 archive
    unread: np.ndarray
    flagged: np.ndarray
    when: np.ndarray  # unix seconds


def plan(pool: Pool, count: int, seed: int) -> Plan:
    rng = np.random.default_rng(seed)
    idx = np.arange(count)
    back = rng.geometric(1 / 300, count)  # parents are mostly recent messages
    parent = np.where((rng.random(count) < REPLY) & (idx - back >= 0), idx - back, -1)
    sender = rng.integers(0, len(pool.people), count)
    to = rng.integers(0, len(pool.people), count)
    cc = np.where(rng.random(count) < 0.2, rng.integers(0, len(pool.people), count), -1)
    subject = rng.integers(0, len(pool.subjects), count)
    folder = rng.choice(3, count, p=[1 - SENT - ARCHIVE, SENT, ARCHIVE])
    for i in np.nonzero(parent >= 0)[0]:  # a reply keeps its thread's subject and answers its parent's sender
        p = parent[i]
        subject[i] = subject[p]
        to[i] = sender[p]
    newest = idx >= count - max(1, count // 200)
    unread = (rng.random(count) < UNREAD) | (newest & (rng.random(count) < 0.5))
    attach = np.where(rng.random(count) < ATTACH, np.where(rng.random(count) < ATTACH_BINARY, 2, 1), 0)
    return Plan(
        count=count,
        seed=seed,
        parent=parent,
        sender=sender,
        to=to,
        cc=cc,
        subject=subject,
        whole=rng.random(count) < WHOLE_BODY,
        body=rng.integers(0, len(pool.bodies), count),
        paras=rng.integers(0, len(pool.paragraphs), (count, 4)),
        npara=np.minimum(rng.geometric(0.45, count), 4),
        quote=rng.random(count) < QUOTE,
        html=rng.random(count) < HTML,
        b64=rng.random(count) < BASE64,
        attach=attach,
        attach_size=(rng.lognormal(9.5, 1.0, count)).astype(np.int64).clip(500, 2_000_000),
        folder=folder,
        unread=unread & (folder != 1),
        flagged=rng.random(count) < FLAGGED,
        when=(START + (idx + rng.random(count)) * (SPAN / count)).astype(np.int64),
    )


def message_id(p: Plan, i: int) -> str:
    return f"<gen.{p.seed}.{i}@oakengen.example>"


def body_text(pool: Pool, p: Plan, i: int) -> str:
    if p.whole[i]:
        return pool.bodies[p.body[i]]
    return "\n\n".join(pool.paragraphs[j] for j in p.paras[i][: p.npara[i]])


def _text_part(text: str, subtype: str, b64: bool) -> str:
    if b64:
        encoded = base64.encodebytes(text.encode()).decode()
        return f"Content-Type: text/{subtype}; charset=utf-8\nContent-Transfer-Encoding: base64\n\n{encoded}"
    return f"Content-Type: text/{subtype}; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n{text}\n"


def _html_of(text: str) -> str:
    paras = "".join(f"<p>{html.escape(t).replace(chr(10), '<br>')}</p>\n" for t in text.split("\n\n"))
    return f"<html><head><meta charset=\"utf-8\"></head><body>\n{paras}</body></html>"


def _attachment(pool: Pool, p: Plan, i: int, rng_bytes: np.random.Generator) -> str:
    size = int(p.attach_size[i])
    if p.attach[i] == 1:
        text = "\n".join(pool.paragraphs[j] for j in p.paras[i])
        while len(text) < min(size, 50_000):
            text += "\n" + text
        name, ctype = (f"notes-{i}.txt", "text/plain") if i % 2 else (f"table-{i}.csv", "text/csv")
        data = text[: min(size, 50_000)].encode()
    else:
        name, ctype = (f"scan-{i}.jpg", "image/jpeg") if i % 3 else (f"report-{i}.pdf", "application/octet-stream")
        data = rng_bytes.bytes(size)
    encoded = base64.encodebytes(data).decode()
    return (
        f'Content-Type: {ctype}; name="{name}"\nContent-Transfer-Encoding: base64\n'
        f'Content-Disposition: attachment; filename="{name}"\n\n{encoded}'
    )


def render(pool: Pool, p: Plan, i: int) -> bytes:
    parent = int(p.parent[i])
    sender = email.utils.formataddr(OWNER) if p.folder[i] == 1 else pool.people[p.sender[i]]
    subject = pool.subjects[p.subject[i]]
    text = body_text(pool, p, i)
    headers = [
        f"From: {sender}",
        f"To: {pool.people[p.to[i]]}",
    ]
    if p.cc[i] >= 0:
        headers.append(f"Cc: {pool.people[p.cc[i]]}")
    if parent >= 0:
        subject = f"Re: {subject}"
        refs, a = [], parent
        while a >= 0 and len(refs) < 10:
            refs.append(message_id(p, a))
            a = int(p.parent[a])
        headers.append(f"In-Reply-To: {refs[0]}")
        headers.append(f"References: {' '.join(reversed(refs))}")
        if p.quote[i]:
            quoted = body_text(pool, p, parent).splitlines()[:15]
            when = email.utils.formatdate(int(p.when[parent]), usegmt=True)
            text += f"\n\nOn {when}, {pool.people[p.sender[parent]]} wrote:\n" + "\n".join(f"> {q}" for q in quoted)
    headers += [
        f"Subject: {subject}",
        f"Date: {email.utils.formatdate(int(p.when[i]), usegmt=True)}",
        f"Message-ID: {message_id(p, i)}",
        "MIME-Version: 1.0",
    ]
    b64 = bool(p.b64[i])
    if p.html[i]:
        body = (
            'Content-Type: multipart/alternative; boundary="=alt="\n\n--=alt=\n'
            + _text_part(text, "plain", b64)
            + "\n--=alt=\n"
            + _text_part(_html_of(text), "html", b64)
            + "\n--=alt=--\n"
        )
    else:
        body = _text_part(text, "plain", b64)
    if p.attach[i]:
        rng_bytes = np.random.default_rng([p.seed, i])
        body = (
            'Content-Type: multipart/mixed; boundary="=mix="\n\n--=mix=\n'
            + body
            + "\n--=mix=\n"
            + _attachment(pool, p, i, rng_bytes)
            + "\n--=mix=--\n"
        )
    return ("\n".join(headers) + "\n" + body).encode()


FOLDERS = ("", ".Sent", ".Archive")


def _write_range(args: tuple[Pool, Plan, Path, int, int]) -> int:
    pool, p, out, lo, hi = args
    written = 0
    for i in range(lo, hi):
        flags = ("" if p.unread[i] else "S") + ("F" if p.flagged[i] else "")
        flags = "".join(sorted(flags))
        path = out / FOLDERS[p.folder[i]] / "cur" / f"{p.when[i]}.{i}_{p.seed}.oakengen:2,{flags}"
        data = render(pool, p, i)
        with open(path, "wb") as f:
            f.write(data)
        written += len(data)
    return written


_SHARED: tuple[Pool, Plan, Path] | None = None


def _worker(span: tuple[int, int]) -> int:
    assert _SHARED is not None
    pool, p, out = _SHARED
    return _write_range((pool, p, out, span[0], span[1]))


def generate(out: Path, count: int, seed: int, workers: int, corpora: Path) -> dict:
    global _SHARED
    started = time.perf_counter()
    pool = load_pool(corpora)
    p = plan(pool, count, seed)
    for folder in FOLDERS:
        for sub in ("cur", "new", "tmp"):
            (out / folder / sub).mkdir(parents=True, exist_ok=True)
    _SHARED = (pool, p, out)
    step = 5000
    spans = [(lo, min(lo + step, count)) for lo in range(0, count, step)]
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as procs:
            total = sum(procs.imap_unordered(_worker, spans))
    else:
        total = sum(_worker(s) for s in spans)
    stats = {
        "count": count,
        "seed": seed,
        "bytes": total,
        "seconds": round(time.perf_counter() - started, 1),
        "replies": int((p.parent >= 0).sum()),
        "html": int(p.html.sum()),
        "attachments": int((p.attach > 0).sum()),
        "unread": int(p.unread.sum()),
        "folders": {name or "root": int((p.folder == k).sum()) for k, name in enumerate(FOLDERS)},
        "pool": {
            "people": len(pool.people),
            "subjects": len(pool.subjects),
            "bodies": len(pool.bodies),
            "paragraphs": len(pool.paragraphs),
        },
    }
    (out / "oakengen.json").write_text(json.dumps(stats, indent=2))
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True, help="a new or empty directory")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--corpora", type=Path, default=CORPORA)
    a = ap.parse_args(argv)
    if a.out.exists() and any(a.out.iterdir()):
        raise SystemExit(f"{a.out}: not empty; give a new directory")
    stats = generate(a.out, a.count, a.seed, a.workers, a.corpora)
    print(json.dumps(stats, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
