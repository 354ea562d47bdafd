"""Raw RFC 822 bytes -> ParsedMessage: headers, the author's own text, quoted text, signature,
attachments (name and type only) and defects. `parse` never raises.

mail-parser does the MIME work. A single-part text message (most mail from people, all of the
Enron corpus) is decoded straight from the stdlib message that mail-parser would build anyway,
because mail-parser spends half its time parsing every address header, which the index already
has from raw.db. Oaken picks the parts a reader sees as the message itself (a named text part is
an attachment; a forwarded message/rfc822 is quoted text); tests/test_mail.py checks that the
text read from them is mail-parser's on real mail.
HTML becomes text with selectolax (lexbor): ~120 MB/s against ~20 MB/s for a stdlib HTMLParser
and ~10 MB/s for inscriptis on the corpora's HTML parts, with scripts and styles dropped.
"""

from __future__ import annotations

import email
import email.utils
import logging
import re
from dataclasses import dataclass
from email.message import Message
from email.policy import compat32
from functools import cached_property

from oaken import envelope, quotes

MAX_TEXT = 1_000_000  # characters of text kept per message; beyond this is rarely words
_BLOCK = frozenset({
    "p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "blockquote", "pre", "hr", "ul",
    "ol", "section", "article", "header", "footer", "dd", "dt", "dl", "center", "form",
})
_CELL = frozenset({"td", "th"})
_DROP = ["script", "style", "head", "title", "noscript", "template", "svg"]
_QP_SOFT = re.compile(r"=\r?\n")
_QP_HEX = re.compile(r"=(20|09|3D)")
# stray NUL and control characters (envelope.looks_binary lets a few through): not words, and
# they would split the word they sit in. Looked for one by one first: 30 substring scans take a
# twentieth of the time of one regex scan, and nearly all text has none.
_CONTROL_CHARS = tuple(chr(c) for c in (*range(0x00, 0x09), *range(0x0E, 0x20), 0x7F))
_CONTROL = re.compile("[" + "".join(_CONTROL_CHARS) + "]+")

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


# ---- text ------------------------------------------------------------------------------------

def html_to_text(html: str) -> str:
    """Readable text of an HTML body: scripts, styles and the head dropped, blocks on new lines."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    tree.strip_tags(_DROP)
    root = tree.body or tree.root
    if root is None:
        return ""
    out: list[str] = []
    for node in root.traverse(include_text=True):
        tag = node.tag
        if tag == "-text":
            out.append(node.text_content or "")
        elif tag in _BLOCK:
            out.append("\n\n" if tag in ("p", "div", "table", "blockquote", "h1", "h2", "h3") else "\n")
        elif tag in _CELL:
            out.append(" ")
    return "".join(out)


def tidy(text: str) -> str:
    """Normalise line ends and runs of blank lines and spaces; undo quoted-printable debris."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if any(c in text for c in _CONTROL_CHARS):
        text = _CONTROL.sub("", text)
    if "=\n" in text or "=20" in text or "=09" in text:
        # bodies labelled 7bit that still carry quoted-printable soft breaks (common in old corpora)
        text = _QP_HEX.sub(lambda m: {"20": " ", "09": "\t", "3D": "="}[m.group(1)], _QP_SOFT.sub("", text))
    return text


def _decode_part(part: Message, charset: str | None = None) -> tuple[str, str | None]:
    """A text part's payload as str; an unknown or wrong charset falls back without losing text."""
    payload = part.get_payload(decode=True)
    if payload is None:
        return "", None
    if not isinstance(payload, bytes):
        return str(payload), None
    charset = (charset or part.get_content_charset() or "us-ascii").lower()
    try:
        return payload.decode(charset), None
    except LookupError:
        known = False
    except UnicodeDecodeError:
        known = charset not in ("us-ascii", "ascii")  # 8-bit bytes labelled ASCII: guess below
    if known:  # a few bad bytes in a real charset: keep the rest right
        return payload.decode(charset, "replace"), f"CharsetDecodeDefect: bytes not {charset!r} replaced"
    try:
        return payload.decode("utf-8"), None
    except UnicodeDecodeError:
        return payload.decode("cp1252", "replace"), f"CharsetDecodeDefect: {charset!r} did not decode; read as cp1252"


def _simple_text(msg: Message) -> tuple[str, str | None] | None:
    """(content type, charset) of a message that is one text part, not an attachment, with no MIME
    defect: nothing for mail-parser to add. None otherwise. Reads Content-Type once (the stdlib
    parses the header again on every get_param)."""
    if msg.defects or msg.is_multipart():
        return None
    params = msg.get_params() or [("text/plain", "")]
    ctype = str(params[0][0]).lower()
    if ctype not in ("text/plain", "text/html"):
        return None
    charset = None
    for key, value in params[1:]:
        key = str(key).lower()
        if key == "name":
            return None
        if key == "charset" and isinstance(value, str):
            charset = value.strip('"').lower() or None
    disposition = (msg.get("Content-Disposition") or "").lower()
    if "attachment" in disposition or "name=" in disposition:
        return None
    return ctype, charset


