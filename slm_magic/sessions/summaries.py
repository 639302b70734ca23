"""What a session's summaries say: the entities a memory names (identifiers, quoted names,
proper names), the memories grouped by them, the line a generated summary writes, and the
context text a session opens with."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime

from ..core.clock import local
from ..results.display import one_line
from ..results.models import Fact, SessionMemory


_IDENTIFIER = re.compile(r"`([^`\n]{2,60})`|\b([A-Za-z_][A-Za-z0-9]*_[A-Za-z0-9_]+|[a-z]+[A-Z][A-Za-z0-9]+|"
                         r"[A-Za-z_]\w*\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\b")


_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]{2,})\b")


_NOT_NAMES = frozenset("january february march april may june july august september october november december "
                       "monday tuesday wednesday thursday friday saturday sunday the this that these those "
                       "then there when what which while after before".split())


def entities_of(fact: Fact) -> list[str]:
    """What a memory is about, for grouping a session's summary: tags, project, code
    identifiers (snake_case, camelCase, dotted, `backticked`) and capitalised names."""
    found: list[str] = [f"#{t}" for t in fact.tags]
    if fact.project:
        found.append(f"project {fact.project}")
    for m in _IDENTIFIER.finditer(fact.content):
        found.append(m.group(1) or m.group(2))
    for m in _NAME.finditer(fact.content):
        if m.group(1).lower() not in _NOT_NAMES:
            found.append(m.group(1))
    out: list[str] = []
    for e in found:
        e = e.strip()
        if e and e.lower() not in (x.lower() for x in out):
            out.append(e)
    return out[:8]


def entity_groups(facts: list[Fact]) -> tuple[dict[str, list[Fact]], dict[str, str]]:
    """A session's memories by the entity each touches (lower-cased key), and each entity's
    label as first written, in order of appearance."""
    groups: dict[str, list[Fact]] = defaultdict(list)
    labels: dict[str, str] = {}
    for f in facts:
        for e in entities_of(f) or ["the session"]:
            groups[e.lower()].append(f)
            labels.setdefault(e.lower(), e)
    return groups, labels


def generated_line(facts: list[Fact], topics: list[str]) -> str:
    """The summary line a closed session gets when none is given: what later sessions show of it."""
    return f"{len(facts)} memor{'y' if len(facts) == 1 else 'ies'} about {', '.join(topics[:4])}"


def render_context(memories: list[SessionMemory], dates: dict[str, datetime], note: str | None = None) -> str:
    """The ready-to-paste markdown block: one bullet per memory with its date (after `note`,
    in italics, when there is one: what the list is, if not answers to a question)."""
    lines = ["# Relevant Memory Context", ""]
    if note:
        lines += [f"_{note}_", ""]
    if not memories:
        lines.append("_No relevant memories yet._")
    for m in memories:
        when = dates.get(m.fact_id)
        badge = "📌 " if m.is_core else ""
        lines.append(f"- {badge}{one_line(m.content, 300)}" + (f" ({local(when):%Y-%m-%d})" if when else ""))
    return "\n".join(lines) + "\n"
