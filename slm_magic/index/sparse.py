"""The in-process sparse index: postings as CSC segments plus a small write tail.

Precompute at write time, keep the query path short: a recall is a few array slices per query
term, summed per memory in one pass (core/kernels: the best few, or every match). A write appends to the tail in
time proportional to the new memory; full tails are sealed into segments, and small segments
merge geometrically (as in a log-structured merge), so no write ever rebuilds the whole index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import ngrams
from ..core import kernels, merging
from ..core.scoring import B, K1, bm25_idf, bm25_term, bm25_weight, idf_max, length_norm, smooth_idf, tfidf_weight
from .vectors import VectorStore

TAIL_SEAL_POSTINGS = 32_768       # seal the tail into a segment past this many postings
MAX_MERGE_POSTINGS = 4_000_000    # segments this large are left alone (bounds a write's cost)


def _radix_order(keys: np.ndarray) -> np.ndarray:
    """Stable order of non-negative keys below 2^32: two 16-bit passes, which numpy sorts by
    radix (several times faster than a comparison argsort on millions of postings)."""
    keys = np.asarray(keys, dtype=np.int64)
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    high = (keys >> 16).astype(np.uint16)[low]
    return low[np.argsort(high, kind="stable")]


@dataclass
class Segment:
    """Postings sorted by term column: docs[indptr[c]:indptr[c+1]] hold term c."""

    indptr: np.ndarray   # int64, len = ncols + 1
    docs: np.ndarray     # int32
    tfs: np.ndarray      # float32

    @property
    def nnz(self) -> int:
        return int(self.docs.size)

    @classmethod
    def from_coo(cls, cols: np.ndarray, docs: np.ndarray, tfs: np.ndarray, ncols: int) -> "Segment":
        if cols.size > 1 and not (cols[1:] >= cols[:-1]).all():
            order = _radix_order(cols)
            cols, docs, tfs = cols[order], docs[order], tfs[order]
        indptr = np.zeros(ncols + 1, dtype=np.int64)
        np.cumsum(np.bincount(cols, minlength=ncols), out=indptr[1:])
        return cls(indptr, docs.astype(np.int32, copy=False), tfs.astype(np.float32, copy=False))

    def to_coo(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cols = np.repeat(np.arange(self.indptr.size - 1, dtype=np.int64), np.diff(self.indptr))
        return cols, self.docs, self.tfs

    def column(self, col: int) -> tuple[np.ndarray, np.ndarray] | None:
        if col + 1 >= self.indptr.size:
            return None
        lo, hi = self.indptr[col], self.indptr[col + 1]
        if lo == hi:
            return None
        return self.docs[lo:hi], self.tfs[lo:hi]


def merge(segments: Sequence[Segment], alive: np.ndarray, ncols: int) -> Segment:
    """One segment of the live postings of several, in their order within each column: each
    segment's postings are placed at their final positions (no sort of the whole)."""
    kept = []
    for seg in segments:
        live = alive[seg.docs] if seg.docs.size else np.zeros(0, bool)
        cols = np.repeat(np.arange(seg.indptr.size - 1), np.diff(seg.indptr))[live]
        kept.append((seg, live, cols, np.bincount(cols, minlength=ncols)[:ncols]))
    indptr = np.zeros(ncols + 1, dtype=np.int64)
    np.cumsum(sum((k[3] for k in kept), np.zeros(ncols, np.int64)), out=indptr[1:])
    docs = np.empty(int(indptr[-1]), dtype=np.int32)
    tfs = np.empty(int(indptr[-1]), dtype=np.float32)
    block = indptr[:-1].copy()  # where the next segment's postings of each column go
    for seg, live, cols, counts in kept:
        if cols.size:  # rank of each posting within its column in this segment, then its place
            first = np.concatenate(([0], np.cumsum(counts)[:-1]))
            dest = block[cols] + np.arange(cols.size) - first[cols]
            docs[dest], tfs[dest] = seg.docs[live], seg.tfs[live]
        block += counts
    return Segment(indptr, docs, tfs)


