"""From channel scores to ranked memories: relevance, recency and revision, the age gate.

A memory is returned only if it matches the query itself: BM25 over all its fields (content,
title, tags, project, type; records.FIELD_WEIGHTS) finds a query term in it. Relevance is
absolute and means the same in every store and for every query: 1 − 2^(−bm25/idf_max), each
fully matched rare term halving the distance to 1 (`bm25_relevance`). So a query word no memory
contains changes nothing, a word a memory contains can only raise its relevance, and the 0.70
age gate means "about two rare words matched".

The context channel (off by default, `context_weight`): the TF-IDF cosine of a match's session
neighbours that match too (one step away at full weight, two at `context_decay`), fused as a
noisy-or, relevance = 1 − (1 − bm25)(1 − context_weight · context). It re-orders matches and
never admits a memory; what shares a session with a match comes only on request, after the
matches (`rank_related`). It lifts LoCoMo, where the answer is the turn after the question, and
lowers LongMemEval and notebooks, so it is not on by default (RESULTS.md, section 9).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.special import ndtri

from .index import ngrams
from .index.sparse import ChannelScores, SparseIndex, locate
from .results.models import SEARCH_WEIGHTS

DAY = 86_400.0


class RankingConfig(BaseModel):
    """The knobs of the ranking; defaults are the ones the benchmark reports."""

    model_config = ConfigDict(frozen=True)

    k1: float = Field(1.2, gt=0)
    b: float = Field(0.8, ge=0, le=1)  # memories vary in length more than most collections (RESULTS.md 7)
    context_weight: float = Field(0.0, ge=0, le=1)  # off: it helps LoCoMo, hurts LongMemEval (RESULTS.md 7)
    context_decay: float = Field(0.5, ge=0, le=1)
    # The n-gram channel's weight in the noisy-or with the BM25 part (of the pool it re-orders).
    ngram_weight: float = Field(0.7, ge=0, le=1)
    recency_half_life_days: float = Field(30.0, gt=0)
    revision_cap: int = Field(10, gt=0)
    w_relevance: float = SEARCH_WEIGHTS[0]
    w_recency: float = SEARCH_WEIGHTS[1]
    w_revision: float = SEARCH_WEIGHTS[2]
    # What a session's earlier recalls surfaced is lifted in its later recalls, by this much
    # per earlier showing, never more than the cap: a conversation builds on itself, boundedly.
    working_set_step: float = Field(0.03, ge=0, le=0.1)
    working_set_cap: float = Field(0.09, ge=0, le=0.2)
    # The learning loop (phases 2 and 3): off, recalls rank by the default fusion whatever the signals.
    learning: bool = True
    # The meaning channel (`with_meaning`; RESULTS.md section 16 says how each was set). Its part
    # of relevance is absolute: 0 up to a cosine of `meaning_floor`, 1 from `meaning_full`,
    # linear between; it joins relevance as a noisy-or at `meaning_weight`.
    meaning_weight: float = Field(0.5, ge=0, le=1)
    meaning_floor: float = Field(0.10, ge=-1, lt=1)
    meaning_full: float = Field(0.60, gt=-1, le=1)
    # Whether a memory stands out from the rest is relative: its cosine in deviations above the
    # question's mean cosine with the store's memories (`meaning_prior`: the mean and deviation
    # assumed before a store has many, and how many memories that weighs). A memory that shares
    # no word with the question comes only `meaning_admit` deviations up, and only the
    # `meaning_top` closest of those: a store of a million has thousands a few deviations up
    # by chance alone.
    meaning_prior: tuple[float, float, int] = (0.08, 0.11, 32)
    meaning_admit: float = Field(2.0, ge=0)
    # ... and more in a big store: as far up as the best of its n memories would stand by chance
    # (a normal tail holding `meaning_chance` of them; 0: off).
    meaning_chance: float = Field(3.0, ge=0)
    meaning_top: int = Field(3, ge=0)
    # ... and only as relevant as this share of the best word match: asked for an identifier a
    # memory holds, a memory of a similar meaning is not what the question wants.
    meaning_relative: float = Field(0.3, ge=0, le=1)
    # The word matches the meaning part re-orders (more than are shown: it can lift one).
    meaning_pool: int = Field(50, ge=0)
    # Only real matches: a word match under `word_floor` relevance that holds under
    # `word_coverage` of the question's idf mass (a stray common word) stays only if its
    # meaning agrees: `word_support` deviations up, or a cosine of `word_support_cos`.
    word_floor: float = Field(0.7, ge=0, le=1)
    word_coverage: float = Field(0.25, ge=0, le=1)
    word_support: float = Field(2.0, ge=0)
    word_support_cos: float = Field(0.45, ge=-1, le=1)

    @property
    def tfidf_on(self) -> bool:
        """Whether a TF-IDF channel (n-grams or context) takes part: what retrieval_mode says."""
        return self.ngram_weight > 0 or self.context_weight > 0


@dataclass
class Ranked:
    """Parallel arrays for the top memories, best first."""

    doc_ids: np.ndarray
    score: np.ndarray
    relevance: np.ndarray
    bm25: np.ndarray
    tfidf: np.ndarray
    recency: np.ndarray
    revision: np.ndarray
    working_set: np.ndarray
    older_matches: int = 0  # with an age gate: matching memories older than it (shown only if relevant)
    learned: np.ndarray | None = None  # the learning loop's part, already inside `score`
    related_to: np.ndarray | None = None  # per row: 0 for a match, else the rank of the match it is beside
    context: np.ndarray | None = None     # the context channel's part (in `relevance`), when it is on
    temporal: np.ndarray | None = None    # the temporal channel's part (in `relevance`): 1 for a day's session
    meaning: np.ndarray | None = None     # the meaning channel's part (in `relevance`), when it ran
    similar: np.ndarray | None = None     # per row: its cosine reached the admission threshold

    def take(self, rows: np.ndarray, *, score: np.ndarray | None = None,
             learned: np.ndarray | None = None) -> "Ranked":
        """The rows `rows` picks (a mask or positions, in their order), every part with them;
        `score` and `learned`, when given, are the new scores and their learned parts (already
        in that order)."""
        opt = {f: None if getattr(self, f) is None else getattr(self, f)[rows]
               for f in ("learned", "related_to", "context", "temporal", "meaning", "similar")}
        if learned is not None:
            opt["learned"] = learned
        return Ranked(self.doc_ids[rows], self.score[rows] if score is None else score,
                      *(getattr(self, f)[rows] for f in ("relevance", "bm25", "tfidf", "recency", "revision",
                                                         "working_set")),
                      older_matches=self.older_matches, **opt)

    def then_related(self, near: "Ranked", of: np.ndarray) -> "Ranked":
        """These matches followed by related memories `near` (beside matches `of`)."""
        if not near.doc_ids.size:
            return self
        out = self.followed_by(near)
        out.related_to = np.concatenate([np.zeros(self.doc_ids.size, np.int64), of])
        return out

    def followed_by(self, other: "Ranked") -> "Ranked":
        """These rows, then `other`'s; a part one side lacks is 0 (False) on that side."""
        def col(f: str):
            mine, theirs = getattr(self, f), getattr(other, f)
            if mine is None and theirs is None:
                return None
            like = mine if mine is not None else theirs
            return np.concatenate([np.zeros(self.doc_ids.size, like.dtype) if mine is None else mine,
                                   np.zeros(other.doc_ids.size, like.dtype) if theirs is None else theirs])

        return Ranked(*(col(f) for f in ("doc_ids", "score", "relevance", "bm25", "tfidf", "recency", "revision",
                                         "working_set")),
                      older_matches=self.older_matches,
                      **{f: col(f) for f in ("learned", "related_to", "context", "temporal", "meaning", "similar")})

    @classmethod
    def empty(cls) -> "Ranked":
        z = np.empty(0)
        return cls(np.empty(0, np.int64), z, z, z, z, z, z, z)


