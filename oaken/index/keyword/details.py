"""Which columns and phrases each ranked chunk matched, and its snippet: read for the few chunks a
search keeps, by looking each up or by walking the match once (whichever costs less).
KeywordIndex (oaken.index.keyword.reader) has them."""

from __future__ import annotations

import json
import re
from typing import Iterable, Sequence

import apsw

from oaken.index.keyword import snippets as snippets_mod
from oaken.index.keyword.schema import COLUMNS


def match_cols(api: apsw.FTS5ExtensionApi, *args: object) -> str:
    """'columns;phrases' of the current row, e.g. '0,3;0,1' (registered as oaken_match)."""
    cols: set[int] = set()
    phrases = []
    for i in range(api.phrase_count):
        found = api.phrase_columns(i)
        if found:
            phrases.append(i)
            cols.update(found)
    return ",".join(map(str, sorted(cols))) + ";" + ",".join(map(str, phrases))


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def matched_in(info: str, n_subject: int = 0) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """oaken_match's 'columns;phrases' as (column names, phrases of the caller's MATCH): the
    subject filter's `n_subject` phrases, numbered first, are left out."""
    cols, _, phrases = info.partition(";")
    return tuple(COLUMNS[i] for i in _ints(cols)), tuple(p - n_subject for p in _ints(phrases) if p >= n_subject)


class ChunkDetails:
    """The detail reads of KeywordIndex, through its `_run`."""

    def _run(self, sql: str, params: Sequence[object] | dict) -> list[tuple]:
        raise NotImplementedError  # KeywordIndex's: its errors say which file and what to do

    # Looking a chunk up by its rowid starts a query of its own (the MATCH parsed, every term's
    # doclists opened): 0.1-0.2 ms a chunk. Walking the match once costs 0.1-0.3 us a matching
    # chunk for a word or an OR of words, 2-5 us for a phrase or an AND of common words (at a
    # million messages). So the match is walked when it holds at most this many chunks for each
    # chunk asked: at 10,000 messages the 500 chunks of a widened lookup took 112 ms looked up,
    # 5.6 ms walked; at a million the 80 of "pipeline" (21,682 matches) 8.8 and 3.1 ms.
    WALK_RATIO = 20
    WALK_RATIO_WORDS = 300  # a word or an OR of words; past WALK_RATIO, counted first (bounded)
    _NOT_WORDS = re.compile(r"\b(?:AND|NOT|NEAR)\b|\*|\^")
    _QUOTED = re.compile(r'"((?:[^"]|"")*)"')  # a token or phrase as `quote` writes it

    def _walk(self, expr: str, matches: int | None, rows: int) -> bool:
        """Whether `_details` walks the match (else it looks each chunk up): `matches`, when every
        match was ranked, or a count bounded by WALK_RATIO_WORDS x rows for an OR of words."""
        if matches is not None and matches <= self.WALK_RATIO * rows:
            return True
        outside = self._QUOTED.sub(" ", expr)
        phrases = [q for q in self._QUOTED.findall(expr) if len(q.split()) > 1]
        if self._NOT_WORDS.search(outside) or phrases:
            return False  # a phrase, an AND, a prefix: walking costs up to 5 us a match
        bound = self.WALK_RATIO_WORDS * rows
        if matches is not None:
            return matches <= bound
        (n,) = self._run("SELECT count(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ? LIMIT ?)", [expr, bound + 1])[0]
        return bool(n <= bound)

    def _details(
        self, expr: str, n_subject: int, chunks: Iterable[int], *, snippets: bool = True, walk: bool = False
    ) -> dict[int, tuple[str, tuple[str, ...], tuple[int, ...]]]:
        # snippets and matched columns only for the rows asked (a Python callback per row is dear),
        # each row looked up by its rowid, or (`walk`) the match walked once, keeping those rows:
        # `+` keeps SQLite from handing FTS5 the IN list, which it would look up row by row
        out = {}
        snippet_sql, marks = (snippets_mod.SQL, list(snippets_mod.MARKS)) if snippets else ("''", [])
        label_sql = snippets_mod.LABEL_SQL if snippets else "''"
        ids = json.dumps(sorted(set(chunks)))
        select = f"SELECT fts.rowid, {snippet_sql}, {label_sql}, oaken_match(fts)"
        if walk:
            sql = f"{select} FROM fts WHERE fts MATCH ? AND +fts.rowid IN (SELECT value FROM json_each(?))"
            params = [*marks, expr, ids]
        else:
            sql = f"{select} FROM json_each(?) j CROSS JOIN fts ON fts.rowid = j.value WHERE fts MATCH ?"
            params = [*marks, ids, expr]
        for chunk, snippet, label, info in self._run(sql, params):
            out[chunk] = (snippets_mod.labelled(label, snippet), *matched_in(info, n_subject))
        return out
