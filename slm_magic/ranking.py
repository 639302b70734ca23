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
    w_relevance: float = 0.60
    w_recency: float = 0.25
    w_revision: float = 0.15


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

    @classmethod
    def empty(cls) -> "Ranked":
        z = np.empty(0)
        return cls(np.empty(0, np.int64), z, z, z, z, z, z)


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


def rank_index(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, *, now: float, user: int,
               project: int | None, limit: int) -> Ranked:
    """Rank the live memories of one user (and project) that the query or their context match."""
    if cs.bm25 is None or limit <= 0:
        return Ranked.empty()
    t = index.docs
    n = t.size
    bm, dot = cs.bm25, cs.dot
    own = np.flatnonzero(bm[:n])
    own = own[t.alive[own]]
    if not own.size:
        return Ranked.empty()
    # Cosine of each matching memory's own tf-idf vector; index n stays 0 for "no neighbour".
    cos = np.zeros(n + 1)
    cos[own] = np.minimum(1.0, dot[own] / np.maximum(t.norm[own] * cs.query_norm, 1e-12))

    def step(a: np.ndarray, links: np.ndarray) -> np.ndarray:
        out = np.full(a.shape, -1, dtype=np.int64)
        ok = a >= 0
        out[ok] = links[a[ok]]
        return out

    cand = own
    if cfg.context_weight > 0:
        p1, n1 = step(own, t.prev), step(own, t.next)
        p2, n2 = step(p1, t.prev), step(n1, t.next)
        near = np.concatenate([p1, n1, p2, n2])
        cand = np.unique(np.concatenate([own, near[near >= 0]]))
    keep = t.alive[cand] & (t.user[cand] == user)
    if project is not None:
        keep &= t.project[cand] == project
    cand = cand[keep]
    if not cand.size:
        return Ranked.empty()

    bm25 = np.minimum(1.0, bm[cand] / cs.ideal_bm25) if cs.ideal_bm25 > 0 else np.zeros(cand.size)
    if cfg.context_weight > 0:
        p1, n1 = step(cand, t.prev), step(cand, t.next)
        p2, n2 = step(p1, t.prev), step(n1, t.next)
        ctx = np.maximum(np.maximum(cos[p1], cos[n1]),
                         cfg.context_decay * np.maximum(cos[p2], cos[n2]))
    else:
        ctx = np.zeros(cand.size)
    rel = fuse(bm25, ctx, cfg)
    rec = recency(t.updated[cand], now, cfg.recency_half_life_days)
    rev = revision(t.revision[cand], cfg.revision_cap)
    score = search_score(rel, rec, rev, cfg)
    k = min(limit, cand.size)
    top = np.argpartition(-score, k - 1)[:k] if k < cand.size else np.arange(cand.size)
    top = top[np.lexsort((cand[top], -score[top]))]
    return Ranked(cand[top], score[top], rel[top], bm25[top], ctx[top], rec[top], rev[top])