def recency(updated: np.ndarray, now: float, half_life_days: float) -> np.ndarray:
    """Exponential decay on last update: 1 now, 0.5 after one half-life."""
    age_days = np.maximum(0.0, now - updated) / DAY
    return np.exp2(-age_days / half_life_days)


def revision(count: np.ndarray, cap: int) -> np.ndarray:
    return np.minimum(count, cap) / cap


def fuse(bm25: np.ndarray, tfidf: np.ndarray, cfg: RankingConfig) -> np.ndarray:
    return 1.0 - (1.0 - bm25) * (1.0 - cfg.context_weight * tfidf)


def search_score(rel, rec, rev, cfg: RankingConfig) -> np.ndarray:
    return cfg.w_relevance * rel + cfg.w_recency * rec + cfg.w_revision * rev


class WorkingSet:
    """The boost each memory gets in one session's recall: sorted doc ids and their boosts."""

    def __init__(self, hits: dict[int, int], cfg: RankingConfig):
        docs = np.array(sorted(hits), dtype=np.int64)
        self.docs = docs
        self.boost = np.array([min(cfg.working_set_cap, cfg.working_set_step * hits[d]) for d in docs.tolist()])
        self.max = float(self.boost.max()) if docs.size else 0.0

    def lookup(self, cand: np.ndarray) -> np.ndarray:
        out = np.zeros(cand.size)
        if self.docs.size:
            pos = np.minimum(np.searchsorted(self.docs, cand), self.docs.size - 1)
            hit = self.docs[pos] == cand
            out[hit] = self.boost[pos[hit]]
        return out


