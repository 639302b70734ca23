"""A recall's loops over every match, compiled (core/_kernels.c) where the package was
built with a C compiler, else in numpy: the postings summed per memory (every match, or the
best few and those over a floor, which only the kernel finds without writing every match
out), each match's score bound, the best few by a value, the 3-gram channel's dot products,
the meaning channel's cosines (and, compiled only, the rows whose int8 codes say their cosine
can reach a cutoff, and the values of the page of rows a recall shows). Both give the same
sums, cosines and choice among ties to the last bit, and bounds within 1e-15 of each other
(tests/test_compiled_kernel.py); numpy needs a pass over every match, and often over every
memory, for each step of a loop that the kernel does in one."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from .scoring import AGE_GATE_RELEVANCE, RankingConfig, bm25_part, bm25_relevance

try:
    from . import _kernels
except ImportError:  # (built without a compiler: numpy does the same work, slower)
    _kernels = None
if os.environ.get("SLM_MAGIC_KERNEL") == "0":  # (numpy's loops on purpose: to compare, or to rule the kernel out)
    _kernels = None

#: What a bound may differ by between the kernel and numpy, and less than a score's bar leaves
#: (ranking/fusion._can_reach): the age gate lets a bound that close to it through.
BOUND_SLACK = 1e-12

#: Whether the compiled kernel runs: built, and not turned off (the benchmarks say which ran).
COMPILED = _kernels is not None
#: Whether the meaning channel's rows are also kept as int8 codes (`quantize`): the kernel reads
#: them 32 at a time on this CPU (AVX2); elsewhere the float32 rows are read.
CODES = COMPILED and bool(_kernels.codes_fast())


def accumulate(docs: Sequence[np.ndarray], tfs: Sequence[np.ndarray], weights: np.ndarray, norm: np.ndarray,
               size: int) -> tuple[np.ndarray, np.ndarray]:
    """Raw BM25 per memory (of `size`) from each term's postings (`docs` int32, `tfs` float32)
    and its `bm25_weight`, `norm` (float32) being each memory's length norm: (the memories with
    a score, int64, ascending; their scores). The kernel sums memories a block at a time, where
    every part's documents are in ascending order (else numpy does)."""
    got = best_sums(docs, tfs, weights, norm)  # (no k, no floor: every match)
    if got is not None:
        return got
    d = np.concatenate(docs).astype(np.intp)
    f = np.concatenate(tfs)
    w = np.repeat(np.asarray(weights, dtype=np.float64), [a.size for a in docs])
    dense = np.bincount(d, weights=bm25_part(w, f, norm[d]), minlength=size)
    matched = np.flatnonzero(dense != 0)
    return matched, dense[matched]


def best_sums(docs: Sequence[np.ndarray], tfs: Sequence[np.ndarray], weights: np.ndarray, norm: np.ndarray, *,
              k: int = 0, floor: float = -np.inf) -> tuple[np.ndarray, np.ndarray] | None:
    """The matches whose BM25 (`accumulate`'s sums, to the last bit) is at least `floor`, or
    with k > 0 the k best of them (a tie to the lower memory): (memories, int64, ascending; their
    BM25). The kernel sums every posting but writes out only the few kept; None where it cannot
    run (no compiler, postings out of order): the caller sums every match."""
    if _kernels is None or norm.dtype != np.float32:
        return None
    room = k if k > 0 else min(norm.size, sum(d.size for d in docs))
    matched, scores = np.empty(room, dtype=np.int64), np.empty(room)
    n = _kernels.best_sums(list(docs), list(tfs), [float(w) for w in weights], norm, k, float(floor), matched, scores)
    return (matched[:n], scores[:n]) if n >= 0 else None


def sums_at(docs: Sequence[np.ndarray], tfs: Sequence[np.ndarray], weights: np.ndarray, norm: np.ndarray,
            at: np.ndarray) -> np.ndarray | None:
    """The BM25 of each memory of `at` (0 for one no term holds), summed as `accumulate` sums
    it; None where the kernel cannot run (the caller reads every match's sum instead)."""
    if _kernels is None or norm.dtype != np.float32:
        return None
    out = np.empty(at.size)
    ok = _kernels.sums_at(list(docs), list(tfs), [float(w) for w in weights], norm,
                          np.ascontiguousarray(at, dtype=np.int64), out)
    return out if ok == 0 else None


