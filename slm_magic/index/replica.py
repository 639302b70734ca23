"""The in-process replica of the file's index: the sparse index, the displayable rows and the
change stamp it has caught up to. It loads from the file, catches up with what other
connections and processes wrote, and takes in this process's own writes; nothing else changes
it. A failure of the file or the machine while it works reaches `Memory`, which then answers
from SQL (and builds a new replica on its next attach).
"""

from __future__ import annotations

import contextlib
import os
import threading
from itertools import repeat
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import bulk, index_file
from .sparse import SparseIndex
from .meaning import FILL_FROM, EmbeddingModel, fact_texts, memory_texts
from ..core.fields import KINDS, TYPE_CODE
from ..results.models import Fact
from .analysis import Postings
from .rows import FactRows
from ..core.session_ids import is_synthetic_session
from ..storage.columns import FACT_COLUMNS
from ..storage.store import Store



def chain(session_id: str, user_id: str) -> str:
    """The key of one author's memories in a session: a session's neighbours are its author's
    own (another user's shared memory under the same session id never joins them)."""
    return f"{session_id}\x1f{user_id}"


class IndexReplica:
    """The index, the rows and the stamp they reflect, for one store."""

    LOAD_CHUNK = 100_000  # memories per step when building the index at open (bounds peak RAM)

    # A saved index (index_file.py) pays off from this many memories; below, a rebuild is quick.
    SAVE_MIN_DOCS = 5_000
    # Save again once this share of the memories changed since the saved stamp (or 1,000).
    SAVE_AFTER_CHANGES = 0.05

    def __init__(self, store: Store, k1: float, b: float, embedder: EmbeddingModel | None = None):
        self.store = store
        self.index = SparseIndex(k1, b)
        self.embedder = embedder                # the meaning channel's model (None: the channel is off)
        if embedder is not None:
            self.index.vectors.reset(embedder.dims, embedder.name)
        self.rows = FactRows()
        self.seen = 0                           # highest change stamp reflected here
        self.session_last: dict[str, int] = {}  # chain(session, author) -> its last memory's doc id
        self.saved = 0                          # stamp of the saved index file (0: none we know of)
        self.source = "new"                     # "saved index" (mapped) or "rebuilt", and why
        self._saver: threading.Thread | None = None
        self._publishing = threading.Lock()     # a save's rename against a forget's removal
        self._forgot = 0                        # stamp of the latest forget (older saves are dropped)
        self.save_error: str | None = None
        # Rows of the empty user were taken in (an older slm_magic, started before the file was
        # upgraded, still writes them): `Memory` gives them to the default user, then clears it.
        self.unowned = False
        # Memories left without vectors for the fill (index/fill.py) to work out in the background,
        # and how many vectors it put in since the saved index (they too make a save worth it).
        self.unvectored = False
        self.filled = self.filled_saved = 0
        self.writing = 0  # bulk writes under way
        # Why the saved index this replica mapped turned out damaged, once its large blobs were
        # checked after the open (`LiveIndex` then builds the index again from the file).
        self.damaged: str | None = None
        self._checker: threading.Thread | None = None
        self._pending_check: tuple | None = None

    @classmethod
    def load(cls, store: Store, k1: float, b: float, embedder: EmbeddingModel | None = None) -> "IndexReplica":
        """The replica of the whole file: its saved index mapped and caught up, else rebuilt."""
        def attempt() -> "IndexReplica":  # (a fresh one each time: a load cut short is started again)
            replica = cls(store, k1, b, embedder)
            replica._load()
            return replica
        return store.consistent(attempt, bulk=True)

    def _load(self) -> None:
        store, k1, b = self.store, self.index.k1, self.index.b
        newest = store.max_change()
        path = None if store.index_stem is None else index_file.path_for(store.index_stem)
        if path is not None:
            index_file.remove_leftovers(path)
            try:
                got = index_file.read(path, schema=store.schema_version(), identity=store.identity(),
                                      newest=newest, k1=k1, b=b, holds=store.holds)
            except index_file.Stale as exc:
                self.source = f"rebuilt ({exc})"
                index_file.discard(path, exc)  # never to be taken later
            else:
                self.index, self.rows, self.session_last = got.index, got.rows, got.session_last
                self._check_later(got.check_rest, path)
                if self.embedder is not None and self.index.vectors.model != self.embedder.name:
                    # saved with another model (or none): its vectors are never compared with ours
                    self.index.vectors.reset(self.embedder.dims, self.embedder.name)
                    self.embed_missing(later=True)
                self.seen = self.saved = got.stamp
                self.source = "saved index"
                self._note_unowned(None)
                if newest > got.stamp:  # what was written after the save
                    self.seen = max(self.seen, self.apply_changes(got.stamp))
                self.index.vectors.settle()
                self.unvectored |= bool(self.vectorless().size)  # (a fill the last kernel left unfinished)
                store.caught_up(self.seen)
                return
        self.seen = newest
        self.apply_changes(0, whole=True)
        self.index.vectors.settle()  # (the cells of the meaning search, once for the whole load)
        self._note_unowned(None)
        store.caught_up(self.seen)

    def _check_later(self, check_rest, path: str) -> None:
        """The large blobs' hashes (index_file.CHECK_LATER_FROM), checked in a thread of their own
        once the first call is answered (`start_checks`: reading them beside a recall's first
        page-ins slowed it), or before a save, which must not copy a damaged blob."""
        self._pending_check = (check_rest, path, os.stat(path).st_ino)

    def start_checks(self) -> None:
        if self._pending_check is None:
            return
        (check_rest, path, inode), self._pending_check = self._pending_check, None

        def run() -> None:
            try:
                bad = check_rest()
            except (OSError, ValueError) as exc:  # (the map went away under it: a damaged file too)
                bad = f"{type(exc).__name__}: {exc}"
            except RuntimeError:  # (the interpreter is shutting down and takes no new threads: no verdict)
                return
            if bad is None:
                return
            self.damaged = f"the saved index was damaged ({bad})"
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino == inode:  # (not a newer save put there since)
                    index_file.discard(path, index_file.Stale(self.damaged))
        self._checker = threading.Thread(target=run, name="slm-magic-check-index", daemon=True)
        self._checker.start()

    def wait_checked(self) -> None:
        """Wait for the saved index's late checks (`damaged` says what they found)."""
        self.start_checks()
        if self._checker is not None:
            self._checker.join()

    def _note_unowned(self, users: np.ndarray | None) -> None:
        """Whether rows of the empty user are in: among these user codes (rows just taken in),
        or (None) among the live documents. Free when no row ever had that user: its code
        does not exist."""
        empty = self.index.lookup_code("user", "")
        if empty < 0:
            return
        if users is None:
            t = self.index.docs
            users = t.user[:t.size][t.alive[:t.size]]
        if np.any(users == empty):
            self.unowned = True

    # --- the saved index ----------------------------------------------------------------------
    def worth_saving(self) -> bool:
        """Enough memories, and enough changed since the saved index, to save it (again)."""
        n = self.index.n_live
        if self.store.index_stem is None or n < self.SAVE_MIN_DOCS:
            return False
        enough = max(1_000, self.SAVE_AFTER_CHANGES * n)
        return not self.saved or self.seen - self.saved >= enough or self.filled - self.filled_saved >= enough

    def save(self, *, background: bool = False) -> None:
        """Write the saved index as of now: a snapshot under the lock, then the file (in a
        thread of its own with `background`; one saver at a time)."""
        if self.damaged:
            return
        if self._saver is not None and self._saver.is_alive():
            if not background:
                self._saver.join()
            else:
                return
        with self.store.lock:
            snap = index_file.snapshot(self.index, self.rows, self.session_last, stamp=self.seen,
                                       schema=self.store.schema_version(), identity=self.store.identity(),
                                       last=self.store.last_memory())
            filled = self.filled
        path = index_file.path_for(self.store.index_stem)
        mode = self.store.index_mode()

        def publish(rename) -> bool:
            with self._publishing:  # (against a forget between this check and the rename)
                if self._forgot > snap.stamp:
                    return False
                rename()
                return True

        def run() -> None:
            self.wait_checked()  # (a blob found damaged is never copied into a new save)
            if self.damaged:
                return
            try:
                done = index_file.write(snap, path, mode or 0o600, publish)
            except Exception as exc:  # noqa: BLE001 - a failed save costs the next open time only (a full disk, a bug)
                self.save_error = f"{type(exc).__name__}: {exc}"
            else:
                self.save_error = None
                if not done:  # a memory was forgotten while it was written: saved again later
                    return
            # (after a failure too: the next try waits for as many changes as a save would)
            self.saved = max(self.saved, snap.stamp)
            self.filled_saved = max(self.filled_saved, filled)

        if background:
            # (not a daemon: a process that ends while it saves finishes the file first)
            self._saver = threading.Thread(target=run, name="slm-magic-save-index")
            self._saver.start()
        else:
            run()

    def drop_saved(self) -> None:
        """Remove the saved index now (it holds a forgotten memory's text) and save a new one
        without it. A save already running, from before the forget, is not published; the
        next chance to save (this one, or when the file is let go) saves again."""
        with self._publishing:
            self._forgot = self.seen
            with contextlib.suppress(OSError):
                os.unlink(index_file.path_for(self.store.index_stem))
            self.saved = 0
        if self.worth_saving():
            self.save(background=True)  # (skipped while the old save runs: it ends unpublished)

    def wait_saved(self) -> None:
        """Wait for a save running in the background (before the process lets go of the file)."""
        if self._saver is not None:
            self._saver.join()

    def refresh(self) -> None:
        """Catch up with writes another connection or process made since we last looked."""
        if self.store.changed_elsewhere():
            self.sync()

    def sync(self) -> None:
        """Apply every change after the highest stamp we have seen (cheap when there is none)."""
        self.store.consistent(self._sync)

    def _sync(self) -> None:
        store = self.store
        top = store.last_change()
        if top > self.seen:
            self.seen = max(self.seen, self.apply_changes(self.seen))
            self.index.vectors.settle()
            if store.dialect.stamps_in_commit_order:  # every stamp up to top has committed: none is missed
                self.seen = max(self.seen, top)
        store.caught_up(self.seen)

    def apply_changes(self, since: int, whole: bool = False) -> int:
        """Bring the index and the rows up to date with everything changed after `since`;
        returns the newest change stamp applied."""
        store, index = self.store, self.index
        if whole:  # a whole load: one bounded range of doc ids at a time, then the links
            vocab = store.vocabulary()
            index.set_vocabulary(vocab["term"], vocab["df"])
            lo, hi = store.doc_bounds()
            ranges = [(start, start + self.LOAD_CHUNK - 1) for start in range(lo, hi + 1, self.LOAD_CHUNK)]
            # (a model the analysis worker cannot run takes the vectors the writers stored)
            stored = self.embedder is not None and self._embed_model is None
            fetched = ((docs, store.fact_rows(0, docs, vectors=stored)) for docs in ranges)
            # the next range's 3-grams are worked out in the analysis worker while this one loads
            for (docs, rows), grams, _ in bulk.analysed(fetched, lambda b: _text_of(b[1], self._embed_model),
                                                        lambda b: b[1].num_rows):
                self._load_rows(docs, rows, grams)
            links = store.session_links()
            real = np.array([not is_synthetic_session(x) for x in links["session_id"]], dtype=bool)
            index.link_pairs(links["prev_doc"][real], links["doc_id"][real])
            self.session_last = {chain(s, u): d for s, u, d in store.session_ends() if not is_synthetic_session(s)}
            index.recompute_norms()
        else:
            tombs = store.tombstones(since)
            replaced = {int(new): int(old) for old, new, _, _ in tombs if new is not None}
            newest = self._apply_delta(since, store.changes(since), replaced)
            for old, new, terms, _ in tombs:
                self._retire(int(old), None if new is None else int(new), terms)
            return max([since, newest, *(int(c) for *_, c in tombs)])
        return since

    # --- the meaning channel ----------------------------------------------------------------------
    @property
    def _embed_model(self) -> str | None:
        """The table the analysis of stored rows embeds them with (None: none, or a model only
        this process can run, which `_put_vectors` runs instead)."""
        return self.embedder.path if self.embedder is not None else None

    def _put_vectors(self, rows, analysed: Postings, stored: tuple[np.ndarray, np.ndarray] | None = None,
                     later: bool = False) -> None:
        """The vectors of stored rows (an Arrow table with doc_id, content, title and tags, and
        maybe vec and vec_model): the ones their analysis brought, else the stored ones of this
        model (`stored`, when read already: `stored_vectors`), else worked out here from their
        text, or (`later`) by the fill."""
        if self.embedder is None or not rows.num_rows:
            return
        vecs = analysed.vectors
        if vecs is None:
            vecs, mine = stored or self.stored_vectors(rows)
            if later:
                self.unvectored |= not mine.all()
            elif not mine.all():
                todo = rows.filter(pa.array(~mine))
                vecs[~mine] = self.embedder.encode(memory_texts(todo.column("content").to_pylist(),
                                                                todo.column("title").to_pylist(),
                                                                todo.column("tags").to_pylist()))
        self.index.vectors.put(rows.column("doc_id").to_numpy().astype(np.int64), vecs)

    def stored_vectors(self, rows) -> tuple[np.ndarray, np.ndarray]:
        """(the rows' stored vectors of this model, zeros for the others; which rows had one)."""
        n, dims = rows.num_rows, self.embedder.dims
        out = np.zeros((n, dims), np.float32)
        if "vec_model" not in rows.column_names:
            return out, np.zeros(n, bool)
        mine = np.asarray(pc.fill_null(pc.equal(rows.column("vec_model"), self.embedder.name), False))
        vec = rows.column("vec").combine_chunks()
        if mine.any():
            lengths = pc.fill_null(pc.list_value_length(vec), 0).to_numpy(zero_copy_only=False)
            mine &= lengths == dims
            flat = pc.list_flatten(vec.filter(pa.array(mine))).to_numpy(zero_copy_only=False)
            out[mine] = flat.reshape(-1, dims)
            # (a vector written by hand counts as its direction; a broken one as none: the text's)
            norm = np.linalg.norm(out, axis=1)
            bad = ~np.isfinite(norm) | (norm == 0)
            mine &= ~bad
            out[bad] = 0
            np.divide(out, norm[:, None], out=out, where=mine[:, None])
        return out, mine

    EMBED_STEP = 20_000

    def vectorless(self) -> np.ndarray:
        """Doc ids of the live memories without a vector (none while the channel is off)."""
        if self.embedder is None:
            return np.zeros(0, np.int64)
        t = self.index.docs
        self.index.vectors.ensure(t.size)
        return np.flatnonzero(t.alive[: t.size] & ~self.index.vectors.has[: t.size])

    def put_filled(self, doc_ids: np.ndarray, vecs: np.ndarray) -> int:
        """The fill's vectors, for those of these memories still live and without one (a
        revision or a forget since is not undone); returns how many it put."""
        t, vectors = self.index.docs, self.index.vectors
        doc_ids = np.asarray(doc_ids, np.int64)
        vectors.ensure(t.size)
        keep = (doc_ids < t.size) & t.alive[np.minimum(doc_ids, t.size - 1)] & ~vectors.has[doc_ids]
        vectors.put(doc_ids[keep], vecs[keep])
        self.filled += int(keep.sum())
        return int(keep.sum())

    def embed_missing(self, progress: bool | None = None, later: bool = False) -> int:
        """Vectors for the live memories that have none (another model made the saved ones),
        with a progress bar when there are many, or (`later`, when they are FILL_FROM or more)
        left to the fill; returns how many were made."""
        missing = self.vectorless()
        if not missing.size:
            return 0
        if later and missing.size >= FILL_FROM:
            self.unvectored = True
            return 0
        steps = range(0, missing.size, self.EMBED_STEP)
        if progress if progress is not None else missing.size >= 5 * self.EMBED_STEP:
            from tqdm.auto import tqdm

            steps = tqdm(steps, desc=f"vectors for {missing.size:,} memories", unit_scale=self.EMBED_STEP)
        for lo in steps:
            docs = missing[lo: lo + self.EMBED_STEP]
            facts = self.rows.get(docs.tolist())
            docs = np.array([d for d in docs.tolist() if d in facts], dtype=np.int64)
            got = [facts[d] for d in docs.tolist()]
            self.index.vectors.put(docs, self.embedder.encode(fact_texts(got)))
        self.index.vectors.settle()
        return int(missing.size)

    def _retire(self, old: int, new: int | None, terms: list[int] | None) -> None:
        """An index position stops being live: its successor (if any) takes its session place."""
        index = self.index
        if not (0 <= old < index.docs.size and index.docs.alive[old]):
            return
        replaced = new is not None and 0 <= new < index.docs.size and bool(index.docs.alive[new])
        if replaced:
            index.replace_link(old, new)
        for s, last in self.session_last.items():
            if last == old:  # the session's last memory: its successor, or the one before it, is now
                before = int(index.docs.prev[old])
                if replaced:
                    self.session_last[s] = new
                elif before >= 0:
                    self.session_last[s] = before
                else:
                    del self.session_last[s]
                break
        cols = [index.cols[t] for t in (terms or []) if t in index.cols]
        index.remove_documents([old], {old: np.asarray(cols, dtype=np.int64)})

    def _apply_delta(self, since: int, table, replaced: Mapping[int, int]) -> int:
        """Apply rows changed by someone else (one Arrow table from `Store.changes`)."""
        if table.num_rows == 0:
            return since
        index = self.index
        meta = {name: table.column(name).to_numpy(zero_copy_only=False)
                for name in ("doc_id", "user_id", "project", "type", "is_core", "shared", "kind", "updated",
                             "revision_count", "doc_len", "session_id", "changed")}
        doc_ids = meta["doc_id"].astype(np.int64)
        alive = index.docs.alive
        known = np.array([d < index.docs.size and alive[d] for d in doc_ids.tolist()], dtype=bool)
        users = index.codes_of("user", meta["user_id"].tolist())
        self._note_unowned(users)
        for i in np.flatnonzero(known).tolist():  # metadata can change without new content
            d = int(doc_ids[i])
            index.docs.user[d] = users[i]  # (the empty user's rows, adopted by the default user)
            index.docs.updated[d] = meta["updated"][i]
            index.docs.revision[d] = meta["revision_count"][i]
            index.docs.core[d] = meta["is_core"][i]
            index.docs.shared[d] = meta["shared"][i]
            index.touched([d])
        fresh = np.flatnonzero(~known)
        if fresh.size:
            sub = table if fresh.size == table.num_rows else table.take(fresh)
            lengths, terms = _list_values(sub.column("terms"))
            new_meta = {k: v[fresh] for k, v in meta.items()}
            # (the file keeps no 3-grams: the text gives the same ones again; the vectors a writer of
            # this model stored are taken, else the text gives them too)
            stored = self.stored_vectors(sub) if self.embedder is not None else None
            # (another kernel's bulk write: what it stored without vectors follows in the background)
            later = stored is not None and int((~stored[1]).sum()) >= FILL_FROM
            embed = None if stored is None or later or stored[1].all() else self._embed_model
            analysed = Postings.of_columns(_text_of(sub, embed))
            new_meta.update(_gram_entries(analysed, doc_ids[fresh]))
            self.add(doc_ids[fresh], new_meta, np.repeat(doc_ids[fresh], lengths), terms,
                     _list_values(sub.column("tfs"))[1], replaced=replaced)
            self._put_vectors(sub, analysed, stored, later=later)
        self.rows.add_table(table.select(["doc_id", *FACT_COLUMNS]))
        return int(meta["changed"].max())

    def _load_rows(self, docs: tuple[int, int], rows, grams: Postings | None) -> None:
        """Whole load: one range of doc ids (its rows, and their 3-grams) into a fresh index (the
        term vocabulary is already set)."""
        store = self.store
        meta = store.index_rows(0, docs)
        if not meta["doc_id"].size or grams is None:
            return
        post = store.index_postings(0, None, docs)
        meta.update(_gram_entries(grams, rows.column("doc_id").to_numpy().astype(np.int64)))
        self.add(meta["doc_id"].astype(np.int64), meta, post["doc_id"], post["term"], post["tf"], link=False)
        self.rows.add_table(rows)
        self._put_vectors(rows, grams)

    def add(self, doc_ids: np.ndarray, meta: Mapping[str, Any], p_doc: np.ndarray,
                   p_term: np.ndarray, p_tf: np.ndarray, link: bool = True,
                   replaced: Mapping[int, int] | None = None) -> None:
        """Add new documents (metadata columns + postings) to the index and link sessions."""
        index = self.index
        p_term = np.asarray(p_term, dtype=np.int64)
        if not link:  # whole load: the vocabulary is known and sorted
            cols = np.searchsorted(index.vocab_sorted, p_term)
        else:  # (a batch analysed at once comes with its distinct terms)
            uniq, inverse = (meta["t_keys"], meta["t_of"]) if "t_keys" in meta else np.unique(p_term, return_inverse=True)
            cols = np.asarray(index.columns_of(uniq.tolist()), dtype=np.int64)[inverse]
        kinds = np.fromiter(map(KINDS.get, meta["kind"], repeat(0)), dtype=np.int8, count=len(doc_ids))
        index.add_documents(
            np.asarray(doc_ids, dtype=np.int64), cols, np.asarray(p_doc, dtype=np.int32),
            np.asarray(p_tf, dtype=np.float32),
            {"dl": np.asarray(meta["doc_len"], dtype=np.float32),
             "updated": np.asarray(meta["updated"], dtype=np.float64),
             "revision": np.asarray(meta["revision_count"], dtype=np.int32),
             "user": index.codes_of("user", meta["user_id"]),
             "project": index.codes_of("project", meta["project"]),
             "core": np.asarray(meta["is_core"], dtype=bool),
             "shared": np.asarray(meta["shared"], dtype=bool),
             "kind": kinds,
             "type": np.fromiter(map(TYPE_CODE.get, meta["type"], repeat(0)), dtype=np.int8, count=len(doc_ids))},
            count_df=link,
        )
        if "vectors" in meta and self.embedder is not None:  # (worked out by the writer, from the text)
            index.vectors.put(doc_ids, meta["vectors"])
        if "g_gram" in meta:  # the n-gram channel's forward vectors (their frequencies counted here)
            index.grams.add(meta["g_doc"], meta["g_gram"], meta["g_tf"], doc_ids,
                            unique=(meta["g_keys"], meta["g_of"], meta["g_holders"]) if "g_keys" in meta else None)
        if not link:
            return
        self._link_sessions(np.asarray(doc_ids).tolist(), meta["session_id"], meta["user_id"], kinds.tolist(),
                            replaced)

    def _link_sessions(self, doc_ids, sessions, users, kinds, replaced) -> None:
        """Each new memory of a session after the one before it (of its author): within the batch
        as pairs set at once, and each chain's first new memory after where the chain ended."""
        index, last = self.index, self.session_last
        first: dict[str, int] = {}
        newest: dict[str, int] = {}
        pairs: tuple[list[int], list[int]] = ([], [])
        synthetic: dict[str, bool] = {}
        for d, s, u, k in zip(doc_ids, sessions, users, kinds):
            if s is None or k != 0 or (replaced and d in replaced):
                continue
            syn = synthetic.get(s)
            if syn is None:
                syn = synthetic[s] = is_synthetic_session(s)
            if syn:
                continue
            key = chain(s, u)
            p = newest.get(key)
            if p is None:
                first[key] = d
            else:
                pairs[0].append(p)
                pairs[1].append(d)
            newest[key] = d
        index.link_pairs(*pairs)
        for key, d in first.items():
            p = last.get(key)
            if p is not None:  # p -> first ... newest -> what followed p
                index.link_run_after(p, d, newest[key])
        last.update(newest)

    @contextlib.contextmanager
    def bulk_write(self):
        """The index's segments and rows written in a row are merged once, at the end (under the
        store's lock, as every change of the index)."""
        stack = contextlib.ExitStack()
        self.writing += 1  # (the vectors it leaves follow once it ends: index/fill.py)
        stack.callback(self._written)
        stack.enter_context(self.index.merged_at_end())
        stack.enter_context(self.rows.merged_at_end())
        stack.enter_context(self.index.vectors.held())
        try:
            yield
        finally:
            with self.store.lock:
                stack.close()
                self.index.vectors.settle()

    def _written(self) -> None:
        self.writing -= 1

    def after_write(self, doc_ids: np.ndarray, changed: np.ndarray, meta: Mapping[str, Any],
                    p_doc: np.ndarray, p_term: np.ndarray, p_tf: np.ndarray, rows_table=None,
                    facts: Sequence[Fact] | None = None) -> None:
        """Put what this process just wrote into the index, or catch up if someone wrote in between."""
        with self.store.lock:
            lo, hi = int(changed.min()), int(changed.max())
            contiguous = lo == self.seen + 1 and hi - lo + 1 == changed.size
            self.add(doc_ids, meta, p_doc, p_term, p_tf)
            self.unvectored |= self.embedder is not None and "vectors" not in meta  # (a bulk write's: they follow)
            if rows_table is not None:
                self.rows.add_table(rows_table)
            for d, f in zip(doc_ids.tolist(), facts or ()):
                self.rows.add_fact(d, f)
            if not contiguous:
                self.apply_changes(self.seen)
            self.index.vectors.settle()
            self.seen = max(self.seen, hi)
            self.store.caught_up(self.seen)


