"""The text index: a Tantivy index beside index.db that ranks word searches ([index]
keyword_engine = "tantivy", the default). docs/tantivy-retriever.md has the design.

index.db stays the keyword index: chunks, filters, listings, snippets and columns are read
there, and FTS5 answers whenever the text index is not level with it. The text index ranks, and
says which phrases a ranked chunk holds and which messages hold a word or phrase, only when it
mirrors index.db exactly (generation and change seq): so it can be missing, behind or damaged
without a wrong answer.

Modules (tantivy is imported by the last three only, so keyword_engine = "fts5" never loads it)
  tokens    index.db's tokenizer (oaken_cjk) called from Python: the tokens FTS5 indexes
  schema    where it lives, its fields, the sidecar naming the index.db state it mirrors
  ranking   KeywordIndex's reads of it: the ranked list, phrases held (a mixin of reader.KeywordIndex)
  expr      Oaken's MATCH strings as Tantivy queries
  ranker    the text index opened for searching, kept between searches
  writer    built whole from index.db, then kept level after each keyword pass
"""
