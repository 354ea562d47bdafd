"""Near-identical messages fold into one hit: unit rules, and real petition letters through search."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from oaken import config as config_mod
from oaken.api import import_mail
from oaken.index import indexer
from oaken.search import copies
from oaken.search.engine import search

DATA = Path(__file__).parent / "data"
LETTER = ("I am writing to urge you to donate the millions of dollars you made from selling stock before the "
          "company declared bankruptcy to funds that benefit the employees who lost their retirement savings, "
          "and provide relief to low-income consumers in California who cannot afford to pay their energy "
          "bills. While you netted well over a hundred million, many employees were financially devastated "
          "when their retirement plans were wiped out, and thousands of consumers are unable to pay their "
          "basic bills. Please donate this money to the funds set up to help repair their lives.")


def texts(table: dict[int, tuple[str, str]]):
    """fold's subjects and bodies from a table of (subject, words)."""
    return (lambda ms: {m: table[m][0] for m in ms if m in table},
            lambda ms: {m: table[m][1] for m in ms if m in table})


def test_copies_fold_behind_the_first_and_pages_join() -> None:
    table = {
        1: ("Donate proceeds", f"Alice Smith 1 Main St\n{LETTER}\nSincerely, Alice"),
        2: ("Re: other", "A different message about the quarterly numbers " * 5),
        3: ("RE: Donate proceeds", f"Bob Jones 2 Elm St\n{LETTER}\nSincerely, Bob"),
        4: ("Donate proceeds", "Thanks!"),  # too short to fold, whatever its subject
        5: ("Fw: donate  PROCEEDS", f"Carol 3 Oak St\n{LETTER}\nSincerely, Carol"),
        6: ("Something else", f"Dan\n{LETTER}\nSincerely, Dan"),  # same words, another subject: kept
    }
    order = [1, 2, 3, 4, 5, 6]
    kept, folded = copies.fold(order, lambda m: m, 10, *texts(table))
    assert kept == [1, 2, 4, 6] and folded == {1: (3, 5)}
    # a page reads only as far as it needs; the next page, reading further, continues the same list
    first, _ = copies.fold(order, lambda m: m, 2, *texts(table), block=2)
    second, _ = copies.fold(order, lambda m: m, 4, *texts(table), block=2)
    assert first[:2] == [1, 2] and second[2:4] == [4, 6]


def test_alike_needs_most_of_the_words() -> None:
    a = copies.shingles(LETTER)
    b = copies.shingles(LETTER + " In the second half of this letter I ask for something else entirely: that the "
                        "board resign, that the auditors be replaced, that the pension plan be restored in full, "
                        "and that every executive return the bonuses paid in the last year before the filing.")
    assert a is not None and b is not None
    assert copies._alike(a, a) and not copies._alike(a, b)
    assert copies.shingles("too short to fold") is None


def test_petition_letters_are_one_hit_with_their_copies(oaken_home: Path, tmp_path: Path) -> None:
    inbox = tmp_path / "mail"
    shutil.copytree(DATA / "copies", inbox, ignore=shutil.ignore_patterns("*.md"))
    for path in (DATA / "search" / "INBOX" / "cur").glob("*"):
        shutil.copyfile(path, inbox / path.name)
    cfg = config_mod.from_dict({"embedder": {"model": "none"}})
    assert import_mail([inbox], account="work", config=cfg).added >= 9
    indexer.update(cfg, keyword_only=True)
    response = search("donate proceeds stock", config=cfg, limit=10)
    petitions = [h for h in response.hits if h.subject.startswith("Demand Ken Lay")]
    assert len(petitions) == 1 and len(petitions[0].copies) == 2
    assert petitions[0].id not in petitions[0].copies
    paged = search("donate proceeds stock", config=cfg, limit=1, offset=1)
    assert [h.id for h in paged.hits] == [h.id for h in response.hits[1:2]]
    by_date = search("donate proceeds stock", config=cfg, limit=10, sort="date")
    assert sum(h.subject.startswith("Demand Ken Lay") for h in by_date.hits) == 3  # date order lists every copy


def test_the_same_letter_with_other_attachments_is_not_folded(oaken_home: Path, tmp_path: Path) -> None:
    """Copies are judged by their words and their attachments' words: the same petition sent with
    a different real document attached stays its own hit (before: folded by the body alone); with
    the same document attached, the copies still fold."""
    from email import message_from_bytes, policy

    inbox = tmp_path / "mail"
    inbox.mkdir()
    letters = sorted((DATA / "copies").glob("*.eml"))
    attach = {0: "crazyones.pdf", 1: "blk-paras-and-tables.docx", 2: "blk-paras-and-tables.docx"}
    for i, path in enumerate(letters):
        msg = message_from_bytes(path.read_bytes(), policy=policy.default)
        body = msg.get_body(preferencelist=("plain",)).get_content()  # type: ignore[union-attr]
        del msg["Content-Type"], msg["Content-Transfer-Encoding"]
        msg.set_content(body)
        data = (DATA / "attachments" / attach[i]).read_bytes()
        msg.add_attachment(data, maintype="application", subtype="octet-stream", filename=attach[i])
        (inbox / path.name).write_bytes(msg.as_bytes())
    cfg = config_mod.from_dict({"embedder": {"model": "none"}})
    assert import_mail([inbox], account="work", config=cfg).added == 3
    indexer.update(cfg, keyword_only=True)
    hits = search("donate proceeds stock", config=cfg, limit=10).hits
    assert sorted(len(h.copies) for h in hits) == [0, 1]  # the .pdf alone; the two .docx as one
