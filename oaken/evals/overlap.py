"""`python -m oaken.evals questions`: check a real-mail question set against its mail.

A paraphrase may share at most one content word with each message it targets (subject and
body, quoted text included): more, and it measures keyword search twice. The check reads the
mail itself, through the same parser the index uses, so it needs no index.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from oaken.evals.questions import Question, shared_words, split

MAX_SHARED = 1


@dataclass(frozen=True)
class Overlap:
    question: Question
    shared: tuple[str, ...]  # the most any one of its messages shares


def texts_by_message_id(corpora: Sequence[Path], wanted: set[str]) -> dict[str, str]:
    """Subject and body text of the wanted messages, by Message-ID (angle brackets removed), found
    as `oaken import` finds mail (Maildir, mbox, message files)."""
    from oaken import envelope, mail
    from oaken.importer import ImportReport, discover

    out: dict[str, str] = {}
    for root in corpora:
        for item in discover(Path(root), ImportReport()):
            raw = item.read()
            mid = envelope.read(raw).message_id
            if mid in wanted and mid not in out:
                parsed = mail.parse(raw)
                out[mid] = f"{parsed.subject}\n{parsed.text}"  # text: own words, signature, quoted
    return out


def check(questions: Sequence[Question], corpora: Sequence[Path]) -> list[Overlap]:
    paraphrases = [q for q in questions if q.kind == "paraphrase"]
    texts = texts_by_message_id(corpora, {r for q in paraphrases for r in q.relevant})
    out = []
    for q in paraphrases:
        worst: list[str] = []
        for r in q.relevant:
            if r not in texts:
                raise ValueError(f"{q.id}: relevant <{r}> is not in {', '.join(map(str, corpora))}")
            shared = shared_words(texts[r], q.query)
            if len(shared) > len(worst):
                worst = shared
        out.append(Overlap(q, tuple(worst)))
    return out


def report(questions: Sequence[Question], overlaps: Sequence[Overlap]) -> str:
    dev, test = split(questions)
    lines = [f"{len(questions)} questions: dev {len(dev)}, test {len(test)}"]
    for name, half in (("dev", dev), ("test", test)):
        counts = Counter(q.kind for q in half)
        lines.append(f"  {name}: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    n = Counter(len(o.shared) for o in overlaps)
    lines.append(
        f"paraphrases: {len(overlaps)}; shared content words per paraphrase: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(n.items()))
    )
    for o in overlaps:
        flag = "  OVER" if len(o.shared) > MAX_SHARED else ""
        lines.append(f"  {o.question.id:24} {len(o.shared)} {','.join(o.shared):24} {o.question.query}{flag}")
    return "\n".join(lines)
