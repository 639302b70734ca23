"""From the channels' scores to ranked word matches: each match scored once (`scored`: BM25
and context relevance, recency, revision, the working set) with safe pruning, the 3-gram
channel fused in a second stage over the pool, the age gate; a named day's summaries first;
the session neighbours asked for beside the matches. The formulas are core/scoring.py's."""

from __future__ import annotations

import numpy as np

from ..core import kernels
from ..core.scoring import (AGE_GATE_RELEVANCE, DAY_WEIGHT, RankingConfig, bm25_raw_at, bm25_relevance,
                            search_score)
from ..index import ngrams
from ..index.sparse import ChannelScores, SparseIndex
from .ranked import Ranked, WorkingSet


def rank_index(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, *, now: float, user: int,
               project: int | None, limit: int, working_set: WorkingSet | None = None,
               updated_after: float | None = None, kind: int | None = None, type_code: int | None = None,
               meaning: bool = False) -> Ranked:
    """Rank the live memories of one user (and project) that match the query; with an age
    gate, also count the matching memories older than it (for the user to see). `meaning`:
    the meaning channel will read the word matches with the most BM25 (its word probe)."""
    older = 0
    if updated_after is not None and cs.has_matches:  # (every match is summed for the count; the ranking reads those)
        t = index.docs
        own = _eligible(t, cs.matched, user, project, kind, type_code)
        older = int(np.count_nonzero(t.updated[own] < updated_after))
    ranked = _rank_index(index, cs, cfg, now=now, user=user, project=project, limit=limit, working_set=working_set,
                         updated_after=updated_after, kind=kind, type_code=type_code, meaning=meaning)
    ranked.older_matches = older
    return ranked


def rank_days(index: SparseIndex, cs: ChannelScores | None, cfg: RankingConfig, docs: np.ndarray, *, now: float,
              working_set: WorkingSet | None = None) -> Ranked:
    """What the days a question names hold (`docs`: their whole-session summaries, and the
    memories no summary stands for yet; live ones kept), scored as `rank_index` scores every
    match (`scored`, then `with_grams`: BM25, the n-gram channel, recency, revision, the working
    set; a memory need match no word), all of them, whatever their age, best first;
    `days_first` adds the temporal channel."""
    t = index.docs
    docs = np.asarray(docs, dtype=np.int64)
    docs = docs[(docs >= 0) & (docs < t.size)]
    docs = docs[t.alive[docs]]
    if not docs.size:  # (a day's memory need match no word of the question: the day is its match)
        return Ranked.empty()
    parts = scored(index, cs, cfg, docs, now=now, working_set=working_set)
    return with_grams(index, cs, cfg, docs, parts, None, docs.size)


def days_first(days: Ranked, rest: Ranked, cfg: RankingConfig, limit: int) -> Ranked:
    """What the days a question names hold (`days`: their session summaries and memories,
    lexical parts only) first, their relevance fused with the temporal channel, best first
    among themselves; then `rest` in its order, without those; at most `limit`. With nothing
    on those days, `rest` unchanged."""
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
    keep = passes(t, c, user, project, 0, None)
    if updated_after is not None:  # the age gate: relevance 0 never passes it
        keep &= t.updated[c] >= updated_after
    c, of = c[keep][:limit], np.array(of, dtype=np.int64)[keep][:limit]
    rec = np.minimum(1.0, index.recency_base[c] * index.recency_scale(now, cfg.recency_half_life_days))
    rev = np.minimum(t.revision[c], cfg.revision_cap) * (1.0 / cfg.revision_cap)
    return matching_nothing(c, rec, rev, cfg), of


def matching_nothing(docs: np.ndarray, rec: np.ndarray, rev: np.ndarray, cfg: RankingConfig) -> Ranked:
    """Memories that match no word of the question, there for another reason (a match's
    neighbour, a day asked about): relevance 0, scored by recency and revision alone."""
    z = np.zeros(docs.size)
    return Ranked(docs, search_score(z, rec, rev, cfg), z, z, z, rec, rev, z)


def _eligible(t, c: np.ndarray, user: int | None, project: int | None, kind: int | None,
              type_code: int | None) -> np.ndarray:
    """The live documents among `c` that pass the filters (None: no filter)."""
    return c[passes(t, c, user, project, kind, type_code)]


