"""A query's tokens as a tree, with Gmail's grouping and precedence.

Google's "Search operators you can use with Gmail" (support.google.com/mail/answer/7190) documents
`OR` or `{ }` for "any of" (`from:amy OR from:david`, `{from:amy from:david}`), `-` to leave out,
`AND` (the same as a space), `( )` to group (`subject:(dinner movie)`). As Gmail reads them:

- `-` binds tightest: it negates the word, phrase, operator or group right after it;
- `OR` binds tighter than AND, explicit or implied by a space: `a b OR c d` is `a (b OR c) d`;
- `( )` groups anything; `{a b}` is `(a OR b)`; `name:(a b)` gives every word inside to name:.

Never raises: a bracket left open is closed at the end, a stray closing one is text, and an OR or
AND with nothing on one side is searched as a word; each with a warning (oaken.search.query).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, Union

from oaken.search.lexer import Token


@dataclass(frozen=True)
class Term:
    """A word or a quoted phrase, as the person typed it (quoted for FTS5 only when the MATCH is
    built); `prefix`: `deploy*`, any word starting so."""

    text: str
    phrase: bool = False
    prefix: bool = False


@dataclass(frozen=True)
class Cond:
    """An operator read into what it means: a canonical `name` (from, date, label, size, ...), a
    hashable `value`, and `source`, the operator as written (what --explain shows again)."""

    name: str
    value: object
    source: str


@dataclass(frozen=True)
class Not:
    child: Node


@dataclass(frozen=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Node, ...]


Node = Union[Term, Cond, Not, And, Or]  # noqa: UP007 - a runtime alias of forward references


def bounds(value: object) -> tuple[int | None, int | None]:
    """A date or size Cond's (low, high) value."""
    lo, hi = value if isinstance(value, tuple) and len(value) == 2 else (None, None)
    return (lo if isinstance(lo, int) else None, hi if isinstance(hi, int) else None)


class Leaf(Protocol):
    """Reads one token into a leaf (oaken.search.operators.Leaves)."""

    def __call__(self, tok: Token, field: str | None) -> Node | None: ...

    def field(self, name: str) -> str | None:
        """The operator a `name:(...)` group gives its words to; None: they are plain words."""


def conj(items: Sequence[Node | None]) -> Node | None:
    kept: list[Node] = []
    for item in items:
        if isinstance(item, And):
            kept.extend(item.children)
        elif item is not None:
            kept.append(item)
    return None if not kept else kept[0] if len(kept) == 1 else And(tuple(kept))


def disj(items: Sequence[Node | None]) -> Node | None:
    kept: list[Node] = []
    for item in items:
        if isinstance(item, Or):
            kept.extend(item.children)
        elif item is not None:
            kept.append(item)
    return None if not kept else kept[0] if len(kept) == 1 else Or(tuple(kept))


def negate(node: Node | None) -> Node | None:
    """NOT `node`, kept as typed (`-(-a)` stays two NOTs: --explain writes it back so; nnf drops them)."""
    return None if node is None else Not(node)


def _is_word(tok: Token | None, word: str) -> bool:
    return tok is not None and tok.kind == "word" and tok.text == word and not tok.negated


class _Parser:
    def __init__(self, tokens: list[Token], leaf: Leaf, warn: Callable[[str], None]):
        self.tokens, self.leaf, self.warn = tokens, leaf, warn
        self.i = 0

    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def operand_next(self, ahead: int = 0) -> bool:
        """Whether an operand starts `ahead` tokens on (not an end, a closing bracket, OR, AND)."""
        tok = self.peek(ahead)
        return tok is not None and tok.kind != "close" and not (_is_word(tok, "OR") or _is_word(tok, "AND"))

    def sequence(self, field: str | None, closer: str | None) -> list[Node | None]:
        """Operands up to `closer` (or the end), each an OR chain; AND between them is a space."""
        items: list[Node | None] = []
        while (tok := self.peek()) is not None:
            if tok.kind == "close":
                if closer is not None and tok.text == closer:
                    return items
                self.i += 1  # a closing bracket nothing opened: text with no word in it
                continue
            if _is_word(tok, "AND") or _is_word(tok, "OR"):
                if items and self.operand_next(1):
                    self.i += 1
                    if tok.text == "OR":  # after an OR taken as a word: joins what follows all the same
                        items[-1] = disj([items[-1], self.chain(field)])
                    continue  # explicit AND: the same as the space
                self.warn(f"{tok.text} at the start or end of the query or of a group is searched as a word")
                self.i += 1
                # lower case: the word it is searched as, and what --explain writes back (an OR
                # in upper case would join the words beside it when the query is read again)
                items.append(self.leaf(Token(tok.text.lower(), "word", False), field))
                continue
            items.append(self.chain(field))
        if closer is not None:
            self.warn(f"a {'(' if closer == ')' else '{'} is not closed: it is closed at the end of the query")
        return items

    def chain(self, field: str | None) -> Node | None:
        parts = [self.unary(field)]
        while _is_word(self.peek(), "OR") and self.operand_next(1):
            self.i += 1
            parts.append(self.unary(field))
        return disj(parts) if len(parts) > 1 else parts[0]

    def unary(self, field: str | None) -> Node | None:
        tok = self.peek()
        assert tok is not None
        self.i += 1
        if tok.kind == "field":
            opener = self.peek()
            self.i += 1  # the lexer puts the bracket right after
            inner = self.group(self.leaf.field(tok.text), opener.text if opener else "(")
            return negate(inner) if tok.negated else inner
        if tok.kind == "open":
            inner = self.group(field, tok.text)
            return negate(inner) if tok.negated else inner
        return self.leaf(tok, field)

    def group(self, field: str | None, opener: str) -> Node | None:
        closer = ")" if opener == "(" else "}"
        items = self.sequence(field, closer)
        end = self.peek()
        if end is not None and end.kind == "close" and end.text == closer:
            self.i += 1
        return disj(items) if opener == "{" else conj(items)


def tree(tokens: list[Token], leaf: Leaf, warn: Callable[[str], None]) -> Node | None:
    """The query's tree: leaves read by `leaf`, None where nothing was left to search for."""
    return conj(_Parser(tokens, leaf, warn).sequence(None, None))


def nnf(node: Node) -> Node:
    """The same condition with every NOT on a leaf (De Morgan): what filtering reads."""
    if isinstance(node, Not):
        child = node.child
        if isinstance(child, Not):
            return nnf(child.child)
        if isinstance(child, And):
            return disj([nnf(Not(c)) for c in child.children]) or child
        if isinstance(child, Or):
            return conj([nnf(Not(c)) for c in child.children]) or child
        return node
    if isinstance(node, And):
        return conj([nnf(c) for c in node.children]) or node
    if isinstance(node, Or):
        return disj([nnf(c) for c in node.children]) or node
    return node


def positive_terms(node: Node) -> list[Term]:
    """The words and phrases of `node` not under a NOT."""
    if isinstance(node, Term):
        return [node]
    if isinstance(node, (And, Or)):
        return [t for c in node.children for t in positive_terms(c)]
    return []


def needs_text(node: Node) -> bool:
    """Whether every message `node` admits holds one of its positive words (so they can be the
    MATCH that finds its candidates, and rank them)."""
    if isinstance(node, Term):
        return True
    if isinstance(node, And):
        return any(needs_text(c) for c in node.children)
    if isinstance(node, Or):
        return all(needs_text(c) for c in node.children)
    return False
