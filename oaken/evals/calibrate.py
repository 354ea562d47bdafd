"""Calibrating low_confidence: the cosine under which a search with no strong keyword hit is
flagged, per embedder model ([search] low_confidence_cosine).

Tuned on one seed's mailbox, reported on another's: a threshold tuned and scored on the same
questions would flatter itself. The rule: flag as many unanswerable questions as possible while
flagging at most `max_answerable` (10 %) of the answerable ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from oaken.config import Config
from oaken.evals.questions import Question
from oaken.evals.retrieval import ask

STEPS = 7  # bisection steps: the threshold is found to 1/128


@dataclass(frozen=True)
class Calibration:
    model: str
    threshold: float
    unanswerable_flagged: float  # share of unanswerable questions flagged low_confidence
    answerable_flagged: float  # share of answerable questions flagged (false alarms)
    questions: int


def with_threshold(config: Config, threshold: float) -> Config:
    table = {**config.search.low_confidence_cosine, config.embedder.model: threshold}
    return dataclasses.replace(config, search=dataclasses.replace(config.search, low_confidence_cosine=table))


def flagged(question: Question, config: Config, threshold: float) -> bool:
    return ask(question, "hybrid", with_threshold(config, threshold)).low_confidence


def critical(question: Question, config: Config) -> float:
    """The smallest threshold at which the question is flagged (flags only grow with it);
    above 1 when no threshold flags it (a strong keyword hit)."""
    if not flagged(question, config, 1.0):
        return 1.01
    if flagged(question, config, 0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(STEPS):
        mid = (lo + hi) / 2
        if flagged(question, config, mid):
            hi = mid
        else:
            lo = mid
    return hi


def rates(criticals: Sequence[tuple[Question, float]], threshold: float) -> tuple[float, float]:
    un = [c for q, c in criticals if not q.relevant]
    an = [c for q, c in criticals if q.relevant]
    share = lambda xs: round(sum(1 for c in xs if c <= threshold) / len(xs), 4) if xs else 0.0  # noqa: E731
    return share(un), share(an)


def tune(questions: Sequence[Question], config: Config, max_answerable: float = 0.10) -> Calibration:
    crit = [(q, critical(q, config)) for q in questions]
    best = 0.0
    for t in sorted({0.0, *(c for _q, c in crit if c <= 1.0)}):
        un, an = rates(crit, t)
        if an <= max_answerable:
            best = t
    un, an = rates(crit, best)
    return Calibration(config.embedder.model, best, un, an, len(crit))


def report(questions: Sequence[Question], config: Config, threshold: float) -> Calibration:
    """The rates a threshold gives on other questions (another seed's mailbox)."""
    cfg = with_threshold(config, threshold)
    results = [(q, ask(q, "hybrid", cfg).low_confidence) for q in questions]
    un = [f for q, f in results if not q.relevant]
    an = [f for q, f in results if q.relevant]
    return Calibration(
        config.embedder.model,
        threshold,
        round(sum(un) / len(un), 4) if un else 0.0,
        round(sum(an) / len(an), 4) if an else 0.0,
        len(results),
    )


# ---- the meaning floor ([search] vector_min_cosine) -----------------------------------------------

FLOOR_GRID = tuple(round(0.10 + 0.02 * i, 2) for i in range(21))  # 0.10 .. 0.50


@dataclass(frozen=True)
class Floor:
    model: str
    floor: float
    answer_lost: float  # share of paraphrase questions whose only right answers in the top 10 the floor removes
    unanswerable_hits: float  # hits returned on average for unanswerable questions
    questions: int


def with_floor(config: Config, floor: float | None) -> Config:
    table = {k: v for k, v in config.search.vector_min_cosine.items() if k != config.embedder.model}
    if floor is not None:
        table[config.embedder.model] = floor
    return dataclasses.replace(config, search=dataclasses.replace(config.search, vector_min_cosine=table))


def _lost(question: Question, unfloored: Sequence[str], floored: Sequence[str]) -> bool:
    rel = set(question.relevant)
    return bool(rel & set(unfloored[:10])) and not rel & set(floored[:10])


def lost_share(
    paraphrases: Sequence[Question], config: Config, floor: float, unfloored: dict[str, Sequence[str]]
) -> float:
    """The share of paraphrase questions whose every right answer in the top 10 the floor removes."""
    cfg = with_floor(config, floor)
    lost = sum(_lost(q, unfloored[q.id], ask(q, "hybrid", cfg).ranked) for q in paraphrases)
    return round(lost / len(paraphrases), 4) if paraphrases else 0.0


def mean_hits(unanswerable: Sequence[Question], config: Config, floor: float) -> float:
    """Hits listed on average for questions the mail does not answer."""
    cfg = with_floor(config, floor)
    hits = sum(len(ask(q, "hybrid", cfg).ranked) for q in unanswerable)
    return round(hits / len(unanswerable), 2) if unanswerable else 0.0


def _unfloored(paraphrases: Sequence[Question], config: Config) -> dict[str, Sequence[str]]:
    base = with_floor(config, None)
    return {q.id: ask(q, "hybrid", base).ranked for q in paraphrases}


def tune_floor(questions: Sequence[Question], config: Config, max_lost: float = 0.05) -> Floor:
    """The highest floor that removes the only right answer of at most `max_lost` of the
    paraphrase questions: it keeps unrelated mail out of lists as far as that allows."""
    para = [q for q in questions if q.kind == "paraphrase"]
    unfloored = _unfloored(para, config)
    best, best_lost = FLOOR_GRID[0], lost_share(para, config, FLOOR_GRID[0], unfloored)
    for f in FLOOR_GRID[1:]:
        lost = lost_share(para, config, f, unfloored)
        if lost > max_lost:
            break
        best, best_lost = f, lost
    none = [q for q in questions if not q.relevant]
    return Floor(config.embedder.model, best, best_lost, mean_hits(none, config, best), len(questions))


def report_floor(questions: Sequence[Question], config: Config, floor: float) -> Floor:
    para = [q for q in questions if q.kind == "paraphrase"]
    none = [q for q in questions if not q.relevant]
    return Floor(
        config.embedder.model,
        floor,
        lost_share(para, config, floor, _unfloored(para, config)),
        mean_hits(none, config, floor),
        len(questions),
    )
