"""The words inside attachments are found (issue #17 item 4): through the real import and indexer,
by keyword (weighed as the file's name is) and by meaning (the vector side embeds them), the hit
naming its file; an attachment that cannot be read is a warning in `oaken status`, never a failed
index. The attachments are real files (tests/data/attachments, origins in its README), sent the
way a mail client sends them: base64, named, under a short covering note."""

from __future__ import annotations

import dataclasses
from email.message import EmailMessage
from pathlib import Path

import apsw
import pytest

from oaken import api
from oaken.config import Config, EmbedderConfig
from oaken.index import embedding, indexer
from oaken.index.keyword import KeywordIndex, index_path
from oaken.search.engine import search
from tests.search_fixtures import ACCOUNT, config_for

FILES = Path(__file__).parent / "data" / "attachments"


def _message(n: int, subject: str, files: list[tuple[str, str]]) -> bytes:
    msg = EmailMessage()
    msg["From"] = "Alex Doe <alex@example.com>"
    msg["To"] = "sam@example.com"
    msg["Subject"] = subject
    msg["Date"] = f"Mon, {n + 1} Jun 2026 09:00:00 +0000"
    msg["Message-ID"] = f"<attach-{n}@example.com>"
    msg.set_content("Here is the file we talked about.\n")
    for name, ctype in files:
        maintype, subtype = ctype.split("/")
        msg.add_attachment((FILES / name).read_bytes(), maintype=maintype, subtype=subtype, filename=name)
    return bytes(msg)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory: pytest.TempPathFactory) -> Config:
    root = tmp_path_factory.mktemp("attach")
    mail = root / "mail"
    mail.mkdir()
    boxes = [
        ("The text you asked for", [("crazyones.pdf", "application/pdf")]),
        ("Minutes and the play", [("blk-paras-and-tables.docx", "application/octet-stream"),
                                  ("Electra.odt", "application/vnd.oasis.opendocument.text")]),
        ("Locked copy", [("crazyones-encrypted-256.pdf", "application/pdf")]),
    ]
    for n, (subject, files) in enumerate(boxes):
        (mail / f"{n}.eml").write_bytes(_message(n, subject, files))
    home = root / "home"
    home.mkdir()
    config = dataclasses.replace(config_for(home), embedder=EmbedderConfig(model="concept"))
    api.import_mail([mail], account=ACCOUNT, config=config)
    indexer.update(config)
    return config


def _subjects(cfg: Config, query: str, **kw: object) -> list[str]:
    return [h.subject for h in search(query, config=cfg, **kw).hits]


def test_words_inside_attachments_find_their_message(cfg: Config) -> None:
    assert _subjects(cfg, "troublemakers") == ["The text you asked for"]  # inside the PDF
    assert _subjects(cfg, "Euripides Electra") == ["Minutes and the play"]  # inside the ODT
    assert _subjects(cfg, '"Donec semper facilisis"') == ["Minutes and the play"]  # inside the docx
    assert _subjects(cfg, "misfits") == ["The text you asked for"]  # the PDF's "ﬁ" ligature


def test_a_hit_names_the_file_its_words_are_in(cfg: Config) -> None:
    hit = search("troublemakers", config=cfg).hits[0]
    assert "crazyones.pdf" in hit.snippet and "troublemakers" in hit.snippet.replace("\x02", "").replace("\x03", "")


def test_the_vector_side_embeds_attachment_chunks(cfg: Config) -> None:
    with KeywordIndex(cfg.data_dir) as index:
        ids = index.chunk_ids("attachment")
        assert ids and ids <= index.chunk_ids("embedded")
    report = embedding.embed_pending(cfg)
    assert report.pending == 0
    from oaken.index.vectors import VectorStore

    stored = set(VectorStore(cfg.data_dir).chunk_messages())
    assert ids <= stored
    hits = search("troublemakers misfits rebels", config=cfg, retrievers=("vector",)).hits
    assert hits and hits[0].subject == "The text you asked for"


