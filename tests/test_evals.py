"""The retrieval eval: the metrics on hand-made rankings, the mailbox and its questions, and (in
test_eval_run.py) the whole harness through the real pipeline."""

from __future__ import annotations

import email
import email.policy
import math
import re
from collections import Counter
from pathlib import Path

import pytest

from oaken.evals import mailbox, questions
from oaken.evals.questions import Question
from oaken.evals.retrieval import Ranking, find, ndcg_at, recall_at, reciprocal_rank, score, table
from oaken.index.concept import ConceptEmbedder, content_stems

# ---- metrics on hand-made rankings -----------------------------------------------------------


def test_recall_mrr_ndcg_by_hand() -> None:
    ranked = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]
    assert recall_at(ranked, ["c"], 1) == 0.0
    assert recall_at(ranked, ["c"], 5) == 1.0
    assert recall_at(ranked, ["c", "k"], 10) == 0.5
    assert recall_at(ranked, ["zz"], 10) == 0.0
    assert reciprocal_rank(ranked, ["c", "k"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, ["zz"]) == 0.0
    assert ndcg_at(ranked, ["a"], 10) == 1.0
    assert ndcg_at(ranked, ["c"], 10) == pytest.approx(1 / math.log2(4))
    # two relevant at ranks 2 and 4 against the ideal ranks 1 and 2
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at(ranked, ["b", "d"], 10) == pytest.approx(expected)
    assert ndcg_at(ranked, ["k"], 10) == 0.0


def test_score_rows_per_kind_overall_and_unanswerable() -> None:
    q1 = Question("e1", "exact", "INV-1", ("m1",))
    q2 = Question("p1", "paraphrase", "plane?", ("m2",))
    q3 = Question("u1", "unanswerable", "vet?", ())
    rankings = [
        Ranking(q1, "keyword", ("m1", "x"), False),
        Ranking(q2, "keyword", (), True),
        Ranking(q3, "keyword", (), True),
        Ranking(q1, "vector", ("x", "y", "m1"), False),
        Ranking(q2, "vector", ("m2",), False),
        Ranking(q3, "vector", ("x", "y", "z", "w"), False),
    ]
    scores = score(rankings)
    assert [(s.retriever, s.kind) for s in scores] == [
        ("keyword", "exact"), ("keyword", "paraphrase"), ("keyword", "overall"), ("keyword", "unanswerable"),
        ("vector", "exact"), ("vector", "paraphrase"), ("vector", "overall"), ("vector", "unanswerable")]
    kw = find(scores, "keyword", "overall")
    assert (kw.recall_at_1, kw.recall_at_10, kw.mrr, kw.low_confidence_rate) == (0.5, 0.5, 0.5, 0.5)
    vec = find(scores, "vector", "exact")
    assert (vec.recall_at_1, vec.recall_at_5, vec.mrr) == (0.0, 1.0, pytest.approx(0.3333, abs=1e-4))
    un = find(scores, "vector", "unanswerable")
    assert (un.mean_hits, un.low_confidence_rate) == (4.0, 0.0)
    assert find(scores, "keyword", "unanswerable").low_confidence_rate == 1.0
    text = table(scores)
    assert text.splitlines()[0].startswith("| retriever | kind |") and len(text.splitlines()) == 10


@pytest.fixture(scope="module")
def box1000() -> mailbox.Mailbox:
    return mailbox.generate(1000, seed=1)


# ---- the mailbox ------------------------------------------------------------------------------


def test_same_seed_same_mailbox_other_seed_other_mailbox() -> None:
    a, b, c = mailbox.generate(200, seed=3), mailbox.generate(200, seed=3), mailbox.generate(200, seed=4)
    assert [m.raw for m in a.messages] == [m.raw for m in b.messages]
    assert a.plants == b.plants
    assert [m.raw for m in a.messages] != [m.raw for m in c.messages]


def test_mailbox_looks_like_an_inbox(box1000: mailbox.Mailbox) -> None:
    box = box1000
    assert len(box.messages) == 1000
    assert len({m.message_id for m in box.messages}) == 1000
    parsed = [email.message_from_bytes(m.raw, policy=email.policy.default) for m in box.messages]
    replies = [p for p in parsed if p["In-Reply-To"]]
    assert len(replies) > 100
    assert all("wrote:\n>" in p.get_content() for p in replies)
    assert sum(1 for p in parsed if p["List-Id"]) > 50  # newsletters
    senders = Counter(p["From"].addresses[0].addr_spec for p in parsed)
    assert len(senders) > 20
    folders = Counter(m.folder for m in box.messages)
    assert {"INBOX", "Newsletters", "Notifications", "Work/Projects", "Archive"} <= set(folders)
    assert 0.5 < sum(m.seen for m in box.messages) / 1000 < 0.9
    assert {m.disposition for m in box.messages} == {"inbox", "archived", "discarded"}
    assert sum(1 for m in box.messages if m.labels) >= 30
    assert {m.category for m in box.messages} >= {"work", "finance", "newsletters", "notifications"}
    # a planted fact is never discarded: a search leaves discarded mail out
    by_id = {m.message_id: m for m in box.messages}
    assert all(by_id[r].disposition != "discarded" for p in box.plants for r in p.relevant)


def test_maildir_round_trip(tmp_path: Path) -> None:
    box = mailbox.generate(200, seed=2)
    root = mailbox.write_maildir(box, tmp_path)
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) == 200
    unread = [p for p in files if p.parent.name == "new"]
    assert len(unread) == sum(1 for m in box.messages if not m.seen and not m.flagged)
    assert (root / ".Work.Projects" / "cur").is_dir() and (root / ".Newsletters").is_dir()


