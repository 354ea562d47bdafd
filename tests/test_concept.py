"""The concept embedder: deterministic, unit-norm, finds paraphrases, blind to identifiers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from oaken.evals.mailbox import INCIDENT_ASPECTS, PARAPHRASES, PLACES
from oaken.evals.questions import check_paraphrase
from oaken.index.concept import ConceptEmbedder, concepts_of, features, stem, tokens
from oaken.index.embedders import Embedder


def test_implements_the_protocol_with_unit_norm_float32() -> None:
    e: Embedder = ConceptEmbedder()
    docs = e.embed_documents(["The flight to Lisbon is delayed.", "", "INV-1005"])
    assert docs.shape == (3, e.dim) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    q = e.embed_query("plane")
    assert q.shape == (e.dim,) and q.dtype == np.float32
    assert e.fingerprint.startswith(f"concept:{e.dim}:")
    assert e.embed_documents([]).shape == (0, e.dim)


def test_same_text_same_vector_in_another_process() -> None:
    text = "Dinner with the Madrid clients was rescheduled to Friday."
    here = ConceptEmbedder().embed_query(text)
    code = (
        "import sys; from oaken.index.concept import ConceptEmbedder; "
        f"sys.stdout.write(ConceptEmbedder().embed_query({text!r}).tobytes().hex())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert np.frombuffer(bytes.fromhex(out), dtype=np.float32).tolist() == here.tolist()


def test_imports_nothing_heavy() -> None:
    code = ("import sys, oaken.index.concept; "
            "print(' '.join(m for m in ('torch', 'sentence_transformers', 'lancedb', 'lance') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_paraphrase_beats_the_same_sentence_about_another_place() -> None:
    e = ConceptEmbedder()
    fact, question = PARAPHRASES[0]
    q = e.embed_query(question.format(country="Portugal"))
    target, other, unrelated = e.embed_documents([
        fact.format(city="Lisbon"), fact.format(city="Berlin"), "The quarterly metrics digest is ready."])
    assert q @ target > q @ other > q @ unrelated
    assert q @ target > 0.6


def test_identifiers_carry_no_meaning() -> None:
    e = ConceptEmbedder()
    a, b = e.embed_documents(["Please pay invoice INV-1005 by Friday.", "Please pay invoice INV-1006 by Friday."])
    assert float(a @ b) > 0.999
    assert tokens("INV-1005 QX7K2M v2.4.1") == ["inv"]


def test_inflections_and_phrases_fold_to_one_concept() -> None:
    assert stem("flights") == stem("flight")
    assert stem("postponed") == stem("postpone")
    assert concepts_of("they called off the trip") >= {"cancel", "trip"}
    assert concepts_of("I need some time off") == {"vacation"}
    assert concepts_of("the outage") == concepts_of("downtime") == {"outage"}
    assert features("invoices") == features("invoice")


def test_every_planted_paraphrase_is_honest() -> None:
    """No question shares a content word with its fact, and each has a concept to find it by."""
    for fact, question in PARAPHRASES:
        for city, country in PLACES:
            assert check_paraphrase(fact.format(city=city), question.format(country=country)) == [], question
            assert concepts_of(question.format(country=country)) <= concepts_of(fact.format(city=city)) | {
                "cause", "course"}
    for fact, question in INCIDENT_ASPECTS:
        assert check_paraphrase(fact, question.format(code="OPS-1234")) == [], question
