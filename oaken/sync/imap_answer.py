"""An IMAP answer of megabytes (a body FETCH) read off the socket: the untagged responses imaplib
would collect, read line by line and literal by literal without imaplib's per-line layers of
regexes, logging and bookkeeping, which cost more than storing the message."""

from __future__ import annotations

import imaplib
import re

from imapclient import IMAPClient

# imaplib's own patterns, so that an answer read here is split exactly as imaplib would split it;
# module attributes that typeshed does not declare
_UNTAGGED: re.Pattern[bytes] = imaplib.Untagged_response  # type: ignore[attr-defined]
_UNTAGGED_STATUS: re.Pattern[bytes] = imaplib.Untagged_status  # type: ignore[attr-defined]
_LITERAL: re.Pattern[bytes] = imaplib.Literal  # type: ignore[attr-defined, assignment]
_RESPONSE_CODE: re.Pattern[bytes] = imaplib.Response_code  # type: ignore[attr-defined]


def read_answer(imap: imaplib.IMAP4, tag: bytes, line: bytes) -> tuple[str, bytes, dict[str, list]]:
    """The answer to the command sent with `tag` (`line`, for errors): (OK|NO, tagged text,
    untagged responses by name), as Connection.finish returns it."""
    readline, read = imap.readline, imap.read
    untagged: dict[str, list] = {}
    abort = imaplib.IMAP4.abort
    while True:
        resp = readline()
        if not resp:
            raise abort("socket error: EOF")
        if not resp.endswith(b"\r\n"):
            raise abort(f"socket error: unterminated line: {resp[:80]!r}")
        resp = resp[:-2]
        if resp.startswith(tag + b" "):
            del imap.tagged_commands[tag]
            typ, _sp, text = resp[len(tag) + 1 :].partition(b" ")
            if typ == b"BAD":
                raise IMAPClient.Error(f"{line[:80]!r}: {typ.decode(errors='replace')} {text!r}")
            return typ.decode(errors="replace"), text, untagged
        m = _UNTAGGED.match(resp)
        if m is not None:
            kind, dat = m.group("type"), m.group("data") or b""
        else:
            m = _UNTAGGED_STATUS.match(resp)
            if m is None:
                if resp.startswith(b"+"):
                    continue  # a continuation nobody asked for: imaplib ignores it too
                raise abort(f"unexpected response: {resp[:80]!r}")
            kind, dat = m.group("type"), m.group("data") + (b" " + m.group("data2") if m.group("data2") else b"")
        entries = untagged.setdefault(kind.decode(), [])
        while dat.endswith(b"}") and (lit := _LITERAL.match(dat)) is not None:
            size = int(lit.group("size"))
            data = read(size)
            if len(data) < size:
                raise abort("socket error: EOF in a literal")
            entries.append((dat, data))
            dat = readline()
            if not dat.endswith(b"\r\n"):
                raise abort(f"socket error: unterminated line: {dat[:80]!r}")
            dat = dat[:-2]
        entries.append(dat)
        if kind == b"BYE":
            raise abort(dat.decode(errors="replace"))
        if kind in (b"OK", b"NO", b"BAD") and (code := _RESPONSE_CODE.match(dat)) is not None:
            untagged.setdefault(code.group("type").decode(), []).append(code.group("data"))
