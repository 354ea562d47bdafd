"""A long message among short ones: its chunks must not crowd the others out of a retriever's list.

A word of a subject is in every chunk of its message (the keyword index holds the subject with
each chunk; the embedder reads it too), so a message of a thousand chunks (a long report, an
attachment's words) could fill all `max_candidates` chunks a retriever reads. The fault suite found
it: a lookup of such a message's own word listed it alone, cut short; fusion gives a cut list's
first rank almost nothing, and the search answered with two other messages first, not degraded.
Real mail (tests/data/search), real index.db, Tantivy and LanceDB, the concept embedder;
`max_candidates` is lowered so that a message of ~100 chunks is long enough.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oaken import api
from oaken.index import embedding, indexer
from oaken.search.engine import search
from oaken.store import Store
from tests.search_fixtures import ACCOUNT, DATA, build_mailbox, config_for, token_message

WORD = "zebrafish"
OWN = "qz7longreport"  # held by the long message only (in its subject: every chunk)
OTHER = "tapir"  # in the long message's subject too, and in one message beside WORD but in another chunk
SETTINGS = {"max_candidates": 40, "fused_depth": 10}


def _long_message() -> bytes:
    """A real message's headers, a subject naming WORD and OWN, and ~100 chunks of its real words."""
    base = (DATA / "INBOX" / "cur" / "enron-skilling-inbox-13!2,").read_bytes().replace(b"\r\n", b"\n")
    head, _, body = base.partition(b"\n\n")
    keep = (b"message-id:", b"subject:", b"content-type:", b"content-transfer-encoding:")
    lines = [ln for ln in head.split(b"\n") if not ln.lower().startswith(keep)]
    lines += [
        b"Message-ID: <long-report@oaken.test>",
        f"Subject: {WORD} survey {OWN} {OTHER}".encode(),
        b"Content-Type: text/plain; charset=utf-8",
    ]
    words = body.decode("utf-8", "replace").split() * 40
    paragraphs = [f"Section {i}: {WORD} counts. " + " ".join(words[i * 37 : i * 37 + 140]) for i in range(200)]
    return b"\n".join(lines) + b"\n\n" + "\n\n".join(paragraphs).encode() + b"\n"


def _spread_message() -> bytes:
    """A real message whose first chunk holds WORD and whose last holds OTHER (~4 chunks apart)."""
    base = (DATA / "INBOX" / "cur" / "enron-lay-inbox-78!2,S").read_bytes().replace(b"\r\n", b"\n")
    head, _, body = base.partition(b"\n\n")
    keep = (b"message-id:", b"subject:", b"content-type:", b"content-transfer-encoding:")
    lines = [ln for ln in head.split(b"\n") if not ln.lower().startswith(keep)]
    lines += [b"Message-ID: <spread@oaken.test>", b"Subject: field notes", b"Content-Type: text/plain; charset=utf-8"]
    words = body.decode("utf-8", "replace").split() * 20
    paragraphs = [" ".join(words[i * 53 : i * 53 + 140]) for i in range(6)]
    paragraphs[0] = f"The {WORD} tank. " + paragraphs[0]
    paragraphs[-1] += f" A {OTHER} at the end."
    return b"\n".join(lines) + b"\n\n" + "\n\n".join(paragraphs).encode() + b"\n"


@pytest.fixture(scope="module")
def mailbox(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, set[int]]:
    """The eleven messages of tests/data/search, the long one, three short ones holding WORD and
    one holding WORD and OTHER in different chunks."""
    home = build_mailbox(tmp_path_factory.mktemp("long"))
    folder = home / "more"
    folder.mkdir()
    (folder / "long.eml").write_bytes(_long_message())
    (folder / "spread.eml").write_bytes(_spread_message())
    for n in range(3):
        (folder / f"short-{n}.eml").write_bytes(token_message(WORD, n))
    cfg = config_for(home, model="concept")
    api.import_mail([folder], account=ACCOUNT, config=cfg)
    indexer.update(cfg)
    embedding.embed_pending(cfg)  # (the import's own pass may have embedded them already)
    with Store(home / "raw.db", readonly=True) as store:
        metas = store.metas(store.all_message_ids())
    long_id = next(i for i, m in metas.items() if m.message_id == "long-report@oaken.test")
    short = {i for i, m in metas.items() if m.message_id.startswith("token-")}
    index = home / "index.db"
    chunks = indexer_chunks(index, long_id)
    assert chunks > 2 * SETTINGS["max_candidates"], chunks  # long enough to fill every round alone
    return home, long_id, short


def indexer_chunks(index: Path, message: int) -> int:
    import sqlite3

    with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM chunks WHERE message = ?", (message,)).fetchone()[0])


def test_the_keyword_list_holds_the_short_messages_beside_the_long_one(mailbox: tuple[Path, int, set[int]]) -> None:
    home, long_id, short = mailbox
    r = search(WORD, limit=10, retrievers=("keyword",), config=config_for(home, model="concept", **SETTINGS))
    found = {i for h in r.hits for i in (h.id, *h.copies)}  # the short ones are near copies: folded
    assert {long_id, *short} <= found, (found, long_id, short)
    assert not r.degraded


def test_a_lookup_of_the_long_messages_own_word_ranks_it_first(mailbox: tuple[Path, int, set[int]]) -> None:
    """Hybrid, as the fault suite searched: the keyword list holds the one message, whole."""
    home, long_id, _ = mailbox
    r = search(OWN, limit=5, config=config_for(home, model="concept", **SETTINGS), explain=True)
    assert r.mode == "hybrid" and not r.degraded
    assert [h.id for h in r.hits][:1] == [long_id], [(h.id, h.subject) for h in r.hits]
    keyword = next(t for t in r.explain.retrievers if t.retriever == "keyword")
    assert keyword.cut == 0  # every message holding the word was read: the list is whole


def test_a_lookup_spread_over_chunks_finds_its_message_past_the_long_one(
    mailbox: tuple[Path, int, set[int]],
) -> None:
    """The long message holds both words in every chunk, so the chunks holding either word that
    a lookup reads for a message holding them in different chunks are all the long message's."""
    home, long_id, _ = mailbox
    with Store(home / "raw.db", readonly=True) as store:
        metas = store.metas(store.all_message_ids())
    spread = next(i for i, m in metas.items() if m.message_id == "spread@oaken.test")
    assert indexer_chunks(home / "index.db", spread) >= 3
    r = search(f"{WORD} {OTHER}", limit=10, retrievers=("keyword",), config=config_for(home, model="concept", **SETTINGS))
    assert [h.id for h in r.hits][:2] == [long_id, spread], [(h.id, h.subject) for h in r.hits]


def test_the_meaning_list_holds_more_than_the_long_message(mailbox: tuple[Path, int, set[int]]) -> None:
    home, long_id, _ = mailbox
    r = search(f"{WORD} survey", limit=20, retrievers=("vector",), config=config_for(home, model="concept", **SETTINGS))
    listed = {i for h in r.hits for i in (h.id, *h.copies)}
    with Store(home / "raw.db", readonly=True) as store:
        every = set(store.all_message_ids())
    assert listed == every, (sorted(listed), long_id)  # 15 messages: each has a cosine, each is listed
