"""Every score the engine gives, defined once: BM25 as an absolute relevance, the noisy-or fusion
of the channels, recency and revision, SearchScore's weights, the age gate, the meaning
channel's part and its admission, and the names of the channels that ran.

A memory is returned only if it matches the query itself: BM25 over all its fields (content,
title, tags, project, type; core/fields.FIELD_WEIGHTS) finds a query term in it. Relevance is
absolute and means the same in every store and for every query: 1 − 2^(−bm25/idf_max), each
fully matched rare term halving the distance to 1 (`bm25_relevance`). So a query word no memory
contains changes nothing, a word a memory contains can only raise its relevance, and the 0.70
age gate means "about two rare words matched".

The context channel (off by default, `context_weight`): the TF-IDF cosine of a match's session
neighbours that match too (one step away at full weight, two at `context_decay`), fused as a
noisy-or, relevance = 1 − (1 − bm25)(1 − context_weight · context). It re-orders matches and
never admits a memory; what shares a session with a match comes only on request, after the
matches (`ranking.fusion.rank_related`). It lifts LoCoMo, where the answer is the turn after the
question, and lowers LongMemEval and notebooks, so it is not on by default (RESULTS.md, section 9).
"""

from __future__ import annotations

import functools

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.special import ndtri

#: SearchScore's documented weights of relevance, recency and revision.
SEARCH_WEIGHTS: tuple[float, float, float] = (0.60, 0.25, 0.15)

#: How much a type matters when a session opens (ContextScore's type priority).
TYPE_PRIORITY: dict[str, float] = {
    "profile": 1.0,
    "preference": 0.9,
    "decision": 0.7,
    "pattern": 0.6,
    "discovery": 0.5,
}

#: ContextScore's weights of recency, revision and type priority (what a session opens with).
W_CONTEXT_RECENCY, W_CONTEXT_REVISION, W_CONTEXT_TYPE = 0.50, 0.30, 0.20


def context_score(recency, revision, type_priority):
    """ContextScore, the one definition: numbers or numpy arrays of them."""
    return W_CONTEXT_RECENCY * recency + W_CONTEXT_REVISION * revision + W_CONTEXT_TYPE * type_priority

DAY = 86_400.0

# --- the word channels: BM25 and TF-IDF, the formulas every path uses (the kernel's index, the
# SQL fallback on the file and on PostgreSQL) -----------------------------------------------

#: BM25's defaults (RankingConfig's, and a bare SparseIndex's).
K1, B = 1.2, 0.8


def bm25_idf(n, df):
    """BM25's idf of terms held by `df` of `n` memories: ln(1 + (n − df + 0.5)/(df + 0.5)),
    never negative (a word most memories hold still counts a little)."""
    return np.log1p((n - df + 0.5) / (df + 0.5))


def idf_max(n) -> float:
    """The idf of a term one memory has: the scale of `bm25_relevance`."""
    return float(bm25_idf(n, 1.0))


def length_norm(dl, avgdl: float, k1: float, b: float):
    """k1·(1 − b + b·dl/avgdl): how a memory's length `dl` tempers its term frequencies."""
    return k1 * (1 - b + b * dl / avgdl)


def bm25_term(qtf, idf, tf, norm, k1: float):
    """One query term's part of a memory's raw BM25 (`norm`: the memory's `length_norm`)."""
    return bm25_part(bm25_weight(qtf, idf, k1), tf, norm)


def bm25_weight(qtf, idf, k1: float):
    """What a query term weighs in every memory that holds it: qtf·idf·(k1 + 1)."""
    return qtf * idf * (k1 + 1)


def bm25_part(weight, tf, norm):
    """A term of `weight` in a memory that holds it `tf` times: weight·tf / (tf + norm). (The
    compiled kernel, core/_kernels.c, restates this line and the bound of `kernels.bounds`.)"""
    return weight * tf / (tf + norm)


def smooth_idf(n: int, df: np.ndarray) -> np.ndarray:
    """scikit-learn's smooth idf, so the TF-IDF and 3-gram channels mean what TfidfTransformer means."""
    return np.log((1.0 + n) / (1.0 + df)) + 1.0


def tfidf_weight(tf, idf):
    """A term's (or gram's) weight in a TF-IDF vector: (1 + ln tf)·idf."""
    return (1.0 + np.log(tf)) * idf


class RankingConfig(BaseModel):
    """The knobs of the ranking; defaults are the ones the benchmark reports."""

    model_config = ConfigDict(frozen=True)

    k1: float = Field(K1, gt=0)
    b: float = Field(B, ge=0, le=1)  # memories vary in length more than most collections (RESULTS.md 9)
    context_weight: float = Field(0.0, ge=0, le=1)  # off: it helps LoCoMo, hurts LongMemEval (RESULTS.md 9)
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
    # In a store of `meaning_word_probe_from` vectors or more (searched by cells, which miss more
    # the more there are), the word matches beyond that pool whose cosines are worked out
    # exactly: the best this many by BM25 (-1: every one), so that a word match close in meaning
    # is found whichever cell holds it. (256 and 1,024 agree with the exact search as often, to
    # one question in 600, and 256 is read in the pass that ranks the words: RESULTS section 31.)
    meaning_word_probe: int = Field(256, ge=-1)
    meaning_word_probe_from: int = Field(500_000, ge=0)
    # Only real matches: a word match under `word_floor` relevance that holds under
    # `word_coverage` of the question's idf mass (a stray common word) stays only if its
    # meaning agrees: `word_support` deviations up, or a cosine of `word_support_cos`.
    word_floor: float = Field(0.7, ge=0, le=1)
    word_coverage: float = Field(0.25, ge=0, le=1)
    word_support: float = Field(2.0, ge=0)
    word_support_cos: float = Field(0.45, ge=-1, le=1)

    def word_probe(self, vectors: int) -> int:
        """How many word matches beyond the meaning pool have their cosines worked out exactly
        in a store of this many vectors (0: none; -1: every one)."""
        return self.meaning_word_probe if vectors >= self.meaning_word_probe_from else 0

    @property
    def tfidf_on(self) -> bool:
        """Whether a TF-IDF channel (n-grams or context) takes part: what retrieval_mode says."""
        return self.ngram_weight > 0 or self.context_weight > 0


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


