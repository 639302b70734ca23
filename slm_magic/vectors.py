"""The meaning channel's side of the in-process index: each memory's unit vector, a row per
index position (doc id), and which rows have one.

Exact search: a question's cosine with a memory is one dot product, and with every memory one
matrix-vector product (BLAS, float32). Rows are kept as float32 so that product needs no
conversion; the saved index maps them, so kernels on one file share the pages.
"""

from __future__ import annotations

import numpy as np


class VectorStore:
    """Rows of unit vectors by doc id; `model` names what made them (None: no vectors yet)."""

    SAMPLE = 2_048  # memories whose cosines stand for the store's (a question's background)

    def __init__(self, dims: int = 0, model: str | None = None, capacity: int = 1024):
        self.model = model
        self.dims = dims
        self.data = np.zeros((capacity + 1, dims), dtype=np.float32)
        self.has = np.zeros(capacity + 1, dtype=bool)
        self._sample: tuple[int, np.ndarray] | None = None  # (the live count it was drawn at, its rows)

    @classmethod
    def mapped(cls, model: str, data: np.ndarray, has: np.ndarray) -> "VectorStore":
        """Rows mapped from a saved index (copied on the first write)."""
        out = cls(data.shape[1], model, 0)
        out.data, out.has = data, has
        return out

    def reset(self, dims: int, model: str | None) -> None:
        """Drop every vector (another model: its vectors are never compared with these)."""
        fresh = VectorStore(dims, model, max(1024, self.has.size - 1))
        self.model, self.dims, self.data, self.has, self._sample = model, dims, fresh.data, fresh.has, None

    def ensure(self, n: int) -> None:
        """Room for doc ids below `n` (and the sentinel row after them)."""
        if n + 1 <= self.has.size:
            return
        cap = max(n + 1, 2 * self.has.size)
        data = np.zeros((cap, self.dims), dtype=np.float32)
        data[: self.data.shape[0]] = self.data
        has = np.zeros(cap, dtype=bool)
        has[: self.has.size] = self.has
        self.data, self.has = data, has

    def put(self, doc_ids: np.ndarray, vecs: np.ndarray) -> None:
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        if not doc_ids.size:
            return
        self.ensure(int(doc_ids.max()) + 1)
        if not self.data.flags.writeable:  # (a mapped saved index: copy on first write)
            self.data = self.data.copy()
            self.has = self.has.copy()
        self.data[doc_ids] = vecs
        self.has[doc_ids] = np.linalg.norm(vecs, axis=1) > 0 if vecs.size else False

    def count(self, alive: np.ndarray) -> int:
        """How many live memories have a vector."""
        n = min(alive.size, self.has.size)
        return int(np.count_nonzero(self.has[:n] & alive[:n]))

    def cosine(self, doc_ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The query's cosine with each of `doc_ids` (0 for a row without a vector)."""
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        out = np.zeros(doc_ids.size)
        inside = doc_ids < self.has.size
        if inside.any():
            out[inside] = self.data[doc_ids[inside]] @ query
        return out

    def sample_rows(self, alive: np.ndarray, live: int) -> np.ndarray:
        """Up to SAMPLE live rows with a vector, drawn once and again when the number of live
        memories `live` has moved by a tenth (a fixed seed: the same store, the same sample)."""
        if self._sample is None or abs(live - self._sample[0]) > 0.1 * max(self._sample[0], 10):
            n = min(alive.size, self.has.size)
            rows = np.flatnonzero(self.has[:n] & alive[:n])
            if rows.size > self.SAMPLE:
                rows = np.sort(np.random.default_rng(0).choice(rows, self.SAMPLE, replace=False))
            self._sample = (live, rows)
        rows = self._sample[1]
        return rows[self.has[rows] & alive[rows]]

    def scan(self, query: np.ndarray, size: int) -> np.ndarray:
        """The query's cosine with every row below `size` (rows without a vector give 0)."""
        size = min(size, self.data.shape[0])
        out = np.zeros(size, dtype=np.float32)
        step = 262_144  # (bounds the temporary product at a million memories)
        for lo in range(0, size, step):
            hi = min(size, lo + step)
            np.dot(self.data[lo:hi], query, out=out[lo:hi])
        return out
