"""A few NUL or control bytes in a real message (a broken client or gateway) leave it mail: it is
parsed and its body found, the stray bytes dropped. Only data that is mostly not text is refused
as binary, and that is still stored, flagged with its problem."""

from __future__ import annotations

import random
from pathlib import Path

from oaken import envelope, mail
from oaken.api import import_mail
from oaken.config import Config
from oaken.index import indexer
from oaken.index.keyword import KeywordFilters, quote
from oaken.store import open_store
from tests.index_fixtures import open_index, raw

OUTLOOK = Path(__file__).parent / "data" / "foundation" / "malformed" / "mail_outlook_1"


def _with_stray_bytes() -> bytes:
    data = raw("notmuch-03.eml")
    for word, broken in ((b"LWN article", b"LWN\x00 article\x00"),
                         (b"mutt and mairix", b"mutt and\x00\x00 mai\x01rix")):
        assert data.count(word) == 1
        data = data.replace(word, broken)
    return data


def _import(tmp_path: Path, cfg: Config, files: dict[str, bytes]) -> dict[str, int]:
    """Import `files` (name -> bytes) as one folder; Oaken's id of each, by name."""
    inbox = tmp_path / "mail" / "INBOX"
    inbox.mkdir(parents=True)
    for name, data in files.items():
        (inbox / name).write_bytes(data)
    report = import_mail([inbox], account="work", config=cfg)
    assert report.added == len(files)
    with open_store(tmp_path / "oaken-home") as store:
        account = store.account_id("work")
        return {name: store.find_message(account, envelope.read(data).message_id, envelope.content_hash(data))
                for name, data in files.items()}


def test_a_message_with_stray_nul_and_control_bytes_is_parsed_and_its_body_found(tmp_path: Path,
                                                                                 index_cfg: Config) -> None:
    data = _with_stray_bytes()
    ids = _import(tmp_path, index_cfg, {"stray.eml": data})
    indexer.update(index_cfg, keyword_only=True)
    with open_index(index_cfg) as idx:
        for word in ("mairix", "lwn"):  # "mai\x01rix": the control byte dropped, not a word break
            hits = idx.query(quote(word), KeywordFilters(), 10)
            assert [h.message for h in hits] == [ids["stray.eml"]], word
            assert "body" in hits[0].columns
    with open_store(tmp_path / "oaken-home") as store:
        assert store.meta(ids["stray.eml"]).problem is None
    parsed = mail.parse(data)
    assert "mutt and mairix" in parsed.body and "\x00" not in parsed.body and "\x01" not in parsed.body


def test_a_short_message_with_two_nul_bytes_is_mail() -> None:
    data = b"From: a@example.com\r\nSubject: hi\r\n\r\nsee you at\x00 the qu\x00ay\r\n"
    assert envelope.read(data).problem is None
    parsed = mail.parse(data)
    assert parsed.problem is None and parsed.body == "see you at the quay"


def test_binary_data_is_still_stored_flagged_and_not_indexed(tmp_path: Path, index_cfg: Config) -> None:
    junk = random.Random(19).randbytes(6000)  # compressed or encrypted bytes: ~10% of them not text
    files = {
        "outlook.msg": OUTLOOK.read_bytes(),
        "junk.eml": b"Message-ID: <junk@example.com>\r\nSubject: junk\r\n\r\n" + junk,
        "headless.eml": b"\x00\x01binary",
    }
    ids = _import(tmp_path, index_cfg, files)
    with open_store(tmp_path / "oaken-home") as store:
        for name, message in ids.items():
            assert (store.meta(message).problem or "").startswith("binary data"), name
            assert store.raw(message) == files[name]
    for data in files.values():
        parsed = mail.parse(data)
        assert parsed.problem and parsed.problem.startswith("binary data") and parsed.body == ""
    assert mail.parse(files["junk.eml"]).subject == "junk"  # the headers are still read
