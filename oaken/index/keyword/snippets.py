"""Which column of a chunk its snippet is cut from.

FTS5's snippet(fts, -1, ...) chooses the column itself, and to choose it tokenizes every column of
the chunk, a long recipients list too, then the chosen one again to mark it. With the oaken_cjk
tokenizer (tokenizer.py) that tokenizing runs in Python: a one-word search of the Enron mailboxes
for `enron` (in nearly every chunk, and in every address of the long recipients lists) cut 512 kB
of text for its snippets, and cost about a fifth more CPU than with unicode61 in C. Here the
column is chosen from what FTS5 already knows, the columns each phrase of the MATCH was found
in: the one holding the most of them, ties going first to the subject (as FTS5's own choice did:
the lowest column wins its ties), then to the author's words before the other headers (body,
quoted, attachments, sender, recipients). FTS5 then tokenizes that column alone: the
search for `enron` took 163 M instructions instead of 849 M with unicode61 in C and FTS5's own
choice (callgrind; docs/cjk.md), and where the body holds the word its snippet is cut from the
body, not from a list of addresses. A chunk where no phrase was found in any column (a
NOT-only match) falls back to FTS5's own choice.
"""

from __future__ import annotations

import apsw

from oaken.index.keyword.records import SNIPPET_CLOSE, SNIPPET_ELLIPSIS, SNIPPET_OPEN
from oaken.index.keyword.schema import COLUMNS

FUNCTION = "oaken_snippet_column"
# a chunk's snippet around its matches, with the markers the table and --json show
SQL = f"snippet(fts, {FUNCTION}(fts), ?, ?, ?, 24)"
MARKS = (SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS)
# an attachment chunk's text starts with "[its file name] " (oaken.chunking): the snippet, a window
# around the matches, is prefixed with it, so a hit says which file its words are in
LABEL_SQL = (
    "(SELECT CASE l.kind WHEN 'attachment' THEN substr(l.text, 1, instr(l.text, '] ')) ELSE '' END "
    "FROM chunks l WHERE l.id = fts.rowid)"
)
PREFERENCE = tuple(COLUMNS.index(c) for c in ("subject", "body", "quoted", "attachments", "sender", "recipients"))


def column(api: apsw.FTS5ExtensionApi, *args: object) -> int:
    """The column of the current row to cut the snippet from (-1: FTS5 chooses)."""
    held = [0] * len(COLUMNS)
    for i in range(api.phrase_count):
        for c in api.phrase_columns(i):
            held[c] += 1
    best = max(PREFERENCE, key=lambda c: held[c])  # the first of the most: PREFERENCE breaks ties
    return best if held[best] else -1


def labelled(label: str | None, snippet: str) -> str:
    """The snippet, after its attachment's "[name]" unless the window already shows it."""
    if not label or label in snippet:
        return snippet
    return f"{label} {snippet}"


def register(db: apsw.Connection) -> None:
    db.register_fts5_function(FUNCTION, column)
