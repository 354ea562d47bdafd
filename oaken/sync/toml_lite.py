"""A reader of the plain TOML a config file is usually written in (by hand, or by `oaken init`
through tomli-w), for the cold no-change check: importing tomllib costs more CPU than that
check's whole exchange with the server.

Plain means: `[table]` and `[a.b]` headers of bare keys; `key = value` with a bare key; values
that are basic strings (with TOML's escapes), literal strings, decimal integers, decimal floats
(`5.0`), true, false, or arrays of one kind of those (over several lines too); comments; blank
lines. `loads` returns what tomllib.loads returns for such a file, and None for anything else (a
dotted or quoted key, an inline table, a multi-line string, a date, an exponent, a repeated key
or table, a value TOML refuses), so that the caller reads the file with tomllib.
tests/test_fast_sync.py compares the two.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold path
if TYPE_CHECKING:
    from typing import Any

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class _NotPlain(Exception):
    """The text is outside the plain subset (or not TOML): tomllib decides."""


def loads(text: str) -> dict[str, Any] | None:
    """tomllib.loads(text) for a plain file, else None."""
    try:
        return _Reader(text.replace("\r\n", "\n")).document()
    except (_NotPlain, IndexError, ValueError):
        return None


class _Reader:
    def __init__(self, text: str):
        if any((c < " " and c not in "\t\n") or c == "\x7f" for c in text):
            raise _NotPlain  # a control character (or a lone CR): tomllib says what TOML allows
        self.text = text
        self.i = 0

    def document(self) -> dict[str, Any]:
        root: dict[str, Any] = {}
        table = root
        headers: set[tuple[str, ...]] = set()
        while True:
            self._skip(newlines=True)
            if self.i >= len(self.text):
                return root
            if self.text[self.i] == "[":
                end = self.text.index("]", self.i)
                path = tuple(part.strip(" \t") for part in self.text[self.i + 1 : end].split("."))
                if path in headers or not all(_bare(p) for p in path):
                    raise _NotPlain  # also [[array of tables]]: its first part is "[a"
                headers.add(path)
                self.i = end + 1
                table = root
                for part in path:
                    table = table.setdefault(part, {})
                    if not isinstance(table, dict):
                        raise _NotPlain
            else:
                eq = self.text.index("=", self.i)
                key = self.text[self.i : eq].strip(" \t")
                if not _bare(key) or key in table:
                    raise _NotPlain
                self.i = eq + 1
                self._skip()
                table[key] = self._value()
            self._end_of_line()

    def _skip(self, newlines: bool = False) -> None:
        """Spaces and tabs; with `newlines`, also line ends and comments."""
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c in " \t" or (newlines and c == "\n"):
                self.i += 1
            elif newlines and c == "#":
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            else:
                return

    def _end_of_line(self) -> None:
        self._skip()
        if self.i < len(self.text) and self.text[self.i] == "#":
            end = self.text.find("\n", self.i)
            self.i = len(self.text) if end < 0 else end
        if self.i < len(self.text) and self.text[self.i] != "\n":
            raise _NotPlain

    def _value(self) -> Any:
        text, c = self.text, self.text[self.i]
        if c == '"' or c == "'":
            if text.startswith(c * 3, self.i):
                raise _NotPlain  # a multi-line string
            return self._basic() if c == '"' else self._literal()
        if c == "[":
            self.i += 1
            items: list[Any] = []
            while True:
                self._skip(newlines=True)
                if text[self.i] == "]":
                    self.i += 1
                    return items
                item = self._value()
                if items and type(item) is not type(items[0]):
                    raise _NotPlain  # an array of mixed kinds: left to tomllib
                items.append(item)
                self._skip(newlines=True)
                if text[self.i] == ",":
                    self.i += 1
                elif text[self.i] != "]":
                    raise _NotPlain
        end = self.i
        while end < len(text) and text[end] not in " \t\n,]#":
            end += 1
        word, self.i = text[self.i : end], end
        return _scalar(word)

    def _literal(self) -> str:
        end = self.text.index("'", self.i + 1)
        body = self.text[self.i + 1 : end]
        if "\n" in body:
            raise _NotPlain
        self.i = end + 1
        return body

    def _basic(self) -> str:
        text, out, i = self.text, [], self.i + 1
        while text[i] != '"':
            c = text[i]
            if c == "\n":
                raise _NotPlain
            if c != "\\":
                out.append(c)
                i += 1
                continue
            e = text[i + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                i += 2
            elif e in "uU":
                size = 4 if e == "u" else 8
                digits = text[i + 2 : i + 2 + size]
                if len(digits) != size or not all(d in "0123456789abcdefABCDEF" for d in digits):
                    raise _NotPlain
                code = int(digits, 16)
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise _NotPlain
                out.append(chr(code))
                i += 2 + size
            else:
                raise _NotPlain
        self.i = i + 1
        return "".join(out)


def _bare(key: str) -> bool:
    return bool(key) and all(c in _BARE for c in key)


def _scalar(word: str) -> Any:
    if word == "true":
        return True
    if word == "false":
        return False
    sign, digits = (word[0], word[1:]) if word[:1] in ("+", "-") else ("", word)
    whole, dot, fraction = digits.partition(".")
    if not whole or not set(whole) <= _DIGITS or (len(whole) > 1 and whole[0] == "0"):
        raise _NotPlain  # also no value at all, a date, 1_000, 0x10, inf
    if not dot:
        return int(sign + whole)
    if not fraction or not set(fraction) <= _DIGITS:
        raise _NotPlain
    return float(sign + whole + "." + fraction)
