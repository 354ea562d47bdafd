"""Raw RFC 822 bytes -> ParsedMessage: headers, the author's own text, quoted text, signature,
attachments (name and type only) and defects. `parse` never raises.

mail-parser does the MIME work. A single-part text message (most mail from people, all of the
Enron corpus) is decoded straight from the stdlib message that mail-parser would build anyway,
because mail-parser spends half its time parsing every address header, which the index already
has from raw.db. Oaken picks the parts a reader sees as the message itself (a named text part is
an attachment; a forwarded message/rfc822 is quoted text); tests/test_mail.py checks that the
text read from them is mail-parser's on real mail. The text of each part (charsets, HTML, tidying)
is oaken.mail_text's; how the email package is fed the bytes, holding a few times the message
and not ten, is oaken.mail_feed's (issue #19).
"""

from __future__ import annotations

import email
import email.utils
import logging
from dataclasses import dataclass
from email.message import Message
from email.policy import compat32
from functools import cached_property

from oaken import envelope, quotes
from oaken.mail_attachments import AttachmentText, attachment_texts, is_attachment
from oaken.mail_feed import MARK, MARK_RE, Reading, feed, read
from oaken.mail_text import ENCODED, MAX_TEXT, cut, decode_part, html_start, html_to_text, simple_text, tidy  # noqa: F401 - re-exported

logging.getLogger("mailparser").setLevel(logging.CRITICAL)  # it logs every part it does not handle


@dataclass(frozen=True)
class Attachment:
    name: str
    content_type: str
    size: int  # bytes as transferred (base64 counted as is)


@dataclass(frozen=True)
class ParsedMessage:
    """A message as search sees it. Header fields are decoded on first use (the indexer reads them
    from raw.db instead, so it never pays for address parsing)."""

    raw_headers: tuple[tuple[str, str], ...]
    body: str  # the author's own words
    quoted: str  # quoted replies and forwarded originals
    signature: str
    from_html: bool  # the text came from an HTML part (there was no plain one)
    attachments: tuple[Attachment, ...] = ()
    defects: tuple[str, ...] = ()
    problem: str | None = None  # set when the message could only be read in part
    attachment_texts: tuple[AttachmentText, ...] = ()  # the words inside its attachments
    attachment_warnings: tuple[str, ...] = ()  # attachments that could not be read, and why

    def header(self, name: str) -> str:
        """The first header of that name, decoded ("" if absent)."""
        low = name.lower()
        for key, value in self.raw_headers:
            if key.lower() == low:
                return envelope.decode(value)
        return ""

    def _all(self, name: str) -> list[str]:
        low = name.lower()
        return [v for k, v in self.raw_headers if k.lower() == low]

    @cached_property
    def subject(self) -> str:
        return self.header("Subject")

    @cached_property
    def message_id(self) -> str | None:
        ids = envelope.message_ids(" ".join(self._all("Message-ID")))
        return ids[0] if ids else None

    @cached_property
    def sender(self) -> tuple[str, str]:
        """(name, address) of From, else Sender."""
        pairs = _addresses(self._all("From")) or _addresses(self._all("Sender"))
        return pairs[0] if pairs else ("", "")

    @cached_property
    def to(self) -> tuple[tuple[str, str], ...]:
        return tuple(_addresses(self._all("To")))

    @cached_property
    def cc(self) -> tuple[tuple[str, str], ...]:
        return tuple(_addresses(self._all("Cc")))

    @cached_property
    def date(self) -> int | None:
        values = self._all("Date")
        return envelope.parse_date(values[0]) if values else None

    @property
    def text(self) -> str:
        """Everything readable: own words, signature, quoted text."""
        return "\n\n".join(p for p in (self.body, self.signature, self.quoted) if p)


def _addresses(values: list[str]) -> list[tuple[str, str]]:
    try:
        pairs = email.utils.getaddresses([envelope.decode(v) for v in values])
    except Exception:  # noqa: BLE001 - a broken address header reads as none
        return []
    return [(n.strip(), a.strip().lower()) for n, a in pairs if n.strip() or a.strip()]


# ---- parsing ---------------------------------------------------------------------------------


