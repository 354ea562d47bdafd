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

Memory (issue #19): parsing holds a few times the message, not ten (scripts/bench_memory.py).
The email package is fed slices of the bytes (`_feed`): its Parser keeps a StringIO of the whole
text at four bytes a character. Long runs of body lines are not fed to it at all but one marker
line each (`_read`), as it holds a body as a list of lines and then their join: a large attachment
(only its name and type are indexed) is never copied or decoded, the body of a single-part
message is decoded straight from the bytes, and any other run is put back once parsed. Of a text
far beyond MAX_TEXT only the start is tidied, and of such an HTML part only the start is parsed
(`_cut`, `_html_start`). tests/test_memory.py checks that what parse returns is the same.
"""

from __future__ import annotations

import codecs
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
_CUT = 2 * MAX_TEXT  # a longer text is tidied from its start (at least half of it is kept)
_HTML_CUT = 4 * MAX_TEXT  # a longer HTML part is read from its start until it gives MAX_TEXT
_ENCODED = ("quoted-printable", "base64", "x-uuencode", "uuencode", "uue", "x-uue")  # what get_payload decodes
_FEED = 8192  # what email.parser.Parser hands its feed parser at a time
# A run of body lines from this size on is fed to the email package as one marker line (see _read).
_ELIDE_MIN = 32 * 1024
_BLANK = re.compile(rb"\n\r?\n")
_HEADER_LINE = re.compile(rb"From |[\x21-\x39\x3b-\x7e]*:|[\t ]")  # email.feedparser.headerRE
_MARK = "OakenElidedRun"  # the line that stands for a run: letters and digits, a body line
_MARK_RE = re.compile(_MARK + r"\d+x")

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


def tidy(text: str, *, qp: bool | None = None) -> str:
    """Normalise line ends and runs of blank lines and spaces; undo quoted-printable debris (when
    `qp`; by default when the text holds some)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if any(c in text for c in _CONTROL_CHARS):
        text = _CONTROL.sub("", text)
    if qp if qp is not None else ("=\n" in text or "=20" in text or "=09" in text):
        # bodies labelled 7bit that still carry quoted-printable soft breaks (common in old corpora)
        text = _QP_HEX.sub(lambda m: {"20": " ", "09": "\t", "3D": "="}[m.group(1)], _QP_SOFT.sub("", text))
    return text


def _qp_debris(text: str) -> bool:
    """Whether tidy(text) undoes quoted-printable, read from the text before tidy (no copy of it
    unless it holds control characters): its line ends become "\\n", nothing else it looks for."""
    if any(c in text for c in _CONTROL_CHARS):
        text = _CONTROL.sub("", text)
    return "=\n" in text or "=\r" in text or "=20" in text or "=09" in text


def _cut(text: str) -> str:
    """tidy(text), of which the caller keeps MAX_TEXT characters: of a text far longer, only its
    start is tidied. tidy works a few characters at a time, so that start comes out the same but
    for its last characters; its one decision on the whole text, quoted-printable or not, is taken
    on the whole text."""
    if len(text) <= _CUT:
        return tidy(text)
    qp = _qp_debris(text)
    cut = _CUT
    while cut < len(text):
        start = tidy(text[:cut], qp=qp)
        if len(start) > MAX_TEXT + 16:
            return start
        cut *= 4  # mostly line ends, control characters or escapes: more of it is needed
    return tidy(text, qp=qp)


def _html_start(html: str) -> str:
    """html_to_text(html), of which MAX_TEXT characters are kept: of a part far longer, the text of
    its start only, as much as gives those (lexbor's tree of the whole takes several times its size)."""
    cut = _HTML_CUT
    while cut < len(html):
        text = html_to_text(html[:cut])
        if len(tidy(text, qp=True)) > MAX_TEXT + 1024:  # what the cut tag or entity changes is past it
            return text
        cut *= 4
    return html_to_text(html)


def _ascii_inside(charset: str) -> bool:
    """Whether ASCII bytes read in this charset are the same characters (an unknown charset is
    read as UTF-8 below)."""
    try:
        name = codecs.lookup(charset).name
    except LookupError:
        return True
    return name in ("ascii", "utf-8") or name.startswith(("iso8859-", "cp125"))


def _decode_part(part: Message, charset: str | None = None, data: memoryview | None = None
                 ) -> tuple[str, str | None]:
    """A text part's payload as str; an unknown or wrong charset falls back without losing text.
    `data`: the part's bytes, when its transfer encoding is none and _read left them out of it."""
    if data is not None:
        payload: bytes | memoryview = data
    else:
        text = part._payload  # read directly: get_payload() copies it whole to look for stray bytes
        if isinstance(text, str) and text.isascii() and \
                str(part.get("content-transfer-encoding", "")).lower() not in _ENCODED:
            charset = (charset or part.get_content_charset() or "us-ascii").lower()
            if _ascii_inside(charset):
                return text, None  # what decoding gives, without two copies of a long text
        decoded = part.get_payload(decode=True)
        if decoded is None:
            return "", None
        if not isinstance(decoded, bytes):
            return str(decoded), None
        payload = decoded
    charset = (charset or part.get_content_charset() or "us-ascii").lower()
    try:
        return str(payload, charset), None
    except LookupError:
        known = False
    except UnicodeDecodeError:
        known = charset not in ("us-ascii", "ascii")  # 8-bit bytes labelled ASCII: guess below
    if known:  # a few bad bytes in a real charset: keep the rest right
        return str(payload, charset, "replace"), f"CharsetDecodeDefect: bytes not {charset!r} replaced"
    try:
        return str(payload, "utf-8"), None
    except UnicodeDecodeError:
        return str(payload, "cp1252", "replace"), f"CharsetDecodeDefect: {charset!r} did not decode; read as cp1252"


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
    # raw 8-bit bytes: UTF-8, else the declared charset, else cp1252 (envelope's rule, one place)
    return envelope.header_items(msg)


def _finish(headers: tuple[tuple[str, str], ...], text: str, from_html: bool, attachments: tuple[Attachment, ...],
            defects: list[str], problem: str | None, forwarded: str = "") -> ParsedMessage:
    text = _cut(text)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT]
        defects.append(f"TextTruncated: text beyond {MAX_TEXT} characters not indexed")
    parts = quotes.split(text)
    quoted = "\n\n".join(q for q in (parts.quoted, _cut(forwarded)[:MAX_TEXT]) if q)
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


