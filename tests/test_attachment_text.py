"""The words inside attachments, read from real files (tests/data/attachments, origins in its
README): every format gives its text, and every bad file gives a warning naming it, never an
exception."""

from __future__ import annotations

from pathlib import Path

import pytest

from oaken import attachment_text
from oaken.attachment_text import extract, kind_of

DATA = Path(__file__).parent / "data" / "attachments"


def _read(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_pdf_text_with_its_ligatures_read_as_letters() -> None:
    got = extract("crazyones.pdf", "application/pdf", _read("crazyones.pdf"))
    assert got.warning is None
    assert "Here" in got.text and "troublemakers" in got.text and "square holes" in got.text
    assert "misfits" in got.text  # the PDF writes "ﬁ" as one ligature glyph


def test_an_encrypted_pdf_is_a_warning_naming_it() -> None:
    got = extract("crazyones-encrypted-256.pdf", "application/pdf", _read("crazyones-encrypted-256.pdf"))
    assert got.text == ""
    assert got.warning is not None and got.warning.startswith("crazyones-encrypted-256.pdf: encrypted")


def test_a_cut_pdf_is_a_warning_or_what_could_be_read() -> None:
    """A PDF cut short in transit (the first 60 % of a real one): never an exception."""
    data = _read("crazyones.pdf")
    got = extract("cut.pdf", "application/octet-stream", data[: len(data) * 6 // 10])
    assert got.text or (got.warning is not None and got.warning.startswith("cut.pdf: "))


def test_office_documents_by_their_extension_whatever_the_type() -> None:
    docx = extract("blk-paras-and-tables.docx", "application/octet-stream", _read("blk-paras-and-tables.docx"))
    assert docx.warning is None
    assert "Lorem ipsum dolor sit amet" in docx.text and "Donec semper facilisis" in docx.text
    assert "Text before\nTable" in docx.text  # a table cell is a line of its own
    odt = extract("Electra.odt", "application/vnd.oasis.opendocument.text", _read("Electra.odt"))
    assert odt.warning is None and "Project Gutenberg EBook of Electra" in odt.text and "Euripides" in odt.text
    ods = extract("pythagoras.ods", "", _read("pythagoras.ods"))
    assert ods.warning is None and {"3", "4", "5"} <= set(ods.text.split())


def test_a_zip_that_is_not_an_office_file_and_garbage_are_warnings() -> None:
    assert extract("x.docx", "", b"PK\x03\x04 not really").warning == "x.docx: not a readable office file (not a zip)"
    assert (extract("x.pdf", "", b"%PDF-1.4 nothing else").warning or "").startswith("x.pdf: ")


def test_text_and_html_and_what_is_not_read() -> None:
    assert extract("notes.txt", "text/plain", "café menu".encode("latin-1"), charset="latin-1").text == "café menu"
    html = extract("page.htm", "", b"<html><head><style>p{}</style></head><body><p>Board minutes</p></body></html>")
    assert html.text == "Board minutes"
    assert extract("photo.jpg", "image/jpeg", b"\xff\xd8\xff") == attachment_text.Extracted("")
    assert kind_of("", "application/pdf") == ".pdf" and kind_of("a.bin", "application/zip") is None


def test_the_caps_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attachment_text, "MAX_BYTES", 1000)
    big = extract("crazyones.pdf", "application/pdf", _read("crazyones.pdf"))
    assert big.text == "" and big.warning is not None and "over the" in big.warning
    monkeypatch.setattr(attachment_text, "MAX_BYTES", 20 * 1024 * 1024)
    monkeypatch.setattr(attachment_text, "MAX_CHARS", 5000)
    long = extract("Electra.odt", "", _read("Electra.odt"))
    assert 2500 < len(long.text) <= 5000 and "first 5,000 characters" in (long.warning or "")
