"""`Memory`: the engine's public facade over both APIs, composed of parts held as attributes,
each owning its state and given only what it uses: `store` (every statement, on the file or
the team's server), `settings` (the ranking's knobs and the model), `live` (the kernel's
index), `working_sets`, `lease` (how the file is held), `writer` (the write path),
`retrieval` (recall), `sessions` (API A's lifecycle), `api_b` (the per-user observations),
`learning` (feedback and the learned ranker), `calibration` (answer confidence) and
`exchange` (export and import). Memory checks what a caller gives and hands it on."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .errors import InvalidInput, StoreError, type_name
from .core.identity import default_user
from .core.ids import content_hash
from .engine.validate import redact
from .index.sparse import SparseIndex
from .results.models import (MEMORY_TYPES, CloseSessionResult, ExportReport, Fact, ForgetReport, ImportReport, LearningStatus,
                     MemoryPage, Observation, ObservationCompact, Provenance, RecallResult, Remembered, SaveResult,
                     Session, SessionInit, SessionStartResponse, StatusReport)
from .core.scoring import (RankingConfig)
from .engine.exchange import Exchange
from .engine.lease import Lease
from .engine.recall import Recall
from .engine.writer import Writer
from .engine.settings import Settings
from .ranking.calibration import AnswerCalibration, AnswerConfidence, Judge
from .engine.learning import LearningLoop
from .sessions.api_b import ApiB
from .sessions.api_a import SessionService
from .index.live import LiveIndex
from .index.rows import FactRows, fact_of
from .core.clock import Clock
from .engine.working_sets import WorkingSets
from .storage.backends import is_url, missing_file, open_store





def _held(part: str, name: str, doc: str, *, settable: bool = True) -> property:
    """A facade attribute that is a part's own (`memory.config` is `memory.settings.config`)."""
    def get(self):
        return getattr(getattr(self, part), name)

    def put(self, value) -> None:
        setattr(getattr(self, part), name, value)

    return property(get, put if settable else None, doc=doc)


