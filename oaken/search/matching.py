"""FTS5 MATCH expressions built from a parsed query, and graded matching.

Nothing a person types reaches FTS5 as syntax: every word and phrase is quoted (FTS5 string
quoting, `"` doubled), and the operators between them (AND, OR) are written here. FTS5 numbers
the phrases of an expression in the order they appear; the plan keeps which clause each phrase
belongs to, so a chunk's matched phrases tell how many of the query's clauses it holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from oaken.index.keyword import quote
from oaken.search.query import ParsedQuery, Term

# A query longer than this is cut (with a warning): bm25 over hundreds of phrases helps no one.
MAX_CLAUSES = 64


@dataclass(frozen=True)
class MatchPlan:
    expression: str  # the FTS5 MATCH, every token quoted
    clause_of_phrase: tuple[int, ...]  # FTS5 phrase number -> graded clause number, -1 for a required phrase
    clauses: tuple[str, ...]  # the graded clauses as text, for explanations
    required: int  # how many graded clauses a hit must hold
    question: bool
    warnings: tuple[str, ...] = ()
    # A lookup's clauses ORed, same phrase numbers: finds a message whose words sit in different
    # chunks; `alternatives` (each clause's terms as FTS5 strings) then check it holds every clause.
    spread: str = ""
    alternatives: tuple[tuple[str, ...], ...] = ()
    # the graded clauses that are identifiers (a token with a digit) or phrases: meaning cannot
    # stand in for them, so a question none of whose hits holds them is low_confidence
    exact_clauses: frozenset[int] = frozenset()

    def held(self, phrases: Iterable[int]) -> frozenset[int]:
        """The graded clauses held, given the FTS5 phrase numbers a chunk matched."""
        out = set()
        for p in phrases:
            if 0 <= p < len(self.clause_of_phrase) and self.clause_of_phrase[p] >= 0:
                out.add(self.clause_of_phrase[p])
        return frozenset(out)


def fts(term: Term) -> str:
    """A term as FTS5 reads it: quoted (nothing inside is syntax), `*` after it for a prefix."""
    return quote(term.text) + ("*" if term.prefix else "")


def _clause_text(clause: tuple[Term, ...]) -> str:
    return " OR ".join(f'"{t.text}"' if t.phrase else t.text + ("*" if t.prefix else "") for t in clause)


class _Writer:
    """Writes an expression while counting the phrases FTS5 will number."""

    def __init__(self) -> None:
        self.owner: list[int] = []

    def clause(self, clause: tuple[Term, ...], owner: int) -> str:
        self.owner.extend([owner] * len(clause))
        parts = [fts(t) for t in clause]
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"


def plan(q: ParsedQuery, min_match: float) -> MatchPlan | None:
    """The MATCH for a query's free text; None when it has none (a date-ordered listing).

    A lookup needs every clause (AND). A question needs its phrases and at least `min_match` of
    its distinct clauses that are not only stop words (OR, then counted per hit).
    """
    if not q.clauses:
        return None
    warnings: list[str] = []
    clauses = list(q.clauses)
    if len(clauses) > MAX_CLAUSES:
        warnings.append(f"the query has {len(clauses)} words and phrases; only the first {MAX_CLAUSES} are searched")
        clauses = clauses[:MAX_CLAUSES]
    w = _Writer()
    if not q.question:
        parts = [w.clause(c, i) for i, c in enumerate(clauses)]
        return MatchPlan(
            " AND ".join(parts),
            tuple(w.owner),
            tuple(map(_clause_text, clauses)),
            len(clauses),
            False,
            tuple(warnings),
            spread=" OR ".join(parts) if len(parts) > 1 else "",
            alternatives=tuple(tuple(fts(t) for t in c) for c in clauses),
        )
    required_phrases = [c for c in clauses if len(c) == 1 and c[0].phrase]
    content = [c for c in q.content_clauses() if c in clauses and c not in required_phrases]
    if not content:  # every word a stop word ("what is it?"): count them all
        content = list(dict.fromkeys(c for c in clauses if c not in required_phrases))
    musts = [w.clause(c, -1) for c in required_phrases]
    anys = [w.clause(c, i) for i, c in enumerate(content)]
    any_expr = anys[0] if len(anys) == 1 else "(" + " OR ".join(anys) + ")"
    expr = " AND ".join([*musts, any_expr]) if anys else " AND ".join(musts)
    need = max(1, math.ceil(min_match * len(content) - 1e-9)) if content else 0
    exact = frozenset(
        i for i, c in enumerate(content) if any(t.phrase or any(ch.isdigit() for ch in t.text) for t in c)
    )
    return MatchPlan(
        expr, tuple(w.owner), tuple(map(_clause_text, content)), need, True, tuple(warnings), exact_clauses=exact
    )


def exclusion_terms(q: ParsedQuery) -> tuple[str, ...]:
    """What a message must not hold anywhere (-word, -"phrase", -deploy*), as FTS5 strings."""
    return tuple(dict.fromkeys(fts(t) for t in q.excluded))


__all__ = ["MatchPlan", "plan", "quote", "fts", "exclusion_terms", "MAX_CLAUSES"]
