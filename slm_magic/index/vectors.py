"""The meaning channel's side of the in-process index: each memory's unit vector, and a search
for the ones closest to a question that reads a small part of them.

Rows live in slots: `slot[doc]` is the row of a memory's vector, `owner[slot]` the memory (-1:
a vector since replaced or forgotten, skipped and zeroed when saved). Slots below `packed` are
grouped by cell, the nearest of `centroids` (spherical k-means on a sample), cell c holding
`starts[c]:starts[c+1]`; slots from `packed` to `used` are the newest, in write order. A
question scans the newest rows and the cells whose centroids are nearest to it: a 48th of the
cells, at least 8 (RESULTS.md section 18 measures how often that changes a recall's top 10).
Below EXACT vectors there are no cells and every row is read.

A search reads each cell's rows straight through (core/kernels.dots: one pass, one fixed order
of the sums, so a cosine is the same on every machine); the few rows asked for by memory are
read in place, not copied out first. Rows are float32; the saved index maps them, so kernels
on one file share the pages. The grouped rows are also kept as int8 codes where the kernel
reads them fast (AVX2): a question reads the codes, a quarter of the bytes, and the float32
rows of only those whose codes say they can reach its cutoff (a bound, so the answer is the
one every float32 row gives); the codes are saved and mapped with the rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from ..core import kernels


class VectorStore:
    """Unit vectors by doc id; `model` names what made them (None: no vectors yet)."""

    SAMPLE = 2_048       # memories whose cosines stand for the store's (a question's background)
    EXACT = 16_384       # fewer vectors than this: every row is read, no cells
    NEWEST_SHARE = 0.125  # newest rows past this share of the grouped ones are grouped (`settle`)
    PROBE_SHARE = 1 / 48  # the share of cells a question reads (RESULTS.md section 18)
    PROBE_MIN = 8
    RETRAIN = 8          # cells trained again once the vectors grew this many times

    def __init__(self, dims: int = 0, model: str | None = None, capacity: int = 1024):
        self.model = model
        self.dims = dims
        self.data = np.zeros((capacity + 1, dims), dtype=np.float32)  # rows by slot
        self.slot = np.full(capacity + 1, -1, dtype=np.int64)         # doc id -> slot (-1: none)
        self.owner = np.full(capacity + 1, -1, dtype=np.int64)        # slot -> doc id (-1: none)
        self.used = 0      # slots written (grouped, then newest)
        self.packed = 0    # slots grouped by cell
        self.live = 0      # memories with a vector (a forgotten one's is dropped: all of them live)
        self.centroids = np.zeros((0, dims), dtype=np.float32)
        self.starts = np.zeros(1, dtype=np.int64)
        self.trained_at = 0  # vectors when the cells were trained
        # The grouped rows as int8 codes (kernels.quantize: codes, scales, slacks): a question
        # reads a quarter of the bytes and works out the cosines of the few rows whose codes say
        # they can reach its cutoff (None: no cells, or no compiled kernel; the float32 rows).
        self.coded: tuple | None = None
        self._held = 0
        self._sample: tuple | None = None  # (live count, doc ids, their rows' sum, their Gram matrix)

    @classmethod
    def mapped(cls, model: str, a: dict, counts: dict) -> "VectorStore":
        """The vectors of a saved index (its arrays `a`; the map is copy-on-write)."""
        out = cls(a["vec.data"].shape[1], model, 0)
        out.data, out.slot, out.owner = a["vec.data"], a["vec.slot"], a["vec.owner"]
        out.centroids, out.starts = a["vec.centroids"], a["vec.starts"]
        out.used, out.packed, out.live, out.trained_at = (int(counts[k]) for k in ("used", "packed", "live", "trained_at"))
        if "vec.codes" in a and a["vec.codes"].shape[0] == out.packed:  # (an index saved by a build with them)
            out.coded = tuple(a[f"vec.{name}"] for name in ("codes", "code_scale", "code_a", "code_b"))
        return out

    @staticmethod
    def live_centroids(data: np.ndarray, owner: np.ndarray, starts: np.ndarray, dims: int) -> np.ndarray:
        """Each cell's centre worked out again from its live rows (zeros for a cell with none):
        what a save keeps, so that a cell whose one member was forgotten does not keep its
        vector as the centre."""
        k = starts.size - 1
        if k <= 0:
            return np.zeros((0, dims), np.float32)
        packed = int(starts[-1])
        sums = np.zeros((k, dims), np.float64)
        full = np.flatnonzero(starts[1:] > starts[:-1])
        if full.size:  # (every row's sum by cell without a copy of the rows, then the dead ones taken out)
            sums[full] = np.add.reduceat(data[:packed], starts[full], axis=0, dtype=np.float64)
        dead = np.flatnonzero(owner[:packed] < 0)
        if dead.size:
            cell = np.searchsorted(starts, dead, side="right") - 1
            np.subtract.at(sums, cell, data[dead].astype(np.float64))
        norm = np.linalg.norm(sums, axis=1, keepdims=True)
        return np.divide(sums, norm, out=np.zeros_like(sums), where=norm > 0).astype(np.float32)

    def frozen(self, n: int) -> dict:
        """What a save needs, as of now (under the store's lock): the rows are shared (rows below
        `used` never change in place; a grouping makes new arrays), the small arrays copied (a
        forgotten memory has no slot and owns no row already: `drop`)."""
        return {"model": self.model, "dims": self.dims, "data": self.data, "used": self.used, "packed": self.packed,
                "live": self.live, "owner": self.owner[: self.used].copy(), "slot": self.slot[:n].copy(),
                "centroids": self.centroids, "starts": self.starts, "trained_at": self.trained_at, "coded": self.coded}

    def reset(self, dims: int, model: str | None) -> None:
        """Drop every vector (another model: its vectors are never compared with these)."""
        self.__init__(dims, model, max(1024, self.slot.size - 1))

    @property
    def has(self) -> np.ndarray:
        """Whether each doc id has a vector."""
        return self.slot >= 0

    def ensure(self, n: int) -> None:
        """Room for doc ids below `n` (and the sentinel after them)."""
        if n + 1 > self.slot.size:
            self.slot = np.pad(self.slot, (0, max(n + 1, 2 * self.slot.size) - self.slot.size), constant_values=-1)

    def _room(self, n: int) -> None:
        if n > self.owner.size:
            cap = max(n, 2 * self.owner.size)
            data = np.zeros((cap, self.dims), dtype=np.float32)
            data[: self.used] = self.data[: self.used]
            self.data, self.owner = data, np.pad(self.owner, (0, cap - self.owner.size), constant_values=-1)

    def put(self, doc_ids: np.ndarray, vecs: np.ndarray) -> None:
        """Set these memories' vectors (a zero vector: none); a replaced one's old row is dropped."""
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        if not doc_ids.size:
            return
        last = doc_ids.size - 1 - np.unique(doc_ids[::-1], return_index=True)[1]  # (the last write wins)
        doc_ids, vecs = doc_ids[last], np.asarray(vecs, dtype=np.float32)[last]
        self._own()
        self.drop(doc_ids)
        self.ensure(int(doc_ids.max()) + 1)
        keep = np.linalg.norm(vecs, axis=1) > 0
        doc_ids, vecs = doc_ids[keep], vecs[keep]
        lo, hi = self.used, self.used + doc_ids.size
        self._room(hi)
        self.data[lo:hi], self.owner[lo:hi], self.slot[doc_ids] = vecs, doc_ids, np.arange(lo, hi)
        self.used, self.live = hi, self.live + doc_ids.size

    def _own(self) -> None:
        """Arrays this process can write (a read-only map is copied on the first write)."""
        for name in ("data", "slot", "owner"):
            if not getattr(self, name).flags.writeable:
                setattr(self, name, getattr(self, name).copy())

    def drop(self, doc_ids) -> None:
        """These memories have no vector any more (forgotten, replaced)."""
        doc_ids = np.unique(np.asarray(doc_ids, dtype=np.int64))
        self._own()
        doc_ids = doc_ids[doc_ids < self.slot.size]
        s = self.slot[doc_ids]
        s = s[s >= 0]
        if s.size:
            self.owner[s] = -1
            self.slot[doc_ids] = -1
            self.live -= s.size
            if self._sample is not None and np.isin(self._sample[1], doc_ids).any():
                self._sample = None  # (its sums would keep a vector no longer there)

    def cosine(self, doc_ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The query's cosine with each of `doc_ids` (0 for one without a vector)."""
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        s = np.full(doc_ids.size, -1, np.int64)
        inside = doc_ids < self.slot.size
        s[inside] = self.slot[doc_ids[inside]]
        out = np.zeros(doc_ids.size)
        if (s >= 0).any():
            out[s >= 0] = kernels.dots(self.data, query, s[s >= 0])
        return out

    def background(self, query: np.ndarray, alive: np.ndarray) -> tuple[int, float, float]:
        """The query's cosines with up to SAMPLE live memories, as (how many, their sum, the sum
        of their squares). The sample is drawn once and again when the number with a vector has
        moved by a tenth or one of its members was dropped (a fixed seed: the same store, the
        same sample); its rows' sum and Gram matrix are kept, so that a question reads 256² numbers
        instead of the sample's rows."""
        if self._sample is None or abs(self.live - self._sample[0]) > 0.1 * max(self._sample[0], 10):
            n = min(alive.size, self.slot.size)
            docs = np.flatnonzero((self.slot[:n] >= 0) & alive[:n])
            if docs.size > self.SAMPLE:
                docs = np.sort(np.random.default_rng(0).choice(docs, self.SAMPLE, replace=False))
            rows = self.data[self.slot[docs]].astype(np.float64)
            # (the Gram matrix kept as float32: half the bytes a question reads, and cosines of
            # unit vectors summed over a few thousand rows need no more digits than that)
            self._sample = (self.live, docs, rows.sum(axis=0), (rows.T @ rows).astype(np.float32))
        _, docs, total, gram = self._sample
        q = np.asarray(query, np.float32)
        return docs.size, float(total @ q), float(q @ kernels.dots(gram, q))

    def nearest(self, query: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
        """Memories whose cosine with the query is at least `cutoff`, with those cosines: every
        row when there are no cells, else the newest rows and the nearest cells'."""
        return self._search(query, cutoff, later=False)()

    def nearest_later(self, query: np.ndarray, cutoff: float) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        """`nearest`, as a function that gives it: where the cells are read by their codes, a
        thread of the kernel's own reads them meanwhile (the words are ranked in the time). The
        rows are the ones of now: nothing may write a vector until it is asked (a recall holds
        the store's lock)."""
        return self._search(query, cutoff, later=True)

    def _search(self, query: np.ndarray, cutoff: float, later: bool) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        """Both: the cells' codes read by the kernel's worker (`later`) or here."""
        query = np.asarray(query, np.float32)
        k = self.centroids.shape[0]
        first, stop = np.array([0]), np.array([self.used])
        if k:
            probes = min(k, max(self.PROBE_MIN, int(np.ceil(k * self.PROBE_SHARE))))
            cells = np.sort(np.argpartition(-kernels.dots(self.centroids, query), probes - 1)[:probes])
            first = np.append(self.starts[cells], self.packed)
            stop = np.append(self.starts[cells + 1], self.used)
        data, owner = self.data, self.owner

        def owned(slots: np.ndarray, cos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """The memories of the rows that reached the cutoff (a dropped row has none)."""
            docs = owner[slots]
            live = docs >= 0
            return docs[live], cos[live]
        few = None  # (the cells' rows by their codes, then the few that can reach the cutoff)
        if k and self.coded is not None:
            few = kernels.near_codes(self.coded, query, first[:-1], stop[:-1] - first[:-1], cutoff, later=later)
        if few is not None:
            newest = np.arange(self.packed, self.used)

            def found() -> tuple[np.ndarray, np.ndarray]:
                slots = np.concatenate([few() if later else few, newest])
                cos = kernels.dots(data, query, slots)
                hit = cos >= cutoff
                return owned(slots[hit], cos[hit])
            return found
        cos = kernels.dots(data, query, first, stop - first)
        hit = np.flatnonzero(cos >= cutoff)
        place = np.cumsum(stop - first) - (stop - first)  # (where each run's cosines start)
        run = np.searchsorted(place, hit, side="right") - 1
        got = owned(first[run] + hit - place[run], cos[hit])
        return lambda: got

    # --- the cells --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def held(self):
        """No grouping inside the block (a bulk write settles once, at its end)."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1

    def settle(self) -> bool:
        """Group the newest rows into cells once they outgrow NEWEST_SHARE of the grouped ones
        (training the cells first, or again after the store grew RETRAIN times), and drop the
        rows of replaced and forgotten vectors once they are a third; returns whether it did."""
        if self._held:
            return False
        waste = self.used - self.live > max(4096, self.used // 3)
        cells = self.centroids.shape[0] > 0
        if self.live < (self.EXACT // 2 if cells else self.EXACT):  # (slack: no rebuild per write at the edge)
            if not (waste or cells):
                return False
            self._pack(np.zeros((0, self.dims), np.float32))  # (no cells: every row is read)
        elif not cells or self.live >= self.RETRAIN * self.trained_at:
            self._pack(self._train())
        elif waste or self.used - self.packed > max(1024, self.NEWEST_SHARE * self.packed):
            self._pack(self.centroids)
        else:
            return False
        return True

    def _train(self) -> np.ndarray:
        """Spherical k-means on a sample of the live rows: √n cells, a fixed seed."""
        rows = np.flatnonzero(self.owner[: self.used] >= 0)
        k = int(min(2_048, max(64, round(np.sqrt(rows.size)))))
        rng = np.random.default_rng(0)
        sample = self.data[np.sort(rng.choice(rows, min(rows.size, 48 * k), replace=False))]
        cent = sample[rng.choice(sample.shape[0], k, replace=False)]
        for _ in range(8):
            cell = _assign(sample, cent)
            onehot = sp.csr_matrix((np.ones(cell.size, np.float32), (cell, np.arange(cell.size))),
                                   shape=(k, cell.size))
            sums = np.asarray(onehot @ sample)
            norm = np.linalg.norm(sums, axis=1)
            cent = np.where(norm[:, None] > 0, sums / np.maximum(norm, 1e-12)[:, None], cent).astype(np.float32)
        self.trained_at = rows.size
        return cent

    def _pack(self, centroids: np.ndarray) -> None:
        """Every live row in a new array, grouped by its nearest centroid (grouped rows keep
        their cell unless the cells are new)."""
        rows = np.flatnonzero(self.owner[: self.used] >= 0)
        k = centroids.shape[0]
        if k:
            cell = np.empty(rows.size, np.int64)
            fresh = centroids is not self.centroids
            old = rows < self.packed
            if not fresh and old.any():
                cell[old] = np.searchsorted(self.starts, rows[old], side="right") - 1
            todo = np.ones(rows.size, bool) if fresh else ~old
            cell[todo] = _assign(self.data[rows[todo]], centroids)
            order = np.argsort(cell, kind="stable")
            rows = rows[order]
            starts = np.searchsorted(cell[order], np.arange(k + 1))
        else:
            starts = np.zeros(1, np.int64)
        cap = max(1024, rows.size + max(4096, rows.size // 8))
        data = np.zeros((cap, self.dims), np.float32)
        data[: rows.size] = self.data[rows]
        owner = np.full(cap, -1, np.int64)
        owner[: rows.size] = self.owner[rows]
        self.slot[owner[: rows.size]] = np.arange(rows.size)
        self.data, self.owner, self.centroids, self.starts = data, owner, centroids, starts.astype(np.int64)
        self.used, self.packed = rows.size, rows.size if k else 0
        self.coded = kernels.quantize(data[: rows.size]) if k else None
        self._sample = None


def _assign(rows: np.ndarray, centroids: np.ndarray, step: int = 65_536) -> np.ndarray:
    """Each row's nearest centroid (by cosine), a bounded product at a time."""
    out = np.empty(rows.shape[0], np.int64)
    for lo in range(0, rows.shape[0], step):
        out[lo: lo + step] = np.argmax(rows[lo: lo + step] @ centroids.T, axis=1)
    return out