# ---- the questions ----------------------------------------------------------------------------


def test_questions_of_every_kind_with_answers_in_the_mailbox(box1000: mailbox.Mailbox) -> None:
    box = box1000
    qs = questions.build(box)
    kinds = Counter(q.kind for q in qs)
    assert set(kinds) == set(questions.KINDS)
    assert min(kinds.values()) >= 20, kinds
    ids = {m.message_id for m in box.messages}
    for q in qs:
        assert (q.kind == "unanswerable") == (not q.relevant)
        assert set(q.relevant) <= ids
    assert len({q.id for q in qs}) == len(qs)


def test_exact_questions_have_lookalikes_that_meaning_cannot_split(box1000: mailbox.Mailbox) -> None:
    box = box1000
    by_id = {m.message_id: m for m in box.messages}
    e = ConceptEmbedder()
    for p in [p for p in box.plants if p.kind == "exact"][:5]:
        target = by_id[p.relevant[0]]
        subject = email.message_from_bytes(target.raw)["Subject"]
        lookalikes = [m for m in box.messages if m is not target
                      and _no_codes(email.message_from_bytes(m.raw)["Subject"]) == _no_codes(subject)]
        assert len(lookalikes) >= mailbox.FAMILY_SIZE - 1
        vecs = e.embed_documents([target.raw.decode(), lookalikes[0].raw.decode()])
        assert float(vecs[0] @ vecs[1]) > 0.95


def _no_codes(text: str) -> str:
    return re.sub(r"\S*\d\S*", "#", text)


def test_paraphrase_questions_share_no_content_word_with_their_fact(box1000: mailbox.Mailbox) -> None:
    box = box1000
    by_id = {m.message_id: m for m in box.messages}
    for q in questions.build(box):
        if q.kind != "paraphrase":
            continue
        body = email.message_from_bytes(by_id[q.relevant[0]].raw, policy=email.policy.default)
        fact_words = content_stems(body.get_content()) | content_stems(str(body["Subject"]))
        assert not (content_stems(q.query) & fact_words), q.query


def test_question_file_round_trip_and_errors(tmp_path: Path) -> None:
    qs = questions.build(mailbox.generate(200, seed=5))
    path = tmp_path / "q.jsonl"
    questions.save_jsonl(qs, path)
    assert questions.load_jsonl(path) == qs
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "query": "hello"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: expected"):
        questions.load_jsonl(bad)
    bad.write_text('{"id": "x", "kind": "unanswerable", "query": "q", "relevant": ["<a@b>"]}\n')
    with pytest.raises(ValueError, match="unanswerable but relevant"):
        questions.load_jsonl(bad)
