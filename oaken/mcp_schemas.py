"""What `oaken mcp` offers an agent: each tool's name, description and JSON schemas.

Plain data, no SDK import: the descriptions are what an agent reads to decide how to call a tool,
so they say what each field does, what comes back and what to do next. oaken.mcp_args checks
arguments against these same schemas, so what an agent is told and what is enforced cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from oaken.config import DISPOSITIONS

DEFAULT_LIMIT = 10
MAX_LIMIT = 100  # a page an agent can read; offset pages on
DEFAULT_MAX_BYTES = 8192
MIN_MAX_BYTES = 1024  # room for the envelope and one hit
MAX_MAX_BYTES = 262_144  # 256 KiB: past this a result floods an agent's context
MAX_OFFSET = (1 << 31) - 1
MAX_ID = (1 << 63) - 1  # SQLite's largest integer
MAX_QUERY = 2000  # characters

QUERY_LANGUAGE = (
    "Query language (Gmail-like): words (every one must match; stemmed, accents ignored), "
    '"an exact phrase", a OR b, -word and -"a phrase" to leave mail out; from: to: cc: subject: '
    "(from:alex, subject:invoice); label:NAME (a folder, IMAP keyword or local label); "
    "in:inbox, in:archived, in:discarded, in:anywhere (discarded mail is left out unless named); "
    "is:unread, is:read, is:starred; category:NAME, priority:N (N or higher, 0-3); "
    "after:2024-03-01 and before:2024-04-01 (UTC; after includes its day, before excludes it); "
    "newer_than:7d, older_than:1y (d, w, m, y); has:attachment, filename:report.pdf. "
    "-from:, -label:, -is: and -has: turn an operator round. A question in plain words "
    '("who decided to cancel the merger?") is matched by meaning as well as by words. '
    "A value that cannot be read (priority:9) is a warning in the response, never an error."
)

_REFERENCE_FIELDS = (
    "Each hit is a reference: id (give it to show or thread), date (ISO 8601, UTC), from, subject, "
    "snippet (the matched words between [[ and ]]), found_by (keyword: holds the words; vector: "
    "close in meaning), unread, and copies (how many near-identical messages, e.g. the same form "
    "letter sent many times, are folded into this hit)."
)
_ENVELOPE_FIELDS = (
    "The response also says degraded and degraded_reason (only keyword search could answer: "
    "meaning search is missing, stale or slow), low_confidence (nothing matched well: treat the hits "
    "as guesses), warnings, omitted (hits left out to stay within max_bytes; they are never cut in "
    "the middle) and next_offset (pass it as offset for the next page; null when there is none)."
)

_MAX_BYTES = {
    "type": "integer",
    "minimum": MIN_MAX_BYTES,
    "maximum": MAX_MAX_BYTES,
    "default": DEFAULT_MAX_BYTES,
    "description": f"Upper bound on the size of the JSON result, in bytes (UTF-8); default {DEFAULT_MAX_BYTES}. "
    "Hits that do not fit are left out whole, from the end, and counted in omitted.",
}
_LIMIT = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_LIMIT,
    "default": DEFAULT_LIMIT,
    "description": f"How many hits to return at most (1-{MAX_LIMIT}); default {DEFAULT_LIMIT}.",
}
_OFFSET = {
    "type": "integer",
    "minimum": 0,
    "maximum": MAX_OFFSET,
    "default": 0,
    "description": "How many hits to skip: a previous response's next_offset, to read the next page.",
}
_ID = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_ID,
    "description": "A message id, as a search or thread hit gives it.",
}
_DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}


@dataclass(frozen=True)
class ToolSpec:
    """One tool as listed to the client; `read_only`: it changes nothing on any call."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    read_only: bool = True

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self.input_schema["properties"])


