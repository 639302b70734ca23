"""The meaning channel in a ranking: its part fused into the word matches' relevance, a stray
word match kept only when the meaning agrees, and the few memories that share no word with the
question but stand out by meaning admitted after the word matches they do not outrank."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..core import kernels
from ..core.scoring import AGE_GATE_RELEVANCE, RankingConfig, admission, meaning_part, spread
from ..index.sparse import ChannelScores, SparseIndex, locate
from .fusion import passes, scored, with_grams
from .ranked import Ranked, WorkingSet


def closeness(index: SparseIndex, query: np.ndarray, cfg: RankingConfig) -> tuple[float, float]:
    """The mean and deviation of the question's cosines with the store, which measure how far
    one memory stands out: its cosines with a fixed sample of the store's memories, shrunk
    towards `meaning_prior`. A generic question is close to everything, and a cosine that
    stands out for one question is ordinary for another."""
    return spread(*index.vectors.background(query, index.docs.alive), cfg)


@dataclass
class MeaningSearch:
    """What the meaning channel works out from the question alone, begun before the words are
    ranked: how close the question is to the store (`closeness`), what standing out takes
    (`admission`) and, unless nothing may come by meaning alone, the cells' nearest memories,
    read meanwhile by a thread of the kernel's own where the cells have codes."""

    query: np.ndarray
    mu: float
    sd: float
    need: float
    cutoff: float
    nearest: Callable[[], tuple[np.ndarray, np.ndarray]] | None


def search_meaning(index: SparseIndex, query: np.ndarray, cfg: RankingConfig, *, admit: bool = True) -> MeaningSearch:
    """The meaning channel begun (`MeaningSearch`); `with_meaning` ends it."""
    mu, sd = closeness(index, query, cfg)
    need, cutoff = admission(cfg, mu, sd, index.vectors.live)
    return MeaningSearch(query, mu, sd, need, cutoff, index.vectors.nearest_later(query, cutoff) if admit else None)


def with_meaning(index: SparseIndex, cs: ChannelScores | None, words: Ranked, search: MeaningSearch,
                 cfg: RankingConfig, *, now: float, user: int, project: int | None, limit: int,
                 working_set: WorkingSet | None = None, updated_after: float | None = None,
                 kind: int | None = None, type_code: int | None = None, strict: bool = True) -> Ranked:
    """The word matches `words` (ranked by the lexical channels) with the meaning part fused
    into their relevance as a noisy-or, 1 − (1 − lexical)(1 − meaning_weight · part), a stray
    one dropped (RankingConfig.word_floor; not with `strict` False: a question naming a day
    matches that day's summaries by the day), and (unless the search began without its nearest:
    the question names identifiers that memories hold) the memories that share no word with the
    question but stand out by meaning (RankingConfig.meaning_admit), scored the same way with
    a lexical part of 0. The age gate reads the fused relevance. A meaning-only match never
    stands above a word match that is more relevant or scores as high. The best `limit`."""
    t, query = index.docs, search.query
    pick = np.empty(0, np.int64)
    if search.nearest is not None:
        only_user = user if len(index.codes["user"]) > 1 or user < 0 else None
        pick, near = search.nearest()
        probe = cfg.word_probe(index.vectors.live)
        if probe and cs is not None and cs.has_matches and index.vectors.centroids.shape[0]:
            pick, near = _with_word_matches(index, cs, words.doc_ids, query, search.cutoff, probe, pick, near)
        pick = _closest_eligible(t, pick[np.lexsort((pick, -near))], words.doc_ids, cfg.meaning_top,
                                 only_user, project, kind, type_code)
    both = words
    if pick.size:
        # (scored as every match, without the n-gram part: it re-orders word matches only)
        both = words.followed_by(with_grams(index, None, cfg, pick, scored(index, cs, cfg, pick, now=now,
                                                                              working_set=working_set),
                                             None, pick.size))
    if not both.doc_ids.size:
        return both
    docs = both.doc_ids
    coverage = (lambda rows: cs.coverage(docs[rows])[1]) if cs is not None and cs.term_docs else None
    return fuse_meaning(both, index.vectors.cosine(docs, query), search.mu, search.sd, search.need, cfg,
                        strict=strict, coverage=coverage, updated=t.updated[docs], updated_after=updated_after,
                        limit=limit)


