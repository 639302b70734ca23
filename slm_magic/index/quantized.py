"""Int8 copies of the cells' rows, which a question scans instead of the float32 rows: a quarter
of the bytes, read by simsimd's integer kernels. At 100,000 memories the eight cells a question
reads are 2.6 MB of float32 rows, and reading them from memory was most of what the meaning
channel cost a recall (RESULTS.md section 22).

The scan is exact: each row's int8 product with the question is off from its cosine by at most
|question| · |row's rounding| + |question's rounding| · |row's codes| (Cauchy-Schwarz; a cell's
longest of each), and only the rows whose product plus that bound reaches the cutoff are read
again as float32 and kept by their true cosine. A cell's
codes are made the first time a question reads it (a new kernel's open reads nothing more), and
dropped with the cells when the rows are grouped again.
"""

from __future__ import annotations

import numpy as np
import simsimd

#: Added to every bound: the float32 cosines and the products' scaling round too.
SLACK = 1e-5


def quantize(rows: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """Rows as int8 codes on one scale (rows ≈ scale · codes), with the longest rounding
    |row − scale · codes| and the longest code |scale · codes| among them."""
    rows = np.asarray(rows, np.float32)
    scale = float(np.abs(rows).max(initial=0.0)) / 127 or 1.0  # (zero rows: zero codes)
    codes = np.rint(rows / scale).astype(np.int8)
    back = codes * np.float32(scale)
    return (codes, scale, float(np.linalg.norm(rows - back, axis=-1).max(initial=0.0)),
            float(np.linalg.norm(back, axis=-1).max(initial=0.0)))


class QuantizedCells:
    """The codes of the cells `starts` bounds (cell c is rows starts[c]:starts[c+1]), each cell
    on its own scale: one threshold per cell on the integer products."""

    def __init__(self, starts: np.ndarray, dims: int):
        self.starts = starts
        self.codes = np.empty((int(starts[-1]), dims), np.int8)  # (pages are touched only as cells are coded)
        k = starts.size - 1
        self.scale, self.error, self.length = np.ones(k), np.zeros(k), np.zeros(k)
        self.coded = np.zeros(k, bool)

    def candidates(self, data: np.ndarray, cells: np.ndarray, query: np.ndarray, cutoff: float) -> np.ndarray:
        """The rows of `cells` (of `data`, the float32 rows) whose cosine with `query` may reach
        `cutoff`: every row that does, and the few the bound cannot rule out."""
        for c in cells[~self.coded[cells]].tolist():
            a, b = int(self.starts[c]), int(self.starts[c + 1])
            self.codes[a:b], self.scale[c], self.error[c], self.length[c] = quantize(data[a:b])
            self.coded[c] = True
        qs = float(np.abs(query).max()) / 127 or 1.0
        q8 = np.rint(query * (1 / qs)).astype(np.int8)[None, :]
        off = query - q8[0] * np.float32(qs)
        qerr, qlen = float(np.sqrt(off @ off)), float(np.sqrt(query @ query))
        # cosine ≥ cutoff needs scale·qs·(codes·q8) ≥ cutoff − |q|·error − qerr·length
        least = (cutoff - SLACK - qlen * self.error[cells] - qerr * self.length[cells]) / (self.scale[cells] * qs)
        lo, hi = self.starts[cells], self.starts[cells + 1]
        # (simsimd's `out=` is not used: in 6.5 it returns None one reference short)
        dots = [simsimd.cdist(self.codes[a:b], q8, metric="dot", out_dtype="float32")
                for a, b in zip(lo.tolist(), hi.tolist()) if b > a]
        if not dots:
            return np.empty(0, np.int64)
        width = hi - lo
        at = np.cumsum(width) - width  # (where each cell's products start among all of them)
        pos = np.flatnonzero(np.concatenate(dots)[:, 0] >= np.repeat(least, width))
        cell = np.searchsorted(at, pos, side="right") - 1
        return lo[cell] + pos - at[cell]
