"""The assistant's tools: one adapter per tool, from its arguments to the engine's call to a
compact JSON-able answer.

Nothing here knows MCP (`mcp_server.py` serves these), so the same calls can be timed or tested
in process. Each adapter takes the `Memory` first; the parameters after it, with their types and
descriptions, are the tool's input schema, and its docstring is what the assistant reads. A bad
argument or an unknown id raises the engine's own `SlmMagicError`, with the message a magic
would show. A memory may hold up to 10 MB: lists clip each content (and say so);
`mem_get_observation` returns it whole.
"""

from __future__ import annotations

import os
import socket
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema
from pydantic_core import to_jsonable_python

from .errors import InvalidInput
from .memory import Memory
from .models import MEMORY_TYPES, Fact, ScoredMemory

#: Characters of a memory's content shown in a list (recall, session_init, mem_timeline).
CONTENT_CHARS = 2_000
#: What the assistant remembers is marked as its own (Fact.source), so a notebook can tell.
SOURCE = "mcp"
#: The memory types and the reserved "summary" of session summaries, which recall and mem_search filter on.
ANY_TYPES = (*MEMORY_TYPES, "summary")


def _enum(values: tuple[str, ...], *, optional: bool = False) -> dict[str, Any]:
    """The schema names the choices; the engine checks them, so a wrong one gets its message
    ("type must be one of ...") rather than a validator's."""
    return {"enum": [*values, None] if optional else list(values)}


SessionId = Annotated[str, Field(description="The session_id that session_init returned, unchanged.")]
FactId = Annotated[str, Field(description="A memory's fact_id, or a unique prefix of at least 6 characters.")]
UserId = Annotated[str | None, Field(
    description="Whose observations (API B is per user); default: the user the server was started for (--user).")]
ObservationId = Annotated[str, Field(
    description="An observation's id (a fact_id), or a unique prefix of at least 6 characters.")]
_TYPE_LIST = WithJsonSchema({"anyOf": [{"type": "array", "items": {"type": "string", "enum": list(ANY_TYPES)}},
                                      {"type": "null"}]})
Tags = Annotated[str | list[str] | None, Field(
    description='Comma-separated ("auth,decision") or a list of strings; both mean the same tags.')]


# --- shaping answers ---------------------------------------------------------------------------
def _clipped(content: str) -> dict[str, Any]:
    """A content for a list: whole when short, else its start, flagged, with its full length."""
    if len(content) <= CONTENT_CHARS:
        return {"content": content, "content_truncated": False}
    return {"content": content[:CONTENT_CHARS] + "…", "content_truncated": True, "content_chars": len(content)}


def _fact(fact: Fact) -> dict[str, Any]:
    """A stored memory, every field but its owner, content clipped; a shared one names its
    author (`shared_by`)."""
    return {"fact_id": fact.fact_id, **_clipped(fact.content),
            **fact.model_dump(mode="json", exclude={"fact_id", "content", "user_id"}),
            **({"shared_by": fact.user_id} if fact.shared else {})}


def _scored(m: ScoredMemory) -> dict[str, Any]:
    """A recalled memory: the fact, its score and the score's parts (to 4 decimals: an assistant
    reads them, and pays for each digit), and whatever else the engine says about the match
    (fields it adds to ScoredMemory pass through)."""
    fact = _fact(m.fact)
    head = {k: fact.pop(k) for k in ("fact_id", "content", "content_truncated", "content_chars") if k in fact}
    parts = {k: round(v, 4) for k, v in m.score.model_dump(exclude={"value"}).items()}
    return {**head, "score": round(m.score.value, 4), "score_parts": parts,
            **fact, **m.model_dump(mode="json", exclude={"fact", "score"}),
            "matched": {field: list(words) for field, words in m.matched.items()}, "reason": m.reason}