AGE_GATE_RELEVANCE = 0.70


def rank_index(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, *, now: float, user: int,
               project: int | None, limit: int, working_set: WorkingSet | None = None,
               updated_after: float | None = None, kind: int | None = None, type_code: int | None = None) -> Ranked:
    """Rank the live memories of one user (and project) that match the query; with an age
    gate, also count the matching memories older than it (for the user to see)."""
    ranked = _rank_index(index, cs, cfg, now=now, user=user, project=project, limit=limit,
                         working_set=working_set, updated_after=updated_after, kind=kind, type_code=type_code)
    if updated_after is not None and cs.bm25 is not None:
        t = index.docs
        own = _eligible(t, np.flatnonzero(cs.bm25[: t.size] != 0), user, project, kind, type_code)
        ranked.older_matches = int(np.count_nonzero(t.updated[own] < updated_after))
    return ranked


#: The temporal channel's weight. A question naming a day ("what did I do today", "last
#: Tuesday", "2026-06-16") is answered by that day's whole-session summaries: they carry the
#: day in their own fields, so they match the question, and their relevance is fused with this
#: channel as a noisy-or, 1 − (1 − lexical)(1 − DAY_WEIGHT): at least 0.80, a strong match.
DAY_WEIGHT = 0.8


def rank_days(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, docs: np.ndarray, *, now: float,
              working_set: WorkingSet | None = None) -> Ranked:
    """The whole-session summaries of the days a question names (`docs`, live ones kept),
    scored as `rank_index` scores every match (`_scored`, then `_with_grams`: BM25, the n-gram
    channel, recency, revision, the working set), all of them, whatever their age, best first;
    `days_first` adds the temporal channel."""
    t = index.docs
    docs = np.asarray(docs, dtype=np.int64)
    docs = docs[(docs >= 0) & (docs < t.size)]
    docs = docs[t.alive[docs]]
    if not docs.size or cs.bm25 is None:
        return Ranked.empty()
    parts = _scored(index, cs, cfg, docs, now=now, working_set=working_set)
    return _with_grams(index, cs, cfg, docs, parts, None, docs.size)


def days_first(days: Ranked, rest: Ranked, cfg: RankingConfig, limit: int) -> Ranked:
    """A day's session summaries (`days`, lexical parts only) first, their relevance fused with
    the temporal channel, best first among themselves; then the other matches (`rest`) in
    their order, without those; at most `limit`. With no day summary, `rest` unchanged."""
    if not days.doc_ids.size or limit <= 0:
        return rest
    rel = 1.0 - (1.0 - days.relevance) * (1.0 - DAY_WEIGHT)
    score = days.score + cfg.w_relevance * (rel - days.relevance)
    first = np.lexsort((days.doc_ids, -score))
    others = np.flatnonzero(~np.isin(rest.doc_ids, days.doc_ids))
    n_day, n_rest = first.size, others.size

    def joined(mine: np.ndarray | None, theirs: np.ndarray | None) -> np.ndarray:
        a = np.zeros(n_day) if mine is None else mine[first]
        b = np.zeros(n_rest) if theirs is None else theirs[others]
        return np.concatenate([a, b])[:limit]

    def optional(theirs: np.ndarray | None) -> np.ndarray | None:
        return None if theirs is None else joined(None, theirs)

    return Ranked(np.concatenate([days.doc_ids[first], rest.doc_ids[others]])[:limit].astype(np.int64),
                  joined(score, rest.score), joined(rel, rest.relevance), joined(days.bm25, rest.bm25),
                  joined(days.tfidf, rest.tfidf), joined(days.recency, rest.recency),
                  joined(days.revision, rest.revision), joined(days.working_set, rest.working_set),
                  older_matches=rest.older_matches, learned=optional(rest.learned),
                  context=optional(rest.context), temporal=joined(np.ones(days.doc_ids.size), None),
                  meaning=optional(rest.meaning),
                  similar=None if rest.similar is None else joined(None, rest.similar).astype(bool))


