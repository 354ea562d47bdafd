"""The FTS5 tokenizer of index.db: unicode61 (in C) for text with spaces between words, character
bigrams for scripts written without them.

unicode61 makes a whole run of Chinese or Japanese (`今日の会議について`) one token, so the word
`会議` inside it is never found; it cuts Thai at every vowel sign and tone mark (they are not in
its letter categories) and drops the marks; it keeps a Korean particle on its word (`회의를`), so
`회의` does not find it. Here a run of such a script (RUNS) becomes overlapping character bigrams,
each with its first character at the same position (the last character too, at the last bigram):
the Lucene CJKAnalyzer's approach with unigrams. A query word is cut the same way without the
single characters (FTS5 reads a quoted word of several tokens as a phrase), so a word of two or
more characters finds any run that holds it, and a single character finds any run holding that
character; every run takes as many positions in a query as in the text (one per bigram), so a
phrase that mixes a run with digits or Latin words (`2024年度`, `Windows対応`) still lines up.
Everything else goes to `porter unicode61 remove_diacritics 2` as before (`cafe` finds `café`).

Text with no such run (nearly all mail in Latin scripts) costs one `isascii` or one regex search,
then unicode61's own tokens are handed back unchanged: scripts/bench_tokenizer.py measures it.

Every connection to index.db registers it (schema.connect): FTS5 looks the tokenizer up by name
when it opens the table, to index, to delete, to parse a MATCH and to cut snippets, and all four
must cut text the same way.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Iterator, TypeAlias, cast

import apsw

NAME = "oaken_cjk"
BASE = ("porter", "unicode61", "remove_diacritics", "2")  # the tokenizer before SCHEMA_VERSION 3
TOKENIZE = " ".join((NAME, *BASE))  # FTS5's tokenize= option of the fts table

# Scripts written without spaces between words. Their digits and punctuation are left out: digits
# are words to unicode61, punctuation separates.
RUNS = (
    "\u0e01-\u0e3a\u0e40-\u0e4e"  # Thai letters, vowels and tone marks
    "\u0e81-\u0ecf\u0edc-\u0edf"  # Lao
    "\u1000-\u103f\u1050-\u108f"  # Myanmar
    "\u1780-\u17d3\u17d7\u17dc\u17dd"  # Khmer
    "\u1100-\u11ff\u3131-\u318e\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff\uffa0-\uffdc"  # Hangul
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035\u303b\u303c"  # radicals, 々〆〇
    "\u3041-\u3096\u3099-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f"  # kana
    "\u3105-\u312f\u31a0-\u31bf"  # Bopomofo
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f\U00030000-\U000323af"  # Han
)
_RUN = re.compile(f"[{RUNS}]+")

# (start byte, end byte, token, *tokens at its position), or without offsets the token(s) alone
Token: TypeAlias = "str | tuple"


def bigrams(run: str, start: int, query: bool) -> Iterator[tuple]:
    """The tokens of one run of RUNS that starts at byte `start`: its overlapping bigrams, each
    with its first character (and the last bigram with the last character) at the same position;
    in a query, the bigrams alone. A run of one character is that character."""
    ends = [start]
    for ch in run:
        ends.append(ends[-1] + (3 if ch < "\U00010000" else 4))  # every character of RUNS is 3 or 4 bytes
    if len(run) == 1:
        yield (start, ends[1], run)
        return
    last = len(run) - 2
    for k in range(last + 1):
        pair = run[k : k + 2]
        if query:
            yield (ends[k], ends[k + 2], pair)
        elif k < last:
            yield (ends[k], ends[k + 2], pair, run[k])
        else:
            yield (ends[k], ends[k + 2], pair, run[k], run[k + 1])


def split(base: apsw.FTS5Tokenizer, utf8: bytes, flags: int, locale: str | None) -> Iterable[Token]:
    """`utf8` cut into tokens: runs of RUNS into bigrams, the text between them by `base`.

    Byte offsets only where FTS5 reads them (snippet and highlight: FTS5_TOKENIZE_AUX); the index
    and a query's parse use positions alone, and tokens without offsets cross from Python to FTS5
    faster (CPU 0.27 -> 0.19 s for base's tokens of the Enron text)."""
    offsets = bool(flags & apsw.FTS5_TOKENIZE_AUX)
    if utf8.isascii():
        return base(utf8, flags, locale, include_offsets=offsets, include_colocated=False)
    text = utf8.decode("utf-8", "surrogateescape")
    match = _RUN.search(text)
    if match is None:
        return base(utf8, flags, locale, include_offsets=offsets, include_colocated=False)
    query = bool(flags & apsw.FTS5_TOKENIZE_QUERY)
    out: list[Token] = []
    at = 0  # characters of text read
    at_byte = 0
    while True:
        gap = text[at : match.start() if match is not None else len(text)].encode("utf-8", "surrogateescape")
        if gap:
            found = base(gap, flags, locale, include_offsets=offsets, include_colocated=False)
            if offsets:
                out.extend((s + at_byte, e + at_byte, t) for s, e, t in cast(Iterable[tuple[int, int, str]], found))
            else:
                out.extend(found)
            at_byte += len(gap)
        if match is None:
            return out
        run = match.group()
        tokens = bigrams(run, at_byte, query)
        out.extend(tokens if offsets else (t[2] if len(t) == 3 else t[2:] for t in tokens))
        at_byte += len(run.encode("utf-8"))
        at = match.end()
        match = _RUN.search(text, at)


# Texts whose tokens a connection keeps: a search parses each of its words several times (one
# MATCH per pass), and snippet() cuts every column of a chunk twice (to choose, then to mark) and
# meets the same subject and sender on every chunk of a message. A one-word search of Enron asked
# for 512 kB of text in 350 calls, 222 kB of it distinct. Bounded: a long recipients list is ~0.5 MB
# of tokens.
CACHED = 32


def factory(con: apsw.Connection, args: list[str]) -> apsw.Tokenizer:
    """FTS5's tokenizer for `tokenize='oaken_cjk <base tokenizer and its arguments>'`."""
    base = con.fts5_tokenizer(args[0], list(args[1:])) if args else con.fts5_tokenizer("unicode61")

    @functools.lru_cache(maxsize=CACHED)
    def again(utf8: bytes, flags: int, locale: str | None) -> list[Token]:
        return list(split(base, utf8, flags, locale))

    def tokenize(utf8: bytes, flags: int, locale: str | None) -> Iterable[Token]:
        if flags & apsw.FTS5_TOKENIZE_DOCUMENT:  # indexing: each text once
            return split(base, utf8, flags, locale)
        return again(utf8, flags, locale)

    return tokenize


def register(db: apsw.Connection) -> None:
    """Make NAME known to this connection (before it touches the fts table)."""
    db.register_fts5_tokenizer(NAME, factory)
