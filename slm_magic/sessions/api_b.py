"""API B, observations per user (the iLAB "mem" library): `mem_session_start`, `mem_save`,
`mem_search`, `mem_session_summary`, `mem_session_end`, `mem_get_observation`, `mem_timeline`,
`mem_stats`. A part of `Memory` (`memory.api_b`), over API A's sessions, the writer, recall and
the store's per-user statements.

Two scores, never mixed: `mem_search` ranks by SearchScore (relevance to a query), while
`mem_session_start` ranks by ContextScore = 0.50·recency + 0.30·revision + 0.20·type priority
(what matters when a session opens, with no query at all).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np

from ..results.display import one_line
from ..errors import InvalidInput
from ..index.rows import fact_of
from ..core.scoring import TYPE_PRIORITY, context_score
from ..results.models import (MEMORY_TYPES, Fact, Observation, ObservationCompact, SaveResult,
                              Session, SessionStartResponse)
from ..core.ids import content_hash
from ..core.clock import epoch_seconds
from ..engine.validate import validate


SESSION_SUMMARIES, SESSION_MEMORIES, TIMELINE_SPAN = 5, 10, 5


def _user(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidInput("user_id must be a non-empty string")
    return user_id


def _observation(f: Fact) -> Observation:
    return Observation(id=f.fact_id, user_id=f.user_id, session_id=f.session_id, type=f.type, title=f.title,
                       content=f.content, topic_key=f.topic_key, revision_count=f.revision_count,
                       created_at=f.created_at, updated_at=f.updated_at)


class ApiB:
    """A part of `Memory` (held as `memory.api_b`): the per-user observations API of the "mem"
    library, over API A's sessions, the writer and recall, with its own session policy (one
    live session per user, reused within the timeout)."""

    def __init__(self, sessions, store, settings, live, writer, retrieval, clock: Callable[[], datetime]):
        self.sessions = sessions
        self.store = store
        self.settings = settings
        self.live = live
        self.writer = writer
        self.retrieval = retrieval
        self.now = clock
        self._live_sessions: dict[str, str] = {}  # user -> mem session id last seen open

    # --- sessions -----------------------------------------------------------------------------
    def _active_session(self, user: str, now: datetime, *, open_new: bool) -> tuple[str | None, bool]:
        """The user's live session (touched), or a new one; a stale one is closed first."""
        sid = self.sessions.live_session(
            user, "mem", now, known=self._live_sessions.get(user),
            on_stale=lambda stale: self._end_mem_session(user, stale, self.sessions.observations_line(user, stale), now,
                                                         auto=True))
        if sid is not None:
            self._live_sessions[user] = sid
            return sid, False
        if not open_new:
            return None, False
        sid = self.sessions.open(user, "mem", now, session_id=uuid.uuid4().hex)
        self._live_sessions[user] = sid
        return sid, True

    def _end_mem_session(self, user: str, sid: str, summary: str, now: datetime, *, auto: bool) -> None:
        self.sessions.write_observations_summary(user, sid, summary, now)
        self.sessions.end(sid, now, summary=summary, auto=auto)

    def mem_session_start(self, user_id: str) -> SessionStartResponse:
        """Start or reuse the user's session; recent summaries and the observations that matter."""
        user = _user(user_id)
        now = self.now()
        sid, is_new = self._active_session(user, now, open_new=True)
        summaries = self.sessions.recent_summaries(user, SESSION_SUMMARIES, exclude=sid)
        return SessionStartResponse(session_id=sid, is_new=is_new, sessions_context=summaries,
                                    memories=self._context_ranked(user, now, SESSION_MEMORIES))

    def _context_ranked(self, user: str, now: datetime, limit: int) -> list[ObservationCompact]:
        """The user's observations by ContextScore, from the in-process arrays (SQL if degraded)."""
        cfg = self.settings.config
        if self.live.index is not None:
            self.live.refresh()
            index, t = self.live.index, self.live.index.docs
            code = index.lookup_code("user", user)
            if code < 0:
                return []
            n = t.size
            docs = np.flatnonzero(t.alive[:n] & (t.user[:n] == code) & (t.kind[:n] == 0))
            if not docs.size:
                return []
            rec = np.minimum(1.0, index.recency_base[docs] * index.recency_scale(epoch_seconds(now),
                                                                                  cfg.recency_half_life_days))
            rev = np.minimum(t.revision[docs], cfg.revision_cap) / cfg.revision_cap
            prio = np.array([TYPE_PRIORITY.get(x, 0.5) for x in MEMORY_TYPES] + [0.5])[t.type[docs]]
            score = context_score(rec, rev, prio)
            k = min(limit, docs.size)
            top = np.argpartition(-score, k - 1)[:k] if k < docs.size else np.arange(docs.size)
            top = top[np.lexsort((docs[top], -score[top]))]
            facts = self.live.rows.get(docs[top].tolist())
            return [ObservationCompact(id=f.fact_id, type=f.type, title=f.title, topic_key=f.topic_key,
                                       score=float(score[i]), snippet=one_line(f.content, 160), updated_at=f.updated_at)
                    for i, f in zip(top.tolist(), (facts[d] for d in docs[top].tolist()))]
        out = []
        for f in map(fact_of, self.store.user_rows(user)):
            age = max(0.0, (now - f.updated_at).total_seconds() / 86_400)
            s = context_score(2.0 ** (-age / cfg.recency_half_life_days),
                              min(f.revision_count, cfg.revision_cap) / cfg.revision_cap, TYPE_PRIORITY.get(f.type, 0.5))
            out.append(ObservationCompact(id=f.fact_id, type=f.type, title=f.title, topic_key=f.topic_key, score=s,
                                          snippet=one_line(f.content, 160), updated_at=f.updated_at))
        out.sort(key=lambda o: (-o.score, o.id))
        return out[:limit]

    # --- writes -------------------------------------------------------------------------------
    def mem_save(self, user_id: str, content: str, *, type: str, title: str,
                 topic_key: str | None = None, source: str | None = None) -> SaveResult:
        """Save an observation: a new one, a revision of the one with this topic_key, or nothing
        new when the same content (case and spacing aside) is already stored. `source`: who
        wrote it (the assistant's tools say "mcp")."""
        user = _user(user_id)
        if type == "summary":
            raise InvalidInput("type 'summary' is reserved for session summaries (use mem_session_summary)")
        now = self.now()
        cols = validate([{"content": content, "type": type, "title": title, "topic_key": topic_key,
                          "user_id": user, "source": source}], now=now, default_user=user)
        content, title, topic_key = cols["content"][0], cols["title"][0], cols["topic_key"][0]
        sid, _ = self._active_session(user, now, open_new=True)
        if topic_key is not None:
            existing = self.store.find_live(user, topic_key=topic_key)
            if existing is not None:
                self.writer.revise(existing, content=content, title=title, type=type, user_id=user)
                return SaveResult(id=existing, outcome="updated", session_id=sid, topic_key=topic_key)
        same = self.store.find_live(user, content_hash=content_hash(content))
        if same is not None:
            return SaveResult(id=same, outcome="deduped", session_id=sid, topic_key=topic_key)
        fact = self.writer.remember(dict(content=content, session_id=sid, type=type, title=title, topic_key=topic_key,
                                         user_id=user, source=source))
        return SaveResult(id=fact.fact_id, outcome="created", session_id=sid, topic_key=topic_key)

    def mem_session_summary(self, user_id: str, summary: str) -> SaveResult:
        """Attach a summary to the user's live session (stored, and searchable)."""
        user = _user(user_id)
        if not isinstance(summary, str) or not summary.strip():
            raise InvalidInput("summary is empty")
        now = self.now()
        sid, _ = self._active_session(user, now, open_new=False)
        if sid is None:
            raise InvalidInput(f"user {user!r} has no active session (call mem_session_start first)")
        fid = self.sessions.write_observations_summary(user, sid, summary, now)
        self.sessions.set_summary(sid, summary)
        return SaveResult(id=fid, outcome="created", session_id=sid, topic_key=None)

    def mem_session_end(self, user_id: str, *, summary: str) -> Session:
        """End the user's live session with a summary."""
        user = _user(user_id)
        if not isinstance(summary, str) or not summary.strip():
            raise InvalidInput("summary is empty")
        now = self.now()
        row = self.store.sessions.active_session(user, "mem")
        if row is None:
            raise InvalidInput(f"user {user!r} has no active session to end")
        self._end_mem_session(user, row[0], summary, now, auto=False)
        return Session(**self.store.sessions.session(row[0]))

    # --- reads --------------------------------------------------------------------------------
    def mem_search(self, user_id: str, query: str, *, limit: int = 10, types: list[str] | None = None,
                   types_exclude: list[str] | None = None) -> list[ObservationCompact]:
        """The user's observations that answer `query`, by SearchScore."""
        user = _user(user_id)
        if types is not None and types_exclude is not None:
            raise InvalidInput("give types or types_exclude, not both")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"limit must be an integer >= 1; got {limit!r}")
        allowed = set(MEMORY_TYPES) | {"summary"}
        for name, given in (("types", types), ("types_exclude", types_exclude)):
            if given is not None:
                if not isinstance(given, (list, tuple, set, frozenset)) or not all(isinstance(x, str) for x in given):
                    raise InvalidInput(f"{name} must be a list of type names")
                unknown = set(given) - allowed
                if unknown:
                    raise InvalidInput(f"unknown type(s) in {name}: {', '.join(sorted(unknown))}")
        keep = set(types) if types is not None else allowed - set(types_exclude or ())
        res = self.retrieval.recall(query, user_id=user, kind=None, limit=limit if keep == allowed else max(limit * 10, 100))
        out = [ObservationCompact(id=m.fact_id, type=m.fact.type, title=m.fact.title, topic_key=m.fact.topic_key,
                                  score=m.score.value, snippet=one_line(m.content, 160), updated_at=m.fact.updated_at)
               for m in res.memories if m.fact.type in keep]
        return out[:limit]

    def mem_get_observation(self, user_id: str, observation_id: str) -> Observation | None:
        """One observation the user may read (theirs, or one its author shared), whole."""
        user = _user(user_id)
        row = self.store.readable_fact(observation_id, user) if isinstance(observation_id, str) else None
        return _observation(fact_of(row)) if row is not None else None

    def mem_timeline(self, user_id: str, observation_id: str) -> list[Observation]:
        """The observation among its session's neighbours, in time order."""
        user = _user(user_id)
        fact = self.writer.fact(observation_id, user_id=user)
        if fact is None:
            return []
        if fact.session_id is None:
            return [_observation(fact)]
        facts = self.sessions.session_facts(fact.session_id, user_id=user)
        facts.sort(key=lambda f: (f.created_at, f.fact_id))
        i = next(i for i, f in enumerate(facts) if f.fact_id == fact.fact_id)
        return [_observation(f) for f in facts[max(0, i - TIMELINE_SPAN): i + TIMELINE_SPAN + 1]]

    def mem_stats(self, user_id: str) -> dict[str, Any]:
        user = _user(user_id)
        return self.store.user_stats(user)