def rank_related(index: SparseIndex, matches: np.ndarray, cfg: RankingConfig, *, now: float, user: int,
            project: int | None, limit: int, updated_after: float | None = None) -> tuple[Ranked, np.ndarray]:
    """Memories the user asked for beside the matches: the session neighbours (the one
    before, then the one after) of each match in rank order, none of them a match, at most
    `limit`. They matched nothing: relevance 0, scored by recency and revision only. Returns
    them and, for each, the 1-based rank of the match it sits beside."""
    t = index.docs
    if not matches.size or limit <= 0:
        return Ranked.empty(), np.empty(0, np.int64)
    seen = set(matches.tolist())
    docs, of = [], []
    for rank, d in enumerate(matches.tolist(), start=1):
        for n in (int(t.prev[d]), int(t.next[d])):
            if n >= 0 and n not in seen:
                seen.add(n)
                docs.append(n)
                of.append(rank)
    c = np.array(docs, dtype=np.int64)
    keep = _passes(t, c, user, project, 0, None)
    if updated_after is not None:  # the age gate: relevance 0 never passes it
        keep &= t.updated[c] >= updated_after
    c, of = c[keep][:limit], np.array(of, dtype=np.int64)[keep][:limit]
    rec = np.minimum(1.0, index.recency_base[c] * index.recency_scale(now, cfg.recency_half_life_days))
    rev = np.minimum(t.revision[c], cfg.revision_cap) * (1.0 / cfg.revision_cap)
    z = np.zeros(c.size)
    return Ranked(c, search_score(z, rec, rev, cfg), z, z, z, rec, rev, z), of


def _eligible(t, c: np.ndarray, user: int | None, project: int | None, kind: int | None,
              type_code: int | None) -> np.ndarray:
    """The live documents among `c` that pass the filters (None: no filter)."""
    return c[_passes(t, c, user, project, kind, type_code)]


def _passes(t, c: np.ndarray, user: int | None, project: int | None, kind: int | None,
            type_code: int | None) -> np.ndarray:
    """Per document of `c`: whether it is live and passes the filters."""
    keep = t.alive[c]
    if user is not None:  # the user's own memories and those their authors shared
        keep &= (t.user[c] == user) | t.shared[c]
    if project is not None:
        keep &= t.project[c] == project
    if kind is not None:
        keep &= t.kind[c] == kind
    if type_code is not None:
        keep &= t.type[c] == type_code
    return keep


def bm25_relevance(raw: np.ndarray, idf_max: float) -> np.ndarray:
    """Raw BM25 as an absolute relevance in [0, 1): 1 − 2^(−raw / idf_max).

    idf_max is the idf of a term only one memory has: each query term a memory matches
    fully, once, at average length, halves its distance to 1. It depends on the memory and
    the store, never on the query: a query word no memory contains adds 0 to the raw score and
    changes nothing, a word the memory contains can only raise it.
    """
    return -np.expm1(-np.log(2.0) * raw / idf_max) if idf_max > 0 else np.zeros_like(raw)


