"""Day references in a query ("yesterday", "last Tuesday", "3 days ago", "2026-06-16"),
turned into the YYYYMMDD day terms that session ids and session summaries carry.

This is the temporal channel: summary events are written with their session's day, so a
question about a day finds what was done that day without any date arithmetic in the index.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_REL = re.compile(
    r"\b(?:(?P<today>today)|(?P<yesterday>yesterday)|(?P<n>\d{1,3})\s+days?\s+ago|"
    r"(?:(?P<last>last|past|previous)\s+|on\s+|this\s+)?(?P<weekday>" + "|".join(_WEEKDAYS) + r"))\b",
    re.IGNORECASE,
)
_ISO = re.compile(r"\b(20\d\d)-(\d\d)-(\d\d)\b")


def day_term(day: date) -> str:
    return day.strftime("%Y%m%d")


def temporal_terms(query: str, now: datetime) -> list[str]:
    """Day terms for the days a query refers to, relative to `now` (empty if none)."""
    if not query or not any(ch.isalpha() or ch.isdigit() for ch in query):
        return []
    today = now.date()
    days: list[date] = []
    for m in _REL.finditer(query):
        if m.group("today"):
            days.append(today)
        elif m.group("yesterday"):
            days.append(today - timedelta(days=1))
        elif m.group("n"):
            days.append(today - timedelta(days=int(m.group("n"))))
        elif m.group("weekday"):
            back = (today.weekday() - _WEEKDAYS.index(m.group("weekday").lower())) % 7
            if back == 0 and m.group("last"):
                back = 7  # "last Monday" said on a Monday means a week ago
            days.append(today - timedelta(days=back))
    for m in _ISO.finditer(query):
        try:
            days.append(date(int(m.group(1)), int(m.group(2)), int(m.group(3))))
        except ValueError:
            continue
    return list(dict.fromkeys(day_term(d) for d in days))


def without_dates(query: str) -> str:
    """The query without the dates it spells out ("2026-11-12"): a date asked of the sessions
    is the temporal channel's, and its numbers alone ("2026", "12") would match every other date."""
    return _ISO.sub(" ", query)


#: The topic key that marks a day's whole-session summary: `day_key(day) + session_id`.
def day_key(day: date | str) -> str:
    """The start of the topic key of every whole-session summary of `day` (a date, or its
    YYYYMMDD day term): what a question about that day looks up."""
    return f"session-day:{day if isinstance(day, str) else day_term(day)}:"


WHOLE_SESSION = "*"  # the summary_events entity of a whole-session summary (no entity is one character)
