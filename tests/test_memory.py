"""Memory (issue #19 item 7): importing a message costs a small multiple of its size plus a fixed
amount. The email package never holds a large attachment (only its name and type are indexed),
nor a large text as a list of lines; what parse returns is the same as when it held them all."""

from __future__ import annotations

import base64
import email
import random
import sys
import tracemalloc
from email.message import Message
from email.policy import compat32
from pathlib import Path

import pytest

from oaken import importer, mail, mail_feed, mail_text
from oaken.api import import_mail
from oaken.config import Config
from oaken.store import open_store

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import bench_memory  # noqa: E402

DATA = Path(__file__).parent / "data"
MB = 1 << 20


def _whole(raw: bytes) -> tuple:
    """What parse returns when the email package reads all of the message."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(mail_feed, "ELIDE_MIN", sys.maxsize)
        return _fields(mail.parse(raw))


def _fields(p: mail.ParsedMessage) -> tuple:
    # mail-parser names an unnamed attachment-disposition part with a random "<10 letters>.txt"
    names = tuple("(random)" if a.name.endswith((".txt", ".rtf")) and len(a.name) == 14 else a.name
                  for a in p.attachments)
    return (p.raw_headers, p.body, p.quoted, p.signature, p.from_html, names,
            tuple((a.content_type, a.size) for a in p.attachments), p.defects, p.problem)


@pytest.mark.parametrize("kind, factor", [("attachments", 0.5), ("plain", 1.5), ("html", 4.5), ("utf8", 3.5)])
def test_parse_holds_a_few_times_the_message(kind: str, factor: float) -> None:
    """Python memory that parse allocates beyond the raw bytes, for a 12 MB message: at most
    `factor` times the message plus 16 MB (the work bounded by MAX_TEXT: HTML read from its start,
    quotes). Measured: 0.6 (5.6 since attachments are read), 16, 52 and 36 MB; before: 83, 92, 145 and 127 MB."""
    raw = bench_memory.build(kind, 12 * MB)
    mail.parse(bench_memory.build(kind, MB))  # the modules a first parse imports (pypdf's ~7 MB) are not the message's
    tracemalloc.start()
    try:
        parsed = mail.parse(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert parsed.problem is None
    assert parsed.body or parsed.quoted
    assert peak < factor * len(raw) + 16 * MB, f"{kind}: {peak / MB:.0f} MB for a {len(raw) / MB:.0f} MB message"
    if kind == "attachments":
        sizes = {a.name: a.size for a in parsed.attachments}
        assert set(sizes) == {"report.pdf", "data.zip"}
        assert _whole(raw) == _fields(parsed)  # the sizes too, as if it had read the attachments


def test_import_of_a_30_mb_message_peaks_at_a_few_times_its_size(tmp_path: Path) -> None:
    """Peak RSS of `oaken import` (keyword index pass included) of a 30 MB message with two
    attachments, less that of a tiny message: 2.5 times the message now, 7.8 before."""
    tiny, big = tmp_path / "tiny.eml", tmp_path / "big.eml"
    tiny.write_bytes(bench_memory.build("tiny", 0))
    big.write_bytes(bench_memory.build("attachments", 30 * MB))
    fixed = bench_memory.peak_rss(tiny, tmp_path / "home-tiny")
    peak = bench_memory.peak_rss(big, tmp_path / "home-big")
    ratio = (peak - fixed) / big.stat().st_size
    assert ratio < 4, f"peak {peak / MB:.0f} MB, fixed {fixed / MB:.0f} MB: {ratio:.1f} x the message"


def _real_mail() -> list[Path]:
    return [p for p in sorted(DATA.rglob("*")) if p.is_file() and p.suffix not in (".md", ".json", ".jsonl")]


def _tree(msg: Message) -> list[tuple]:
    return [(p.get_content_type(), list(p.raw_items()), p._payload if isinstance(p._payload, str) else None, p.preamble,
             p.epilogue, [type(d).__name__ for d in p.defects]) for p in msg.walk()]


def test_real_mail_parses_the_same_with_every_run_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fed from the bytes in slices, the email package reads each real message as
    message_from_bytes does; with every run of body lines left out of it (not only long ones),
    each message parses as when it reads them all."""
    monkeypatch.setattr(mail_feed, "ELIDE_MIN", 1)
    checked = 0
    for path in _real_mail():
        raw = path.read_bytes()
        assert _tree(mail_feed.feed(raw)) == _tree(email.message_from_bytes(raw, policy=compat32)), path
        assert _fields(mail.parse(raw)) == _whole(raw), path
        checked += bool(mail_feed.long_runs(raw))
    assert checked > 100


_LINES = ["hello world", "Note: a header-like line", "From someone", "-- ", "--", "---- dashes", "", " indented",
          "QUJDREVGRw==", "AAAA", "=20soft=", "\u041f\u0440\u0438\u0432\u0435\u0442", ">> quoted", "<p>html</p>",
          ":colon"]


def _lines(rng: random.Random, b64: bool) -> list[str]:
    if b64:
        text = base64.b64encode(rng.randbytes(rng.randrange(300))).decode()
        return [text[i:i + 76] for i in range(0, len(text), 76)] + [""] * rng.randrange(2)
    return [rng.choice(_LINES) for _ in range(rng.randrange(12))]