def _rank_index(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, *, now: float, user: int,
                project: int | None, limit: int, working_set: WorkingSet | None = None,
                updated_after: float | None = None, kind: int | None = None, type_code: int | None = None) -> Ranked:
    """Rank the live memories of one user (and project) that match the query themselves.

    The context (the best cosine among a match's session neighbours that match too) re-orders
    matches; it never admits a memory. Exact, with safe pruning: the full score of a few
    promising matches gives a bar θ the k-th result must clear; a match whose score cannot
    reach θ even with the best context and recency of the store is never scored in full.
    """
    if cs.bm25 is None or limit <= 0:
        return Ranked.empty()
    t = index.docs
    n = t.size
    bm, dot = cs.bm25, cs.dot
    own = np.flatnonzero(bm[:n] != 0)  # (a bool mask is 4x faster to scan than floats)
    if not own.size:
        return Ranked.empty()
    w, wr = cfg.context_weight, cfg.w_relevance
    wg = cfg.ngram_weight if cs.grams[0].size else 0.0
    rbase = index.recency_base
    rscale = index.recency_scale(now, cfg.recency_half_life_days)
    cos = None
    cmax = 0.0
    if w > 0:  # cosine of each match's own tf-idf vector; dead ones and the sentinel stay 0
        cos_own = np.minimum(1.0, dot[own] / np.maximum(t.norm[own] * cs.query_norm, 1e-12))
        cos_own[~t.alive[own]] = 0.0
        cos = np.zeros(t.capacity + 1)
        cos[own] = cos_own
        cmax = float(cos_own.max())
    # (the only user's own: no need to compare; a user with none sees only what others shared)
    only_user = user if len(index.codes["user"]) > 1 or user < 0 else None

    def exact(c: np.ndarray):
        parts = _scored(index, cs, cfg, c, now=now, working_set=working_set, cos=cos)
        if updated_after is not None:  # the age gate (read again after the n-gram part is in)
            score, rel = parts[0], parts[1]
            score[(t.updated[c] < updated_after) & (rel + wg < AGE_GATE_RELEVANCE)] = -np.inf
        return parts

    k = max(limit, ngrams.POOL) if wg > 0 else limit  # the pool the n-gram channel re-orders
    probe_n = 4 * k + 64
    cand = own
    if own.size > 4 * probe_n:
        # An upper bound of each match's score: its own BM25 and recency/revision, with the
        # best context any match could give. The k-th best full score among the most
        # promising is a bar θ; only what can still clear it is scored in full.
        bm25_own = bm25_relevance(bm[own], cs.idf_max)
        static_own = (cfg.w_recency * np.minimum(1.0, rbase[own] * rscale)
                      + cfg.w_revision * (np.minimum(t.revision[own], cfg.revision_cap) / cfg.revision_cap))
        ws_max = working_set.max if working_set is not None else 0.0
        rel_bound = 1.0 - (1.0 - bm25_own) * (1.0 - w * cmax)
        bound = wr * rel_bound + static_own + ws_max
        if updated_after is not None:  # old and unable to reach the gate's relevance: out
            bound[(t.updated[own] < updated_after) & (rel_bound + wg < AGE_GATE_RELEVANCE)] = -np.inf
        probe = _eligible(t, own[np.argpartition(-bound, probe_n - 1)[:probe_n]], only_user, project, kind,
                          type_code)
        if probe.size >= k:
            theta = np.partition(exact(probe)[0], probe.size - k)[probe.size - k] - 1e-12
            cand = own[bound >= theta]
    cand = _eligible(t, cand, only_user, project, kind, type_code)
    if not cand.size:
        return Ranked.empty()
    score, rel, bm25, ctx, rec, rev, ws = exact(cand)
    if updated_after is not None:
        passed = np.isfinite(score)
        cand, score, rel, bm25, ctx, rec, rev, ws = (a[passed] for a in (cand, score, rel, bm25, ctx, rec, rev, ws))
        if not cand.size:
            return Ranked.empty()
    k = min(k, cand.size)
    if k < cand.size:
        kth = score[np.argpartition(-score, k - 1)[k - 1]]
        top = np.flatnonzero(score >= kth)  # ties at the cut included, then broken by doc id
    else:
        top = np.arange(cand.size)
    top = top[np.lexsort((cand[top], -score[top]))][:k]
    return _with_grams(index, cs, cfg, cand[top], tuple(a[top] for a in (score, rel, bm25, ctx, rec, rev, ws)),
                       updated_after, limit)


