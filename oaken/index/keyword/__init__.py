"""index.db: the FTS5 keyword index. Every SQL statement against index.db lives in this package.

index.db is derived and disposable: `oaken reindex --rebuild` makes it again from raw.db, so it
is written with durability off (a crash costs a rebuild, never mail).

Layout
  messages   one row per message (id = raw.db's message id) with the fields filters need
  tags       labels ('l') and folders ('f') of each message
  chunks     the text of each chunk; kind 'body' (the author's words, embedded by the vector side)
             or 'quoted' (quoted replies and signatures: keyword-only, low weight)
  fts        FTS5 over the view `fts_content` (external content: the text is stored once), columns
             subject, sender, recipients, body, quoted, attachments; one row per chunk; every row
             repeats the subject, sender and attachment names of its message, so a chunk can hold
             every word of a query even when one of them is in the subject. Recipients (often long
             lists) are on the first chunk only: a quarter less text to index on the Enron corpus.
             Tokenizer oaken_cjk (tokenizer.py): unicode61 as before, and character bigrams for
             Chinese, Japanese, Korean, Thai and other scripts written without spaces.

API for the search layer (stable; see each docstring)
  KeywordIndex(data_dir, index_config).query(match, filters, limit) -> list[KeywordChunkHit]
      `match` is an FTS5 MATCH expression built from already-quoted tokens (see `quote`), or
      "" for none. Hits are chunks, best first; `score` is -bm25 (higher is better). Each hit
      says which columns matched and which phrases of `match` (0-based, in the order they
      appear in the expression) the chunk holds: chunks holding every word rank above chunks
      holding some when the caller sorts by (len(phrases), score).
  KeywordIndex.newest(filters, limit, offset) -> list[KeywordMessageHit]   (queries with no words)
  KeywordIndex.tokens_present(messages, tokens) -> {message: frozenset(tokens it holds)}
  KeywordIndex.chunks_of(messages) / body_chunks(after_id, limit)  (for the vector side)
  KeywordFilters: frozen; every field optional; all given fields must hold (AND); within a
      field: senders/to/cc/folders/dispositions match any, labels and subject/filename terms all.
  Errors: a missing, corrupt or locked index.db raises IndexUnavailable (code
      "keyword_index_unavailable") on open or on query; a malformed MATCH raises QueryError.
  status(data_dir) -> {"state": "ok"|"missing"|"corrupt"|"locked", "messages", "chunks", "seq", ...}
  KeywordWriter(data_dir): the indexer's writer on the live index.db; KeywordWriter.build(data_dir)
      a whole new one beside it, swapped in by publish() (readers see the old one or the new one,
      never one half built); drop(data_dir) deletes index.db.

Modules (import the names above from oaken.index.keyword; the modules are its parts)
  schema    where index.db is, its tables and SCHEMA_VERSION, opening it, failures as IndexUnavailable
  records   the boundary types above and `quote`
  filters   KeywordFilters as SQL conditions and a subject MATCH expression
  reader    KeywordIndex: ranking (in two halves at once past a million chunks), tokens_present
  listing   KeywordIndex.newest: a query of filters only, newest first
  stored    KeywordIndex's plain reads: chunks for the vector side and the fold, subjects, dates
  figures   KeywordIndex's counts, sequence number and generation, for status
  pool      read connections kept between searches in a long-lived process
  writer    KeywordWriter: the indexer's transactions
  whole     index.db as a whole: status (for `oaken status`), publishing a rebuilt one, drop
  tokenizer the FTS5 tokenizer every connection registers (schema.connect); docs/cjk.md
  snippets  which column a chunk's snippet is cut from
  text      the text index: Tantivy ranking word searches beside FTS5 ([index] keyword_engine =
            "tantivy"), only while it mirrors index.db exactly (text/__init__.py)
"""

from oaken.index.keyword.reader import KeywordIndex
from oaken.index.keyword.records import (
    SNIPPET_CLOSE,
    SNIPPET_OPEN,
    ChunkText,
    KeywordChunkHit,
    KeywordFilters,
    KeywordMessageHit,
    MessageFields,
    StoredChunk,
    quote,
)
from oaken.index.keyword.schema import COLUMNS, UNAVAILABLE, index_path, unavailable
from oaken.index.keyword.whole import discard_leftovers, drop, status
from oaken.index.keyword.writer import KeywordWriter

__all__ = [
    "KeywordIndex",
    "KeywordWriter",
    "KeywordFilters",
    "KeywordChunkHit",
    "KeywordMessageHit",
    "StoredChunk",
    "MessageFields",
    "ChunkText",
    "quote",
    "status",
    "drop",
    "discard_leftovers",
    "index_path",
    "COLUMNS",
    "SNIPPET_OPEN",
    "SNIPPET_CLOSE",
    "UNAVAILABLE",
    "unavailable",
]