def _listed(item: dict[str, Any]) -> dict[str, Any]:
    """An item of a documented shape with a long content clipped: the shape stays as
    documented unless clipping happened, and then it says so."""
    content = item.get("content")
    if isinstance(content, str) and len(content) > CONTENT_CHARS:
        return {**item, **_clipped(content)}
    return item


def origin() -> str:
    """Whose sessions these are, in the magics' form ("ipython:HOST:PID"): this server's, so no
    notebook or terminal ever continues one of the assistant's sessions as its own."""
    return f"mcp:{socket.gethostname()}:{os.getpid()}"


def _user(mem: Memory, user_id: str | None) -> str:
    user = mem.user_id if user_id is None else user_id
    if not isinstance(user, str) or not user.strip():
        raise InvalidInput("user_id must be a non-empty string: pass user_id, or start the server with --user NAME")
    return user


# --- API A: the session lifecycle --------------------------------------------------------------
def session_init(
    mem: Memory,
    project_path: Annotated[str, Field(description="The working directory, e.g. ~/projects/churn; its name seeds "
                                                   "the query when query is empty.")] = "",
    query: Annotated[str, Field(description="What this session is about (default: derived from project_path).")] = "",
    max_results: Annotated[int, Field(description="How many memories to bring.", json_schema_extra={"minimum": 0})] = 10,
    max_age_days: Annotated[int, Field(description="Leave out memories not updated for this many days unless their "
                                                   "relevance is at least 0.70; 0 turns the age gate off.",
                                       json_schema_extra={"minimum": 0})] = 30,
) -> dict[str, Any]:
    """Open a memory session: call this once, at the start of a piece of work and before any
    recall or remember. It returns a session_id (slm-YYYYMMDD-<8hex>) and the memories that matter
    for the project, with a ready-to-paste markdown `context`. Pass that session_id unchanged to
    every recall, remember and feedback call of this work, and call close_session with it when
    the work is done; never call session_init twice for the same work (a new id breaks the
    session's learning) and never make up an id. If `abstained` is true the memories do not
    answer the query: say so rather than present them as settled; `degraded_mode` true means
    only a BM25 fallback ran."""
    init = mem.session_init(project_path=project_path, query=query, max_results=max_results,
                            max_age_days=max_age_days, origin=origin())
    out = init.model_dump(mode="json")
    out["memories"] = [_listed(m) for m in out["memories"]]
    out["core_memory"] = [_listed(m) for m in out["core_memory"]]
    return out


def recall(
    mem: Memory,
    query: Annotated[str, Field(description="What to look for, in words.")],
    session_id: SessionId,
    limit: Annotated[int, Field(description="How many memories, at most.", json_schema_extra={"minimum": 0})] = 10,
    project: Annotated[str | None, Field(description="Only memories of this project.")] = None,
    type: Annotated[str | None, Field(description="Only memories of this type.",
                                      json_schema_extra=_enum(ANY_TYPES, optional=True))] = None,
    max_age_days: Annotated[int | None, Field(
        description="Leave out memories older than this unless their relevance is at least 0.70.",
        json_schema_extra={"minimum": 0})] = None,
    related: Annotated[bool, Field(description="Also the memories written next to each match in its session "
                                               "(after the matches, each saying which match it is related to).")] = False,
) -> dict[str, Any]:
    """The stored memories (the user's notebook findings and yours) that answer a query, best
    first, each with its score and the score's parts (`relevance` says how well it matches), the
    query words it matched by field (`matched`), tags, type, project and dates. Only memories that
    match the query come back, unless `related`. A content over 2,000 characters is clipped
    (`content_truncated`): mem_get_observation returns it whole."""
    res = mem.recall(query, session_id=session_id, limit=limit, project=project, type=type, max_age_days=max_age_days,
                     related=related)
    head = res.model_dump(mode="json", exclude={"memories"})
    head["elapsed_ms"] = round(head["elapsed_ms"], 2)
    return {**head, "memory_count": len(res),
            "memories": [_scored(m) for m in res]}


