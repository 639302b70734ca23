"""Recall: a question analysed once (its terms, the days it names, its vector), ranked by the
kernel's index through the stages of `ranking/` (words, meaning, the learned re-ranker, the
temporal channel, related memories), or from the file when the index cannot run; what it showed
joins its session's working set. A part of `Memory`, held as `memory.retrieval`."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple
from datetime import datetime

import numpy as np

from ..core import text
from ..core.clock import epoch_seconds
from ..core.fields import KINDS, TYPE_CODE
from ..core.scoring import retrieval_mode
from ..core.session_ids import is_synthetic_session
from ..core.temporal import asks_what_was_done, day_key, day_spans, recent_days, temporal_terms, without_days
from ..errors import InvalidInput, StoreError, type_name
from ..index.live import LiveIndex
from ..ranking.fusion import days_first, rank_days, rank_index, rank_related
from ..ranking.meaning import search_meaning, with_meaning
from ..ranking.ranked import Ranked, WorkingSet
from ..ranking.reranker import CANDIDATES
from ..results.models import RecallResult, ScoredMemory
from ..storage.store import STORAGE_FAILURES
from .answers import scored_memories
from .recall_sql import recall_sql
from .settings import Settings
from .working_sets import WorkingSets

#: The most memories not yet summarised that a question about days brings first (the newest).
DAY_MEMORIES = 100
_ASKS_ABOUT_SESSIONS = re.compile(r"\bsessions?\b|\bwhat did (?:i|we) do\b", re.IGNORECASE)


class Analysis(NamedTuple):
    """What a query's words say, before the model reads it (`Recall.analyse`)."""

    terms: list[int]
    qtf: list[int]
    qlen: int
    kind: str | None                # the kind of memory to keep ("auto" resolved)
    days: list[str]                 # the day terms of a question about a time
    whole_days: bool                # whether it asks only what was done on them
    asked: str                      # its words without the days (what a match may show)
    held: set[int]                  # which of the terms that decide how it is asked some memory holds


@dataclass
class Question:
    """A recall's query, analysed once for whichever path ranks it."""

    text: str
    terms: list[int]
    qtf: list[int]
    qlen: int
    kind: str | None
    type: str | None
    days: list[str]                 # the day terms it names (the temporal channel)
    whole_days: bool                # whether it asks only what was done on them (every memory of theirs answers)
    words: dict[int, str]           # term hash -> the word as asked (what a match shows)
    vector: np.ndarray | None       # its meaning, when the channel runs
    admit: bool                     # whether a memory may come by meaning alone
    now: float
    updated_after: float | None     # the age gate
    user: str
    project: str | None
    limit: int
    strict: bool


def _older_shown(memories: list[ScoredMemory], updated_after: float | None) -> int:
    """How many word matches shown are older than the age gate (they passed it by relevance)."""
    if updated_after is None:
        return 0
    return sum(1 for m in memories if m.related_to is None and m.score.bm25 > 0
               and epoch_seconds(m.fact.updated_at) < updated_after)


