"""Time as the store keeps it: naive UTC datetimes, and seconds since the epoch for the index;
and as a person reads it: the days and hours of the machine's own time zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timezone
from typing import Any

from ..errors import InvalidInput


def epoch_seconds(dt: datetime) -> float:
    """Seconds since the epoch of a naive UTC datetime (how the engine keeps every time)."""
    return dt.replace(tzinfo=timezone.utc).timestamp()


def to_utc_naive(value: Any, default: datetime) -> datetime:
    """Store UTC without tzinfo; a naive datetime is taken to be UTC already."""
    if value is None:
        return default
    if not isinstance(value, datetime):
        raise InvalidInput(f"created_at must be a datetime, not {type(value).__name__}")
    if value.tzinfo is not None:
        if value.tzinfo is not timezone.utc:
            value = value.astimezone(timezone.utc)
        value = value.replace(tzinfo=None)
    return value


def local(dt: datetime) -> datetime:
    """A naive UTC time as the machine's wall clock reads it (naive): the day a person means by
    "today" or "last Tuesday" ends at their midnight, not at Greenwich's."""
    try:
        return dt.replace(tzinfo=timezone.utc).astimezone().replace(tzinfo=None)
    except (OverflowError, OSError, ValueError):  # (a time at the calendar's ends stays as it is)
        return dt


def local_day(dt: datetime) -> date:
    """The machine's calendar day of a naive UTC time."""
    return local(dt).date()


def utc_of_local(dt: datetime) -> datetime:
    """The naive UTC time of a naive wall-clock time of the machine (`local`'s inverse)."""
    try:
        return dt.astimezone(timezone.utc).replace(tzinfo=None)
    except (OverflowError, OSError, ValueError):
        return dt


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Clock:
    """The engine's one "now": the caller's clock (a test's, a replay's) as naive UTC, else the
    machine's. Every part is handed this object, so none calls back into the facade for the time."""

    def __init__(self, source: Callable[[], datetime | None] | None = None):
        self.source = source or utcnow

    def __call__(self) -> datetime:
        return to_utc_naive(self.source(), utcnow())
