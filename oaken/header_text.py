"""A header's bytes and encoded words as text, the one rule every reader of headers follows
(oaken.envelope for raw.db, oaken.mail for a parsed message).

RFC 5322 headers are ASCII, but old mail (and some new) carries raw 8-bit names and subjects:
Latin-1 or cp1252 from old clients, UTF-8 from new ones (RFC 6532), a CJK charset now and then.
They are read as a mail client reads them: UTF-8 when the bytes are valid UTF-8, else the charset
the message declares in its top-level Content-Type when that decodes them, else cp1252. The
cp1252 here is the WHATWG windows-1252 that browsers and mail clients use for ISO-8859-1, ASCII
and unlabelled text: its five unassigned bytes are the C1 controls of Latin-1, so no byte is lost.
RFC 2047 encoded words are decoded by the email package, leniently.
"""

from __future__ import annotations

import codecs
import re

# The email package is imported where it is used: raw.db's readers (a keyword search) never parse
# headers, and that import would double a cold `oaken search`.

_ASCII_PROBE = bytes(range(0x20, 0x7F)) + b"\t"
_CODECS: dict[str, str | None] = {}  # charset label -> codec name, "" for cp1252, None for unusable
_CP1252_TABLE: list[str] = []  # the decoding table, made on first use (0.5 ms: not at import)


def cp1252() -> str:
    if not _CP1252_TABLE:
        _CP1252_TABLE.append(
            "".join(chr(b) if b in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else bytes([b]).decode("cp1252") for b in range(256))
        )
    return _CP1252_TABLE[0]


def _cp1252_errors(err: UnicodeError) -> tuple[str, int]:
    """Decoding error handler: the bytes that are not UTF-8 read as cp1252 (UTF-8 kept where valid)."""
    if not isinstance(err, UnicodeDecodeError):
        raise err
    return codecs.charmap_decode(err.object[err.start : err.end], "strict", cp1252())[0], err.end


codecs.register_error("oaken.cp1252", _cp1252_errors)


def _codec(label: str) -> str | None:
    """The codec for a declared charset: a Python codec name, "" for WHATWG cp1252 (ISO-8859-1 and
    windows-1252 labels), None when it is no help for 8-bit bytes (unknown, ASCII or UTF-8, which
    they already failed, or not ASCII-compatible such as UTF-16 or EBCDIC)."""
    key = label.strip().strip('"').lower()
    if key in _CODECS:
        return _CODECS[key]
    codec: str | None
    try:
        name = codecs.lookup(key).name
    except (LookupError, ValueError):
        codec = None
    else:
        if name in ("iso8859-1", "cp1252"):
            codec = ""
        elif name in ("ascii", "utf-8"):
            codec = None
        else:
            try:
                codec = name if _ASCII_PROBE.decode(name) == _ASCII_PROBE.decode("ascii") else None
            except (UnicodeError, LookupError):
                codec = None
    if len(_CODECS) < 256:  # labels come from mail: bound the cache
        _CODECS[key] = codec
    return codec


def header_text(value: bytes, charset: str | None = None) -> str:
    """A header's raw bytes as text: UTF-8 if they are valid UTF-8, else `charset` (the message's
    declared charset) if Python knows it and it decodes them, else cp1252 for the bytes that are
    not UTF-8 (a UTF-8 run in a mixed header stays right). Never raises, never drops a byte."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        pass
    codec = _codec(charset) if charset else None
    if codec == "":
        return codecs.charmap_decode(value, "strict", cp1252())[0]
    if codec:
        try:
            return value.decode(codec)
        except UnicodeDecodeError:
            pass
    return value.decode("utf-8", "oaken.cp1252")


# patterns of the rare path, compiled on first use (re caches them) rather than at import
_CONTENT_TYPE = rb"(?i)(?:^|\n)content-type[ \t]*:([^\n]*(?:\n[ \t][^\n]*)*)"
_CHARSET = r"""(?i)charset[ \t]*=[ \t]*(?:"([^"]*)"|([^\s;"]+))"""


def declared_charset(content_type: object) -> str | None:
    """The charset parameter of a Content-Type value, if any."""
    if not content_type:
        return None
    text = content_type.decode("ascii", "replace") if isinstance(content_type, bytes) else str(content_type)
    m = re.search(_CHARSET, text)
    if m is None:
        return None
    return (m.group(1) or m.group(2) or "").strip() or None


def block_charset(block: bytes) -> str | None:
    """The charset declared by a header block's (first) Content-Type."""
    m = re.search(_CONTENT_TYPE, block)
    return declared_charset(m.group(1)) if m else None