def _list_values(column) -> tuple[np.ndarray, np.ndarray]:
    """(each row's list length, all the values, row after row) of an Arrow list column, read
    through its offsets (`pyarrow.compute` would cost a new kernel 50 ms to import for this)."""
    lists = column.combine_chunks()
    offsets = lists.offsets.to_numpy()
    return np.diff(offsets), lists.values.to_numpy()[offsets[0]:offsets[-1]]


def _text_of(rows, embed_model: str | None = None) -> dict[str, Any] | None:
    """The text columns of stored rows, for `Postings.of_columns`: their 3-grams (the file
    keeps none: they would double its size and cost a bulk import a fifth of its time, and the
    text gives the same ones again) and the vectors of `embed_model` when given. None if there
    are no rows."""
    if not rows.num_rows:
        return None
    return {"content": rows.column("content").to_pylist(), "title": rows.column("title").to_pylist(),
            "tags": rows.column("tags").to_pylist(), "grams_only": True, "embed_model": embed_model}


def _gram_entries(post: Postings, doc_ids: np.ndarray) -> dict[str, np.ndarray]:
    out = {"g_doc": np.repeat(doc_ids, post.glengths), "g_gram": post.grams, "g_tf": post.gtfs}
    if post.gram_keys is not None:  # (a batch analysed at once: its distinct grams come with it)
        out.update(g_keys=post.gram_keys, g_of=post.gram_of, g_holders=post.gram_holders)
    return out