def _scored(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, c: np.ndarray, *, now: float,
            working_set: WorkingSet | None = None, cos: np.ndarray | None = None):
    """The one per-candidate scoring, before the n-gram part: (score, relevance, bm25,
    context, recency, revision, working set) of each of `c`. Relevance is the BM25 relevance
    fused as a noisy-or with the context channel (the best cosine `cos` among a candidate's
    session neighbours, when it is on); the score is `search_score` of it plus the working
    set's lift."""
    t = index.docs
    bm25 = np.zeros(c.size) if cs is None or cs.bm25 is None else bm25_relevance(cs.bm25[c], cs.idf_max)
    if cos is not None:
        p1, n1 = t.prev[c], t.next[c]
        ctx = np.maximum(np.maximum(cos[p1], cos[n1]), cfg.context_decay * np.maximum(cos[t.prev[p1]], cos[t.next[n1]]))
    else:
        ctx = np.zeros(c.size)
    rel = 1.0 - (1.0 - bm25) * (1.0 - cfg.context_weight * ctx)
    rec = np.minimum(1.0, index.recency_base[c] * index.recency_scale(now, cfg.recency_half_life_days))
    rev = np.minimum(t.revision[c], cfg.revision_cap) * (1.0 / cfg.revision_cap)
    ws = working_set.lookup(c) if working_set is not None else np.zeros(c.size)
    return search_score(rel, rec, rev, cfg) + ws, rel, bm25, ctx, rec, rev, ws


def _with_grams(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, docs: np.ndarray, parts,
                updated_after: float | None, limit: int) -> Ranked:
    """Scored candidates (`_scored`'s parts) with the n-gram channel's part fused in
    (`second_stage`): the best `limit`, as a Ranked."""
    score, rel, bm25, ctx, rec, rev, ws = parts
    wg = cfg.ngram_weight if cs is not None and cs.grams[0].size else 0.0
    gram = index.grams.cosine(docs, *cs.grams) if wg > 0 else np.zeros(docs.size)
    rows, rel2, score2 = second_stage(docs, score, rel, gram, index.docs.updated[docs], updated_after,
                                      cfg if wg > 0 else cfg.model_copy(update={"ngram_weight": 0.0}), limit)
    return Ranked(docs[rows], score2[rows], rel2[rows], bm25[rows], gram[rows], rec[rows], rev[rows], ws[rows],
                  context=ctx[rows])


def second_stage(docs: np.ndarray, score: np.ndarray, rel: np.ndarray, gram: np.ndarray, updated: np.ndarray,
                 updated_after: float | None, cfg: RankingConfig, limit: int):
    """The pool's n-gram part fused into its relevance as a noisy-or (it can only raise it), the
    age gate read on that relevance, the best `limit` (ties broken by doc id): (rows kept in order, relevance, score).
    (The SQL fallback has no n-gram part, so it does not come here; `fuse_meaning` is what both share.)"""
    rel2 = 1.0 - (1.0 - rel) * (1.0 - cfg.ngram_weight * gram)
    score2 = score + cfg.w_relevance * (rel2 - rel)
    rows = np.arange(docs.size)
    if updated_after is not None:
        rows = rows[(updated >= updated_after) | (rel2 >= AGE_GATE_RELEVANCE)]
    return rows[np.lexsort((docs[rows], -score2[rows]))][:limit], rel2, score2


# --------------------------------------------------------------------------- the meaning channel


def meaning_part(cos: np.ndarray, cfg: RankingConfig) -> np.ndarray:
    """A cosine as the meaning channel's part of relevance, in [0, 1]: 0 up to `meaning_floor`
    (what unrelated texts reach), 1 from `meaning_full` (a restatement), linear between."""
    span = max(cfg.meaning_full - cfg.meaning_floor, 1e-9)
    return np.clip((np.asarray(cos, dtype=np.float64) - cfg.meaning_floor) / span, 0.0, 1.0)


def closeness(index: SparseIndex, query: np.ndarray, cfg: RankingConfig) -> tuple[float, float]:
    """The mean and deviation of the question's cosines with the store, which measure how far
    one memory stands out: its cosines with a fixed sample of the store's memories, shrunk
    towards `meaning_prior`. A generic question is close to everything, and a cosine that
    stands out for one question is ordinary for another."""
    return spread(*index.vectors.background(query, index.docs.alive), cfg)


