"""Hybrid search end to end on real mail (tests/data/search), real index.db and LanceDB, with the
concept embedder: RRF as DESIGN.md's Fusion defines it, exact_boost, every degraded code, the
daemon's socket against an in-process search, and llm_rewrite."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from oaken.cli import main
from oaken import config as config_mod
from oaken.config import Config
from oaken.errors import ConfigError
from oaken.index import embedders, embedding
from oaken.index.concept import ConceptEmbedder
from oaken.index.vectors import VectorStore
from oaken.search import server
from oaken.search.engine import search
from oaken.store import open_store
from tests.search_fixtures import build_mailbox, config_for, ids_by_subject

PAYMENT = "bill payment"  # no message holds both words: only meaning finds the invoices


@pytest.fixture(scope="module")
def embedded_mailbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = build_mailbox(tmp_path_factory.mktemp("hybrid"))
    report = embedding.embed_pending(config_for(home, model="concept"))
    assert report.embedded > 0
    return home


@pytest.fixture
def home(embedded_mailbox: Path, tmp_path: Path) -> Path:
    """A copy this test may change."""
    return Path(shutil.copytree(embedded_mailbox, tmp_path / "copy"))


def concept(home: Path, **search_settings: object) -> Config:
    return config_for(home, model="concept", **search_settings)


def ids(response) -> list[int]:
    return [h.id for h in response.hits]


def hand_fused(lists: dict[str, Sequence[int]], weights: dict[str, float], k: int) -> list[int]:
    """DESIGN.md Fusion, written out: sum of weight / (k + rank); ties to the better best rank."""
    score: dict[int, float] = {}
    best: dict[int, tuple[int, int]] = {}
    for order, (name, items) in enumerate(lists.items()):
        for rank, m in enumerate(items, start=1):
            score[m] = score.get(m, 0.0) + weights[name] / (k + rank)
            best[m] = min(best.get(m, (rank, order)), (rank, order))
    return sorted(score, key=lambda m: (-score[m], best[m], m))


# ---- fusion ------------------------------------------------------------------------------------

def cosines(response) -> dict[int, float]:
    """Each vector hit's cosine, as its `why` detail states it ("cosine 0.669; ...")."""
    return {h.id: float(h.why[0].detail.split()[1].rstrip(";")) for h in response.hits}


def floored(vec: dict[int, float], kw: Sequence[int], floor: float) -> list[int]:
    """DESIGN.md Fusion's vector list: meaning-only hits under the floor left out, ranks recounted."""
    return [m for m, c in vec.items() if m in kw or c >= floor]


@pytest.mark.parametrize("query", ["invoice", "invoice 2001", "stock option plan"])
def test_hybrid_is_rrf_of_the_two_filtered_lists(embedded_mailbox: Path, query: str) -> None:
    cfg = concept(embedded_mailbox, vector_weight=1.5)
    kw = ids(search(query, config=cfg, limit=5, retrievers=("keyword",)))
    raw = cosines(search(query, config=cfg, limit=5, retrievers=("vector",)))  # alone: the raw list
    vec = floored(raw, kw, cfg.search.vector_min_cosine["concept"])
    hybrid = search(query, config=cfg, limit=5, explain=True)
    assert hybrid.mode == "hybrid" and not hybrid.degraded and hybrid.vector_coverage == 1.0
    assert vec and len(vec) < len(raw), "the vector side answered, and the floor left some out"
    boost = 3.0 if any(c.isdigit() for c in query) else 1.0
    assert ids(hybrid) == hand_fused({"keyword": kw, "vector": vec}, {"keyword": boost, "vector": 1.5}, 60)[:5]
    for hit in hybrid.hits:
        for w in hit.why:  # each retriever with its rank in its own list, and its contribution
            assert w.rank == (kw if w.retriever == "keyword" else vec).index(hit.id) + 1
            assert w.contribution == pytest.approx(w.weight / (60 + w.rank))
        assert hit.score == pytest.approx(sum(w.contribution for w in hit.why))
    assert hybrid.explain is not None and hybrid.explain.weights == {"keyword": boost, "vector": 1.5}
    assert [t.retriever for t in hybrid.explain.retrievers] == ["keyword", "vector"]
    assert hybrid.explain.retrievers[1].kept == len(vec)