def _unescape(text: str, charset: str | None) -> str:
    """A header value as the stdlib parser leaves it (compat32: each 8-bit byte a lone surrogate,
    U+DC80-U+DCFF) decoded by header_text. Text without surrogates is returned as it is."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text  # real text, nothing escaped
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte
        return text.encode("utf-8", "replace").decode("utf-8")
    return header_text(raw, charset)


def header_items(msg: object) -> tuple[tuple[str, str], ...]:
    """(name, value) of every header of a stdlib Message as text, 8-bit bytes decoded by the rule of
    header_text with the message's declared charset: mail.py's raw headers. Values are left
    RFC 2047-encoded, for decode()."""
    items = [(str(k), str(v)) for k, v in msg.raw_items()]  # type: ignore[attr-defined]
    if all(v.isascii() for _, v in items):
        return tuple(items)
    charset = declared_charset(next((v for k, v in items if k.lower() == "content-type"), None))
    return tuple((k, _unescape(v, charset)) for k, v in items)


def message_header(msg: object, name: str) -> str:
    """The first `name` header of a stdlib Message, decoded ("" if absent). Unlike msg.get(name),
    which under compat32 turns 8-bit bytes into U+FFFD, the bytes are read by header_text's rule."""
    low = name.lower()
    items = list(msg.raw_items())  # type: ignore[attr-defined]
    for key, value in items:
        if str(key).lower() == low:
            text = str(value)
            charset = None
            if not text.isascii():
                charset = declared_charset(next((v for k, v in items if str(k).lower() == "content-type"), None))
            return decode(text, charset)
    return ""


def decode(value: object, charset: str | None = None) -> str:
    """An RFC 2047 header as text; an unknown charset or broken encoded word never loses it. A value
    from the stdlib parser with 8-bit bytes still escaped (lone surrogates) is decoded by
    header_text, with `charset` as the message's declared charset."""
    import email.header

    if value is None:
        return ""
    text = str(value)
    if not text.isascii():
        text = _unescape(text, charset)
    if "=?" not in text:
        return clean(text)  # no encoded word: nothing for the email package to do
    try:
        parts = email.header.decode_header(text)
        if not text.isascii():  # 8-bit text beside encoded words: decode_header escaped it
            parts = [(_unencoded(c), None) if cs is None and isinstance(c, bytes) else (c, cs) for c, cs in parts]
        return clean(str(email.header.make_header(parts)))
    except Exception:  # noqa: BLE001 - fall back to decoding each part leniently
        pass
    try:
        parts = email.header.decode_header(text)
    except Exception:  # noqa: BLE001
        return clean(text)
    out = []
    for chunk, charset in parts:
        if not isinstance(chunk, bytes):
            out.append(chunk)
        elif charset is None:
            out.append(_unencoded(chunk))
        else:
            try:
                out.append(chunk.decode(charset, "replace"))
            except LookupError:
                out.append(chunk.decode("utf-8", "replace"))
    return clean(" ".join(out))


def _unencoded(chunk: bytes) -> str:
    """Text between encoded words, back from the bytes decode_header makes of it (raw-unicode-escape:
    Latin-1 for U+0000-U+00FF, an escape beyond): an 8-bit name beside an encoded word is kept."""
    if b"\\u" in chunk or b"\\U" in chunk:
        try:
            return chunk.decode("raw-unicode-escape")
        except UnicodeDecodeError:  # a backslash the text had, such as C:\\users
            pass
    return chunk.decode("latin-1")


def clean(text: str) -> str:
    return " ".join(text.replace("\x00", "").split())
