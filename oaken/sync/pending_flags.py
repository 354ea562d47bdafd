"""Local flag changes not yet pushed (a message opened while a sync runs), laid over the flags
the server reports, so that a pull never reverts what the user just did."""

from __future__ import annotations

from typing import Sequence

from oaken.store import Store

Overlay = dict[int, list[tuple[str, str]]]  # uid -> [(op, flag)], in the order they were made


def pending_overlay(store: Store, folder_id: int, uidvalidity: int) -> Overlay:
    """The folder's queued changes at this UIDVALIDITY, by UID."""
    out: Overlay = {}
    for ch in store.pending_flag_changes(folder_id):
        if ch.uid is not None and ch.uidvalidity == uidvalidity:
            out.setdefault(ch.uid, []).append((ch.op, ch.flag))
    return out


def with_pending(flags: Sequence[str], pending: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The server's flags with the queued changes applied on top, sorted."""
    out = set(flags)
    for op, flag in pending:
        if op == "+":
            out.add(flag)
        else:
            out.discard(flag)
    return tuple(sorted(out))
