"""Scripts written without spaces between words (issue #17 item 3): a Chinese, Japanese or Korean
word of two or more characters finds the real message that holds it inside a longer run, through
the real import and indexer; diacritics fold; an index.db made by the tokenizer before is rebuilt,
never read as if it could answer.

The messages (tests/data/cjk, origins in its README) are real mail in GB2312, Big5, EUC-JP,
EUC-KR and Thai in UTF-8. Before the oaken_cjk tokenizer, unicode61 made each run of Chinese or Japanese one token
and kept a Korean particle on its word, so every search for a word below found nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw
import pytest

from oaken import api
from oaken.config import Config
from oaken.index import indexer
from oaken.index.keyword import SNIPPET_CLOSE, SNIPPET_OPEN, index_path, tokenizer
from oaken.search.engine import search
from tests.search_fixtures import ACCOUNT, DATA, config_for

CJK = Path(__file__).parent / "data" / "cjk"
ZH = "RE: 装硬碟问题"  # debian-chinese-gb, simplified Chinese
ZH_TW_PREFIX = "[SLAT-talk] 鉅靡6月17日新片又到"  # traditional Chinese, Big5
JA = "[ports-jp 8947] Re: ipv6 & ruby"
KO = "NOTE: 한국말로 하는 것"
TH = "ทักทาย"  # "greetings": unsolicited mail to the linux-acpi list, UTF-8 base64
FRENCH = "Essai accentué"


def cjk_mailbox(root: Path, *more: Path) -> Config:
    """The messages of tests/data/cjk (and the folders `more`) imported into root/home and indexed."""
    mail = root / "mail"
    shutil.copytree(CJK, mail, ignore=shutil.ignore_patterns("*.md"))
    home = root / "home"
    home.mkdir()
    cfg = config_for(home)
    api.import_mail([mail, *more], account=ACCOUNT, config=cfg)
    indexer.update(cfg)
    return cfg


@pytest.fixture(scope="module")
def cfg(tmp_path_factory: pytest.TempPathFactory) -> Config:
    return cjk_mailbox(tmp_path_factory.mktemp("cjk"), DATA / "INBOX")


def subjects(cfg: Config, query: str) -> list[str]:
    return [h.subject for h in search(query, config=cfg).hits]


@pytest.mark.parametrize(
    "query, subject",
    [
        ("电脑", ZH),  # "我想在我的电脑上，增装一台硬碟": a word inside a run of eight characters
        ("硬碟", ZH),
        ("網址", ZH_TW_PREFIX),  # "永久網址："
        ("更新日期", ZH_TW_PREFIX),  # four characters: three bigrams in a row
        ("パッチ", JA),  # "以下、patches/patch-aa に対するパッチです。"
        ("修正", JA),  # "ruby repositoryには修正いれてあるとおもいます。"
        ("이름", KO),  # "제 이름은 Jamis입니다.": the word without its particle 은
        ("하나님", KO),  # "하나님을"
        ("한국말", KO),  # the subject's "한국말로"
        ("สบายดี", TH),  # "ฉันหวังว่าคุณสบายดี" ("I hope you are well"): the end of a run of 19 characters
        ("ตอบกลับ", TH),  # "โปรดตอบกลับฉ" ("please reply to me", cut short as sent)
        ("วันนี้", TH),  # "วันนี้คุณเป็นอย่างไรบ้าง": the start of a run, with its vowel and tone marks
        ("ทักทาย", TH),  # the subject
    ],
)
def test_a_word_finds_its_message(cfg: Config, query: str, subject: str) -> None:
    found = subjects(cfg, query)
    assert found and found[0].startswith(subject), found


def test_a_word_finds_only_the_messages_that_hold_it(cfg: Config) -> None:
    assert subjects(cfg, "硬碟") == [ZH]
    assert subjects(cfg, "이름") == [KO]
    assert subjects(cfg, "สบายดี") == [TH]
    assert subjects(cfg, "電腦") == []  # traditional 電腦 is not simplified 电脑: no folding across scripts


def test_a_phrase_in_cjk_is_characters_in_order(cfg: Config) -> None:
    assert subjects(cfg, '"硬碟的设定"') == [ZH]  # "你的硬碟的设定"
    assert subjects(cfg, '"设定的硬碟"') == []  # the same characters in another order
    assert subjects(cfg, "硬碟的设定") == [ZH]  # unquoted: still one word, so the same phrase


def test_a_word_mixed_with_latin_letters(cfg: Config) -> None:
    assert subjects(cfg, "Jamis입니다") == [KO]  # "제 이름은 Jamis입니다."
    assert subjects(cfg, '"ruby repositoryには修正"') == [JA]


def test_a_single_character_finds_the_runs_that_hold_it(cfg: Config) -> None:
    assert subjects(cfg, "碟") == [ZH]


def test_the_snippet_is_the_original_text(cfg: Config) -> None:
    hit = search("电脑", config=cfg).hits[0]
    assert f"{SNIPPET_OPEN}电脑{SNIPPET_CLOSE}" in hit.snippet
    assert "我的" in hit.snippet.replace(SNIPPET_OPEN, "").replace(SNIPPET_CLOSE, "")  # not bigrams


def test_diacritics_fold_as_before(cfg: Config) -> None:
    assert subjects(cfg, "accentue") == [FRENCH]  # "Essai accentué"
    assert subjects(cfg, "accentué") == [FRENCH]


def test_an_index_made_by_the_old_tokenizer_is_rebuilt(tmp_path: Path) -> None:
    """index.db files made before the oaken_cjk tokenizer (schema 2) cannot find a word inside a
    run: a search says the index is stale instead of answering from it, and the next keyword pass
    builds a new one."""
    cfg = cjk_mailbox(tmp_path)
    db = apsw.Connection(str(index_path(tmp_path / "home")))
    with db:  # what an index.db of the tokenizer before looks like to this code
        db.execute("UPDATE meta SET value = 2 WHERE key = 'schema'")
    db.close()

    stale = search("电脑", config=cfg)
    assert stale.hits == () and stale.degraded and stale.degraded_reason == "keyword_index_unavailable"
    assert any("made by another version of Oaken" in w for w in stale.warnings), stale.warnings

    report = indexer.update(cfg)
    assert report.rebuilt and report.rebuild_reason == "made by another version of Oaken"
    assert [h.subject for h in search("电脑", config=cfg).hits] == [ZH]


def test_deleting_a_cjk_message_leaves_the_index_consistent(tmp_path: Path) -> None:
    """FTS5 deletes a chunk of external content by cutting its text again: the tokens must be the
    ones it was indexed with, or the index keeps stray entries (found by FTS5's integrity-check,
    which compares the index with the text)."""
    from oaken.index.keyword import KeywordWriter

    cfg = cjk_mailbox(tmp_path)
    zh = search("电脑", config=cfg).hits[0].id
    with KeywordWriter(tmp_path / "home") as writer:
        with writer.transaction():
            writer.delete([zh])
        writer.db.execute("INSERT INTO fts(fts, rank) VALUES ('integrity-check', 1)")
    assert search("电脑", config=cfg).hits == ()
    assert [h.subject for h in search("이름", config=cfg).hits] == [KO]


# ---- the tokenizer itself -------------------------------------------------------------------------


def _tokens(text: str, flags: int) -> list[tuple]:
    db = apsw.Connection(":memory:")
    tokenizer.register(db)
    tok = db.fts5_tokenizer(tokenizer.NAME, list(tokenizer.BASE))
    return tok(text.encode(), flags, None)


@pytest.mark.parametrize(
    "text",
    [
        "今日の会議について",
        "2024年度の予算",
        "iPhone用のWindows10対応ソフト",
        "회의를 시작합니다",
        "ประชุมวันนี้",
        "a 碟 b",
    ],
)
def test_a_query_takes_as_many_positions_as_the_text(text: str) -> None:
    """A phrase mixing runs and other words lines up only if the query and the text number their
    tokens alike; the text's extra single characters share their bigram's position."""
    doc = _tokens(text, apsw.FTS5_TOKENIZE_DOCUMENT)
    query = _tokens(text, apsw.FTS5_TOKENIZE_QUERY)
    assert len(doc) == len(query)
    assert [t[2] for t in doc] == [t[2] for t in query]  # the first token at each position agrees


def test_snippet_offsets_cover_the_characters_of_each_token() -> None:
    text = "iPhone用の会議 café ครับ 회의를"
    utf8 = text.encode()
    for start, end, first, *_ in _tokens(text, apsw.FTS5_TOKENIZE_AUX):
        piece = utf8[start:end].decode()
        assert piece.lower() == first or first in ("iphon", "cafe"), (piece, first)


def test_thai_is_cut_into_bigrams_not_at_its_vowel_signs() -> None:
    """unicode61 drops Thai vowel signs and tone marks and cuts words at them (ประชุม became
    ประช and ม): a Thai word was not findable by itself."""
    query = [t[2] for t in _tokens("ประชุม", apsw.FTS5_TOKENIZE_QUERY)]
    assert query == ["ปร", "ระ", "ะช", "ชุ", "ุม"]
    db = apsw.Connection(":memory:")
    tokenizer.register(db)
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{tokenizer.TOKENIZE}')")
    db.execute("INSERT INTO t VALUES ('สวัสดีครับ ประชุมวันนี้ตอนบ่าย')")
    assert db.execute("SELECT count(*) FROM t WHERE t MATCH ?", ('"ประชุม"',)).fetchone()[0] == 1
    assert db.execute("SELECT count(*) FROM t WHERE t MATCH ?", ('"วันนี้"',)).fetchone()[0] == 1
    assert db.execute("SELECT count(*) FROM t WHERE t MATCH ?", ('"ประชุมครับ"',)).fetchone()[0] == 0


def test_latin_text_is_unicode61_unchanged() -> None:
    text = "Meeting at the café with Müller about running"
    db = apsw.Connection(":memory:")
    base = db.fts5_tokenizer(tokenizer.BASE[0], list(tokenizer.BASE[1:]))
    assert [t[2] for t in _tokens(text, apsw.FTS5_TOKENIZE_DOCUMENT)] == [
        t[2] for t in base(text.encode(), apsw.FTS5_TOKENIZE_DOCUMENT, None)
    ]
    assert "cafe" in [t[2] for t in _tokens(text, apsw.FTS5_TOKENIZE_DOCUMENT)]
    assert "muller" in [t[2] for t in _tokens(text, apsw.FTS5_TOKENIZE_DOCUMENT)]
