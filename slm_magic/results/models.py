"""Pydantic models the engine returns. Widgets and magics read these and nothing else."""

from __future__ import annotations

import html
from functools import cached_property
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.fields import MEMORY_TYPES as MEMORY_TYPES  # (re-exported: the types belong to the models too)
from ..core.fields import matched_fields
from ..core.scoring import AGE_GATE_RELEVANCE, RETRIEVAL_MODES, WEAK_RELEVANCE
from ..core.scoring import SEARCH_WEIGHTS as SEARCH_WEIGHTS  # (re-exported: SearchScore's own weights)
from ..core.scoring import TYPE_PRIORITY as TYPE_PRIORITY  # (re-exported: ContextScore's type priority)
from .display import one_line, plural, recall_html, recall_text, session_html, session_text, terminal_width, wrap

MemoryType = Literal["profile", "preference", "decision", "pattern", "discovery"]


class Readable:
    """A result a person reads: its `__str__` in a terminal, the same words as HTML in a notebook."""

    def _repr_pretty_(self, p, cycle: bool) -> None:
        """In a terminal: a line longer than it wrapped at words under its own indent, the first
        leaving room for IPython's "Out[n]: " (the terminal would cut words anywhere)."""
        out = []
        for i, line in enumerate(str(self).splitlines()):
            room = terminal_width() - (OUT_PROMPT if i == 0 else 0)
            out += [line] if len(line) <= room else wrap(line, room, len(line) - len(line.lstrip(" ")))
        p.text("\n".join(out))

    def _repr_html_(self) -> str:
        lines = [html.escape(line) for line in str(self).splitlines()]
        return f"<div style='font-size:13px;white-space:pre-wrap'>{'<br>'.join(lines)}</div>"


class Fact(BaseModel):
    """One stored memory with every field both APIs expose."""

    model_config = ConfigDict(frozen=True)

    fact_id: str
    content: str
    user_id: str = ""
    session_id: str | None = None
    project: str = ""
    type: str = "discovery"
    title: str | None = None
    topic_key: str | None = None
    tags: tuple[str, ...] = ()
    is_core: bool = False
    source: str | None = None
    notebook: str | None = None
    cell: int | None = None
    created_at: datetime
    updated_at: datetime
    revision_count: int = 0
    kind: Literal["memory", "summary_event"] = "memory"
    shared: bool = False  # readable by everyone on the memory (its author is `user_id`)

    def __str__(self) -> str:
        return _fact_line(self)

    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(_fact_line(self, "memory ", OUT_PROMPT))

    def _repr_html_(self) -> str:
        return Readable._repr_html_(self)


class MemoryChange(Readable, BaseModel):
    """What a magic did to one memory (remembered, revised, pinned, unpinned, forgotten)."""

    model_config = ConfigDict(frozen=True)

    action: Literal["remembered", "revised", "pinned", "unpinned", "forgotten", "kept"]  # kept: already remembered
    fact: Fact

    @property
    def _lead(self) -> str:
        return "already remembered " if self.action == "kept" else f"{self.action} "

    def __getattr__(self, name: str):
        """The memory's own fields read through (`change.fact_id`, `change.tags`)."""
        if not name.startswith("_") and name in Fact.model_fields:
            return getattr(self.fact, name)
        return super().__getattr__(name)

    def __str__(self) -> str:
        return _fact_line(self.fact, self._lead)

    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(_fact_line(self.fact, self._lead, OUT_PROMPT))


class Provenance(Readable, BaseModel):
    """Where a memory came from: the notebook, the cell (its number then, its stable id) and
    the source of the cell run just before it, the code that produced the finding."""

    model_config = ConfigDict(frozen=True)

    fact_id: str
    notebook: str | None = None
    cell: int | None = None
    cell_id: str | None = None
    code: str | None = None

    def __str__(self) -> str:
        where = self.notebook or "not from a notebook"
        if self.cell is not None:
            where += f", cell [{self.cell}]"
        if self.cell_id:
            where += f" (id {self.cell_id})"
        return f"{self.fact_id} came from {where}" + (f"\nthe cell before it:\n{self.code}" if self.code else "")

    def _repr_pretty_(self, p, cycle: bool) -> None:  # (code as it was written: never wrapped)
        p.text(str(self))


class Skipped(BaseModel):
    """A record a bulk write set aside: its position in the input and why."""

    model_config = ConfigDict(frozen=True)

    position: int
    reason: str


class Remembered(list):
    """The fact_ids a bulk write stored, in input order; `skipped` lists what it set aside."""

    def __init__(self, ids=(), *, skipped=()):
        super().__init__(ids)
        self.skipped: tuple[Skipped, ...] = tuple(skipped)