class Recall:
    def __init__(self, store, settings: Settings, live: LiveIndex, working_sets: WorkingSets, learning,
                 clock: Callable[[], datetime], user_id: str):
        self.store = store
        self.user_id = user_id
        self.settings = settings
        self.live = live
        self.working_sets = working_sets
        self.learning = learning
        self.clock = clock

    @property
    def mode(self) -> str:
        """The channels a recall would run now, by name (RecallResult.retrieval_mode)."""
        return retrieval_mode(sql=self.live.index is None, tfidf=self.settings.config.tfidf_on,
                              meaning=self.settings.model is not None)

    @property
    def degraded_reason(self) -> str | None:
        """Why a recall now would skip a channel it should run (None: every one runs)."""
        return self.live.error if self.live.index is None else self.settings.model_error or self.live.fill.reason

    def recall(self, query: str, *, session_id: str | None = None, limit: int = 10, project: str | None = None,
               user_id: str | None = None, max_age_days: int | None = None, kind: str | None = "auto",
               type: str | None = None, related: bool = False, strict: bool = True) -> RecallResult:
        """`Memory.recall`: its arguments checked, then ranked."""
        started = time.perf_counter()
        self.check(query, session_id=session_id, limit=limit, project=project, max_age_days=max_age_days, kind=kind,
                   type=type)
        user = self.user_id if user_id is None else str(user_id)
        now_dt = self.clock()
        q = self.question(query, now_dt, user=user, project=project, limit=limit, kind=kind, type=type,
                          max_age_days=max_age_days, strict=strict)
        # (a question about a time neither joins the working set nor counts as ignoring what it showed)
        tracked = bool(session_id) and not is_synthetic_session(session_id) and not q.days \
            and not self.store.sessions.session_closed(session_id)
        # (the index's own failure, if any, is said below; vectors still following a bulk write, here)
        reason = self.settings.model_error or self.live.fill.reason
        ranked: Ranked | None = None
        if self.live.index is not None:
            try:
                with self.store.lock:  # (the fill puts vectors in from its thread)
                    ranked, memories = self.in_process(q, session_id if tracked else None, related)
            except STORAGE_FAILURES as exc:  # degrade to SQL rather than fail the user
                self.live.degrade(f"in-process index failed ({type_name(exc)}: {exc})")
                ranked = None
        if ranked is None:
            reason = self.live.error or "the in-process index is not available"
            ranked, memories = recall_sql(
                self.store, self.settings.config, self.settings.model, q.terms, q.qtf, q.words, now=q.now, user=user,
                project=project, limit=limit, updated_after=q.updated_after, kind=q.kind, type=type,
                day_docs=sum(self.day_docs(q), []) if q.days else None, every_day_memory=q.whole_days,
                question=q.vector, strict=strict, admit=q.admit)
        self.live.start_checks()  # (a new kernel's first recall is answered before they read the saved index)
        if tracked and memories:
            doc_of = dict(zip((m.fact_id for m in memories), ranked.doc_ids.tolist()))
            self.working_sets.note_shown(session_id, query, [(m.fact_id, doc_of[m.fact_id]) for m in memories],
                                         now_dt, project)
        return RecallResult(query=query, project=project, memories=memories, retrieval_mode=self.mode,
                            degraded_mode=reason is not None, degraded_reason=reason,
                            elapsed_ms=(time.perf_counter() - started) * 1000, age_gate_days=max_age_days or None,
                            older_matches=ranked.older_matches if max_age_days else 0,
                            older_shown=_older_shown(memories, q.updated_after), viewer=user)

    @staticmethod
    def check(query, *, session_id, limit, project, max_age_days, kind, type) -> None:
        """A recall's arguments, each a clear InvalidInput when wrong."""
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a string, not {type_name(query)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInput(f"limit must be a non-negative integer; got {limit!r}")
        if session_id is not None and not isinstance(session_id, str):
            raise InvalidInput(f"session_id must be a string, not {type_name(session_id)}")
        if project is not None and not isinstance(project, str):
            raise InvalidInput(f"project must be a string, not {type_name(project)}")
        if max_age_days is not None and (isinstance(max_age_days, bool) or not isinstance(max_age_days, int)
                                         or max_age_days < 0):
            raise InvalidInput(f"max_age_days must be a non-negative integer; got {max_age_days!r}")
        if type is not None and (not isinstance(type, str) or type not in TYPE_CODE):
            raise InvalidInput(f"type must be one of {', '.join(TYPE_CODE)}; got {type!r}")
        if kind is not None and kind != "auto" and kind not in KINDS:
            raise InvalidInput(f"kind must be one of auto, {', '.join(KINDS)}; got {kind!r}")

    def question(self, query: str, now_dt: datetime, *, user: str, project: str | None, limit: int,
                 kind: str | None, type: str | None, max_age_days: int | None, strict: bool) -> Question:
        # (asked for summaries by type, a question is asked of them whatever its words)
        a = self.analyse(query, now_dt, None if kind == "auto" and type == "summary" else kind)
        terms, days = a.terms, a.days if limit else []
        words = text.term_words(a.asked, terms)  # (a date the temporal channel took is no word a match shows)
        model = self.settings.model
        # (the question's vector, for whichever path ranks: the index's, else the file's; a
        # question about a time is answered from its days, not by meaning)
        vector = model.encode([query])[0] if model is not None and limit > 0 and not days else None
        # (by meaning alone only for a question that means something to the model and does not
        # ask for memories by the identifiers they hold)
        admit = vector is not None and model.knows(words.values()) \
            and not text.names_identifiers(query, a.held)
        return Question(query, terms, a.qtf, a.qlen, a.kind, type, days, bool(days) and a.whole_days, words, vector,
                        admit, epoch_seconds(now_dt),
                        epoch_seconds(now_dt) - max_age_days * 86_400 if max_age_days else None, user, project, limit,
                        strict)

    def in_process(self, q: Question, session_id: str | None, related: bool) -> tuple[Ranked, list[ScoredMemory]]:
        """The kernel's index ranks: words, then meaning, the learned re-ranker and the days the
        question names; with `related`, each match's session neighbours after the matches."""
        self.live.refresh()
        if self.live.index is None:  # (the saved index turned out damaged, and no new one could be built)
            raise StoreError(self.live.error or "the in-process index is not available")
        index, cfg, limit = self.live.index, self.settings.config, q.limit
        ranked = Ranked.empty()
        user_code = index.lookup_code("user", q.user)
        project_code = None if q.project is None else index.lookup_code("project", q.project)
        filters = dict(user=user_code, project=project_code, updated_after=q.updated_after,
                       kind=None if q.kind is None else KINDS[q.kind],
                       type_code=None if q.type is None else TYPE_CODE[q.type])
        ws = WorkingSet(self.working_sets.of(session_id), cfg) if session_id else None
        learner = self.learning.learner(q.user) if limit > 0 else None
        wanted = max(limit, CANDIDATES) if learner else limit
        cs = search = None
        known_project = project_code is None or project_code >= 0  # (a project no memory has: nothing to rank)
        if q.vector is not None and known_project:  # (its cells read meanwhile)
            search = search_meaning(index, q.vector, cfg, admit=q.admit)
        if q.days:  # a question about a time: what was done then, and nothing from other days
            cs = index.channel_scores(q.terms, q.qtf, q.qlen, text.query_grams(q.text)) if q.terms else None
            summaries, memories = self.day_docs(q) if known_project else ([], [])
            if memories and not q.whole_days:  # (of a question that names a topic too, those that match it)
                memories = [] if cs is None else [d for d, raw in zip(memories, cs.bm25_of(np.array(memories))) if raw > 0]
            docs = summaries + memories
            ranked = days_first(rank_days(index, cs, cfg, docs, now=q.now), Ranked.empty(), cfg, limit)
        elif q.terms and known_project:
            cs = index.channel_scores(q.terms, q.qtf, q.qlen, text.query_grams(q.text))
            cs.words = q.words
            ranked = rank_index(index, cs, cfg, now=q.now, working_set=ws, **filters, meaning=q.vector is not None,
                                limit=max(wanted, cfg.meaning_pool) if q.vector is not None else wanted)
        if search is not None:
            ranked = with_meaning(index, cs, ranked, search, cfg, now=q.now, limit=wanted, working_set=ws, **filters,
                                  strict=q.strict)
        if cs is not None and learner is not None and not q.days:  # phases 2 and 3: the learned part re-orders
            ranked = learner.rerank(ranked, cs, index, limit)
        ranked = ranked.take(np.arange(min(limit, ranked.doc_ids.size)))
        if related:
            ranked = ranked.then_related(*rank_related(
                index, ranked.doc_ids, cfg, now=q.now, user=user_code, project=project_code,
                limit=limit, updated_after=q.updated_after))
        return ranked, scored_memories(ranked, self.live.rows.get(ranked.doc_ids.tolist()), q.words)

    def analyse(self, query: str, now_dt: datetime, kind: str | None) -> Analysis:
        """A query's terms and what decides how it is ranked (`Analysis`).
        The days a question about a time names ("what did I do yesterday", "anything last
        week?", "my sessions in October") are the temporal channel's: their summaries, and what
        no summary stands for yet, come first; a question about something else that mentions a
        time ("why does the tally miss today's purchases") ranks by its words. "auto" keeps
        summaries only for questions about days or sessions, whose dates spelled with numbers
        are the channel's alone."""
        expanded = query.replace("\x00", "")
        about_sessions = _ASKS_ABOUT_SESSIONS.search(query) is not None
        days = temporal_terms(expanded, now_dt)
        whole_days = bool(days) and asks_what_was_done(expanded)
        if days and not (about_sessions or whole_days):
            days = []
        if not days:  # ("what was I working on?": the days just past)
            days = recent_days(expanded, now_dt)
            whole_days = bool(days)
        if days:  # (the days are the temporal channel's, not words: "Monday" in other days' summaries)
            expanded = without_days(expanded, now_dt)
        asked = expanded
        # (which of the terms that decide how it is asked some memory holds, in one look: the
        # day terms, its identifiers whole, its names' other spellings)
        held = self.known_terms([text.term_hash(d) for d in days] + text.terms_to_look_up(expanded))
        # (the day terms some summary holds join the words; a day's memories not yet summarised
        # are the temporal channel's alone)
        held_days = [d for d in days if text.term_hash(d) in held]
        if held_days:
            expanded = f"{expanded} {' '.join(held_days)}"
        if kind == "auto":
            kind = None if days or about_sessions else "memory"
        counts = text.query_counts(expanded, held)
        qtf = list(counts.values())
        return Analysis(list(counts.keys()), qtf, sum(qtf), kind, days, whole_days, asked, held)

    def day_docs(self, q: Question) -> tuple[list[int], list[int]]:
        """Index positions of what the days a question names hold, as its kind and type let
        it have them: (the user's whole-session summaries of those days, what the user wrote or
        revised on them that no summary of those days stands for yet: a session still open, as
        the one asking about today usually is, or the part after midnight of one filed under
        its first day)."""
        sessions, keys = self.store.sessions, [day_key(d) for d in q.days]
        summaries = sessions.day_summaries(q.user, keys, q.project) \
            if q.kind in (None, "summary_event") and q.type in (None, "summary") else []
        memories = sessions.day_memories(q.user, day_spans(q.days), q.project, keys, q.type, DAY_MEMORIES) \
            if q.kind in (None, "memory") and q.type != "summary" else []
        return summaries, memories

    def known_terms(self, hashes: list[int]) -> set[int]:
        """Which of these terms some memory holds (the index's vocabulary, else the file's)."""
        if not hashes:
            return set()
        with self.store.lock:  # (a write from another thread grows the vocabulary before its counts)
            index = self.live.index
            if index is not None:
                cols, df = index.cols, index.df
                return {h for h in hashes if h in cols and cols[h] < df.size and df[cols[h]] > 0}
        return self.store.terms_present(hashes)

    def candidates(self, query: str, user: str, k: int, project: str | None = None):
        """The default fusion's best k for a query (no session, no learning), with the channel
        scores they came from: what the learned ranker is trained on."""
        now_dt = self.clock()
        a = self.analyse(query, now_dt, "auto")
        terms, qtf, qlen, kind = a.terms, a.qtf, a.qlen, a.kind
        index = self.live.index
        user_code = index.lookup_code("user", user)
        project_code = None if project is None else index.lookup_code("project", project)
        if not terms or user_code < 0 or (project_code is not None and project_code < 0):
            return Ranked.empty(), None
        cs = index.channel_scores(terms, qtf, qlen, text.query_grams(query))
        cs.words = text.term_words(query, terms)
        return rank_index(index, cs, self.settings.config, now=epoch_seconds(now_dt), user=user_code,
                          project=project_code, limit=k, kind=None if kind is None else KINDS[kind]), cs