def _feed(raw: bytes, swaps: list[tuple[int, int, bytes]] | None = None) -> Message:
    """email.message_from_bytes(raw, policy=compat32), in the slices its Parser feeds but cut from
    the bytes: the same message, without the Parser's StringIO of the whole text (four bytes a
    character: 120 MB for a 30 MB message). `swaps`: (start, end, line), fed instead of
    raw[start:end] (in order, not overlapping)."""
    from email.feedparser import BytesFeedParser

    parser = BytesFeedParser(policy=compat32)
    pos = 0
    for start, end, line in [*(swaps or ()), (len(raw), len(raw), b"")]:
        for i in range(pos, start, _FEED):
            parser.feed(raw[i:min(i + _FEED, start)])
        if line:
            parser.feed(line)
        pos = end
    return parser.close()


def _runs(raw: bytes) -> list[tuple[int, int]]:
    """(start, end) of each run of _ELIDE_MIN bytes or more of lines that the email package reads
    as body lines wherever they stand: it starts after a blank line with a line that is neither
    blank nor a header line (so a header block, if one was due there, has ended), and it stops
    before the next line that starts with "--" (a boundary line, maybe). `end` is just past a
    line end."""
    runs = []
    pos = 0
    dashes = {b"\n--": -2, b"\r--": -2}  # where each is next found (-1: nowhere), looked for again once passed
    while (blank := _BLANK.search(raw, pos)) is not None:
        start = blank.end()
        pos = blank.start() + 1
        if raw[start:start + 1] in (b"", b"\r", b"\n") or raw.startswith(b"--", start) or \
                _HEADER_LINE.match(raw, start):
            continue
        for dash, at in dashes.items():
            if -1 < at < start or at == -2:
                dashes[dash] = raw.find(dash, start)
        ahead = [at + 1 for at in dashes.values() if at != -1]
        end = min(ahead) if ahead else max(raw.rfind(b"\n", start), raw.rfind(b"\r", start)) + 1
        pos = max(pos, end)  # a blank line inside the run would start a shorter one with the same end
        if end - start >= _ELIDE_MIN:
            runs.append((start, end))
    return runs