class FeedbackRecorded(Readable, BaseModel):
    model_config = ConfigDict(frozen=True)

    fact_id: str
    signal: str

    def __str__(self) -> str:
        return f"feedback {self.signal} recorded for {self.fact_id[:8]}"  # (a short id, as every magic shows it)


class ExportReport(Readable, BaseModel):
    """What an export wrote, by kind (the memories, and the summaries sessions left)."""

    model_config = ConfigDict(frozen=True)

    path: str
    memories: int
    summaries: int

    @property
    def total(self) -> int:
        return self.memories + self.summaries

    def __str__(self) -> str:
        return (f"exported {plural(self.memories, 'memory', 'memories')} and "
                f"{plural(self.summaries, 'session summary', 'session summaries')} to {self.path}")


class ImportReport(Readable, BaseModel):
    """What an import added, what was already here, and what it set aside."""

    model_config = ConfigDict(frozen=True)

    path: str
    memories: int           # new memories added
    summaries: int          # new session summaries added
    already_present: int    # rows whose fact_id this file already had
    skipped: tuple[Skipped, ...] = ()
    # New memories another user wrote (an export keeps each memory's author), by user: the
    # importer does not see them (`user_id`), which the report says.
    others: dict[str, int] = Field(default_factory=dict)
    user_id: str | None = Field(None, exclude=True)

    @property
    def added(self) -> int:
        return self.memories + self.summaries

    def __str__(self) -> str:
        kinds = (f" ({plural(self.memories, 'memory', 'memories')}, "
                 f"{plural(self.summaries, 'session summary', 'session summaries')})" if self.added else "")
        out = f"imported {self.added:,} new{kinds}, {self.already_present:,} already present, from {self.path}"
        for user, n in list(self.others.items())[:3]:
            yours = f", not {self.user_id}'s" if self.user_id else ""
            out += (f"\n  {plural(n, 'memory', 'memories')} of them {'is' if n == 1 else 'are'} {user}'s{yours}: "
                    f"open the memory as {user} to read them")
        for s in self.skipped[:10]:
            out += f"\n  skipped line {s.position}: {s.reason}"
        if len(self.skipped) > 10:
            out += f"\n  … and {len(self.skipped) - 10:,} more skipped"
        return out


#: The widest a one-line acknowledgement gets ("remembered …", "pinned …"): it says what
#: happened, not the whole memory, and fits a standard 80-column terminal whatever width the
#: terminal reports (a pipe or a kernel's stdout reports 100).
LINE_MAX = 80
#: An id as the tables show it (the first 8 of its 16 characters; any 6 or more are accepted).
SHORT_ID = 8


#: Room for IPython's "Out[12]: ", which a terminal prints on the line of a one-line result.
OUT_PROMPT = len("Out[123]: ")


def _fact_line(f: "Fact", lead: str = "", prompt: int = 0) -> str:
    """`lead`, the short id and type, then as much of the text as fits one line (clipped
    with "…"), never wider than LINE_MAX columns, less `prompt` (what is printed before it)."""
    start = f"{lead}{f.fact_id[:SHORT_ID]} [{f.type}{', core' if f.is_core else ''}] "
    width = min(terminal_width(), LINE_MAX) - prompt
    return start + one_line(f.content, max(10, width - len(start)))


class MemoryPage(BaseModel):
    """What `Memory.browse` returns: one page of every memory a user may read (their own and
    those shared with them), newest first, and where the page sits in the whole."""

    model_config = ConfigDict(frozen=True)

    facts: list[Fact] = Field(default_factory=list)
    total: int        # how many memories there are in all (with these filters)
    offset: int       # how many come before this page
    limit: int        # the most a page holds
    project: str | None = None
    type: str | None = None
    viewer: str | None = Field(None, exclude=True, repr=False)  # who reads it (their shares: "shared by you")

    @property
    def has_more(self) -> bool:
        """Whether another page follows this one."""
        return self.offset + len(self.facts) < self.total

    def __len__(self) -> int:
        return len(self.facts)

    def __iter__(self):  # type: ignore[override]
        return iter(self.facts)

    def __getitem__(self, i: int) -> Fact:
        return self.facts[i]

    def __str__(self) -> str:
        from .display import page_text

        return page_text(self)

    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(str(self))

    def _repr_html_(self) -> str:
        from .display import page_html

        return page_html(self)