def parse(raw: bytes, *, attachments: bool = True) -> ParsedMessage:
    """Parse; on any failure return what could be read (headers at least) with `problem` set.
    `attachments`: read the words inside attachments (oaken.attachment_text)."""
    try:
        return _parse(raw, attachments=attachments)
    except (Exception, RecursionError) as e:  # noqa: BLE001 - a message must never stop indexing
        return _fallback(raw, f"parse failed: {type(e).__name__}: {e}"[:300])


def _headers(msg: Message) -> tuple[tuple[str, str], ...]:
    # raw 8-bit bytes: UTF-8, else the declared charset, else cp1252 (envelope's rule, one place)
    return envelope.header_items(msg)


def _finish(
    headers: tuple[tuple[str, str], ...],
    text: str,
    from_html: bool,
    attachments: tuple[Attachment, ...],
    defects: list[str],
    problem: str | None,
    forwarded: str = "",
    read: tuple[tuple[AttachmentText, ...], tuple[str, ...]] = ((), ()),
) -> ParsedMessage:
    text = cut(text)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT]
        defects.append(f"TextTruncated: text beyond {MAX_TEXT} characters not indexed")
    parts = quotes.split(text)
    quoted = "\n\n".join(q for q in (parts.quoted, cut(forwarded)[:MAX_TEXT]) if q)
    return ParsedMessage(
        raw_headers=headers,
        body=_clean(parts.body),
        quoted=_clean(quoted),
        signature=_clean(parts.signature),
        from_html=from_html,
        attachments=attachments,
        defects=tuple(dict.fromkeys(defects)),
        problem=problem,
        attachment_texts=read[0],
        attachment_warnings=read[1],
    )


def _clean(text: str) -> str:
    return text.strip() if text else ""


class _Unsure(Exception):
    """mail-parser did not list a part left out by mail_feed.read as the attachment it was taken for."""


def _parse(raw: bytes, *, elide: bool = True, attachments: bool = True) -> ParsedMessage:
    if envelope.looks_binary(raw):
        return _fallback(raw, envelope.BINARY)
    reading = read(raw) if elide else Reading(feed(raw), {})
    msg, elided = reading.msg, reading.elided
    headers = _headers(msg)
    simple = simple_text(msg)
    data = None
    if reading.body_start is not None:
        if simple is not None and str(msg.get("content-transfer-encoding", "")).lower() not in ENCODED:
            data = memoryview(raw)[reading.body_start :]
        else:
            msg.set_payload(raw[reading.body_start :].decode("ascii", "surrogateescape"))
    if simple is not None:
        ctype, charset = simple
        text, defect = decode_part(msg, charset, data)
        defects = [defect] if defect else []
        if ctype == "text/html":
            return _finish(headers, html_start(text), True, (), defects, None)
        return _finish(headers, text, False, (), defects, None)
    try:
        return _parse_mime(msg, headers, elided, raw, reading.at if attachments else None)
    except _Unsure:
        return _parse(raw, elide=False, attachments=attachments)


