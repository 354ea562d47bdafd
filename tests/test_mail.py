"""Parsing real mail: the author's words apart from quotes and signatures, HTML as text,
attachments by name and type, defects, and no input that makes parse raise."""

from __future__ import annotations

import email
from email.policy import compat32

from hypothesis import given, settings
from hypothesis import strategies as st

from oaken import mail, quotes
from tests.index_fixtures import INDEX_DATA, raw


def test_reply_above_original_message_keeps_the_original_apart() -> None:
    p = mail.parse(raw("enron-lay-inbox-461.eml"))
    assert p.body.startswith("Flowers have been ordered")
    assert "Original Message" not in p.body and "birthday" not in p.body
    assert "Sharon Lay's birthday" in p.quoted
    assert p.sender == ("", "jessica@lplpi.com")
    assert p.subject == "RE: Flowers"


def test_lotus_notes_forward_is_quoted() -> None:
    p = mail.parse(raw("enron-lay-sent-4.eml"))
    assert p.body == "Here it is!!  Have a great day!!  Stay warm."
    assert "Board Presentation Package" in p.quoted


def test_inline_reply_keeps_the_authors_lines_between_quotes() -> None:
    p = mail.parse(raw("notmuch-41.eml"))
    assert "Welcome, Lars!" in p.body and "Notmuch works just fine with maildir" in p.body
    assert "mairix" not in p.body and "mairix" in p.quoted  # the original's words are quoted here
    assert "wrote:" in p.quoted


def test_signature_after_dash_dash_space_is_kept_apart() -> None:
    p = mail.parse(raw("notmuch-23.eml"))
    assert p.signature
    assert p.signature not in p.body


def test_non_english_and_other_quote_forms() -> None:
    cases = {
        "Passt.\n\nAm 03.03.2024 um 10:00 schrieb Alex Müller <a@x.de>:\n> Das Budget ist 5 Millionen.\n": "Passt.",
        "D'accord.\n\nLe lun. 4 mars 2024 à 09:12, Marie <m@x.fr> a écrit :\n> Le budget est prêt.\n": "D'accord.",
        "Vale.\n\nEl lun, 4 mar 2024 a las 9:12, Ana (<a@x.es>) escribió:\n> El presupuesto.\n": "Vale.",
        "ok\n\n---------- Forwarded message ---------\nFrom: A <a@x>\nDate: Mon\nSubject: s\n\nold text\n": "ok",
        "ok\n\n________________________________\nFrom: A\nSent: Monday\nTo: B\nSubject: s\n\nold text\n": "ok",
        "ok\n\n-----Ursprüngliche Nachricht-----\nVon: A\nGesendet: Montag\n\nalter Text\n": "ok",
        "see below\n\n> a quoted line with no attribution\n> and another\n": "see below",
    }
    for text, own in cases.items():
        split = quotes.split(text)
        assert split.body == own, text
        assert split.quoted, text


def test_text_without_quotes_is_all_body() -> None:
    text = "Just a note -- nothing quoted here.\nFrom: the desk of Bob, hello\n"
    assert quotes.split(text) == quotes.Split(text.strip(), "", "")


def test_html_only_message_becomes_text_without_styles() -> None:
    p = mail.parse(raw("mailparser-test-6.eml"))
    assert p.from_html
    assert "Профессионалы.ru" in p.body
    for markup in ("<", "{", "font-family", "color:"):
        assert markup not in p.body, markup
    assert any(a.content_type.startswith("image/") for a in p.attachments)


def test_html_to_text_drops_scripts_and_styles_and_keeps_blocks() -> None:
    html = ("<html><head><title>T</title><style>p {color: red}</style></head><body><p>Hello <b>bold</b>"
            " caf&eacute;</p><script>var secret = 1;</script><div>Second<br>line</div></body></html>")
    text = mail.html_to_text(html)
    assert "Hello bold café" in text
    assert "secret" not in text and "color" not in text and "T" not in text.split()
    assert text.index("Hello") < text.index("Second") < text.index("line")