class ForgetReport(Readable, BaseModel):
    """What `Memory.forget_all` deleted for good: the memories (of one project, or all of
    them) and the session summaries that went with them (some written again, without them,
    from what their sessions have left: `rewritten`)."""

    model_config = ConfigDict(frozen=True)

    count: int                  # memories forgotten
    project: str | None = None  # None: every memory of the user
    summaries: int = 0          # session summaries forgotten with them
    rewritten: int = 0          # summaries written again from what their sessions have left

    def __str__(self) -> str:
        """One line, never wider than LINE_MAX (a long project name is clipped with "…")."""
        if not self.count and not self.summaries:
            head, tail = "forgot nothing: you had no memories", ""
        else:
            head = f"forgot {plural(self.count, 'memory', 'memories')}"
            tail = f" and {plural(self.summaries, 'session summary', 'session summaries')}" if self.summaries else ""
        if self.project is None:
            return f"{head}{tail}" if not self.count and not self.summaries else f"{head}{tail}: all you had"
        lead = f"{head} in project " if not self.count and not self.summaries else f"{head} of project "
        return lead + one_line(self.project, max(8, LINE_MAX - 1 - len(lead) - len(tail))) + tail


class StatusReport(Readable, BaseModel):
    """What %slm_status shows."""

    model_config = ConfigDict(frozen=True)

    database: str
    user_id: str
    session_id: str | None
    memories: int
    summaries: int  # session summaries (what an export writes beside the memories)
    core_memories: int
    sessions: int
    feedback_signals: int
    learning_phase: int
    retrieval_mode: str
    learning: str = ""  # the loop in words: collecting, active, learned, or off (LearningStatus.status)
    meaning: str = ""  # the meaning channel: its model and how many memories have vectors, or why it is off
    index: str = ""  # where this kernel's index came from (the saved index, or rebuilt and why)

    def __str__(self) -> str:
        return "\n".join(f"{k:>17}: {v}" for k, v in self.model_dump().items())

    def _repr_html_(self) -> str:  # (names and values in columns: spaces do not align in a proportional font)
        rows = "".join(f"<tr><td style='text-align:right;vertical-align:top;padding-right:8px;color:#555'>{html.escape(k)}</td>"
                       f"<td>{html.escape(str(v))}</td></tr>" for k, v in self.model_dump().items())
        return f"<table style='font-size:13px;border-collapse:collapse'>{rows}</table>"


class SearchScore(BaseModel):
    """SearchScore = 0.60·relevance + 0.25·recency + 0.15·revision, with its parts.

    `bm25` and `tfidf` (the character n-gram channel) make up `relevance`, with `context` (the
    session context channel, 0 unless switched on) and `temporal` (1 for a whole-session summary
    of a day the question names); all values are in [0, 1].
    Not comparable with ContextScore: a different formula on a different scale.
    """

    model_config = ConfigDict(frozen=True)

    value: float
    relevance: float
    bm25: float
    tfidf: float
    recency: float
    revision: float
    working_set: float = 0.0  # the session boost (capped), added on top; 0 outside a session
    context: float = 0.0      # the context channel's part of relevance (off by default)
    learned: float = 0.0      # from the learning loop (phase 2 prior or phase 3 model), either sign
    # The temporal channel's part of relevance: 1 for a whole-session summary of a day the
    # question names ("what did I do today"), which relevance then fuses to at least 0.80.
    temporal: float = 0.0
    # The meaning channel's part of relevance: how close the memory's meaning is to the
    # question's (0 when unrelated or when the channel did not run).
    meaning: float = 0.0

    def contributions(self) -> dict[str, float]:
        """How much each part adds to `value` (weight × part, at the documented weights):
        what a stacked score bar draws."""
        w_rel, w_rec, w_rev = SEARCH_WEIGHTS
        return {"relevance": w_rel * self.relevance, "recency": w_rec * self.recency,
                "revision": w_rev * self.revision, "working_set": self.working_set, "learned": self.learned}