#: The age gate: a memory older than the gate's days stays only with this relevance or more
#: (about two rare words matched). Also where a match reads "strong".
AGE_GATE_RELEVANCE = 0.70
#: Under this relevance a match reads "weak" (about one common word).
WEAK_RELEVANCE = 0.35


#: The temporal channel's weight. A question naming a day ("what did I do today", "last
#: Tuesday", "2026-06-16") is answered by that day's whole-session summaries: they carry the
#: day in their own fields, so they match the question, and their relevance is fused with this
#: channel as a noisy-or, 1 − (1 − lexical)(1 − DAY_WEIGHT): at least 0.80, a strong match.
DAY_WEIGHT = 0.8


def bm25_relevance(raw: np.ndarray, idf_max: float, *, in_place: bool = False) -> np.ndarray:
    """Raw BM25 as an absolute relevance in [0, 1): 1 − 2^(−raw / idf_max).

    idf_max is the idf of a term only one memory has: each query term a memory matches
    fully, once, at average length, halves its distance to 1. It depends on the memory and
    the store, never on the query: a query word no memory contains adds 0 to the raw score and
    changes nothing, a word the memory contains can only raise it.
    """
    if idf_max <= 0:
        return np.zeros_like(raw)
    if not in_place:
        return -np.expm1(-np.log(2.0) * raw / idf_max)
    # (`in_place`: the same steps in `raw`'s own memory, which the caller gives up)
    np.multiply(raw, -np.log(2.0), out=raw)
    np.divide(raw, idf_max, out=raw)
    np.expm1(raw, out=raw)
    return np.negative(raw, out=raw)


def bm25_raw_at(relevance: float, idf_max: float) -> float:
    """The raw BM25 whose `bm25_relevance` is `relevance` (in [0, 1)): −idf_max·log2(1 − relevance)."""
    return float(-idf_max * np.log1p(-relevance) / np.log(2.0))


def meaning_part(cos: np.ndarray, cfg: RankingConfig) -> np.ndarray:
    """A cosine as the meaning channel's part of relevance, in [0, 1]: 0 up to `meaning_floor`
    (what unrelated texts reach), 1 from `meaning_full` (a restatement), linear between."""
    span = max(cfg.meaning_full - cfg.meaning_floor, 1e-9)
    return np.clip((np.asarray(cos, dtype=np.float64) - cfg.meaning_floor) / span, 0.0, 1.0)


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


@functools.lru_cache(maxsize=64)
def _tail_deviations(share: float) -> float:
    """How many deviations up a normal tail holds this share (a store's size changes seldom
    between two questions: the inverse is worked out once per size)."""
    return float(ndtri(1.0 - share))


def admission(cfg: RankingConfig, mu: float, sd: float, n: int) -> tuple[float, float]:
    """How far up a memory found by meaning alone must stand among `n` memories whose cosines
    with the question have mean `mu` and deviation `sd`: (in deviations, as a cosine)."""
    need = cfg.meaning_admit
    if 0 < cfg.meaning_chance < n:
        need = max(need, _tail_deviations(cfg.meaning_chance / n))
    return need, max(mu + need * sd, float(np.nextafter(cfg.meaning_floor, 1)))


#: Every retrieval mode (RecallResult.retrieval_mode): full_bm25_tfidf, BM25 and a TF-IDF
#: channel (3-grams, context) in process; bm25_in_process, those channels switched off
#: (ngram_weight=0, context_weight=0); bm25_sql_fallback, the index could not run and the file's
#: postings were ranked, without the 3-gram channel; the `_meaning` forms, with the meaning
#: channel (in the fallback, from the vectors the file keeps).
RETRIEVAL_MODES = ("full_bm25_tfidf_meaning", "bm25_meaning_in_process", "full_bm25_tfidf", "bm25_in_process",
                   "bm25_meaning_sql_fallback", "bm25_sql_fallback")


def retrieval_mode(*, sql: bool, tfidf: bool, meaning: bool) -> str:
    """The channels that ran, by name (RecallResult.retrieval_mode)."""
    if sql:
        return "bm25_meaning_sql_fallback" if meaning else "bm25_sql_fallback"
    if meaning:
        return "full_bm25_tfidf_meaning" if tfidf else "bm25_meaning_in_process"
    return "full_bm25_tfidf" if tfidf else "bm25_in_process"