def spread(count: int, total: float, squares: float, cfg: RankingConfig) -> tuple[float, float]:
    """`closeness` of a sample of `count` cosines given by their sum and the sum of their squares
    (the in-process store's sample, or the file's)."""
    m0, s0, k = cfg.meaning_prior
    w = count + k
    mu = (total + k * m0) / w
    var = (max(squares - 2 * mu * total + count * mu * mu, 0.0) + k * (s0 ** 2 + (m0 - mu) ** 2)) / w
    # (never below most of the prior's deviation: in a store of near-copies any difference
    # between them would look like a meaning)
    return mu, max(float(np.sqrt(var)), 0.75 * s0)


def with_meaning(index: SparseIndex, cs: ChannelScores | None, words: Ranked, query: np.ndarray,
                 cfg: RankingConfig, *, now: float, user: int, project: int | None, limit: int,
                 working_set: WorkingSet | None = None, updated_after: float | None = None,
                 kind: int | None = None, type_code: int | None = None, strict: bool = True,
                 admit: bool = True) -> Ranked:
    """The word matches `words` (ranked by the lexical channels) with the meaning part fused
    into their relevance as a noisy-or, 1 − (1 − lexical)(1 − meaning_weight · part), a stray
    one dropped (RankingConfig.word_floor; not with `strict` False: a question naming a day
    matches that day's summaries by the day), and (unless `admit` is False: the question names
    identifiers that memories hold) the memories that share no word with the
    question but stand out by meaning (RankingConfig.meaning_admit), scored the same way with
    a lexical part of 0. The age gate reads the fused relevance. A meaning-only match never
    stands above a word match that is more relevant or scores as high. The best `limit`."""
    t = index.docs
    mu, sd = closeness(index, query, cfg)
    need, cutoff = admission(cfg, mu, sd, index.vectors.live)
    pick = np.empty(0, np.int64)
    if admit:
        only_user = user if len(index.codes["user"]) > 1 or user < 0 else None
        pick, near = index.vectors.nearest(query, cutoff)
        pick = _closest_eligible(t, pick[np.lexsort((pick, -near))], words.doc_ids, cfg.meaning_top,
                                 only_user, project, kind, type_code)
    both = words
    if pick.size:
        # (scored as every match, without the n-gram part: it re-orders word matches only)
        both = words.followed_by(_with_grams(index, None, cfg, pick, _scored(index, cs, cfg, pick, now=now,
                                                                              working_set=working_set),
                                             None, pick.size))
    if not both.doc_ids.size:
        return both
    docs = both.doc_ids
    coverage = (lambda rows: cs.coverage(docs[rows])[1]) if cs is not None and cs.term_docs else None
    return fuse_meaning(both, index.vectors.cosine(docs, query), mu, sd, need, cfg, strict=strict,
                        coverage=coverage, updated=t.updated[docs], updated_after=updated_after, limit=limit)


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


def admission(cfg: RankingConfig, mu: float, sd: float, n: int) -> tuple[float, float]:
    """How far up a memory found by meaning alone must stand among `n` memories whose cosines
    with the question have mean `mu` and deviation `sd`: (in deviations, as a cosine)."""
    need = cfg.meaning_admit
    if 0 < cfg.meaning_chance < n:
        need = max(need, float(ndtri(1.0 - cfg.meaning_chance / n)))
    return need, max(mu + need * sd, float(np.nextafter(cfg.meaning_floor, 1)))


def _closest_eligible(t, ordered: np.ndarray, taken: np.ndarray, k: int, *filters) -> np.ndarray:
    """The first `k` of `ordered` (closest first) that pass the filters and are not `taken`."""
    keep = _passes(t, ordered, *filters)
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


def retrieval_mode(*, sql: bool, tfidf: bool, meaning: bool) -> str:
    """The channels that ran, by name (RecallResult.retrieval_mode)."""
    if sql:
        return "bm25_meaning_sql_fallback" if meaning else "bm25_sql_fallback"
    if meaning:
        return "full_bm25_tfidf_meaning" if tfidf else "bm25_meaning_in_process"
    return "full_bm25_tfidf" if tfidf else "bm25_in_process"
