"""KeywordFilters as SQL over index.db's messages and tags tables, plus an FTS5 expression for the
subject terms (they are words, stemmed like the text, so FTS5 matches them, not LIKE)."""

from __future__ import annotations

import json

from oaken.index.keyword.records import KeywordFilters, quote


def _sql_like(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def filter_sql(f: KeywordFilters, alias: str = "m", walk_dates: bool = False) -> tuple[list[str], list[object], str]:
    """SQL conditions over the messages table, and an FTS5 expression for the subject terms.
    `walk_dates`: the id list (include_ids) is only checked (`+id IN`), so that SQLite reads the
    account's messages newest first and stops at the limit, instead of seeking every listed id
    and sorting them (reader._newest says when that is cheaper)."""
    conds: list[str] = []
    params: list[object] = []
    if f.account is not None:
        conds.append(f"{alias}.account = ?")
        params.append(f.account)
    for field_terms, cols in ((f.senders, ("sender_name", "sender_addr")), (f.to, ("recipients",)), (f.cc, ("cc",))):
        if field_terms:
            ors = []
            for term in field_terms:
                for col in cols:
                    ors.append(f"{alias}.{col} LIKE ? ESCAPE '\\'")
                    params.append(_sql_like(term))
            conds.append("(" + " OR ".join(ors) + ")")
    if f.after is not None:
        conds.append(f"{alias}.date >= ?")
        params.append(f.after)
    if f.before is not None:
        conds.append(f"{alias}.date < ?")
        params.append(f.before)
    for label in f.labels:
        conds.append(f"EXISTS (SELECT 1 FROM tags t WHERE t.kind = 'l' AND t.value = ? AND t.message = {alias}.id)")
        params.append(label)
    if f.folders:
        marks = ",".join("?" * len(f.folders))
        conds.append(
            f"EXISTS (SELECT 1 FROM tags t WHERE t.kind = 'f' AND t.value IN ({marks}) AND t.message = {alias}.id)"
        )
        params.extend(f.folders)
    if f.thread is not None:
        conds.append(f"{alias}.thread = ?")
        params.append(f.thread)
    if f.dispositions:
        cond = f"{alias}.disposition IN ({','.join('?' * len(f.dispositions))})"
        params.extend(f.dispositions)
        if f.disposition_unsure:
            cond = f"({cond} OR {alias}.id IN (SELECT value FROM json_each(?)))"
            params.append(json.dumps(sorted(f.disposition_unsure)))
        conds.append(cond)
    if f.has_attachment is not None:
        conds.append(f"{alias}.has_attachment = ?")
        params.append(1 if f.has_attachment else 0)
    for term in f.filename_terms:
        conds.append(f"({alias}.attachment_names LIKE ? ESCAPE '\\' OR {alias}.attachment_types LIKE ? ESCAPE '\\')")
        params.extend((_sql_like(term), _sql_like(term)))
    if f.include_ids is not None:
        conds.append(f"{'+' if walk_dates else ''}{alias}.id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(sorted(f.include_ids)))
    if f.exclude_ids:
        conds.append(f"{alias}.id NOT IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(sorted(f.exclude_ids)))
    subject = " AND ".join(f"subject : {quote(t)}" for t in subject_terms(f))
    return conds, params, subject


def subject_terms(f: KeywordFilters) -> list[str]:
    return [t for t in f.subject_terms if t.strip()]
