"""The vectors that follow a bulk write. Memories written WORDS_FIRST or more at once are
stored and searchable by their words straight away; a thread of this kernel then gives them
their vectors a step at a time: the vectors another kernel stored already are taken, the
others worked out (in the analysis worker's process for the packaged table, so the kernel's
own thread stays free), stored in the file (other kernels take them from there) and put in the
index. Until every live memory has one, a recall says it is degraded, and why. A change of
model, or a catch-up with another kernel's bulk write, leaves work here the same way.

The thread holds the file only for its reads and writes, as a kernel does for a cell, and
the index only under the store's lock, which a recall holds while it ranks."""

from __future__ import annotations

import contextlib
import pickle
import threading

import numpy as np

from . import bulk
from .meaning import memory_texts


class VectorFill:
    #: Memories per step: a read, their vectors, a write. DuckDB rewrites a row whose list
    #: column changes in a table with a key (about 10,000 rows/s), and the step holds the file
    #: and the index's lock while it writes: half a second at a time.
    STEP = 5_000
    #: A progress bar from this many memories on (fewer take a few seconds).
    BAR_FROM = 100_000

    def __init__(self, store, live):
        self.store = store
        self.live = live              # the LiveIndex whose replica it fills
        self.total = self.done = 0    # of the current run
        self.error: str | None = None  # why the last run stopped short (None: it did not)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._again = False           # more was left while a run was under way: it looks again
        self._worker: bulk.Worker | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def reason(self) -> str | None:
        """Why the meaning channel does not yet cover every memory (None: it does)."""
        if self.running:
            return (f"vectors are still being worked out ({self.total - self.done:,} memories to go); "
                    "until then those are found by their words alone")
        return None

    def start(self) -> None:
        """Begin (or look again, when a run is under way) if the replica left memories without
        vectors; cheap to ask when it did not."""
        replica = self.live.replica
        if replica is None or not replica.unvectored or replica.writing:
            return  # (during a bulk write: once it ends)
        replica.unvectored = False
        if self.running:
            self._again = True
            return
        missing = replica.vectorless()
        if not missing.size:
            return
        self.total, self.done, self.error, self._again = int(missing.size), 0, None, False
        self._stop.clear()
        bar = None
        if missing.size >= self.BAR_FROM:  # (made here, so that a notebook shows it under the cell that wrote)
            from tqdm.auto import tqdm

            bar = tqdm(total=int(missing.size), desc="vectors", unit=" memories", unit_scale=True)
        self._thread = threading.Thread(target=self._run, args=(replica, missing, bar), daemon=True,
                                        name="slm-magic-vectors")
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the run under way; True when none is left running."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    def stop(self) -> None:
        """End the run after its current step (what is left, the next open fills)."""
        self._stop.set()
        self.wait()

    # --- the thread -------------------------------------------------------------------------
    def _run(self, replica, missing: np.ndarray, bar) -> None:
        self._worker = None
        grouped = replica.index.vectors.live  # (the cells are grouped again each time the vectors double)
        try:
            model = replica.embedder
            if model.path and missing.size >= bulk.WORKER_MIN_BATCH:
                with contextlib.suppress(OSError):
                    self._worker = bulk.Worker()
            while True:
                for lo in range(0, missing.size, self.STEP):
                    if self._stop.is_set() or self.live.replica is not replica:
                        return
                    step = missing[lo: lo + self.STEP]
                    self.done += self._fill(replica, model, step)
                    if bar is not None:
                        bar.update(step.size)
                    if replica.index.vectors.live >= 2 * max(grouped, self.STEP):
                        with self.store.lock:
                            replica.index.vectors.settle()
                        grouped = replica.index.vectors.live
                with self.store.lock:  # (more left meanwhile: another bulk write, a catch-up)
                    again, self._again = self._again, False
                    missing = replica.vectorless() if again else missing[:0]
                if not missing.size:
                    return
                self.total += int(missing.size)
                if bar is not None:
                    bar.total = self.total
        except Exception as exc:  # noqa: BLE001 - (the file went away, or a fault: said, and the next open fills what is left)
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            if self._worker is not None:
                self._worker.close()
            if bar is not None:
                bar.close()
            with self.store.lock:
                if self.live.replica is replica:
                    replica.index.vectors.settle()
            if self.live.replica is replica:
                with contextlib.suppress(Exception), self._file():  # (a save's snapshot reads the file)
                    self.live.save_soon()

    def _fill(self, replica, model, step: np.ndarray) -> int:
        """One step: the stored vectors of this model taken, the others worked out and stored."""
        with self._file():
            rows = self.store.fact_rows(0, (int(step[0]), int(step[-1])), vectors=True)
        docs = rows.column("doc_id").to_numpy().astype(np.int64)
        wanted = np.isin(docs, step)
        vecs, mine = replica.stored_vectors(rows)
        todo = np.flatnonzero(wanted & ~mine)
        if todo.size:
            texts = rows.take(todo)
            columns = {"content": texts.column("content").to_pylist(), "title": texts.column("title").to_pylist(),
                       "tags": texts.column("tags").to_pylist()}
            vecs[todo] = self._encode(model, columns)
        with self.store.lock:
            if todo.size:
                with self._file():
                    self.store.fill_vectors(docs[todo], vecs[todo], model.name)
            return replica.put_filled(docs[wanted], vecs[wanted])

    def _encode(self, model, columns: dict) -> np.ndarray:
        if self._worker is not None:
            try:
                self._worker.send({**columns, "vectors_only": True, "embed_model": model.path})
                return self._worker.receive().vectors
            except (OSError, EOFError, pickle.UnpicklingError):  # (it died: here instead, slower)
                self._worker.close()
                self._worker = None
        return model.encode(memory_texts(columns["content"], columns["title"], columns["tags"]))

    @contextlib.contextmanager
    def _file(self):
        """The file for one read or write: this kernel's connection if a cell holds it, else
        one opened for it and let go again (under the store's lock, so neither side closes the
        other's)."""
        with self.store.lock:
            opened = not self.store.connected
            if opened:
                self.store.connect()
            try:
                yield
            finally:
                if opened:
                    self.store.disconnect()