def fuse_meaning(both: Ranked, cos: np.ndarray, mu: float, sd: float, need: float, cfg: RankingConfig, *,
                 strict: bool, coverage: Callable[[np.ndarray], np.ndarray] | None, updated: np.ndarray,
                 updated_after: float | None, limit: int) -> Ranked:
    """The one fusion of the meaning channel (`with_meaning`, and the SQL fallback's): word
    matches and then meaning-only rows (bm25 0) in `both`, each row's cosine `cos` with the
    question, the store's mean `mu` and deviation `sd`, the deviations `need`ed to come by
    meaning alone; `coverage` gives the idf share of the question that rows (by position) hold
    (None: unknown), asked only for the weak word matches the meaning does not support."""
    z = (cos - mu) / sd  # (a row without a vector has cosine 0: below the mean)
    part = meaning_part(cos, cfg)
    lexical = both.bm25 > 0  # (the n-gram channel re-orders word matches; it never admits one)
    rel = 1.0 - (1.0 - both.relevance) * (1.0 - cfg.meaning_weight * part)
    score = both.score + cfg.w_relevance * (rel - both.relevance)
    real = np.ones(both.doc_ids.size, bool)
    if strict:
        real = (both.relevance >= cfg.word_floor) | (z >= cfg.word_support) | (cos >= cfg.word_support_cos)
        weak = np.flatnonzero(lexical & ~real)
        if coverage is not None and weak.size:
            real[weak] = coverage(weak) >= cfg.word_coverage
    words_kept = lexical & real
    best_word = float(rel[words_kept].max()) if words_kept.any() else 0.0
    keep = words_kept | (~lexical & (z >= need) & (rel >= cfg.meaning_relative * best_word))
    if updated_after is not None:
        keep &= (updated >= updated_after) | (rel >= AGE_GATE_RELEVANCE)
    rows = np.flatnonzero(keep)
    rows = rows[np.lexsort((both.doc_ids[rows], -score[rows]))]
    rows = rows[_words_first(lexical[rows], score[rows], rel[rows])][:limit]
    out = both.take(rows, score=score[rows])
    out.relevance, out.meaning, out.similar = rel[rows], part[rows], z[rows] >= need
    return out


def _with_word_matches(index: SparseIndex, cs: ChannelScores, pool: np.ndarray, query: np.ndarray, cutoff: float,
                       probe: int, pick: np.ndarray, near: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cells' nearest memories and the word matches beyond the pool (the `probe` with the
    most BM25, a tie to the lower memory; every one for -1) whose exact cosine reaches the
    cutoff, each once. (The best by BM25 come from the pass over the postings that ranked the
    words: no match beyond them is summed.)"""
    own, raw = cs.every_match() if probe < 0 else cs.best_bm25(probe + pool.size)
    if pool.size:
        out = ~locate(np.sort(pool), own)[1]
        own, raw = own[out], raw[out]
    if 0 < probe < own.size:
        own = own[kernels.best(raw, own, probe)]
    cos = index.vectors.cosine(own, query)
    hit = cos >= cutoff
    if not hit.any():
        return pick, near
    docs = np.concatenate([pick, own[hit]])
    docs, first = np.unique(docs, return_index=True)
    return docs, np.concatenate([near, cos[hit]])[first]


def _closest_eligible(t, ordered: np.ndarray, taken: np.ndarray, k: int, *filters) -> np.ndarray:
    """The first `k` of `ordered` (closest first) that pass the filters and are not `taken`."""
    keep = passes(t, ordered, *filters)
    if taken.size:
        keep &= ~locate(np.sort(taken), ordered)[1]
    return ordered[keep][:k]


def _words_first(word: np.ndarray, score: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """An order of rows (already best first) in which each meaning-only row comes after every
    word row that is more relevant or scores as high."""
    if word.all() or not word.any():
        return np.arange(word.size)
    key = np.arange(word.size, dtype=np.float64)
    w_pos = np.flatnonzero(word)
    for i in np.flatnonzero(~word).tolist():
        above = np.flatnonzero((score[w_pos] >= score[i]) | (rel[w_pos] > rel[i]))
        key[i] = w_pos[above[-1]] + 0.5 if above.size else -0.5
    return np.lexsort((-score, key))
