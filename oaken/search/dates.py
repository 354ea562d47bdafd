"""The dates a query names, as Unix seconds, read in the user's time zone (`[search] time_zone`,
default the system's): a day (after:2024-03-01, before:2024/03/01), a period or a range of them
(notmuch's date:2024-01..2024-03), and a time back from now (newer_than:7d, older_than:1y).

A day is the user's day, not UTC's: `after:2024-03-01` in Paris starts at 2024-02-29 23:00 UTC,
as Gmail reads it in the account's zone. A range's end names a whole period, included: `..2024-03`
runs to the end of March (exclusive bound: the first second of April)."""

from __future__ import annotations

import calendar
import os
import re
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache

_DATE = re.compile(r"(\d{4})[-/](\d{1,2})[-/](\d{1,2})")
_PERIOD = re.compile(r"(\d{4})(?:[-/](\d{1,2})(?:[-/](\d{1,2}))?)?")
_RELATIVE = re.compile(r"(\d{1,6})([dwmy])", re.I)


@lru_cache(maxsize=16)
def zone(name: str = "") -> tzinfo:
    """The time zone named (an IANA name such as "Europe/Paris", or "UTC"); "" for the system's.
    Raises ValueError naming the value when it is not a zone this system knows."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{name!r} is not a time zone name this system knows (e.g. Europe/Paris, UTC)") from None
    return _system_zone()


def _system_zone() -> tzinfo:
    """The system's zone with its DST rules ($TZ, else /etc/localtime), not only today's offset."""
    from zoneinfo import ZoneInfo

    tz = os.environ.get("TZ", "").lstrip(":")
    candidates = [tz] if tz else []
    try:
        target = os.path.realpath("/etc/localtime")
        if "/zoneinfo/" in target:
            candidates.append(target.split("/zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        try:
            return ZoneInfo(name)
        except Exception:  # noqa: BLE001 - an odd $TZ falls back to the next source
            continue
    try:
        with open("/etc/localtime", "rb") as f:
            return ZoneInfo.from_file(f, key="localtime")
    except Exception:  # noqa: BLE001 - no zone database: the offset of now is the best there is
        return datetime.now().astimezone().tzinfo or UTC


def _midnight(day: date, tz: tzinfo) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=tz).timestamp())


def day_start(value: str, tz: tzinfo = UTC) -> int | None:
    """Midnight in `tz` of a day written YYYY-MM-DD or YYYY/MM/DD; None for anything else."""
    m = _DATE.fullmatch(value)
    if not m:
        return None
    try:
        return _midnight(date(int(m[1]), int(m[2]), int(m[3])), tz)
    except (ValueError, OverflowError):
        return None


def _months_back(now: datetime, months: int) -> datetime:
    total = now.year * 12 + (now.month - 1) - months
    year, month = divmod(total, 12)
    month += 1
    day = min(now.day, calendar.monthrange(year, month)[1])
    return now.replace(year=year, month=month, day=day)


def relative(value: str, now: float, tz: tzinfo = UTC) -> int | None:
    """`now` less a number of days, weeks, months or years (7d, 2w, 3m, 1y); None for anything else.
    Months and years are counted on the calendar of `tz`."""
    m = _RELATIVE.fullmatch(value)
    if not m:
        return None
    amount, unit = int(m[1]), m[2].lower()
    try:
        base = datetime.fromtimestamp(now, tz=tz)
        if unit == "d":
            when = base - timedelta(days=amount)
        elif unit == "w":
            when = base - timedelta(weeks=amount)
        elif unit == "m":
            when = _months_back(base, amount)
        else:
            when = _months_back(base, amount * 12)
        return int(when.timestamp())
    except (OverflowError, ValueError, OSError):
        return None


def period(value: str, now: float, tz: tzinfo = UTC) -> tuple[int, int] | None:
    """[start, end) of what one side of a date: range names: a year (2024), a month (2024-03), a
    day (2024-03-01), today, yesterday, or a time back from now (7d: that moment, both ends)."""
    low = value.lower()
    try:
        if low in ("today", "yesterday"):
            day = datetime.fromtimestamp(now, tz=tz).date() - timedelta(days=low == "yesterday")
            return _midnight(day, tz), _midnight(day + timedelta(days=1), tz)
        if low == "now":
            return int(now), int(now)
        back = relative(value, now, tz)
        if back is not None:
            return back, back
        m = _PERIOD.fullmatch(value)
        if not m:
            return None
        year = int(m[1])
        if m[3]:
            first = date(year, int(m[2]), int(m[3]))
            after = first + timedelta(days=1)
        elif m[2]:
            first = date(year, int(m[2]), 1)
            after = date(year + (first.month == 12), first.month % 12 + 1, 1)
        else:
            first, after = date(year, 1, 1), date(year + 1, 1, 1)
        return _midnight(first, tz), _midnight(after, tz)
    except (ValueError, OverflowError, OSError):
        return None


def date_range(value: str, now: float, tz: tzinfo = UTC) -> tuple[int | None, int | None] | None:
    """notmuch's date:SINCE..UNTIL (either side may be empty) or date:PERIOD (that whole period) as
    (after inclusive, before exclusive); None when a side cannot be read."""
    since, dots, until = value.partition("..")
    if not dots:
        whole = period(value, now, tz)
        return None if whole is None else (whole[0], whole[1] if whole[1] > whole[0] else None)
    lo = period(since, now, tz) if since else None
    hi = period(until, now, tz) if until else None
    if (since and lo is None) or (until and hi is None) or not (since or until):
        return None
    return (lo[0] if lo else None, hi[1] if hi and hi[1] > hi[0] else hi[0] if hi else None)


def shown(seconds: int, tz: tzinfo) -> str:
    """A bound as --explain shows it: ISO 8601 in the user's zone, offset included."""
    try:
        return datetime.fromtimestamp(seconds, tz=tz).isoformat()
    except (OverflowError, ValueError, OSError):
        return str(seconds)
