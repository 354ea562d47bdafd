"""Ranking in two halves of the rowid range at once (oaken/index/keyword/reader.py `_best`), on
real mail: the same chunks, scores and order as ranking in one go, whatever the limit and filters.
The split is meant for a million messages; here its threshold is lowered to this small index.
It is FTS5's ranking: these tests ask for `keyword_engine = "fts5"` (Tantivy ranks by default)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import apsw

from oaken.api import import_mail
from oaken.config import IndexConfig
from oaken.errors import IndexUnavailable
from oaken.index import indexer
from oaken.index.keyword import KeywordFilters, KeywordIndex, quote
from tests.search_fixtures import config_for

ENRON = Path(__file__).parent / "data" / "evals" / "enron"
FTS5 = IndexConfig(keyword_engine="fts5")

QUERIES = [
    quote("enron"),
    quote("meeting"),
    quote("the"),
    f"{quote('natural')} {quote('gas')}",
    '"board of directors"',
    f"{quote('power')} OR {quote('price')} OR {quote('california')}",
    quote("qwxzzy"),
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("split") / "home"
    folder.mkdir()
    cfg = config_for(folder)
    cfg = dataclasses.replace(cfg, index=dataclasses.replace(cfg.index, keyword_engine="fts5"))
    folders = sorted(p for p in ENRON.glob("*/*") if p.is_dir())
    report = import_mail(folders, account="work", config=cfg)
    assert report.added >= 250
    indexer.update(cfg, keyword_only=True)
    return folder


def _hits(index: KeywordIndex, expr: str, filters: KeywordFilters, limit: int) -> list[tuple]:
    return [(h.message, h.chunk, round(h.score, 9), h.snippet, h.columns) for h in index.query(expr, filters, limit)]


@pytest.mark.parametrize("limit", [1, 3, 10, 50])
def test_a_split_ranking_returns_what_one_ranking_does(home: Path, limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    with KeywordIndex(home, FTS5) as whole:
        assert whole._split_at() is None  # 299 messages: ranked in one go
        dates = sorted(whole.message_dates(m.message for m in whole.newest(KeywordFilters(), 400)).values())
        expected = {
            (q, i): _hits(whole, q, f, limit)
            for q in QUERIES
            for i, f in enumerate(_filters(dates))
        }
    monkeypatch.setattr(KeywordIndex, "SPLIT_MIN_CHUNKS", 1)
    with KeywordIndex(home, FTS5) as split:
        assert split._split_at() is not None
        got = {(q, i): _hits(split, q, f, limit) for q in QUERIES for i, f in enumerate(_filters(dates))}
        assert split._twin is not None  # the halves were ranked on two connections
    assert got == expected
    assert any(len(v) == limit for v in expected.values())  # limits that cut the list were asked


def _filters(dates: list[int]) -> list[KeywordFilters]:
    """No filter, a date range that keeps about half the mail (the best ranked chunks pass it),
    and a folder whose few messages the best ranked chunks mostly miss (every match is ranked)."""
    return [
        KeywordFilters(),
        KeywordFilters(after=dates[len(dates) // 2]),
        KeywordFilters(folders=("family",)),
    ]


class _Locked:
    """A connection whose every statement finds index.db locked by another process."""

    def execute(self, *_args: object) -> None:
        raise apsw.BusyError("database is locked")

    def close(self) -> None:
        pass


def test_a_failure_in_the_other_half_is_the_search_s_failure(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The upper half runs in a thread: what goes wrong there is raised in the caller's thread, as
    the IndexUnavailable the search reports, not lost with the thread."""
    monkeypatch.setattr(KeywordIndex, "SPLIT_MIN_CHUNKS", 1)
    with KeywordIndex(home, FTS5) as split:
        split._twin = _Locked()  # type: ignore[assignment]
        with pytest.raises(IndexUnavailable, match="locked"):
            split.query(quote("enron"), KeywordFilters(), 10)
        split._twin = None
        assert split.query(quote("enron"), KeywordFilters(), 10)  # a new connection next time
