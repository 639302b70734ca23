"""From channel scores to ranked memories: normalise, fuse, add recency and revision.

Two channels, each seeing something the other cannot:
- BM25 on the memory's own words: precise, but blind to what the memory was about.
- TF-IDF cosine on the memory's *context*: the best match among its session neighbours
  (one step away at full weight, two steps at `context_decay`). A finding is often phrased
  in the words of the cell or turn before it; this channel recovers that, and adds nothing
  for a memory with no session, so ranking there is plain BM25.

Both are absolute, in [0, 1]: BM25 is divided by the score of the query as a document of
itself (an ideal match), the cosine is bounded by construction. They are fused as a noisy-or,
relevance = 1 - (1 - bm25)(1 - context_weight · tfidf), so a memory matching nothing scores 0,
a memory that is the query scores 1, and the context can only raise a score, never lower it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .index import ChannelScores, SparseIndex
from .models import SEARCH_WEIGHTS

DAY = 86_400.0


class RankingConfig(BaseModel):
    """The knobs of the ranking; defaults are the ones the benchmark reports."""

    model_config = ConfigDict(frozen=True)

    k1: float = Field(1.2, gt=0)
    b: float = Field(0.75, ge=0, le=1)
    context_weight: float = Field(0.6, ge=0, le=1)
    context_decay: float = Field(0.5, ge=0, le=1)
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

    def take(self, order: np.ndarray, *, score: np.ndarray, learned: np.ndarray) -> "Ranked":
        """The rows `order` picks, with new scores and their learned parts."""
        return Ranked(self.doc_ids[order], score, self.relevance[order], self.bm25[order], self.tfidf[order],
                      self.recency[order], self.revision[order], self.working_set[order],
                      older_matches=self.older_matches, learned=learned)

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
    """Rank the live memories of one user (and project) that the query or their context match;
    with an age gate, also count the matching memories older than it (for the user to see)."""
    ranked = _rank_index(index, cs, cfg, now=now, user=user, project=project, limit=limit,
                         working_set=working_set, updated_after=updated_after, kind=kind, type_code=type_code)
    if updated_after is not None and cs.bm25 is not None:
        t = index.docs
        own = _eligible(t, np.flatnonzero(cs.bm25[: t.size] != 0), user, project, kind, type_code)
        ranked.older_matches = int(np.count_nonzero(t.updated[own] < updated_after))
    return ranked


def _eligible(t, c: np.ndarray, user: int | None, project: int | None, kind: int | None,
              type_code: int | None) -> np.ndarray:
    """The live documents among `c` that pass the filters (None: no filter)."""
    keep = t.alive[c]
    if user is not None:
        keep &= t.user[c] == user
    if project is not None:
        keep &= t.project[c] == project
    if kind is not None:
        keep &= t.kind[c] == kind
    if type_code is not None:
        keep &= t.type[c] == type_code
    return c[keep]


def _rank_index(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, *, now: float, user: int,
                project: int | None, limit: int, working_set: WorkingSet | None = None,
                updated_after: float | None = None, kind: int | None = None, type_code: int | None = None) -> Ranked:
    """Rank the live memories of one user (and project) that the query or their context match.

    Exact, with safe pruning: the full score of a few promising memories gives a bar θ that
    the k-th result must clear; a memory whose score cannot reach θ even with the best
    context and the best recency of the store is never scored, and only matches whose cosine
    could lift a neighbour over θ have their session neighbours considered.
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
    inv_ideal = 1.0 / cs.ideal_bm25 if cs.ideal_bm25 > 0 else 0.0
    prev, nxt = t.prev, t.next
    rbase = index.recency_base
    rscale = index.recency_scale(now, cfg.recency_half_life_days)
    # Cosine of each matching memory's own tf-idf vector; dead ones and the sentinel stay 0.
    cos_own = np.minimum(1.0, dot[own] / np.maximum(t.norm[own] * cs.query_norm, 1e-12))
    cos_own[~t.alive[own]] = 0.0
    cos = np.zeros(t.capacity + 1)
    cos[own] = cos_own
    only_user = user if len(index.codes["user"]) > 1 else None  # (one user: no need to compare)

    def valid(c: np.ndarray) -> np.ndarray:
        return _eligible(t, c, only_user, project, kind, type_code)

    def exact(c: np.ndarray):
        bm25 = np.minimum(1.0, bm[c] * inv_ideal)
        if w > 0:
            p1, n1 = prev[c], nxt[c]
            ctx = np.maximum(np.maximum(cos[p1], cos[n1]),
                             cfg.context_decay * np.maximum(cos[prev[p1]], cos[nxt[n1]]))
        else:
            ctx = np.zeros(c.size)
        rel = 1.0 - (1.0 - bm25) * (1.0 - w * ctx)
        rec = np.minimum(1.0, rbase[c] * rscale)
        rev = np.minimum(t.revision[c], cfg.revision_cap) * (1.0 / cfg.revision_cap)
        ws = working_set.lookup(c) if working_set is not None else np.zeros(c.size)
        score = wr * rel + cfg.w_recency * rec + cfg.w_revision * rev + ws
        if updated_after is not None:  # the age gate: old memories stay only if highly relevant
            score[(t.updated[c] < updated_after) & (rel < AGE_GATE_RELEVANCE)] = -np.inf
        return score, rel, bm25, ctx, rec, rev, ws

    k = limit
    probe_n = 4 * k + 64
    cand = None
    if own.size > 4 * probe_n:
        # An upper bound of each match's score: its own BM25 and recency/revision, with the
        # best context any match could give. The k-th best full score among the most
        # promising is a bar θ; only what can still clear it is scored in full.
        bm25_own = np.minimum(1.0, bm[own] * inv_ideal)
        static_own = (cfg.w_recency * np.minimum(1.0, rbase[own] * rscale)
                      + cfg.w_revision * (np.minimum(t.revision[own], cfg.revision_cap) / cfg.revision_cap))
        cmax = float(cos_own.max())
        ws_max = working_set.max if working_set is not None else 0.0
        rel_bound = 1.0 - (1.0 - bm25_own) * (1.0 - w * cmax)
        bound = wr * rel_bound + static_own + ws_max
        if updated_after is not None:  # old and unable to reach the gate's relevance: out
            bound[(t.updated[own] < updated_after) & (rel_bound < AGE_GATE_RELEVANCE)] = -np.inf
        probe = valid(own[np.argpartition(-bound, probe_n - 1)[:probe_n]])
        if probe.size >= k:
            theta = np.partition(exact(probe)[0], probe.size - k)[probe.size - k] - 1e-12
            cand = own[bound >= theta]
            if w > 0 and (updated_after is None or w * cmax >= AGE_GATE_RELEVANCE
                          or t.updated[: t.size].max() >= updated_after):
                # A memory matched only through context scores <= wr·w·cos(neighbour) + best_static.
                lift = own[cos_own * (wr * w) + index.best_static(cfg, rscale) + ws_max >= theta]
                if lift.size:
                    p1, n1 = prev[lift], nxt[lift]
                    near = np.concatenate([cand, p1, n1, prev[p1], nxt[n1]])
                    cand = np.sort(near[near >= 0])
                    cand = cand[np.concatenate(([True], cand[1:] != cand[:-1]))]
            cand = valid(cand)
    if cand is None:
        cand = own
        if w > 0:
            mark = np.zeros(t.capacity + 1, dtype=bool)
            p1, n1 = prev[own], nxt[own]
            mark[own] = True
            mark[p1] = True
            mark[n1] = True
            mark[prev[p1]] = True
            mark[nxt[n1]] = True
            mark[-1] = False
            cand = np.flatnonzero(mark)
        cand = valid(cand)
        if updated_after is not None and cand.size:
            cmax = float(cos_own.max())
            rel_bound = 1.0 - (1.0 - np.minimum(1.0, bm[cand] * inv_ideal)) * (1.0 - w * cmax)
            cand = cand[(t.updated[cand] >= updated_after) | (rel_bound >= AGE_GATE_RELEVANCE)]
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
    return Ranked(cand[top], score[top], rel[top], bm25[top], ctx[top], rec[top], rev[top], ws[top])