class Memory:
    """Long-term memory on a DuckDB file, or on a team's PostgreSQL database.

    `Memory(path)` opens (or creates) the file; ``":memory:"`` keeps everything in RAM;
    ``None`` uses $SLM_MAGIC_DB or ~/.slm_magic/memory.duckdb. `user_id` None (or "") is
    `identity.default_user()` ($SLM_MAGIC_USER, else the login name) on a file and the login
    role on a server: one person is one user on every face. A file written when the default
    user was "" is upgraded so that those memories are the default user's (storage/migrations._v7).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, user_id: str | None = None,
                 clock: Callable[[], datetime] | None = None, session_timeout_hours: float = 24.0,
                 judge: Judge | None = None, abstain_below: float = 0.5, semantic: bool = True,
                 embedding_model: str | None = None, **ranking: Any):
        self.settings = Settings(RankingConfig(**ranking), semantic=semantic, embedding_model=embedding_model)
        if not isinstance(session_timeout_hours, (int, float)) or session_timeout_hours <= 0:
            raise InvalidInput(f"session_timeout_hours must be a positive number; got {session_timeout_hours!r}")
        self.session_timeout_hours = float(session_timeout_hours)
        if user_id is not None and not isinstance(user_id, str):
            raise InvalidInput(f"user_id must be a string, not {type_name(user_id)}")
        self.clock = Clock(clock)
        self.store = open_store(path)
        login = self.store.login_user
        if not user_id:  # nobody said (or said ""): the server's login role, else this person's default name
            user_id = login if login is not None and not self.store.sees_everything else default_user()
        if login is not None and user_id != login and not self.store.sees_everything:
            if user_id:  # on a server you are who you connect as: row-level security says so too
                self.store.close()
                raise StoreError(f"connected to {self.store.path} as {login!r}, so user_id is {login!r}, "
                                 f"not {user_id!r}: connect as that role instead")
            user_id = login
        self.user_id = user_id
        self.calibration = AnswerCalibration(self.store, self.user_id, self.clock, judge=judge,
                                             abstain_below=abstain_below)
        self.live = LiveIndex(self.store)
        self.working_sets = WorkingSets(self.store)
        self.learning = LearningLoop(self.store, self.settings, self.live, self.working_sets, self.clock, self.user_id,
                                     self.session_timeout_hours)
        self.lease = Lease(self.store, self.settings, self.live, self.working_sets)
        self.writer = Writer(self.store, self.settings, self.live, self.working_sets, self.learning, self.lease, self.clock,
                             self.user_id)
        self.retrieval = Recall(self.store, self.settings, self.live, self.working_sets, self.learning, self.clock,
                                self.user_id)
        self.learning.candidates = self.retrieval.candidates
        self.sessions = SessionService(self.store, self.settings, self.live, self.working_sets, self.writer,
                                       self.retrieval, self.learning, self.calibration, self.clock, self.user_id,
                                       self.session_timeout_hours)
        self.api_b = ApiB(self.sessions, self.store, self.settings, self.live, self.writer, self.retrieval, self.clock)
        self.exchange = Exchange(self.store, self.live, self.working_sets, self.writer, self.lease, self.clock, self.user_id)
        self.live.load(self.config.k1, self.config.b, self.meaning)

    # --- lifecycle --------------------------------------------------------------------------
    @staticmethod
    def setup_team(url: str, members: Sequence[str] = ()) -> tuple[int, int]:
        """For an administrator: create or upgrade a team's memory on PostgreSQL (the schema,
        the roles, their grants and row-level security); `members` are the people's login
        roles. Returns (schema version before, after)."""
        from .storage.pg_store import setup

        if not is_url(url):
            raise InvalidInput(f"a team memory needs a postgresql:// URL, not {url!r}")
        return setup(url, list(members))

    @staticmethod
    def missing_file(address: str | os.PathLike[str] | None = None) -> str | None:
        """The file `Memory(address)` would create, when there is none yet (else None)."""
        return missing_file(address)

    @property
    def path(self) -> str:
        return self.store.path

    def take_notices(self) -> list[str]:
        """Lines for the user about what the storage went through since last asked (the
        server went away and was reconnected); each said once."""
        return self.store.take_notices()

    def close(self) -> None:
        """Let go of the file for good. A save of the index running in the background is
        waited for (a few seconds at a million memories), and the index is saved once more if
        enough changed since."""
        try:
            self.live.fill.stop()  # (after its current step: the next open fills what is left)
            if self.working_sets.pending and not self.store.connected:
                self.store.connect()
            self.working_sets.flush()
            self.live.save_last()
        finally:
            self.store.close()

    def wait_for_vectors(self, timeout: float | None = None) -> bool:
        """Wait until the vectors that follow a bulk write are all there (a script that imports
        and then asks by meaning); True when they are (False: still being worked out)."""
        return self.live.fill.wait(timeout)

    def save_index(self) -> None:
        """Save the in-process index beside the file now (it is saved by itself after a
        rebuild, a bulk write and, once enough changed, when the file is let go)."""
        if self.replica is None:
            raise InvalidInput(f"no in-process index to save ({self.index_error})")
        self.replica.save()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        """The engine's time: the `clock` given, as naive UTC, else the machine's."""
        return self.clock()

    # --- API A: the session lifecycle (memory.sessions) ------------------------------------
    def session_init(self, project_path: str = "", query: str = "", max_results: int = 10, max_age_days: int = 30,
                     *, reuse: bool = False, origin: str | None = None) -> SessionInit:
        """Open a session: a new id, the memories that matter for its project, and its context
        (see `SessionService.session_init`)."""
        return self.sessions.session_init(project_path, query, max_results, max_age_days, reuse=reuse, origin=origin)

    def close_session(self, session_id: str = "", *, summary: str | None = None) -> CloseSessionResult:
        """Summarise a session into searchable summary events (no id: the most recent one)."""
        return self.sessions.close_session(session_id, summary=summary)

    def core_memories(self, user_id: str | None = None) -> list[Fact]:
        """The pinned memories of a user, newest first."""
        return self.sessions.core_memories(user_id)

    def session_facts(self, session_id: str) -> list[Fact]:
        """The memories written in a session (not its summaries), oldest first."""
        return self.sessions.session_facts(session_id)

    # --- API B: observations per user (memory.api_b) --------------------------------------
    def mem_session_start(self, user_id: str) -> SessionStartResponse:
        return self.api_b.mem_session_start(user_id)

    def mem_save(self, user_id: str, content: str, *, type: str, title: str,
                 topic_key: str | None = None, source: str | None = None) -> SaveResult:
        return self.api_b.mem_save(user_id, content, type=type, title=title, topic_key=topic_key, source=source)

    def mem_session_summary(self, user_id: str, summary: str) -> SaveResult:
        return self.api_b.mem_session_summary(user_id, summary)

    def mem_session_end(self, user_id: str, *, summary: str) -> Session:
        return self.api_b.mem_session_end(user_id, summary=summary)

    def mem_search(self, user_id: str, query: str, *, limit: int = 10, types: list[str] | None = None,
                   types_exclude: list[str] | None = None) -> list[ObservationCompact]:
        return self.api_b.mem_search(user_id, query, limit=limit, types=types, types_exclude=types_exclude)

    def mem_get_observation(self, user_id: str, observation_id: str) -> Observation | None:
        return self.api_b.mem_get_observation(user_id, observation_id)

    def mem_timeline(self, user_id: str, observation_id: str) -> list[Observation]:
        return self.api_b.mem_timeline(user_id, observation_id)

    def mem_stats(self, user_id: str) -> dict[str, Any]:
        return self.api_b.mem_stats(user_id)

    # --- export and import (their own part) ------------------------------------------------
    def export(self, path: str | os.PathLike[str], *, user_id: str | None = None) -> ExportReport:
        """Write one user's memories and session summaries (default: this Memory's user) to a
        .jsonl or .parquet file, every field of each memory kept; returns how many of each."""
        return self.exchange.export(path, user_id=user_id)

    def import_file(self, path: str | os.PathLike[str], *, progress: bool | None = None,
                    on_invalid: str = "raise") -> ImportReport:
        """Add the memories of a .jsonl or .parquet file: one written by `export` (every field
        kept), or a .jsonl of plain notes, one JSON object a line with `content` and perhaps
        `tags` (a list or "a,b"), `type`, `title`, `project` and `created_at`; what they leave
        out is computed (the id from the note itself, the content hash, the timestamps). Ones
        already here are skipped: importing the same file twice adds nothing. A file that
        does not read, or (on_invalid="raise") has an invalid row, adds nothing and names the
        line; on_invalid="skip" adds the others and lists each one skipped."""
        return self.exchange.import_file(path, progress=progress, on_invalid=on_invalid)

    # --- the learning loop (its own part) ---------------------------------------------------
    def feedback(self, fact_id: str, signal: str, *, session_id: str | None = None, query: str | None = None,
                 rank: int | None = None, project: str | None = None) -> str:
        """Record that a memory was useful ("up") or not ("down") for `query` (recalled with
        the `project` filter, if any); returns the signal's id."""
        return self.learning.feedback(fact_id, signal, session_id=session_id, query=query, rank=rank,
                                      project=project)

    def feedback_count(self, user_id: str | None = None) -> int:
        return self.learning.feedback_count(user_id)

    def learning_status(self, user_id: str | None = None) -> LearningStatus:
        """The user's learning phase, its signals, and what ranks their recalls now."""
        return self.learning.status(user_id)

    def train_ranker(self, user_id: str | None = None) -> str | None:
        """Fit the phase-3 ranker on a user's signals now and store it; returns its id, or None
        (the reason is then in `learning_status().status`)."""
        return self.learning.train(user_id)

    # --- answer calibration (its own part) --------------------------------------------------
    @property
    def abstain_below(self) -> float:
        return self.calibration.abstain_below

    def set_judge(self, judge: Judge | None) -> None:
        """A callable (query, memories) -> bool that says whether a recall answered; each
        session opened with a query is then judged, and the outcomes fit the calibration."""
        self.calibration.set_judge(judge)

    def record_outcome(self, query: str, result: RecallResult, answered: bool, *, source: str = "label") -> None:
        """Feed one labelled outcome: did `result` (a recall of `query`) answer it?"""
        self.calibration.record(query, result, answered, source=source)

    def answer_confidence(self, result: RecallResult) -> AnswerConfidence:
        """Did this recall answer its query? Calibrated when enough outcomes are known."""
        return self.calibration.confidence(result)

    # --- a part's state, read and set on the facade (tests and benchmarks set them) ---------
    replica = _held("live", "replica", "The in-process index's replica (None: recall runs from the file).")
    index_error = _held("live", "error", "Why there is no replica (None while there is one).")
    config = _held("settings", "config", "The ranking's knobs (a RankingConfig), read by every part at call time.")
    meaning = _held("settings", "model", "The meaning channel's model (None: off, or it did not load).")
    meaning_error = _held("settings", "model_error", "Why the meaning channel's model did not load (None: it did).",
                          settable=False)
    semantic = _held("settings", "semantic", "Whether the meaning channel was asked for.", settable=False)
    embedding_model = _held("settings", "model_name", "The meaning channel's model, by name or path.", settable=False)

    @property
    def index(self) -> SparseIndex | None:
        """The replica's sparse index; None when recall runs from SQL (degraded)."""
        return self.live.index

    @property
    def rows(self) -> FactRows:
        return self.live.rows

    # --- writes (the `writer` part) ------------------------------------------------------------
    def remember(self, content: str, *, session_id: str | None = None, tags: str | Iterable[str] | None = None,
                 project: str | None = None, type: str | None = None, title: str | None = None,
                 topic_key: str | None = None, core: bool | None = None, created_at: datetime | None = None,
                 user_id: str | None = None, source: str | None = None, notebook: str | None = None,
                 cell: int | None = None, cell_id: str | None = None, code: str | None = None,
                 share: bool | None = None) -> Fact:
        """Store one memory and make it recallable at once; returns the stored fact.
        `share=True` lets every user of the memory find it (recall shows its author); on
        PostgreSQL the others can then read it, and still nothing else of yours.
        `notebook`, `cell`, `cell_id` (the front end's stable id) and `code` (the cell that
        produced the finding) say where it came from; `provenance(fact_id)` reads them back.

        A field left out (None) takes its default: no tags, no project, type "discovery". With a
        `topic_key` that a live memory of this user already has, that memory is revised
        instead, and a field left out keeps the value it had (where it came from follows the new
        text when the call says where: `notebook`, `cell`, `cell_id`, `code`, `source`). `user_id=""` is this Memory's
        user (no row is written under the empty user: store.adopt_unowned)."""
        return self.writer.remember(dict(
            content=content, session_id=session_id, tags=tags, project=project, type=type, title=title,
            topic_key=topic_key, core=core, created_at=created_at, user_id=user_id, source=source, notebook=notebook,
            cell=cell, cell_id=cell_id, code=code, share=share))

    def remember_many(self, records: Iterable[Mapping[str, Any]], *, batch_size: int = 20_000,
                      on_invalid: str = "raise") -> Remembered:
        """Bulk path: one statement per batch; returns the fact_ids in input order.

        `on_invalid="raise"` (the default) writes nothing of a batch with an invalid record and
        names it; "skip" writes the valid ones and lists each skipped record's position and
        reason in the result's `skipped`."""
        return self.writer.remember_many(records, batch_size=batch_size, on_invalid=on_invalid)

    def bulk_write(self):
        """Many batches in a row: the file checkpointed and the index merged once, at the end."""
        return self.writer.bulk_write()

    def revise(self, fact_id: str, *, content: str, title: str | None = None, type: str | None = None,
               tags: str | Iterable[str] | None = None, project: str | None = None,
               user_id: str | None = None) -> Fact:
        """New content for a stored memory (of this Memory's user, or `user_id`): revision_count
        + 1, created_at kept, updated now. A field left out (None) keeps the value it had."""
        return self.writer.revise(fact_id, content=content, title=title, type=type, tags=tags, project=project,
                                  user_id=user_id)

    def pin(self, fact_id: str, core: bool = True, *, user_id: str | None = None) -> Fact:
        """Make a memory a core memory (always in a session's context), or stop it being one."""
        return self.writer.pin(fact_id, core, user_id=user_id)

    def forget(self, fact_id: str) -> Fact:
        """Delete a memory for good; returns what was deleted. The summaries its session's
        close wrote (which may quote it or name what it was about) are written again from the
        session's other memories, so its text is gone from them too."""
        fact = self.writer.own(fact_id, "forget")
        plan, _ = self.sessions.unsummarise([fact.session_id] if fact.kind == "memory" else [])
        self.store.delete(fact_id)
        self.sessions.resummarise(plan)
        self.live.sync()
        self.live.drop_saved()  # its text must not stay in the saved index
        return fact

    def forget_all(self, *, project: str | None = None) -> ForgetReport:
        """Delete for good every memory of this user (only those of `project`, if given): their
        own, shared ones included, never another user's. The session summaries go with them:
        with no project every summary event of the user and the summary lines of their
        sessions (nothing would be left to summarise); with a project, every summary of a
        session that had memories of it (a whole session's summary quotes all its projects),
        those sessions summarised again from what they have left (`ForgetReport.rewritten`).
        Signals and recall showings of what went are deleted with it (the learning counts what
        is left); the index drops them at once and the saved index, which holds their text, is
        removed and saved again. Returns how many memories and summaries went.

        `project=""` is refused (InvalidInput): a project is a name; memories without one are
        not a project, and `forget_all()` without a project forgets everything."""
        self._check_project(project)
        self.working_sets.flush()  # (showings not written yet may name what is about to go)
        plan, gone = ({}, 0) if project is None else self.sessions.unsummarise(
            self.store.sessions_of_project(self.user_id, project), keep_project=project)
        memories, summaries = self.store.forget_all(self.user_id, project)
        rewritten = self.sessions.resummarise(plan)
        self.working_sets.clear()  # (read again from the file when next needed)
        self.live.sync()
        if memories + summaries + gone:
            self.live.drop_saved()  # its text must not stay in the saved index
        return ForgetReport(count=memories, project=project, summaries=summaries + gone, rewritten=rewritten)

    def own_count(self, *, project: str | None = None) -> int:
        """How many memories this user wrote (kind memory, not session summaries; others'
        shared memories are not theirs), only those of `project` if given: what
        `forget_all(project=...)` would delete, in one count."""
        self._check_project(project)
        return self.store.own_count(self.user_id, project)

    @staticmethod
    def _check_project(project: str | None) -> None:
        if project is not None and not isinstance(project, str):
            raise InvalidInput(f"project must be a string or None, not {type_name(project)}")
        if project is not None and not project.strip():
            raise InvalidInput("project must be a non-empty name; forget_all() without project forgets everything")

    @contextlib.contextmanager
    def attached(self):
        """Hold the file only inside this block (several kernels can then share it): opened
        on entry if needed, caught up with other processes' writes, let go on exit."""
        with self.lease.attached():
            yield self

    def detach(self) -> None:
        """Let go of the file between calls (see `attached`)."""
        self.lease.detach()

    # --- reads ------------------------------------------------------------------------------
    def recall(self, query: str, *, session_id: str | None = None, limit: int = 10,
               project: str | None = None, user_id: str | None = None, max_age_days: int | None = None,
               kind: str | None = "auto", type: str | None = None, related: bool = False,
               strict: bool = True) -> RecallResult:
        """The memories that best answer `query`, best first, each with its score's parts.

        With a session id (not a synthetic one), what the session's earlier recalls showed is
        lifted a little, and what this recall shows joins that working set. `max_age_days`
        applies the age gate (older memories stay only with relevance >= 0.70). `kind`: "memory"
        or "summary_event" keeps only those rows, None keeps both; "auto" (the default) brings
        session summaries only to a query about days or sessions ("what did I do last Tuesday",
        "session slm-…"), where they answer, and keeps them from crowding out the memories they
        repeat everywhere else. `type` keeps one memory type ("decision", …, "summary").
        Only memories that match the query themselves come back, by their words or, with the
        meaning channel, by a similar meaning; `strict` (the default) also leaves out a weak word
        match that the meaning does not support (a stray common word), which a session's
        context keeps (`strict=False`). With `related`, the session neighbours of the matches
        follow them, each saying which match it sits beside.
        """
        return self.retrieval.recall(query, session_id=session_id, limit=limit, project=project, user_id=user_id,
                                     max_age_days=max_age_days, kind=kind, type=type, related=related, strict=strict)

    def projects(self) -> list[str]:
        """The projects the memories this user may read are filed under, sorted."""
        return self.store.projects(self.user_id)

    def find_text(self, content: str, *, notebook: str | None = None) -> Fact | None:
        """This user's newest memory written from `notebook` (None: outside one) with this text
        as it would be stored (`<private>` spans redacted; case and spaces as a duplicate is
        told apart), or None: what a cell run again would remember a second time."""
        if not isinstance(content, str):
            return None
        try:
            digest = content_hash(redact(content))
        except UnicodeEncodeError:  # (no memory can hold it: remembering it says why)
            return None
        fact_id = self.store.find_live(self.user_id, content_hash=digest, notebook=notebook)
        return None if fact_id is None else self.get(fact_id)

    def get(self, fact_id: str, *, user_id: str | None = None) -> Fact | None:
        """One memory of this Memory's user (or of `user_id`) by id; None if there is none:
        another user's memory is as absent as one never written."""
        return self.writer.fact(fact_id, user_id=user_id)

    def readable(self, fact_id: str) -> Fact | None:
        """One memory this Memory's user may read: their own, or one its author shared."""
        row = self.store.readable_fact(fact_id, self.user_id) if isinstance(fact_id, str) else None
        return None if row is None else fact_of(row)

    def provenance(self, fact_id: str) -> Provenance | None:
        """Where one memory came from (read on demand: the code is not held in the process)."""
        if not isinstance(fact_id, str):
            return None
        row = self.store.provenance(fact_id, self.user_id)
        return None if row is None else Provenance(fact_id=fact_id, notebook=row[0], cell=row[1], cell_id=row[2],
                                                   code=row[3])

    SHORT_ID = 6  # the fewest characters of an id a person may type

    def resolve_id(self, text: str, *, user_id: str | None = None) -> str:
        """The fact_id that `text` names: a whole id, or a unique prefix of at least 6
        characters (what a person copies from a table). Ambiguous or unknown: InvalidInput."""
        if not isinstance(text, str):
            raise InvalidInput(f"a memory id must be a string, not {type_name(text)}")
        user = self.user_id if user_id is None else user_id
        text = text.strip()
        if not text.isascii():  # (an id is hex: a stray byte typed, or another word, names none)
            raise InvalidInput(f"no memory with id {text.encode('utf-8', 'replace').decode()!r}")
        if self.store.readable_fact(text, user) is not None:  # (own, or shared: rating one is allowed)
            return text
        if len(text) < self.SHORT_ID:
            raise InvalidInput(f"no memory with id {text!r} (give at least {self.SHORT_ID} characters of an id)")
        found = self.store.fact_ids_starting(user, text, 6)
        if not found:
            raise InvalidInput(f"no memory with id {text!r}")
        if len(found) > 1:
            more = ", …" if len(found) > 5 else ""
            raise InvalidInput(f"{text!r} is the start of several ids: {', '.join(found[:5])}{more}; "
                               "give more characters")
        return found[0]

    BROWSE_MAX = 10_000  # the most memories one page may hold

    def browse(self, *, project: str | None = None, type: str | None = None, limit: int = 20,
               offset: int = 0) -> MemoryPage:
        """Every memory this user may read (their own and those shared with them), newest (last
        updated) first, one page at a time: for looking through them without a question.
        `project` and `type` keep only those; `offset` skips that many."""
        if project is not None and not isinstance(project, str):
            raise InvalidInput(f"project must be a string or None, not {type_name(project)}")
        if type is not None and (not isinstance(type, str) or type not in MEMORY_TYPES):
            raise InvalidInput(f"type must be one of {', '.join(MEMORY_TYPES)}; got {type!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= self.BROWSE_MAX:
            raise InvalidInput(f"limit must be an integer from 1 to {self.BROWSE_MAX:,}; got {limit!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInput(f"offset must be a non-negative integer; got {offset!r}")
        rows, total = self.store.browse_rows(self.user_id, project, type, limit, offset)
        return MemoryPage(facts=[fact_of(r) for r in rows], total=total, offset=offset, limit=limit,
                          project=project, type=type, viewer=self.user_id)

    def session_known(self, session_id: str) -> bool:
        """Whether this user ever opened a session with this id (`session_init` or
        `mem_session_start`, here or in any other process): a made-up or mistyped id is not,
        and a face can say so instead of taking it silently."""
        if not isinstance(session_id, str):
            raise InvalidInput(f"session_id must be a string, not {type_name(session_id)}")
        sid = session_id.strip()
        return bool(sid) and self.store.sessions.session_known(sid, self.user_id)

    def session_is_closed(self, session_id: str) -> bool:
        """Whether a session was ended, here or by any other kernel or process."""
        return bool(session_id) and self.store.sessions.session_closed(session_id)

    def status(self, session_id: str | None = None) -> StatusReport:
        st = self.store.user_stats(self.user_id)
        signals = self.store.signals.feedback_count(self.user_id)
        learning = self.learning_status()
        return StatusReport(
            database=self.path, user_id=self.user_id, session_id=session_id, memories=st["observations"],
            summaries=st["summaries"],
            core_memories=len(self.core_memories()), sessions=st["sessions"], feedback_signals=signals,
            learning_phase=learning.phase, learning=learning.status,
            retrieval_mode=self.retrieval_mode, meaning=self.meaning_status(), index=self._index_words())

    @property
    def degraded_reason(self) -> str | None:
        """Why a recall now would skip a channel it should run (None: every one runs)."""
        return self.retrieval.degraded_reason

    @property
    def retrieval_mode(self) -> str:
        """The channels a recall would run now, by name (what RecallResult.retrieval_mode says)."""
        return self.retrieval.mode

    def meaning_status(self) -> str:
        """The meaning channel in a line: its model and how many memories have a vector."""
        if not self.semantic:
            return "off (semantic=False)"
        if self.meaning is None:
            return f"not running: {self.meaning_error}"
        if self.index is None:
            return f"{self.meaning.name}, from the file's vectors (no in-process index)"
        line = f"{self.meaning.name}, vectors for {self.index.vectors.live:,} of {self.index.n_live:,}"
        return f"{line} (the rest are being worked out)" if self.live.fill.running else line

    def _index_words(self) -> str:
        """The replica in a line: where it came from, how far behind the saved file is."""
        r = self.replica
        if r is None:
            return f"none: {self.index_error}"
        if self.path == ":memory:":
            return "in memory only"
        words = "opened from the saved index" if r.source == "saved index" else r.source
        if r.save_error:
            words += f"; the last save failed ({r.save_error})"
        elif r.saved:
            behind = r.seen - r.saved
            words += "; saved, up to date" if behind <= 0 else f"; saved, {behind:,} change{'s' if behind != 1 else ''} since"
        return words

    def count(self, user_id: str | None = None) -> int:
        user = self.user_id if user_id is None else user_id
        return self.store.count(user)


