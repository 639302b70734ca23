"""What the panel's endpoints do, on a `Memory` (attached by the caller), as JSON-able answers.
Only the engine's public methods and result models; nothing here knows HTTP.

A search is `Memory.recall` (the ranking `%recall` uses, with why each memory matched); no query
is `Memory.browse` (every memory the user may read, newest first). The engine filters by project
and type itself; tag, date and author are filtered here, on a wider page the engine returns."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from ..core.clock import local_day
from ..errors import InvalidInput
from ..memory import Memory
from ..results.display import PART_TIPS, PART_WORDS, STRENGTH_WORDS
from ..results.models import MEMORY_TYPES, Fact, ScoredMemory

#: How many memories a search ranks before the tag, date and author filters and the paging.
SEARCH_DEPTH = 200
#: The most memories the filters, the facets and the timeline read in one request.
SCAN = 5_000
PAGE_MAX = 200
CONTENT_MAX = 1_000_000  # characters the panel may remember in one go
SOURCE = "jupyterlab"  # Fact.source of what the panel remembers


@dataclass(frozen=True)
class Query:
    """One listing's question and filters, as the panel sends them (empty: no filter)."""

    q: str = ""
    project: str | None = None
    type: str | None = None
    tag: str | None = None
    author: str | None = None
    since: date | None = None
    until: date | None = None
    offset: int = 0
    limit: int = 50

    @property
    def narrowed(self) -> bool:
        """Filters the engine does not apply itself."""
        return bool(self.tag or self.author or self.since or self.until)

    def keeps(self, fact: Fact) -> bool:
        day = local_day(fact.created_at)  # (the day the panel shows it on)
        return ((not self.tag or self.tag in fact.tags) and (not self.author or fact.user_id == self.author)
                and (self.since is None or day >= self.since) and (self.until is None or day <= self.until))


def _day(text: str | None, name: str) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"{name} must be a date (YYYY-MM-DD); got {text!r}") from None


def _int(text: str | None, name: str, default: int, top: int) -> int:
    if text in (None, ""):
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number; got {text!r}") from None
    if not 0 <= value <= top:
        raise InvalidInput(f"{name} must be from 0 to {top}; got {value}")
    return value


def parse_query(args: dict[str, str]) -> Query:
    """The listing's query string, checked (a bad value is the engine's InvalidInput)."""
    kind = args.get("type") or None
    if kind is not None and kind not in MEMORY_TYPES:
        raise InvalidInput(f"type must be one of {', '.join(MEMORY_TYPES)}; got {kind!r}")
    return Query(q=(args.get("q") or "").strip(), project=args.get("project") or None, type=kind,
                 tag=args.get("tag") or None, author=args.get("author") or None,
                 since=_day(args.get("since"), "since"), until=_day(args.get("until"), "until"),
                 offset=_int(args.get("offset"), "offset", 0, 10**9), limit=max(1, _int(args.get("limit"), "limit", 50,
                                                                                       PAGE_MAX)))


# --- shapes ------------------------------------------------------------------------------------
def fact_json(fact: Fact, me: str) -> dict[str, Any]:
    """A memory as the panel shows it: every field, its author said plainly (`mine`)."""
    out = fact.model_dump(mode="json", exclude={"user_id"})
    return {**out, "author": fact.user_id, "mine": fact.user_id == me}


def scored_json(m: ScoredMemory, me: str) -> dict[str, Any]:
    """A recalled memory: the fact, its score, the score's parts and what each adds, and why
    it matched (the words by field, in a line, and how well)."""
    parts = {k: round(v, 4) for k, v in m.score.model_dump(exclude={"value"}).items()}
    adds = {k: round(v, 4) for k, v in m.score.contributions().items()}
    return {**fact_json(m.fact, me), "score": round(m.score.value, 4), "parts": parts, "adds": adds,
            "reason": m.reason, "strength": m.strength, "strength_words": STRENGTH_WORDS.get(m.strength, m.strength),
            "part_words": {k: PART_WORDS.get(k, k) for k in parts}, "part_tips": {k: PART_TIPS.get(k, k) for k in parts},
            "matched": {field: list(words) for field, words in m.matched.items()}, "similar": m.similar}


