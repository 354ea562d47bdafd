"""The email package fed a message in slices of its bytes, with long runs of body lines left out.

Memory (issue #19): parsing holds a few times the message, not ten (scripts/bench_memory.py).
The email package's Parser keeps a StringIO of the whole text at four bytes a character, so it is
fed slices of the bytes instead (`feed`). Long runs of body lines are not fed to it at all but one
marker line each (`read`), as it holds a body as a list of lines and then their join: a large
attachment (only its name and type are indexed) is never copied or decoded, the body of a
single-part message is decoded straight from the bytes (oaken.mail), and any other run is put back
once parsed. tests/test_memory.py checks that what oaken.mail.parse returns is the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from email.message import Message
from email.policy import compat32

FEED = 8192  # what email.parser.Parser hands its feed parser at a time
# A run of body lines from this size on is fed to the email package as one marker line (see read).
ELIDE_MIN = 32 * 1024
_BLANK = re.compile(rb"\n\r?\n")
_HEADER_LINE = re.compile(rb"From |[\x21-\x39\x3b-\x7e]*:|[\t ]")  # email.feedparser.headerRE
MARK = "OakenElidedRun"  # the line that stands for a run: letters and digits, a body line
MARK_RE = re.compile(MARK + r"\d+x")


def feed(raw: bytes, swaps: list[tuple[int, int, bytes]] | None = None) -> Message:
    """email.message_from_bytes(raw, policy=compat32), in the slices its Parser feeds but cut from
    the bytes: the same message, without the Parser's StringIO of the whole text (four bytes a
    character: 120 MB for a 30 MB message). `swaps`: (start, end, line), fed instead of
    raw[start:end] (in order, not overlapping)."""
    from email.feedparser import BytesFeedParser

    parser = BytesFeedParser(policy=compat32)
    pos = 0
    for start, end, line in [*(swaps or ()), (len(raw), len(raw), b"")]:
        for i in range(pos, start, FEED):
            parser.feed(raw[i : min(i + FEED, start)])
        if line:
            parser.feed(line)
        pos = end
    return parser.close()


def long_runs(raw: bytes) -> list[tuple[int, int]]:
    """(start, end) of each run of ELIDE_MIN bytes or more of lines that the email package reads
    as body lines wherever they stand: it starts after a blank line with a line that is neither
    blank nor a header line (so a header block, if one was due there, has ended), and it stops
    before the next line that starts with "--" (a boundary line, maybe). `end` is just past a
    line end."""
    runs = []
    pos = 0
    dashes = {b"\n--": -2, b"\r--": -2}  # where each is next found (-1: nowhere), looked for again once passed
    while (blank := _BLANK.search(raw, pos)) is not None:
        start = blank.end()
        pos = blank.start() + 1
        if (
            raw[start : start + 1] in (b"", b"\r", b"\n")
            or raw.startswith(b"--", start)
            or _HEADER_LINE.match(raw, start)
        ):
            continue
        for dash, at in dashes.items():
            if -1 < at < start or at == -2:
                dashes[dash] = raw.find(dash, start)
        ahead = [at + 1 for at in dashes.values() if at != -1]
        end = min(ahead) if ahead else max(raw.rfind(b"\n", start), raw.rfind(b"\r", start)) + 1
        pos = max(pos, end)  # a blank line inside the run would start a shorter one with the same end
        if end - start >= ELIDE_MIN:
            runs.append((start, end))
    return runs


@dataclass
class Reading:
    msg: Message
    # marker left in an attachment's payload -> how many characters more it stands for there, and
    # in the flattened text of a part that holds that attachment (line ends written as "\n")
    elided: dict[str, tuple[int, int]]
    body_start: int | None = None  # set when the top part's payload still holds markers: raw[body_start:] is it
    # marker -> (start, end) in raw of the base64 run it stands for: an attachment whose words are
    # read (oaken.attachment_text) is decoded from there, never held by the email package as text
    at: dict[str, tuple[int, int]] = field(default_factory=dict)


def read(raw: bytes) -> Reading:
    """The message as feed(raw) reads it, with long runs of body lines (long_runs) fed as one marker
    line each, so the email package never holds them (as str, a list of lines and their join:
    three to six times their size). After parsing, each run is put back where its marker landed,
    except
    - in an attachment no code here decodes (_unread_attachment): left out; mail-parser's size
      of it is corrected (oaken.mail._parse_mime);
    - in the payload of a single-part message: that is the rest of raw, decoded from there
      (oaken.mail._parse).
    A marker anywhere unexpected (a delivery-status block reads blank lines; seen twice or not at
    all) has the whole message read again as it is."""
    runs = long_runs(raw) if len(raw) >= ELIDE_MIN and MARK.encode() not in raw else []
    if not runs:
        return Reading(feed(raw), {})
    swaps: list[tuple[int, int, bytes]] = []
    originals: dict[str, tuple[int, int]] = {}  # marker -> the run less its last line end
    for n, (start, end) in enumerate(runs):
        eol = 2 if raw[end - 2 : end] == b"\r\n" else 1  # the same line end: the parser strips it the same way
        mark = f"{MARK}{n}x"
        swaps.append((start, end, mark.encode() + raw[end - eol : end]))
        originals[mark] = (start, end - eol)
    msg = feed(raw, swaps)
    slots: dict[tuple[int, str], tuple[Message, str, list[str]]] = {}  # where markers landed
    seen: set[str] = set()
    status: set[int] = set()
    for part in msg.walk():
        if part.get_content_type() == "message/delivery-status":
            status.update(id(p) for p in part.walk())
        for slot in ("_payload", "preamble", "epilogue"):
            value = getattr(part, slot, None)
            if not isinstance(value, str) or MARK not in value:
                continue
            marks = MARK_RE.findall(value)
            if (
                id(part) in status
                or seen.intersection(marks)
                or len(set(marks)) != len(marks)
                or not originals.keys() >= set(marks)
            ):
                return Reading(feed(raw), {})
            seen.update(marks)
            slots[id(part), slot] = (part, slot, marks)
    if len(seen) != len(originals):
        return Reading(feed(raw), {})
    reading = Reading(msg, {})
    for part, slot, marks in slots.values():
        value = getattr(part, slot)
        start, end = originals[marks[0]]
        rest = _rest_of(raw, value, marks, originals) if part is msg and slot == "_payload" else None
        if (
            len(marks) == 1
            and slot == "_payload"
            and value.strip() == marks[0]
            and _unread_attachment(part)
            and _ascii(raw, start, end)
        ):  # ASCII: mail-parser counts it as is
            more = end - start - len(marks[0])
            reading.elided[marks[0]] = (more, more - raw.count(b"\r\n", start, end))
            reading.at[marks[0]] = (start, end)
        elif rest is not None:
            reading.body_start = rest
        else:
            for mark in marks:
                start, end = originals[mark]
                before, after = value.split(mark)
                # as the email package decoded them; with nothing before or after, no copy is made
                value = before + str(memoryview(raw)[start:end], "ascii", "surrogateescape") + after
            setattr(part, slot, value)
    return reading


def _ascii(raw: bytes, start: int, end: int) -> bool:
    return all(raw[i : min(i + FEED * 128, end)].isascii() for i in range(start, end, FEED * 128))


def _rest_of(raw: bytes, payload: str, marks: list[str], originals: dict[str, tuple[int, int]]) -> int | None:
    """Where in raw `payload` starts, if it is all the rest of raw (with its runs put back)."""
    start = originals[marks[0]][0] - payload.index(marks[0])
    grown = sum(originals[m][1] - originals[m][0] - len(m) for m in marks)
    return start if len(payload) + grown == len(raw) - start else None


def _unread_attachment(part: Message) -> bool:
    """A part that no code here decodes and that mail-parser lists as an attachment with its wire
    text as the payload: base64, named or marked as an attachment, and not text shown inline. Not a
    multipart or message type either: only a leaf type is written as it is read when mail-parser
    flattens a part that holds it (line ends as "\n")."""
    try:
        if str(
            part.get("content-transfer-encoding", "")
        ).strip().lower() != "base64" or part.get_content_maintype() in ("multipart", "message"):
            return False
        disposition = part.get_content_disposition()
        named = bool(part.get_filename()) or disposition == "attachment"
        if part.get_content_type() in ("text/plain", "text/html"):
            return named and disposition != "inline"
        return named or (bool(part.get("content-id")) and part.get_content_subtype() not in ("html", "plain"))
    except Exception:  # noqa: BLE001 - a header the email package cannot read: keep the part whole
        return False