class ScoredMemory(BaseModel):
    """A recalled memory: the fact, its SearchScore and the parts of that score by name."""

    model_config = ConfigDict(frozen=True)

    fact: Fact
    score: SearchScore
    # A related memory matched nothing itself: it is shown only on request, after the
    # matches, because it shares a session with match number `related_to` (1-based).
    related_to: int | None = None
    # Its meaning is close to the question's: the reason a memory that shares no word with the
    # question is here at all ("similar meaning").
    similar: bool = False
    # The question's term hashes -> its words: what `matched` and the views' marks read.
    query_words: dict[int, str] = Field(default_factory=dict, exclude=True, repr=False)

    @cached_property
    def matched(self) -> dict[str, tuple[str, ...]]:
        """Why it is here: the query's words it contains, by field ("content", "title", "tags",
        "project", "type"); empty for a related memory. Worked out when asked for."""
        if self.related_to is not None or not self.query_words:
            return {}
        f = self.fact
        return matched_fields(self.query_words, f.content, f.title, f.tags, f.project, f.type)

    @property
    def reason(self) -> str:
        """One line on why it was returned: the matched words by field, or its relation."""
        if self.related_to is not None:
            return f"same session as #{self.related_to}"
        parts = [f"{field}: {', '.join(words)}" for field, words in self.matched.items()]
        if self.similar:
            parts.append("similar meaning")
        return "; ".join(parts)

    @property
    def query_terms(self) -> frozenset[int]:
        """The question's term hashes (what `text.marked` highlights in this memory's fields)."""
        return frozenset(self.query_words) if self.related_to is None else frozenset()

    @property
    def strength(self) -> str:
        """How well it matches, in words: "strong" at relevance 0.70 or more (what passes the
        age gate), "weak" under 0.35 (about one common word), else "partial"; "related" for a
        memory that matched nothing itself; "listed" for one shown without a question (a
        session opened with none: what is pinned and newest). One word of a question of
        several is never "strong" by itself ("strong match on content: handle" for "how do we
        handle days when shops were shut?"): its meaning, or the day asked about, must agree."""
        if self.related_to is not None:
            return "related"
        r = self.score.relevance
        if not self.query_words and r == 0:
            return "listed"
        if r >= AGE_GATE_RELEVANCE and (self.similar or self.score.temporal > 0 or self._words_matched() != 1
                                        or len(set(self.query_words.values())) < 2):
            return "strong"
        return "partial" if r >= WEAK_RELEVANCE else "weak"

    def _words_matched(self) -> int:
        """How many of the question's words it holds, in any field."""
        return len({w for words in self.matched.values() for w in words})

    # The parts by name, so `m.bm25` reads like the breakdown it is.
    @property
    def fact_id(self) -> str:
        return self.fact.fact_id

    @property
    def content(self) -> str:
        return self.fact.content

    @property
    def relevance(self) -> float:
        return self.score.relevance

    @property
    def bm25(self) -> float:
        return self.score.bm25

    @property
    def tfidf(self) -> float:
        return self.score.tfidf

    @property
    def recency(self) -> float:
        return self.score.recency

    @property
    def revision(self) -> float:
        return self.score.revision

    @property
    def working_set(self) -> float:
        return self.score.working_set


# The channels that ran, by name (core/scoring.RETRIEVAL_MODES says what each means).
RetrievalMode = Literal[RETRIEVAL_MODES]


class RecallResult(BaseModel):
    """What `Memory.recall` returns: memories best first, and which path produced them."""

    model_config = ConfigDict(frozen=True)

    query: str
    project: str | None = None  # the project filter it was recalled with (feedback keeps it)
    memories: list[ScoredMemory] = Field(default_factory=list)
    retrieval_mode: RetrievalMode = "full_bm25_tfidf"
    degraded_mode: bool = False
    degraded_reason: str | None = None
    elapsed_ms: float = 0.0
    # With an age gate: its days, how many matching memories are older than it (those are
    # shown only if their relevance reaches 0.70), and how many of those are shown.
    age_gate_days: int | None = None
    older_matches: int = 0
    older_shown: int = 0
    # Who asked: their own shared memories read "shared by you" in the text and HTML.
    viewer: str | None = Field(None, exclude=True, repr=False)

    def __len__(self) -> int:
        return len(self.memories)

    def __str__(self) -> str:
        return recall_text(self, viewer=self.viewer)

    def _repr_pretty_(self, p, cycle: bool) -> None:  # IPython in a terminal
        p.text(str(self))

    def _repr_html_(self) -> str:
        return recall_html(self, self.viewer)

    def __iter__(self):  # type: ignore[override]
        return iter(self.memories)

    def __getitem__(self, i: int) -> ScoredMemory:
        return self.memories[i]


# --- API A: the session lifecycle of SuperLocalMemory's slm-session ---------------------------


class SessionMemory(BaseModel):
    """One memory as session_init lists it."""

    model_config = ConfigDict(frozen=True)

    fact_id: str
    content: str
    score: float
    is_core: bool


#: The learning loop's phases, by a user's number of feedback signals: 1 below the first, 2
#: (a usefulness prior) from it, 3 (a learned ranker) from the second.
PHASE_2_SIGNALS, PHASE_3_SIGNALS = 50, 200