# --- reads -------------------------------------------------------------------------------------
def listing(mem: Memory, query: Query) -> dict[str, Any]:
    """One page of memories: the search's ranking with a query, newest first without."""
    me = mem.user_id
    if query.q:
        res = mem.recall(query.q, limit=SEARCH_DEPTH, project=query.project, type=query.type)
        found = [m for m in res.memories if query.keeps(m.fact)]
        page = found[query.offset:query.offset + query.limit]
        return {"query": query.q, "items": [scored_json(m, me) for m in page], "total": len(found),
                "offset": query.offset, "limit": query.limit, "elapsed_ms": round(res.elapsed_ms, 1),
                "degraded": res.degraded_reason if res.degraded_mode else None}
    if not query.narrowed:
        page = mem.browse(project=query.project, type=query.type, limit=query.limit, offset=query.offset)
        return {"query": "", "items": [fact_json(f, me) for f in page.facts], "total": page.total,
                "offset": query.offset, "limit": query.limit}
    facts = [f for f in _every(mem, query.project, query.type) if query.keeps(f)]
    page = facts[query.offset:query.offset + query.limit]
    return {"query": "", "items": [fact_json(f, me) for f in page], "total": len(facts), "offset": query.offset,
            "limit": query.limit}


def _every(mem: Memory, project: str | None = None, type: str | None = None) -> list[Fact]:
    """Up to SCAN memories the user may read, newest first."""
    return mem.browse(project=project, type=type, limit=SCAN).facts


def facets(mem: Memory) -> dict[str, Any]:
    """The values the filters offer: projects, tags (most used first), types, authors."""
    facts = _every(mem)
    tags: dict[str, int] = {}
    for f in facts:
        for t in f.tags:
            tags[t] = tags.get(t, 0) + 1
    authors = sorted({f.user_id for f in facts})
    return {"projects": sorted({f.project for f in facts if f.project}),
            "tags": sorted(tags, key=lambda t: (-tags[t], t)), "types": list(MEMORY_TYPES),
            "authors": authors, "team": len(authors) > 1 or mem.path.startswith("postgres")}


def overview(mem: Memory) -> dict[str, Any]:
    """Counts and the learning phase, for the panel's header."""
    st = mem.status()
    learning = mem.learning_status()
    return {"user": st.user_id, "database": st.database, "memories": st.memories, "summaries": st.summaries,
            "core": st.core_memories, "sessions": st.sessions, "feedback": st.feedback_signals,
            "phase": learning.phase, "learning": learning.status, "retrieval_mode": st.retrieval_mode,
            "stamp": stamp(mem)}


def stamp(mem: Memory) -> str:
    """A short string that changes when the user's memories do (a new one, a revision, a
    forgotten one, a pin, a 👍 given elsewhere): what the panel polls to know when to read
    again. (An unpin of an older memory elsewhere moves only the core count, which it reads.)"""
    page = mem.browse(limit=1)
    newest = page.facts[0] if page.facts else None
    core, signals = len(mem.core_memories()), mem.feedback_count()
    return (f"{page.total}|{newest.fact_id if newest else ''}|{newest.updated_at.isoformat() if newest else ''}|"
            f"{core}|{signals}")


def detail(mem: Memory, fact_id: str, root_dir: str) -> dict[str, Any]:
    """One memory whole, with where it came from and the notebook's path as the server's
    contents know it (to open it at its cell)."""
    fid = mem.resolve_id(fact_id)
    fact = mem.readable(fid)
    if fact is None:
        raise InvalidInput(f"no memory with id {fact_id!r}")
    prov = mem.provenance(fid)
    out = {**fact_json(fact, mem.user_id), "provenance": None}
    if prov is not None:
        out["provenance"] = {**prov.model_dump(mode="json"), "path": contents_path(prov.notebook, root_dir)}
    return out


def contents_path(notebook: str | None, root_dir: str) -> str | None:
    """A notebook path from provenance (absolute, as a kernel knows it) as the path under the
    server's root that JupyterLab opens; None when it lies outside."""
    if not notebook:
        return None
    if not os.path.isabs(notebook):
        return notebook.lstrip("/")
    root = os.path.realpath(root_dir)
    full = os.path.realpath(notebook)
    if full != root and full.startswith(root + os.sep):
        return os.path.relpath(full, root).replace(os.sep, "/")
    return None


