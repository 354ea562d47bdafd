"""Raw 8-bit bytes in headers (issue #14 item 3) are read as a mail client reads them: UTF-8 where
the bytes are valid UTF-8, else the charset the message declares, else cp1252, and never as U+FFFD.
The real messages are in tests/data/headers8bit (its README gives their origin)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oaken import api, envelope, mail
from oaken.index import indexer
from oaken.search.engine import search
from oaken.store import Store
from tests.search_fixtures import ACCOUNT, config_for

DATA = Path(__file__).parent / "data" / "headers8bit"
FRANCOIS = "enron-lay-inbox-15.eml"  # X-From: \"Fran\xe7ois Ndengwe\" ..., charset=ANSI_X3.4-1968
CORREO = "enron-skilling-notes_inbox-100.eml"  # X-To: ... (Correo electr\x9bnico) ...
UTF8_TO = "mailparser-test-12.eml"  # To: dangl\xc3\xbce@email.com, charset="GB2312"


def _raw(name: str) -> bytes:
    return (DATA / name).read_bytes()


def _header_bytes(raw: bytes, name: bytes) -> bytes:
    m = re.search(rb"(?m)^" + name + rb":[ \t]*(.*?)\r?$", raw.partition(b"\r\n\r\n")[0])
    assert m is not None, name
    return m.group(1)


def _with_original_from(raw: bytes) -> bytes:
    """The Enron message with its sender's own From line back: the CMU release replaced it with the
    bare address and kept the line, bytes as they came, in X-From (`\\"Name\\" <addr>@ENRON <...>`)."""
    m = re.search(rb'\r\nX-From: \\"([^"\\]+)\\" <([^<>]+)>', raw)
    assert m is not None
    name, addr = m.groups()
    old = b"\r\nFrom: " + addr + b"\r\n"
    assert raw.count(old) == 1
    return raw.replace(old, b'\r\nFrom: "' + name + b'" <' + addr + b">\r\n")


# ---- the real header bytes ----------------------------------------------------------------------

def test_real_latin1_name_under_a_contradicting_ascii_label_reads_as_cp1252() -> None:
    raw = _raw(FRANCOIS)
    value = _header_bytes(raw, b"X-From")
    assert b"Fran\xe7ois" in value and b"charset=ANSI_X3.4-1968" in raw
    text = envelope.header_text(value, envelope.declared_charset("text/plain; charset=ANSI_X3.4-1968"))
    assert text.startswith('\\"François Ndengwe\\" <amepya2@hotmail.com>@ENRON')
    # the same header through mail.parse (the stdlib parser escapes the byte; decode reads it)
    assert mail.parse(raw).header("X-From").startswith('\\"François Ndengwe\\" <amepya2@hotmail.com>')


def test_real_cp1252_byte_is_cp1252_not_a_latin1_control() -> None:
    value = _header_bytes(_raw(CORREO), b"X-To")
    assert b"electr\x9bnico" in value
    text = envelope.header_text(value)
    # U+203A "›", as a mail client shows the byte (Latin-1 would make it the C1 control U+009B)
    assert text == "JEFFREY K. SKILLING (Correo electr\u203anico) <jeff.skilling@enron.com>"
    assert mail.parse(_raw(CORREO)).header("X-To") == text


def test_real_utf8_header_is_utf8_even_where_the_declared_charset_also_decodes_it() -> None:
    raw = _raw(UTF8_TO)
    assert b'charset="GB2312"' in raw and b"\xc3\xbc".decode("gb2312") == "\u7709"  # 眉: GB2312 would fit too
    env = envelope.read(raw)
    assert env.to == ("danglüe@email.com",)
    assert env.subject == "代开各地增值税发票"  # RFC 2047 (GB2312) as before
    assert mail.parse(raw).to == (("", "danglüe@email.com"),)


def test_real_latin1_sender_name_in_from_reads_right() -> None:
    raw = _with_original_from(_raw(FRANCOIS))
    assert b'\r\nFrom: "Fran\xe7ois Ndengwe" <amepya2@hotmail.com>\r\n' in raw
    env = envelope.read(raw)
    assert (env.sender_name, env.sender_addr) == ("François Ndengwe", "amepya2@hotmail.com")
    assert env.problem is None
    # the line-by-line reader (an mbox line in front) reads it the same way
    env = envelope.read(b"From amepya2@hotmail.com Tue May 22 09:56:24 2001\r\n" + raw)
    assert env.sender_name == "François Ndengwe"


def test_import_and_keyword_search_find_the_accented_name(tmp_path: Path) -> None:
    folder = tmp_path / "import"
    folder.mkdir()
    (folder / "francois.eml").write_bytes(_with_original_from(_raw(FRANCOIS)))
    (folder / "utf8.eml").write_bytes(_raw(UTF8_TO))
    (folder / "correo.eml").write_bytes(_raw(CORREO))
    home = tmp_path / "home"
    cfg = config_for(home)
    assert api.import_mail([folder], account=ACCOUNT, config=cfg).added == 3
    indexer.update(cfg)
    with Store(home / "raw.db", readonly=True) as store:
        metas = store.metas(store.all_message_ids())
    by_mid = {m.message_id: m for m in metas.values()}
    francois = by_mid["13841405.1075845189762.JavaMail.evans@thyme"]
    assert (francois.sender_name, francois.sender_addr) == ("François Ndengwe", "amepya2@hotmail.com")
    # from: matches the sender's name as raw.db has it (its body signs "Francois", without the
    # cedilla, so a plain "françois" finds it even when the header was read as "Fran\ufffdois")
    for query in ("from:françois", 'from:"François Ndengwe"', "françois"):
        hits = search(query, config=cfg).hits
        assert [h.id for h in hits] == [francois.id], query
        assert hits[0].sender == "François Ndengwe <amepya2@hotmail.com>"
    hits = search("to:danglüe", config=cfg).hits
    assert [h.message_id for h in hits] == [envelope.read(_raw(UTF8_TO)).message_id]


# ---- the rule, on bytes written here (no real message has these) -------------------------------

@pytest.mark.parametrize(("value", "charset", "text"), [
    (b"M\xfcller caf\xe9", None, "Müller café"),  # no charset: cp1252
    (b"M\xfcller caf\xe9", "iso-8859-1", "Müller café"),
    (b"\x93caf\xe9\x94 \x80", "iso-8859-1", "\u201ccafé\u201d €"),  # ISO-8859-1 read as windows-1252, as clients do
    (b"\xa3\xf3d\xbc", "iso-8859-2", "Łódź"),  # a declared charset that decodes the bytes
    (b"\xf0\xd2\xc9\xd7\xc5\xd4", "KOI8-R", "Привет"),
    (b"\xa3\xf3d\xbc", '"ISO-8859-2"', "Łódź"),
    (b"caf\xe9", "utf-16", "café"),  # not ASCII-compatible: no help, cp1252
    (b"caf\xe9", "x-no-such-charset", "café"),
    (b"caf\xe9", "us-ascii", "café"),
    (b"caf\xe9", "utf-8", "café"),
    (b"\xe6\x97\xa5\xe6\x9c\xac caf\xc3\xa9", "iso-8859-1", "日本 café"),  # valid UTF-8 first
    (b"caf\xc3\xa9 M\xfcller", None, "café Müller"),  # mixed: UTF-8 kept where valid, the rest cp1252
    (b"\x81\x8d\x8f\x90\x9d", None, "\x81\x8d\x8f\x90\x9d"),  # cp1252's five holes: no byte lost
    (b"plain ascii", "iso-8859-2", "plain ascii"),
])
def test_header_text_rule(value: bytes, charset: str | None, text: str) -> None:
    assert envelope.header_text(value, charset) == text


def test_read_uses_the_declared_charset_and_keeps_encoded_words() -> None:
    raw = (b"Subject: =?utf-8?q?caf=C3=A9?= \xa3\xf3d\xbc\r\nFrom: \xa3ukasz <l@example.pl>\r\n"
           b"Content-Type: text/plain;\r\n charset=\"iso-8859-2\"\r\n\r\nbody\r\n")
    env = envelope.read(raw)
    assert (env.subject, env.sender_name) == ("café Łódź", "Łukasz")
    plain = envelope.read(b"Subject: M\xfcller \xff\nTo: J\xfcrgen <j@example.de>, x@example.de\n\n")
    assert plain.subject == "Müller ÿ" and plain.to == ("Jürgen <j@example.de>", "x@example.de")


def test_stdlib_parsed_headers_get_the_declared_charset() -> None:
    import email
    from email.policy import compat32

    msg = email.message_from_bytes(b"Subject: \xa3\xf3d\xbc\nContent-Type: text/plain; charset=iso-8859-2\n\nx",
                                   policy=compat32)
    assert dict(envelope.header_items(msg))["Subject"] == "Łódź"
    assert envelope.message_header(msg, "subject") == "Łódź"
    escaped = dict(msg.raw_items())["Subject"]  # each 8-bit byte a lone surrogate
    assert envelope.decode(escaped) == "£ód¼"  # not told the charset: cp1252
    assert envelope.decode(escaped, "iso-8859-2") == "Łódź"


# ---- mail.py (ParsedMessage's headers and forwarded headers) use the same rule -------------------
# mail.py `_headers`: `return envelope.header_items(msg)`; `_forward_header`:
# `value = envelope.message_header(inner, name)` and `lines.append(f"{name}: {value}")`.

def test_mail_parse_reads_8bit_headers_in_the_declared_charset() -> None:
    p = mail.parse(b"Subject: \xa3\xf3d\xbc\nFrom: \xa3ukasz <l@example.pl>\n"
                   b"Content-Type: text/plain; charset=iso-8859-2\n\nbody\n")
    assert (p.subject, p.sender) == ("Łódź", ("Łukasz", "l@example.pl"))


def test_mail_parse_reads_8bit_headers_of_a_forwarded_message() -> None:
    p = mail.parse(b"Subject: fwd\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: message/rfc822\n\n"
                   b"From: J\xfcrgen <j@example.de>\nSubject: caf\xe9\n\nhello\n--b--\n")
    assert "From: Jürgen <j@example.de>\nSubject: café" in p.quoted
