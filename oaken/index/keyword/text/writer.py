"""Keeping the text index level with index.db: built whole from index.db's chunks, then after
each keyword pass the messages raw.db's change feed lists since the sidecar's seq are deleted
from it and added again as index.db holds them now.

index.db stays where chunks are made and numbered; the text index only mirrors it, so a text
index that is missing, of another index.db generation, cut another way or behind (a crash
between the two commits, a pass that failed here) never answers: the search ranks with FTS5 in
index.db instead (ranker.py) until the next pass brings it level. Runs under the writer lock.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable, Iterator

import apsw
import tantivy

from oaken.index.keyword.text.schema import (
    BUILDING,
    COLUMN_FIELDS,
    COMBINED,
    QUOTED,
    Sidecar,
    build_schema,
    known_damage,
    read_sidecar,
    text_dir,
    write_sidecar,
)
from oaken.index.keyword.text.tokens import Cut, Tokens

# the fts_content view's six columns (keyword/schema.py): the text FTS5 indexes for each chunk
_ROWS = (
    "SELECT f.id, c.message, f.subject, f.sender, f.recipients, f.body, f.quoted, f.attachments "
    "FROM fts_content f JOIN chunks c ON c.id = f.id "
)
BY_ID = _ROWS + "WHERE f.id > ? ORDER BY f.id LIMIT ?"
BY_MESSAGE = _ROWS + "WHERE c.message IN (SELECT value FROM json_each(?)) ORDER BY f.id"

BUILD_HEAP = 256_000_000  # Tantivy's indexing buffer for a whole build (a 1 GB heap measured 1.32 GB RSS)
PASS_HEAP = 50_000_000  # and for a pass's changes
BATCH = 5_000
# past this share of index.db's messages changed, building whole is cheaper than deleting and adding
REBUILD_SHARE = 0.3


# Between the columns (and the repeats) of the combined field: a token no query holds (index.db's
# tokenizer never makes one of punctuation), so that a phrase cannot match across an edge, as it
# cannot in FTS5, whose positions are per column ("friday meeting" in a subject "Meeting notes
# Friday" repeated).
EDGE = ("|",)


def document(row: tuple, tokens: Tokens, repeats: tuple[int, ...]) -> tantivy.Document:
    chunk, message, subject, sender, recipients, body, quoted, attachments = row
    cuts = [tokens.document(v) for v in (subject, sender, recipients, body, attachments)]
    doc = tantivy.Document(chunk=int(chunk), message=int(message))
    segments = [cut.positions for cut, times in zip(cuts, repeats) for _ in range(times) if cut.positions]
    combined = [p for i, segment in enumerate(segments) for p in ((EDGE,) if i else ()) + segment]
    _add(doc, COMBINED, Cut(tuple(combined), any(c.colocated for c in cuts)))
    _add(doc, QUOTED, tokens.document(quoted))
    _add(doc, COLUMN_FIELDS[0], cuts[0])
    return doc


def _add(doc: tantivy.Document, field: str, cut: Cut) -> None:
    """Tokens joined by spaces for Tantivy's whitespace tokenizer; where a position holds several
    (CJK), the tokens and their positions as they are."""
    if not cut.positions:
        return
    text = " ".join(cut.words())
    if not cut.colocated:
        doc.add_text(field, text)
        return
    tokens = [tantivy.Token(t, i, 0, 0) for i, p in enumerate(cut.positions) for t in p]
    doc.add_pre_tokenized_text(field, tantivy.PreTokenizedString(text, tokens))


def _rows_by_id(db: apsw.Connection) -> Iterator[list[tuple]]:
    last: object = -1
    while rows := db.execute(BY_ID, (last, BATCH)).fetchall():
        yield rows
        last = rows[-1][0]


def build(data_dir: Path, db: apsw.Connection, sidecar: Sidecar) -> int:
    """A whole text index of index.db (`db`), beside the live one, then put in its place. Returns
    how many chunks it holds."""
    data_dir = Path(data_dir)
    live = text_dir(data_dir, sidecar.generation)
    work = live.with_name(live.name + BUILDING)
    shutil.rmtree(work, ignore_errors=True)  # a build a crash left behind
    work.mkdir(mode=0o700)  # private like index.db: it holds the words of the mail
    try:
        index = tantivy.Index(build_schema(), path=str(work))
        writer = index.writer(heap_size=BUILD_HEAP, num_threads=1)
        tokens = Tokens()
        n = 0
        for rows in _rows_by_id(db):
            for row in rows:
                writer.add_document(document(row, tokens, sidecar.repeats))
            n += len(rows)
        writer.commit()
        writer.wait_merging_threads()
        write_sidecar(work, sidecar)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    old = live.with_name(f"{live.name}.old-{uuid.uuid4().hex}")
    if live.exists():
        os.rename(live, old)  # a reader that has it open keeps its files (mapped) until it reopens
    os.rename(work, live)
    shutil.rmtree(old, ignore_errors=True)
    return n


def apply(data_dir: Path, db: apsw.Connection, messages: Iterable[int], sidecar: Sidecar) -> int:
    """Each of these messages whose chunks in index.db are not the ones the text index holds for it
    deleted there and added again as index.db holds it now (nothing, once it is gone): the same
    however often it runs. A change of flags, labels or triage keeps a message's chunks, so it
    writes nothing and commits nothing. Returns the chunks added."""
    index = tantivy.Index.open(str(text_dir(data_dir, sidecar.generation)))
    searcher = index.searcher()
    ids = sorted(set(messages))
    stale: list[int] = []
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        now: dict[int, set[int]] = {}
        for message, chunk in db.execute(
            "SELECT message, id FROM chunks WHERE message IN (SELECT value FROM json_each(?))", (json.dumps(batch),)
        ):
            now.setdefault(message, set()).add(chunk)
        stale.extend(m for m, held in _held_chunks(index, searcher, batch, now).items() if held != now.get(m, set()))
    if stale:
        writer = index.writer(heap_size=PASS_HEAP, num_threads=1)
        tokens = Tokens()
        added = 0
        for start in range(0, len(stale), BATCH):
            batch = stale[start : start + BATCH]
            for m in batch:
                writer.delete_documents_by_term("message", m)
            for row in db.execute(BY_MESSAGE, (json.dumps(batch),)):
                writer.add_document(document(row, tokens, sidecar.repeats))
                added += 1
        writer.commit()
        writer.wait_merging_threads()
    else:
        added = 0
    write_sidecar(text_dir(data_dir, sidecar.generation), sidecar)
    return added


def _held_chunks(
    index: tantivy.Index, searcher: tantivy.Searcher, batch: list[int], now: dict[int, set[int]]
) -> dict[int, set[int]]:
    """{message: the chunk ids the text index holds for it} for every message of the batch."""
    out: dict[int, set[int]] = {m: set() for m in batch}
    limit = 2 * sum(len(c) for c in now.values()) + 1000
    query = tantivy.Query.term_set_query(index.schema, "message", list(batch))
    found = searcher.search(query, limit, count=False).hits
    if len(found) >= limit:  # more than index.db holds, by far: every one of them is rewritten
        return {m: {-1} for m in batch}
    addresses = [a for _, a in found]
    for chunk, message in zip(
        searcher.fast_field_values("chunk", addresses), searcher.fast_field_values("message", addresses)
    ):
        out.setdefault(int(message or 0), set()).add(int(chunk or 0))
    return out


def follow(
    data_dir: Path,
    db: apsw.Connection,
    changed_since: Callable[[int], list[int]],
    want: Sidecar,
    messages: int,
    chunks: int,
) -> dict:
    """Bring the text index level with index.db (`db`, whose generation and seq `want` carries):
    nothing when it is, the changed messages when it is behind, a whole build when it is missing,
    of another generation or cut another way. `changed_since(seq)` lists the messages raw.db's
    change feed holds after seq; `messages` and `chunks` are how many index.db holds (a text
    index level with it holding another number of chunks is damaged: built again)."""
    started = time.perf_counter()
    live = text_dir(data_dir, want.generation)
    have = read_sidecar(live)
    why = None
    damage = known_damage(live)
    if damage is not None:
        why = f"unreadable ({damage})"
    elif have is None:
        why = "missing"
    elif have.generation != want.generation:
        why = "another index.db"
    elif not have.fits(want.repeats):
        why = "cut another way"
    if why is None and have is not None:
        if have.seq == want.seq:
            held = _held(live)
            if held == chunks:
                return {"text": "level", "seconds": round(time.perf_counter() - started, 3)}
            why = f"unreadable (holds {held} chunks of {chunks})" if isinstance(held, int) else f"unreadable ({held})"
    if why is None and have is not None:
        changed = changed_since(have.seq)
        if len(changed) <= REBUILD_SHARE * max(messages, 1):
            try:
                added = apply(data_dir, db, changed, want)
            except ValueError as e:  # tantivy-py's error for a damaged or unreadable index
                why = f"unreadable ({e})"
            else:
                held = _held(live)
                if held != chunks:  # deleted or added twice, whatever the cause: never ranked on
                    why = f"after following, holds {held} chunks of {chunks}"
        else:
            why = f"{len(changed)} messages changed"
        if why is None:
            return {
                "text": "followed",
                "messages": len(changed),
                "chunks": added,
                "seconds": round(time.perf_counter() - started, 3),
            }
    built = build(data_dir, db, want)
    return {"text": "built", "reason": why, "chunks": built, "seconds": round(time.perf_counter() - started, 3)}


def _held(directory: Path) -> int | str:
    """How many chunks the text index holds, or why it cannot be read (~1 ms: meta.json and the
    segments' headers, not their postings)."""
    try:
        return int(tantivy.Index.open(str(directory)).searcher().num_docs)
    except ValueError as e:
        return str(e)