def _unread_attachment(part: Message) -> bool:
    """A part that no code here decodes and that mail-parser lists as an attachment with its wire
    text as the payload: base64, named or marked as an attachment, and not text shown inline. Not a
    multipart or message type either: only a leaf type is written as it is read when mail-parser
    flattens a part that holds it (line ends as "\n")."""
    try:
        if str(part.get("content-transfer-encoding", "")).strip().lower() != "base64" or \
                part.get_content_maintype() in ("multipart", "message"):
            return False
        disposition = part.get_content_disposition()
        named = bool(part.get_filename()) or disposition == "attachment"
        if part.get_content_type() in ("text/plain", "text/html"):
            return named and disposition != "inline"
        return named or (bool(part.get("content-id")) and part.get_content_subtype() not in ("html", "plain"))
    except Exception:  # noqa: BLE001 - a header the email package cannot read: keep the part whole
        return False


@dataclass
class _Reading:
    msg: Message
    # marker left in an attachment's payload -> how many characters more it stands for there, and
    # in the flattened text of a part that holds that attachment (line ends written as "\n")
    elided: dict[str, tuple[int, int]]
    body_start: int | None = None  # set when the top part's payload still holds markers: raw[body_start:] is it


def _read(raw: bytes) -> _Reading:
    """The message as _feed(raw) reads it, with long runs of body lines (_runs) fed as one marker
    line each, so the email package never holds them (as str, a list of lines and their join:
    three to six times their size). After parsing, each run is put back where its marker landed,
    except
    - in an attachment no code here decodes (_unread_attachment): left out; mail-parser's size
      of it is corrected (_parse_mime);
    - in the payload of a single-part message: that is the rest of raw, decoded from there (_parse).
    A marker anywhere unexpected (a delivery-status block reads blank lines; seen twice or not at
    all) has the whole message read again as it is."""
    runs = _runs(raw) if len(raw) >= _ELIDE_MIN and _MARK.encode() not in raw else []
    if not runs:
        return _Reading(_feed(raw), {})
    swaps: list[tuple[int, int, bytes]] = []
    originals: dict[str, tuple[int, int]] = {}  # marker -> the run less its last line end
    for n, (start, end) in enumerate(runs):
        eol = 2 if raw[end - 2:end] == b"\r\n" else 1  # the same line end: the parser strips it the same way
        mark = f"{_MARK}{n}x"
        swaps.append((start, end, mark.encode() + raw[end - eol:end]))
        originals[mark] = (start, end - eol)
    msg = _feed(raw, swaps)
    slots: dict[tuple[int, str], tuple[Message, str, list[str]]] = {}  # where markers landed
    seen: set[str] = set()
    status: set[int] = set()
    for part in msg.walk():
        if part.get_content_type() == "message/delivery-status":
            status.update(id(p) for p in part.walk())
        for slot in ("_payload", "preamble", "epilogue"):
            value = getattr(part, slot, None)
            if not isinstance(value, str) or _MARK not in value:
                continue
            marks = _MARK_RE.findall(value)
            if id(part) in status or seen.intersection(marks) or len(set(marks)) != len(marks) or \
                    not originals.keys() >= set(marks):
                return _Reading(_feed(raw), {})
            seen.update(marks)
            slots[id(part), slot] = (part, slot, marks)
    if len(seen) != len(originals):
        return _Reading(_feed(raw), {})
    reading = _Reading(msg, {})
    for part, slot, marks in slots.values():
        value = getattr(part, slot)
        start, end = originals[marks[0]]
        rest = _rest_of(raw, value, marks, originals) if part is msg and slot == "_payload" else None
        if len(marks) == 1 and slot == "_payload" and value.strip() == marks[0] and _unread_attachment(part) \
                and _ascii(raw, start, end):  # ASCII: mail-parser counts it as is
            more = end - start - len(marks[0])
            reading.elided[marks[0]] = (more, more - raw.count(b"\r\n", start, end))
        elif rest is not None:
            reading.body_start = rest
        else:
            for mark in marks:
                start, end = originals[mark]
                before, after = value.split(mark)
                # as the email package decoded them; with nothing before or after, no copy is made
                value = before + str(memoryview(raw)[start:end], "ascii", "surrogateescape") + after
            setattr(part, slot, value)
    return reading


