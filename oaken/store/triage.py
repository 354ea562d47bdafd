"""raw.db's labels set locally and triage (category, priority, disposition), refused outside
their vocabulary."""

from __future__ import annotations

import time
from typing import Sequence

from oaken.config import DISPOSITIONS
from oaken.errors import TriageError
from oaken.store.metadata import Metadata
from oaken.store.records import Triage


class LabelsAndTriage(Metadata):
    """What a user or a classifier says about a message: labels and triage."""

    def add_label(self, message: int, label: str) -> None:
        self.meta(message)
        self.db.execute("INSERT OR IGNORE INTO labels VALUES (?, ?)", (message, label))

    def remove_label(self, message: int, label: str) -> None:
        self.db.execute("DELETE FROM labels WHERE message = ? AND label = ?", (message, label))

    def set_triage(
        self,
        message: int,
        *,
        categories: Sequence[str],
        category: str | None = None,
        priority: int | None = None,
        disposition: str | None = None,
    ) -> Triage:
        """Write triage; only the fields given change. Values outside the vocabulary are refused."""
        if category is not None and category not in categories:
            raise TriageError(f"category {category!r}: expected one of {', '.join(categories)} ([triage] categories)")
        if priority is not None and (
            isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 3
        ):
            raise TriageError(f"priority {priority!r}: expected an integer 0-3 (3 most urgent)")
        if disposition is not None and disposition not in DISPOSITIONS:
            raise TriageError(f"disposition {disposition!r}: expected one of {', '.join(DISPOSITIONS)}")
        current = self.meta(message).triage
        new = Triage(
            category if category is not None else current.category,
            priority if priority is not None else current.priority,
            disposition if disposition is not None else current.disposition,
        )
        self.db.execute(
            "INSERT INTO triage(message, category, priority, disposition, updated_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(message) DO UPDATE SET category = excluded.category, priority = excluded.priority, "
            "disposition = excluded.disposition, updated_at = excluded.updated_at",
            (message, new.category, new.priority, new.disposition, time.time()),
        )
        return new
