"""A triage change is seen by the very next search, with no reindex: raw.db decides disposition,
and the copies index.db and vectors/ keep of it only narrow a search where they are current.

Real parts throughout: the eleven real messages of tests/data/search imported and indexed, the
concept embedder's vectors in a real LanceDB, and `oaken.set_triage` as `oaken triage` calls it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oaken import api
from oaken.config import Config
from oaken.index import embedding, indexer
from oaken.index.keyword import KeywordFilters, KeywordIndex
from oaken.search import filters
from oaken.search.engine import search
from tests.search_fixtures import config_for, ids_by_subject

OUTSTANDING = "Outstanding Invoices - IMPORTANT Information"
PAST_DUE = "Action Requested: Past Due Invoice"
AWARD = "Employee Stock Option Award"


def ids(cfg: Config, query: str, **kw: object) -> list[int]:
    return [h.id for h in search(query, config=cfg, limit=50, **kw).hits]


def indexed_disposition(home: Path, message: int) -> list[int]:
    with KeywordIndex(home) as index:
        return [h.message for h in index.newest(KeywordFilters(dispositions=("archived",)), limit=50)]


def test_triage_is_seen_by_the_next_search_without_a_reindex(own_search_mailbox: Path) -> None:
    cfg = config_for(own_search_mailbox)
    by = ids_by_subject(own_search_mailbox)
    target = by[OUTSTANDING]
    everything = ids(cfg, "")
    assert target in everything and ids(cfg, "in:archived") == []

    api.set_triage(target, disposition="archived", config=cfg)
    assert target not in indexed_disposition(own_search_mailbox, target)  # index.db is stale: no reindex
    assert ids(cfg, "in:archived") == [target]  # the listing of a query with no words
    assert ids(cfg, "invoice in:archived") == [target]  # and a query with words
    assert ids(cfg, "", disposition="archived") == [target]
    assert ids(cfg, "") == everything  # archived mail is still searched by default

    api.set_triage(target, disposition="discarded", config=cfg)
    assert ids(cfg, "in:archived") == [] and ids(cfg, "in:discarded") == [target]
    assert target not in ids(cfg, "") and target not in ids(cfg, "invoice")

    # the index now holds "discarded"; taking it back out must not leave it hidden by that copy
    indexer.update(cfg)
    api.set_triage(target, disposition="inbox", config=cfg)
    assert ids(cfg, "") == everything and target in ids(cfg, "invoice")
    assert ids(cfg, "in:discarded") == [] and ids(cfg, "in:inbox invoice") == ids(cfg, "invoice")


def test_too_many_changes_since_the_index_fall_back_to_raw_db_alone(own_search_mailbox: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Past UNSURE_MAX changed messages the index's copy is not used at all: the same answers."""
    cfg = config_for(own_search_mailbox)
    by = ids_by_subject(own_search_mailbox)
    api.set_triage(by[OUTSTANDING], disposition="archived", config=cfg)
    api.set_triage(by[PAST_DUE], disposition="archived", config=cfg)
    api.set_triage(by[AWARD], disposition="discarded", config=cfg)
    expected = {q: ids(cfg, q) for q in ("in:archived", "invoice in:archived", "", "stock", "in:discarded")}
    assert sorted(expected["in:archived"]) == sorted([by[OUTSTANDING], by[PAST_DUE]])
    assert expected["in:discarded"] == [by[AWARD]] and by[AWARD] not in expected["stock"]
    monkeypatch.setattr(filters, "UNSURE_MAX", 1)
    assert {q: ids(cfg, q) for q in expected} == expected


@pytest.fixture
def embedded(own_search_mailbox: Path) -> Config:
    cfg = config_for(own_search_mailbox, model="concept")
    embedding.embed_pending(cfg)
    return cfg


def test_the_vector_side_follows_triage_without_a_reindex(embedded: Config) -> None:
    home = Path(embedded.paths.data_dir)
    by = ids_by_subject(home)
    target = by[AWARD]
    assert target in ids(embedded, "employee stock option award", retrievers=("vector",))
    assert ids(embedded, "employee stock option award in:archived", retrievers=("vector",)) == []

    api.set_triage(target, disposition="archived", config=embedded)
    assert ids(embedded, "employee stock option award in:archived", retrievers=("vector",)) == [target]
    assert ids(embedded, "employee stock option award in:archived") == [target]  # hybrid

    embedding.embed_pending(embedded)  # vectors/ now holds "archived"; then it is taken back
    api.set_triage(target, disposition="inbox", config=embedded)
    assert target in ids(embedded, "employee stock option award", retrievers=("vector",))
    assert ids(embedded, "employee stock option award in:archived", retrievers=("vector",)) == []


def test_an_index_made_before_the_disposition_index_gets_it(own_search_mailbox: Path) -> None:
    """`in:archived` lists by index.db's (account, disposition, date) index; an index.db made
    without it gains it at the writer's next open, keeping its contents."""
    import apsw

    from oaken.index.keyword import index_path

    def has_it() -> bool:
        db = apsw.Connection(str(index_path(own_search_mailbox)))
        try:
            return bool(db.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages_disposition'").fetchone())
        finally:
            db.close()

    assert has_it()
    db = apsw.Connection(str(index_path(own_search_mailbox)))
    db.execute("DROP INDEX messages_disposition")
    db.close()
    cfg = config_for(own_search_mailbox)
    before = ids(cfg, "")
    report = indexer.update(cfg)
    assert has_it() and report.indexed == 0 and ids(cfg, "") == before
