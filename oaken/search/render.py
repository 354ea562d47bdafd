"""A search response as a readable table for `oaken search` (the JSON form is dataclasses.asdict)."""

from __future__ import annotations

import re

from oaken.terminal import columns as terminal_columns

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:  # a response from the daemon is rendered from its JSON (client.View): no dataclasses needed
    from oaken.search.client import View
    from oaken.search.types import Hit, SearchResponse

_MARKED = re.compile(r"\[\[(.*?)\]\]", re.S)
_BOLD, _RESET, _DIM = "\x1b[1m", "\x1b[0m", "\x1b[2m"


def _char_width(c: str) -> int:
    import unicodedata  # only for text that is not ASCII

    if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def width_of(text: str) -> int:
    """Columns `text` takes on a terminal: CJK ideographs take two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(_char_width(c) for c in text)


def _take(text: str, columns: int) -> str:
    """The longest start of `text` that fits in `columns`."""
    if text.isascii():
        return text[: max(columns, 0)]
    used = 0
    for i, c in enumerate(text):
        used += _char_width(c)
        if used > columns:
            return text[:i]
    return text


def _cut(text: str, width: int) -> str:
    """`text` on one line in at most `width` columns, "…" marking a cut."""
    text = " ".join(text.split())
    return text if width_of(text) <= width else _take(text, width - 1) + "…"


def _pad(text: str, width: int) -> str:
    return text + " " * max(width - width_of(text), 0)


def _sender(sender: str) -> str:
    """The name when there is one, else the address."""
    name, _, _addr = sender.partition(" <")
    return name or sender


def _snippet(text: str, width: int, color: bool) -> str:
    """One line around the matches; on a terminal they are bold, elsewhere they keep their [[ ]]."""
    flat = " ".join(text.split())
    plain = _MARKED.sub(r"\1", flat)
    if width_of(plain) > width:
        # cut by visible columns, keeping markers whole
        out, seen = [], 0
        for piece in re.split(r"(\[\[.*?\]\])", flat):
            visible = piece[2:-2] if piece.startswith("[[") and piece.endswith("]]") else piece
            if seen + width_of(visible) > width - 1:
                if not piece.startswith("[["):
                    out.append(_take(piece, width - 1 - seen))
                out.append("…")
                break
            out.append(piece)
            seen += width_of(visible)
        flat = "".join(out)
    if color:
        return _MARKED.sub(lambda m: f"{_BOLD}{m[1]}{_RESET}", flat)
    return flat


MEANING_ONLY = "(by meaning)"  # marks a hit no message word matched: the vector side alone found it
LOW_CONFIDENCE = (
    "low confidence: no message holds every word of the query, and none is a close match in "
    "meaning; these are the nearest"
)


def by_meaning_only(hit: Hit) -> bool:
    """True when only the vector side found the hit and it does not hold the query's words (one that
    does, past the keyword list's depth, has a keyword `why` of rank 0). The engine asks the same
    of a page's hits; it lives here, with the mark, because this module loads no dataclasses."""
    return bool(hit.why) and all(w.retriever == "vector" for w in hit.why)


def _row(hit: Hit, width: int, color: bool, explain: bool, cuts: dict[str, int]) -> list[str]:
    date = hit.date[:10] or "?"
    sender = _cut(_sender(hit.sender), 24)
    unread = "*" if hit.unread else " "
    head = f"{hit.id:>7} {unread}{date}  {_pad(sender, 24)}  "
    subject = _cut(hit.subject or "(no subject)", max(width - width_of(head), 10))
    lines = [head + (f"{_BOLD}{subject}{_RESET}" if color else subject)]
    mark = MEANING_ONLY if by_meaning_only(hit) else ""
    if mark:
        mark = f"{_DIM}{mark}{_RESET} " if color else mark + " "
    if hit.snippet or mark:
        room = max(width - 10 - len(MEANING_ONLY) - 1 if mark else width - 10, 20)
        lines.append(" " * 10 + mark + (_snippet(hit.snippet, room, color) if hit.snippet else "").rstrip())
    if hit.copies:
        n = len(hit.copies)
        ids = ", ".join(str(i) for i in hit.copies[:5]) + (", ..." if n > 5 else "")
        lines.append(" " * 10 + f"+ {n} near-identical {'copy' if n == 1 else 'copies'}: {ids}")
    if explain:
        for w in hit.why:
            cut = f" - {w.weight:g} / (k + {cuts[w.retriever] + 1})" if cuts.get(w.retriever) else ""
            said = (
                f"{w.retriever} rank {w.rank}: {w.weight:g} / (k + {w.rank}){cut} = {w.contribution:.5f}"
                if w.rank
                else f"{w.retriever}, no rank:"
            )  # rank 0: holds the words, past the list's depth
            lines.append(" " * 10 + f"{_DIM if color else ''}{said}  {w.detail}{_RESET if color else ''}")
        if hit.matched_chunks:
            lines.append(" " * 10 + f"and {len(hit.matched_chunks)} more matching chunk(s)")
    return lines


def table(response: SearchResponse | View, *, color: bool = False, width: int | None = None) -> str:
    width = width or terminal_columns()
    lines: list[str] = []
    # getattr: a daemon of an earlier version answers without it
    cuts = {t.retriever: getattr(t, "cut", 0) for t in response.explain.retrievers} if response.explain else {}
    if response.explain:
        e = response.explain
        lines.append("query: " + ", ".join(f"{k}={v}" for k, v in e.parsed.items()))
        for t in e.retrievers:
            lines.append(
                f"{t.retriever}: {t.state}, {t.kept} kept of {t.candidates} asked in {t.rounds} round(s), "
                f"{t.ms} ms" + (f", MATCH {t.expression}" if t.expression else "")
            )
        lines.append(
            f"fusion: rrf_k {e.rrf_k}, weights "
            + ", ".join(f"{k} {v:g}" for k, v in e.weights.items())
            + "".join(f"; {r} cut at {c}: shares less {r}'s at rank {c + 1}" for r, c in cuts.items() if c)
        )
        lines.append("")
    if not response.hits:
        lines.append("no messages found")
    elif response.low_confidence:
        lines.append(LOW_CONFIDENCE)
    for hit in response.hits:
        lines.extend(_row(hit, width, color, response.explain is not None, cuts))
    return "\n".join(lines)
