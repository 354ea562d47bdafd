"""KeywordIndex's ranked list from the text index ([index] keyword_engine = "tantivy").

Tantivy ranks every match by BM25 as FTS5 does, ~30x cheaper a match (docs/tantivy-spike.md):
at a million messages a one-word search 48.8 -> 12.1 ms whole, a question 77.8 -> 16.7
(docs/tantivy-retriever.md). From it come the ranked list, which phrases each ranked chunk holds
when that alone is asked (a question's graded order), and which messages hold a word or phrase
(expressions_present: phrases and exclusions checked on another retriever's candidates): the
filters Tantivy does not hold are checked in index.db on the ranked chunks, and columns,
snippets, `query_within` and listings stay FTS5's and SQLite's.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence, TypeVar

from oaken import log
from oaken.errors import QueryError

if TYPE_CHECKING:
    from oaken.index.keyword.text.ranker import Ranker

T = TypeVar("T")

# The first list is limit x FIRST long: the filters every search has (its account, no spam or
# trash) pass nearly every chunk, and a longer list costs the ranking and the check (at a million
# messages a question's 2,000 cost 13-20 ms against 2-3 for 500). While too few pass and more
# match, the list grows to what the share that passed says is enough, at least x RANK_FIRST; past
# limit x LAST the search ranks with FTS5 inside SQL, which filters as it ranks.
FIRST = 2
LAST = 512


class TextRanking:
    """Mixed into KeywordIndex (reader.py), which provides the rest."""

    path: Path
    weights: tuple[float, ...]
    RANK_FIRST: int

    def _run(self, sql: str, params: Sequence[object] | dict) -> list[tuple]:
        raise NotImplementedError  # KeywordIndex's: its errors say which file and what to do

    def generation(self) -> str:
        raise NotImplementedError  # figures.py's

    def seq(self) -> int:
        raise NotImplementedError  # figures.py's

    def _text_first(
        self, expr: str, conds: list[str], params: list[object], limit: int, exclude: frozenset[int] = frozenset()
    ) -> tuple[list[tuple], int | None] | None:
        """As reader._ranked_first: the filtered best `limit` chunks as (chunk, message, rank) with
        rank = -score, and how many match when every one was ranked; None to rank with FTS5 (no
        text index level with this index.db, or a filter too rare for the widened list).
        `exclude`: messages the text index leaves out itself (a search's rounds past a long
        message: filtered by index.db instead, the list grew past that message's every chunk)."""
        found = self._text_ranker()
        if found is None:
            return None
        k = max(limit, 1) * FIRST
        last = max(limit, 1) * LAST
        where = "".join(" AND " + c for c in conds)
        while True:
            asked = self._text_ask(functools.partial(found.ranked, expr, k, exclude), "ranked with FTS5")
            if asked is None:
                return None
            hits, complete = asked
            # every hit is checked against index.db (and its filters): a chunk id it no longer
            # holds for that message is dropped, never shown as another message's
            ids = json.dumps([c for c, _, _ in hits])
            passing = set(
                self._run(
                    "SELECT c.id, c.message FROM json_each(?) j JOIN chunks c ON c.id = j.value "
                    f"JOIN messages m ON m.id = c.message WHERE 1{where}",
                    [ids, *params],
                )
            )
            kept = [(c, m, -s) for c, m, s in hits if (c, m) in passing]
            kept.sort(key=lambda r: (r[2], r[0]))
            # the last kept ties the last hit read: Tantivy broke that tie by its own order, and
            # chunks of that score may wait past the list (a shallow list must be a deeper one's prefix)
            tied = bool(limit) and len(kept) >= limit and kept[limit - 1][2] == -hits[-1][2]
            if (len(kept) >= limit and not (tied and k < last)) or complete:
                return kept[:limit], (len(hits) if complete else None)
            if k >= last:
                return None
            enough = math.ceil(limit * 1.25 * len(hits) / len(kept)) if kept and not tied else 0
            k = min(last, max(k * self.RANK_FIRST, enough))

    def _text_held(self, expr: str, chunks: Sequence[int], skip: int) -> dict[int, tuple[int, ...]] | None:
        """Which phrases of `expr` each chunk holds (FTS5's numbers, less the subject filter's
        `skip`), from the text index; None for FTS5 to say (not level, failed, or more phrases
        than a score's bits hold)."""
        found = self._text_ranker()
        if found is None:
            return None
        return self._text_ask(lambda: found.held(expr, chunks, skip), "read its phrases from FTS5")

    def _text_present(self, expressions: Sequence[str], messages: Sequence[int]) -> dict[int, set[int]] | None:
        """As `_text_held`, per message and for whole expressions: reader.expressions_present's."""
        found = self._text_ranker()
        if found is None:
            return None
        return self._text_ask(
            lambda: found.present(expressions, messages), "read which messages hold its words from FTS5"
        )

    def _text_ranker(self) -> Ranker | None:
        from oaken.index.keyword.text.ranker import ranker

        return ranker(self.path.parent, self.weights, self.generation(), self.seq())

    def _text_ask(self, ask: Callable[[], T], otherwise: str) -> T | None:
        """`ask` of the text index; None where it fails (FTS5 answers instead)."""
        from oaken.index.keyword.text.ranker import failed
        from oaken.index.keyword.text.schema import text_dir

        try:
            return ask()
        except ValueError as e:  # tantivy-py's error for what it could not read: FTS5 answers
            failed(text_dir(self.path.parent, self.generation()), f"a search could not read the text index ({e})")
            return None
        except QueryError:  # a MATCH the text index cannot read: FTS5's own (it reports what is wrong)
            return None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - a Rust panic (pyo3's PanicException is a BaseException)
            log.get("oaken.index").warning(
                "index.text_search_failed", error=f"{type(e).__name__}: {e}", note=f"this search {otherwise}"
            )
            return None
