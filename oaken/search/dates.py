"""The dates a query names: a day (after:2024-03-01, before:2024/03/01) and a time back from now
(newer_than:7d, older_than:1y), as Unix seconds UTC."""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta

_DATE = re.compile(r"(\d{4})[-/](\d{1,2})[-/](\d{1,2})")
_RELATIVE = re.compile(r"(\d{1,6})([dwmy])", re.I)


def day_start(value: str) -> int | None:
    """Midnight UTC of a day written YYYY-MM-DD or YYYY/MM/DD; None for anything else."""
    m = _DATE.fullmatch(value)
    if not m:
        return None
    try:
        day = datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC)
    except ValueError:
        return None
    return int(day.timestamp())


def _months_back(now: datetime, months: int) -> datetime:
    total = now.year * 12 + (now.month - 1) - months
    year, month = divmod(total, 12)
    month += 1
    day = min(now.day, calendar.monthrange(year, month)[1])
    return now.replace(year=year, month=month, day=day)


def relative(value: str, now: float) -> int | None:
    """`now` less a number of days, weeks, months or years (7d, 2w, 3m, 1y); None for anything else."""
    m = _RELATIVE.fullmatch(value)
    if not m:
        return None
    amount, unit = int(m[1]), m[2].lower()
    base = datetime.fromtimestamp(now, tz=UTC)
    try:
        if unit == "d":
            when = base - timedelta(days=amount)
        elif unit == "w":
            when = base - timedelta(weeks=amount)
        elif unit == "m":
            when = _months_back(base, amount)
        else:
            when = _months_back(base, amount * 12)
    except (OverflowError, ValueError):
        return None
    return int(when.timestamp())
