"""Just enough IMAP for the cold no-change check (nochange.py): connect (implicit TLS, STARTTLS or
loopback plaintext, certificates checked as login.py checks them), LOGIN, one LIST-STATUS, LOGOUT;
on the socket and ssl modules alone.

Why not imapclient or imaplib: importing them costs more than the whole exchange with a local
server. Why it is safe: every answer it does not read exactly as imapclient and oaken/sync/imap.py
read it (a literal it cannot place, a folder name that is a number, a refused command, a
capability missing) raises Refused, and the caller leaves the pass to the full sync. The folder
list it returns is the one Connection.list_folders gives (tests/test_fast_sync.py compares them).
"""

from __future__ import annotations

from oaken.sync.folder_rules import is_selectable, mailbox_id_item, special_use_of, status_items

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold path
if TYPE_CHECKING:
    from typing import Any


class Refused(Exception):
    """Something this session does not handle: the full sync takes the pass."""


class _String(bytes):
    """A quoted string or a literal: text, never a number (imapclient's parser reads only atoms as
    numbers, and NIL only as an atom)."""


class Status:
    """A folder's STATUS, as oaken.sync.imap_syntax.FolderStatus holds it."""

    __slots__ = ("messages", "uidnext", "uidvalidity", "highestmodseq", "mailbox_id")

    def __init__(self, values: dict[bytes, Any]):
        self.messages = values.get(b"MESSAGES")
        self.uidnext = values.get(b"UIDNEXT")
        self.uidvalidity = values.get(b"UIDVALIDITY")
        self.highestmodseq = values.get(b"HIGHESTMODSEQ")
        self.mailbox_id = _mailbox_id(values)


class Listed:
    """A LIST entry with its STATUS, as oaken.sync.imap_results.ServerFolder holds it."""

    __slots__ = ("name", "delimiter", "flags", "subscribed", "status")

    def __init__(
        self, name: str, delimiter: str | None, flags: tuple[str, ...], subscribed: bool, status: Status | None
    ):
        self.name = name
        self.delimiter = delimiter
        self.flags = flags
        self.subscribed = subscribed or name.upper() == "INBOX"
        self.status = status

    @property
    def special_use(self) -> str | None:
        return special_use_of(self.flags)

    @property
    def selectable(self) -> bool:
        return is_selectable(self.flags)

    @property
    def mailbox_id(self) -> str | None:
        return self.status.mailbox_id if self.status is not None else None


