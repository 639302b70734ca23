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

from ..core import kernels
from ..core.scoring import smooth_idf, tfidf_weight

#: How many of the best matches (by everything but this channel) it re-orders: 20 to 100
#: measured the same on every benchmark (RESULTS.md, section 9).
POOL = 20


def query_vector(qgrams: Sequence[tuple[int, tuple[int, ...]]], known_terms) -> tuple[Counter, set[int]]:
    """(gram -> count over the query's terms, the grams of terms some memory contains)."""
    counts: Counter[int] = Counter()
    normed: set[int] = set()
    for term, grams in qgrams:
        counts.update(grams)
        if term in known_terms:
            normed.update(grams)
    return counts, normed


def query_weights(counts: Counter, normed: set[int], df, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(gram hashes that some memory has, their ltc weights, the query norm); `df` maps a gram
    hash to its document frequency."""
    if not counts:
        return np.empty(0, np.int64), np.empty(0), 0.0
    # (the grams some memory has picked out in Python, then three array operations: a call
    # per gram cost more than the arithmetic)
    get = df.get
    held = [(g, k, f, g in normed) for g, k in counts.items() if (f := get(g, 0)) > 0]
    if not held:
        return np.empty(0, np.int64), np.empty(0), 0.0
    keys, c, f, in_norm = zip(*held)
    w = tfidf_weight(np.array(c, dtype=np.float64), smooth_idf(n, np.array(f, dtype=np.float64)))
    return np.array(keys, dtype=np.int64), w, float(np.sqrt(np.sum(w[np.array(in_norm)] ** 2)))


#: 1 + ln(tf) for the frequencies most grams have (a lookup instead of a logarithm each).
_LNC = 1.0 + np.log(np.arange(1, 4097, dtype=np.float64))


def lnc_weights(tf: np.ndarray) -> np.ndarray:
    """1 + ln(tf) of positive frequencies."""
    tf = np.asarray(tf)
    if tf.size and int(tf.max()) > _LNC.size:
        return 1.0 + np.log(tf.astype(np.float64))
    return _LNC[tf - 1]


class GramStore:
    """Each memory's gram vector, stored forward (memory -> gram ids) in growing flat buffers:
    scoring a pool of memories reads their slices only, never a gram's postings. A gram is kept
    as a 4-byte id (`keys[id]` is its hash: a few tens of thousands of distinct grams stand for
    over a hundred million entries at a million memories). The document frequency of each gram
    (for the query's idf) is a dict by hash."""

    def __init__(self):
        self.df: dict[int, int] = {}
        self.ids: dict[int, int] = {}                 # gram hash -> id
        self.keys = np.zeros(1024, dtype=np.int64)   # id -> gram hash
        self.start = np.zeros(1024, dtype=np.int64)
        self.stop = np.zeros(1024, dtype=np.int64)
        self.norm = np.zeros(1024, dtype=np.float64)
        # Entries [0, base_used) live in the base buffers (mapped from a saved index, never
        # written); later ones in the growing buffers, at their position minus base_used.
        self.base_gram = np.zeros(0, dtype=np.int32)
        self.base_w = np.zeros(0, dtype=np.float32)
        self.base_used = 0
        self.gram_buf = np.zeros(4096, dtype=np.int32)
        self.w_buf = np.zeros(4096, dtype=np.float32)   # 1 + ln(tf)
        self.used = 0

    def set_base(self, grams: np.ndarray, weights: np.ndarray) -> None:
        """Start from saved buffers (read-only): new memories go to buffers of their own, so the
        saved ones are never copied."""
        self.base_gram, self.base_w = grams, weights
        self.base_used = self.used = int(grams.size)
        self.gram_buf = np.zeros(4096, dtype=np.int32)
        self.w_buf = np.zeros(4096, dtype=np.float32)

    def set_keys(self, keys: np.ndarray) -> None:
        """The gram of each id (a saved index's): ids go on from there."""
        self.keys = np.array(keys, dtype=np.int64)
        self.ids = dict(zip(self.keys.tolist(), range(self.keys.size)))

    def id_list(self) -> np.ndarray:
        """keys[:number of ids]: the hash of every id, in id order."""
        return self.keys[: len(self.ids)]

    def _ids_of(self, uniq: np.ndarray, inverse: np.ndarray) -> np.ndarray:
        """The ids of gram hashes given as np.unique's (values, inverse), new ones numbered on."""
        ids, table = np.empty(uniq.size, dtype=np.int32), self.ids
        for i, g in enumerate(uniq.tolist()):
            got = table.get(g)
            if got is None:
                got = table[g] = len(table)
                if got >= self.keys.size:
                    self.keys = np.concatenate([self.keys, np.zeros(self.keys.size, dtype=np.int64)])
                self.keys[got] = g
            ids[i] = got
        return ids[inverse]

    def reader(self) -> "GramStore":
        """The entries as they are now, for a reader in another thread: the buffers are shared
        (only appended to past `used`, or replaced when they grow), the ids copied."""
        view = GramStore.__new__(GramStore)
        view.base_gram, view.base_w, view.base_used = self.base_gram, self.base_w, self.base_used
        view.gram_buf, view.w_buf, view.used = self.gram_buf, self.w_buf, self.used
        view.keys = self.id_list().copy()
        return view

    def entries(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(gram ids, weights) at positions `idx`, from whichever buffer holds each."""
        b = self.base_used
        if not b:
            return self.gram_buf[idx], self.w_buf[idx]
        if idx.size and int(idx.min()) >= b:
            return self.gram_buf[idx - b], self.w_buf[idx - b]
        old = idx < b
        if old.all():
            return self.base_gram[idx], self.base_w[idx]
        grams = np.empty(idx.size, dtype=np.int32)
        w = np.empty(idx.size, dtype=np.float32)
        grams[old], w[old] = self.base_gram[idx[old]], self.base_w[idx[old]]
        new = idx[~old] - b
        grams[~old], w[~old] = self.gram_buf[new], self.w_buf[new]
        return grams, w

    def _grow_docs(self, n: int) -> None:
        if n > self.start.size:
            size = max(n, 2 * self.start.size)
            for name in ("start", "stop", "norm"):
                old = getattr(self, name)
                new = np.zeros(size, dtype=old.dtype)
                new[: old.size] = old
                setattr(self, name, new)

    def add(self, p_doc: np.ndarray, p_gram: np.ndarray, p_tf: np.ndarray, doc_ids: np.ndarray,
            unique: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        """Add memories `doc_ids` with their (doc, gram, tf) triples (grouped by doc), counting
        their document frequencies. `unique`: the distinct grams, sorted, each triple's index
        into them and how many memories hold each, when the analyser gave them."""
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        if not doc_ids.size:
            return
        self._grow_docs(int(doc_ids.max()) + 1)
        p_doc = np.asarray(p_doc, dtype=np.int64)
        p_gram = np.asarray(p_gram)
        if p_doc.size > 1 and not (p_doc[1:] >= p_doc[:-1]).all():
            order = np.argsort(p_doc, kind="stable")
            p_doc, p_gram, p_tf = p_doc[order], p_gram[order], np.asarray(p_tf)[order]
            unique = None if unique is None else (unique[0], unique[1][order], unique[2])
        if unique is None:  # (a memory lists each of its grams once)
            unique = np.unique(p_gram, return_inverse=True, return_counts=True)
        uniq, inverse, holders = unique
        df = self.df
        for g, c in zip(uniq.tolist(), holders.tolist()):
            df[g] = df.get(g, 0) + c
        m = p_gram.size
        here = self.used - self.base_used  # where the new entries start in the growing buffers
        if here + m > self.gram_buf.size:
            size = max(here + m, 2 * self.gram_buf.size)
            for name in ("gram_buf", "w_buf"):
                old = getattr(self, name)
                new = np.zeros(size, dtype=old.dtype)
                new[: here] = old[: here]
                setattr(self, name, new)
        w = lnc_weights(p_tf)
        self.gram_buf[here: here + m] = self._ids_of(uniq, inverse)
        self.w_buf[here: here + m] = w
        doc_ids_sorted = np.sort(doc_ids)
        lo = int(doc_ids_sorted[0])
        counts = np.bincount(p_doc - lo, minlength=int(doc_ids_sorted[-1]) - lo + 1)[doc_ids_sorted - lo]
        offsets = np.concatenate(([0], np.cumsum(counts)))
        self.start[doc_ids_sorted] = self.used + offsets[:-1]
        self.stop[doc_ids_sorted] = self.used + offsets[1:]
        sq = np.zeros(doc_ids.size, dtype=np.float64)
        has = counts > 0
        if m:
            sq[has] = np.add.reduceat(w * w, offsets[:-1][has])
        self.norm[doc_ids_sorted] = np.sqrt(sq)
        self.used += m

    def remove(self, doc: int) -> None:
        if 0 <= doc < self.start.size and self.stop[doc] > self.start[doc]:
            df = self.df
            ids, _ = self.entries(np.arange(self.start[doc], self.stop[doc]))
            for g in self.keys[ids].tolist():
                df[g] -= 1
            self.start[doc] = self.stop[doc] = 0

    def cosine(self, docs: np.ndarray, keys: np.ndarray, weights: np.ndarray, qnorm: float) -> np.ndarray:
        """The channel for memories `docs` of the index, from their forward slices."""
        out = np.zeros(docs.size)
        if not docs.size or not keys.size or qnorm <= 0:
            return out
        qid = np.fromiter((self.ids.get(k, -1) for k in keys.tolist()), dtype=np.int64, count=keys.size)
        known = qid >= 0
        if not known.any():
            return out
        order = np.argsort(qid[known])
        sk, sw = qid[known][order], np.asarray(weights, dtype=np.float64)[known][order]
        docs = np.asarray(docs, dtype=np.int64)
        dot = kernels.gram_dots(docs, self, sk, sw)
        norm = self.norm[docs]
        ok = norm > 0
        out[ok] = dot[ok] / (qnorm * norm[ok])
        return np.minimum(1.0, out)
