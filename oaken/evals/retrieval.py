"""Scoring: recall@1/@5/@10, MRR and nDCG@10 per kind of question and retriever, and how each
retriever behaves on questions the mail does not answer.

Relevance is binary (a message answers or it does not); a question may have several relevant
messages, so recall@k is the share of them in the first k. Rankings are lists of Message-IDs.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from oaken.config import Config
from oaken.evals.ingest import EvalError
from oaken.evals.questions import ANSWERABLE, Question

RETRIEVERS = ("keyword", "vector", "hybrid")
KS = (1, 5, 10)


@dataclass(frozen=True)
class Ranking:
    """What one retriever returned for one question."""

    question: Question
    retriever: str
    ranked: tuple[str, ...]  # Message-IDs, best first
    low_confidence: bool


@dataclass(frozen=True)
class Score:
    """One row of the table: a retriever on one kind of question (or "overall")."""

    retriever: str
    kind: str
    questions: int
    recall_at_1: float | None = None
    recall_at_5: float | None = None
    recall_at_10: float | None = None
    mrr: float | None = None
    ndcg_at_10: float | None = None
    mean_hits: float | None = None  # unanswerable: hits returned on average
    low_confidence_rate: float | None = None  # share of questions flagged low_confidence


def recall_at(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    rel = set(relevant)
    return len(rel & set(ranked[:k])) / len(rel) if rel else 0.0


def reciprocal_rank(ranked: Sequence[str], relevant: Iterable[str]) -> float:
    rel = set(relevant)
    for i, mid in enumerate(ranked, start=1):
        if mid in rel:
            return 1.0 / i
    return 0.0


def ndcg_at(ranked: Sequence[str], relevant: Iterable[str], k: int = 10) -> float:
    rel = set(relevant)
    if not rel:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, mid in enumerate(ranked[:k], start=1) if mid in rel)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(rel), k) + 1))
    return dcg / ideal


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _answerable_row(retriever: str, kind: str, rows: Sequence[Ranking]) -> Score:
    return Score(
        retriever,
        kind,
        len(rows),
        recall_at_1=_mean([recall_at(r.ranked, r.question.relevant, 1) for r in rows]),
        recall_at_5=_mean([recall_at(r.ranked, r.question.relevant, 5) for r in rows]),
        recall_at_10=_mean([recall_at(r.ranked, r.question.relevant, 10) for r in rows]),
        mrr=_mean([reciprocal_rank(r.ranked, r.question.relevant) for r in rows]),
        ndcg_at_10=_mean([ndcg_at(r.ranked, r.question.relevant, 10) for r in rows]),
        low_confidence_rate=_mean([float(r.low_confidence) for r in rows]),
    )


def score(rankings: Sequence[Ranking]) -> list[Score]:
    """Rows per retriever: each answerable kind present, "overall" (answerable), "unanswerable"."""
    out: list[Score] = []
    retrievers = [r for r in RETRIEVERS if any(x.retriever == r for x in rankings)]
    retrievers += sorted({x.retriever for x in rankings} - set(retrievers))
    kinds = [k for k in ANSWERABLE if any(x.question.kind == k for x in rankings)]
    kinds += sorted({x.question.kind for x in rankings} - set(kinds) - {"unanswerable"})
    for retriever in retrievers:
        mine = [x for x in rankings if x.retriever == retriever]
        for kind in kinds:
            rows = [x for x in mine if x.question.kind == kind]
            out.append(_answerable_row(retriever, kind, rows))
        answerable = [x for x in mine if x.question.relevant]
        if answerable:
            out.append(_answerable_row(retriever, "overall", answerable))
        none = [x for x in mine if not x.question.relevant]
        if none:
            out.append(
                Score(
                    retriever,
                    "unanswerable",
                    len(none),
                    mean_hits=_mean([float(len(x.ranked)) for x in none]),
                    low_confidence_rate=_mean([float(x.low_confidence) for x in none]),
                )
            )
    return out


def find(scores: Sequence[Score], retriever: str, kind: str) -> Score:
    for s in scores:
        if s.retriever == retriever and s.kind == kind:
            return s
    raise KeyError(f"no score for retriever {retriever!r} on kind {kind!r}")


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def table(scores: Sequence[Score]) -> str:
    """A Markdown table: the same text is printed and written."""
    head = ("retriever", "kind", "n", "R@1", "R@5", "R@10", "MRR", "nDCG@10", "hits", "low_conf")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scores:
        cells = (
            s.retriever,
            s.kind,
            str(s.questions),
            _cell(s.recall_at_1),
            _cell(s.recall_at_5),
            _cell(s.recall_at_10),
            _cell(s.mrr),
            _cell(s.ndcg_at_10),
            "" if s.mean_hits is None else f"{s.mean_hits:.1f}",
            _cell(s.low_confidence_rate),
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def answered_by(meta: dict) -> str:
    """One line saying which path the vector side took (a figure from the exact path alone says
    nothing of a mailbox past vector_ann_min_rows)."""
    v = meta.get("vectors") or {}
    if v.get("path") == "ann":
        return f"Vector side answered by the ANN index ({v['rows']:,} vectors, past vector_ann_min_rows {v['ann_min_rows']:,})."
    if v.get("path") == "exact":
        return (
            f"Vector side answered by exact search ({v['rows']:,} vectors, under vector_ann_min_rows "
            f"{v['ann_min_rows']:,}): a smaller mailbox than the ANN index serves."
        )
    return "Vector side: none."


def ranked_by(meta: dict) -> str:
    """Which engine ranked the keyword side, and whether the text index was level (else FTS5 did)."""
    text = meta.get("text") or {}
    if not text:
        return "Keyword side ranked by FTS5."
    return f"Keyword side ranked by {'Tantivy (the text index)' if text.get('state') == 'ok' else 'FTS5'}: text index {text}."


def write(
    scores: Sequence[Score], rankings: Sequence[Ranking], out_dir: Path, name: str, meta: dict
) -> tuple[Path, Path]:
    """evals/results/<name>.json (scores, settings and every ranking) and <name>.md (the table)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / f"{name}.json", out_dir / f"{name}.md"
    doc = {
        "meta": meta,
        "scores": [asdict(s) for s in scores],
        "rankings": [
            {
                "question": r.question.id,
                "kind": r.question.kind,
                "query": r.question.query,
                "retriever": r.retriever,
                "relevant": list(r.question.relevant),
                "ranked": list(r.ranked),
                "low_confidence": r.low_confidence,
            }
            for r in rankings
        ],
    }
    json_path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    settings = ", ".join(f"{k}={v}" for k, v in meta.items() if not isinstance(v, (dict, list)))
    md_path.write_text(
        f"# Retrieval eval: {name}\n\n{settings}\n\n{answered_by(meta)}\n{ranked_by(meta)}\n\n{table(scores)}\n",
        encoding="utf-8",
    )
    return json_path, md_path