class Session:
    """One logged-in session; `caps` as Connection.caps (after the login)."""

    def __init__(self, account: Any, password: str):
        import socket

        timeout = account.timeout_seconds or 60.0
        self._tag = 0
        sock = socket.create_connection((account.host, account.effective_port), timeout=timeout)
        try:
            if account.tls == "implicit":
                sock = self._secure(sock, account)
            self._sock = sock
            self._file = sock.makefile("rb")
            self.greeting = self._line()
            if not self.greeting.startswith(b"* OK"):
                raise Refused(f"greeting {self.greeting[:60]!r}")
            if account.tls == "starttls":
                status, _text, _untagged = self._command(b"STARTTLS")
                if status != b"OK":
                    raise Refused("STARTTLS refused")
                self._file.close()
                self._sock = sock = self._secure(sock, account)
                self._file = sock.makefile("rb")
            self.caps = self._login(account.username, password)
        except BaseException:
            sock.close()
            raise

    @staticmethod
    def _secure(sock: Any, account: Any) -> Any:
        from oaken.sync.credentials import ssl_context

        return ssl_context(account).wrap_socket(sock, server_hostname=account.host)

    def _login(self, username: str, password: str) -> set[str]:
        # as imaplib sends it for imapclient: the user name bare, the password quoted
        if not (_plain(username) and all(c not in username for c in ' (){%*"\\]') and _plain(password)):
            raise Refused("a user name or password imaplib would send otherwise")
        quoted = password.replace("\\", "\\\\").replace('"', '\\"')
        status, text, untagged = self._command(f'LOGIN {username} "{quoted}"'.encode())
        if status != b"OK":
            raise Refused("login refused")  # the full sync logs in again and says why
        caps = _response_code_caps(text)
        if caps is None:
            caps = next((line[1:] for line in untagged if line[:1] == [b"CAPABILITY"]), None)
        if caps is None:
            status, _text, untagged = self._command(b"CAPABILITY")
            caps = next((line[1:] for line in untagged if line[:1] == [b"CAPABILITY"]), None)
            if status != b"OK" or caps is None:
                raise Refused("no capabilities")
        return {c.decode().upper() for c in caps if isinstance(c, bytes)}

    def list_folders(self) -> list[Listed]:
        """Connection.list_folders: one LIST-STATUS where the server has it, else LSUB, LIST and
        one STATUS per subscribed folder, the same commands in the same order."""
        caps = self.caps
        items = status_items(caps, mailbox_id_item(caps, self.greeting))
        if "LIST-STATUS" in caps and "LIST-EXTENDED" in caps:
            special = b" SPECIAL-USE" if "SPECIAL-USE" in caps else b""
            untagged = self._check(b'LIST "" "*" RETURN (SUBSCRIBED' + special + b" STATUS (" + items + b"))")
            statuses = _statuses(untagged)
            return [Listed(n, d, f, "\\Subscribed" in f, statuses.get(n)) for f, d, n in _entries(untagged, b"LIST")]
        subscribed = {n for _f, _d, n in _entries(self._check(b'LSUB "" "*"'), b"LSUB")}
        out = []
        for flags, delim, name in _entries(self._check(b'LIST "" "*"'), b"LIST"):
            sub = name in subscribed
            status = None
            if (sub or name.upper() == "INBOX") and "\\Noselect" not in flags:
                if not name.isascii() or "&" in name:
                    raise Refused("a folder name to write in modified UTF-7")  # imap_utf7.encode's job
                quoted = name.encode().replace(b"\\", b"\\\\").replace(b'"', b'\\"')
                status = _statuses(self._check(b'STATUS "' + quoted + b'" (' + items + b")")).get(name)
            out.append(Listed(name, delim, flags, sub, status))
        return out

    def _check(self, line: bytes) -> list[list[Any]]:
        status, _text, untagged = self._command(line)
        if status != b"OK":
            raise Refused(f"{line.split(b' ', 1)[0].decode()} refused")
        return untagged

    def logout(self) -> None:
        try:
            self._command(b"LOGOUT")
        except (OSError, Refused):
            pass
        finally:
            self._file.close()
            self._sock.close()

    # ---- the wire ----------------------------------------------------------------------------

    def _command(self, line: bytes) -> tuple[bytes, bytes, list[list[Any]]]:
        """(OK|NO|BAD, the tagged line's text, the untagged responses as token lists)."""
        self._tag += 1
        tag = b"L%d" % self._tag
        self._sock.sendall(tag + b" " + line + b"\r\n")
        untagged: list[list[Any]] = []
        while True:
            first = self._line()
            if first.startswith(tag + b" "):
                status, _, text = first[len(tag) + 1 :].partition(b" ")
                return status, text, untagged
            if not first.startswith(b"* "):
                raise Refused(f"unexpected {first[:40]!r}")
            if first.startswith(b"* BYE") and line != b"LOGOUT":
                raise Refused("the server said BYE")
            parts = [first[2:]]
            while parts[-1].endswith(b"}") and b"{" in parts[-1]:  # a literal follows
                size = parts[-1][parts[-1].rindex(b"{") + 1 : -1]
                if not size.isdigit():
                    raise Refused("a literal it cannot read")
                parts.append(self._read(int(size)))
                parts.append(self._line())
            untagged.append(_tokens(parts))

    def _line(self) -> bytes:
        line = self._file.readline(1 << 20)
        if not line.endswith(b"\r\n"):
            raise Refused("the connection ended or a line was too long")
        return line[:-2]

    def _read(self, size: int) -> bytes:
        data = self._file.read(size)
        if len(data) != size:
            raise Refused("the connection ended inside a literal")
        return bytes(data)


def _entries(untagged: list[list[Any]], kind: bytes) -> list[tuple[tuple[str, ...], str | None, str]]:
    """(flags, delimiter, name) of each LIST (or LSUB) response, as Connection._list_entries."""
    out = []
    for parts in untagged:
        if parts[:1] == [kind]:
            if len(parts) != 4 or not isinstance(parts[1], list):
                raise Refused(f"a {kind.decode()} response imapclient would read otherwise")
            flags = tuple(f.decode("utf-8", "replace") if isinstance(f, bytes) else str(f) for f in parts[1])
            delim = parts[2].decode("utf-8", "replace") if isinstance(parts[2], bytes) else None
            out.append((flags, delim, _name(parts[3])))
    return out