def remember(
    mem: Memory,
    content: Annotated[str, Field(description="The memory: a finding, a decision, a definition, in full sentences.")],
    session_id: SessionId,
    tags: Tags = None,
    project: Annotated[str | None, Field(description="The project it belongs to.")] = None,
    type: Annotated[str | None, Field(description="The kind of memory (default: discovery).",
                                      json_schema_extra=_enum(MEMORY_TYPES, optional=True))] = None,
    title: Annotated[str | None, Field(description="A short title.")] = None,
    topic_key: Annotated[str | None, Field(
        description="A stable key: remembering again under it revises that memory instead of adding one, "
                    "keeping every field not given.")] = None,
    core: Annotated[bool | None, Field(description="Pin it: always in a session's context.")] = None,
    share: Annotated[bool | None, Field(
        description="Share it with the team: everyone on this memory finds it, with its author.")] = None,
) -> dict[str, Any]:
    """Store a memory that the user (in their notebook) and later sessions will find: results,
    decisions and their reasons, definitions, pitfalls; not the conversation. Text inside
    <private>…</private> is stored as [REDACTED]; a topic_key already used revises that memory
    (`action` "revised")."""
    fact = mem.remember(content, session_id=session_id, tags=tags, project=project, type=type, title=title,
                        topic_key=topic_key, core=core, share=share, source=SOURCE)
    return {"success": True, "action": "revised" if fact.revision_count else "remembered", **_fact(fact)}


def close_session(
    mem: Memory,
    session_id: Annotated[str, Field(description="The session_id from session_init (empty: the user's most recent "
                                                 "session, which may be the notebook's: give the id).")] = "",
) -> dict[str, Any]:
    """Close a session when its work is done: its memories are summarised, one searchable
    summary per thing they touched, so "what did we do in that session" has an answer later.
    Not a cleanup step before session_init; 0 summary events is normal for a quiet session."""
    return mem.close_session(session_id).model_dump(mode="json")


# --- API B: observations per user --------------------------------------------------------------
def mem_session_start(mem: Memory, user_id: UserId = None) -> dict[str, Any]:
    """Start the user's observation session (API B), or continue the one active in the last 24
    hours (`is_new` false), with up to 5 earlier session summaries and 10 observations ranked by
    ContextScore (a score not comparable with mem_search's)."""
    return mem.mem_session_start(_user(mem, user_id)).model_dump(mode="json")


def mem_save(
    mem: Memory,
    content: Annotated[str, Field(description="The observation, in full sentences.")],
    type: Annotated[str, Field(description="The kind of observation.", json_schema_extra=_enum(MEMORY_TYPES))],
    title: Annotated[str, Field(description="A short title.")],
    topic_key: Annotated[str | None, Field(
        description="A stable key: saving again under it updates that observation in place.")] = None,
    user_id: UserId = None,
) -> dict[str, Any]:
    """Save an observation in the user's active session (one is opened if needed). The same
    content saved twice is `deduped`; a known topic_key is `updated` in place."""
    return mem.mem_save(_user(mem, user_id), content, type=type, title=title, topic_key=topic_key).model_dump(
        mode="json")


def mem_search(
    mem: Memory,
    query: Annotated[str, Field(description="What to look for, in words.")],
    limit: Annotated[int, Field(description="How many observations, at most.", json_schema_extra={"minimum": 1})] = 10,
    types: Annotated[list[str] | None, _TYPE_LIST, Field(description="Only these types.")] = None,
    types_exclude: Annotated[list[str] | None, _TYPE_LIST, Field(description="Every type but these.")] = None,
    user_id: UserId = None,
) -> dict[str, Any]:
    """The user's observations (and session summaries) that answer a query, by SearchScore =
    0.60 relevance + 0.25 recency + 0.15 revision; each with a snippet: mem_get_observation
    gives the whole."""
    found = mem.mem_search(_user(mem, user_id), query, limit=limit, types=types, types_exclude=types_exclude)
    return {"query": query, "observations": [o.model_dump(mode="json") for o in found]}


