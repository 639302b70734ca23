"""`Memory`: the engine's public facade, composed of parts held as attributes, each owning its
state: `replica` (the in-process index), `sessions` (API A's lifecycle), `api_b` (the per-user
observations), `learning` (feedback and the learned ranker), `calibration` (answer
confidence), `exchange` (export and import); `store` runs every statement. Memory validates,
writes and recalls, and hands the rest to its parts."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from .index import bulk
from .errors import InvalidInput, StoreError, type_name
from .core.identity import default_user
from .index.meaning import EmbeddingModel, memory_texts
from .index.sparse import SparseIndex
from .results.models import (MEMORY_TYPES, CloseSessionResult, ExportReport, Fact, ForgetReport, ImportReport, LearningStatus,
                     MemoryPage, Observation, ObservationCompact, Provenance, RecallResult, Remembered, SaveResult,
                     Session, SessionInit, SessionStartResponse, Skipped, StatusReport)
from .core.scoring import (RankingConfig)
from .engine.exchange import Exchange
from .engine.recall import Recall
from .engine.settings import Settings
from .ranking.calibration import AnswerCalibration, AnswerConfidence, Judge
from .engine.learning import LearningLoop
from .sessions.api_b import ApiB
from .core.session_ids import is_synthetic_session
from .sessions.api_a import SessionService
from .core.fields import KINDS as _KINDS, TYPE_CODE as _TYPE_CODE
from .index.live import LiveIndex
from .index.replica import IndexReplica
from .index.rows import FactRows, fact_of
from .index.analysis import Postings
from .core.ids import content_hash, content_hashes, new_fact_ids
from .core.clock import epoch_seconds, to_utc_naive
from .core.fields import field_counts, field_grams
from .engine.validate import validate
from .engine.working_sets import WorkingSets
from .storage.backends import is_url, missing_file, open_store
from .storage.columns import FACT_COLUMNS, INSERT_COLUMNS, vector_columns
from .storage.store import utcnow

_ASKS_ABOUT_SESSIONS = re.compile(r"\bsessions?\b|\bwhat did (?:i|we) do\b", re.IGNORECASE)




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
        self._clock = clock or utcnow
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
        self.calibration = AnswerCalibration(self.store, lambda: self.user_id, self.now, judge=judge,
                                             abstain_below=abstain_below)
        self.live = LiveIndex(self.store)
        self.working_sets = WorkingSets(self.store)
        self._sharing = False  # inside `attached`, having opened the file: a long write lets it go between batches
        self.learning = LearningLoop(self)
        self.exchange = Exchange(self)
        self.sessions = SessionService(self)
        self.api_b = ApiB(self)
        self.retrieval = Recall(self.store, self.settings, self.live, self.working_sets, self.learning, self.now)
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
            if self.working_sets.pending and not self.store.connected:
                self.store.connect()
            self.working_sets.flush()
            self.live.save_last()
        finally:
            self.store.close()

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
        return to_utc_naive(self._clock(), utcnow())

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
                 topic_key: str | None = None) -> SaveResult:
        return self.api_b.mem_save(user_id, content, type=type, title=title, topic_key=topic_key)

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
        .jsonl or .parquet file, every field kept; returns how many of each."""
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

    # --- the in-process index (the `live` part; these stay settable, as tests and benchmarks set them) ---
    @property
    def replica(self) -> IndexReplica | None:
        return self.live.replica

    @replica.setter
    def replica(self, replica: IndexReplica | None) -> None:
        self.live.replica = replica

    @property
    def index_error(self) -> str | None:
        return self.live.error

    @index_error.setter
    def index_error(self, why: str | None) -> None:
        self.live.error = why

    # --- what every part reads at call time (settable on the facade: tests and benchmarks do) ---
    @property
    def config(self) -> RankingConfig:
        return self.settings.config

    @config.setter
    def config(self, config: RankingConfig) -> None:
        self.settings.config = config

    @property
    def meaning(self) -> EmbeddingModel | None:
        """The meaning channel's model (None: off, or it did not load)."""
        return self.settings.model

    @meaning.setter
    def meaning(self, model: EmbeddingModel | None) -> None:
        self.settings.model = model

    @property
    def meaning_error(self) -> str | None:
        return self.settings.model_error

    @property
    def semantic(self) -> bool:
        return self.settings.semantic

    @property
    def embedding_model(self) -> str:
        return self.settings.model_name

    @property
    def index(self) -> SparseIndex | None:
        """The replica's sparse index; None when recall runs from SQL (degraded)."""
        return self.live.index

    @property
    def rows(self) -> FactRows:
        return self.live.rows

    def _vectors_of(self, columns: Mapping[str, Sequence]) -> np.ndarray | None:
        """New memories' vectors (validated columns) when the meaning channel runs, else None."""
        if self.meaning is None:
            return None
        return self.meaning.encode(memory_texts(columns["content"], columns["title"], columns["tags"]))

    def _with_vectors(self, columns: dict[str, Any], vecs: np.ndarray | None) -> dict[str, np.ndarray]:
        """The vectors into the columns the store writes (`vec`, `vec_model`); returns what the
        index takes of them ({"vectors": ...}, or {} when there are none)."""
        if vecs is None:
            return {}
        columns.update(vector_columns(vecs, self.meaning.name))
        return {"vectors": vecs}

    def _vector_fields(self, vecs: np.ndarray | None) -> dict[str, Any]:
        """One memory's `vec` and `vec_model` as a row writes them (NULL without the channel)."""
        return {"vec": None if vecs is None else vecs[0].tolist(), "vec_model": None if vecs is None else self.meaning.name}

    # --- writes -----------------------------------------------------------------------------
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
        instead, and a field left out keeps the value it had. `user_id=""` is this Memory's
        user (no row is written under the empty user: store.adopt_unowned)."""
        if user_id == "":
            user_id = None
        if isinstance(topic_key, str) and topic_key:
            user = self.user_id if user_id is None else user_id
            existing = self.store.find_live(user, topic_key=topic_key) if isinstance(user, str) else None
            if existing is not None:
                if share is not None and not isinstance(share, bool):
                    raise InvalidInput(f"share must be True or False, not {type_name(share)}")
                if share is False and self.get(existing, user_id=user).shared:
                    raise InvalidInput(f"memory {existing} under topic {topic_key!r} is shared, and a shared memory "
                                       "cannot be unshared: forget it, then remember it again")
                fact = self.revise(existing, content=content, title=title, type=type, tags=tags, project=project,
                                   user_id=user)
                if core is not None and bool(core) != fact.is_core:
                    fact = self.pin(existing, bool(core), user_id=user)
                if share and not fact.shared:
                    self.store.set_shared(existing)
                    self.live.sync()
                    fact = self.get(existing, user_id=user)
                return fact
        if isinstance(session_id, str) and not is_synthetic_session(session_id) and self.session_is_closed(session_id):
            raise InvalidInput(f"session {session_id} is closed: open a new one (session_init) to remember in")
        cols = validate([dict(content=content, session_id=session_id, tags=tags, project=project, type=type,
                              title=title, topic_key=topic_key, core=core, created_at=created_at,
                              user_id=user_id, source=source, notebook=notebook, cell=cell, cell_id=cell_id,
                              code=code, share=share)],
                        now=self.now(), default_user=self.user_id)
        row = {k: v[0] for k, v in cols.items()}
        counts, length = field_counts(row["content"], row["title"], row["tags"], row["project"], row["type"])
        grams = field_grams(row["content"], row["title"], row["tags"])
        self.working_sets.flush()
        row.update(fact_id=new_fact_ids(1)[0], content_hash=content_hash(row["content"]),
                   revision_count=0, kind="memory", doc_len=length,
                   terms=list(counts.keys()), tfs=list(counts.values()))
        vecs = self._vectors_of(cols)
        row.update(self._vector_fields(vecs))
        self.live.refresh()
        doc_id, changed = self.store.insert_one(row)
        fact = Fact(**{k: row[k] for k in FACT_COLUMNS if k != "tags"}, tags=tuple(row["tags"]))
        n = len(counts)
        self.live.after_write(
            np.array([doc_id], dtype=np.int64), np.array([changed]),
            {"doc_len": [row["doc_len"]], "updated": [epoch_seconds(row["updated_at"])], "revision_count": [0],
             "user_id": [row["user_id"]], "project": [row["project"]], "is_core": [row["is_core"]],
             "shared": [row["shared"]], "kind": ["memory"], "type": [row["type"]], "session_id": [row["session_id"]],
             "g_doc": np.full(len(grams), doc_id), "g_gram": np.fromiter(grams.keys(), np.int64, len(grams)),
             "g_tf": np.fromiter(grams.values(), np.int64, len(grams)), **({} if vecs is None else {"vectors": vecs})},
            np.full(n, doc_id, dtype=np.int64), np.fromiter(counts.keys(), np.int64, n),
            np.fromiter(counts.values(), np.int64, n), facts=[fact])
        sid = row["session_id"]
        if sid and not is_synthetic_session(sid) and self.working_sets.of(sid):
            self.learning.implicit_used(sid, list(counts.keys()), int(doc_id), fact.user_id)
        return fact

    def remember_many(self, records: Iterable[Mapping[str, Any]], *, batch_size: int = 20_000,
                      on_invalid: str = "raise") -> Remembered:
        """Bulk path: one statement per batch; returns the fact_ids in input order.

        `on_invalid="raise"` (the default) writes nothing of a batch with an invalid record and
        names it; "skip" writes the valid ones and lists each skipped record's position and
        reason in the result's `skipped`."""
        if on_invalid not in ("raise", "skip"):
            raise InvalidInput(f"on_invalid must be 'raise' or 'skip'; got {on_invalid!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInput(f"batch_size must be a positive integer; got {batch_size!r}")
        ids: list[str] = []
        skipped: list[Skipped] = []

        def prepared():  # validated batches (or the error to raise once the batches before it are stored)
            batch: list[Mapping[str, Any]] = []
            start = 0
            for rec in records:
                batch.append(rec)
                if len(batch) >= batch_size:
                    yield self._prepared(batch, start, on_invalid, skipped)
                    start += len(batch)
                    batch = []
            if batch:
                yield self._prepared(batch, start, on_invalid, skipped)

        columns_of = lambda b: b if isinstance(b, dict) else None
        size_of = lambda b: len(b["content"]) if isinstance(b, dict) else 0
        in_flight: list[Callable[[], list[str]]] = []  # the batch inserted while the next is read and analysed

        def settle() -> None:
            while in_flight:
                ids.extend(in_flight.pop()())

        with self.bulk_write() as writer:
            try:
                for columns, post, last in bulk.analysed(prepared(), columns_of, size_of):
                    settle()
                    if isinstance(columns, InvalidInput):
                        raise columns
                    if columns is not None:
                        in_flight.append(self._store_later(columns, post, writer=writer))
                    if not last and self._sharing:  # (the file is let go: nothing in flight)
                        settle()
                        self._yield_file()
                settle()
            finally:  # (an error after a batch was handed over: that batch is still indexed)
                with contextlib.suppress(Exception):  # (its own error, if any, was raised already)
                    settle()
        self.live.save_soon()
        return Remembered(ids, skipped=skipped)

    @contextlib.contextmanager
    def bulk_write(self):
        """Many batches in a row: the file checkpointed and the index merged once, at the end.
        Yields a writer thread for `_store_later`: DuckDB lets go of the GIL while it inserts, so
        a batch is written and indexed while the next one is checked and its postings are taken
        from the analysis worker."""
        with self.store.bulk(), (self.replica.bulk_write() if self.replica is not None else contextlib.nullcontext()), \
                concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="slm-bulk-insert") as writer:
            yield writer

    def _prepared(self, batch: Sequence[Mapping[str, Any]], start: int, on_invalid: str,
                  skipped: list[Skipped]) -> dict[str, Any] | InvalidInput | None:
        """One batch validated into columns; with "skip", its invalid records are set aside
        (found one by one only when the batch as a whole does not validate), None if none is
        left. With "raise", the error (returned, to be raised in its turn)."""
        if on_invalid == "skip":
            try:
                validate(batch, now=self.now(), default_user=self.user_id, offset=start)
            except InvalidInput:
                good = []
                for i, rec in enumerate(batch):
                    try:
                        validate([rec], now=self.now(), default_user=self.user_id)
                        good.append(rec)
                    except InvalidInput as exc:
                        skipped.append(Skipped(position=start + i, reason=str(exc)))
                batch = good
            if not batch:
                return None
        try:
            return self._columns(batch, offset=start)
        except InvalidInput as exc:
            return exc

    def _columns(self, records: Sequence[Mapping[str, Any]], type_override: str | None = None,
                 offset: int = 0) -> dict[str, Any]:
        columns: dict[str, Any] = validate(records, now=self.now(), default_user=self.user_id,
                                           offset=offset if len(records) > 1 or offset else None)
        if type_override is not None:  # internal writes of a reserved type ("summary")
            columns["type"] = [type_override] * len(columns["content"])
        if "" in columns["user_id"]:  # (the empty user is nobody: this Memory's user, as in remember)
            columns["user_id"] = [u or self.user_id for u in columns["user_id"]]
        if self.meaning is not None and self.meaning.path and self.replica is not None:
            columns["embed_model"] = self.meaning.path  # (the vectors come with the postings)
        return columns

    def _write_many(self, records: Sequence[Mapping[str, Any]], kind: str = "memory",
                    type_override: str | None = None, offset: int = 0) -> list[str]:
        return self._store_many(self._columns(records, type_override, offset), None, kind)

    def _store_many(self, columns: dict[str, Any], post: Postings | None, kind: str = "memory") -> list[str]:
        """Insert validated columns (with their postings, else analysed here) and index them."""
        return self._store_later(columns, post, kind)()

    def _store_later(self, columns: dict[str, Any], post: Postings | None, kind: str = "memory",
                     writer: concurrent.futures.Executor | None = None) -> Callable[[], list[str]]:
        """`_store_many` in two steps: the batch is inserted and indexed now, or in `writer` when
        given, and what this returns waits for that and gives its fact_ids."""
        import pyarrow as pa

        contents = columns["content"]
        n = len(contents)
        if post is None:
            post = Postings.of_columns(columns)
        terms_col, tfs_col = post.list_columns()
        fact_ids = new_fact_ids(n)
        columns["cell"] = pa.array(columns["cell"], type=pa.int32())
        columns.update(
            fact_id=fact_ids, content_hash=post.content_hashes or content_hashes(contents),
            revision_count=np.zeros(n, dtype=np.int32), kind=[kind] * n,
            doc_len=post.doc_len, terms=terms_col, tfs=tfs_col,
        )
        # each stored column as Arrow once, for the insert and for the index's rows
        arrow = {c: v if isinstance(v, (pa.Array, pa.ChunkedArray)) else pa.array(v)
                 for c, v in ((c, columns[c]) for c in INSERT_COLUMNS)}
        # (from the analysis, else here, while the writer thread inserts the batch before)
        vectors = self._with_vectors(arrow, post.vectors if post.vectors is not None else self._vectors_of(columns))
        self.live.refresh()
        self.working_sets.flush()
        def insert_and_index() -> list[str]:  # (one step under the lock: no catch-up sees it half done)
            with self.store.lock:
                return self._stored(self.store.insert_many(arrow), fact_ids, columns, arrow, post, vectors)

        if writer is None:
            done = insert_and_index()
            return lambda: done
        return writer.submit(insert_and_index).result

    def _stored(self, got: Mapping[str, np.ndarray], fact_ids: list[str], columns: dict[str, Any],
                arrow: dict[str, Any], post: Postings, vectors: dict[str, np.ndarray]) -> list[str]:
        """A batch the store took: into the index, in input order."""
        import pyarrow as pa

        n = len(fact_ids)
        returned = got["fact_id"].tolist()
        doc_ids, changed = got["doc_id"].astype(np.int64), got["changed"].astype(np.int64)
        if returned != fact_ids:  # (in input order, as DuckDB returns them, there is nothing to do)
            where = dict(zip(returned, range(n)))
            order = np.fromiter((where[f] for f in fact_ids), dtype=np.int64, count=n)
            doc_ids, changed = doc_ids[order], changed[order]
        created = arrow["created_at"].cast(pa.timestamp("us")).to_numpy().astype(np.int64) / 1e6
        meta = {"doc_len": columns["doc_len"], "updated": created, "revision_count": columns["revision_count"],
                "user_id": columns["user_id"], "project": columns["project"], "is_core": columns["is_core"],
                "shared": columns["shared"], "kind": columns["kind"], "type": columns["type"],
                "session_id": columns["session_id"],
                "g_doc": np.repeat(doc_ids, post.glengths), "g_gram": post.grams, "g_tf": post.gtfs, **vectors}
        if post.term_keys is not None:
            meta.update(t_keys=post.term_keys, t_of=post.term_of, g_keys=post.gram_keys, g_of=post.gram_of,
                        g_holders=post.gram_holders)
        table = pa.table({"doc_id": doc_ids, **{name: arrow[name] for name in FACT_COLUMNS}})
        self.live.after_write(doc_ids, changed, meta, np.repeat(doc_ids, post.lengths), post.terms, post.tfs,
                          rows_table=table)
        return fact_ids

    def revise(self, fact_id: str, *, content: str, title: str | None = None, type: str | None = None,
               tags: str | Iterable[str] | None = None, project: str | None = None,
               user_id: str | None = None) -> Fact:
        """New content for a stored memory (of this Memory's user, or `user_id`): revision_count
        + 1, created_at kept, updated now. A field left out (None) keeps the value it had."""
        current = self.get(fact_id, user_id=user_id)
        if current is None:
            raise InvalidInput(f"no memory with id {fact_id!r}")
        now = self.now()
        cols = validate([{"content": content, "title": current.title if title is None else title,
                          "type": current.type if type is None else type,
                          "tags": list(current.tags) if tags is None else tags,
                          "project": current.project if project is None else project}],
                        now=now, default_user=current.user_id)
        row = {k: v[0] for k, v in cols.items()}
        counts, length = field_counts(row["content"], row["title"], row["tags"], row["project"], row["type"])
        vecs = self._vectors_of(cols)  # (the old vector is of the old text: replaced, else cleared)
        self.store.revise(fact_id, {
            "content": row["content"], "content_hash": content_hash(row["content"]),
            "title": row["title"], "type": row["type"], "tags": row["tags"], "project": row["project"],
            "terms": list(counts.keys()), "tfs": list(counts.values()), "doc_len": length, "updated_at": now,
            **self._vector_fields(vecs)})
        self.live.sync()
        self.learning.after_showing(fact_id, "revised", current.user_id)
        return self.get(fact_id, user_id=current.user_id)

    def pin(self, fact_id: str, core: bool = True, *, user_id: str | None = None) -> Fact:
        """Make a memory a core memory (always in a session's context), or stop it being one."""
        if self.get(fact_id, user_id=user_id) is None or not self.store.set_core(fact_id, bool(core)):
            raise InvalidInput(f"no memory with id {fact_id!r}")
        self.live.sync()
        fact = self.get(fact_id, user_id=user_id)
        if core:
            self.learning.after_showing(fact_id, "pinned", fact.user_id)
        return fact

    def forget(self, fact_id: str) -> Fact:
        """Delete a memory for good; returns what was deleted. The summaries its session's
        close wrote (which may quote it or name what it was about) are written again from the
        session's other memories, so its text is gone from them too."""
        fact = self.get(fact_id) if isinstance(fact_id, str) else None
        if fact is None:
            raise InvalidInput(f"no memory with id {fact_id!r}")
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
        opened = not self.store.connected
        if opened:
            self.store.connect()
            self._sharing = True
        try:
            if self.index is None:  # degraded earlier: try the index again
                self.live.load(self.config.k1, self.config.b, self.meaning)
            self.live.refresh()
            yield self
        finally:
            if opened:
                self._sharing = False
                try:
                    if self.working_sets.pending >= WorkingSets.PENDING_MAX // 4:
                        self.working_sets.flush()  # (a few showings wait for the next write or close)
                    self.live.save_soon()
                finally:
                    self.store.disconnect()

    def _yield_file(self) -> None:
        """Between batches of a long write inside `attached`: let a waiting kernel in."""
        self.working_sets.flush()
        self.store.disconnect()
        time.sleep(0.25)  # longer than a waiting kernel's backoff step
        self.store.connect()
        self.live.refresh()

    def detach(self) -> None:
        """Let go of the file between calls (see `attached`)."""
        if self.store.connected:
            self.working_sets.flush()
            self.live.save_soon()
        self.store.disconnect()

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
        if type is not None and (not isinstance(type, str) or type not in _TYPE_CODE):
            raise InvalidInput(f"type must be one of {', '.join(_TYPE_CODE)}; got {type!r}")
        if kind is not None and kind != "auto" and kind not in _KINDS:
            raise InvalidInput(f"kind must be one of auto, {', '.join(_KINDS)}; got {kind!r}")
        user = self.user_id if user_id is None else str(user_id)
        return self.retrieval.recall(query, user=user, session_id=session_id, limit=limit, project=project,
                                     max_age_days=max_age_days, kind=kind, type=type, related=related, strict=strict)

    def get(self, fact_id: str, *, user_id: str | None = None) -> Fact | None:
        """One memory of this Memory's user (or of `user_id`) by id; None if there is none:
        another user's memory is as absent as one never written."""
        if not isinstance(fact_id, str):
            return None
        if user_id is not None and not isinstance(user_id, str):
            raise InvalidInput(f"user_id must be a string, not {type(user_id).__name__}")
        user = self.user_id if user_id is None else user_id
        row = self.store.fact(fact_id, user)
        return None if row is None else fact_of(row)

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
        return StatusReport(
            database=self.path, user_id=self.user_id, session_id=session_id, memories=st["observations"],
            summaries=st["summaries"],
            core_memories=len(self.core_memories()), sessions=st["sessions"], feedback_signals=signals,
            learning_phase=self.learning_status().phase,
            retrieval_mode=self.retrieval_mode, meaning=self.meaning_status(), index=self._index_words())

    @property
    def degraded_reason(self) -> str | None:
        """Why a recall now would skip a channel it should run (None: every one runs)."""
        return self.index_error if self.index is None else self.meaning_error

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
        return f"{self.meaning.name}, vectors for {self.index.vectors.live:,} of {self.index.n_live:,}"

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


