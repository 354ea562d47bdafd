"""The text of a message part: decoded from its charset (never losing text to a wrong one), HTML
made readable with selectolax (lexbor), line ends and quoted-printable debris tidied. Of a text far
beyond MAX_TEXT only the start is tidied, and of such an HTML part only the start is parsed (`cut`,
`html_start`): what is kept comes out the same."""

from __future__ import annotations

import codecs
import re
from email.message import Message

MAX_TEXT = 1_000_000  # characters of text kept per message; beyond this is rarely words
_BLOCK = frozenset(
    {
        "p",
        "div",
        "br",
        "tr",
        "li",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "table",
        "blockquote",
        "pre",
        "hr",
        "ul",
        "ol",
        "section",
        "article",
        "header",
        "footer",
        "dd",
        "dt",
        "dl",
        "center",
        "form",
    }
)
_CELL = frozenset({"td", "th"})
_DROP = ["script", "style", "head", "title", "noscript", "template", "svg"]
_QP_SOFT = re.compile(r"=\r?\n")
_QP_HEX = re.compile(r"=(20|09|3D)")
# stray NUL and control characters (envelope.looks_binary lets a few through): not words, and
# they would split the word they sit in. Looked for one by one first: 30 substring scans take a
# twentieth of the time of one regex scan, and nearly all text has none.
_CONTROL_CHARS = tuple(chr(c) for c in (*range(0x00, 0x09), *range(0x0E, 0x20), 0x7F))
_CONTROL = re.compile("[" + "".join(_CONTROL_CHARS) + "]+")
CUT = 2 * MAX_TEXT  # a longer text is tidied from its start (at least half of it is kept)
HTML_CUT = 4 * MAX_TEXT  # a longer HTML part is read from its start until it gives MAX_TEXT
# 7-bit charsets and the 8-bit encodings of the same repertoire that archives and gateways convert
# their text to without changing the label (a ports-jp post of 2000 in tests/data/cjk says
# iso-2022-jp and holds EUC-JP); tried strictly, in order, only when the label cannot be right
_EIGHT_BIT = {
    "iso-2022-jp": ("euc-jp", "shift_jis", "utf-8"),
    "iso-2022-kr": ("euc-kr", "utf-8"),
    "iso-2022-cn": ("gb18030", "utf-8"),
    "hz-gb-2312": ("gb18030", "utf-8"),
}
ENCODED = ("quoted-printable", "base64", "x-uuencode", "uuencode", "uue", "x-uue")  # what get_payload decodes


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


def cut(text: str) -> str:
    """tidy(text), of which the caller keeps MAX_TEXT characters: of a text far longer, only its
    start is tidied. tidy works a few characters at a time, so that start comes out the same but
    for its last characters; its one decision on the whole text, quoted-printable or not, is taken
    on the whole text."""
    if len(text) <= CUT:
        return tidy(text)
    qp = _qp_debris(text)
    cut = CUT
    while cut < len(text):
        start = tidy(text[:cut], qp=qp)
        if len(start) > MAX_TEXT + 16:
            return start
        cut *= 4  # mostly line ends, control characters or escapes: more of it is needed
    return tidy(text, qp=qp)


def html_start(html: str) -> str:
    """html_to_text(html), of which MAX_TEXT characters are kept: of a part far longer, the text of
    its start only, as much as gives those (lexbor's tree of the whole takes several times its size)."""
    cut = HTML_CUT
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


def decode_part(part: Message, charset: str | None = None, data: memoryview | None = None) -> tuple[str, str | None]:
    """A text part's payload as str; an unknown or wrong charset falls back without losing text.
    `data`: the part's bytes, when its transfer encoding is none and oaken.mail_feed left them out of it."""
    if data is not None:
        payload: bytes | memoryview = data
    else:
        # read directly: get_payload() copies it whole to look for stray bytes (typeshed's Message
        # declares no _payload, the attribute every Message has)
        text = part._payload  # type: ignore[attr-defined]
        if (
            isinstance(text, str)
            and text.isascii()
            and str(part.get("content-transfer-encoding", "")).lower() not in ENCODED
        ):
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
    for sibling in _EIGHT_BIT.get(charset, ()) if known else ():
        try:  # a 7-bit charset holding 8-bit bytes: the text was converted on its way, not labelled
            return str(payload, sibling), f"CharsetDecodeDefect: {charset!r} holds 8-bit bytes; read as {sibling}"
        except UnicodeDecodeError:
            continue
    if known:  # a few bad bytes in a real charset: keep the rest right
        return str(payload, charset, "replace"), f"CharsetDecodeDefect: bytes not {charset!r} replaced"
    try:
        return str(payload, "utf-8"), None
    except UnicodeDecodeError:
        return str(payload, "cp1252", "replace"), f"CharsetDecodeDefect: {charset!r} did not decode; read as cp1252"


def simple_text(msg: Message) -> tuple[str, str | None] | None:
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
