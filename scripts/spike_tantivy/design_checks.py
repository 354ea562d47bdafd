"""Checks of the tantivy-py 0.27 behaviour docs/tantivy-retriever.md relies on and the spike's
api_check.py did not try, on a tiny index in a
temp dir (any venv with `pip install tantivy==0.27.0`; Oaken does not depend on it):

    python scripts/spike_tantivy/design_checks.py

Prints one line per check; exits 1 if any fails.
"""

from __future__ import annotations

import sys
import tempfile

from tantivy import Document, Index, PreTokenizedString, Query, SchemaBuilder, Token


def main() -> int:
    sb = SchemaBuilder()
    sb.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="position")
    sb.add_integer_field("chunk", indexed=True, fast=True)
    sb.add_integer_field("message", indexed=True, fast=True)
    schema = sb.build()
    with tempfile.TemporaryDirectory() as tmp:
        ix = Index(schema, path=tmp)
        w = ix.writer(heap_size=50_000_000, num_threads=1)
        texts = ["pipeline capacity report", "deployment of the pipeline", "deploy now"]
        for i, text in enumerate(texts, start=1):
            w.add_document(Document(body=text, chunk=i, message=10 * i))
        cjk = Document(chunk=4, message=40)  # Oaken's tokenizer's bigrams, with their positions
        cjk.add_pre_tokenized_text("body", PreTokenizedString("日本語", [Token("日本", 0, 0, 2), Token("本語", 1, 1, 3)]))
        w.add_document(cjk)
        w.commit()
        ix.reload()
        s = ix.searcher()

        def hits(q: object) -> int:
            return len(s.search(q, 10).hits)

        checks = {
            "phrase in order only": hits(ix.parse_query('"pipeline capacity"', ["body"])) == 1
            and hits(ix.parse_query('"capacity pipeline"', ["body"])) == 0,
            "regex query as a prefix (deplo.*)": hits(Query.regex_query(schema, "body", "deplo.*")) == 2,
            "terms_with_prefix lists terms and doc counts": sorted(s.terms_with_prefix("body", "deplo"))
            == [("deploy", 1), ("deployment", 1)],
            "doc_freq": s.doc_freq("body", "pipeline") == 2,
            "term_set_query on an i64 field": hits(Query.term_set_query(schema, "message", [10, 40])) == 2,
            "pre-tokenized text beside plain text in one field, phrase over its positions": hits(
                ix.parse_query('"日本 本語"', ["body"])
            )
            == 1
            and hits(ix.parse_query("now", ["body"])) == 1,
        }
        w.delete_documents_by_term("chunk", 2)
        w.commit()
        ix.reload()
        s = ix.searcher()
        checks["delete by an i64 term"] = s.num_docs == 3 and hits(ix.parse_query("deployment", ["body"])) == 0
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
