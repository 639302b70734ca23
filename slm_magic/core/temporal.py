"""The days a question names ("yesterday", "last Tuesday", "3 days ago", "last week", "in
October", "since March 3", "2026-06-16"), turned into the YYYYMMDD day terms that session ids
and session summaries carry. Days are the machine's own calendar days (core/clock.local).

This is the temporal channel: summary events are written with their session's day, so a
question about a day finds what was done that day without any date arithmetic in the index.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from . import text
from .clock import local_day, utc_of_local

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH_OF = {**{m: i for i, m in enumerate(_MONTHS, start=1)}, **{m[:3]: i for i, m in enumerate(_MONTHS, start=1)},
             "sept": 9}
_COUNT_OF = {w: i for i, w in enumerate(("one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                                         "ten", "eleven", "twelve"), start=1)} | {"a": 1, "an": 1}
#: Words that are a month only in a date's company ("may 12" in "it may 12 times" is not one),
#: and those that are not one even after "in" ("in sep", unless a year follows).
_ALSO_WORDS = {"may", "mar", "march", "jan", "sep", "oct", "nov", "dec"}
_NOT_ALONE = {"mar", "jan", "sep"}
#: Two days that make a span: "between ... and ...", "from ... to ...".
_BETWEEN = re.compile(r"\b(?:between|from)\s+$", re.IGNORECASE)
_AND = re.compile(r"\s*(?:and|to|until|till|through|thru|-|–)\s*", re.IGNORECASE)
_AFTER_PREPOSITION = re.compile(r"\b(?:by|until|till|before|after|in|of|between|from|to|and|since)\s+$", re.IGNORECASE)
#: The days "recently" means, and a question that asks what was done and names no day
#: ("what was I working on?").
RECENT_DAYS = 7
_WHAT_WAS_DONE = re.compile(r"^\W*(?:so\s+|and\s+)?(?:what|where)\b.*\b(?:do|did|done|doing|work|worked|working|"
                            r"(?:been\s+)?up\s+to)\b", re.IGNORECASE)
#: The most days one question names (a "since" two years back keeps its latest year).
MAX_DAYS = 366

#: What a question about a span of time may say besides its dates and stop words ("what did I
#: work on last week?"): it asks what was done then, and what was written then answers it.
_ABOUT_THE_TIME = frozenset(
    "do did done doing work worked working happen happened happening write wrote written note noted notes "
    "learn learned learnt find found decide decided change changed keep kept remember remembered save saved add "
    "added fix fixed try tried test tested run ran build built make made start started finish finished look looked "
    "explore explored analyse analysed analyze analyzed discuss discussed talk talked say said show tell list "
    "summarize summarise summarized summarised summary summaries recap overview review reviewed progress log "
    "journal accomplish accomplished achieve achieved get got go went anything something everything stuff things "
    "session sessions notebook notebooks memory memories day days week weeks month months time morning afternoon "
    "evening night earlier recently lately remind new leave left check checked investigate investigated debug "
    "debugged train trained plan planned edit edited update updated clean cleaned read open opened close closed "
    "spend spent catch wrap ship shipped deploy deployed commit committed code coded between".split())

_N = r"\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_MONTH = "|".join(sorted(_MONTH_OF, key=len, reverse=True))
_YEAR = r"(?:19|20)\d\d"
_ORD = "st|nd|rd|th"
#: A word every phrase that names days holds: a question without one names none (the test
#: costs a fifth of the phrases' own on the questions most recalls ask).
_MAY_NAME_A_DAY = re.compile(
    rf"\b(?:today|tonight|morning|afternoon|evening|night|yesterday|recently|lately|late|ago|far|hours?|"
    rf"minutes?|days|week|weekend|month|{'|'.join(_WEEKDAYS)}|{_MONTH}|{_YEAR})\b|\d-\d",
    re.IGNORECASE)
_DAY_NAMED = re.compile(
    rf"""\b(?P<since>since\s+)?(?:
      (?P<before>(?:the\s+)?day\s+before\s+yesterday)
    | (?P<today>today|tonight|this\s+(?:morning|afternoon|evening)|so\s+far
        |(?:the\s+)?(?:last|past)\s+(?:(?:{_N})\s+)?(?:hours?|minutes?)|(?:{_N})\s+(?:hours?|minutes?)\s+ago)
    | (?P<yesterday>yesterday|last\s+night)
    | (?P<recent>recently|lately|these\s+days|of\s+late)
    | (?:in|during|throughout)\s+(?P<year>{_YEAR})
    | (?P<days_ago>{_N})\s+days?\s+ago
    | (?P<weeks_ago>{_N})\s+weeks?\s+ago
    | (?:the\s+)?(?:past|last)\s+(?P<span>{_N})\s+days
    | (?:the\s+)?past\s+(?P<past_week>week)
    | (?P<week>this|last|previous)\s+week
    | (?P<month_rel>this|last|previous)\s+month
    | (?:(?P<weekend_last>last|previous)\s+|this\s+|the\s+)?(?P<weekend>weekend)
    | (?P<on1>on\s+)?(?:the\s+)?(?P<dom1>\d{{1,2}})(?P<ord1>{_ORD})?\s+(?:of\s+)?(?P<mon1>{_MONTH})\.?(?:,?\s+(?P<y1>{_YEAR}))?
    | (?P<on2>on\s+)?(?P<mon2>{_MONTH})\.?\s+(?P<dom2>\d{{1,2}})(?P<ord2>{_ORD})?(?:,?\s+(?P<y2>{_YEAR}))?
    | (?(since)|(?P<prep>in|during|throughout|of|last|early|late|mid)[\s-]+)(?P<mon3>{_MONTH})(?:\s+(?P<y3>{_YEAR}))?
    | (?P<mon4>{_MONTH})\s+(?P<y4>{_YEAR})
    | (?:(?P<last>last|past|previous)\s+|on\s+|this\s+)?(?P<weekday>{"|".join(_WEEKDAYS)})
    | (?P<iso>{_YEAR}-\d\d-\d\d)
    )\b(?!-\d)""",
    re.IGNORECASE | re.VERBOSE,
)


def day_term(day: date) -> str:
    return day.strftime("%Y%m%d")


def temporal_terms(query: str, now: datetime) -> list[str]:
    """Day terms for the days a query refers to, relative to `now` (naive UTC; the days are
    the machine's local ones), in the order named, at most MAX_DAYS (empty if none)."""
    if not query or _MAY_NAME_A_DAY.search(query) is None:
        return []
    today = local_day(now)
    named: list[tuple[re.Match, date, date]] = []
    for m in _DAY_NAMED.finditer(query):
        first, last = _span(m, today, query) or (None, None)
        if first is None:
            continue
        if m.group("since"):
            last = max(last, today)
        if named and _BETWEEN.search(query[:named[-1][0].start()]) and _AND.fullmatch(query[named[-1][0].end():m.start()]):
            _, was_first, was_last = named.pop()  # ("between May 1 and May 5", "from Monday to Wednesday")
            first, last = min(first, was_first), max(last, was_last)
        named.append((m, first, last))
    days: list[date] = []
    for _, first, last in named:
        last = min(last, max(today, first))  # (a range never runs past today; a date named outright stays)
        days += [last - timedelta(days=i) for i in range(min((last - first).days + 1, MAX_DAYS))][::-1]
    return list(dict.fromkeys(day_term(d) for d in days[-MAX_DAYS:]))


def day_spans(days: list[str]) -> list[tuple[datetime, datetime]]:
    """Day terms (YYYYMMDD) as the UTC times they run over, (from, until) with until excluded,
    one per run of consecutive days."""
    runs: list[list[date]] = []
    for d in sorted({datetime.strptime(t, "%Y%m%d").date() for t in days}):
        if runs and (d - runs[-1][1]).days == 1:
            runs[-1][1] = d
        else:
            runs.append([d, d])
    return [(utc_of_local(datetime.combine(first, datetime.min.time())),
             utc_of_local(datetime.combine(last + timedelta(days=1), datetime.min.time()))) for first, last in runs]


def _span(m: re.Match, today: date, query: str) -> tuple[date, date] | None:
    """The first and last day of one phrase that names days, None where it names none."""
    g = m.group
    if g("before"):
        return _day(today - timedelta(days=2))
    if g("today"):
        return _day(today)
    if g("yesterday"):
        return _day(today - timedelta(days=1))
    if g("recent"):
        return today - timedelta(days=RECENT_DAYS - 1), today
    if g("year"):
        return date(int(g("year")), 1, 1), min(date(int(g("year")), 12, 31), today)
    if g("days_ago"):
        return _day(today - timedelta(days=_count(g("days_ago"))))
    if g("weeks_ago"):
        return _week_of(today - timedelta(weeks=_count(g("weeks_ago"))))
    if g("span"):
        return today - timedelta(days=_count(g("span"))), today
    if g("past_week"):
        return today - timedelta(days=6), today
    if g("week"):
        return _week_of(today - timedelta(weeks=0 if g("week").lower() == "this" else 1))
    if g("month_rel"):
        month = today.replace(day=1)
        return _month_of(month if g("month_rel").lower() == "this" else month - timedelta(days=1))
    if g("weekend"):
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)
        if g("weekend_last") and today.weekday() >= 5:
            saturday -= timedelta(weeks=1)
        return saturday, saturday + timedelta(days=1)
    if g("mon1") or g("mon2"):
        i = 1 if g("mon1") else 2
        month, dom, year = g(f"mon{i}"), g(f"dom{i}"), g(f"y{i}")
        if month.lower() in _ALSO_WORDS and not (g(f"ord{i}") or year or g("since") or g(f"on{i}")) \
                and not _AFTER_PREPOSITION.search(query[max(0, m.start() - 9):m.start()]):
            return None  # ("it may 12 times", "2 may fail": not dates)
        return _day(_dated(today, _MONTH_OF[month.lower()], int(dom), year))
    if g("mon3") or g("mon4"):
        month, year = (g("mon3"), g("y3")) if g("mon3") else (g("mon4"), g("y4"))
        if g("mon3") and month.lower() in _NOT_ALONE and not year:
            return None
        number, prep = _MONTH_OF[month.lower()], (g("prep") or "").lower()
        y = int(year) if year else today.year - (number > today.month or (prep == "last" and number == today.month))
        return _month_of(date(y, number, 1))
    if g("weekday"):
        back = (today.weekday() - _WEEKDAYS.index(g("weekday").lower())) % 7
        if back == 0 and g("last"):
            back = 7  # "last Monday" said on a Monday means a week ago
        return _day(today - timedelta(days=back))
    if g("iso"):
        try:
            return _day(date.fromisoformat(g("iso")))
        except ValueError:
            return None
    return None


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _COUNT_OF[word.lower()]


