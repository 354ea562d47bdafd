"""IDLE (RFC 2177): wait on one folder until the server announces a change or the time is up.

Not imapclient's `idle_check`: it puts the socket in non-blocking mode and reads lines through
imaplib's buffered reader until a read would block. On a TLS socket a line whose end has not
arrived yet makes that read raise `SSLWantReadError` inside `readline`, and CPython's
`BufferedReader` then drops the part of the line it had already taken from its buffer. `idle_done`
later reads the line's tail (`FLAGS ())`, `)`) and imaplib aborts with "unexpected response": a
server that writes one response in several TLS records (pymap does) broke IDLE whenever the
records arrived apart, which a loaded machine makes common. Here the socket stays blocking:
`select` (or bytes already buffered) says that a response has begun, and the whole line is then
read with the connection's timeout, so no byte is dropped.
"""

from __future__ import annotations

import imaplib
import io
import re
import select
import ssl
import time
from typing import TYPE_CHECKING, Callable, cast

if TYPE_CHECKING:
    import socket

    from oaken.sync.imap import Connection

# an untagged response that says the folder changed (new mail, expunges, flags)
_EVENT = re.compile(rb"^\* (?:\d+ (?:EXISTS|EXPUNGE|FETCH)|VANISHED)\b", re.IGNORECASE)
_BYE = re.compile(rb"^\* BYE\b", re.IGNORECASE)
_LITERAL = re.compile(rb"\{(\d+)\}$")


def idle_wait(conn: Connection, folder: str, timeout: float, on_started: Callable[[], None] | None = None) -> bool:
    """IDLE on `folder` for up to `timeout` seconds; True as soon as the server reports a change,
    False when the time is up with none. `on_started` is called once the server listens (from then
    on it announces every change). A dead link or a server's BYE raises (IMAPClient.AbortError,
    OSError, TimeoutError): the caller reconnects and syncs, so nothing announced is lost."""
    if conn.selected != folder:
        conn.client.select_folder(folder, readonly=True)
        conn.selected = folder
    conn.client.idle()
    if on_started is not None:
        on_started()
    imap = conn.client._imap
    sock = conn.client.socket()
    deadline = time.monotonic() + timeout
    changed = False
    try:
        while not changed and _response_begun(imap, sock, deadline):
            response = _read_response(imap)
            if _BYE.match(response):
                raise imaplib.IMAP4.abort(f"IDLE on {folder}: the server closed the session: {response[:200]!r}")
            changed = _EVENT.match(response) is not None
    except ValueError as e:  # the socket or its file closed under the wait (the daemon stopping)
        raise imaplib.IMAP4.abort(f"IDLE on {folder}: the connection was closed ({e})") from None
    _text, more = conn.client.idle_done()  # the responses that came meanwhile, then the tagged OK
    return changed or any(_EVENT.match(b"* " + _joined(r)) for r in more)


def _response_begun(imap: imaplib.IMAP4, sock: socket.socket, deadline: float) -> bool:
    """Wait until the first byte of a response can be read (True) or the deadline passes (False);
    raises at the end of the stream."""
    readable = False
    while True:
        ready = _buffered(imap, sock)
        if ready:
            return True
        if ready == b"" and readable:  # select said readable, yet nothing came: the end of the stream
            raise imaplib.IMAP4.abort("socket error: EOF during IDLE")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        readable = bool(select.select([sock], [], [], remaining)[0])


def _buffered(imap: imaplib.IMAP4, sock: socket.socket) -> bytes | None:
    """What can be read without waiting: bytes (at least one), b"" (nothing now, or the end of the
    stream), or None (a TLS record without data yet). `peek` hands out what is buffered without
    a read, or makes one read into an empty buffer, so an error there cannot drop a byte; the
    socket is non-blocking only for that one call."""
    timeout = sock.gettimeout()
    file = cast(io.BufferedReader, imap.file)  # socket.makefile("rb"), typed loosely by typeshed
    sock.setblocking(False)
    try:
        return file.peek(1)
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return None
    finally:
        sock.settimeout(timeout)


def _read_response(imap: imaplib.IMAP4) -> bytes:
    """One whole response (its line, and the literals and lines that follow a `{n}`), blocking
    with the connection's timeout: a response that has begun ends within it, or the link is dead."""
    line = _line(imap)
    parts = [line]
    while (literal := _LITERAL.search(line)) is not None:
        size = int(literal.group(1))
        data = imap.read(size)
        if len(data) < size:
            raise imaplib.IMAP4.abort("socket error: EOF in a literal during IDLE")
        line = _line(imap)
        parts += [data, line]
    return b"".join(parts)


def _line(imap: imaplib.IMAP4) -> bytes:
    line = imap.readline()
    if not line:
        raise imaplib.IMAP4.abort("socket error: EOF during IDLE")
    if not line.endswith(b"\r\n"):
        raise imaplib.IMAP4.abort(f"socket error: unterminated line during IDLE: {line[:80]!r}")
    return line[:-2]


def _joined(parsed: tuple) -> bytes:
    """An untagged response as imapclient parsed it, e.g. (2, b'EXISTS'), back as b'2 EXISTS'."""
    return b" ".join(x if isinstance(x, bytes) else str(x).encode() for x in parsed)
