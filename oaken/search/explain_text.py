"""A query's tree written back as a query, for --explain: brackets where the tree has groups, so a
person sees how it was read (`a b OR c` shows as `a (b OR c)`), and reading the text again gives
the same tree (a property test holds it to that)."""

from __future__ import annotations

import re

from oaken.search.grammar import And, Cond, Node, Not, Or, Term
from oaken.search.lexer import lex

_NAME_VALUE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(.*)", re.S)


def render(node: Node) -> str:
    if isinstance(node, Term):
        if node.phrase:
            return f'"{node.text}"'
        text = node.text + ("*" if node.prefix else "")
        if _one_word(text):
            return text
        # `name:"a value"` with a name that is not an operator: searched as the words it holds,
        # and written back as typed so that it reads back as the same one term
        named = _NAME_VALUE.fullmatch(node.text)
        if named and '"' not in named[2]:
            return f'{named[1]}:"{named[2]}{"*" if node.prefix else ""}"'
        return text
    if isinstance(node, Cond):
        return node.source
    if isinstance(node, Not):
        inner = render(node.child)
        return f"-{_group(inner)}" if isinstance(node.child, (And, Or, Not)) else f"-{inner}"
    if isinstance(node, And):
        return " ".join(_group(render(c)) if isinstance(c, Or) else render(c) for c in node.children)
    return " OR ".join(_group(render(c)) if isinstance(c, And) else render(c) for c in node.children)


def _one_word(text: str) -> bool:
    tokens, _ = lex(text)
    return len(tokens) == 1 and tokens[0].kind == "word" and tokens[0].text == text and not tokens[0].negated


def _group(inner: str) -> str:
    """`inner` in brackets; a space before the closing one when the last word would take it as its
    own (`f(` then `)` would read back as the word `f()`)."""
    text = f"({inner})"
    tokens, _ = lex(text)
    return text if tokens and tokens[-1].kind == "close" and tokens[-1].text == ")" else f"({inner} )"
