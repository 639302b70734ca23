"""API A, the session lifecycle: `session_init` opens a session with its context, and
`close_session` writes one temporal summary event per entity the session touched.

A part of `Memory` (`memory.sessions`): it uses the engine through `recall`, the bulk write,
the working sets and the store's session statements.
"""

from __future__ import annotations


import numpy as np
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from ..ranking.calibration import RELEVANCE_FLOOR, AnswerConfidence
from ..results.display import one_line, plural
from ..engine.validate import redact
from ..errors import InvalidInput, SlmMagicError
from ..results.models import (CloseSessionResult, Fact, RecallResult, ScoredMemory, SearchScore, SessionInit,
                              SessionMemory, SessionSummaryCompact)
from ..core.clock import local
from ..core.scoring import recency, revision, search_score
from ..index.rows import fact_of
from ..core.session_ids import is_synthetic_session, new_session_id
from ..core.scoring import AGE_GATE_RELEVANCE
from ..core.temporal import WHOLE_SESSION, day_key, day_term
from .paths import query_from_path
from .summaries import entity_groups, generated_line, render_context

_SUMMARY_SNIPPETS = 3


_WHOLE_SNIPPETS = 6             # what a whole-session summary quotes of the session's memories


RECENT_SESSIONS = 5             # summaries of earlier sessions shown when one opens
STALE_PER_OPENING = 5           # sessions idle past the timeout that one opening closes


