"""The headers raw.db keeps beside the raw bytes: cheap to read (headers only), and never fatal.

A message whose headers cannot be read is still stored: what could be read is kept and the
problem is recorded, so the message is flagged rather than dropped.
"""

from __future__ import annotations

import email.header
import email.utils
import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email.parser import BytesHeaderParser
from email.policy import compat32

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


def content_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def decode(value: object) -> str:
    """An RFC 2047 header as text; an unknown charset or broken encoded word never loses it."""
    if value is None:
        return ""
    text = str(value)
    try:
        return _clean(str(email.header.make_header(email.header.decode_header(text))))
    except Exception:  # noqa: BLE001 - fall back to decoding each part leniently
        pass
    try:
        parts = email.header.decode_header(text)
    except Exception:  # noqa: BLE001
        return _clean(text)
    out = []
    for chunk, charset in parts:
        if isinstance(chunk, bytes):
            try:
                out.append(chunk.decode(charset or "ascii", "replace"))
            except LookupError:
                out.append(chunk.decode("utf-8", "replace"))
        else:
            out.append(chunk)
    return _clean(" ".join(out))


def _clean(text: str) -> str:
    return " ".join(text.replace("\x00", "").split())


def message_ids(value: object) -> tuple[str, ...]:
    """Message-IDs in a header, angle brackets removed, in order, without repeats."""
    if not value:
        return ()
    seen: dict[str, None] = {}
    for m in _MSGID.findall(str(value)):
        seen.setdefault(m, None)
    return tuple(seen)


def _addresses(values: list[str]) -> list[tuple[str, str]]:
    try:
        pairs = email.utils.getaddresses([decode(v) for v in values])
    except Exception:  # noqa: BLE001
        return []
    return [(name.strip(), addr.strip().lower()) for name, addr in pairs if addr.strip() or name.strip()]


def _fmt(name: str, addr: str) -> str:
    return f"{name} <{addr}>" if name and addr else (addr or name)


def parse_date(value: object) -> int | None:
    if not value:
        return None
    try:
        dt = email.utils.parsedate_to_datetime(str(value))
    except Exception:  # noqa: BLE001 - any unreadable date falls back
        return None
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
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
    return _clean(s).lower()


def read(raw: bytes) -> Envelope:
    problems: list[str] = []
    if b"\x00" in raw[:4096]:
        problems.append("binary data, not an RFC 822 message (an Outlook .msg file?)")
    try:
        msg = BytesHeaderParser(policy=compat32).parsebytes(raw)
    except Exception as e:  # noqa: BLE001
        return Envelope(None, "", "", "", (), (), None, (), (), f"headers unreadable: {e!r}"[:300])
    if not msg.keys() and not problems:
        problems.append("no headers")
    for defect in getattr(msg, "defects", []) or []:
        problems.append(type(defect).__name__)

    def get_all(name: str) -> list[str]:
        try:
            return [str(v) for v in (msg.get_all(name) or [])]
        except Exception:  # noqa: BLE001
            problems.append(f"bad {name} header")
            return []

    mids = message_ids(" ".join(get_all("Message-ID")))
    senders = _addresses(get_all("From")) or _addresses(get_all("Sender"))
    sender_name, sender_addr = senders[0] if senders else ("", "")
    date_values = get_all("Date")
    date = parse_date(date_values[0]) if date_values else None
    if date_values and date is None:
        problems.append(f"unreadable Date {date_values[0][:60]!r}")
    return Envelope(
        message_id=mids[0] if mids else None,
        subject=decode(get_all("Subject")[0]) if get_all("Subject") else "",
        sender_name=sender_name,
        sender_addr=sender_addr,
        to=tuple(_fmt(n, a) for n, a in _addresses(get_all("To"))),
        cc=tuple(_fmt(n, a) for n, a in _addresses(get_all("Cc"))),
        date=date,
        in_reply_to=message_ids(" ".join(get_all("In-Reply-To"))),
        references=message_ids(" ".join(get_all("References"))),
        problem="; ".join(problems)[:500] or None,
    )


def now() -> int:
    return int(datetime.now(timezone.utc).timestamp())
