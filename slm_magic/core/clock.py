"""Time as the store keeps it: naive UTC datetimes, and seconds since the epoch for the index."""

from __future__ import annotations

from datetime import datetime, timezone
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