class LearningStatus(BaseModel):
    model_config = ConfigDict(frozen=True)

    feedback_signals: int
    phase: Literal[1, 2, 3]
    status: str
    # Beyond the documented fields (kept out of `model_dump`): what ranks the recalls now (the
    # default fusion, the per-memory usefulness prior, or a learned model, then its id; "off"
    # when learning=False). Phase 3 with no usable model ranks as phase 2, and `status` says why.
    ranking: str = Field("default fusion", exclude=True)
    model_id: str | None = Field(None, exclude=True)

    @property
    def signals_to_start(self) -> int:
        """How many signals the learning starts at (phase 2)."""
        return PHASE_2_SIGNALS



class SessionInit(BaseModel):
    """What `session_init` returns: exactly the documented fields."""

    model_config = ConfigDict(frozen=True)

    success: bool
    session_id: str
    context: str
    memories: list[SessionMemory]
    memory_count: int
    core_memory: list[SessionMemory]
    degraded_mode: bool
    retrieval_mode: str
    calibration_status: str
    calibration_id: str | None
    answer_confidence: float | None
    abstained: bool
    abstention_reason: str | None
    learning: LearningStatus
    # Beyond the documented fields, for the views, kept out of `model_dump` (which stays exactly
    # the documented shape): the listed memories with their fact and whole SearchScore, the
    # user's recent session summaries, whether the session is new, the age gate's (days, older
    # matching memories) when it was on, and whether the user has no memories at all yet.
    scored_memories: list[ScoredMemory] = Field(default_factory=list, exclude=True, repr=False)
    recent_sessions: list[SessionSummaryCompact] = Field(default_factory=list, exclude=True, repr=False)
    is_new: bool = Field(True, exclude=True)
    age_gate: tuple[int, int, int] | None = Field(None, exclude=True)  # (days, older matches, of them shown)
    nothing_stored: bool = Field(False, exclude=True)
    # No question was given and the path named nothing (an "Untitled.ipynb" in "work"): the
    # memories are what is pinned and what is newest, not matches, and `message` says so.
    opened_without_question: bool = Field(False, exclude=True)
    query: str = Field("", exclude=True)  # the question the memories answer (given, or from the path)
    message: str | None = Field(None, exclude=True)  # one plain line for the views, when there is one
    viewer: str | None = Field(None, exclude=True, repr=False)  # whose session (their shares: "shared by you")

    def __str__(self) -> str:
        return session_text(self)

    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(str(self))

    def _repr_html_(self) -> str:
        return session_html(self, self.viewer)


class CloseSessionResult(Readable, BaseModel):
    model_config = ConfigDict(frozen=True)

    success: bool
    session_id: str
    summary_events_created: int
    # (closed before: only what it got since is summarised, its summary kept; said in words, and
    # left out of the dict the spec gives the assistant)
    already_closed: bool = Field(default=False, exclude=True)

    def __str__(self) -> str:
        if not self.success:
            return f"session {self.session_id} was not open"
        n = self.summary_events_created
        if self.already_closed and not n:
            return f"session {self.session_id} was already closed: nothing new to summarise"
        why = " (one for the whole session, one for each tag, project and name its memories touched)" if n > 1 else ""
        return f"closed session {self.session_id}: {plural(n, 'session summary', 'session summaries')} written{why}"


# --- API B: observations per user (the "mem" library) ---------------------------------------


class SessionSummaryCompact(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str
    date: datetime
    summary: str
    is_auto_generated: bool = False


class ObservationCompact(BaseModel):
    """A search or session-start hit. `score` is SearchScore from mem_search and ContextScore
    from mem_session_start: different formulas on different scales, never to be compared."""

    model_config = ConfigDict(frozen=True)

    id: str
    type: str
    title: str | None
    topic_key: str | None
    score: float
    snippet: str
    updated_at: datetime


class SessionStartResponse(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str
    is_new: bool
    sessions_context: list[SessionSummaryCompact]
    memories: list[ObservationCompact]


class SaveResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    outcome: Literal["created", "updated", "deduped"]
    session_id: str
    topic_key: str | None


class Observation(BaseModel):
    """One observation in full (mem_get_observation, mem_timeline)."""

    model_config = ConfigDict(frozen=True)

    id: str
    user_id: str
    session_id: str | None
    type: str
    title: str | None
    content: str
    topic_key: str | None
    revision_count: int
    created_at: datetime
    updated_at: datetime


class Session(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str
    user_id: str
    started_at: datetime
    last_activity_at: datetime
    ended_at: datetime | None
    summary: str | None
    is_auto_generated: bool
