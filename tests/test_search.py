"""`oaken.search`: keyword search with filters over real mail, imported and indexed for real.

The mailbox (tests/data/search): INBOX holds California (seen), FERC (unread), Employee Stock Option
Award (seen, flagged), New Stock Option Plan Memo (unread), Dabhol (seen) and a French message;
Finance holds Past Due Invoice (unread, dated 2001-06-04 05:07 UTC) and Outstanding Invoices;
Lists holds a notmuch patch (attachment), Introducing myself (unread) and Chron Ed board meeting.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oaken import api
from oaken.config import Config
from oaken.index import indexer
from oaken.search.engine import search
from oaken.store import Store
from tests.search_fixtures import ACCOUNT, DATA, build_mailbox, config_for, ids_by_subject

CALIFORNIA = "California"
FERC = "There's Changes in the FERC"
AWARD = "Employee Stock Option Award"
PLAN = "New Stock Option Plan Memo"
DABHOL = "Dabhol"
FRENCH = "Essai accentué"
PAST_DUE = "Action Requested: Past Due Invoice"
OUTSTANDING = "Outstanding Invoices - IMPORTANT Information"
PATCH = ("[notmuch] [PATCH] Error out if no query is supplied to search instead of going into an infinite "
         "loop")
INTRO = "[notmuch] Introducing myself"
BOARD = "Chron Ed board meeting points"


@pytest.fixture(scope="module")
def home(search_mailbox: Path) -> Path:
    return search_mailbox


@pytest.fixture(scope="module")
def cfg(home: Path) -> Config:
    return config_for(home)


@pytest.fixture(scope="module")
def ids(home: Path) -> dict[str, int]:
    return ids_by_subject(home)


def subjects(response) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.subject for h in response.hits]


def find(cfg: Config, query: str = "", **kw: object) -> list[str]:
    return subjects(search(query, config=cfg, **kw))


# ---- words, graded matching, phrases, exclusions -------------------------------------------------

def test_a_lookup_needs_every_word(cfg: Config) -> None:
    assert find(cfg, "stock award") == [AWARD]
    assert set(find(cfg, "stock option")) == {AWARD, PLAN}


def test_chunks_holding_every_word_rank_above_chunks_holding_some(cfg: Config) -> None:
    r = search("employee stock option plan?", config=cfg)  # a question: 2 of its 4 words are enough
    assert subjects(r)[:2] == [PLAN, AWARD]
    assert r.hits[0].why[0].detail.startswith("holds 4 of 4 words")
    assert r.hits[1].why[0].detail.startswith("holds 3 of 4 words")
    # a question's deep list is read without snippets; the page's hits get theirs, columns once
    for h in search("employee stock option plan?", limit=2, config=cfg).hits:
        assert "[[" in h.snippet and h.why[0].detail.count("; in ") == 1, (h.snippet, h.why[0].detail)


def test_a_question_needs_keyword_min_match_of_its_words(home: Path) -> None:
    question = "when is the past due invoice for ibuyit?"  # content words: past, due, invoice, ibuyit
    assert find(config_for(home, keyword_min_match=0.5), question) == [PAST_DUE]
    # a quarter of the words is one word: "invoice" alone lets the other invoice mail in
    assert set(find(config_for(home, keyword_min_match=0.25), question)) == {PAST_DUE, OUTSTANDING}


def test_phrases_and_exclusions(cfg: Config) -> None:
    assert find(cfg, '"stock option plan"') == [PLAN]
    assert find(cfg, "stock -award") == [PLAN]
    assert find(cfg, 'stock -"option plan"') == [AWARD]
    assert find(cfg, "stock -award -memo") == []


def test_or_between_words(cfg: Config) -> None:
    assert set(find(cfg, "dabhol OR ferc")) == {DABHOL, FERC}


def test_diacritics_and_stems(cfg: Config) -> None:
    assert find(cfg, "accentué") == [FRENCH]
    assert find(cfg, "ACCENTUE") == [FRENCH]
    assert set(find(cfg, "invoice")) == {PAST_DUE, OUTSTANDING}  # invoices too


def test_snippet_marks_the_matches(cfg: Config) -> None:
    hit = search("dabhol", config=cfg).hits[0]
    assert "[[Dabhol]]" in hit.snippet


# ---- operators ---------------------------------------------------------------------------------

def test_sender_and_recipient_operators(cfg: Config) -> None:
    assert find(cfg, "from:karen") == [PLAN]
    assert set(find(cfg, "from:karen from:snapshotro")) == {PLAN, AWARD}  # any of them
    assert find(cfg, "to:steven.kean") == [DABHOL]
    assert find(cfg, "cc:maureen") == [DABHOL]
    assert find(cfg, "subject:dabhol") == [DABHOL]
    assert find(cfg, 'subject:"past due"') == [PAST_DUE]
    assert find(cfg, "stock -from:karen") == [AWARD]
    assert find(cfg, "invoice -label:Finance") == []
    assert find(cfg, "label:Lists -subject:notmuch") == [BOARD]


def test_labels_all_of_them(cfg: Config) -> None:
    assert find(cfg, "label:Finance") == [OUTSTANDING, PAST_DUE]  # no words: newest first
    assert find(cfg, "label:finance") == [OUTSTANDING, PAST_DUE]
    assert find(cfg, "label:Finance label:Lists") == []


def test_dates_are_utc_after_includes_before_excludes(cfg: Config) -> None:
    # Past Due Invoice: Sun, 3 Jun 2001 22:07:43 -0700 = 2001-06-04 05:07 UTC
    assert find(cfg, "label:Finance after:2001-06-04 before:2001-06-05") == [PAST_DUE]
    assert find(cfg, "label:Finance after:2001/06/05 before:2001-12-02") == []
    assert find(cfg, "label:Finance before:2001-06-04") == []
    assert find(cfg, "invoice newer_than:1d") == []
    assert set(find(cfg, "invoice older_than:1d")) == {PAST_DUE, OUTSTANDING}


def test_read_state_and_star(cfg: Config) -> None:
    assert find(cfg, "is:unread") == [INTRO, PAST_DUE, FERC, PLAN]
    assert find(cfg, "is:starred") == [AWARD]
    assert find(cfg, "stock is:read") == [AWARD]


def test_attachments(cfg: Config) -> None:
    assert set(find(cfg, "has:attachment")) >= {PATCH}
    assert find(cfg, "filename:patch") == [PATCH]
    assert find(cfg, "filename:nothing-like-this") == []
    assert PATCH not in find(cfg, "-has:attachment", limit=50) and len(find(cfg, "-has:attachment", limit=50)) >= 8


def test_triage_operators(own_search_mailbox: Path) -> None:
    cfg = config_for(own_search_mailbox)
    ids = ids_by_subject(own_search_mailbox)
    api.set_triage(ids[OUTSTANDING], category="finance", priority=3, config=cfg)
    api.set_triage(ids[PAST_DUE], category="finance", priority=1, disposition="discarded", config=cfg)
    api.set_triage(ids[AWARD], category="work", priority=2, config=cfg)
    indexer.update(cfg)
    assert find(cfg, "category:finance") == [OUTSTANDING]  # the discarded one is left out
    assert find(cfg, "category:finance in:anywhere") == [OUTSTANDING, PAST_DUE]
    assert find(cfg, "category:finance category:work") == [OUTSTANDING, AWARD]
    assert find(cfg, "priority:2") == [OUTSTANDING, AWARD]
    assert find(cfg, "invoice") == [OUTSTANDING]
    assert find(cfg, "invoice in:discarded") == [PAST_DUE]
    assert find(cfg, "", disposition="discarded") == [PAST_DUE]
    assert find(cfg, "in:inbox", categories=["work", "finance"], min_priority=3) == [OUTSTANDING]


def test_unreadable_values_warn_and_filter_nothing(cfg: Config) -> None:
    plain = search("invoice", config=cfg)
    for junk in ("priority:9", "category:nope", "after:2024-13-45", "in:nowhere"):
        r = search(f"invoice {junk}", config=cfg)
        assert subjects(r) == subjects(plain)
        assert len(r.warnings) == 1 and junk.split(":")[0] in r.warnings[0]


def test_unknown_operator_is_searched_as_words(cfg: Config) -> None:
    r = search("dabhol:1", config=cfg)
    assert subjects(r) == [] and any("not an operator" in w for w in r.warnings)
    r = search("reference:dabhol", config=cfg)
    assert r.warnings and subjects(r) == []  # "reference dabhol" as a phrase


# ---- the API's fields combine with the operators ------------------------------------------------

def test_fields_combine_with_operators(cfg: Config) -> None:
    assert find(cfg, "invoice", sender="ibuyit") == [PAST_DUE]
    assert find(cfg, "from:no.address invoice", sender="ibuyit") == []  # both apply
    assert find(cfg, "", labels=["Finance"], unread=True) == [PAST_DUE]
    assert find(cfg, "label:Lists", labels="Finance") == []
    assert find(cfg, "stock", after="2000-09-01") == [AWARD]
    assert find(cfg, "", thread=search("dabhol", config=cfg).hits[0].thread) == [DABHOL]
    r = search("is:read", unread=True, config=cfg)
    assert r.hits == () and any("disagree" in w for w in r.warnings)


def test_odd_api_values_are_warnings(cfg: Config) -> None:
    r = search(None, limit="ten", offset=-2, sort="best", after="soon", labels=5, categories=["nope"],  # type: ignore[arg-type]
               min_priority=7, unread="yes", thread="x", config=cfg)
    assert len(r.hits) == 10 and len(r.warnings) == 9


# ---- listing, paging, order, widening ------------------------------------------------------------

def test_a_query_with_no_words_lists_the_newest_as_many_as_asked(cfg: Config) -> None:
    r = search("", limit=5, config=cfg)
    assert len(r.hits) == 5
    assert [h.date for h in r.hits] == sorted((h.date for h in r.hits), reverse=True)
    assert find(cfg, "is:unread", limit=2) == [INTRO, PAST_DUE]
    assert len(search("", limit=50, config=cfg).hits) == 11


def test_offset_pages_and_date_order(cfg: Config) -> None:
    whole = find(cfg, "enron", limit=6)
    assert len(whole) == 6
    assert find(cfg, "enron", limit=3) + find(cfg, "enron", limit=3, offset=3) == whole
    by_date = search("enron", limit=50, sort="date", config=cfg).hits
    assert [h.date for h in by_date] == sorted((h.date for h in by_date), reverse=True)
    assert {h.subject for h in by_date} == set(find(cfg, "enron", limit=50))
    # date order reads every match; the page's hits still get their snippets and columns
    assert all("[[" in h.snippet and "; in " in h.why[0].detail for h in by_date)


# lookups, one whose words sit in different chunks of one message, questions (graded), a filter on candidates
PAGED = ["enron", "enron please", "search plan", "would you send the invoice?", "what about notmuch and plan?",
         "the is:unread"]


@pytest.mark.parametrize("query", PAGED)
def test_pages_join_up_into_the_long_list(home: Path, query: str) -> None:
    # overfetch 1: each retriever reads no more than it must, so a depth that moved with the page shows
    cfg = config_for(home, overfetch=1)
    long = [h.id for h in search(query, limit=11, config=cfg).hits]
    assert long
    for size in (1, 2, 3):
        pages = [h.id for offset in range(0, 11, size) for h in search(query, limit=size, offset=offset,
                                                                       config=cfg).hits]
        assert pages == long, f"pages of {size}"
    assert [h.id for h in search(query, limit=2, config=cfg).hits] == long[:2]


def test_filters_on_candidates_widen_the_search(home: Path) -> None:
    ranked = search("enron", limit=50, config=config_for(home)).hits
    top = ranked[0]
    state = "is:read" if top.unread else "is:unread"  # a filter that rejects the best keyword hit
    expected = next(h.id for h in ranked if h.unread != top.unread)
    narrow = config_for(home, overfetch=1, max_candidates=500)
    r = search(f"enron {state}", limit=1, explain=True, config=narrow)
    assert [h.id for h in r.hits] == [expected]
    assert r.explain is not None and r.explain.retrievers[0].rounds > 1
    # max_candidates bounds the widening
    r = search(f"enron {state}", limit=1, config=config_for(home, overfetch=1, max_candidates=1))
    assert r.hits == ()


# ---- the response -------------------------------------------------------------------------------

def test_a_hit_describes_its_message(cfg: Config, ids: dict[str, int]) -> None:
    r = search('"stock option plan"', explain=True, config=cfg)
    hit = r.hits[0]
    assert hit.id == ids[PLAN]
    assert hit.message_id == "20130659.1075840085658.JavaMail.evans@thyme"
    assert hit.account == ACCOUNT and hit.folders == ("INBOX",) and "INBOX" in hit.labels
    assert hit.sender == "karen.denne@enron.com" and hit.unread is True
    assert hit.date == "2000-06-23T16:31:00+00:00"
    assert isinstance(hit.thread, int)
    # a quoted phrase: exact_boost multiplies the keyword weight (rrf_k 60, rank 1)
    assert hit.why[0].retriever == "keyword" and hit.why[0].rank == 1 and hit.why[0].weight == 3.0
    assert hit.score == pytest.approx(3.0 / 61)
    assert r.explain is not None and r.explain.weights == {"keyword": 3.0}
    assert r.explain.retrievers[0].expression == '"stock option plan"'
    assert r.explain.parsed["exact_boost"] is True
    assert set(r.timings) >= {"parse", "keyword", "fetch", "total"}


def test_keyword_mode_by_choice_and_missing_vector_store(home: Path) -> None:
    chosen = search("dabhol", config=config_for(home, model="none"))
    assert (chosen.mode, chosen.degraded, chosen.degraded_reason) == ("keyword", False, None)
    default = search("dabhol", config=config_for(home, model="all-MiniLM-L6-v2"))
    assert (default.mode, default.degraded, default.degraded_reason) == ("keyword", True, "no_vector_store")
    assert subjects(default) == [DABHOL]


def test_low_confidence_when_no_hit_holds_every_word(cfg: Config) -> None:
    assert search("stock option", config=cfg).low_confidence is False
    assert search("employee stock option plan?", config=cfg).low_confidence is False
    assert search("who approved the plan for dabhol?", config=cfg).low_confidence is True


# ---- one account ---------------------------------------------------------------------------------

def test_one_account_at_a_time(own_search_mailbox: Path) -> None:
    cfg = config_for(own_search_mailbox)
    api.import_mail([DATA / "INBOX" / ".Finance"], account="other", config=cfg)
    indexer.update(cfg)
    r = search("invoice", config=cfg)
    assert r.hits == () and any("several accounts" in w for w in r.warnings)
    other = search("invoice", account="other", config=cfg)
    assert {h.account for h in other.hits} == {"other"} and len(other.hits) == 2
    main = search("invoice", account=ACCOUNT, config=cfg)
    assert {h.account for h in main.hits} == {ACCOUNT}
    default = Config(default_account="other", paths=cfg.paths, embedder=cfg.embedder)
    assert {h.account for h in search("invoice", config=default).hits} == {"other"}
    missing = search("invoice", account="nobody", config=cfg)
    assert missing.hits == () and any("nobody" in w for w in missing.warnings)


# ---- never a crash -------------------------------------------------------------------------------

def test_missing_or_corrupt_index_degrades(own_search_mailbox: Path) -> None:
    cfg = config_for(own_search_mailbox)
    index = own_search_mailbox / "index.db"
    for wal in ("-wal", "-shm"):
        Path(str(index) + wal).unlink(missing_ok=True)
    index.unlink()
    r = search("invoice", config=cfg)
    assert (r.hits, r.degraded, r.degraded_reason) == ((), True, "keyword_index_unavailable")
    assert any("oaken reindex" in w for w in r.warnings)
    index.write_bytes(b"this is not a database at all" * 200)
    r = search("invoice", config=cfg)
    assert (r.hits, r.degraded, r.degraded_reason) == ((), True, "keyword_index_unavailable")
    r = search("", config=cfg)
    assert r.degraded_reason == "keyword_index_unavailable"


def test_no_mail_yet(tmp_path: Path) -> None:
    r = search("anything", config=config_for(tmp_path / "empty"))
    assert r.hits == () and any("no mail yet" in w for w in r.warnings)


def test_mail_deleted_after_indexing_is_never_returned(own_search_mailbox: Path) -> None:
    cfg = config_for(own_search_mailbox)
    gone = ids_by_subject(own_search_mailbox)[PAST_DUE]
    with Store(own_search_mailbox / "raw.db") as store, store.transaction():
        store.delete_messages([gone])
    assert find(cfg, "invoice") == [OUTSTANDING]  # index.db still holds it; raw.db is the truth
    assert PAST_DUE not in find(cfg, "", limit=50)


def test_search_never_changes_a_flag(own_search_mailbox: Path) -> None:
    cfg = config_for(own_search_mailbox)

    def state() -> tuple:
        with Store(own_search_mailbox / "raw.db", readonly=True) as store:
            ids = store.all_message_ids()
            return (tuple((m, loc.flags) for m in ids for loc in store.locations(m)),
                    tuple(store.pending_flag_changes()), store.seq())

    before = state()
    for q in ("invoice", "is:unread", "is:read", "", "stock option plan?", "is:starred", "label:Lists"):
        search(q, limit=50, config=cfg)
    assert state() == before
    assert any("\\Seen" not in flags for _, flags in before[0])  # there was unread mail to spoil


def test_copy_in_two_folders_is_one_hit(tmp_path: Path) -> None:
    folder = tmp_path / "twice"
    (folder / "a").mkdir(parents=True)
    (folder / "b").mkdir()
    source = DATA / "INBOX" / "cur" / "enron-skilling-sent-381!2,S"
    shutil.copy(source, folder / "a" / "m.eml")
    shutil.copy(source, folder / "b" / "m.eml")
    home = tmp_path / "home"
    build_mailbox(home)
    cfg = config_for(home)
    api.import_mail([folder], account=ACCOUNT, config=cfg)
    indexer.update(cfg)
    hits = search("dabhol", config=cfg).hits
    assert len(hits) == 1 and set(hits[0].folders) >= {"INBOX", "a", "b"}


def test_search_never_changes_a_flag_on_the_server(dovecot, oaken_home: Path) -> None:  # type: ignore[no-untyped-def]
    """The server half: after searching, and a sync that would push any queued change, the
    server's flags are what they were (Dovecot from tests/dovecot_fixtures.py)."""
    import dataclasses

    from oaken.config import EmbedderConfig
    from oaken.sync.runner import sync
    from tests.dovecot_fixtures import _mailbox, corpus

    mailbox, messages = _mailbox(dovecot, oaken_home), corpus()

    mailbox.fill("INBOX", messages[:8])
    mailbox.fill("INBOX", messages[8:12], flags=("\\Seen",))
    mailbox.fill("Lists", messages[12:16], flags=("\\Flagged",))
    cfg = dataclasses.replace(mailbox.config(), embedder=EmbedderConfig(model="none"))
    sync(cfg)
    indexer.update(cfg)
    before = mailbox.server_state()
    found = 0
    for q in ("", "is:unread", "is:read", "is:starred", "notmuch", "notmuch is:unread", "label:Lists", "patch?"):
        found += len(search(q, limit=50, config=cfg).hits)
    sync(cfg)
    assert found > 0
    assert mailbox.server_state() == before
    assert sum(n for (_m, _f, flags), n in before.items() if "\\Seen" not in flags) >= 8


