"""The n-gram channel: the character 3-grams of a memory's terms, as a forward vector per memory.

What BM25 on stems cannot see: word parts and variants (`dedup` / `deduplicated`, `df_churn_v2` /
`churn`, a typo), and how much of a memory is about the query rather than how often it says a
query word. Weighted as SMART lnc.ltc: a memory's vector is 1 + ln(tf) per gram, cosine
normalised, with no idf (so its norm is fixed when it is written and every path computes the same
one); the query's is (1 + ln tf)·idf. The channel re-orders the best matches (`POOL` of them);
it never admits a memory.

The query's norm counts only the grams of query terms some memory contains: a query word no
memory has can add to a memory's score through shared grams (a typo finds its word), never
lower it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

#: How many of the best matches (by everything but this channel) it re-orders: 20 to 100
#: measured the same on every benchmark (RESULTS.md, section 7).
POOL = 20


def smooth_idf(n: int, df: np.ndarray) -> np.ndarray:
    return np.log((1.0 + n) / (1.0 + df)) + 1.0


def query_vector(qgrams: Sequence[tuple[int, tuple[int, ...]]], known_terms) -> tuple[Counter, set[int]]:
    """(gram -> count over the query's terms, the grams of terms some memory contains)."""
    counts: Counter[int] = Counter()
    normed: set[int] = set()
    for term, grams in qgrams:
        counts.update(grams)
        if term in known_terms:
            normed.update(grams)
    return counts, normed


def query_weights(counts: Counter, normed: set[int], df: dict[int, int] | np.ndarray, n: int,
                  cols: dict[int, int] | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """(gram keys that some memory has, their ltc weights, the query norm): keys are gram hashes,
    or columns of `cols` when given; `df` is looked up by hash, or by column when `cols` is given."""
    if not counts:
        return np.empty(0, np.int64), np.empty(0), 0.0
    grams = list(counts)
    c = np.fromiter(counts.values(), dtype=np.float64, count=len(grams))
    if cols is None:
        keys = np.asarray(grams, dtype=np.int64)
        f = np.fromiter((df.get(g, 0) for g in grams), dtype=np.float64, count=len(grams))
    else:
        keys = np.fromiter((cols.get(g, -1) for g in grams), dtype=np.int64, count=len(grams))
        f = np.where(keys >= 0, df[np.maximum(keys, 0)], 0).astype(np.float64)
    has = f > 0
    w = (1.0 + np.log(c[has])) * smooth_idf(n, f[has])
    in_norm = np.fromiter((g in normed for g in grams), dtype=bool, count=len(grams))[has]
    return keys[has], w, float(np.sqrt(np.sum(w[in_norm] ** 2)))


def doc_norm(gtfs: np.ndarray) -> float:
    return float(np.sqrt(np.sum((1.0 + np.log(np.asarray(gtfs, dtype=np.float64))) ** 2)))


def cosine_of_rows(keys: np.ndarray, weights: np.ndarray, qnorm: float,
                   rows: Sequence[tuple[Sequence[int], Sequence[int]]]) -> np.ndarray:
    """The channel for memories given as (grams, gtfs) lists: the SQL fallback's path."""
    out = np.zeros(len(rows))
    if not keys.size or qnorm <= 0:
        return out
    order = np.argsort(keys)
    sk, sw = keys[order], weights[order]
    for i, (grams, gtfs) in enumerate(rows):
        g = np.asarray(grams, dtype=np.int64)
        if not g.size:
            continue
        f = 1.0 + np.log(np.asarray(gtfs, dtype=np.float64))
        pos = np.minimum(np.searchsorted(sk, g), sk.size - 1)
        hit = sk[pos] == g
        out[i] = float(np.dot(f[hit], sw[pos[hit]])) / (qnorm * float(np.sqrt(np.sum(f * f))))
    return np.minimum(1.0, out)


class GramStore:
    """Each memory's gram vector, stored forward (memory -> grams) in growing flat buffers:
    scoring a pool of memories reads their slices only, never a gram's postings."""

    def __init__(self):
        self.cols: dict[int, int] = {}
        self.df = np.zeros(1024, dtype=np.int64)
        self.start = np.zeros(1024, dtype=np.int64)
        self.stop = np.zeros(1024, dtype=np.int64)
        self.norm = np.zeros(1024, dtype=np.float64)
        self.col_buf = np.zeros(4096, dtype=np.int32)
        self.w_buf = np.zeros(4096, dtype=np.float32)   # 1 + ln(tf)
        self.used = 0

    def _grow_docs(self, n: int) -> None:
        if n > self.start.size:
            size = max(n, 2 * self.start.size)
            for name in ("start", "stop", "norm"):
                old = getattr(self, name)
                new = np.zeros(size, dtype=old.dtype)
                new[: old.size] = old
                setattr(self, name, new)

    def set_vocabulary(self, grams: np.ndarray, df: np.ndarray) -> None:
        """Whole-load path: every gram, sorted by hash, with its document frequency."""
        self.vocab_sorted = np.asarray(grams, dtype=np.int64)
        self.cols = dict(zip(self.vocab_sorted.tolist(), range(self.vocab_sorted.size)))
        self.df = np.zeros(max(1024, 2 * self.vocab_sorted.size), dtype=np.int64)
        self.df[: self.vocab_sorted.size] = df

    def add(self, p_doc: np.ndarray, p_gram: np.ndarray, p_tf: np.ndarray, doc_ids: np.ndarray,
            count_df: bool = True) -> None:
        """Add memories `doc_ids` with their (doc, gram, tf) triples (grouped by doc). Without
        `count_df` (the whole load) the vocabulary and its frequencies are set already."""
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        if not doc_ids.size:
            return
        self._grow_docs(int(doc_ids.max()) + 1)
        p_doc = np.asarray(p_doc, dtype=np.int64)
        if p_doc.size > 1 and not (p_doc[1:] >= p_doc[:-1]).all():
            order = np.argsort(p_doc, kind="stable")
            p_doc, p_gram, p_tf = p_doc[order], np.asarray(p_gram)[order], np.asarray(p_tf)[order]
        if not count_df:
            col = np.searchsorted(self.vocab_sorted, np.asarray(p_gram, dtype=np.int64))
        else:
            uniq, inverse = np.unique(np.asarray(p_gram, dtype=np.int64), return_inverse=True)
            cols_of = self.cols
            col = np.fromiter((cols_of.setdefault(g, len(cols_of)) for g in uniq.tolist()), dtype=np.int64,
                              count=uniq.size)[inverse]
            if len(cols_of) > self.df.size:
                self.df = np.concatenate([self.df, np.zeros(max(len(cols_of), self.df.size), dtype=np.int64)])
            self.df[: len(cols_of)] += np.bincount(col, minlength=len(cols_of))
        m = col.size
        if self.used + m > self.col_buf.size:
            size = max(self.used + m, 2 * self.col_buf.size)
            for name in ("col_buf", "w_buf"):
                old = getattr(self, name)
                new = np.zeros(size, dtype=old.dtype)
                new[: self.used] = old[: self.used]
                setattr(self, name, new)
        w = (1.0 + np.log(np.asarray(p_tf, dtype=np.float64)))
        self.col_buf[self.used: self.used + m] = col
        self.w_buf[self.used: self.used + m] = w
        doc_ids_sorted = np.sort(doc_ids)
        lo = int(doc_ids_sorted[0])
        counts = np.bincount(p_doc - lo, minlength=int(doc_ids_sorted[-1]) - lo + 1)[doc_ids_sorted - lo]
        offsets = self.used + np.concatenate(([0], np.cumsum(counts)))
        self.start[doc_ids_sorted] = offsets[:-1]
        self.stop[doc_ids_sorted] = offsets[1:]
        sq = np.bincount(np.repeat(np.arange(doc_ids.size), counts), weights=w * w, minlength=doc_ids.size)
        self.norm[doc_ids_sorted] = np.sqrt(sq)
        self.used += m

    def remove(self, doc: int) -> None:
        if 0 <= doc < self.start.size and self.stop[doc] > self.start[doc]:
            np.subtract.at(self.df, self.col_buf[self.start[doc]: self.stop[doc]], 1)
            self.start[doc] = self.stop[doc] = 0

    def cosine(self, docs: np.ndarray, keys: np.ndarray, weights: np.ndarray, qnorm: float) -> np.ndarray:
        """The channel for memories `docs` of the index, from their forward slices."""
        out = np.zeros(docs.size)
        if not docs.size or not keys.size or qnorm <= 0:
            return out
        order = np.argsort(keys)
        sk, sw = keys[order], weights[order]
        lo, hi = self.start[docs], self.stop[docs]
        lens = hi - lo
        total = int(lens.sum())
        if not total:
            return out
        row = np.repeat(np.arange(docs.size), lens)
        idx = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(lo, lens)
        cols = self.col_buf[idx]
        pos = np.minimum(np.searchsorted(sk, cols), sk.size - 1)
        hit = sk[pos] == cols
        dot = np.bincount(row[hit], weights=self.w_buf[idx[hit]] * sw[pos[hit]], minlength=docs.size)
        norm = self.norm[docs]
        ok = norm > 0
        out[ok] = dot[ok] / (qnorm * norm[ok])
        return np.minimum(1.0, out)