def bounds(own: np.ndarray, raw: np.ndarray, recency_base: np.ndarray, revision: np.ndarray, updated: np.ndarray,
           cfg: RankingConfig, *, idf_max: float, recency_scale: float, context_max: float, gram_weight: float,
           lift: float, updated_after: float | None) -> np.ndarray:
    """An upper bound of the score of each match `own` (int64), `raw` its BM25: that as relevance with
    the best context any match could give, 1 − (1 − bm25)(1 − context_weight·context_max), its
    recency and revision, the working set's best `lift`; −inf for one updated before
    `updated_after` whose relevance, with the 3-gram channel's most, cannot reach the age gate
    (by more than BOUND_SLACK: the kernel's exp and numpy's differ in the last bits)."""
    cfac = 1.0 - cfg.context_weight * context_max
    if _kernels is not None:
        out = np.empty(own.size)
        _kernels.bounds(own, raw, recency_base, revision, updated, out, idf_max, -np.log(2.0), cfac, cfg.w_relevance,
                        recency_scale, cfg.w_recency, cfg.revision_cap, cfg.w_revision, lift,
                        np.nan if updated_after is None else updated_after, gram_weight, AGE_GATE_RELEVANCE)
        return out
    # (numpy: each step in place, the kernel's order; at a million memories a new array for
    # each step cost more than the arithmetic)
    bound = bm25_relevance(np.array(raw, dtype=np.float64), idf_max, in_place=True)
    np.subtract(1.0, bound, out=bound)
    np.multiply(bound, cfac, out=bound)
    np.subtract(1.0, bound, out=bound)
    gated = None
    if updated_after is not None:
        gated = (updated[own] < updated_after) & (bound + gram_weight + BOUND_SLACK < AGE_GATE_RELEVANCE)
    np.multiply(bound, cfg.w_relevance, out=bound)
    recency = recency_base[own]
    np.multiply(recency, recency_scale, out=recency)
    np.minimum(recency, 1.0, out=recency)
    np.multiply(recency, cfg.w_recency, out=recency)
    rev = np.minimum(revision[own], cfg.revision_cap) / cfg.revision_cap
    np.multiply(rev, cfg.w_revision, out=rev)
    np.add(recency, rev, out=recency)
    np.add(bound, recency, out=bound)
    np.add(bound, lift, out=bound)
    if gated is not None:
        bound[gated] = -np.inf
    return bound