def _part(rng: random.Random, depth: int) -> list[str]:
    """A MIME entity of random shape: nested, forwarded, delivery-status, named or not, boundaries
    missing or unclosed."""
    kind = rng.choice(["text/plain", "text/html", "application/pdf", "image/png", "multipart/mixed",
                       "multipart/alternative", "message/rfc822", "message/delivery-status"])
    if depth > 2 and kind.startswith(("multipart", "message")):
        kind = "text/plain"
    boundary = rng.choice(["b", "bb", "b1x", ""]) + str(depth)
    lines = []
    if kind.startswith("multipart"):
        lines.append(f'Content-Type: {kind}; boundary="{boundary}"' if rng.random() < 0.9 else f"Content-Type: {kind}")
    else:
        params = ["", '; name="f.bin"', "; charset=utf-8", "; charset=koi8-r"]
        lines.append(f"Content-Type: {kind}" + rng.choice(params))
    cte = rng.choice(["", "base64", "7bit", "8bit", "quoted-printable"])
    if cte:
        lines.append(f"Content-Transfer-Encoding: {cte}")
    if rng.random() < 0.3:
        lines.append("Content-Disposition: " + rng.choice(["attachment", 'attachment; filename="a.pdf"', "inline",
                                                            'inline; filename="x.txt"']))
    if rng.random() < 0.2:
        lines.append("Content-ID: <cid@example.com>")
    lines.append("")
    if kind.startswith("multipart") and "boundary" in lines[0]:
        lines += _lines(rng, False)
        for _ in range(rng.randrange(4)):
            lines += [f"--{boundary}" + rng.choice(["", " "]), *_part(rng, depth + 1)]
        if rng.random() < 0.8:
            lines.append(f"--{boundary}--")
        lines += _lines(rng, False)
    elif kind == "message/rfc822":
        lines += ["From: a@example.com", "Subject: inner", *_part(rng, depth + 1)]
    elif kind == "message/delivery-status":
        lines += ["Reporting-MTA: dns; example.com", "", "Action: failed", *_lines(rng, rng.random() < 0.5)]
    else:
        lines += _lines(rng, cte == "base64" or rng.random() < 0.2)
    return lines


def test_mime_of_every_shape_parses_the_same_with_every_run_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mail_feed, "ELIDE_MIN", 1)
    for seed in range(400):
        rng = random.Random(seed)
        lines = ["From: a@example.com", "Subject: shapes", "MIME-Version: 1.0", *_part(rng, 0)]
        if rng.random() < 0.2:  # line ends of every kind in one message
            text = "".join(line + rng.choice(["\r\n", "\n", "\r", "\r\r\n"]) for line in lines)
        else:
            text = rng.choice(["\r\n", "\n", "\r"]).join(lines) + rng.choice(["", "\n"])
        raw = text.encode("utf-8")
        assert _fields(mail.parse(raw)) == _whole(raw), seed


def test_a_text_far_beyond_the_limit_keeps_the_same_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the start of a text far longer than MAX_TEXT is tidied: the text kept is the same, line
    ends, control characters and quoted-printable debris (decided on the whole text) included."""
    monkeypatch.setattr(mail_text, "MAX_TEXT", 200)
    monkeypatch.setattr(mail_text, "CUT", 400)
    pieces = ["word ", "\r\n", "\r", "\n\n", "=\r\n", "=\r", "=20", "=09", "=3D", "=2", "=", "\x00", "\x01",
              "caf\u00e9 "]
    for seed in range(300):
        rng = random.Random(seed)
        text = "".join(rng.choices(pieces[:rng.randrange(2, len(pieces) + 1)], k=rng.randrange(300, 3000)))
        if rng.random() < 0.5:  # debris only far past the start
            text = text.replace("=", "-") + "".join(rng.choices(pieces, k=50))
        assert mail_text.cut(text)[:200] == mail_text.tidy(text)[:200], seed


def test_a_batch_is_stored_in_groups_of_bounded_size(oaken_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each message its own group: the same import as in one group."""
    monkeypatch.setattr(importer, "GROUP_BYTES", 1)
    report = import_mail([DATA / "foundation" / "notmuch-default"], config=Config())
    assert report.seen == 53 and report.added == 52 and report.new_locations == 1


def test_mbox_flags_come_from_the_header_block(oaken_home: Path, tmp_path: Path) -> None:
    big = bench_memory.build("attachments", MB).replace(b"\r\n", b"\n")
    box = tmp_path / "box.mbox"
    box.write_bytes(b"From a@example.com Mon Jan  1 10:00:00 2024\n" + big.replace(b"MIME-Version", b"Status: RO\n"
                    b"X-Status: F\nMIME-Version", 1) + b"\nFrom b@example.com Mon Jan  1 10:00:00 2024\n"
                    b"From: b@example.com\nSubject: unread\nMessage-ID: <unread@example.com>\n\nnew\n")
    assert import_mail([box], config=Config()).added == 2
    with open_store(oaken_home) as store:
        metas = store.metas(store.all_message_ids()).values()
        assert sorted((m.subject, m.unread, m.starred) for m in metas) == [("attachments", False, True),
                                                                          ("unread", True, False)]