def passes(t, c: np.ndarray, user: int | None, project: int | None, kind: int | None,
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


def _rank_index(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, *, now: float, user: int,
                project: int | None, limit: int, working_set: WorkingSet | None = None,
                updated_after: float | None = None, kind: int | None = None, type_code: int | None = None,
                meaning: bool = False) -> Ranked:
    """Rank the live memories of one user (and project) that match the query themselves.

    The context (the best cosine among a match's session neighbours that match too) re-orders
    matches; it never admits a memory. Exact, with safe pruning: the full score of a few
    promising matches gives a bar θ the k-th result must clear; a match whose score cannot
    reach θ even with the best context and recency of the store is never scored in full.
    """
    if not cs.has_matches or limit <= 0:
        return Ranked.empty()
    t = index.docs
    wg = cfg.ngram_weight if cs.grams[0].size else 0.0
    rscale = index.recency_scale(now, cfg.recency_half_life_days)
    cos, cmax = _context_cosines(t, cs) if cfg.context_weight > 0 else (None, 0.0)
    # (the only user's own: no need to compare; a user with none sees only what others shared)
    only_user = user if len(index.codes["user"]) > 1 or user < 0 else None

    def exact(c: np.ndarray, raw: np.ndarray):  # (matches and their BM25)
        parts = scored(index, cs, cfg, c, now=now, working_set=working_set, cos=cos, raw=raw)
        if updated_after is not None:  # the age gate (read again after the n-gram part is in)
            score, rel = parts[0], parts[1]
            score[(t.updated[c] < updated_after) & (rel + wg < AGE_GATE_RELEVANCE)] = -np.inf
        return parts

    k = max(limit, ngrams.POOL) if wg > 0 else limit  # the pool the n-gram channel re-orders
    if sum(d.size for d in cs.term_docs) > 4 * (4 * k + 64):  # (more postings than that: more matches, maybe)
        def bound(c: np.ndarray, raw: np.ndarray) -> np.ndarray:
            return _bounds(index, cs, cfg, c, raw, rscale, cmax, wg, working_set, updated_after)

        static = index.best_static(cfg, rscale) + (working_set.max if working_set is not None else 0.0)

        def floor_of(theta: float) -> float:
            return _raw_floor(theta, cs.idf_max, cfg, cmax, static)

        probe = cfg.word_probe(index.vectors.live) if meaning else 0
        if probe < 0:  # (the meaning channel's word probe reads every match)
            cs.every_match()
        elif probe:  # (or the best by BM25 beyond the pool: summed in the pass that finds the bar's few)
            cs.hold_best(max(probe + limit, 4 * k + 64))
        cand, raw = _can_reach(t, cs, k, floor_of, bound, lambda c, r: exact(c, r)[0], only_user, project, kind,
                               type_code)
    else:
        cand, raw = cs.matched, cs.matched_bm25
    keep = passes(t, cand, only_user, project, kind, type_code)
    cand, raw = cand[keep], raw[keep]
    if not cand.size:
        return Ranked.empty()
    parts = exact(cand, raw)
    if updated_after is not None:
        passed = np.isfinite(parts[0])
        cand, parts = cand[passed], tuple(a[passed] for a in parts)
        if not cand.size:
            return Ranked.empty()
    return with_grams(index, cs, cfg, *_best_k(cand, parts, k), updated_after, limit)


def _best_k(cand: np.ndarray, parts: tuple, k: int) -> tuple[np.ndarray, tuple]:
    """The best `k` of scored candidates (`scored`'s parts, the score first), best first, ties
    at the cut included and then broken by doc id."""
    score = parts[0]
    if k < cand.size:
        kth = score[np.argpartition(-score, k - 1)[k - 1]]
        top = np.flatnonzero(score >= kth)
    else:
        top = np.arange(cand.size)
    top = top[np.lexsort((cand[top], -score[top]))][:k]
    return cand[top], tuple(a[top] for a in parts)


def _context_cosines(t, cs: ChannelScores) -> tuple[np.ndarray, float]:
    """The cosine of each match's own tf-idf vector with the question's (dead ones and the
    sentinel 0), and the best of them: what the context channel reads from a match's neighbours."""
    own = cs.matched
    cos_own = np.minimum(1.0, cs.dot[own] / np.maximum(t.norm[own] * cs.query_norm, 1e-12))
    cos_own[~t.alive[own]] = 0.0
    cos = np.zeros(t.capacity + 1)
    cos[own] = cos_own
    return cos, float(cos_own.max())


def _bounds(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, c: np.ndarray, raw: np.ndarray, rscale: float,
            cmax: float, wg: float, working_set: WorkingSet | None, updated_after: float | None) -> np.ndarray:
    """An upper bound of the score of each match of `c`, `raw` its BM25: that BM25 and its
    recency/revision, with the best context any match could give (-inf for an old match that
    cannot reach the age gate)."""
    t = index.docs
    return kernels.bounds(c, raw, index.recency_base, t.revision, t.updated, cfg, idf_max=cs.idf_max,
                          recency_scale=rscale, context_max=cmax, gram_weight=wg,
                          lift=working_set.max if working_set is not None else 0.0, updated_after=updated_after)


def _can_reach(t, cs: ChannelScores, k: int, floor_of, bound, exact_score, *filters) -> tuple[np.ndarray, np.ndarray]:
    """The matches (and their BM25) whose bound can still reach the k-th best full score among
    the few with the most BM25 (a bar θ): only these are scored in full. A bound is at most
    what the match's BM25 gives with the best of everything else (`_raw_floor`), so only the
    matches with that much BM25 are summed and have their bound worked out."""
    top, top_raw = cs.best_bm25(4 * k + 64)
    keep = passes(t, top, *filters)
    if np.count_nonzero(keep) < k:
        return cs.matched, cs.matched_bm25
    score = exact_score(top[keep], top_raw[keep])
    theta = np.partition(score, score.size - k)[score.size - k] - 1e-12
    near, raw = cs.bm25_at_least(floor_of(theta))
    reach = bound(near, raw) >= theta
    return near[reach], raw[reach]


def _raw_floor(theta: float, idf_max: float, cfg: RankingConfig, cmax: float, static: float) -> float:
    """The least raw BM25 whose bound can reach θ: a bound is at most w_relevance·(1 − (1 −
    rel)(1 − context_weight·cmax)) + `static` (the best recency, revision and working-set lift
    any memory has), so rel must reach ρ = 1 − (1 − (θ − static)/w_relevance)/(1 − context_weight·cmax).
    A hair under it, so no rounding drops a match; 0 where every match may reach θ."""
    cfac = 1.0 - cfg.context_weight * cmax
    if cfac <= 0 or cfg.w_relevance <= 0 or idf_max <= 0:
        return 0.0
    rho = 1.0 - (1.0 - (theta - static) / cfg.w_relevance) / cfac
    return bm25_raw_at(rho, idf_max) * (1.0 - 1e-9) if 0.0 < rho < 1.0 else 0.0


def scored(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, c: np.ndarray, *, now: float,
            working_set: WorkingSet | None = None, cos: np.ndarray | None = None, raw: np.ndarray | None = None):
    """The one per-candidate scoring, before the n-gram part: (score, relevance, bm25,
    context, recency, revision, working set) of each of `c`. Relevance is the BM25 relevance
    fused as a noisy-or with the context channel (the best cosine `cos` among a candidate's
    session neighbours, when it is on); the score is `search_score` of it plus the working
    set's lift."""
    t = index.docs
    if cs is None or not cs.has_matches:
        bm25 = np.zeros(c.size)
    else:  # (`raw`: their BM25, where the caller has it)
        bm25 = bm25_relevance(cs.bm25_of(c) if raw is None else raw, cs.idf_max)
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


def with_grams(index: SparseIndex, cs: ChannelScores, cfg: RankingConfig, docs: np.ndarray, parts,
                updated_after: float | None, limit: int) -> Ranked:
    """Scored candidates (`scored`'s parts) with the n-gram channel's part fused in
    (`second_stage`): the best `limit`, as a Ranked."""
    score, rel, bm25, ctx, rec, rev, ws = parts
    wg = cfg.ngram_weight if cs is not None and cs.grams[0].size else 0.0
    gram = index.grams.cosine(docs, *cs.grams) if wg > 0 else np.zeros(docs.size)
    # (no n-gram part: its gram is 0 and leaves each relevance as it was)
    rows, rel2, score2 = second_stage(docs, score, rel, gram, index.docs.updated[docs], updated_after, cfg, limit)
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
