"""KeywordIndex's ranked list from the text index ([index] keyword_engine = "tantivy").

Tantivy ranks every match by BM25 as FTS5 does, ~30x cheaper a match (docs/tantivy-spike.md):
at a million messages a one-word search 48.8 -> 12.1 ms whole, a question 77.8 -> 16.7
(docs/tantivy-retriever.md). Only the ranked list comes from it: the filters Tantivy does not
hold are checked in index.db on the ranked chunks, and which phrases and columns a chunk holds,
snippets, exclusions and listings stay FTS5's and SQLite's, so the answers are built as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from oaken import log
from oaken.errors import QueryError

# the ranked list is widened x RANK_FIRST while too few of it pass the filters and more match;
# past WIDENINGS the search ranks with FTS5 inside SQL, which filters as it ranks
WIDENINGS = 2


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
        self, expr: str, conds: list[str], params: list[object], limit: int
    ) -> tuple[list[tuple], int | None] | None:
        """As reader._ranked_first: the filtered best `limit` chunks as (chunk, message, rank) with
        rank = -score, and how many match when every one was ranked; None to rank with FTS5 (no
        text index level with this index.db, or a filter too rare for the widened list)."""
        from oaken.index.keyword.text.ranker import failed, ranker
        from oaken.index.keyword.text.schema import text_dir

        generation = self.generation()
        found = ranker(self.path.parent, self.weights, generation, self.seq())
        if found is None:
            return None
        k = max(limit, 1) * self.RANK_FIRST
        where = "".join(" AND " + c for c in conds)
        for _ in range(WIDENINGS + 1):
            try:
                hits, complete = found.ranked(expr, k)
            except ValueError as e:  # tantivy-py's error for what it could not read: FTS5 answers
                failed(text_dir(self.path.parent, generation), f"a search could not read the text index ({e})")
                return None
            except QueryError:  # a MATCH the text index cannot read: FTS5's own (it reports what is wrong)
                return None
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:  # noqa: BLE001 - a Rust panic (pyo3's PanicException is a BaseException)
                log.get("oaken.index").warning(
                    "index.text_search_failed", error=f"{type(e).__name__}: {e}", note="this search ranked with FTS5"
                )
                return None
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
            if len(kept) >= limit or complete:
                kept.sort(key=lambda r: (r[2], r[0]))
                return kept[:limit], (len(hits) if complete else None)
            k *= self.RANK_FIRST
        return None
