"""Where the text index lives, its fields and its sidecar (which index.db state it mirrors).

One Tantivy document per chunk of index.db. Ranking is on one combined field holding subject 4x,
sender 2x, recipients, body and attachments once each: the [index] column weights given by
repetition, so that a chunk has one length norm and one frequency per word, as FTS5's bm25
weighs its columns (a field per column, weights as boosts, lost 0.08 R@10 on the real-mail
eval: docs/tantivy-retriever.md). Quoted text is a field of its own, asked at weight_quoted; the
subject alone answers `subject : "t"`. Ids are i64 (tantivy-py deletes nothing by a u64 term).
Nothing is stored: snippets and details come from index.db.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from oaken.index.keyword import schema as keyword_schema
from oaken.index.keyword.text.tokens import NAME as TOKENIZER

# <data dir>/text-<generation>: the text index of the index.db of that generation (keyword/schema.py),
# built in <...>.build and renamed when complete. A rebuilt index.db gets its text index before it
# is swapped in, so a search reading either index.db finds the one that mirrors it.
PREFIX = "text-"
BUILDING = ".build"
SIDECAR = "oaken-text.json"
SCHEMA = 2  # a change here makes every text index stale (built again from index.db); 2: edges between columns

COMBINED = "all"
QUOTED = "quoted"
COLUMN_FIELDS = ("subject",)  # the columns a MATCH names (filters.py's subject terms)


def repeats(weights: tuple[float, ...]) -> tuple[int, int, int, int, int]:
    """How often subject, sender, recipients, body and attachments go into the combined field:
    the [index] weights rounded to whole repeats (a weight of 0 leaves a column out)."""
    subject, sender, recipients, body, _quoted, attachments = weights
    out = tuple(max(0, round(w)) for w in (subject, sender, recipients, body, attachments))
    return out  # type: ignore[return-value]


def build_schema() -> Any:
    import tantivy  # here: the rest of this module is read by searches that never load it

    b = tantivy.SchemaBuilder()
    for name in (COMBINED, QUOTED, *COLUMN_FIELDS):
        b.add_text_field(name, stored=False, tokenizer_name="whitespace", index_option="position")
    b.add_integer_field("chunk", indexed=True, fast=True)
    b.add_integer_field("message", indexed=True, fast=True)
    return b.build()


@dataclass(frozen=True)
class Sidecar:
    """Which index.db the text index mirrors: its generation and change seq, and how it was cut."""

    generation: str
    seq: int
    repeats: tuple[int, ...]
    schema: int = SCHEMA
    tokenizer: str = TOKENIZER

    def fits(self, repeats_now: tuple[int, ...]) -> bool:
        """Made as this code makes it (else: built again)."""
        return self.schema == SCHEMA and self.tokenizer == TOKENIZER and tuple(self.repeats) == repeats_now

    def mirrors(self, generation: str, seq: int, repeats_now: tuple[int, ...]) -> bool:
        """Level with index.db at this generation and seq, and cut as the config asks: only then
        does it rank (ranker.py) and does `oaken status` say so."""
        return self.generation == generation and self.seq == seq and self.fits(repeats_now)


def text_dir(data_dir: Path, generation: str) -> Path:
    return Path(data_dir) / f"{PREFIX}{generation or 'none'}"


def read_sidecar(directory: Path) -> Sidecar | None:
    """None when there is none or it cannot be read (the index is then built again)."""
    try:
        doc = json.loads((directory / SIDECAR).read_text(encoding="utf-8"))
        return Sidecar(
            str(doc["generation"]), int(doc["seq"]), tuple(doc["repeats"]), int(doc["schema"]), str(doc["tokenizer"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_sidecar(directory: Path, sidecar: Sidecar) -> None:
    """Written after Tantivy's commit: it may claim less than is committed, never more."""
    tmp = directory / (SIDECAR + ".tmp")
    tmp.write_text(json.dumps(asdict(sidecar)), encoding="utf-8")
    os.replace(tmp, directory / SIDECAR)


def drop(data_dir: Path, keep: str | None = None) -> bool:
    """Delete the text indexes and what a build left, but for generation `keep`'s (None: all: the
    engine is FTS5 again). Returns whether there was anything."""
    found = False
    kept = text_dir(data_dir, keep).name if keep is not None else None
    for p in Path(data_dir).glob(PREFIX + "*"):
        if p.is_dir() and p.name != kept:
            shutil.rmtree(p, ignore_errors=True)
            found = True
    return found


def mark_damaged(directory: Path, reason: str) -> None:
    """Noted as index.db's damage is (keyword/schema.py), beside the sidecar: a search that could
    not read it says so, and the next pass builds it again."""
    keyword_schema.mark_damaged(directory / SIDECAR, reason)


def known_damage(directory: Path) -> str | None:
    return keyword_schema.known_damage(directory / SIDECAR)


def state(data_dir: Path, seq: int, generation: str, repeats_now: tuple[int, ...]) -> dict[str, object]:
    """For `oaken status`: whether the text index of index.db's `generation` ranks (level with it
    at `seq`, cut with the config's `repeats_now`), and if not, why and what happens next."""
    directory = text_dir(data_dir, generation)
    side = read_sidecar(directory)
    if side is None:
        return {"state": "missing", "problem": "the next keyword pass (oaken reindex) builds it; FTS5 ranks meanwhile"}
    damage = known_damage(directory)
    if damage is not None:
        return {"state": "damaged", "problem": f"{damage}; the next keyword pass builds it again, FTS5 ranks meanwhile"}
    if not side.mirrors(generation, seq, repeats_now):
        return {
            "state": "behind",
            "seq": side.seq,
            "note": "the next keyword pass brings it level; FTS5 ranks meanwhile",
        }
    size = sum(p.stat().st_size for p in directory.iterdir() if p.is_file())
    return {"state": "ok", "seq": side.seq, "bytes": size}
