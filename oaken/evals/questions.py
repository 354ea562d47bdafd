"""Questions over the synthetic mailbox, and the question file format for real mail.

Four answerable kinds, each built so that one retriever alone fails on it:
- `exact`: an identifier (invoice number, order number, version, code) among thirty
  look-alikes that differ only in it; meaning cannot tell them apart;
- `paraphrase`: shares no content word with the fact, only concepts; keywords cannot find it;
- `filtered`: only `from:`, `after:` or `label:` tells the message from its eleven copies;
- `mixed`: a ticket number shared by its updates plus a paraphrase of one update's content.
Plus `unanswerable`: about things the mailbox never mentions, or identifiers it does not hold.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from oaken.evals.mailbox import Mailbox, Plant
from oaken.index.concept import concepts_of, content_stems

ANSWERABLE = ("exact", "paraphrase", "filtered", "mixed")
KINDS = (*ANSWERABLE, "unanswerable")

UNANSWERABLE = (
    "What did the vet say about the puppy's vaccinations?",
    "When is my cousin's wedding reception?",
    "Which flowers should we plant in the backyard this spring?",
    "Did I get tickets for the jazz concert?",
    "What rate did the lender offer on the mortgage?",
    "Has the insurer paid the claim for the stolen bike?",
    "What homework did the teacher assign to the kids?",
    "Is the oven in the kitchen still broken?",
    "Who is fixing the leak in the roof?",
    "What time does the marathon start?",
    "Which movie are we watching at the cinema on Saturday?",
    "Did the baby arrive yet?",
    "What novel did the reading group pick?",
    "When is the kitten due for its checkup at the vet?",
    "Did the plumber send a quote for the flooded basement?",
    "How much is the premium on the new insurance policy?",
    "Where is the birthday party for grandma?",
    "What did the mechanic say about the brakes and tyres?",
    "Who won the tennis match at the club?",
    "Is the hurricane forecast to reach the coast?",
    "Which band is playing at the wedding?",
    "Did the landlord agree to repaint the bedroom?",
    "What did the orthodontist recommend for the teeth?",
    "When does the soccer season for the children start?",
)
# Identifiers in the form of the mailbox's, that the mailbox does not hold.
UNANSWERABLE_CODES = (
    "invoice INV-0042",
    "order 000017 shipped",
    "support request HELP-0007",
    "OPS-0001 incident: ssl lapsed?",
)


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    query: str
    relevant: tuple[str, ...]  # Message-IDs without angle brackets; empty when unanswerable


def _filtered_query(p: Plant) -> str:
    s = p.slots
    words = s["subject"].lower()
    if s["by"] == "from":
        return f"from:{s['sender'].lower()} {words}"
    if s["by"] == "label":
        return f"label:{s['label']} {words}"
    return f"{s['by']}:{s['date']} {words}"


def build(mailbox: Mailbox, unanswerable: int | None = None) -> list[Question]:
    """Every planted fact's question, then unanswerable ones; the order follows the seed."""
    out: list[Question] = []
    counts: dict[str, int] = {}
    for p in mailbox.plants:
        counts[p.kind] = counts.get(p.kind, 0) + 1
        qid = f"{p.kind}-{counts[p.kind]:03d}"
        query = _filtered_query(p) if p.kind == "filtered" else p.slots["question"]
        out.append(Question(qid, p.kind, query, p.relevant))
    rng = random.Random(mailbox.seed * 7919 + 1)
    answerable = len(out)
    n = unanswerable if unanswerable is not None else max(8, min(len(UNANSWERABLE) + 4, answerable // 5))
    n_codes = min(len(UNANSWERABLE_CODES), max(1, n // 10))
    pool = rng.sample(UNANSWERABLE, min(n - n_codes, len(UNANSWERABLE))) + list(UNANSWERABLE_CODES[:n_codes])
    for i, q in enumerate(pool, start=1):
        out.append(Question(f"unanswerable-{i:03d}", "unanswerable", q, ()))
    return out


def check_paraphrase(fact: str, question: str) -> list[str]:
    """What makes a paraphrase dishonest: shared content words, or concepts the fact lacks."""
    problems = []
    shared = {w for w in content_stems(question) if any(_near(w, f) for f in content_stems(fact))}
    if shared:
        problems.append(f"shares words {sorted(shared)}")
    if not concepts_of(question):
        problems.append("has no concept")
    return problems


def _near(a: str, b: str) -> bool:
    """Same word for a stemmer of any strength (porter folds more than ours)."""
    n = min(len(a), len(b), 5)
    return a == b or (n >= 4 and a[:n] == b[:n])


def shared_words(text: str, question: str) -> list[str]:
    """The content words a real-mail paraphrase shares with a message it targets (subject and
    body): the issue allows at most one. Words count as shared when a stemmer of any strength
    would fold them together (see _near)."""
    mail = content_stems(text)
    return sorted({w for w in content_stems(question) if any(_near(w, m) for m in mail)})


SPLIT_SEED = 13  # fixed once: the dev/test halves must not move between runs


def split(questions: Sequence[Question], seed: int = SPLIT_SEED) -> tuple[list[Question], list[Question]]:
    """Dev and test halves, stratified by kind, decided by the seed alone (not by file order):
    thresholds and levers are tuned on dev, figures are reported on test."""
    dev: list[Question] = []
    test: list[Question] = []
    for kind in dict.fromkeys(q.kind for q in questions):
        group = sorted((q for q in questions if q.kind == kind), key=lambda q: q.id)
        random.Random(f"{seed}:{kind}").shuffle(group)
        half = (len(group) + 1) // 2
        dev.extend(group[:half])
        test.extend(group[half:])
    return dev, test


def save_jsonl(questions: list[Question], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for q in questions:
            f.write(json.dumps({**asdict(q), "relevant": list(q.relevant)}) + "\n")


def load_jsonl(path: Path) -> list[Question]:
    """One JSON object a line: id, kind, query, relevant (Message-IDs; empty: unanswerable)."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            relevant = tuple(str(r).strip().strip("<>") for r in obj["relevant"])
            kind = str(obj.get("kind") or ("unanswerable" if not relevant else "mixed"))
            out.append(Question(str(obj["id"]), kind, str(obj["query"]), relevant))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(
                f'{path}:{n}: expected {{"id", "kind", "query", "relevant": [Message-IDs]}}, got {line[:80]!r} ({e})'
            ) from None
        if out[-1].kind == "unanswerable" and out[-1].relevant:
            raise ValueError(f"{path}:{n}: kind unanswerable but relevant is not empty")
    if not out:
        raise ValueError(f"{path}: holds no question")
    return out
