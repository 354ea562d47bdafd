"""The words inside an attachment: text/*, HTML, PDF (pypdf), and the office formats that are zips
of XML (docx, xlsx, pptx; odt, ods, odp), read with the standard library.

An attachment is someone else's file, often large, sometimes broken or encrypted, so every read is
bounded: a payload over MAX_BYTES is not read, a PDF stops after MAX_PAGES pages or MAX_SECONDS,
and at most MAX_CHARS characters are kept. Whatever goes wrong becomes a warning on the result
(shown by `oaken status`), never an exception: a message is indexed with or without its
attachments' words. Formats not listed here (images, archives, executables) are not read at all.
"""

from __future__ import annotations

import io
import re
import time
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

MAX_BYTES = 20 * 1024 * 1024  # a larger attachment is not read (its name stays searchable)
MAX_PAGES = 200
MAX_SECONDS = 10.0  # of reading one attachment; checked between pages and parts
MESSAGE_SECONDS = 20.0  # of reading all of one message's attachments (oaken.mail)
MAX_CHARS = 200_000  # characters kept per attachment
MAX_UNZIPPED = 16 * 1024 * 1024  # XML read from one office file, however well it compresses

_OOXML = {
    ".docx": ("word/document.xml", "word/header", "word/footer", "word/footnotes.xml"),
    ".pptx": ("ppt/slides/slide",),
    ".xlsx": ("xl/sharedStrings.xml", "xl/worksheets/sheet"),
}
_ODF = (".odt", ".ods", ".odp")
_TYPES = {
    "application/pdf": ".pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.oasis.opendocument.text": ".odt",
    "application/vnd.oasis.opendocument.spreadsheet": ".ods",
    "application/vnd.oasis.opendocument.presentation": ".odp",
    "text/html": ".html",
}
# elements whose end is a line break in the text: paragraphs, table cells and rows, slides' text
_BREAKS = {"p", "tc", "tr", "br", "h", "table-cell", "table-row", "line-break", "c", "si", "t:p"}
_SKIP = {"instrText", "v", "f"}  # field codes; a spreadsheet's raw cell values and formulas
_SURROGATES = re.compile("[\ud800-\udfff]")
_SPACES = re.compile(r"[ \t\f\v\u00a0]+")
_LINES = re.compile(r"\n\s*\n+")


@dataclass(frozen=True)
class Extracted:
    text: str  # "" when nothing could be read
    warning: str | None = None  # why the text is missing or partial, naming the file


def kind_of(name: str, content_type: str) -> str | None:
    """Which reader an attachment needs (".pdf", ".docx", ".html", ".txt", ...), or None when it is
    not one Oaken reads. The file name's extension decides first: mail clients label office files
    application/octet-stream more often than not."""
    lower = (name or "").lower()
    for ext in (".pdf", *_OOXML, *_ODF, ".html", ".htm", ".txt", ".csv", ".md", ".ics", ".vcf"):
        if lower.endswith(ext):
            return ".html" if ext == ".htm" else ext
    ctype = (content_type or "").lower().split(";")[0].strip()
    if ctype in _TYPES:
        return _TYPES[ctype]
    if ctype.startswith("text/"):
        return ".txt"
    return None


