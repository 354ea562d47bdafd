"""The `chunks` table's fragments and the index segments over them, for the upkeep
(oaken.index.vector_upkeep): which fragments are big, compaction, rewriting fragments without
their deleted rows, and keeping the scalar indexes' deltas few."""

from __future__ import annotations

from typing import Any, Iterable

# Every maintenance that finds new rows adds them to the ANN index as a delta index of their own,
# and a search visits each delta: ~5 ms more per delta at limit 10 (docs/scale.md), one delta a
# day for a daemon that gets mail. Past this many, the deltas are merged into one (a cost of the
# rows in them, not of the mailbox)...
MAX_INDEX_DELTAS = 4
# ...and once they hold this share of the rows the index was built over, it is built again over
# all rows (its IVF partitions trained on the mail as it now is): geometric, so a mailbox that
# grows pays a few whole builds in all.
REBUILD_SHARE = 0.5
# A deleted row anywhere in the table makes every ANN search build a bitset over every row of
# each partition it visits (Lance's deletion mask): at a million messages 145 ms of a vector
# search against 29-36 ms without (docs/scale.md). So a change supersedes rows instead of deleting
# them (oaken.index.vector_superseded); the upkeep deletes superseded rows for real only in
# fragments of at most this many rows, and rewrites, without their deleted rows, every such
# fragment that holds one: recent mail, in a fraction of a second. Bigger fragments cost ~8 us a
# row plus the remap of the indexes over them (58.6 s for 1.26M rows at a million messages with
# the old IVF-HNSW-SQ index; 20 s and 0.7 GB for 1.2M rows with IVF_RQ, docs/scale.md), and every
# searching process loads the index again: left as they are until SUPERSEDED_MAX_SHARE.
MATERIALIZE_MAX_ROWS = 65_536


def fragment_rows(table: Any) -> dict[int, int]:
    """Fragment id -> physical rows (deleted ones included) of the table as it is."""
    return {int(f.fragment_id): int(f.metadata.physical_rows) for f in table.get_fragments()}


def vector_index(indexes: Iterable[Any]) -> Any:
    """The ANN index's description among `indexes` (a describe_indices()); None without one."""
    return next((i for i in indexes if "vector" in i.field_names), None)


def compact(table: Any, *, excluded_fragment_ids: Iterable[int] = (), materialize_all: bool = False) -> None:
    """Lance's compaction, leaving `excluded_fragment_ids` as they are; with `materialize_all`,
    every other fragment holding a deleted row is rewritten without it (Lance's own threshold is
    10 % deleted). Moves `table` to the version it writes."""
    from lance.optimize import Compaction, CompactionOptions

    excluded = sorted(excluded_fragment_ids)
    options = (
        CompactionOptions(
            excluded_fragment_ids=excluded, materialize_deletions=True, materialize_deletions_threshold=0.0
        )
        if materialize_all
        else CompactionOptions(excluded_fragment_ids=excluded)
    )
    plan = Compaction.plan(table, options)
    if plan.tasks:
        Compaction.commit(table, [t.execute(table) for t in plan.tasks])


def big_fragments(table: Any) -> set[int]:
    """Fragments of more than MATERIALIZE_MAX_ROWS rows and those an ANN index segment over more
    than that many rows covers: rewriting one costs seconds to a minute (see there)."""
    rows = fragment_rows(table)
    big = {i for i, n in rows.items() if n > MATERIALIZE_MAX_ROWS}
    index = vector_index(table.describe_indices())
    for segment in index.segments if index is not None else ():
        if segment_rows(segment, rows) > MATERIALIZE_MAX_ROWS:
            big.update(int(i) for i in segment.fragment_ids)
    return big


def materialize_small(table: Any, keep: list[int]) -> None:
    """Rewrite, without their deleted rows, the fragments of at most MATERIALIZE_MAX_ROWS rows
    that hold any (see there). Left out (`excluded_fragment_ids`, which also keeps a plan's task
    from mixing them with small ones): `keep` (fragments holding superseded rows), bigger
    fragments, and those an ANN index segment over more than that many rows covers, since Lance
    remaps every segment covering a rewritten fragment (the base index at a million messages:
    ~27 s, and every searching process loads it again). Nothing is done while a left-out fragment
    holds a deleted row: searches keep their bitset anyway. A failure is logged: searches stay
    right, only slower."""
    fragments = {int(f.fragment_id): f.metadata for f in table.get_fragments()}
    if not any(f.deletion_file is not None for f in fragments.values()):
        return
    left_out = big_fragments(table) | set(keep)
    if any(fragments[i].deletion_file is not None for i in left_out if i in fragments):
        return
    materialize(table, left_out)


def materialize(table: Any, left_out: set[int]) -> None:
    """Rewrite the fragments holding deleted rows but those `left_out`, without those rows."""
    try:
        compact(table, excluded_fragment_ids=left_out, materialize_all=True)
    except Exception as exc:  # Lance's own: the deleted rows stay, searches still right
        from oaken import log

        log.get().warning("vector_fragment_rewrite_failed", error=f"{type(exc).__name__}: {exc}")


def bound_scalar_deltas(table: Any, names: list[str]) -> None:
    """Keeps each scalar index to at most MAX_INDEX_DELTAS deltas beside its first segment: past
    that the deltas are merged into one (a cost of their rows: 8-14 ms at a million messages;
    Lance merges the newest segments and leaves the oldest alone), and once they hold
    REBUILD_SHARE of the oldest segment's rows, every segment is (a cost of the table's,
    geometric as the mailbox grows). Measured against the oldest, not the biggest: a big first
    delta (a long first pass) would otherwise be merged again every few upkeeps, found by
    review. A failure is logged: filtered searches stay right, only slower."""
    rows = fragment_rows(table)
    by_merge: dict[int, list[str]] = {}
    for index in table.describe_indices():
        name = str(index.name)
        segments = list(index.segments)  # oldest first
        if name not in names or len(segments) <= MAX_INDEX_DELTAS + 1:
            continue
        sizes = [segment_rows(seg, rows) for seg in segments]
        merge = len(segments) if sum(sizes[1:]) > REBUILD_SHARE * sizes[0] else len(segments) - 1
        by_merge.setdefault(merge, []).append(name)
    for merge, group in by_merge.items():
        try:
            table.optimize.optimize_indices(index_names=group, num_indices_to_merge=merge)
        except Exception as exc:  # Lance's own: the deltas stay
            from oaken import log

            log.get().warning("scalar_index_merge_failed", indexes=group, error=f"{type(exc).__name__}: {exc}")


def segment_rows(segment: Any, rows: dict[int, int]) -> int:
    """Rows of the fragments an index segment covers (`rows`: fragment id -> physical rows; a
    fragment compaction removed counts 0)."""
    return sum(rows.get(int(i), 0) for i in segment.fragment_ids)
