"""The types at index.db's boundary, and `quote`, which makes a token safe inside a MATCH."""

from __future__ import annotations

from dataclasses import dataclass

SNIPPET_OPEN = "[["
SNIPPET_CLOSE = "]]"
SNIPPET_ELLIPSIS = "…"


@dataclass(frozen=True)
class KeywordFilters:
    """Filters the index can apply itself. Triage and read state live in raw.db (Store.filter_messages)."""

    account: str | None = None
    senders: tuple[str, ...] = ()  # any; substring of the sender's name or address, case-insensitive
    to: tuple[str, ...] = ()  # any; substring of a To address or name
    cc: tuple[str, ...] = ()  # any; substring of a Cc address or name
    subject_terms: tuple[str, ...] = ()  # all; words in the subject (stemmed like the text)
    after: int | None = None  # unix seconds, inclusive
    before: int | None = None  # unix seconds, exclusive
    labels: tuple[str, ...] = ()  # all; labels include folder names and IMAP keywords
    folders: tuple[str, ...] = ()  # any
    thread: int | None = None
    dispositions: tuple[str, ...] = ()  # any; empty: no restriction
    # messages whose disposition index.db may hold stale (changed in raw.db after the index's seq):
    # kept whatever index.db's copy says, so raw.db alone decides them
    disposition_unsure: frozenset[int] = frozenset()
    has_attachment: bool | None = None
    filename_terms: tuple[str, ...] = ()  # all; substring of an attachment's name or MIME type
    include_ids: frozenset[int] | None = None  # only these messages (Oaken ids)
    exclude_ids: frozenset[int] = frozenset()  # never these messages


@dataclass(frozen=True)
class KeywordChunkHit:
    message: int  # Oaken's message id
    chunk: int  # chunk id (stable until the message is re-chunked)
    score: float  # -bm25 with the [index] column weights: higher is better
    snippet: str  # matched words between SNIPPET_OPEN and SNIPPET_CLOSE
    columns: tuple[str, ...]  # the columns of COLUMNS where a phrase matched
    phrases: tuple[int, ...]  # 0-based indexes of the phrases of `match` found in this chunk


@dataclass(frozen=True)
class KeywordMessageHit:
    message: int
    date: int


@dataclass(frozen=True)
class StoredChunk:
    id: int
    message: int
    ord: int
    kind: str  # "body", "quoted" or "attachment" (oaken.chunking.Chunk.kind)
    tokens: int  # word pieces, estimated, subject included
    text: str
    subject: str


@dataclass(frozen=True)
class MessageFields:
    """What the index keeps of one message besides its text."""

    id: int
    account: str
    message_id: str | None
    content_hash: str
    date: int
    subject: str
    sender_name: str
    sender_addr: str
    to: tuple[str, ...]
    cc: tuple[str, ...]
    thread: int
    disposition: str
    labels: tuple[str, ...]
    folders: tuple[str, ...]
    attachment_names: tuple[str, ...] = ()
    attachment_types: tuple[str, ...] = ()
    problem: str | None = None
    attachments_unread: tuple[str, ...] = ()  # oaken.attachment_text's warnings


@dataclass(frozen=True)
class ChunkText:
    """One chunk to write: the indexer converts chunking.Chunk to this."""

    kind: str
    tokens: int
    text: str


def quote(token: str) -> str:
    """A token as an FTS5 string: nothing inside it is syntax."""
    return '"' + token.replace('"', '""') + '"'
