"""The assistant's tools: one adapter per tool, from its arguments to the engine's call to a
compact JSON-able answer.

Nothing here knows MCP (`mcp_server.py` serves these), so the same calls can be timed or tested
in process. Each adapter takes the `Memory` first; the parameters after it, with their types and
descriptions, are the tool's input schema, and its docstring is what the assistant reads. A bad
argument or an unknown id raises the engine's own `SlmMagicError`, with the message a magic
would show. A memory may hold up to 10 MB: lists clip each content (and say so);
`mem_get_observation` returns it whole.

Whose memory: the server's user (`Memory.user_id`: `--user`, else the same default identity the
notebooks use), for every tool of both APIs. Which session: the one the caller names (a
made-up id is an error, never silently a session of its own), else this server's session, the
one its last `session_init` opened or one opened on first need, as a magic does.
"""

from __future__ import annotations

import os
import socket
import weakref
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema
from pydantic_core import to_jsonable_python

from .core.scoring import AGE_GATE_RELEVANCE
from .errors import InvalidInput
from .memory import Memory
from .results.models import MEMORY_TYPES, Fact, ScoredMemory
from .core.session_ids import is_synthetic_session

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


SessionId = Annotated[str | None, Field(
    description="The session_id that session_init returned, unchanged (default: this server's session, "
                "opened on first need).")]
FactId = Annotated[str, Field(description="A memory's fact_id, or a unique prefix of at least 6 characters.")]
UserId = Annotated[str | None, Field(
    description="Whose observations (API B is per user); default: the server's user, the same one as the "
                "user's notebooks.")]
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


def _fact(fact: Fact, me: str) -> dict[str, Any]:
    """A stored memory, every field but its owner, content clipped; a shared one names its
    author (`shared_by`), or says it is the caller's own ("you", `shared_by_you`)."""
    mine = fact.user_id == me
    return {"fact_id": fact.fact_id, **_clipped(fact.content),
            **fact.model_dump(mode="json", exclude={"fact_id", "content", "user_id"}),
            **({"shared_by": "you" if mine else fact.user_id, "shared_by_you": mine} if fact.shared else {})}


def _scored(m: ScoredMemory, me: str) -> dict[str, Any]:
    """A recalled memory: the fact, its score and the score's parts (to 4 decimals: an assistant
    reads them, and pays for each digit), and whatever else the engine says about the match
    (fields it adds to ScoredMemory pass through)."""
    fact = _fact(m.fact, me)
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
    """Whose observations: the one asked for, else the server's user (the notebooks' too)."""
    user = mem.user_id if user_id is None else user_id
    if not isinstance(user, str) or not user.strip():
        raise InvalidInput(f"user_id must be a non-empty string; leave it out for the server's user, {mem.user_id!r}")
    return user


# --- which session -----------------------------------------------------------------------------
#: This server's session per Memory served: the one its session_init opened, or one opened on
#: first need by a call that named none (a process serves one Memory; tests serve several).
_SERVER_SESSION: "weakref.WeakKeyDictionary[Memory, str]" = weakref.WeakKeyDictionary()
#: Of those, the one a call that named no session opened (no session_init asked for it).
_OPENED_ON_NEED: "weakref.WeakKeyDictionary[Memory, str]" = weakref.WeakKeyDictionary()


def _server_session(mem: Memory) -> tuple[str, str]:
    """This server's live session and a line saying it was used (and whether it was opened)."""
    sid = _SERVER_SESSION.get(mem)
    if sid is not None and not mem.session_is_closed(sid):
        return sid, f"no session_id given: this server's session {sid} was used; pass it as session_id"
    sid = mem.session_init(max_results=0, origin=origin()).session_id
    _SERVER_SESSION[mem] = sid
    _OPENED_ON_NEED[mem] = sid
    return sid, f"no session_id given: opened this server's session {sid}; pass it as session_id from now on"


def end_server_session(mem: Memory) -> None:
    """At the server's end, the session a call opened on its own (no session_init) is closed if
    it holds no memory: a one-shot client that only recalled left one open session per run.
    One that holds memories, or that session_init opened, stays open, for the same work's next
    run to pass its id, or for the timeout to summarise."""
    sid = _OPENED_ON_NEED.pop(mem, None)
    if sid is not None and not mem.session_is_closed(sid) and not mem.session_facts(sid):
        mem.close_session(sid)


def _known_session(mem: Memory, session_id: Any) -> str:
    """A session id the caller gave, checked: one that was never opened is an error (a made-up
    id would otherwise be taken silently, and nothing would be of that session)."""
    if not isinstance(session_id, str):
        raise InvalidInput(f"session_id must be a string, not {type(session_id).__name__}")
    sid = session_id.strip()
    if not is_synthetic_session(sid) and not mem.session_known(sid):
        raise InvalidInput(f"no session with id {sid!r}: pass the session_id that session_init returned, "
                           "or leave session_id out to use this server's session")
    return sid