def _parse_mime(
    msg: Message,
    headers: tuple[tuple[str, str], ...],
    elided: dict[str, tuple[int, int]],
    raw: bytes = b"",
    at: dict[str, tuple[int, int]] | None = None,
) -> ParsedMessage:
    import mailparser

    mp = mailparser.MailParser(message=msg)
    defects = sorted(mp.defects_categories)
    attachments = []
    listed: set[str] = set()
    for a in mp.attachments:
        payload = a.get("payload") or ""
        size = len(payload)
        if elided and isinstance(payload, str) and MARK in payload:
            marks = MARK_RE.findall(payload)
            if not set(marks) <= elided.keys() or len(set(marks)) != len(marks):
                raise _Unsure(marks)
            if payload.strip() == marks[0]:  # the attachment itself
                size += elided[marks[0]][0]
                listed.add(marks[0])
            else:  # a part listed with its children, flattened
                size += sum(elided[m][1] for m in marks)
        attachments.append(
            Attachment(
                name=envelope.decode(a.get("filename") or ""),
                content_type=str(a.get("mail_content_type") or "application/octet-stream").lower(),
                size=size,
            )
        )
    if len(listed) != len(elided):
        raise _Unsure(set(elided) - listed)
    del mp  # it holds a copy of the text parts; read again in the one case its body is wanted
    plain, html, forwarded = _body_parts(msg, defects)
    fwd = "\n\n".join(f for f in forwarded if f and not f.isspace())
    read = attachment_texts(msg, raw, at) if at is not None else ((), ())
    if plain:
        return _finish(headers, "\n\n".join(plain), False, tuple(attachments), defects, None, fwd, read)
    if html:
        text = "\n\n".join(html_start(h) for h in html)
        return _finish(headers, text, True, tuple(attachments), defects, None, fwd, read)
    if fwd:
        return _finish(headers, "", False, tuple(attachments), defects, None, fwd, read)
    text = ""
    if not attachments and not msg.is_multipart():
        text, defect = decode_part(msg)  # e.g. a non-text type with words in it
        if defect:
            defects.append(defect)
    elif not attachments:
        body = mailparser.MailParser(message=msg).body
        if body and body.strip():
            text = body  # a multipart with no boundary lines: mail-parser leaves the text in body
            defects.append("NoBoundaryDefect: text taken from the whole body")
    return _finish(headers, text, False, tuple(attachments), defects, None, "", read)


def _body_parts(msg: Message, defects: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(plain, html, forwarded): the text of the parts a mail client shows as the message, and of
    the messages forwarded inside it (message/rfc822), which count as quoted text: their words are
    another author's, yet a forward whose original is not in the mailbox must still be found.

    Only text/plain and text/html parts with no file name count: a named text part is an
    attachment (DESIGN.md indexes attachment names, not contents)."""
    plain: list[str] = []
    html: list[str] = []
    forwarded: list[str] = []
    inside: set[int] = set()  # parts of a forwarded message
    for part in msg.walk():
        kind = part.get_content_type()
        if kind == "message/rfc822":
            payload = part.get_payload()  # the forwarded message, in a list of one
            for inner in payload if isinstance(payload, list) else []:
                if not isinstance(inner, Message):  # the parser makes none, but the type allows str
                    continue
                forwarded.append(_forward_header(inner))
                inside.update(id(p) for p in inner.walk())
            continue
        if part.is_multipart():
            continue
        if is_attachment(part):
            continue
        if kind not in ("text/plain", "text/html"):
            continue
        text, defect = decode_part(part)
        if defect:
            defects.append(defect)
        if not text or text.isspace():  # not text.strip(): that copies the text
            continue
        if id(part) in inside:
            forwarded.append(html_start(text) if kind == "text/html" else text)
        else:
            (plain if kind == "text/plain" else html).append(text)
    return plain, html, forwarded


def _forward_header(inner: Message) -> str:
    """The lines a reader sees above a forwarded message."""
    lines = []
    for name in ("From", "Date", "Subject", "To"):
        value = envelope.message_header(inner, name)
        if value:
            lines.append(f"{name}: {value}")
    return "\n".join(lines)


def _fallback(raw: bytes, problem: str) -> ParsedMessage:
    """What could be read when parsing failed: headers (via the lenient envelope reader) and, for
    text data, the bytes after the header block."""
    headers: tuple[tuple[str, str], ...] = ()
    try:
        from email.parser import BytesHeaderParser

        headers = _headers(BytesHeaderParser(policy=compat32).parsebytes(raw))
    except (Exception, RecursionError):  # noqa: BLE001
        env = envelope.read(raw)
        headers = tuple(
            (k, v)
            for k, v in (
                ("Subject", env.subject),
                ("From", env.sender_addr),
                ("Message-ID", f"<{env.message_id}>" if env.message_id else ""),
            )
            if v
        )
    text = ""
    if not envelope.looks_binary(raw):
        _, sep, rest = raw.replace(b"\r\n", b"\n").partition(b"\n\n")
        text = rest.decode("utf-8", "replace") if sep else ""
    try:
        return _finish(headers, text, False, (), [], problem)
    except (Exception, RecursionError):  # noqa: BLE001
        return ParsedMessage(raw_headers=headers, body="", quoted="", signature="", from_html=False, problem=problem)