def test_ranking_first_then_filtering_finds_the_same_chunks(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """index.db ranks the best chunks alone before joining them to their messages (fast); when too
    few of those pass the filters it filters every match. Both must give the same chunks."""
    from oaken.index.keyword import KeywordFilters, KeywordIndex

    cases = [('"enron"', KeywordFilters(account=ACCOUNT)), ('"enron"', KeywordFilters(account=ACCOUNT, labels=("Lists",))),
             ('"enron"', KeywordFilters(account=ACCOUNT, senders=("ibuyit",))), ('"stock" OR "invoice"', KeywordFilters()),
             ('"enron"', KeywordFilters(account="nobody")), ('"no-such-word-zz"', KeywordFilters())]
    with KeywordIndex(home) as index:
        monkeypatch.setattr(index, "RANK_FIRST", 2)  # small, so that the filtered cases fall back
        got = {(m, f, n): [(h.chunk, h.score) for h in index.query(m, f, n)] for m, f in cases for n in (1, 3, 20)}
        monkeypatch.setattr(index, "_ranked_first", lambda *a, **k: None)
        for (m, f, n), hits in got.items():
            again = [(h.chunk, h.score) for h in index.query(m, f, n)]
            assert [s for _, s in hits] == [s for _, s in again], (m, f, n)  # chunks of equal score may swap
            assert len({s for _, s in hits}) < len(hits) or hits == again
    assert any(got.values()) and not all(got.values())


def test_token_lookup_by_rowid_or_by_doclist_agrees(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tokens_present (exclusions, phrases) looks a common word up per candidate chunk, and walks a
    rare word's doclist: both ways must find the same messages."""
    from oaken.index.keyword import KeywordIndex

    with KeywordIndex(home) as index:
        everyone = list(ids_by_subject(home).values())
        tokens = ["enron", "stock option", "dabhol", "no-such-word-zz", "accentue"]
        answers = []
        for common_rows in (1, 10**9):  # every word common (by rowid) / every word rare (by doclist)
            monkeypatch.setattr(index, "COMMON_ROWS", common_rows)
            answers.append(index.tokens_present(everyone, tokens))
        assert answers[0] == answers[1]
        assert {t for held in answers[0].values() for t in held} == {"enron", "stock option", "dabhol", "accentue"}


def test_details_walked_or_looked_up_agree(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ranked chunk's snippet, columns and phrases are read by walking the match once (few
    matches, or an OR of words) or by looking each chunk up by rowid: both ways must give the same,
    for words, an OR, an AND, a phrase and a subject filter."""
    from oaken.index.keyword import KeywordFilters, KeywordIndex

    cases = [('"stock"', KeywordFilters()), ('"stock" OR "invoice" OR "dabhol"', KeywordFilters()),
             ('"stock" AND "option"', KeywordFilters()), ('"stock option"', KeywordFilters()),
             ('"enron"', KeywordFilters(subject_terms=("invoice",))), ('"enron"', KeywordFilters(account=ACCOUNT))]
    walked: list[bool] = []
    with KeywordIndex(home) as index:
        real = index._walk
        monkeypatch.setattr(index, "_walk", lambda *a: walked.append(real(*a)) or walked[-1])
        answers = []
        for ratio in (0, 10**9):  # never walk (every chunk looked up) / walk whenever it may
            monkeypatch.setattr(index, "WALK_RATIO", ratio)
            monkeypatch.setattr(index, "WALK_RATIO_WORDS", ratio)
            answers.append({(m, f): index.query(m, f, 3) for m, f in cases})
    assert answers[0] == answers[1]
    assert all(answers[0].values()) and any(h.snippet for hits in answers[0].values() for h in hits)
    assert any(h.phrases and h.columns for hits in answers[0].values() for h in hits)
    assert walked == [False] * len(cases) + [True] * len(cases)


def test_a_lookup_finds_words_in_different_chunks_of_one_message(own_search_mailbox: Path) -> None:
    cfg = config_for(own_search_mailbox)
    api.import_mail([DATA / "long"], account=ACCOUNT, config=cfg)
    indexer.update(cfg)
    # "telemarketing" is in the newsletter's second chunk, "wrestlers" in its eighteenth
    r = search("telemarketing wrestlers", config=cfg)
    assert find(cfg, "telemarketing") == find(cfg, "wrestlers") == ["POWER BRIEFS - June 1, 2001"]
    assert subjects(r) == ["POWER BRIEFS - June 1, 2001"]
    assert "across its chunks" in r.hits[0].why[0].detail and not r.low_confidence
    # one chunk holding both words ranks above it
    both = search("power briefs", config=cfg).hits[0]
    assert "in one chunk" in both.why[0].detail
    assert find(cfg, "telemarketing zzqx") == [] and find(cfg, "telemarketing -wrestlers") == []


def test_huge_offset_and_thread_are_warnings_not_crashes(home: Path) -> None:
    """Past SQLite's integers an offset or thread raised OverflowError from inside the search."""
    cfg = config_for(home)
    far = search("invoice", config=cfg, offset=10**20)
    assert far.hits == () and any("offset=" in w for w in far.warnings)
    loose = search("invoice", config=cfg, thread=10**30)
    assert loose.hits and any("thread=" in w for w in loose.warnings)