def _ascii(raw: bytes, start: int, end: int) -> bool:
    return all(raw[i:min(i + _FEED * 128, end)].isascii() for i in range(start, end, _FEED * 128))


def _rest_of(raw: bytes, payload: str, marks: list[str], originals: dict[str, tuple[int, int]]) -> int | None:
    """Where in raw `payload` starts, if it is all the rest of raw (with its runs put back)."""
    start = originals[marks[0]][0] - payload.index(marks[0])
    grown = sum(originals[m][1] - originals[m][0] - len(m) for m in marks)
    return start if len(payload) + grown == len(raw) - start else None


class _Unsure(Exception):
    """mail-parser did not list a part left out by _read as the attachment it was taken for."""


def _parse(raw: bytes, *, elide: bool = True) -> ParsedMessage:
    if envelope.looks_binary(raw):
        return _fallback(raw, envelope.BINARY)
    reading = _read(raw) if elide else _Reading(_feed(raw), {})
    msg, elided = reading.msg, reading.elided
    headers = _headers(msg)
    simple = _simple_text(msg)
    data = None
    if reading.body_start is not None:
        if simple is not None and str(msg.get("content-transfer-encoding", "")).lower() not in _ENCODED:
            data = memoryview(raw)[reading.body_start:]
        else:
            msg.set_payload(raw[reading.body_start:].decode("ascii", "surrogateescape"))
    if simple is not None:
        ctype, charset = simple
        text, defect = _decode_part(msg, charset, data)
        defects = [defect] if defect else []
        if ctype == "text/html":
            return _finish(headers, _html_start(text), True, (), defects, None)
        return _finish(headers, text, False, (), defects, None)
    try:
        return _parse_mime(msg, headers, elided)
    except _Unsure:
        return _parse(raw, elide=False)


def _parse_mime(msg: Message, headers: tuple[tuple[str, str], ...], elided: dict[str, tuple[int, int]]
                ) -> ParsedMessage:
    import mailparser

    mp = mailparser.MailParser(message=msg)
    defects = sorted(mp.defects_categories)
    attachments = []
    listed: set[str] = set()
    for a in mp.attachments:
        payload = a.get("payload") or ""
        size = len(payload)
        if elided and isinstance(payload, str) and _MARK in payload:
            marks = _MARK_RE.findall(payload)
            if not set(marks) <= elided.keys() or len(set(marks)) != len(marks):
                raise _Unsure(marks)
            if payload.strip() == marks[0]:  # the attachment itself
                size += elided[marks[0]][0]
                listed.add(marks[0])
            else:  # a part listed with its children, flattened
                size += sum(elided[m][1] for m in marks)
        attachments.append(Attachment(
            name=envelope.decode(a.get("filename") or ""),
            content_type=str(a.get("mail_content_type") or "application/octet-stream").lower(),
            size=size,
        ))
    if len(listed) != len(elided):
        raise _Unsure(set(elided) - listed)
    del mp  # it holds a copy of the text parts; read again in the one case its body is wanted
    plain, html, forwarded = _body_parts(msg, defects)
    fwd = "\n\n".join(f for f in forwarded if f and not f.isspace())
    if plain:
        return _finish(headers, "\n\n".join(plain), False, tuple(attachments), defects, None, fwd)
    if html:
        return _finish(headers, "\n\n".join(_html_start(h) for h in html), True, tuple(attachments), defects,
                       None, fwd)
    if fwd:
        return _finish(headers, "", False, tuple(attachments), defects, None, fwd)
    text = ""
    if not attachments and not msg.is_multipart():
        text, defect = _decode_part(msg)  # e.g. a non-text type with words in it
        if defect:
            defects.append(defect)
    elif not attachments:
        body = mailparser.MailParser(message=msg).body
        if body and body.strip():
            text = body  # a multipart with no boundary lines: mail-parser leaves the text in body
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
        if not text or text.isspace():  # not text.strip(): that copies the text
            continue
        if id(part) in inside:
            forwarded.append(_html_start(text) if kind == "text/html" else text)
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
