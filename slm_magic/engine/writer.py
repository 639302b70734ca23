"""The write path: one memory (`remember`, made recallable at once), many (`remember_many`, a
bulk write whose batches are checked, analysed by the worker and inserted while the next is
read), a revision and a pin; each into the file first, then into the kernel's index. A part of
`Memory`, held as `memory.writer`."""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ..core.clock import epoch_seconds
from ..core.fields import field_counts, field_grams
from ..core.ids import content_hash, content_hashes, new_fact_ids
from ..core.session_ids import is_synthetic_session
from ..errors import InvalidInput, type_name
from ..index import bulk
from ..index.analysis import Postings
from ..index.live import LiveIndex
from ..index.meaning import memory_texts
from ..index.rows import fact_of
from ..results.models import Fact, Remembered, Skipped
from ..storage.columns import FACT_COLUMNS, INSERT_COLUMNS, vector_columns
from .lease import Lease
from .settings import Settings
from .validate import validate
from .working_sets import WorkingSets


#: Where a memory's text came from: a topic revised from elsewhere takes the new text's.
PROVENANCE = ("source", "notebook", "cell", "cell_id", "code")


class Writer:
    #: The first this many memories of one bulk write get their vectors with their words; the
    #: rest are stored and searchable by their words first, their vectors following in the
    #: background (index/fill.py): a million-memory import runs near the words' own pace,
    #: and a store of the usual size is whole by meaning as soon as the write returns.
    VECTORS_INLINE = 200_000

    def __init__(self, store, settings: Settings, live: LiveIndex, working_sets: WorkingSets, learning, lease: Lease,
                 clock: Callable[[], datetime], user_id: str):
        self.store = store
        self.settings = settings
        self.live = live
        self.working_sets = working_sets
        self.learning = learning
        self.lease = lease
        self.now = clock
        self.user_id = user_id

    def fact(self, fact_id: str, *, user_id: str | None = None) -> Fact | None:
        """One memory of this user (or of `user_id`), as `Memory.get` reads it (None: no such
        memory of theirs, or not an id at all)."""
        if not isinstance(fact_id, str):
            return None
        if user_id is not None and not isinstance(user_id, str):
            raise InvalidInput(f"user_id must be a string, not {type_name(user_id)}")
        row = self.store.fact(fact_id, self.user_id if user_id is None else user_id)
        return None if row is None else fact_of(row)

    def own(self, fact_id: str, action: str, *, user_id: str | None = None) -> Fact:
        """The user's own memory, for what only its author may do (`action`: "revise", "pin",
        "forget"); one someone shared with them says whose it is, not that there is none."""
        fact = self.fact(fact_id, user_id=user_id)
        if fact is not None:
            return fact
        row = self.store.readable_fact(fact_id, self.user_id if user_id is None else user_id) \
            if isinstance(fact_id, str) else None
        if row is not None:
            raise InvalidInput(f"memory {fact_id} is {fact_of(row).user_id}'s, shared with you: only its author can "
                               f"{action} it")
        raise InvalidInput(f"no memory with id {fact_id!r}")

    def vectors_of(self, columns: Mapping[str, Sequence]) -> np.ndarray | None:
        """New memories' vectors (validated columns) when the meaning channel runs, else None;
        None too for a batch stored words first, whose vectors follow it (index/fill.py)."""
        if self.settings.model is None or columns.get("words_first"):
            return None
        return self.settings.model.encode(memory_texts(columns["content"], columns["title"], columns["tags"]))

    def with_vectors(self, columns: dict[str, Any], vecs: np.ndarray | None) -> dict[str, np.ndarray]:
        """The vectors into the columns the store writes (`vec`, `vec_model`); returns what the
        index takes of them ({"vectors": ...}, or {} when there are none)."""
        if vecs is None:
            return {}
        columns.update(vector_columns(vecs, self.settings.model.name))
        return {"vectors": vecs}

    def _vector_fields(self, vecs: np.ndarray | None) -> dict[str, Any]:
        """One memory's `vec` and `vec_model` as a row writes them (NULL without the channel)."""
        if vecs is None:
            return {"vec": None, "vec_model": None}
        return {"vec": vecs[0].tolist(), "vec_model": self.settings.model.name}

    def remember(self, record: dict[str, Any]) -> Fact:
        """`Memory.remember` of one record (its arguments by name, as `remember_many` takes
        them): stored, and recallable at once; under a topic a live memory has, that memory
        revised instead."""
        user_id, topic_key, session_id = record.get("user_id"), record.get("topic_key"), record.get("session_id")
        if user_id == "":
            user_id = None
        if isinstance(topic_key, str) and topic_key:
            user = self.user_id if user_id is None else user_id
            existing = self.store.find_live(user, topic_key=topic_key) if isinstance(user, str) else None
            if existing is not None:
                return self._revise_topic(existing, topic_key, user, **{k: record.get(k) for k in (
                    "content", "title", "type", "tags", "project", "core", "share")},
                    provenance=self._provenance(record))
        if isinstance(session_id, str) and not is_synthetic_session(session_id) \
                and self.store.sessions.session_closed(session_id):
            raise InvalidInput(f"session {session_id} is closed: open a new one (session_init) to remember in")
        cols = validate([{**record, "user_id": user_id}], now=self.now(), default_user=self.user_id)
        row = {k: v[0] for k, v in cols.items()}
        counts, length = field_counts(row["content"], row["title"], row["tags"], row["project"], row["type"])
        grams = field_grams(row["content"], row["title"], row["tags"])
        self.working_sets.flush()
        row.update(fact_id=new_fact_ids(1)[0], content_hash=content_hash(row["content"]),
                   revision_count=0, kind="memory", doc_len=length,
                   terms=list(counts.keys()), tfs=list(counts.values()))
        vecs = self.vectors_of(cols)
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
            # (by what it says, not by the labels it shares: a project's tags are on every memory of it)
            said, _ = field_counts(row["content"], row["title"])
            self.learning.implicit_used(sid, list(said.keys()), int(doc_id), fact.user_id)
        return fact

    @staticmethod
    def _provenance(record: dict[str, Any]) -> dict[str, Any] | None:
        """Where a record's text came from, if the call says (a notebook's cell, the assistant,
        the console): then it replaces where a revised memory's text came from; else None."""
        given = {k: record.get(k) for k in PROVENANCE}
        return None if all(v is None for v in given.values()) else given

    def _revise_topic(self, existing: str, topic_key: str, user: str, *, content, title, type, tags, project, core,
                      share, provenance: dict[str, Any] | None) -> Fact:
        """`remember` under a topic a live memory already has: that memory revised, a field left
        out keeping its value; where it came from is where the new text came from, if the call
        says (`_provenance`); pinned or shared as asked (a shared memory is never unshared)."""
        if share is not None and not isinstance(share, bool):
            raise InvalidInput(f"share must be True or False, not {type_name(share)}")
        if share is False and self.fact(existing, user_id=user).shared:
            raise InvalidInput(f"memory {existing} under topic {topic_key!r} is shared, and a shared memory "
                               "cannot be unshared: forget it, then remember it again")
        fact = self.revise(existing, content=content, title=title, type=type, tags=tags, project=project, user_id=user,
                           provenance=provenance)
        if core is not None and bool(core) != fact.is_core:
            fact = self.pin(existing, bool(core), user_id=user)
        if share and not fact.shared:
            self.store.set_shared(existing)
            self.live.sync()
            fact = self.fact(existing, user_id=user)
        return fact

    def remember_many(self, records: Iterable[Mapping[str, Any]], *, batch_size: int = 20_000,
                      on_invalid: str = "raise") -> Remembered:
        """`Memory.remember_many`: one statement per batch, the next batch checked and analysed
        while this one is inserted."""
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
                    if not last and self.lease.sharing:  # (the file is let go: nothing in flight)
                        settle()
                        self.lease.yield_file()
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
        with self.store.bulk(), (self.live.replica.bulk_write() if self.live.replica is not None else contextlib.nullcontext()), \
                concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="slm-bulk-insert") as writer:
            yield writer
        self.live.fill.start()  # (the vectors of its large batches, in the background)

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
        columns["words_first"] = offset >= self.VECTORS_INLINE
        if self.settings.model is not None and self.settings.model.path and self.live.replica is not None \
                and not columns["words_first"]:
            columns["embed_model"] = self.settings.model.path  # (the vectors come with the postings)
        return columns

    def write_many(self, records: Sequence[Mapping[str, Any]], kind: str = "memory",
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
        vectors = self.with_vectors(arrow, post.vectors if post.vectors is not None else self.vectors_of(columns))
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
               user_id: str | None = None, provenance: dict[str, Any] | None = None) -> Fact:
        """`Memory.revise`: the new content into the file, the index caught up, a signal if a
        recall showed it lately (`provenance`: where the new text came from, the PROVENANCE
        fields, checked with it; None keeps where the memory came from)."""
        current = self.own(fact_id, "revise", user_id=user_id)
        now = self.now()
        cols = validate([{"content": content, "title": current.title if title is None else title,
                          "type": current.type if type is None else type,
                          "tags": list(current.tags) if tags is None else tags,
                          "project": current.project if project is None else project, **(provenance or {})}],
                        now=now, default_user=current.user_id)
        row = {k: v[0] for k, v in cols.items()}
        counts, length = field_counts(row["content"], row["title"], row["tags"], row["project"], row["type"])
        vecs = self.vectors_of(cols)  # (the old vector is of the old text: replaced, else cleared)
        self.store.revise(fact_id, {
            "content": row["content"], "content_hash": content_hash(row["content"]),
            "title": row["title"], "type": row["type"], "tags": row["tags"], "project": row["project"],
            "terms": list(counts.keys()), "tfs": list(counts.values()), "doc_len": length, "updated_at": now,
            **self._vector_fields(vecs), **({k: row[k] for k in PROVENANCE} if provenance is not None else {})})
        self.live.sync()
        self.learning.after_showing(fact_id, "revised", current.user_id)
        return self.fact(fact_id, user_id=current.user_id)

    def pin(self, fact_id: str, core: bool = True, *, user_id: str | None = None) -> Fact:
        """Make a memory a core memory (always in a session's context), or stop it being one."""
        self.own(fact_id, "pin" if core else "unpin", user_id=user_id)
        if not self.store.set_core(fact_id, bool(core)):
            raise InvalidInput(f"no memory with id {fact_id!r}")
        self.live.sync()
        fact = self.fact(fact_id, user_id=user_id)
        if core:
            self.learning.after_showing(fact_id, "pinned", fact.user_id)
        return fact