@pytest.mark.parametrize("query", ["meeting about the board", "from:enron.com payment"])
def test_a_question_or_a_narrowed_query_has_no_meaning_floor(embedded_mailbox: Path, query: str) -> None:
    """A question's keyword list holds partial matches anyway, and a query whose operators chose the
    mail asks for that mail ranked by meaning: the floor would only remove right answers there."""
    cfg = concept(embedded_mailbox, vector_min_cosine={"concept": 0.99})
    raw = search(query, config=cfg, limit=50, retrievers=("vector",))
    hybrid = search(query, config=cfg, limit=50, explain=True)
    assert raw.hits and hybrid.explain.retrievers[1].kept == len(raw.hits)
    assert {h.id for h in raw.hits} <= {h.id for h in hybrid.hits}
    lookup = search("meeting board", config=cfg, limit=50, explain=True)  # a lookup: floored
    assert lookup.explain.retrievers[1].kept < len(search("meeting board", config=cfg, limit=50,
                                                          retrievers=("vector",)).hits)


# ---- paging: every page a slice of one fused list -----------------------------------------------

@pytest.mark.parametrize("query", ["enron", "the", "please", "invoice 2001", "would you send the invoice?"])
def test_pages_join_up_and_the_top_does_not_depend_on_the_limit(embedded_mailbox: Path, query: str) -> None:
    # no floor: the vector list reaches every message, so lists cut at the page's depth would be
    # fused differently for each page (an item just past one list's cut gains or loses its share)
    cfg = concept(embedded_mailbox, vector_min_cosine={}, overfetch=1)
    long = search(query, config=cfg, limit=15)
    assert long.mode == "hybrid" and len(long.hits) == 11
    ranked = ids(long)
    for size in (2, 3, 5):
        pages = [i for offset in range(0, 15, size) for i in ids(search(query, config=cfg, limit=size, offset=offset))]
        assert pages == ranked, f"pages of {size}"
    assert ids(search(query, config=cfg, limit=5)) == ranked[:5]
    assert ids(search(query, config=cfg, limit=1)) == ranked[:1]
    # the keyword list is read deep; the page's keyword hits still get their snippet and columns
    for hit in long.hits:
        if hit.why[0].retriever == "keyword":
            assert "[[" in hit.snippet and "; in " in hit.why[0].detail, hit.id


def test_fused_lists_are_cut_at_fused_depth_and_pages_within_it_join_up(embedded_mailbox: Path) -> None:
    # each retriever lists fused_depth messages whatever the page (not max_candidates: 500 cost
    # the vector side's candidate search at 1M and gained nothing on the real dev half)
    cfg = concept(embedded_mailbox, vector_min_cosine={}, overfetch=1, fused_depth=4)
    first = search("enron", config=cfg, limit=2, explain=True)
    assert first.mode == "hybrid"
    assert [t.kept for t in first.explain.retrievers] == [4, 4]
    # both lists were cut at 4 (more matched): each share is measured from the share of rank 5
    assert [t.cut for t in first.explain.retrievers] == [4, 4]
    for hit in first.hits:
        for w in hit.why:
            assert w.contribution == pytest.approx(w.weight / (60 + w.rank) - w.weight / (60 + 5))
    from oaken.search.render import table

    shown = table(first)
    assert " - 1 / (k + 5) = " in shown and "keyword cut at 4" in shown and "vector cut at 4" in shown
    # one list alone keeps its plain shares: the scores of a keyword-only search do not move with --limit
    alone = [search("enron", config=cfg, limit=n, retrievers=("keyword",)).hits[0].score for n in (1, 6)]
    assert alone[0] == alone[1] == pytest.approx(1 / 61)
    # a keyword list holding every match is whole: a message it does not hold does not match
    rare = search("bankruptcy", config=cfg, limit=2, explain=True)
    assert 0 < rare.explain.retrievers[0].kept < 4 and rare.explain.retrievers[0].cut == 0
    deeper = search("enron", config=cfg, limit=5, explain=True)  # past 4: the next multiple
    assert [t.kept for t in deeper.explain.retrievers] == [8, 8]
    top = ids(search("enron", config=cfg, limit=4))
    assert [i for offset in range(0, 4, 2) for i in ids(search("enron", config=cfg, limit=2, offset=offset))] == top
    capped = concept(embedded_mailbox, vector_min_cosine={}, overfetch=1, fused_depth=4, max_candidates=3)
    assert [t.kept for t in search("enron", config=capped, limit=2, explain=True).explain.retrievers] == [3, 3]