def extract(
    name: str,
    content_type: str,
    payload: bytes,
    *,
    charset: str | None = None,
    size: int | None = None,
    deadline: float | None = None,
) -> Extracted:
    """The text of one attachment (see the module's bounds); never raises. `size`: its decoded size
    when the caller has not decoded it (over MAX_BYTES it is not: `payload` may then be empty).
    `deadline` (time.monotonic()): when the message's reading time ends, if before MAX_SECONDS.
    A single PDF page is read whole once begun: pypdf's own limits bound it (a few seconds)."""
    kind = kind_of(name, content_type)
    label = name or content_type or "attachment"
    if kind is None:
        return Extracted("")
    size = len(payload) if size is None else size
    if size > MAX_BYTES:
        return Extracted("", f"{label}: not read: {size / 1048576:.1f} MB is over the {MAX_BYTES // 1048576} MB cap")
    stop = time.monotonic() + MAX_SECONDS
    stop = min(stop, deadline) if deadline is not None else stop
    try:
        if kind == ".pdf":
            text, warning = _pdf(payload, label, stop)
        elif kind in _OOXML:
            text, warning = _zipped_xml(payload, _OOXML[kind], label, stop)
        elif kind in _ODF:
            text, warning = _zipped_xml(payload, ("content.xml",), label, stop)
        elif kind == ".html":
            from oaken.mail_text import html_start

            text, warning = html_start(_decode(payload[: 16 * MAX_CHARS], charset)), None
        else:  # a text far past MAX_CHARS is cut before it is decoded and tidied whole
            text, warning = _decode(payload[: 4 * MAX_CHARS], charset), None
    except _Unreadable as exc:
        return Extracted("", f"{label}: {exc}")
    except Exception as exc:  # a broken file of any kind: its words are lost, the message is not
        return Extracted("", f"{label}: could not be read ({type(exc).__name__}: {str(exc)[:200]})")
    text = _tidy(text)
    if len(text) > MAX_CHARS:
        cut = text.rfind(" ", 0, MAX_CHARS)
        text = text[: cut if cut > MAX_CHARS // 2 else MAX_CHARS]
        warning = warning or f"{label}: only its first {MAX_CHARS:,} characters are searchable"
    return Extracted(text, warning)


class _Unreadable(Exception):
    """An attachment that cannot be read for a reason worth saying as it is (encrypted, ...)."""


def _decode(payload: bytes, charset: str | None) -> str:
    for cs in (charset, "utf-8"):
        if cs:
            try:
                return payload.decode(cs)
            except (LookupError, UnicodeDecodeError):
                continue
    return payload.decode("cp1252", errors="replace")


def _pdf(payload: bytes, label: str, stop: float) -> tuple[str, str | None]:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings on odd files are ours to say
    try:
        reader = PdfReader(io.BytesIO(payload), strict=False)
    except PdfReadError as exc:
        raise _Unreadable(f"not a readable PDF ({exc})") from exc
    if reader.is_encrypted:
        try:  # an empty user password (only editing is restricted) still opens it
            if not reader.decrypt(""):
                raise _Unreadable("encrypted (a password is needed): its words are not searchable")
        except _Unreadable:
            raise
        except Exception as exc:
            raise _Unreadable(f"encrypted and cannot be opened ({type(exc).__name__})") from exc
    pages: list[str] = []
    size = failed = 0
    total = len(reader.pages)
    for i, page in enumerate(reader.pages):
        if i >= MAX_PAGES or time.monotonic() > stop or size > MAX_CHARS:
            why = f"{MAX_PAGES} pages" if i >= MAX_PAGES else "the character cap" if size > MAX_CHARS else "time"
            return "\n\n".join(pages), f"{label}: only its first {i} of {total} pages were read ({why})"
        try:
            text = page.extract_text() or ""
        except Exception:  # one broken page: the others still count, and the warning says how many
            text = ""
            failed += 1
        pages.append(text)
        size += len(text)
    if failed:
        return "\n\n".join(pages), f"{label}: {failed} of {total} pages could not be read"
    return "\n\n".join(pages), None


def _zipped_xml(payload: bytes, parts: tuple[str, ...], label: str, stop: float) -> tuple[str, str | None]:
    import zipfile  # here, not at the top: a search that shows a message need not pay for it

    try:
        z = zipfile.ZipFile(io.BytesIO(payload))
    except zipfile.BadZipFile as exc:
        raise _Unreadable("not a readable office file (not a zip)") from exc
    with z:
        names = [n for n in z.namelist() if n.endswith(".xml") and any(n.startswith(p) for p in parts)]
        names.sort(key=_natural)
        if not names:
            raise _Unreadable("not a readable office file (no text part)")
        out: list[str] = []
        budget = MAX_UNZIPPED
        for i, n in enumerate(names):
            info = z.getinfo(n)
            if info.file_size > budget or time.monotonic() > stop:
                why = "time" if info.file_size <= budget else f"{MAX_UNZIPPED // 1048576} MB of XML"
                return "\n\n".join(out), f"{label}: only its first {i} of {len(names)} parts were read ({why})"
            budget -= info.file_size
            out.append(_xml_text(z.read(n)))
        return "\n\n".join(out), None


def _xml_text(data: bytes) -> str:
    """The character data of an office XML part in document order, a line break after each
    paragraph, cell or row. Field codes (w:instrText) and spreadsheet cell values (<v>: numbers,
    or indexes into the shared strings, which are read themselves) are left out."""
    from xml.etree import ElementTree

    root = ElementTree.fromstring(data)
    pieces: list[str] = []
    stack: list[tuple[Element, bool]] = [(root, False)]
    while stack:
        el, done = stack.pop()
        local = el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""
        if done:
            if local in _BREAKS:
                pieces.append("\n")
            elif local in ("tab", "s"):
                pieces.append(" ")
            if el.tail:
                pieces.append(el.tail)
            continue
        if el.text and local not in _SKIP:
            pieces.append(el.text)
        stack.append((el, True))
        stack.extend((child, False) for child in reversed(el))
    return "".join(pieces)


def _natural(name: str) -> tuple:
    """sheet2 before sheet10, slide2 before slide10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _tidy(text: str) -> str:
    """NFKC first: PDFs write ligatures as one glyph ("ﬁ"), which no word typed holds. A lone
    surrogate (pypdf decodes a broken font map with surrogatepass) becomes U+FFFD: the tokenizers
    refuse it."""
    text = _SURROGATES.sub("\ufffd", text)
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = _SPACES.sub(" ", text)
    return _LINES.sub("\n\n", text).strip()