NORM_STEP = 4_000_000  # postings per step when norms are summed (bounds the temporary arrays)


def tfidf_norms(segments: Sequence[Segment], idf: np.ndarray, size: int) -> np.ndarray:
    """Squared |tf-idf| of each of `size` documents over the segments' postings, a bounded slice
    of postings at a time (a saved index's one segment holds them all)."""
    sq = np.zeros(size)
    for seg in segments:
        for lo in range(0, seg.nnz, NORM_STEP):
            hi = min(seg.nnz, lo + NORM_STEP)
            first = int(np.searchsorted(seg.indptr, lo, side="right")) - 1
            last = int(np.searchsorted(seg.indptr, hi, side="left"))
            bounds = np.clip(seg.indptr[first:last + 1], lo, hi)
            cols = np.repeat(np.arange(first, last), np.diff(bounds))
            w = tfidf_weight(seg.tfs[lo:hi], idf[cols])
            sq += np.bincount(seg.docs[lo:hi], weights=w * w, minlength=size)[:size]
    return sq


class DocTable:
    """Per-document arrays the query path reads, grown by doubling.

    Each array has one slot more than `capacity`; that last slot is a sentinel, so the link
    value -1 ("no neighbour") indexes it: prev[-1] == next[-1] == -1 and alive[-1] is False,
    and link chains can be followed with plain fancy indexing, no masks.
    """

    FIELDS = {
        "alive": np.bool_,
        "dl": np.float32,        # document length in terms
        "norm": np.float32,      # |tf-idf vector| of the document, for the cosine
        "prev": np.int32,        # previous memory of the same session, -1 if none
        "next": np.int32,        # next memory of the same session, -1 if none
        "updated": np.float64,   # updated_at, seconds since the epoch
        "revision": np.int32,
        "user": np.int32,        # code of user_id
        "project": np.int32,     # code of project
        "core": np.bool_,
        "shared": np.bool_,      # readable by every user, not only its author
        "kind": np.int8,         # 0 memory, 1 summary event
        "type": np.int8,
    }

    def __init__(self, capacity: int = 1024):
        self.capacity = max(16, capacity)
        for name, dtype in self.FIELDS.items():
            setattr(self, name, np.zeros(self.capacity + 1, dtype=dtype))
        self.prev[:] = -1
        self.next[:] = -1
        self.size = 0  # one past the highest doc id seen

    def ensure(self, n: int) -> None:
        if n > self.capacity:
            cap = max(n, self.capacity * 2)
            for name, dtype in self.FIELDS.items():
                old = getattr(self, name)
                new = np.zeros(cap + 1, dtype=dtype)
                new[: self.capacity] = old[: self.capacity]
                if name in ("prev", "next"):
                    new[self.capacity:] = -1
                setattr(self, name, new)
            self.capacity = cap
        self.size = max(self.size, n)