def best(values: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """The positions of the `k` highest `values` (float64), a tie going to the lower of `ids`
    (int64), best first: one choice whatever order the entries come in."""
    k = max(0, min(k, values.size))
    if _kernels is not None:
        out = np.empty(k, dtype=np.int64)
        _kernels.best(np.ascontiguousarray(values, dtype=np.float64), np.ascontiguousarray(ids, dtype=np.int64), out)
        return out
    if 0 < k < values.size:  # (every entry at the k-th value or above, then ordered)
        some = np.flatnonzero(values >= np.partition(values, values.size - k)[values.size - k])
        return some[np.lexsort((ids[some], -values[some]))][:k]
    return np.lexsort((ids, -values))[:k]


def dots(data: np.ndarray, query: np.ndarray, first: np.ndarray | None = None,
         length: np.ndarray | None = None) -> np.ndarray:
    """The dot products with `query` (float32) of rows of `data` (float32, rows as long as the
    query), float32, run after run: rows first[i] .. first[i] + length[i] − 1 (int64; `length`
    None: one row each; `first` None: every row, in this thread where BLAS would wake its own).
    Each is summed in one order, the kernel's and numpy's alike: lane k % 32 of 32 partial sums
    takes x[k]·q[k] in turn, lane l < 8 then adds lanes l + 8, l + 16 and l + 24, and those
    eight are added pairwise; a cosine is then the same on every machine, where BLAS picks its
    order by the CPU."""
    query = np.ascontiguousarray(query, dtype=np.float32)
    if first is None:
        first, length = np.zeros(1, np.int64), np.array([data.shape[0]], np.int64)
    first = np.ascontiguousarray(first, dtype=np.int64)
    length = None if length is None else np.ascontiguousarray(length, dtype=np.int64)
    if _kernels is not None:
        out = np.empty(int(first.size if length is None else length.sum()), np.float32)
        _kernels.dots(data, first, length, query, out)
        return out
    if length is None:
        return _row_dots(data[first], query)
    # (the runs' rows copied into one array: a few numpy calls per row of 32 lanes, not per run)
    runs = [data[a: a + n] for a, n in zip(first.tolist(), length.tolist())]
    return _row_dots(np.concatenate(runs) if runs else data[:0], query)


def _row_dots(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """`dots` of some rows, in numpy: the kernel's 32 lanes as 32 columns of the products,
    each next 32 added in turn."""
    n, d = rows.shape
    prod = rows * query
    s = np.zeros((n, 32), np.float32)
    for k in range(0, d - d % 32, 32):
        np.add(s, prod[:, k: k + 32], out=s)
    s[:, : d % 32] += prod[:, d - d % 32:]
    s = (s[:, :8] + s[:, 8:16]) + (s[:, 16:24] + s[:, 24:])
    return ((s[:, 0] + s[:, 1]) + (s[:, 2] + s[:, 3])) + ((s[:, 4] + s[:, 5]) + (s[:, 6] + s[:, 7]))


def quantize(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Each float32 row as int8 codes over its own scale (its largest magnitude / 127), with the
    row's scale and two slacks that bound what the codes leave out (`near_codes`): (codes,
    scale, slack_a, slack_b); None where they would not be read (`CODES`)."""
    if not CODES:
        return None
    n, d = rows.shape
    codes, scale = np.empty((n, d), np.int8), np.empty(n, np.float32)
    slack_a, slack_b = np.empty(n, np.float32), np.empty(n, np.float32)
    _kernels.quantize(np.ascontiguousarray(rows, dtype=np.float32), codes, scale, slack_a, slack_b)
    return codes, scale, slack_a, slack_b


def near_codes(coded: tuple, query: np.ndarray, first: np.ndarray, length: np.ndarray, cutoff: float, *,
               later: bool = False) -> np.ndarray | Callable[[], np.ndarray] | None:
    """The rows of the runs (`dots`' first and length) whose cosine with `query` can reach
    `cutoff`, by their codes (`quantize`'s four arrays): every row whose `dots` cosine reaches
    it and some that fall short, ascending by run. A quarter of the bytes of the float32 rows;
    the caller works out the few rows' cosines from those. With `later`, a function that gives
    them: a thread of the kernel's own reads the codes meanwhile (its arrays held until then).
    None where the kernel does not run or reads no codes on this CPU (the caller reads the
    float32 rows)."""
    if not CODES:
        return None
    q8, q_scale, q_norm, q_err = quantize(np.asarray(query, dtype=np.float32)[None, :])  # (the rows' own rule)
    first = np.ascontiguousarray(first, dtype=np.int64)
    length = np.ascontiguousarray(length, dtype=np.int64)
    out = np.empty(int(length.sum()), np.int64)
    got = _kernels.near_codes(*coded, first, length, q8[0], float(q_scale[0]), float(q_err[0]), float(q_norm[0]),
                              float(cutoff), out, later)
    if later:
        return lambda: out[:_kernels.near_wait(got)]
    return out[:got]


def row_reader(names: Sequence[str], specs: list[tuple]) -> Callable[[list[int]], list[dict]] | None:
    """A reader of rows of some Arrow columns, one spec per name (index/rows.column_spec): a
    list of rows -> a dict of each row's values by `names`, each as the column's `as_py` gives
    it; the buffers are held while the reader lives. None where the kernel does not run."""
    if _kernels is None:
        return None
    reader = _kernels.row_reader(tuple(names), specs)
    return lambda rows: _kernels.read_rows(reader, rows)


def gram_dots(docs: np.ndarray, store, query_ids: np.ndarray, query_w: np.ndarray) -> np.ndarray:
    """The 3-gram channel's dot product of each memory of `docs` (int64) with the query: the
    memory's entries in `store` (an index/ngrams.GramStore: positions start[doc]..stop[doc],
    below base_used in its saved arrays, the rest in its grown ones; ids int32, weights
    float32), summed in entry order, weight times the query's weight `query_w` of the same id
    in `query_ids` (int64, ascending)."""
    if _kernels is not None:
        out = np.empty(docs.size)
        _kernels.gram_dots(docs, store.start, store.stop, store.base_gram, store.base_w, store.gram_buf, store.w_buf,
                           store.base_used, query_ids, query_w, out)
        return out
    lo, hi = store.start[docs], store.stop[docs]
    lens = hi - lo
    row = np.repeat(np.arange(docs.size), lens)
    idx = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(lo, lens)
    grams, w = store.entries(idx)
    pos = np.minimum(np.searchsorted(query_ids, grams), query_ids.size - 1)
    hit = query_ids[pos] == grams
    return np.bincount(row[hit], weights=w[hit] * query_w[pos[hit]], minlength=docs.size)