def _session(mem: Memory, session_id: str | None) -> tuple[str, str | None]:
    """The session a call runs in, and a note for the answer when the server chose it."""
    if session_id is None or (isinstance(session_id, str) and not session_id.strip()):
        return _server_session(mem)
    return _known_session(mem, session_id), None


def _noted(answer: dict[str, Any], note: str | None) -> dict[str, Any]:
    return {**answer, "note": note} if note else answer


# --- API A: the session lifecycle --------------------------------------------------------------
def session_init(
    mem: Memory,
    project_path: Annotated[str, Field(description="The working directory, e.g. ~/projects/churn; its name seeds "
                                                   "the query when query is empty.")] = "",
    query: Annotated[str, Field(description="What this session is about (default: derived from project_path).")] = "",
    max_results: Annotated[int, Field(description="How many memories to bring.", json_schema_extra={"minimum": 0})] = 10,
    max_age_days: Annotated[int, Field(description="Leave out memories not updated for this many days unless their "
                                                   f"relevance is at least {AGE_GATE_RELEVANCE:.2f}; 0 turns the age gate off.",
                                       json_schema_extra={"minimum": 0})] = 30,
) -> dict[str, Any]:
    """Open a memory session: call this once, at the start of a piece of work and before any
    recall or remember. It returns a session_id (slm-YYYYMMDD-<8hex>) and the memories that matter
    for the project, with a ready-to-paste markdown `context`. Pass that session_id unchanged to
    every recall, remember and feedback call of this work, and call close_session with it when
    the work is done; never call session_init twice for the same work (a new id breaks the
    session's learning) and never make up an id (an unknown one is refused). A call that gives no
    session_id runs in the session this call opened. If `abstained` is true the memories do not
    answer the query: say so rather than present them as settled; `degraded_mode` true means
    only a BM25 fallback ran."""
    init = mem.session_init(project_path=project_path, query=query, max_results=max_results,
                            max_age_days=max_age_days, origin=origin())
    _SERVER_SESSION[mem] = init.session_id  # a call that names no session runs in this one
    out = init.model_dump(mode="json")
    out["memories"] = [_listed(m) for m in out["memories"]]
    out["core_memory"] = [_listed(m) for m in out["core_memory"]]
    return out


def recall(
    mem: Memory,
    query: Annotated[str, Field(description="What to look for, in words.")],
    session_id: SessionId = None,
    limit: Annotated[int, Field(description="How many memories, at most.", json_schema_extra={"minimum": 0})] = 10,
    project: Annotated[str | None, Field(description="Only memories of this project.")] = None,
    type: Annotated[str | None, Field(description="Only memories of this type.",
                                      json_schema_extra=_enum(ANY_TYPES, optional=True))] = None,
    max_age_days: Annotated[int | None, Field(
        description=f"Leave out memories older than this unless their relevance is at least {AGE_GATE_RELEVANCE:.2f}.",
        json_schema_extra={"minimum": 0})] = None,
    related: Annotated[bool, Field(description="Also the memories written next to each match in its session "
                                               "(after the matches, each saying which match it is related to).")] = False,
) -> dict[str, Any]:
    """The stored memories (the user's notebook findings and yours) that answer a query, best
    first, each with its score and the score's parts (`relevance` says how well it matches), the
    query words it matched by field (`matched`), tags, type, project and dates. Only memories that
    match the query come back, unless `related`. A content over 2,000 characters is clipped
    (`content_truncated`): mem_get_observation returns it whole. Without a session_id, this
    server's session is used (the answer's `note` says which)."""
    sid, note = _session(mem, session_id)
    res = mem.recall(query, session_id=sid, limit=limit, project=project, type=type, max_age_days=max_age_days,
                     related=related)
    head = res.model_dump(mode="json", exclude={"memories"})
    head["elapsed_ms"] = round(head["elapsed_ms"], 2)
    return _noted({**head, "session_id": sid, "memory_count": len(res),
                   "memories": [_scored(m, mem.user_id) for m in res]}, note)