# ---- parsing ---------------------------------------------------------------------------------

def parse(raw: bytes) -> ParsedMessage:
    """Parse; on any failure return what could be read (headers at least) with `problem` set."""
    try:
        return _parse(raw)
    except (Exception, RecursionError) as e:  # noqa: BLE001 - a message must never stop indexing
        return _fallback(raw, f"parse failed: {type(e).__name__}: {e}"[:300])


def _headers(msg: Message) -> tuple[tuple[str, str], ...]:
    return tuple((str(key), str(value)) for key, value in msg.raw_items())


def _finish(headers: tuple[tuple[str, str], ...], text: str, from_html: bool, attachments: tuple[Attachment, ...],
            defects: list[str], problem: str | None, forwarded: str = "") -> ParsedMessage:
    text = tidy(text)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT]
        defects.append(f"TextTruncated: text beyond {MAX_TEXT} characters not indexed")
    parts = quotes.split(text)
    quoted = "\n\n".join(q for q in (parts.quoted, tidy(forwarded)[:MAX_TEXT]) if q)
    return ParsedMessage(
        raw_headers=headers,
        body=_clean(parts.body),
        quoted=_clean(quoted),
        signature=_clean(parts.signature),
        from_html=from_html,
        attachments=attachments,
        defects=tuple(dict.fromkeys(defects)),
        problem=problem,
    )


def _clean(text: str) -> str:
    return text.strip() if text else ""


def _parse(raw: bytes) -> ParsedMessage:
    if envelope.looks_binary(raw):
        return _fallback(raw, envelope.BINARY)
    msg = email.message_from_bytes(raw, policy=compat32)
    headers = _headers(msg)
    simple = _simple_text(msg)
    if simple is not None:
        ctype, charset = simple
        text, defect = _decode_part(msg, charset)
        defects = [defect] if defect else []
        if ctype == "text/html":
            return _finish(headers, html_to_text(text), True, (), defects, None)
        return _finish(headers, text, False, (), defects, None)
    return _parse_mime(msg, headers)


def _parse_mime(msg: Message, headers: tuple[tuple[str, str], ...]) -> ParsedMessage:
    import mailparser

    mp = mailparser.MailParser(message=msg)
    defects = sorted(mp.defects_categories)
    attachments = []
    for a in mp.attachments:
        payload = a.get("payload") or ""
        attachments.append(Attachment(
            name=envelope.decode(a.get("filename") or ""),
            content_type=str(a.get("mail_content_type") or "application/octet-stream").lower(),
            size=len(payload),
        ))
    plain, html, forwarded = _body_parts(msg, defects)
    fwd = "\n\n".join(f for f in forwarded if f.strip())
    if plain:
        return _finish(headers, "\n\n".join(plain), False, tuple(attachments), defects, None, fwd)
    if html:
        return _finish(headers, "\n\n".join(html_to_text(h) for h in html), True, tuple(attachments), defects,
                       None, fwd)
    if fwd:
        return _finish(headers, "", False, tuple(attachments), defects, None, fwd)
    text = ""
    if not attachments and not msg.is_multipart():
        text, defect = _decode_part(msg)  # e.g. a non-text type with words in it
        if defect:
            defects.append(defect)
    elif not attachments and mp.body and mp.body.strip():
        text = mp.body  # a multipart with no boundary lines: mail-parser leaves the text in body
        defects.append("NoBoundaryDefect: text taken from the whole body")
    return _finish(headers, text, False, tuple(attachments), defects, None)


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
            for inner in part.get_payload() if isinstance(part.get_payload(), list) else []:
                forwarded.append(_forward_header(inner))
                inside.update(id(p) for p in inner.walk())
            continue
        if part.is_multipart():
            continue
        if part.get_content_disposition() == "attachment" or part.get_filename() or part.get_param("name"):
            continue
        if kind not in ("text/plain", "text/html"):
            continue
        text, defect = _decode_part(part)
        if defect:
            defects.append(defect)
        if not text.strip():
            continue
        if id(part) in inside:
            forwarded.append(html_to_text(text) if kind == "text/html" else text)
        else:
            (plain if kind == "text/plain" else html).append(text)
    return plain, html, forwarded


def _forward_header(inner: Message) -> str:
    """The lines a reader sees above a forwarded message."""
    lines = []
    for name in ("From", "Date", "Subject", "To"):
        value = inner.get(name)
        if value:
            lines.append(f"{name}: {envelope.decode(value)}")
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
        headers = tuple((k, v) for k, v in (("Subject", env.subject), ("From", env.sender_addr),
                                             ("Message-ID", f"<{env.message_id}>" if env.message_id else "")) if v)
    text = ""
    if not envelope.looks_binary(raw):
        _, sep, rest = raw.replace(b"\r\n", b"\n").partition(b"\n\n")
        text = rest.decode("utf-8", "replace") if sep else ""
    try:
        return _finish(headers, text, False, (), [], problem)
    except (Exception, RecursionError):  # noqa: BLE001
        return ParsedMessage(raw_headers=headers, body="", quoted="", signature="", from_html=False,
                             problem=problem)