def _day(day: date | None) -> tuple[date, date] | None:
    return None if day is None else (day, day)


def _week_of(day: date) -> tuple[date, date]:
    """Monday to Sunday of the week that holds `day`."""
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6)


def _month_of(day: date) -> tuple[date, date]:
    first = day.replace(day=1)
    return first, (first + timedelta(days=32)).replace(day=1) - timedelta(days=1)


def _dated(today: date, month: int, dom: int, year: str | None) -> date | None:
    """A day of a month; without a year, the latest such day not after today."""
    try:
        day = date(int(year) if year else today.year, month, dom)
        return day if year or day <= today else date(today.year - 1, month, dom)
    except ValueError:  # (February 30th, the 31st of a short month)
        return None


def recent_days(query: str, now: datetime) -> list[str]:
    """The last RECENT_DAYS days, for a question that asks what was done and says nothing else
    ("what did I do?", "what was I working on?"): without a day it found nothing at all."""
    return temporal_terms("recently", now) if _asks_about_the_days_just_past(query) else []


def _asks_about_the_days_just_past(query: str) -> bool:
    return _WHAT_WAS_DONE.search(query) is not None and not set(text.term_words(query).values()) - {
        "work", "worked", "working", "doing", "done"}


def asks_what_was_done(query: str) -> bool:
    """Whether a question asks only what was done on the days it names ("what did I do today",
    "anything last week?"), or on the days just past (`recent_days`), not about something that
    happened to be then ("why does the tally miss today's purchases"): the first is answered
    by everything written on those days."""
    rest = _DAY_NAMED.sub(" ", query)
    if rest == query:
        return _asks_about_the_days_just_past(query)
    return all(w.casefold() in _ABOUT_THE_TIME for w in text.term_words(rest).values())


def without_days(query: str, now: datetime) -> str:
    """The query without the days it names: in a question about a time they are the temporal
    channel's, and as words ("Monday", "2026", "12") they would match other days' summaries.
    (What only looks like a date, "dec 12" alone, stays.)"""
    today = local_day(now)
    return _DAY_NAMED.sub(lambda m: " " if _span(m, today, query) else m.group(0), query)


#: The topic key that marks a day's whole-session summary: `day_key(day) + session_id`.
def day_key(day: date | str) -> str:
    """The start of the topic key of every whole-session summary of `day` (a date, or its
    YYYYMMDD day term): what a question about that day looks up."""
    return f"session-day:{day if isinstance(day, str) else day_term(day)}:"


WHOLE_SESSION = "*"  # the summary_events entity of a whole-session summary (no entity is one character)