def remember(
    mem: Memory,
    content: Annotated[str, Field(description="The memory: a finding, a decision, a definition, in full sentences.")],
    session_id: SessionId = None,
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
    (`action` "revised"). Without a session_id, this server's session is used."""
    sid, note = _session(mem, session_id)
    fact = mem.remember(content, session_id=sid, tags=tags, project=project, type=type, title=title,
                        topic_key=topic_key, core=core, share=share, source=SOURCE)
    return _noted({"success": True, "action": "revised" if fact.revision_count else "remembered",
                   **_fact(fact, mem.user_id)}, note)


def close_session(
    mem: Memory,
    session_id: Annotated[str, Field(
        description="The session_id from session_init (empty: this server's session).")] = "",
) -> dict[str, Any]:
    """Close a session when its work is done: its memories are summarised, one searchable
    summary per thing they touched, so "what did we do in that session" has an answer later.
    Not a cleanup step before session_init; 0 summary events is normal for a quiet session."""
    if isinstance(session_id, str) and not session_id.strip():
        sid = _SERVER_SESSION.get(mem)
        if sid is None:  # (the engine's "most recent session" could be a notebook's: never by omission)
            raise InvalidInput("this server has opened no session: give the session_id to close")
    else:
        sid = _known_session(mem, session_id)
    closed = mem.close_session(sid)
    if _SERVER_SESSION.get(mem) == sid:
        del _SERVER_SESSION[mem]  # the next call that names none opens a new one
    return _noted(closed.model_dump(mode="json"), "this session was already closed: only what it got since was "
                  "summarised, and its summary kept" if closed.already_closed else None)


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
    return mem.mem_save(_user(mem, user_id), content, type=type, title=title, topic_key=topic_key,
                        source=SOURCE).model_dump(mode="json")


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
    fid = mem.resolve_id(observation_id, user_id=user)
    found = mem.mem_get_observation(user, fid)
    if found is None:  # (resolved among what the user may read, then gone: forgotten meanwhile)
        raise InvalidInput(f"no observation with id {fid!r}")
    return found.model_dump(mode="json")


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
    sid = None if session_id is None or not str(session_id).strip() else _known_session(mem, session_id)
    signal_id = mem.feedback(fid, signal, session_id=sid, query=query)
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
    return {"success": True, "action": "pinned" if core else "unpinned", **_fact(fact, mem.user_id)}


# --- every memory, and forgetting --------------------------------------------------------------
def list_memories(
    mem: Memory,
    project: Annotated[str | None, Field(description="Only memories of this project.")] = None,
    type: Annotated[str | None, Field(description="Only memories of this type.",
                                      json_schema_extra=_enum(MEMORY_TYPES, optional=True))] = None,
    limit: Annotated[int, Field(description="How many memories in this page.",
                                json_schema_extra={"minimum": 1, "maximum": Memory.BROWSE_MAX})] = 20,
    offset: Annotated[int, Field(description="How many to skip: the previous page's next_offset.",
                                 json_schema_extra={"minimum": 0})] = 0,
) -> dict[str, Any]:
    """Every stored memory (yours, and those shared with you), newest first, a page at a time,
    without a query: to see what is there, or to find one to forget. `total` counts them all;
    `next_offset` is the offset of the next page (null on the last one)."""
    page = mem.browse(project=project, type=type, limit=limit, offset=offset)
    shown = page.offset + len(page.facts)
    return {"total": page.total, "offset": page.offset, "limit": page.limit,
            "next_offset": shown if shown < page.total else None,
            "memories": [_fact(f, mem.user_id) for f in page.facts]}


def forget(mem: Memory, fact_id: FactId) -> dict[str, Any]:
    """Delete one memory for good (its text and its place in every index): only when the user
    asks, or a memory is wrong and replaced. A memory someone shared with you is
    theirs to forget."""
    fact = mem.forget(mem.resolve_id(fact_id))  # (one shared with you is its author's to forget: said so)
    return {"success": True, "action": "forgotten", **_fact(fact, mem.user_id)}


def forget_all(
    mem: Memory,
    project: Annotated[str | None, Field(description="Only this project's memories (leave out: every memory "
                                                     "of yours).")] = None,
    confirm: Annotated[bool, Field(description="true: yes, delete them for good. Without it nothing is deleted "
                                               "and the tool error says how many would be.")] = False,
) -> dict[str, Any]:
    """Delete every memory of a project, or every memory of yours, for good, with the session
    summaries written about them: only when the user asked for exactly that. Memories others
    shared with you stay (they are theirs). It needs confirm: true; without it nothing is
    deleted, and the error says how many memories it would delete."""
    if project is not None and (not isinstance(project, str) or not project.strip()):
        raise InvalidInput("project must be a non-empty string, or left out for every memory of yours")
    if confirm is not True:
        n = mem.own_count(project=project)
        many = f"{n} memor{'y' if n == 1 else 'ies'}"
        if project is not None:
            what = f"the {many} of project {project!r}"
        else:
            what = "your 1 memory" if n == 1 else f"all {many} of yours"
        raise InvalidInput(f"forget_all would delete {what} for good; nothing was deleted. Only if the user asked "
                           "for that, call it again with confirm: true")
    report = mem.forget_all(project=project)
    return {"success": True, "action": "forgotten", "forgotten": report.count,
            "summaries_forgotten": report.summaries, "project": report.project}


#: Every tool, in the order an assistant meets them.
TOOLS = (session_init, recall, remember, close_session, mem_session_start, mem_save, mem_search,
         mem_session_summary, mem_session_end, mem_get_observation, mem_timeline, mem_stats, feedback, pin,
         list_memories, forget, forget_all)
#: Tools that change nothing (recall is not one: it records what a session was shown).
READ_ONLY = frozenset({"mem_search", "mem_get_observation", "mem_timeline", "mem_stats", "list_memories"})
#: Tools that delete what cannot be had back. (The others add, or change what can be changed
#: back: a pin, a session's end; a topic_key revises the memory the caller named by it, which
#: keeps its id and counts the revision.)
DESTRUCTIVE = frozenset({"forget", "forget_all"})
#: Tools that, called again with the same arguments, change nothing more.
IDEMPOTENT = frozenset({"pin", "forget", "forget_all"})
