"""Near-duplicate messages folded into one hit.

Real mailboxes hold the same text many times: a message in `sent` and again in `sent_items` under
another Message-ID, a form letter sent by a thousand people (Enron holds 1,124 copies of one
petition), a notice mailed to every list. Ten copies of one text fill a page and hide the rest.
The best-ranked copy stands for the others, which it carries as `Hit.copies`.

Two messages are copies when they have the same subject (Re:/Fw: prefixes aside) and their
own words, as 5-word shingles, overlap by `MIN_JACCARD` or more; messages of fewer than
`MIN_WORDS` words are never folded (two "Thanks!" are not one message). Only the messages a
page reaches are compared, walking the ranked list in order, so pages still join up.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence, TypeVar

MIN_WORDS = 20
MIN_JACCARD = 0.8
SHINGLE = 5
_WORD = re.compile(r"[^\W_]+")
_PREFIX = re.compile(r"^\s*((re|fw|fwd|aw|wg|sv|tr)\s*(\[\d+\])?\s*:\s*)+", re.I)

T = TypeVar("T")
Subjects = Callable[[Sequence[int]], dict[int, str]]  # message -> subject
Bodies = Callable[[Sequence[int]], dict[int, str]]  # message -> its own words


def subject_key(subject: str) -> str:
    return " ".join(_WORD.findall(_PREFIX.sub("", subject).lower()))


def shingles(text: str) -> frozenset[int] | None:
    """The text's 5-word shingles, hashed; None when it is too short to be folded."""
    words = _WORD.findall(text.lower())
    if len(words) < MIN_WORDS:
        return None
    # zip over shifted lists makes each shingle's tuple without a slice: 2.2x faster, and a page
    # of a large mailbox may compare dozens of messages sharing a subject (~6 ms of a search at 1M)
    return frozenset(map(hash, zip(*(words[i:] for i in range(SHINGLE)))))


def _alike(a: frozenset[int], b: frozenset[int]) -> bool:
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) < MIN_JACCARD * len(large):  # Jaccard <= |small| / |large|
        return False
    shared = len(small & large)
    return shared >= MIN_JACCARD * (len(small) + len(large) - shared)


def fold(
    order: Sequence[T], message_of: Callable[[T], int], need: int, subjects: Subjects, bodies: Bodies, block: int = 16
) -> tuple[list[T], dict[int, tuple[int, ...]]]:
    """`order` (best first) with each copy removed behind the first of its group, read until
    `need` groups are known (or the list ends); returns the folded list, whole, and for each
    message standing for others the copies it stands for (in rank order). Only subjects are read
    for every message; words and shingles only for messages whose subject another message of the
    window shares (few: a page's subjects mostly differ), so a search pays little for it."""
    kept: list[T] = []
    copies: dict[int, list[int]] = {}
    # subject -> [[message standing for its group, its shingles once made (None: not yet)], ...]
    groups: dict[str, list[list]] = {}
    words: dict[int, str] = {}

    def read_words(ms: list[int]) -> None:
        missing = [m for m in ms if m not in words]
        if missing:
            words.update(bodies(missing))

    i = 0
    while i < len(order) and len(kept) < need:
        chunk = order[i : i + block]
        i += len(chunk)
        known = subjects([message_of(x) for x in chunk])
        for x in chunk:
            m = message_of(x)
            group = groups.setdefault(subject_key(known.get(m, "")), [])
            first = None
            if group:
                read_words([m, *(g[0] for g in group if g[1] is None)])
                sh = shingles(words.get(m, ""))
                for member in group:
                    if sh is None:
                        break
                    if member[1] is None:
                        member[1] = shingles(words.get(member[0], "")) or frozenset()
                    if member[1] and _alike(sh, member[1]):
                        first = member[0]
                        break
            if first is None:
                group.append([m, None])
                kept.append(x)
            else:
                copies.setdefault(first, []).append(m)
    folded = {m for ms in copies.values() for m in ms}
    kept.extend(x for x in order[i:] if message_of(x) not in folded)
    return kept, {m: tuple(ms) for m, ms in copies.items()}


def from_index(index: object) -> tuple[Subjects, Bodies]:
    """fold's `subjects` and `bodies` from index.db: subjects, and the text of the body and
    attachment chunks (the same letter with another invoice attached is another message)."""

    def subjects(messages: Sequence[int]) -> dict[int, str]:
        return index.subjects(messages)  # type: ignore[attr-defined]

    def bodies(messages: Sequence[int]) -> dict[int, str]:
        out: dict[int, list[str]] = {}
        for c in index.chunks_of(messages, kind="embedded"):  # type: ignore[attr-defined]
            out.setdefault(c.message, []).append(c.text)
        return {m: "\n".join(parts) for m, parts in out.items()}

    return subjects, bodies