def timeline(mem: Memory, limit: int = 60) -> dict[str, Any]:
    """Sessions, newest first: their day, when they started and ended, what they touched
    (projects, notebooks, types, the first few memories) and their summary when they have one."""
    summaries = {s.session_id: s.summary for s in mem.sessions.recent_summaries(mem.user_id, limit * 2)}
    sessions: dict[str, dict[str, Any]] = {}
    for f in _every(mem):
        if not f.session_id or f.user_id != mem.user_id:
            continue
        s = sessions.setdefault(f.session_id, {"session_id": f.session_id, "first": f.created_at, "last": f.created_at,
                                               "count": 0, "projects": set(), "notebooks": set(), "types": set(),
                                               "memories": []})
        s["first"], s["last"] = min(s["first"], f.created_at), max(s["last"], f.created_at)
        s["count"] += 1
        s["projects"].update([f.project] if f.project else [])
        s["notebooks"].update([os.path.basename(f.notebook)] if f.notebook else [])
        s["types"].add(f.type)
        s["memories"].append({"fact_id": f.fact_id, "title": f.title or _line(f.content), "created_at": f.created_at})
    ordered = sorted(sessions.values(), key=lambda s: s["last"], reverse=True)[:limit]
    return {"sessions": [_session_json(s, summaries.get(s["session_id"])) for s in ordered]}


def _line(content: str, n: int = 120) -> str:
    """A memory's first words for a list (the whole of it is one click away)."""
    flat = " ".join(content.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def _session_json(s: dict[str, Any], summary: str | None) -> dict[str, Any]:
    iso = lambda d: d.isoformat() if isinstance(d, datetime) else d
    memories = sorted(s["memories"], key=lambda m: m["created_at"])[:8]
    return {"session_id": s["session_id"], "day": local_day(s["first"]).isoformat(), "first": iso(s["first"]),
            "last": iso(s["last"]), "count": s["count"], "projects": sorted(s["projects"]),
            "notebooks": sorted(s["notebooks"]), "types": sorted(s["types"]), "summary": summary,
            "memories": [{**m, "created_at": iso(m["created_at"])} for m in memories]}


# --- changes -----------------------------------------------------------------------------------
def pin(mem: Memory, fact_id: str, core: bool) -> dict[str, Any]:
    fact = mem.pin(mem.resolve_id(fact_id), bool(core))
    return fact_json(fact, mem.user_id)


def forget(mem: Memory, fact_id: str) -> dict[str, Any]:
    fid = mem.resolve_id(fact_id)  # (one shared with you: `forget` says it is its author's to forget)
    return fact_json(mem.forget(fid), mem.user_id)


def feedback(mem: Memory, fact_id: str, signal: str, query: str | None) -> dict[str, Any]:
    fid = mem.resolve_id(fact_id)
    signal_id = mem.feedback(fid, signal, query=query or None)
    learning = mem.learning_status()
    return {"fact_id": fid, "signal": signal, "signal_id": signal_id, "phase": learning.phase,
            "learning": learning.status}


def remember(mem: Memory, body: dict[str, Any], root_dir: str) -> dict[str, Any]:
    """Keep a cell's text with the provenance %%remember keeps: the notebook (its absolute
    path, as a kernel names it), the cell's number and stable id, the code run before it; in
    the notebook's session, as the kernel's %%remember would be."""
    content = body.get("content")
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("content must be the text to remember")
    if len(content) > CONTENT_MAX:
        raise InvalidInput(f"content holds {len(content):,} characters; at most {CONTENT_MAX:,} in one memory")
    path = body.get("notebook")
    notebook = os.path.join(root_dir, path) if isinstance(path, str) and path else None
    session_id = mem.session_init(max_results=0, reuse=True, origin=notebook).session_id if notebook else None
    cell = body.get("cell")
    fact = mem.remember(content.strip(), session_id=session_id, tags=body.get("tags") or None,
                        type=body.get("type") or None, project=body.get("project") or None,
                        title=body.get("title") or None, source=SOURCE, notebook=notebook,
                        cell=cell if isinstance(cell, int) and not isinstance(cell, bool) else None,
                        cell_id=body.get("cell_id") or None, code=body.get("code") or None,
                        share=bool(body.get("share")) or None)
    return fact_json(fact, mem.user_id)