def mem_session_summary(
    mem: Memory,
    summary: Annotated[str, Field(description="What the session did and decided, in a few sentences.")],
    user_id: UserId = None,
) -> dict[str, Any]:
    """Attach a summary to the user's active session, stored and searchable, without ending it."""
    return mem.mem_session_summary(_user(mem, user_id), summary).model_dump(mode="json")


def mem_session_end(
    mem: Memory,
    summary: Annotated[str, Field(description="What the session did and decided, in a few sentences.")],
    user_id: UserId = None,
) -> dict[str, Any]:
    """End the user's active session with a summary (the next mem_session_start opens a new one)."""
    return mem.mem_session_end(_user(mem, user_id), summary=summary).model_dump(mode="json")


def mem_get_observation(
    mem: Memory,
    observation_id: ObservationId,
    user_id: UserId = None,
) -> dict[str, Any]:
    """One observation in full, its whole content however long (search results and recalls
    show only the start of a long one)."""
    user = _user(mem, user_id)
    return mem.mem_get_observation(user, mem.resolve_id(observation_id, user_id=user)).model_dump(mode="json")


def mem_timeline(
    mem: Memory,
    observation_id: ObservationId,
    user_id: UserId = None,
) -> dict[str, Any]:
    """An observation among the ones saved just before and after it in its session, in time
    order: what was going on around a finding."""
    user = _user(mem, user_id)
    timeline = mem.mem_timeline(user, mem.resolve_id(observation_id, user_id=user))
    return {"observations": [_listed(o.model_dump(mode="json")) for o in timeline]}


def mem_stats(mem: Memory, user_id: UserId = None) -> dict[str, Any]:
    """How much the user has stored: observations by type, sessions, summaries, first and last dates."""
    return to_jsonable_python(mem.mem_stats(_user(mem, user_id)))


# --- learning and core memories ----------------------------------------------------------------
def feedback(
    mem: Memory,
    fact_id: FactId,
    signal: Annotated[str, Field(description="up: it helped; down: it did not.",
                                 json_schema_extra=_enum(("up", "down")))],
    session_id: Annotated[str | None, Field(
        description="The session whose recall showed it (the query it was shown for is found from it).")] = None,
    query: Annotated[str | None, Field(description="The query it was useful (or not) for, if not from a session.")] = None,
) -> dict[str, Any]:
    """Tell the ranking whether a recalled memory was useful: signals train the per-user
    re-ranking (phase 2 from 50 signals, a learned model from 200)."""
    fid = mem.resolve_id(fact_id)
    signal_id = mem.feedback(fid, signal, session_id=session_id, query=query)
    return {"success": True, "fact_id": fid, "signal": signal, "signal_id": signal_id,
            "learning": mem.learning_status().model_dump(mode="json")}


def pin(
    mem: Memory,
    fact_id: FactId,
    core: Annotated[bool, Field(description="true: pin it; false: unpin it.")] = True,
) -> dict[str, Any]:
    """Pin a memory as core (every session_init brings it, whatever the query), or unpin it.
    Keep core memories few: standing decisions, definitions, the user's preferences."""
    fact = mem.pin(mem.resolve_id(fact_id), core)
    return {"success": True, "action": "pinned" if core else "unpinned", **_fact(fact)}


#: Every tool, in the order an assistant meets them.
TOOLS = (session_init, recall, remember, close_session, mem_session_start, mem_save, mem_search,
         mem_session_summary, mem_session_end, mem_get_observation, mem_timeline, mem_stats, feedback, pin)
#: Tools that change nothing (recall is not one: it records what a session was shown).
READ_ONLY = frozenset({"mem_search", "mem_get_observation", "mem_timeline", "mem_stats"})