def _check_init(project_path, query, max_results, max_age_days, origin) -> None:
    if origin is not None and not isinstance(origin, str):
        raise InvalidInput(f"origin must be a string, not {type(origin).__name__}")
    for name, value in (("project_path", project_path), ("query", query)):
        if not isinstance(value, str):
            raise InvalidInput(f"{name} must be a string, not {type(value).__name__}")
    for name, value in (("max_results", max_results), ("max_age_days", max_age_days)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(f"{name} must be a non-negative integer; got {value!r}")


def _without_question(any_newest: bool, any_pinned: bool, max_age_days: int, path_words: str = "") -> str:
    """What a session opened without a question shows, in one plain line (`path_words`: the
    words of its path, asked first, that matched nothing)."""
    within = f" (updated in the last {plural(max_age_days, 'day')})" if max_age_days else ""
    why = (f"No memory matches this project's name ({path_words})" if path_words else "No question was given")
    if any_newest:
        return (f"{why}: these are your {'pinned and ' if any_pinned else ''}newest "
                f"memories{within}, not answers to a question. Give a query to search them all.")
    if max_age_days and not any_pinned:
        return (f"{why}, and no memory was updated in the last {plural(max_age_days, 'day')}: "
                "give a query to search them all.")
    return f"{why}: these are your pinned memories. Give a query to search them all."


class SessionService:
    """A part of `Memory` (held as `memory.sessions`): API A's lifecycle, `session_init` with
    its context and `close_session` with its summary events, as SuperLocalMemory names them."""

    def __init__(self, store, settings, live, working_sets, writer, retrieval, learning, calibration,
                 clock: Callable[[], datetime], user_id: str, session_timeout_hours: float):
        self.store = store
        self.settings = settings
        self.live = live
        self.working_sets = working_sets
        self.writer = writer
        self.retrieval = retrieval
        self.learning = learning
        self.calibration = calibration
        self.now = clock
        self.user_id = user_id
        self.session_timeout_hours = session_timeout_hours

    def session_init(self, project_path: str = "", query: str = "", max_results: int = 10,
                     max_age_days: int = 30, *, reuse: bool = False, origin: str | None = None) -> SessionInit:
        """Open a session: a new id, the memories that matter for its project, and its context.

        Memories last updated more than `max_age_days` ago are left out unless their relevance
        is at least 0.70 (`max_age_days=0` keeps everything); pinned core memories always come.
        With no query, one is made of the words of `project_path` (a folder, or a notebook's
        path) if it has any; with none there either, or none that any memory matches, the session
        shows what is pinned and the newest memories and says so (`opened_without_question`,
        `message`): it does not abstain.
        `origin` names who opens it (a notebook's path, one terminal IPython). With `reuse`, the
        open session of the same user and origin, active within `session_timeout_hours`, goes on
        instead of a new one (what `%slm_start` does: a restarted kernel continues its notebook's
        session, and another notebook has its own).
        """
        _check_init(project_path, query, max_results, max_age_days, origin)
        now = self.now()
        session_id = self.live_session(self.user_id, "slm", now, origin=origin, by_origin=True) if reuse else None
        is_new = session_id is None
        path_words = query_from_path(project_path, self._names())
        q = query.strip() or path_words
        if is_new:
            self.close_stale(now)
            session_id = self.open(self.user_id, "slm", now, project=path_words.split(" ")[0], origin=origin)
            self.working_sets.start(session_id)
        q, res, core, scored = self._context(q, bool(query.strip()), max_results, max_age_days, now,
                                             session_id if is_new else None)
        merged = [SessionMemory(fact_id=m.fact_id, content=m.content, score=m.score.value, is_core=m.fact.is_core)
                  for m in scored]
        core_items = [SessionMemory(fact_id=m.fact_id, content=m.content, score=m.score.value, is_core=True)
                      for m in core]
        nothing_stored = not scored and self.store.user_stats(self.user_id)["observations"] == 0
        conf, reason = self._answered(q, res, nothing_stored, max_age_days)
        message = (None if q or nothing_stored or not max_results else
                   _without_question(len(scored) > len(core), bool(core), max_age_days,
                                     "" if query.strip() else path_words))
        return SessionInit(
            success=True, session_id=session_id, viewer=self.user_id,
            context=render_context(merged, {m.fact_id: m.fact.updated_at for m in scored}, note=message),
            memories=merged, memory_count=len(merged), core_memory=core_items,
            degraded_mode=res.degraded_mode if res else self.retrieval.degraded_reason is not None,
            retrieval_mode=res.retrieval_mode if res else self._mode(),
            calibration_status=conf.calibration_status, calibration_id=conf.calibration_id,
            answer_confidence=conf.answer_confidence, abstained=conf.abstained, abstention_reason=reason,
            learning=self.learning.status(),
            scored_memories=scored, is_new=is_new, nothing_stored=nothing_stored,
            age_gate=(max_age_days, res.older_matches, res.older_shown) if res is not None and max_age_days else None,
            recent_sessions=self.recent_summaries(self.user_id, RECENT_SESSIONS, exclude=session_id),
            opened_without_question=not q, query=q, message=message,
        )

    def _context(self, q: str, asked: bool, max_results: int, max_age_days: int, now: datetime,
                 new_session: str | None) -> tuple[str, RecallResult | None, list[ScoredMemory], list[ScoredMemory]]:
        """(the question the session ends up with, its recall, the pinned memories, the memories
        shown): the best matches of `q`, then what is pinned; with no question, or a path's
        words (not `asked`) that match nothing, what is pinned and then what is newest."""
        res: RecallResult | None = None
        kept: list[ScoredMemory] = []
        if q and max_results:
            # The age gate runs inside the ranking, so the best max_results that pass it come back.
            # (a new session's recall records what it showed; a continued session saw its context
            # already: showing it again is not news, so that recall is not the session's)
            res = self.retrieval.recall(q, limit=max_results, max_age_days=max_age_days, kind="memory", strict=False,
                                        session_id=new_session)
            kept = list(res.memories)
            if not asked and not kept:
                q, res = "", None
        core = [ScoredMemory(fact=f, score=self._static_score(f, now)) for f in self.core_memories()]
        if q:
            shown = {m.fact_id for m in kept}
            return q, res, core, kept + [c for c in core if c.fact_id not in shown]
        return q, res, core, core + self._newest(max_results, max_age_days, now, exclude={c.fact_id for c in core})

    def _mode(self) -> str:
        """The retrieval mode a recall would run in now (said when none ran)."""
        return self.retrieval.mode

    def _names(self) -> set[str]:
        """The person's names, which a path holds (/home/ana/…) without being about anything."""
        from pathlib import Path

        from ..core.identity import default_user

        return {self.user_id, default_user(), Path.home().name}

    def _newest(self, n: int, max_age_days: int, now: datetime, exclude: set[str]) -> list[ScoredMemory]:
        """With no question: the user's newest memories (own and shared with them), up to `n`,
        none older than the age gate (with nothing asked, nothing is relevant enough to pass it)."""
        if n <= 0:
            return []
        oldest = now - timedelta(days=max_age_days) if max_age_days else None
        out = []
        rows, _ = self.store.browse_rows(self.user_id, None, None, min(n + len(exclude), 10_000), 0)
        for f in map(fact_of, rows):
            if oldest is not None and f.updated_at < oldest:
                break
            if f.fact_id not in exclude:
                out.append(ScoredMemory(fact=f, score=self._static_score(f, now)))
            if len(out) == n:
                break
        return out

    def _answered(self, q: str, res: RecallResult | None, nothing_stored: bool,
                  max_age_days: int) -> tuple[AnswerConfidence, str | None]:
        """Whether the session's recall answered its question, and if not why, in words. With
        no question nothing is abstained from (there was nothing to answer)."""
        if res is not None:
            conf = self.calibration.confidence(res)
            self.calibration.judge_recall(q, res)
        else:
            conf = AnswerConfidence(calibration_status="uncalibrated", calibration_id=None, answer_confidence=None,
                                    abstained=bool(q) or nothing_stored, abstention_reason=None)
        reason = conf.abstention_reason
        if nothing_stored:
            reason = "no memories yet: %%remember (or remember()) keeps the first one"
        elif not q:
            reason = None
        elif res is None:
            reason = "max_results is 0: no memory was looked up"
        elif conf.abstained and not res.memories and res.older_matches:
            reason = (f"{res.older_matches} matching memor{'y is' if res.older_matches == 1 else 'ies are'} older "
                      f"than {max_age_days} days and match{'es' if res.older_matches == 1 else ''} the question "
                      f"only weakly (the age gate: relevance below {AGE_GATE_RELEVANCE:.2f})")
        elif conf.abstained and conf.calibration_status == "uncalibrated" and res.memories:
            reason = f"no memory within the age gate reaches relevance {RELEVANCE_FLOOR}"
        return conf, reason

    def live_session(self, user: str, api: str, now: datetime, *, origin: str | None = None,
                     by_origin: bool = False, known: str | None = None,
                     on_stale: Callable[[str], None] | None = None) -> str | None:
        """The one way both APIs find a session to go on with: the user's open session of this
        API (and, `by_origin`, of this origin) active within the timeout, touched; else None.
        `known`: the id seen open last time (one statement to reuse it); `on_stale`: what to do
        with an open session past the timeout (API B closes it with a summary; API A leaves it)."""
        store = self.store.sessions
        not_before = now - timedelta(hours=self.session_timeout_hours)
        if known is not None and store.touch_if_live(known, now, not_before):
            return known
        row = store.active_session(user, api, origin=origin, by_origin=by_origin)
        if row is None:
            return None
        if store.touch_if_live(row[0], now, not_before):
            return row[0]
        if on_stale is not None:
            on_stale(row[0])
        return None

    def open(self, user: str, api: str, now: datetime, *, project: str = "", origin: str | None = None,
             session_id: str | None = None) -> str:
        """Open a new session of this API for the user (a fresh id unless given)."""
        sid = session_id or new_session_id(now)
        self.store.sessions.open_session(sid, user, project, api, now, origin=origin)
        return sid

    def write_summaries(self, records: list[dict[str, Any]]) -> list[str]:
        """The one writer of session summaries: memories of type "summary" (so search finds
        them), kept apart from what was remembered. Returns their ids."""
        return self.writer.write_many(records, kind="summary_event", type_override="summary")

    def set_summary(self, session_id: str, summary: str) -> None:
        """Give a live session the summary later sessions show of it (it stays open), its
        `<private>` spans redacted as in every memory."""
        self.store.sessions.set_session_summary(session_id, redact(summary))

    def recent_summaries(self, user: str, limit: int, *, exclude: str | None = None) -> list[SessionSummaryCompact]:
        """The user's latest session summaries, newest first (the timeline a new session shows)."""
        return [SessionSummaryCompact(session_id=s, date=d, summary=t, is_auto_generated=a)
                for s, d, t, a in self.store.sessions.recent_summaries(user, limit, exclude=exclude)]

    def end(self, session_id: str, now: datetime, *, summary: str | None, auto: bool) -> None:
        """Mark a session ended with the summary later sessions show of it (`<private>` redacted)."""
        self.store.sessions.end_session(session_id, now, summary=None if summary is None else redact(summary), auto=auto)

    def _static_score(self, fact: Fact, now: datetime) -> SearchScore:
        """SearchScore of a memory the query did not match: its recency and revision only."""
        cfg = self.settings.config
        rec = float(recency(np.array([fact.updated_at.timestamp()]), now.timestamp(), cfg.recency_half_life_days)[0])
        rev = float(revision(np.array([fact.revision_count]), cfg.revision_cap)[0])
        value = float(search_score(0.0, rec, rev, cfg))
        return SearchScore(value=value, relevance=0.0, bm25=0.0, tfidf=0.0, recency=rec, revision=rev)

    def core_memories(self, user_id: str | None = None) -> list[Fact]:
        """The pinned memories of a user, newest first (from the in-process arrays if they work)."""
        user = self.user_id if user_id is None else user_id
        if self.live.index is not None:
            try:
                self.live.refresh()
                t, code = self.live.index.docs, self.live.index.lookup_code("user", user)
                n = t.size
                docs = np.flatnonzero(t.core[:n] & t.alive[:n] & (t.user[:n] == code) & (t.kind[:n] == 0))
                facts = self.live.rows.get(docs.tolist())
                return sorted(facts.values(), key=lambda f: (f.updated_at, f.fact_id), reverse=True)
            except Exception:  # noqa: BLE001 - the file answers instead
                pass
        return [fact_of(r) for r in self.store.core_rows(user)]

    def close_session(self, session_id: str = "", *, summary: str | None = None) -> CloseSessionResult:
        """Summarise a session: one searchable summary event per entity its memories touched.

        No id: the most recent session. Closing twice writes nothing new. `summary` (else one
        generated from the entities) is what later sessions show of this one in their timeline.
        """
        if not isinstance(session_id, str):
            raise InvalidInput(f"session_id must be a string, not {type(session_id).__name__}")
        if summary is not None and (not isinstance(summary, str) or not summary.strip()):
            raise InvalidInput("summary must be a non-empty string")
        sid = session_id.strip() or self.store.sessions.latest_session(self.user_id)
        if not sid:
            return CloseSessionResult(success=False, session_id="", summary_events_created=0)
        return self._close(sid, summary, self.now())

    def close_stale(self, now: datetime) -> None:
        """Close the user's notebook sessions idle past the timeout (a kernel killed, a notebook
        never closed), each summarised as `close_session` does and ended at its last activity:
        otherwise they stay open for good, and what they held is in no day's summary. A few at
        each opening (a file of many never closed is not one long wait); each ended first, so
        that two kernels opening at once summarise it once, and one that cannot be summarised
        is said and left ended."""
        sessions = self.store.sessions
        not_before = now - timedelta(hours=self.session_timeout_hours)
        for sid, last in sessions.stale_sessions(self.user_id, "slm", not_before, STALE_PER_OPENING):
            if not sessions.claim_end(sid, last):
                continue
            try:
                self._close(sid, None, last)
            except SlmMagicError as exc:
                self.store.notice(f"session {sid}, idle since {local(last):%Y-%m-%d %H:%M}, was closed without "
                                  f"its summaries ({exc})")

    def _close(self, sid: str, summary: str | None, ended: datetime) -> CloseSessionResult:
        facts = self.session_facts(sid)
        known = self.store.sessions.session_started(sid)
        if known is None and not facts and not is_synthetic_session(sid):  # a typo must not look closed
            raise InvalidInput(f"no session with id {sid!r}")
        started = known or (min(f.created_at for f in facts) if facts else self.now())
        summary = summary.strip() if summary else None
        was_closed = self.store.sessions.session_closed(sid)
        written, topics = self._summarise(sid, started, facts, summary)
        if not is_synthetic_session(sid):
            self.learning.ignored_at_close(sid, self.user_id)
        if summary is None and facts:
            summary, auto = generated_line(facts, topics), True  # (fills none the user wrote)
        else:
            auto = False
        self.end(sid, ended, summary=summary, auto=auto)
        return CloseSessionResult(success=True, session_id=sid, summary_events_created=written,
                                  already_closed=was_closed)

    def _summarise(self, sid: str, started: datetime, facts: list[Fact], said: str | None = None) -> tuple[int, list[str]]:
        """Write a session's summary events: one per entity its memories touch and one of the
        whole session (opening with the user's own summary, `said`), each only if the session
        has none for it yet (a close writes each once; one forgotten on purpose stays
        forgotten). Returns how many were written and the entities' labels, in order of appearance.
        Their day is the one on the user's own calendar (`started` is UTC)."""
        started = local(started)
        done = set(self.store.sessions.summarised_entities(sid))
        groups, labels = entity_groups(facts)
        records: list[dict[str, Any]] = []
        entities: list[str] = []
        for key, members in groups.items():
            if key in done:
                continue
            snippets = "; ".join(one_line(f.content, 120) for f in members[:_SUMMARY_SNIPPETS])
            more = f" (+{len(members) - _SUMMARY_SNIPPETS} more)" if len(members) > _SUMMARY_SNIPPETS else ""
            content = (f"Session {sid} on {started:%A %d %B %Y} ({started:%Y-%m-%d}, day {day_term(started)}): "
                       f"{len(members)} memor{'y' if len(members) == 1 else 'ies'} about {labels[key]}: "
                       f"{snippets}{more}")
            records.append({"content": content, "session_id": sid, "project": members[0].project,
                            "tags": [t for t in members[0].tags if t.lower() == key.lstrip("#")] or None,
                            "title": f"Session {started:%Y-%m-%d}: {one_line(labels[key], 80)}", "created_at": self.now(),
                            "user_id": self.user_id})
            entities.append(key)
        if (facts or said) and WHOLE_SESSION not in done:
            records.append(self._whole_session(sid, started, facts, [labels[k] for k in groups], said))
            entities.append(WHOLE_SESSION)
        if records:
            ids = self.write_summaries(records)
            now = self.now()
            self.store.sessions.add_summary_events([(sid, e, f, now, self.user_id) for e, f in zip(entities, ids)])
        return len(records), [labels[k] for k in groups]

    # --- forgetting: no summary keeps what was forgotten -----------------------------------
    def unsummarise(self, session_ids: Iterable[str | None], *,
                    keep_project: str | None = None) -> tuple[dict[str, tuple[bool, bool]], int]:
        """Before memories of these sessions are forgotten: delete every summary the engine
        wrote of them from their memories (`SessionStore.written_summaries`: a sentence quoted,
        an entity named would outlive them), except those filed under `keep_project`, which
        the caller's forget deletes with the memories. Deleted first, the memories after: cut
        short in between, a summary is missing and nothing forgotten is left in one.

        Returns the plan for `resummarise`, per session (whether a close had summarised it,
        whether a generated line was kept as a summary), and how many summaries went here."""
        sids = sorted({s for s in session_ids if s})
        store = self.store
        rows = store.sessions.written_summaries(self.user_id, sids)
        gone = sum(bool(store.delete(fid)) for _, fid, project, _ in rows if project != keep_project)
        store.sessions.unlink_summaries([fid for _, fid, _, linked in rows if linked])
        plan = {s: (any(r[0] == s and r[3] for r in rows), any(r[0] == s and not r[3] for r in rows)) for s in sids}
        return plan, gone

    def resummarise(self, plan: dict[str, tuple[bool, bool]]) -> int:
        """After a forget: each session of `plan` summarised again from the memories it has
        left, as far as it was before (a close's summary events, a generated line kept as a
        summary), and a generated summary line made again (none when nothing is left); a
        line the user wrote stays. Returns how many summaries were written."""
        written = 0
        sessions = self.store.sessions
        for sid, (closed, kept_line) in plan.items():
            facts = self.session_facts(sid)
            state = sessions.summary_state(sid)  # (api, is_auto_generated, started_at, summary), None if never opened
            topics: list[str] | None = None
            said = state[3] if state is not None and not state[1] else None
            if closed and (facts or said):  # (the user's own words for it stay searchable)
                started = state[2] if state is not None else min(f.created_at for f in facts)
                n, topics = self._summarise(sid, started, facts, said)
                written += n
            if state is None or not state[1]:
                continue
            if state[0] == "mem":  # API B's generated line, kept as a summary too when a stale session ended
                line = self.observations_line(self.user_id, sid) if facts else None
                if line is not None and kept_line:
                    self.write_observations_summary(self.user_id, sid, line, self.now())
                    written += 1
            elif facts:
                if topics is None:
                    groups, labels = entity_groups(facts)
                    topics = [labels[k] for k in groups]
                line = generated_line(facts, topics)
            else:
                line = None
            sessions.rewrite_auto_summary(sid, line)
        return written

    def observations_line(self, user: str, sid: str) -> str:
        """The line an API B session ended without a summary gets (forgetting rewrites it)."""
        facts = self.session_facts(sid, user_id=user)
        if not facts:
            return "Session with no observations."
        heads = "; ".join((f.title or one_line(f.content, 60)) for f in facts[:5])
        more = f" (+{len(facts) - 5} more)" if len(facts) > 5 else ""
        return f"{len(facts)} observation{'s' if len(facts) != 1 else ''}: {heads}{more}"

    def write_observations_summary(self, user: str, sid: str, summary: str, now: datetime) -> str:
        """An API B session's summary is also an observation of type "summary", so search finds it."""
        return self.write_summaries([{"content": summary, "session_id": sid, "user_id": user,
                                      "title": f"Session summary {local(now):%Y-%m-%d}", "created_at": now}])[0]

    def _whole_session(self, sid: str, started: datetime, facts: list[Fact], touched: list[str],
                       said: str | None = None) -> dict[str, Any]:
        """The one summary of a whole session, beside the per-entity ones: the user's own words
        for it (`said`, `%slm_close --summary`), its day, every entity it touched and what was
        kept; what "what did I do today" brings first (its topic key starts with the day's `day_key`)."""
        quoted = "; ".join(one_line(f.content, 120) for f in facts[:_WHOLE_SNIPPETS])
        more = f" (+{len(facts) - _WHOLE_SNIPPETS} more)" if len(facts) > _WHOLE_SNIPPETS else ""
        kept = (f"{plural(len(facts), 'memory', 'memories')}, touching {', '.join(touched) or 'nothing named'}: "
                f"{quoted}{more} " if facts else "")
        content = (f"{said + ': ' if said else ''}{kept}(session {sid}, "
                   f"{started:%A %d %B %Y}, {started:%Y-%m-%d}, day {day_term(started)})")
        project = Counter(f.project for f in facts).most_common(1)[0][0] if facts else ""
        return {"content": content, "session_id": sid, "project": project,
                "title": f"The session of {started:%A %d %B %Y}",
                "topic_key": day_key(started) + sid, "created_at": self.now(),
                "user_id": self.user_id}

    def session_facts(self, session_id: str, *, user_id: str | None = None) -> list[Fact]:
        """The memories written in a session (not its summaries), oldest first."""
        user = self.user_id if user_id is None else user_id
        return [fact_of(r) for r in self.store.session_rows(session_id, user)]
