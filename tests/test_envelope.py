from __future__ import annotations

import email.utils

import pytest

from oaken import envelope

ADDRESS_LISTS = [
    "Alex Example <alex@example.com>",
    "alex@example.com, Sam <SAM@Example.com>",
    '"Doe, Jane" <jane@example.com>, bob@example.com',
    "undisclosed-recipients:;",
    "Team: a@example.com, b@example.com;",
    "alex@example.com (Alex in a comment)",
    "=?utf-8?q?Andr=C3=A9?= <andre@example.com>",
    "<bare@example.com>",
    "",
    "not an address",
]


@pytest.mark.parametrize("value", ADDRESS_LISTS)
def test_addresses_agree_with_the_stdlib(value: str) -> None:
    expected = [(n.strip(), a.strip().lower())
                for n, a in email.utils.getaddresses([envelope.decode(value)]) if n.strip() or a.strip()]
    assert envelope._addresses([value]) == expected


def test_headers_unfolded_and_mbox_line_skipped() -> None:
    raw = (b"From someone@example.com Mon Mar  4 10:00:00 2024\n"
           b"Subject: a long\n subject line\nFrom: A <a@x.org>\nTo: b@x.org,\n\tc@x.org\n"
           b"Message-ID: <id@x>\nReferences: <p@x>\n <q@x>\n\nbody: not a header\n")
    env = envelope.read(raw)
    assert env.subject == "a long subject line"
    assert env.to == ("b@x.org", "c@x.org")
    assert env.references == ("p@x", "q@x") and env.message_id == "id@x"
    assert env.problem is None


def test_broken_headers_are_flagged_not_fatal() -> None:
    assert envelope.read(b"just some text\n\nmore").problem == "no headers; MissingHeaderBodySeparatorDefect"
    env = envelope.read(b"Subject: ok\nthis line is not a header\nFrom: late@x.org\n\nbody")
    assert env.subject == "ok" and env.problem == "MissingHeaderBodySeparatorDefect"
    assert envelope.read(b"\x00\x01binary").problem.startswith("binary data")
    assert envelope.read(b"Subject: caf\xc3\xa9 \xff\n\n").subject == "caf\u00e9 \u00ff"