class SparseIndex:
    """Term postings and per-document arrays for the live memories of one store."""

    def __init__(self, k1: float = K1, b: float = B):
        self.k1 = k1
        self.b = b
        self.cols: dict[int, int] = {}        # term hash -> column
        self.df = np.zeros(1024, dtype=np.int64)
        self.segments: list[Segment] = []
        self.frozen = 0                       # leading segments never merged (mapped from a saved index)
        self.deferring = False                # a bulk write: segments merged once, at its end
        self.tail: dict[int, tuple[list[int], list[float]]] = {}
        self.tail_nnz = 0
        self.docs = DocTable()
        self.n_live = 0
        self.total_len = 0.0
        self.codes: dict[str, dict[str, int]] = {"user": {}, "project": {}}
        self.grams = ngrams.GramStore()       # the n-gram channel's forward vectors
        self.vectors = VectorStore()          # the meaning channel's vectors (none until a model is set)
        # Arrays derived from the per-document ones, kept up to date document by document.
        self._rb: np.ndarray | None = None      # recency base
        self._rb_hl = 30.0
        self._ln: np.ndarray | None = None      # BM25 length normalisation
        self._ln_avgdl = 1.0
        self._bs: tuple[float, float] = (0.0, 0.0)  # best recency base and revision (bounds)

    # --- vocabulary and codes -----------------------------------------------------------------
    def code(self, field: str, value: str) -> int:
        table = self.codes[field]
        c = table.get(value)
        if c is None:
            c = table[value] = len(table)
        return c

    def codes_of(self, field: str, values: Sequence[str]) -> np.ndarray:
        """`code` of each value (each distinct one worked out once)."""
        table = self.codes[field]
        for value in dict.fromkeys(values):  # (new ones numbered in order of appearance, as by `code`)
            if value not in table:
                table[value] = len(table)
        return np.fromiter(map(table.__getitem__, values), dtype=np.int32, count=len(values))

    def lookup_code(self, field: str, value: str) -> int:
        return self.codes[field].get(value, -2)

    def set_vocabulary(self, terms: np.ndarray, df: np.ndarray) -> None:
        """Whole-load path: the full vocabulary, sorted by hash, so a column is a searchsorted."""
        self.vocab_sorted = np.asarray(terms, dtype=np.int64)
        self.cols = dict(zip(self.vocab_sorted.tolist(), range(self.vocab_sorted.size)))
        self.df = np.zeros(max(1024, 2 * self.vocab_sorted.size), dtype=np.int64)
        self.df[: self.vocab_sorted.size] = df

    def column(self, term: int, create: bool = True) -> int:
        c = self.cols.get(term)
        if c is None and create:
            c = self.cols[term] = len(self.cols)
            if c >= self.df.size:
                self.df = np.concatenate([self.df, np.zeros(self.df.size, dtype=np.int64)])
        return -1 if c is None else c

    def columns_of(self, terms: list[int]) -> list[int]:
        """`column` of each term (new ones numbered on)."""
        got = list(map(self.cols.get, terms))
        if None in got:
            got = [self.column(t) if c is None else c for t, c in zip(terms, got)]
        return got

    def touched(self, doc_ids) -> None:
        """Per-document metadata changed in place: bring the derived arrays up to date for
        those documents only (a write never costs a pass over the whole index)."""
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        t = self.docs
        if self._rb is not None and self._rb.size == t.capacity + 1:
            rb = np.exp2((t.updated[doc_ids] - self.RECENCY_T0) / (self._rb_hl * 86_400.0))
            self._rb[doc_ids] = rb
            if rb.size:  # still an upper bound: removals never lower it
                self._bs = (max(self._bs[0], float(rb.max())), max(self._bs[1], float(t.revision[doc_ids].max())))
        else:
            self._rb = None
        if self._ln is not None and self._ln.size == t.capacity + 1:
            self._ln[doc_ids] = length_norm(t.dl[doc_ids], self._ln_avgdl, self.k1, self.b)
        else:
            self._ln = None

    # Recency as base * scale: base = 2^((updated - T0)/half-life) per document, scale =
    # 2^(-(now - T0)/half-life) per query, so a query pays one multiply, not an exp per memory.
    RECENCY_T0 = 1.7e9  # 2023-11-14, seconds since the epoch

    @property
    def recency_base(self) -> np.ndarray:
        t = self.docs
        if self._rb is None or self._rb.size != t.capacity + 1:
            self._rb = np.exp2((t.updated - self.RECENCY_T0) / (self._rb_hl * 86_400.0))
            live = t.alive[: t.size]
            self._bs = (float(self._rb[: t.size][live].max()) if live.any() else 0.0,
                        float(t.revision[: t.size][live].max()) if live.any() else 0.0)
        return self._rb

    def recency_scale(self, now: float, half_life_days: float) -> float:
        if half_life_days != self._rb_hl:
            self._rb_hl, self._rb = half_life_days, None
        return float(np.exp2(-(now - self.RECENCY_T0) / (half_life_days * 86_400.0)))

    def best_static(self, cfg, scale: float) -> float:
        """The highest recency + revision part any live memory can have now (a pruning bound)."""
        self.recency_base  # noqa: B018 - makes sure the bound is computed
        rb_max, rev_max = self._bs
        return (cfg.w_recency * min(1.0, rb_max * scale)
                + cfg.w_revision * min(rev_max, cfg.revision_cap) / cfg.revision_cap)

    @property
    def length_norm(self) -> np.ndarray:
        """k1·(1 − b + b·dl/avgdl) per document. Recomputed in full only when the average
        length has moved by more than 0.1% (new documents get theirs as they arrive)."""
        avgdl = self.avgdl
        if (self._ln is None or self._ln.size != self.docs.capacity + 1
                or abs(avgdl - self._ln_avgdl) > 1e-3 * avgdl):
            self._ln_avgdl = avgdl
            self._ln = length_norm(self.docs.dl, avgdl, self.k1, self.b)
        return self._ln

    @property
    def avgdl(self) -> float:
        return self.total_len / self.n_live if self.n_live else 1.0

    def bm25_idf(self, df: np.ndarray) -> np.ndarray:
        return bm25_idf(self.n_live, df)

    def tfidf_idf(self, df: np.ndarray) -> np.ndarray:
        return smooth_idf(self.n_live, df)

    # --- writes -------------------------------------------------------------------------------
    def add_documents(self, doc_ids: np.ndarray, cols: np.ndarray, docs: np.ndarray, tfs: np.ndarray,
                      meta: dict[str, np.ndarray], count_df: bool = True) -> None:
        """Add documents: postings as (col, doc, tf) triples and their per-doc metadata.

        Small batches go to the tail; a large batch becomes a segment of its own.
        """
        if doc_ids.size == 0:
            return
        table = self.docs
        table.ensure(int(doc_ids.max()) + 1)
        for name, values in meta.items():
            getattr(table, name)[doc_ids] = values
        table.alive[doc_ids] = True
        self.n_live += int(doc_ids.size)
        self.total_len += float(meta["dl"].sum())
        self.touched(doc_ids)
        if cols.size and count_df:
            counts = np.bincount(cols)
            self.df[: counts.size] += counts
        if cols.size >= TAIL_SEAL_POSTINGS:
            self._seal_tail()
            self._add_segment(Segment.from_coo(cols, docs, tfs, len(self.cols)))
        else:
            for c, d, f in zip(cols.tolist(), docs.tolist(), tfs.tolist()):
                entry = self.tail.get(c)
                if entry is None:
                    entry = self.tail[c] = ([], [])
                entry[0].append(d)
                entry[1].append(f)
            self.tail_nnz += int(cols.size)
            if self.tail_nnz >= TAIL_SEAL_POSTINGS:
                self._seal_tail()
        if count_df:  # (a whole load recomputes every norm at the end instead)
            self._update_norms(doc_ids, cols, docs, tfs)

    def _update_norms(self, doc_ids, cols, docs, tfs) -> None:
        """|tf-idf| of new documents with today's idf (all are recomputed at the next open)."""
        w = tfidf_weight(tfs, self.tfidf_idf(self.df[cols]))
        lo = int(doc_ids.min())
        sq = np.bincount(docs - lo, weights=w * w, minlength=int(doc_ids.max()) - lo + 1)
        self.docs.norm[doc_ids] = np.sqrt(sq[doc_ids - lo]).astype(np.float32)

    def recompute_norms(self) -> None:
        """Every document's |tf-idf| with today's idf (after a whole load, idf is final)."""
        t = self.docs
        idf = self.tfidf_idf(self.df[: len(self.cols)])
        sq = tfidf_norms(self.segments, idf, t.capacity + 1)
        for c, (ds, fs) in self.tail.items():
            w = tfidf_weight(np.asarray(fs), idf[c])
            np.add.at(sq, np.asarray(ds), w * w)
        t.norm[:] = np.sqrt(sq).astype(np.float32)

    def remove_documents(self, doc_ids: Iterable[int], cols_by_doc: dict[int, np.ndarray] | None = None) -> None:
        """Mark documents dead. Their postings stay in the segments, masked out, until a merge."""
        table = self.docs
        gone = []
        for d in doc_ids:
            if 0 <= d < table.size and table.alive[d]:
                gone.append(d)
                table.alive[d] = False
                self.n_live -= 1
                self.total_len -= float(table.dl[d])
                if cols_by_doc and d in cols_by_doc:
                    np.subtract.at(self.df, cols_by_doc[d], 1)
                self.grams.remove(d)
                self.unlink(d)
        self.vectors.drop(gone)  # (a forgotten memory's vector is not kept either)

    def _seal_tail(self) -> None:
        if not self.tail_nnz:
            return
        cols, docs, tfs = [], [], []
        for c, (ds, fs) in self.tail.items():
            cols.append(np.full(len(ds), c, dtype=np.int64))
            docs.append(np.asarray(ds, dtype=np.int32))
            tfs.append(np.asarray(fs, dtype=np.float32))
        self.tail = {}
        self.tail_nnz = 0
        self._add_segment(Segment.from_coo(np.concatenate(cols), np.concatenate(docs), np.concatenate(tfs), len(self.cols)))

    def _add_segment(self, seg: Segment) -> None:
        self.segments.append(seg)
        if self.deferring:
            return
        # Merge the newest segments while they are of a similar size (amortised O(log n)).
        while len(self.segments) - self.frozen >= 2:
            a, b = self.segments[-2], self.segments[-1]
            if a.nnz > 4 * b.nnz or a.nnz + b.nnz > MAX_MERGE_POSTINGS:
                break
            self.segments[-2:] = [merge([a, b], self.docs.alive, len(self.cols))]

    def merged_at_end(self):
        """Many segments in a row (a bulk write): merged once, at the end (`merging`), into
        segments as large as what the write added, if that is more than MAX_MERGE_POSTINGS: a
        copy in proportion to the write (a million memories' postings in 0.5 s after a 35 s
        import), after which a question reads one part of each term, not one per segment."""
        before = self.postings_held()
        return merging.deferred(self, lambda: self._merge_tail(max(MAX_MERGE_POSTINGS, self.postings_held() - before)))

    def postings_held(self) -> int:
        return sum(seg.nnz for seg in self.segments) + self.tail_nnz

    def _merge_tail(self, limit: int = MAX_MERGE_POSTINGS) -> None:
        first, runs = merging.tail_runs([seg.nnz for seg in self.segments], self.frozen, limit)
        segs = self.segments
        self.segments[first:] = [merge([segs[i] for i in run], self.docs.alive, len(self.cols)) if len(run) > 1
                                 else segs[run[0]] for run in runs]

    # --- session links (the context channel's neighbours) --------------------------------------
    def link_run_after(self, prev_doc: int, first: int, last: int) -> None:
        """Put a linked run first..last right after `prev_doc` in its session's chain."""
        nxt = int(self.docs.next[prev_doc])
        self.docs.prev[first] = prev_doc
        self.docs.next[prev_doc] = first
        self.docs.next[last] = nxt
        if nxt >= 0:
            self.docs.prev[nxt] = last

    def link_pairs(self, prev_docs: np.ndarray, docs: np.ndarray) -> None:
        """Link many (previous, next) pairs at once: the whole-load path."""
        prev_docs = np.asarray(prev_docs, dtype=np.int64)
        docs = np.asarray(docs, dtype=np.int64)
        self.docs.next[prev_docs] = docs
        self.docs.prev[docs] = prev_docs

    def replace_link(self, old: int, new: int) -> None:
        """`new` takes `old`'s place in its session's chain (the memory's content changed)."""
        p, n = int(self.docs.prev[old]), int(self.docs.next[old])
        self.docs.prev[new], self.docs.next[new] = p, n
        if p >= 0:
            self.docs.next[p] = new
        if n >= 0:
            self.docs.prev[n] = new
        self.docs.prev[old] = self.docs.next[old] = -1

    def unlink(self, doc: int) -> None:
        p, n = int(self.docs.prev[doc]), int(self.docs.next[doc])
        if p >= 0:
            self.docs.next[p] = n
        if n >= 0:
            self.docs.prev[n] = p
        self.docs.prev[doc] = self.docs.next[doc] = -1

    # --- queries ------------------------------------------------------------------------------
    def postings(self, col: int) -> tuple[np.ndarray, np.ndarray]:
        """One column's postings (docs int32, tfs float32), its parts joined."""
        parts_d, parts_f = self.posting_parts(col)
        if not parts_d:
            return np.empty(0, np.int32), np.empty(0, np.float32)
        if len(parts_d) == 1:
            return parts_d[0], parts_f[0]
        return np.concatenate(parts_d), np.concatenate(parts_f)

    def posting_parts(self, col: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """One column's postings as they lie: a view into each segment that holds it, then the
        tail's. Joining them copied every posting of a question's terms, a third of a recall
        at a million memories just after a bulk import (eight segments)."""
        parts_d, parts_f = [], []
        for seg in self.segments:
            got = seg.column(col)
            if got is not None:
                parts_d.append(got[0])
                parts_f.append(got[1])
        entry = self.tail.get(col)
        if entry is not None and entry[0]:
            parts_d.append(np.asarray(entry[0], dtype=np.int32))
            parts_f.append(np.asarray(entry[1], dtype=np.float32))
        return parts_d, parts_f

    def channel_scores(self, terms: Sequence[int], qtf: Sequence[int], query_len: int,
                       qgrams: Sequence[tuple[int, tuple[int, ...]]] = ()) -> "ChannelScores":
        """Raw BM25 and TF-IDF dot products for every document sharing a term with the query,
        and the query's n-gram vector (the channel scores a pool of matches later)."""
        n = self.docs.size
        k1, b = self.k1, self.b
        avgdl = self.avgdl
        K = self.length_norm
        q_cols = [self.cols.get(t, -1) for t in terms]
        df = np.array([self.df[c] if c >= 0 else 0 for c in q_cols], dtype=np.float64)
        qtf_a = np.asarray(qtf, dtype=np.float64)
        idf_b = self.bm25_idf(df)
        idf_t = self.tfidf_idf(df)
        # The query scored as a document of itself: the most a memory can match it.
        ideal = float(np.sum(bm25_term(qtf_a, idf_b, qtf_a, length_norm(query_len, avgdl, k1, b), k1)))
        q_w = tfidf_weight(qtf_a, idf_t) if qtf_a.size else qtf_a
        q_norm = float(np.sqrt(np.sum(q_w * q_w)))
        all_d, all_f, used, parts = [], [], [], []
        for i, c in enumerate(q_cols):
            if c < 0:
                continue
            d, f = self.posting_parts(c)
            if not d:
                continue
            all_d += d
            all_f += f
            used.append(i)
            parts.append(len(d))
        top_idf = idf_max(self.n_live)  # a term one memory has: the relevance scale
        known = {t for t, c in zip(terms, q_cols) if c >= 0 and self.df[c] > 0}
        gq = ngrams.query_weights(*ngrams.query_vector(qgrams, known), self.grams.df, self.n_live)
        if not all_d:
            return ChannelScores(None, ideal, q_norm, n_terms=len(terms), idf_max=top_idf, grams=gq)
        used_idf = idf_b[used]
        tfidf = np.repeat(q_w[used] * idf_t[used], parts)

        def dot() -> np.ndarray:
            d = np.concatenate(all_d).astype(np.intp)
            f = np.concatenate(all_f)
            return np.bincount(d, weights=np.repeat(tfidf, [a.size for a in all_d]) * (1.0 + np.log(f)),
                               minlength=n + 1)
        return ChannelScores(dot, ideal, q_norm, term_docs=all_d, term_tfs=all_f,
                             term_weights=np.repeat(bm25_weight(qtf_a[used], used_idf, k1), parts), length_norm=K,
                             size=n + 1, term_parts=None if len(parts) == len(all_d) else np.array(parts),
                             term_idf=used_idf, n_terms=len(terms), idf_total=float(idf_b.sum()), idf_max=top_idf,
                             grams=gq)


@dataclass
class ChannelScores:
    """A query's raw scores. BM25 of the word matches, summed from the query terms' postings
    when asked: every match (`matched`, `matched_bm25`), or only the few a ranking needs (the
    best k, those over a floor: `best_bm25`, `bm25_at_least`), which the compiled kernel finds
    without writing out every match; `bm25_of` any memories. The TF-IDF dot products per
    memory as a dense array (index n is a zero sentinel for 'no neighbour'), which may be given
    as a function that works it out when read: only the context channel reads it, it is off by
    default, and at a million memories the array costs more than the recall's sums."""

    _dot: np.ndarray | Callable[[], np.ndarray] | None
    ideal_bm25: float
    query_norm: float
    # Each query term that occurs: its postings' documents (ascending) and tfs and its BM25
    # weight (qtf·idf·(k1 + 1)), per part (a segment's, the tail's: `term_parts` says how many
    # parts each term has, in order; None: one each), its idf; the memories' length norms and
    # how many there are (with the sentinel). The documents are kept for the learned ranker's
    # coverage features too (references, not copies), with the query's terms and idf sum.
    term_docs: list = field(default_factory=list)
    term_tfs: list = field(default_factory=list)
    term_weights: np.ndarray = field(default_factory=lambda: np.empty(0))
    length_norm: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))
    size: int = 0
    term_parts: np.ndarray | None = None
    term_idf: np.ndarray = field(default_factory=lambda: np.empty(0))
    n_terms: int = 0
    idf_total: float = 0.0
    idf_max: float = 0.0   # BM25 idf of a term one memory has (see ranking.bm25_relevance)
    grams: tuple = (np.empty(0, np.int64), np.empty(0), 0.0)  # the query's gram hashes, weights, norm
    words: dict = field(default_factory=dict)  # term hash -> query word (set by the caller; for features)
    # Sums worked out so far: every match's, once read; and the widest few asked for (docs,
    # their BM25, the BM25 from which on they hold every match), so none is summed twice.
    _every: tuple | None = None
    _some: tuple | None = None

    @property
    def matched(self) -> np.ndarray:
        """Every word match (int64, ascending): the memories whose BM25 is not 0."""
        return self.every_match()[0]

    @property
    def matched_bm25(self) -> np.ndarray:
        return self.every_match()[1]

    @property
    def has_matches(self) -> bool:
        """Whether any memory matches (no posting adds 0 unless a weight is 0: then every match is summed)."""
        if self._every is None and (not self.term_docs or (self.term_weights > 0).all()):
            return bool(self.term_docs)
        return bool(self.matched.size)

    def every_match(self) -> tuple[np.ndarray, np.ndarray]:
        """Every word match and its BM25, summed once: what the few below are then read from."""
        if self._every is None:
            self._every = (kernels.accumulate(self.term_docs, self.term_tfs, self.term_weights, self.length_norm,
                                              self.size) if self.term_docs else (np.empty(0, np.int64), np.empty(0)))
        return self._every

    def hold_best(self, k: int) -> None:
        """The k best summed now unless held already: one pass over the postings then serves
        every later ask for as many or fewer (a pass costs the same whatever k). The few held are
        the best (a tie to the lower memory) of every match: any k of them as many are the best k."""
        if self._every is None and (self._some is None or self._some[0].size < k):
            self._sums(k=k)

    def best_bm25(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k matches with the most BM25 (a tie to the lower memory; all of them if fewer),
        ascending, and their BM25."""
        self.hold_best(k)
        docs, raw = self._every or self._some[:2]
        if k < docs.size:
            at = np.sort(kernels.best(raw, docs, k))
            return docs[at], raw[at]
        return docs, raw

    def bm25_at_least(self, floor: float) -> tuple[np.ndarray, np.ndarray]:
        """Every match whose BM25 reaches `floor`, ascending, and their BM25."""
        if self._every is None and (self._some is None or self._some[2] > floor):
            self._sums(floor=floor)
        docs, raw = self._every or self._some[:2]
        keep = raw >= floor
        return docs[keep], raw[keep]

    def _sums(self, k: int = 0, floor: float = -np.inf) -> None:
        """The kernel's best k, or those over the floor, kept if they reach lower than the ones
        kept; every match summed where the kernel cannot, or k is more than there are."""
        got = kernels.best_sums(self.term_docs, self.term_tfs, self.term_weights, self.length_norm, k=k, floor=floor)
        if got is None or (k and got[0].size < k):
            self._every = got or self.every_match()
            return
        whole_from = float(np.nextafter(got[1].min(), np.inf)) if k else floor  # (a tie at the k-th may be cut)
        if self._some is None or whole_from <= self._some[2]:
            self._some = (*got, whole_from)

    def bm25_of(self, docs: np.ndarray) -> np.ndarray:
        """The raw BM25 of each of `docs` (0 for a memory that matches no query word)."""
        docs = np.asarray(docs)
        if self._every is None and not self.term_docs:
            return np.zeros(docs.size)
        known, raw = self._every or (self._some or (np.empty(0, np.int64), np.empty(0)))[:2]
        out = np.zeros(docs.size)
        at, hit = locate(known, docs)
        out[hit] = raw[at]
        if self._every is None and not hit.all():  # (the others summed where they are)
            sums = kernels.sums_at(self.term_docs, self.term_tfs, self.term_weights, self.length_norm, docs[~hit])
            if sums is None:  # (the kernel cannot: every match summed)
                self.every_match()
                return self.bm25_of(docs)
            out[~hit] = sums
        return out

    @property
    def dot(self) -> np.ndarray | None:
        if callable(self._dot):
            self._dot = self._dot()
        return self._dot

    def coverage(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per document: the share of the query's terms it contains, plain and idf-weighted.
        (A term's postings list their documents in ascending order, so each document asked
        about is a binary search in them: the postings are many, the documents few, and the
        search reads a few of their cache lines where marking them read them all. Postings
        out of order are marked instead.)"""
        docs = np.asarray(docs, dtype=np.int64)
        if not self.term_docs or not docs.size:
            return np.zeros(docs.size), np.zeros(docs.size)
        found = self._found(docs)
        hits = found.sum(axis=0, dtype=np.float64)
        weighted = (self.term_idf[:, None] * found).sum(axis=0)
        return hits / max(1, self.n_terms), weighted / (self.idf_total or 1.0)

    def _found(self, docs: np.ndarray) -> np.ndarray:
        """Whether each query term that occurs (rows) is in each of `docs` (columns)."""
        found = self._found_in_parts(docs)
        if self.term_parts is None:
            return found
        return np.logical_or.reduceat(found, np.cumsum(self.term_parts) - self.term_parts, axis=0)

    def _found_in_parts(self, docs: np.ndarray) -> np.ndarray:
        """Whether each part of the postings (rows) holds each of `docs` (columns)."""
        found = np.zeros((len(self.term_docs), docs.size), dtype=bool)
        mark = None
        for row, d in enumerate(self.term_docs):
            # (in order unless a catch-up took another kernel's writes out of their doc ids' order)
            if d.size < 2 or (d[1:] > d[:-1]).all():
                few = docs.astype(d.dtype)  # (in the postings' type, else searchsorted copies them)
                at = np.minimum(np.searchsorted(d, few), d.size - 1)
                found[row] = d[at] == few
                continue
            if mark is None:  # (one per document asked about or held)
                mark = np.zeros(max(int(docs.max()), *(int(t.max()) for t in self.term_docs if t.size)) + 1, bool)
            mark[d] = True
            found[row] = mark[docs]
            mark[d] = False
        return found


def locate(few: np.ndarray, many: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the entries of `many` occur in the sorted small array `few`: (their slots in
    `few`, a mask over `many`). One binary search per entry of `many`: O(len(many)·log len(few)),
    where np.isin would sort `many` or compare it against every entry of `few`."""
    if not few.size or not many.size:
        return np.empty(0, dtype=np.intp), np.zeros(many.size, dtype=bool)
    pos = np.minimum(np.searchsorted(few, many), few.size - 1)
    hit = few[pos] == many
    return pos[hit], hit