def _object(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def _hit_list_output() -> dict[str, Any]:
    """What search and thread return (oaken.mcp_pack builds it)."""
    text = {"type": "string"}
    hit = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "date": text,
            "from": text,
            "subject": text,
            "snippet": text,
            "found_by": {"type": "array", "items": {"enum": ["keyword", "vector"]}},
            "unread": {"type": "boolean"},
            "copies": {"type": "integer"},
        },
        "required": ["id", "date", "from", "subject", "snippet", "found_by", "unread", "copies"],
    }
    return {
        "type": "object",
        "properties": {
            "hits": {"type": "array", "items": hit},
            "omitted": {"type": "integer"},
            "next_offset": {"type": ["integer", "null"]},
            "mode": {"enum": ["hybrid", "keyword", "vector"]},
            "degraded": {"type": "boolean"},
            "degraded_reason": {"type": ["string", "null"]},
            "low_confidence": {"type": "boolean"},
            "warnings": {"type": "array", "items": text},
            "account": {"type": ["string", "null"]},
            "served_by": {"enum": ["daemon", "in-process"]},
        },
        "required": ["hits", "omitted", "next_offset", "degraded", "degraded_reason", "low_confidence", "warnings"],
    }


def _search(categories: Sequence[str]) -> ToolSpec:
    text = {"type": "string", "minLength": 1}
    return ToolSpec(
        name="search",
        title="Search mail",
        description=(
            "Search the user's mail by words and by meaning; read-only, never marks mail read. "
            + _REFERENCE_FIELDS
            + " "
            + _ENVELOPE_FIELDS
            + " The fields below narrow the search like the operators of the same name in the query.\n\n"
            + QUERY_LANGUAGE
        ),
        input_schema=_object(
            {
                "query": {
                    "type": "string",
                    "maxLength": MAX_QUERY,
                    "default": "",
                    "description": "Words, phrases and operators (see the query language above); "
                    "empty lists the mail the other fields choose, newest first with sort=date.",
                },
                "sender": {**text, "description": "Only mail from this address or name, or part of it (from:)."},
                "after": {**_DATE, "description": "Only mail from this day on, YYYY-MM-DD, UTC (after:)."},
                "before": {**_DATE, "description": "Only mail before this day, YYYY-MM-DD, UTC (before:)."},
                "labels": {
                    "type": "array",
                    "items": text,
                    "minItems": 1,
                    "description": "Folders, IMAP keywords or local labels; a message must carry every one (label:).",
                },
                "disposition": {
                    "enum": [*DISPOSITIONS, "anywhere"],
                    "description": "The triage disposition to search (in:); discarded mail is left out unless "
                    "named here or in the query; anywhere: all of it.",
                },
                "unread": {"type": "boolean", "description": "true: only unread mail; false: only read mail (is:)."},
                "categories": {
                    "type": "array",
                    "items": {"enum": list(categories)},
                    "minItems": 1,
                    "description": "Only mail triaged into one of these categories (category:).",
                },
                "min_priority": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 3,
                    "description": "Only mail of this triage priority or higher, 0-3, 3 most urgent (priority:).",
                },
                "account": {
                    **text,
                    "description": "The account to search (a search covers one); default: the configured one.",
                },
                "sort": {
                    "enum": ["relevance", "date"],
                    "default": "relevance",
                    "description": "relevance (best first, copies folded) or date (newest first).",
                },
                "limit": _LIMIT,
                "offset": _OFFSET,
                "max_bytes": _MAX_BYTES,
            }
        ),
        output_schema=_hit_list_output(),
    )


