"""The words inside a message's attachments, read part by part (oaken.attachment_text reads each
file). Kept apart from oaken.mail, which parses the message itself."""

from __future__ import annotations

import email.utils
from dataclasses import dataclass
from email.message import Message

from oaken import attachment_text, envelope
from oaken.mail_feed import MARK
from oaken.mail_text import MAX_TEXT


@dataclass(frozen=True)
class AttachmentText:
    """The words read from one attachment (oaken.attachment_text)."""

    name: str
    text: str


def attachment_texts(
    msg: Message, raw: bytes, at: dict[str, tuple[int, int]]
) -> tuple[tuple[AttachmentText, ...], tuple[str, ...]]:
    """The words of the attachments Oaken reads (oaken.attachment_text: PDF, office files, text,
    HTML), at most MAX_TEXT characters in all, and a warning for each that could not be read. A
    forwarded message's attachments count too. An attachment mail_feed left out of the parse (a
    long base64 run: oaken.mail_feed.read) is decoded from `raw` where `at` says it is, so the
    email package never holds it as text (memory: tests/test_memory.py)."""
    import time

    texts: list[AttachmentText] = []
    warnings: list[str] = []
    room = MAX_TEXT
    deadline = time.monotonic() + attachment_text.MESSAGE_SECONDS
    for part in msg.walk():
        if part.is_multipart() or not is_attachment(part):
            continue
        given = part.get_filename() or part.get_param("name") or ""
        name = envelope.decode(given if isinstance(given, str) else email.utils.collapse_rfc2231_value(given))
        if attachment_text.kind_of(name, part.get_content_type()) is None:
            continue
        label = name or part.get_content_type()
        if room <= 0 or time.monotonic() > deadline:
            why = "characters" if room <= 0 else f"{attachment_text.MESSAGE_SECONDS:.0f} s"
            warnings.append(f"{label}: not read: the message's other attachments used its {why} of reading")
            continue
        try:  # whatever a hostile or broken part does, the message keeps its own words
            got = read_attachment(part, name, raw, at, deadline)
        except Exception as exc:  # noqa: BLE001
            got = attachment_text.Extracted("", f"{label}: could not be read ({type(exc).__name__}: {exc})"[:300])
        if got.warning:
            warnings.append(got.warning)
        if got.text:
            texts.append(AttachmentText(label, got.text[:room]))
            room -= len(got.text)
    return tuple(texts), tuple(warnings)


def read_attachment(
    part: Message, name: str, raw: bytes, at: dict[str, tuple[int, int]], deadline: float
) -> attachment_text.Extracted:
    """oaken.attachment_text.extract of one part, its bytes decoded from `raw` when mail_feed left
    them out of the parse (base64 read as the email package reads it: missing padding added)."""
    import binascii

    wire = part._payload  # type: ignore[attr-defined]  # typeshed's Message declares no _payload
    ctype, charset = part.get_content_type(), part.get_content_charset()
    if isinstance(wire, str) and MARK in wire[:64]:
        start, end = at.get(wire.strip(), (0, 0))
        if end <= start:
            return attachment_text.Extracted("")
        size = (end - start) * 3 // 4
        if size > attachment_text.MAX_BYTES:
            return attachment_text.extract(name, ctype, b"", charset=charset, size=size)
        try:  # read in place: a2b_base64 skips line breaks itself, so no copy of the run is made
            payload = binascii.a2b_base64(memoryview(raw)[start:end])
        except binascii.Error:  # padding missing or a dangling character (a cut message): mended on a copy
            data = raw[start:end].translate(None, b"\r\n\t ")
            data = data[: len(data) - 1] if len(data) % 4 == 1 else data
            data += b"=" * (-len(data) % 4)
            try:
                payload = binascii.a2b_base64(data)
            except binascii.Error:  # not base64 at all: nothing to read
                return attachment_text.Extracted("", f"{name or ctype}: not read: its base64 does not decode")
        return attachment_text.extract(name, ctype, payload, charset=charset, deadline=deadline)
    got = part.get_payload(decode=True)
    if not isinstance(got, bytes):
        return attachment_text.Extracted("")
    return attachment_text.extract(name, ctype, got, charset=charset, deadline=deadline)


def is_attachment(part: Message) -> bool:
    """A part a mail client lists as an attachment: named, or marked so (the rule _body_parts skips by)."""
    return part.get_content_disposition() == "attachment" or bool(part.get_filename()) or bool(part.get_param("name"))