def test_attachments_by_name_and_type() -> None:
    p = mail.parse(raw("notmuch-05.eml"))
    assert [(a.name, a.content_type) for a in p.attachments] == [
        ("0001-Deal-with-situation-where-sysconf-_SC_GETPW_R_SIZE_M.patch", "text/x-diff")]
    assert "sysconf(_SC_GETPW_R_SIZE_MAX)" not in p.text  # the patch's contents are not text of the message
    t = mail.parse(raw("mailparser-test-3.eml"))
    assert ("message.txt", "text/plain") in [(a.name, a.content_type) for a in t.attachments]
    assert "Firebox" not in t.text


def test_defects_are_recorded() -> None:
    p = mail.parse(raw("cpython-msg-15.eml"))
    assert any(d.startswith("StartBoundaryNotFoundDefect") for d in p.defects)
    assert p.problem is None  # a defect is not a failure: the text was read


def test_encoded_headers_and_accents() -> None:
    p = mail.parse(raw("notmuch-53.eml"))
    assert p.subject == "Essai accentué"
    assert p.date is not None and p.message_id


def test_quoted_printable_debris_is_undone() -> None:
    p = mail.parse(raw("enron-lay-business-2.eml"))
    assert "=20" not in p.text and "=\n" not in p.text
    assert "common statement" in " ".join(p.text.split())


def test_text_matches_mail_parser() -> None:
    """Oaken picks the body parts itself (a single text part without mail-parser at all); the text
    must be what mail-parser reads from those parts."""
    import mailparser

    checked = 0
    for path in sorted(INDEX_DATA.glob("*.eml")):
        data = path.read_bytes()
        msg = email.message_from_bytes(data, policy=compat32)
        expected = [t for t in mailparser.MailParser(message=msg).text_plain if t.strip()]
        forwards = any(p.get_content_type() == "message/rfc822" for p in msg.walk())  # quoted by Oaken
        if not expected or forwards or any(a.content_type.startswith("text/") for a in mail.parse(data).attachments):
            continue
        ours = mail.parse(data)
        theirs = quotes.split(mail.tidy("\n\n".join(expected)))
        assert (ours.body, ours.quoted, ours.signature) == (theirs.body, theirs.quoted, theirs.signature), path.name
        checked += 1
    assert checked >= 6


def test_every_test_message_parses() -> None:
    for path in sorted(INDEX_DATA.glob("*.eml")):
        p = mail.parse(path.read_bytes())
        assert p.problem is None, (path.name, p.problem)
        assert p.body or p.quoted or p.attachments, path.name


def test_binary_data_is_flagged_not_raised() -> None:
    p = mail.parse(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\x00\x00" + bytes(range(256)) * 8)
    assert p.problem and "binary" in p.problem
    assert p.body == ""


def test_deeply_nested_multipart_yields_headers_and_a_problem() -> None:
    depth = 3000
    parts = [b"From: alex@example.com\r\nSubject: Nested doom\r\nMIME-Version: 1.0\r\n"]
    for i in range(depth):
        parts.append(b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (i, i))
    parts.append(b"Content-Type: text/plain\r\n\r\ninnermost words\r\n")
    p = mail.parse(b"".join(parts))
    assert p.problem and "RecursionError" in p.problem
    assert p.subject == "Nested doom"
    assert p.sender == ("", "alex@example.com")


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2000))
def test_parse_never_raises_on_bytes(data: bytes) -> None:
    p = mail.parse(data)
    assert isinstance(p.body, str) and isinstance(p.quoted, str)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=500))
def test_parse_never_raises_on_header_shaped_text(text: str) -> None:
    data = ("Subject: " + text + "\r\nFrom: " + text[:40] + "\r\nContent-Type: multipart/mixed; boundary=" +
            text[:10] + "\r\n\r\n" + text).encode("utf-8", "surrogateescape")
    p = mail.parse(data)
    assert isinstance(p.subject, str)


def test_message_forwarded_as_rfc822_is_quoted_with_its_headers() -> None:
    p = mail.parse(raw("cpython-msg-46.eml"))
    assert p.body == ""
    assert "Testing email forwarding with Groupwise" in p.quoted
    assert 'From: "Dr. Sender" <sender@example.net>' in p.quoted