# ---- asking the engine ---------------------------------------------------------------------------


ENGINE_RETRIEVERS = {"keyword": ("keyword",), "vector": ("vector",), "hybrid": ("keyword", "vector")}


def ask(question: Question, retriever: str, config: Config, limit: int = 10) -> Ranking:
    """One question through `oaken.search`, answered by one retriever (`retrievers=`) or both."""
    from oaken.search.engine import search

    if retriever not in ENGINE_RETRIEVERS:
        raise ValueError(f"retriever {retriever!r}: expected one of {', '.join(RETRIEVERS)}")
    response = search(question.query, limit=limit, retrievers=ENGINE_RETRIEVERS[retriever], config=config)
    if response.degraded:
        raise EvalError(
            f"{retriever} search degraded ({response.degraded_reason}) on {question.query!r}; "
            "the scores would measure the fallback, not the retriever"
        )
    return Ranking(question, retriever, _expanded(response.hits, config), response.low_confidence)


def _expanded(hits: Sequence, config: Config) -> tuple[str, ...]:
    """Message-IDs in rank order, a folded hit's copies right after it: each still takes a place,
    so folding is scored as the user sees it (one line for the copies) only where it frees places
    for other mail, never as finding more."""
    out: list[str] = []
    folded = [c for h in hits for c in h.copies]
    mids: dict[int, str] = {}
    if folded:
        from oaken.store import open_store

        with open_store(config.data_dir, readonly=True) as store:
            mids = {c: store.meta(c).message_id or f"oaken:{c}" for c in folded}
    for h in hits:
        out.append(h.message_id or f"oaken:{h.id}")
        out.extend(mids[c] for c in h.copies)
    return tuple(out)


def run(questions: Sequence[Question], config: Config, retrievers: Sequence[str] = RETRIEVERS) -> list[Ranking]:
    out: list[Ranking] = []
    for retriever in retrievers:
        out.extend(ask(q, retriever, config) for q in questions)
    return out