def test_an_attachment_that_cannot_be_read_is_a_status_warning(cfg: Config) -> None:
    index = api.status(config=cfg)["index"]
    assert index["attachments_unread"] == 1
    (only,) = index["attachments_unread_list"]
    assert only["subject"] == "Locked copy" and only["why"].startswith("crazyones-encrypted-256.pdf: encrypted")
    assert _subjects(cfg, "Locked") == ["Locked copy"]  # the message itself is indexed


def test_deleting_a_message_with_attachment_chunks_keeps_fts5_whole(cfg: Config, tmp_path: Path) -> None:
    """index.db's FTS5 table reads its text from a view: the attachment column must be what was
    indexed, or FTS5's delete leaves tokens behind (its integrity-check says so)."""
    from oaken.store import open_store

    victim = search("troublemakers", config=cfg).hits[0].id
    with open_store(cfg.data_dir) as raw, raw.transaction():
        raw.delete_messages([victim])
    indexer.update(cfg, keyword_only=True)
    db = apsw.Connection(str(index_path(cfg.data_dir)))
    from oaken.index.keyword import tokenizer

    tokenizer.register(db)
    db.execute("INSERT INTO fts(fts, rank) VALUES ('integrity-check', 1)")
    assert _subjects(cfg, "troublemakers") == []


def test_attachment_text_off_reads_names_only() -> None:
    """[index] attachment_text = false: the parse reads no attachment (names stay indexed)."""
    from oaken import mail

    raw = _message(9, "Off", [("crazyones.pdf", "application/pdf"), ("Electra.odt", "application/octet-stream")])
    assert mail.parse(raw, attachments=False).attachment_texts == ()
    on = mail.parse(raw)
    assert [a.name for a in on.attachment_texts] == ["crazyones.pdf", "Electra.odt"]  # Electra: a long run, elided
    assert [a.name for a in on.attachments] == ["crazyones.pdf", "Electra.odt"]


def test_a_cut_or_hostile_attachment_never_costs_the_message_its_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: a base64 run cut short raised out of the parse (the message fell back to its
    raw MIME text), a lone surrogate in an attachment's text stopped the chunker (the message lost
    its body), and a message of many attachments had no reading budget of its own."""
    from oaken import attachment_text, chunking, mail

    raw = _message(20, "Cut short", [("Electra.odt", "application/vnd.oasis.opendocument.text")])
    head, sep, tail = raw.rpartition(b"\n--")
    cut = head[:-3] + head[-2:] + sep + tail  # one base64 character less at the end of the long run
    parsed = mail.parse(cut)
    assert parsed.problem is None and "Here is the file we talked about." in parsed.body
    assert [a.name for a in parsed.attachments] == ["Electra.odt"]

    assert "\ud800" not in attachment_text.extract("x.txt", "text/plain", b"a", charset="utf-8").text
    assert attachment_text._tidy("report \ud800B budget") == "report \ufffdB budget"
    odd = dataclasses.replace(parsed, attachment_texts=(mail.AttachmentText("x.pdf", "words \ud800 more"),))
    kinds = [c.kind for c in chunking.chunk(odd)]
    assert "body" in kinds  # the message's own words stay, whatever the attachment holds

    monkeypatch.setattr(attachment_text, "MESSAGE_SECONDS", 0.0)
    two = mail.parse(_message(21, "Two", [("crazyones.pdf", "application/pdf"), ("Electra.odt", "application/zip")]))
    assert two.attachment_texts == () and len(two.attachment_warnings) == 2
    assert all("not read" in w for w in two.attachment_warnings)


def test_an_office_file_past_the_xml_budget_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from oaken import attachment_text

    monkeypatch.setattr(attachment_text, "MAX_UNZIPPED", 1000)
    got = attachment_text.extract("Electra.odt", "", (FILES / "Electra.odt").read_bytes())
    assert got.text == "" and got.warning == "Electra.odt: only its first 0 of 1 parts were read (0 MB of XML)"