def _statuses(untagged: list[list[Any]]) -> dict[str, Status]:
    """Folder name -> STATUS, as oaken.sync.imap_syntax.folder_statuses reads them."""
    out = {}
    for parts in untagged:
        if parts[:1] == [b"STATUS"]:
            if len(parts) != 3 or not isinstance(parts[2], list):
                raise Refused("a STATUS response imapclient would read otherwise")
            values = parts[2]
            out[_name(parts[1])] = Status(dict(zip(values[::2], map(_number, values[1::2]))))
    return out


def _tokens(parts: list[bytes]) -> list[Any]:
    """A response (text, then literal and text in turn) as tokens: bytes for an atom, a quoted
    string or a literal, None for NIL, a list for a parenthesised list."""
    stack: list[list[Any]] = [[]]
    for k, part in enumerate(parts):
        if k % 2:  # a literal, whose {size} ended the text before it
            stack[-1].append(_String(part))
            continue
        text = part[: part.rindex(b"{")] if k + 1 < len(parts) else part
        i, n = 0, len(text)
        while i < n:
            c = text[i : i + 1]
            if c == b" ":
                i += 1
            elif c == b"(":
                stack.append([])
                i += 1
            elif c == b")":
                if len(stack) == 1:
                    raise Refused("unbalanced brackets")
                inner = stack.pop()
                stack[-1].append(inner)
                i += 1
            elif c == b'"':
                out = bytearray()
                i += 1
                while i < n and text[i : i + 1] != b'"':
                    if text[i : i + 1] == b"\\":
                        i += 1
                    out += text[i : i + 1]
                    i += 1
                if i >= n:
                    raise Refused("an unclosed quoted string")
                stack[-1].append(_String(out))
                i += 1
            else:
                j = i
                while j < n and text[j : j + 1] not in (b" ", b"(", b")", b'"'):
                    j += 1
                atom = text[i:j]
                stack[-1].append(None if atom == b"NIL" else atom)
                i = j
    if len(stack) != 1:
        raise Refused("unbalanced brackets")
    return stack[0]


def _name(token: Any) -> str:
    """A folder name as imapclient gives it: modified UTF-7 decoded (imap_utf7.decode); a name
    its parser reads as a number comes back as the same digits."""
    if not isinstance(token, bytes):
        raise Refused("a folder name that is NIL or a list")
    out: list[str] = []
    buffer = bytearray()
    for c in token:
        if c == 0x26 and not buffer:  # &
            buffer.append(c)
        elif c == 0x2D and buffer:  # -
            out.append("&" if len(buffer) == 1 else _utf7(bytes(buffer[1:])))
            buffer = bytearray()
        elif buffer:
            buffer.append(c)
        else:
            out.append(chr(c))
    if buffer:
        out.append(_utf7(bytes(buffer[1:])))
    return "".join(out)


def _utf7(chunk: bytes) -> str:
    try:
        return (b"+" + chunk.replace(b",", b"/") + b"-").decode("utf-7")
    except UnicodeDecodeError:
        raise Refused("a folder name that is not modified UTF-7") from None


def _number(token: Any) -> Any:
    """imapclient's reading of an atom: digits (with no leading zero) are a number."""
    if isinstance(token, bytes) and not isinstance(token, _String) and token.isdigit():
        if token[:1] != b"0" or len(token) == 1:
            return int(token)
    return token


def _mailbox_id(values: dict[bytes, Any]) -> str | None:
    """oaken.sync.imap_syntax.mailbox_id_of on these tokens."""
    for key in (b"MAILBOXID", b"X-GUID"):
        value = values.get(key)
        if isinstance(value, list):
            value = _number(value[0]) if value else None
        if value is not None:
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            return text if text.upper() != "NIL" and text else None
    return None


def _response_code_caps(text: bytes) -> list[bytes] | None:
    """The capabilities of a `[CAPABILITY ...]` response code starting a status line's text."""
    if not text.startswith(b"[CAPABILITY "):
        return None
    end = text.find(b"]")
    return text[12:end].split() if end > 0 else None


def _plain(text: str) -> bool:
    return text.isascii() and text.isprintable()
