"""The headers raw.db keeps beside the raw bytes: cheap to read (headers only), and never fatal.

A message whose headers cannot be read is still stored: what could be read is kept and the
problem is recorded, so the message is flagged rather than dropped. How a header's 8-bit bytes
and encoded words become text is oaken.header_text's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from oaken.header_text import (  # noqa: F401 - re-exported
    block_charset,
    clean,
    cp1252,
    declared_charset,
    decode,
    header_items,
    header_text,
    message_header,
)

# The email package and hashlib are imported where they are used: raw.db's readers (a keyword
# search) never parse headers, and those imports would double a cold `oaken search`.

_MSGID = re.compile(r"<([^<>\s]+)>")
_PREFIX = re.compile(r"^\s*((re|fw|fwd|aw|wg|sv|vs|antw|tr|rif|r)\s*(\[\d+\])?\s*:\s*)+", re.I)
DAY = 86400


@dataclass(frozen=True)
class Envelope:
    message_id: str | None
    subject: str
    sender_name: str
    sender_addr: str
    to: tuple[str, ...]  # "Name <addr>" or "addr"
    cc: tuple[str, ...]
    date: int | None  # the Date header as Unix seconds UTC, None when missing or unreadable
    in_reply_to: tuple[str, ...]
    references: tuple[str, ...]
    problem: str | None  # why this message is flagged, if it is


def load_all() -> None:
    """Import now what read() imports lazily. A process forked from a threaded one (sync's header
    worker) must not import them itself: a module another thread was importing at the fork keeps
    its lock in the child for ever."""
    import email.header  # noqa: F401
    import email.utils  # noqa: F401
    import hashlib  # noqa: F401

    cp1252()  # imports encodings.cp1252 (a declared charset's codec is still imported on first use)


def content_hash(raw: bytes) -> str:
    import hashlib

    return hashlib.sha256(raw).hexdigest()


def message_ids(value: object) -> tuple[str, ...]:
    """Message-IDs in a header, angle brackets removed, in order, without repeats."""
    if not value:
        return ()
    seen: dict[str, None] = {}
    for m in _MSGID.findall(str(value)):
        seen.setdefault(m, None)
    return tuple(seen)


# "Name <addr>" or a bare addr, the shapes nearly every address list takes; anything with quotes,
# comments or groups goes to the stdlib parser, which is exact but ten times slower.
_SIMPLE_ADDR = re.compile(r"\s*(?:([^<>,;:\"()@]*?)\s*<([^<>\s,;:\"()]+)>|([^<>\s,;:\"()]+@[^<>\s,;:\"()]+))\s*(?:,|$)")


def _fast_addresses(text: str) -> list[tuple[str, str]] | None:
    out: list[tuple[str, str]] = []
    pos, end = 0, len(text)
    while pos < end:
        m = _SIMPLE_ADDR.match(text, pos)
        if not m or m.end() == pos:
            return None
        name, addr, bare = m.groups()
        out.append(((name or "").strip(), (addr or bare).lower()))
        pos = m.end()
    return out


def _addresses(values: list[str]) -> list[tuple[str, str]]:
    decoded = [decode(v) for v in values]
    fast = [_fast_addresses(v) for v in decoded]
    if all(f is not None for f in fast):
        return [pair for f in fast for pair in f if pair[0] or pair[1]]  # type: ignore[union-attr]
    import email.utils

    try:
        pairs = email.utils.getaddresses(decoded)
    except Exception:  # noqa: BLE001
        return []
    return [(name.strip(), addr.strip().lower()) for name, addr in pairs if addr.strip() or name.strip()]


def _fmt(name: str, addr: str) -> str:
    return f"{name} <{addr}>" if name and addr else (addr or name)


def parse_date(value: object) -> int | None:
    import email.utils

    if not value:
        return None
    try:
        dt = email.utils.parsedate_to_datetime(str(value))
    except Exception:  # noqa: BLE001 - any unreadable date falls back
        return None
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:
        return int(dt.timestamp())
    except (OverflowError, OSError, ValueError):
        return None


def effective_date(header_date: int | None, arrived: int) -> tuple[int, str]:
    """DESIGN.md: the Date header, unless missing, unreadable or more than a day after arrival."""
    if header_date is None or header_date > arrived + DAY or header_date <= 0:
        return arrived, "arrival"
    return header_date, "header"


def base_subject(subject: str) -> str:
    """The subject without Re:/Fwd: prefixes and list tags, for the threading fallback."""
    s = re.sub(r"^\s*\[[^\]]{1,40}\]\s*", "", subject)
    s = _PREFIX.sub("", s)
    return clean(s).lower()


# the headers raw.db keeps; the others (X-Folder, Received, ...) are not decoded at all
_WANTED = frozenset({"message-id", "subject", "from", "sender", "to", "cc", "date", "in-reply-to", "references"})
_HEADER = re.compile(rb"^([\x21-\x39\x3b-\x7e]+)[ \t]*:[ \t]*(.*)$", re.S)


# A header block of nothing but header lines and their folded continuations (nearly every message
# from an IMAP server): its wanted headers are found by one regex scan instead of a loop per line.
_PLAIN_BLOCK = re.compile(rb"[\x21-\x39\x3b-\x7e]+[ \t]*:[^\n]*(?:\n(?:[\x21-\x39\x3b-\x7e]+[ \t]*:|[ \t])[^\n]*)*")
# after a newline (the block is read with one prepended): a literal first byte lets the scan skip
_WANTED_HEADER = re.compile(
    rb"\n((?i:" + b"|".join(sorted(n.encode() for n in _WANTED)) + rb"))[ \t]*:"
    rb"([^\n]*(?:\n[ \t][^\n]*)*)"
)
_NAMES: dict[bytes, str] = {}  # header names as written -> lower case


def _header_block(raw: bytes) -> tuple[dict[str, list[str]], list[str]]:
    """Headers by lower-case name, unfolded, as text. The RFC 822 header grammar is simple enough
    that a line scan reads it at several times the speed of the email package's feed parser, and a
    plain block (no mbox line, no blank or broken line) is read by a regex scan faster still."""
    crlf = raw.find(b"\r\n\r\n")
    lf = raw.find(b"\n\n", 0, len(raw) if crlf == -1 else crlf + 1)  # the first blank line of either kind
    cut = min(i for i in (crlf, lf, len(raw)) if i != -1)
    block = raw[:cut]
    if _PLAIN_BLOCK.fullmatch(block) is None:
        return _header_lines(block)
    headers: dict[str, list[str]] = {}
    for m in _WANTED_HEADER.finditer(b"\n" + block):
        written, value = m.groups()
        name = _NAMES.get(written)
        if name is None:
            name = _NAMES.setdefault(written, written.decode("ascii").lower())
        value = value.strip() if b"\n" not in value else b" ".join(part.strip() for part in value.split(b"\n"))
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:  # 8-bit bytes in some other charset
            text = header_text(value, block_charset(block))
        headers.setdefault(name, []).append(text)
    return headers, []


def _header_lines(block: bytes) -> tuple[dict[str, list[str]], list[str]]:
    """_header_block for any block, line by line: an mbox line, blank lines, a broken line."""
    problems: list[str] = []
    lines = block.split(b"\n")
    if lines and lines[0].startswith(b"From "):
        lines = lines[1:]  # an mbox separator line
    headers: dict[str, list[str]] = {}
    current: list[bytes] | None = None
    name = ""

    def close() -> None:
        if current is not None and name in _WANTED:
            value = b" ".join(current)
            try:
                text = value.decode("utf-8")
            except UnicodeDecodeError:  # 8-bit bytes in some other charset
                text = header_text(value, block_charset(block))
            headers.setdefault(name, []).append(text)

    for line in lines:
        line = line.rstrip(b"\r")
        if line[:1] in (b" ", b"\t"):
            if current is not None:
                current.append(line.strip())
            elif line.strip():  # continues no header: skipped, as the email package does
                problems.append("FirstHeaderLineIsContinuationDefect")
            continue
        if current is None and line.startswith(b"From "):  # an mbox line after such a line: skipped too
            continue
        m = _HEADER.match(line)
        if not m:
            if not line.strip():
                continue
            problems.append("MissingHeaderBodySeparatorDefect")
            break
        close()
        name = m.group(1).decode("ascii").lower()
        current = [m.group(2).strip()]
    close()
    if not name:  # not one header line
        problems.insert(0, "no headers")
    return headers, problems


# Bytes no text holds: the C0 controls but tab, line ends, vertical tab, form feed and ESC (the
# shifts of ISO-2022-JP mail), and DEL. 0x80-0xFF are text in some 8-bit charset.
_NON_TEXT = bytes([*range(0x00, 0x07), *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])
_TEXT_BYTES = bytes(b for b in range(256) if b not in _NON_TEXT)
_SNIFF = 8192  # bytes looked at
_BINARY_SHARE = 0.05  # random or compressed bytes are ~10% non-text, an Outlook .msg ~65%
_MAIL_START = re.compile(rb"[\r\n\t ]*(?:From |[\x21-\x39\x3b-\x7e]+[ \t]*:)")
BINARY = "binary data, not an RFC 822 message (an Outlook .msg file?)"


def looks_binary(raw: bytes) -> bool:
    """Binary data rather than mail: more than 5% of its first 8 KiB are bytes no text holds (of
    1 KiB at least, so a short message's few stray bytes are no share), or it holds any such byte
    and does not start with a header line. A few NUL or control bytes in a message that starts
    like one (a broken client or gateway) are noise in mail, not a sign of a file."""
    sample = raw[:_SNIFF]
    odd = len(sample.translate(None, _TEXT_BYTES))
    if not odd:
        return False
    return odd > _BINARY_SHARE * max(len(sample), 1024) or _MAIL_START.match(sample) is None


def read(raw: bytes) -> Envelope:
    problems: list[str] = []
    if looks_binary(raw):
        problems.append(BINARY)
    headers, header_problems = _header_block(raw)
    problems.extend(p for p in header_problems if not (p == "no headers" and problems))

    def get_all(name: str) -> list[str]:
        return headers.get(name, [])

    mids = message_ids(" ".join(get_all("message-id")))
    senders = _addresses(get_all("from")) or _addresses(get_all("sender"))
    sender_name, sender_addr = senders[0] if senders else ("", "")
    date_values = get_all("date")
    date = parse_date(date_values[0]) if date_values else None
    if date_values and date is None:
        problems.append(f"unreadable Date {date_values[0][:60]!r}")
    subjects = get_all("subject")
    return Envelope(
        message_id=mids[0] if mids else None,
        subject=decode(subjects[0]) if subjects else "",
        sender_name=sender_name,
        sender_addr=sender_addr,
        to=tuple(_fmt(n, a) for n, a in _addresses(get_all("to"))),
        cc=tuple(_fmt(n, a) for n, a in _addresses(get_all("cc"))),
        date=date,
        in_reply_to=message_ids(" ".join(get_all("in-reply-to"))),
        references=message_ids(" ".join(get_all("references"))),
        problem="; ".join(problems)[:500] or None,
    )


def now() -> int:
    return int(datetime.now(UTC).timestamp())
