"""Reciprocal Rank Fusion: a message scores the sum of weight / (rrf_k + rank) over the lists
it appears in. Only ranks are used, so BM25 scores and cosine similarities are never compared.

A list cut at depth D (more items lay past it) says of an item it does not hold only that its
rank is past D, not that it has none: with the plain sum, an item just past the cut lost the
list's whole share, weight / (rrf_k + D + 1), while one at D kept it, a cliff larger than the gaps
between the first ranks. So a cut list's shares are measured from that floor: weight *
(1 / (rrf_k + rank) - 1 / (rrf_k + D + 1)), which orders items as giving every item past the cut
the share of rank D + 1 would (the same constant for all), and falls to 0 at the cut.

Pure: the caller filters and collapses each list to messages first (ranks count from 1 after
that) and folds exact_boost into the keyword weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence


@dataclass(frozen=True)
class Contribution:
    retriever: str
    rank: int  # 1-based, in that retriever's collapsed list
    weight: float
    value: float  # weight / (rrf_k + rank), less weight / (rrf_k + depth + 1) for a cut list


@dataclass(frozen=True)
class FusedItem:
    id: int
    score: float
    contributions: tuple[Contribution, ...]  # one per list holding the id, in the order of `lists`

    def rank_in(self, retriever: str) -> int | None:
        return next((c.rank for c in self.contributions if c.retriever == retriever), None)


def rrf_fuse(
    lists: Mapping[str, Sequence[int]],
    weights: Mapping[str, float],
    rrf_k: int,
    cut: Mapping[str, int] | None = None,
) -> list[FusedItem]:
    """Fuse ranked id lists, best first. `cut`: the depth each list that was cut short was cut at
    (more items lay past it); a list not named there is whole.

    An id repeated within one list counts at its first place (later places are ignored and do
    not shift the ranks after them). Ties go to the id with the better best rank, then to the one
    whose best rank is in the earlier list, then to the smaller id: the order is deterministic."""
    if rrf_k < 1:
        raise ValueError(f"rrf_k: expected 1 or more, got {rrf_k}")
    missing = [name for name in lists if name not in weights]
    if missing:
        raise ValueError(f"rrf_fuse: no weight for retriever {', '.join(map(repr, missing))}")
    found: dict[int, list[Contribution]] = {}
    order = {name: i for i, name in enumerate(lists)}
    for name, ids in lists.items():
        weight = float(weights[name])
        depth = (cut or {}).get(name)
        floor = weight / (rrf_k + depth + 1) if depth is not None else 0.0
        rank = 0
        seen: set[int] = set()
        for item in ids:
            if item in seen:
                continue
            seen.add(item)
            rank += 1
            found.setdefault(item, []).append(Contribution(name, rank, weight, weight / (rrf_k + rank) - floor))
    fused = [FusedItem(i, sum(c.value for c in cs), tuple(cs)) for i, cs in found.items()]
    fused.sort(key=lambda f: (-f.score, *min((c.rank, order[c.retriever]) for c in f.contributions), f.id))
    return fused