# ---- a hit holding the words is never marked as found by meaning alone -----------------------------

@pytest.mark.parametrize(("query", "past_the_cut"), [("enron", True), ("the", True), ("enron please", True),
                                                     ("please", False)])
def test_a_hit_holding_the_words_is_not_by_meaning_alone(embedded_mailbox: Path, query: str,
                                                        past_the_cut: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # a keyword side cut at 2 messages' chunks: messages holding the word lie past it, and the
    # vector side (no floor) finds them (the rounds past the cap that read more messages when the
    # chunks read hold too few, tests/test_long_messages.py, are off: the cap alone cuts the list)
    from oaken.index.keyword import KeywordIndex
    from oaken.search import retrievers
    from oaken.search.render import MEANING_ONLY, by_meaning_only, table

    monkeypatch.setattr(retrievers, "PAST_ROUNDS", 0)

    cfg = concept(embedded_mailbox, vector_min_cosine={}, overfetch=1, max_candidates=2)
    r = search(query, config=cfg, limit=5, explain=True)
    assert r.mode == "hybrid" and len(r.hits) == 5
    words = query.split()
    with KeywordIndex(embedded_mailbox) as index:
        present = index.tokens_present(ids(r), words)
    holding = {m for m, found in present.items() if set(words) <= found}
    unranked = [h for h in r.hits if [(w.retriever, w.rank) for w in h.why] == [("vector", h.why[0].rank),
                                                                                 ("keyword", 0)]]
    assert bool(unranked) is past_the_cut, "some hit holds the words past the keyword list"
    for hit in r.hits:
        assert by_meaning_only(hit) is (hit.id not in holding), hit.id
        assert hit.score == pytest.approx(sum(w.contribution for w in hit.why))
    for hit in unranked:
        assert hit.id in holding and hit.why[1].contribution == 0.0 and "[[" in hit.snippet
        assert "not ranked" in hit.why[1].detail
    text = table(r)
    assert text.count(MEANING_ONLY) == sum(map(by_meaning_only, r.hits))
    assert ("keyword, no rank:" in text) is past_the_cut


# ---- the floor for hits found by meaning alone -------------------------------------------------

@pytest.mark.parametrize("query", ["invoice", "qwxzzy", "zeppelin"])
def test_the_unrelated_meaning_tail_no_longer_pads_the_list(embedded_mailbox: Path, query: str) -> None:
    # "invoice": two messages hold the word; the other nine are only the nearest by meaning
    # (concept cosines 0.11 and less) and used to fill the list to its limit.
    subjects = ids_by_subject(embedded_mailbox)
    by_word = sorted(i for s, i in subjects.items() if "invoice" in s.lower() or "past due" in s.lower())
    holding = by_word if query == "invoice" else []
    padded = search(query, config=concept(embedded_mailbox, vector_min_cosine={}), limit=10)
    assert len(padded.hits) == 10  # without a floor: the whole mailbox, nearest first
    r = search(query, config=concept(embedded_mailbox), limit=10)
    assert r.mode == "hybrid" and not r.degraded
    assert sorted(ids(r)) == holding
    assert r.low_confidence is (query != "invoice")


def test_a_meaning_only_hit_over_the_floor_stays_and_is_ranked_among_those_kept(embedded_mailbox: Path) -> None:
    # "invoice 2001": the keyword side finds Outstanding Invoices only; meaning finds Past Due
    # (cosine 0.67, over the floor: kept) and nine unrelated messages under it (left out).
    cfg = concept(embedded_mailbox)
    floor = cfg.search.vector_min_cosine["concept"]
    raw = cosines(search("invoice 2001", config=cfg, limit=11, retrievers=("vector",)))
    r = search("invoice 2001", config=cfg, limit=10)
    meaning_only = [h for h in r.hits if [w.retriever for w in h.why] == ["vector"]]
    assert meaning_only and all(raw[h.id] >= floor for h in meaning_only)
    assert len(r.hits) < len(raw)
    assert sorted(w.rank for h in r.hits for w in h.why if w.retriever == "vector") == list(range(1, len(r.hits) + 1))


def test_the_floor_is_per_model(embedded_mailbox: Path) -> None:
    other = concept(embedded_mailbox, vector_min_cosine={"all-MiniLM-L6-v2": 0.36})  # none for concept
    assert len(search("invoice", config=other, limit=10).hits) == 10
    strict = concept(embedded_mailbox, vector_min_cosine={"concept": 0.99})
    assert [w.retriever for h in search("invoice", config=strict).hits for w in h.why].count("vector") == 2


def test_a_bad_floor_is_refused_naming_the_model() -> None:
    with pytest.raises(ConfigError, match=r"vector_min_cosine.*'concept'.*-1 to 1"):
        config_mod.from_dict({"search": {"vector_min_cosine": {"concept": 1.5}}}, source="test.toml")


def test_exact_boost_lets_an_identifier_beat_meaning(embedded_mailbox: Path) -> None:
    # "invoice 2001": the keyword side's only hit holds the number; meaning cannot read digits and
    # ranks another invoice first, Outstanding Invoices second. With rrf_k 1 and the vector side
    # weighted 4, meaning's first (4/2) beats keyword first + meaning second (1/2 + 4/3) unless
    # exact_boost triples the keyword weight (3/2 + 4/3). (It once used limit=1, which only
    # worked because the lists were cut at the page's depth.)
    subjects = ids_by_subject(embedded_mailbox)
    outstanding = next(i for s, i in subjects.items() if s.startswith("Outstanding Invoices"))
    boosted = search("invoice 2001", config=concept(embedded_mailbox, vector_weight=4.0, rrf_k=1), limit=1)
    flat = search("invoice 2001", config=concept(embedded_mailbox, vector_weight=4.0, rrf_k=1, exact_boost=1.0),
                  limit=1)
    assert ids(boosted) == [outstanding] and boosted.hits[0].why[0].weight == 3.0
    assert ids(flat) != [outstanding] and flat.hits[0].why[0].retriever == "vector"
    # no digit and no phrase: no boost
    plain = search("invoice", config=concept(embedded_mailbox), limit=3, explain=True)
    assert plain.explain is not None and plain.explain.weights["keyword"] == 1.0


def test_phrases_exclusions_and_filters_bind_the_vector_side(embedded_mailbox: Path) -> None:
    cfg = concept(embedded_mailbox, vector_min_cosine={})  # Outstanding Invoices is at cosine 0.21
    subjects = ids_by_subject(embedded_mailbox)
    outstanding = next(i for s, i in subjects.items() if s.startswith("Outstanding Invoices"))
    assert outstanding in ids(search(PAYMENT, config=cfg, limit=20))
    excluded = search(f"{PAYMENT} -outstanding", config=cfg, limit=20)
    assert excluded.hits and outstanding not in ids(excluded)
    phrase = search('"stock option plan"', config=cfg, limit=20)  # meaning alone would return all eleven
    assert phrase.hits and all("stock option plan" in (h.subject + h.snippet).lower().replace("[[", "")
                               .replace("]]", "") for h in phrase.hits)
    assert all(any(w.retriever == "vector" for w in h.why) for h in phrase.hits)
    lists = search(f"{PAYMENT} label:Lists", config=cfg, limit=20)
    assert all("Lists" in h.labels or any("Lists" in f for f in h.folders) for h in lists.hits)


def test_a_meaning_only_hit_has_a_snippet_from_its_best_chunk(embedded_mailbox: Path) -> None:
    r = search(PAYMENT, config=concept(embedded_mailbox), limit=3)
    assert r.mode == "hybrid" and r.hits
    for hit in r.hits:
        assert [w.retriever for w in hit.why] == ["vector"] and hit.snippet


def test_retrievers_one_at_a_time(embedded_mailbox: Path) -> None:
    cfg = concept(embedded_mailbox)
    kw = search("invoice", config=cfg, retrievers=("keyword",))
    vec = search("invoice", config=cfg, retrievers=("vector",))
    assert (kw.mode, kw.degraded, vec.mode, vec.degraded) == ("keyword", False, "vector", False)
    assert {w.retriever for h in kw.hits for w in h.why} == {"keyword"}
    assert {w.retriever for h in vec.hits for w in h.why} == {"vector"}
    odd = search("invoice", config=cfg, retrievers=("magic",))
    assert odd.mode == "hybrid" and any("retrievers=" in w for w in odd.warnings)


def test_low_confidence_needs_a_weak_keyword_side_and_a_low_cosine(embedded_mailbox: Path) -> None:
    strict = concept(embedded_mailbox, low_confidence_cosine={"concept": 0.99})
    lenient = concept(embedded_mailbox, low_confidence_cosine={"concept": 0.01})
    assert search(PAYMENT, config=strict).low_confidence is True  # no keyword hit, cosine under 0.99
    assert search(PAYMENT, config=lenient).low_confidence is False  # the best cosine clears 0.01
    assert search("invoice", config=strict).low_confidence is False  # a keyword hit holds every word


def test_an_identifier_no_message_holds_is_low_confidence(embedded_mailbox: Path) -> None:
    """The nearest in meaning to "invoice 4471-B" is some other invoice: whatever its cosine, a
    question whose identifier no keyword hit holds is not answered with confidence."""
    lenient = concept(embedded_mailbox, low_confidence_cosine={"concept": 0.01})
    response = search("where is the invoice 4471-B for payables?", config=lenient)
    assert response.hits and response.low_confidence is True
    assert search("where is the invoice for payables?", config=lenient).low_confidence is False


def test_a_question_no_keyword_hit_holds_whole_weighs_keywords_less(embedded_mailbox: Path) -> None:
    cfg = concept(embedded_mailbox)
    question = "which message talks about paying a bill for the payables?"
    response = search(question, config=cfg, explain=True)
    assert response.explain.weights["keyword"] == pytest.approx(cfg.search.keyword_partial_weight)
    whole = search("invoice payables", config=cfg, explain=True)  # a lookup: every hit holds every word
    assert whole.explain.weights["keyword"] == pytest.approx(cfg.search.keyword_weight)
    plain = concept(embedded_mailbox, keyword_partial_weight=1.0)
    assert search(question, config=plain, explain=True).explain.weights["keyword"] == pytest.approx(1.0)


# ---- degraded ----------------------------------------------------------------------------------

class _Wrapped:
    """The concept embedder under another name: same fingerprint, so its vectors are current."""

    dim = 256

    def __init__(self, name: str, on_query: str):
        self.name = name
        self.inner = ConceptEmbedder()
        self.on_query = on_query

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        if self.on_query == "slow":
            time.sleep(1.0)
        elif self.on_query == "raise":
            raise RuntimeError("the model fell over")
        return self.inner.embed_query(text)


def _broken_factory(config: Config):
    raise OSError("model.safetensors: no such file")


embedders.register("test-unloadable", _broken_factory)
embedders.register("test-slow", lambda config: _Wrapped("test-slow", "slow"))
embedders.register("test-raises", lambda config: _Wrapped("test-raises", "raise"))
embedders.register("test-concept-128", lambda config: ConceptEmbedder(dim=128))


def degraded(cfg: Config, query: str = "invoice") -> tuple[str | None, list[int], object]:
    r = search(query, config=cfg, limit=5)
    assert r.degraded is True and r.mode == "keyword", (r.mode, r.degraded_reason)
    assert r.hits and {w.retriever for h in r.hits for w in h.why} == {"keyword"}  # keyword results stand
    return r.degraded_reason, ids(r), r


def test_no_embedder(embedded_mailbox: Path) -> None:
    reason, _, r = degraded(config_for(embedded_mailbox, model="test-unloadable"))
    assert reason == "no_embedder" and any("no such file" in w for w in r.warnings)


def test_no_vector_store_loads_no_model(tmp_path: Path) -> None:
    home = build_mailbox(tmp_path / "bare")
    reason, _, _ = degraded(config_for(home, model="test-unloadable"))  # a model that cannot load is not tried
    assert reason == "no_vector_store"


def test_no_vectors(tmp_path: Path) -> None:
    home = build_mailbox(tmp_path / "bare")
    cfg = concept(home)
    VectorStore(home, create=True).ensure(embedding.fingerprint_of(ConceptEmbedder()))
    reason, _, r = degraded(cfg)
    assert reason == "no_vectors" and r.vector_coverage == 0.0


def test_model_mismatch(home: Path) -> None:
    reason, _, r = degraded(config_for(home, model="test-concept-128"))  # vectors of concept:256
    assert reason == "model_mismatch" and any("stale" in w for w in r.warnings) and r.vector_coverage == 0.0


def test_timeout_is_all_rounds_together(home: Path) -> None:
    reason, _, r = degraded(config_for(home, model="test-slow", vector_timeout_seconds=0.2))
    assert reason == "timeout" and any("vector_timeout_seconds" in w for w in r.warnings)


def test_an_exception_is_error(home: Path) -> None:
    reason, _, r = degraded(config_for(home, model="test-raises"))
    assert reason == "error" and any("the model fell over" in w for w in r.warnings)


def test_keyword_index_unavailable_answers_from_the_vectors(home: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(home / "index.db") + suffix).unlink(missing_ok=True)
    r = search(PAYMENT, config=concept(home), limit=5)
    assert (r.mode, r.degraded, r.degraded_reason) == ("vector", True, "keyword_index_unavailable")
    assert r.hits and {w.retriever for h in r.hits for w in h.why} == {"vector"}
    assert len(r.hits) == 1  # Past Due (0.46); the rest of the mailbox is under the floor
    # what only index.db can check (a phrase) is not guessed: nothing rather than a wrong hit
    phrase = search('"stock option plan"', config=concept(home), limit=5)
    assert phrase.hits == () and phrase.degraded_reason == "keyword_index_unavailable"


def test_model_none_is_keyword_mode_by_choice(embedded_mailbox: Path) -> None:
    r = search("invoice", config=config_for(embedded_mailbox, model="none"))
    assert (r.mode, r.degraded, r.degraded_reason, r.vector_coverage) == ("keyword", False, None, None)
    assert r.hits


def test_a_deleted_message_is_never_returned_by_meaning(home: Path) -> None:
    cfg = concept(home, vector_min_cosine={})  # the two invoices by meaning: one over the floor, one under
    before = search(PAYMENT, config=cfg, limit=20)
    gone = before.hits[0].id
    with open_store(home) as raw, raw.transaction():
        raw.delete_messages([gone])  # vectors and index.db still hold it until the next index run
    after = search(PAYMENT, config=cfg, limit=20)
    assert after.hits and gone not in ids(after)


# ---- the daemon's socket -------------------------------------------------------------------------

def comparable(response) -> dict:
    d = asdict(response) if not isinstance(response, dict) else json.loads(json.dumps(response))
    d.pop("timings")
    if d.get("explain"):
        for r in d["explain"]["retrievers"]:
            r.pop("ms")
    return json.loads(json.dumps(d))


def test_daemon_and_in_process_give_the_same_results(home: Path, oaken_home: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    cfg = concept(home)
    oaken_home.mkdir(parents=True, exist_ok=True)
    # server_idle_minutes = 0: with no daemon, the command searches here (no background server)
    (oaken_home / "config.toml").write_text(
        f'[paths]\ndata_dir = "{home}"\n\n[embedder]\nmodel = "concept"\n\n[search]\nserver_idle_minutes = 0\n')
    stop = threading.Event()
    srv = server.SearchServer(cfg, stop).start()
    srv.warm()
    try:
        for query, params in ((PAYMENT, {"limit": 5, "explain": True}), ("invoice 2001", {}),
                              ('"stock option plan"', {"sort": "date"}), ("is:unread", {"limit": 3})):
            via_socket = server.ask(cfg, query, params)
            assert via_socket is not None
            assert comparable(via_socket) == comparable(search(query, config=cfg, **params))
        assert main(["search", "--json", "--explain", PAYMENT]) == 0
        captured = capsys.readouterr()
        daemon_json = json.loads(captured.out)
        assert "daemon" not in captured.err  # answered by the daemon: no hint
        assert main(["search", "--explain", PAYMENT]) == 0
        table = capsys.readouterr().out
        assert "vector rank 1: 1 / (k + 1) = 0.01639" in table and "fusion: rrf_k 60" in table
    finally:
        stop.set()
        srv.thread.join(5)
    assert main(["search", "--json", "--explain", PAYMENT]) == 0
    captured = capsys.readouterr()
    assert comparable(json.loads(captured.out)) == comparable(daemon_json)
    assert "a running daemon" in captured.err or "oaken sync --daemon" in captured.err


# ---- llm_rewrite ---------------------------------------------------------------------------------

def rewriter(tmp_path: Path, body: str) -> str:
    path = tmp_path / "rewrite.py"
    path.write_text("import sys, time\n" + body + "\n")
    return f"{sys.executable} {path}"


def traces(r) -> dict[str, tuple[str, str]]:
    return {t.retriever: (t.state, t.expression) for t in r.explain.retrievers}


def test_llm_rewrite_changes_only_the_embedded_text(embedded_mailbox: Path, tmp_path: Path) -> None:
    query = "money owed from:enron.com"
    plain = search(query, config=concept(embedded_mailbox), explain=True)
    cmd = rewriter(tmp_path, "print('invoice payment due: ' + sys.stdin.read().strip())")
    rewritten = search(query, config=concept(embedded_mailbox, llm_rewrite=True, rewrite_command=cmd), explain=True)
    assert traces(rewritten)["vector"][1] == "invoice payment due: money owed"  # operators never reach it
    assert traces(plain)["vector"][1] == "money owed"
    assert traces(rewritten)["keyword"] == traces(plain)["keyword"]  # the keyword side is untouched
    assert not rewritten.warnings and rewritten.explain.parsed == plain.explain.parsed
    kw = lambda r: [(h.id, w.rank) for h in r.hits for w in h.why if w.retriever == "keyword"]  # noqa: E731
    assert kw(rewritten) == kw(plain)


@pytest.mark.parametrize("body, seconds, expect", [
    ("sys.exit(2)", 5.0, "exited with status 2"),
    ("time.sleep(5); print('late')", 0.3, "took longer than 0.3 s"),
])
def test_a_failing_or_slow_rewrite_keeps_the_text_with_a_warning(embedded_mailbox: Path, tmp_path: Path,
                                                                 body: str, seconds: float, expect: str) -> None:
    cfg = concept(embedded_mailbox, llm_rewrite=True, rewrite_command=rewriter(tmp_path, body),
                  rewrite_timeout_seconds=seconds)
    r = search(PAYMENT, config=cfg, explain=True)
    assert r.mode == "hybrid" and not r.degraded and r.hits
    assert traces(r)["vector"][1] == PAYMENT and any(expect in w for w in r.warnings)


def test_the_daemon_starts_the_socket_and_answers_warm(home: Path) -> None:
    from oaken.daemon.search_socket import start_search_server

    cfg = concept(home)
    stop = threading.Event()
    srv = start_search_server(cfg, stop)
    try:
        assert srv is not None and server.socket_path(cfg).exists()
        answer = server.ask(cfg, PAYMENT, {"limit": 5})
        assert answer is not None and answer.mode == "hybrid"
        assert comparable(answer) == comparable(search(PAYMENT, config=cfg, limit=5))
    finally:
        stop.set()
        srv.thread.join(5)
    assert not server.socket_path(cfg).exists()