def _show() -> ToolSpec:
    text = {"type": "string"}
    return ToolSpec(
        name="show",
        title="Show a message",
        description=(
            "One message as text: its headers (From, To, Cc, Date, Subject, Message-ID), folders, labels and "
            "body text (the plain part, else the HTML part's text). Leaves the message unread unless mark_read "
            "is true. A body longer than max_bytes allows is cut (truncated: true); pass next_text_offset as "
            "text_offset to read on."
        ),
        input_schema=_object(
            {
                "id": _ID,
                "mark_read": {
                    "type": "boolean",
                    "default": False,
                    "description": "true: mark the message read, here and on the IMAP server at the next sync. "
                    "Default false: the user still sees it as unread.",
                },
                "text_offset": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_OFFSET,
                    "default": 0,
                    "description": "Where to start the body text, in characters: a previous next_text_offset.",
                },
                "max_bytes": {
                    **_MAX_BYTES,
                    "description": f"Upper bound on the size of the JSON result, in bytes (UTF-8); default "
                    f"{DEFAULT_MAX_BYTES}. The body text is cut to fit.",
                },
            },
            required=["id"],
        ),
        output_schema={
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "account": text,
                "headers": {"type": "object", "additionalProperties": text},
                "folders": {"type": "array", "items": text},
                "labels": {"type": "array", "items": text},
                "unread": {"type": "boolean"},
                "text": text,
                "text_offset": {"type": "integer"},
                "truncated": {"type": "boolean"},
                "next_text_offset": {"type": ["integer", "null"]},
                "text_chars": {"type": "integer"},
            },
            "required": ["id", "headers", "text", "truncated", "next_text_offset", "unread"],
        },
        read_only=False,  # mark_read: true changes a flag
    )


def _thread() -> ToolSpec:
    return ToolSpec(
        name="thread",
        title="Show a thread",
        description=(
            "The messages of the thread a message belongs to, newest first, as references (the same hits as "
            "search: id, date, from, subject, snippet, unread). Read-only. Use show on an id to read one."
        ),
        input_schema=_object(
            {
                "id": _ID,
                "limit": {**_LIMIT, "default": 50, "description": f"How many messages at most (1-{MAX_LIMIT})."},
                "offset": _OFFSET,
                "max_bytes": _MAX_BYTES,
            },
            required=["id"],
        ),
        output_schema=_hit_list_output(),
    )


def _status() -> ToolSpec:
    return ToolSpec(
        name="status",
        title="Mailbox status",
        description=(
            "What the mailbox holds: messages and unread per account, each account's folders, whether the "
            "keyword index and the meaning (vector) index are built and how much of the mail they cover, "
            "whether the warm search daemon answers, and whether the triage tool is on. Read-only."
        ),
        input_schema=_object({}),
        output_schema={
            "type": "object",
            "properties": {
                "messages": {"type": "integer"},
                "accounts": {"type": "object"},
                "keyword_index": {"type": "object"},
                "vectors": {"type": "object"},
                "daemon": {"type": "boolean"},
                "triage_tool": {"type": "boolean"},
            },
            "required": ["messages", "accounts", "daemon", "triage_tool"],
        },
    )


def _triage(categories: Sequence[str]) -> ToolSpec:
    return ToolSpec(
        name="triage",
        title="Triage a message",
        description=(
            "Set a message's category, priority or disposition in Oaken's own records (only the fields "
            "given change). Nothing is sent, deleted or moved on the mail server; discarded mail is left "
            "out of searches unless asked for (in:discarded). Returns the message's triage after the change."
        ),
        input_schema=_object(
            {
                "id": _ID,
                "category": {"enum": list(categories), "description": "One of the configured categories."},
                "priority": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 3,
                    "description": "0-3, 3 the most urgent.",
                },
                "disposition": {
                    "enum": list(DISPOSITIONS),
                    "description": "inbox, archived or discarded (Oaken's view only; the server's folders stay).",
                },
            },
            required=["id"],
        ),
        output_schema={
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "category": {"type": ["string", "null"]},
                "priority": {"type": ["integer", "null"]},
                "disposition": {"type": ["string", "null"]},
            },
            "required": ["id", "category", "priority", "disposition"],
        },
        read_only=False,
    )


def tools(categories: Sequence[str], *, allow_triage: bool) -> tuple[ToolSpec, ...]:
    """The tools offered: triage only when the config turns it on ([mcp] allow_triage)."""
    offered = (_search(categories), _show(), _thread(), _status())
    return (*offered, _triage(categories)) if allow_triage else offered
