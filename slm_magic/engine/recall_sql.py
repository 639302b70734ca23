"""Recall from the file (or the team's server) when the kernel's index cannot run: the same
fields, filters, BM25 relevance, recency, revision, second stage, age gate, meaning channel and
temporal channel as in process, computed from the postings and vectors the store keeps. There
are no 3-grams in the file (they come from the text when an index loads), so their part is 0."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..core.clock import epoch_seconds
from ..core.scoring import (RankingConfig, admission, bm25_idf, bm25_relevance, bm25_term, fuse,
                            idf_max, length_norm, recency, revision, search_score, spread)
from ..index.meaning import EmbeddingModel, fact_texts
from ..index.rows import fact_of
from ..index.vectors import VectorStore
from ..ranking.fusion import days_first, matching_nothing, second_stage
from ..ranking.meaning import fuse_meaning
from ..ranking.ranked import Ranked
from ..results.models import ScoredMemory
from .answers import scored_memories


def recall_sql(store, cfg: RankingConfig, model: EmbeddingModel | None, terms: Sequence[int], qtf: Sequence[int],
               words: Mapping[int, str], *, now: float, user: str, project: str | None, limit: int,
               updated_after: float | None, kind: str | None, type: str | None, day_docs: Sequence[int] | None = None,
               every_day_memory: bool = False, question: np.ndarray | None = None, strict: bool = True,
               admit: bool = True) -> tuple[Ranked, list[ScoredMemory]]:
    """`Memory.recall` from the store: (the rows shown, their memories)."""
    ranked = rank_sql(store, cfg, model, terms, qtf, now=now, user=user, project=project, limit=limit,
                      kind=kind, type=type, days=day_docs, every_day_memory=every_day_memory, question=question,
                      strict=strict, admit=admit, updated_after=updated_after)
    ranked = ranked.take(np.arange(min(limit, ranked.doc_ids.size)))
    facts = {d: fact_of(row) for d, row in store.facts_by_doc(ranked.doc_ids.tolist()).items()}
    if len(facts) < ranked.doc_ids.size:  # (removed by another process since it was ranked)
        ranked = ranked.take(np.flatnonzero(np.isin(ranked.doc_ids, list(facts))))
    return ranked, scored_memories(ranked, facts, words)


def bm25_matches(store, cfg: RankingConfig, terms: Sequence[int], qtf: Sequence[int], user: str,
                 project: str | None):
    """Every memory the user can read that holds a query term, scored from the store's postings
    with the index's BM25: (doc ids, raw BM25, updated epoch, revisions, kinds, types, the share
    of the question's idf each holds, the number of memories)."""
    n, avgdl, df, rows = store.term_postings(terms, user, project) if terms else (0, 0.0, {}, [])
    if not rows:
        return None, n
    idf = bm25_idf(n, np.array([df.get(t, 0) for t in terms], dtype=np.float64))
    position = {t: i for i, t in enumerate(terms)}
    docs, dl, updated, revs, kinds, types, held_terms, tf = zip(*rows)
    at = np.array([position[t] for t in held_terms])
    norm = length_norm(np.array(dl, dtype=np.float64), avgdl, cfg.k1, cfg.b)
    part = bm25_term(np.asarray(qtf, dtype=np.float64)[at], idf[at], np.array(tf, dtype=np.float64), norm, cfg.k1)
    doc_ids, first, row_doc = np.unique(np.array(docs, dtype=np.int64), return_index=True, return_inverse=True)
    raw = np.bincount(row_doc, weights=part)
    held = np.bincount(row_doc, weights=idf[at]) / (float(idf.sum()) or 1.0)
    return (doc_ids, raw, np.array(updated, dtype=np.float64)[first], np.array(revs, dtype=np.float64)[first],
            np.array(kinds, dtype=object)[first], np.array(types, dtype=object)[first], held), n


def rank_sql(store, cfg: RankingConfig, model: EmbeddingModel | None, terms: Sequence[int], qtf: Sequence[int], *,
             now: float, user: str, project: str | None, limit: int, kind: str | None = None, type: str | None = None,
             days: Sequence[int] | None = None, every_day_memory: bool = False, question: np.ndarray | None = None,
             strict: bool = True, admit: bool = True, updated_after: float | None = None) -> Ranked:
    """The in-process ranking without its n-gram and context channels, from the store; with the
    question's vector `question` the meaning channel from the stored vectors (`meaning_sql`).
    A question about a time (`days`: its days' summaries and memories, given) is answered by
    those alone, best first (`days_first`, the temporal channel), as in process: the summaries
    and the memories that match its words, or with `every_day_memory` every memory."""
    if limit <= 0:
        return Ranked.empty()
    found, n = bm25_matches(store, cfg, terms, qtf, user, project)
    ranked, every = Ranked.empty(), None
    updated, held = np.empty(0), np.empty(0)
    older = 0
    if found is not None:
        docs, raw, updated, revs, kinds, types, held = found
        keep = np.ones(docs.size, bool)
        if kind is not None:
            keep &= kinds == kind
        if type is not None:
            keep &= types == type
        docs, raw, updated, revs, held = docs[keep], raw[keep], updated[keep], revs[keep], held[keep]
        if updated_after is not None:  # (what the age gate leaves out, counted as in process)
            older = int(np.count_nonzero(updated < updated_after))
    if found is not None and docs.size:
        bm25 = bm25_relevance(raw, idf_max(n))
        none = np.zeros(docs.size)
        rel = fuse(bm25, none, cfg)
        rec = recency(updated, now, cfg.recency_half_life_days)
        rev = revision(revs, cfg.revision_cap)
        every = Ranked(docs, search_score(rel, rec, rev, cfg), rel, bm25, none, rec, rev, none)
    if days is not None:  # (a question about a time: its days' matches, no second stage nor meaning)
        on_days = Ranked.empty() if every is None else every.take(np.flatnonzero(np.isin(every.doc_ids, list(days))))
        unmatched = sorted(set(days) - set(on_days.doc_ids.tolist())) if every_day_memory else []
        if unmatched:  # (a day's memory need match no word of a question that asks what was done)
            on_days = on_days.followed_by(_unmatched(store, cfg, unmatched, now))
        ranked = days_first(on_days, Ranked.empty(), cfg, limit)
    elif every is not None:
        rows, rel2, score2 = second_stage(docs, every.score, every.relevance, every.tfidf, updated, updated_after, cfg,
                                          max(limit, cfg.meaning_pool) if question is not None else limit)
        ranked, updated, held = every.take(rows, score=score2[rows]), updated[rows], held[rows]
        ranked.relevance = rel2[rows]
    if question is not None and days is None:
        ranked = meaning_sql(store, cfg, model, ranked, updated, held, question, now=now, user=user, project=project,
                             kind=kind, type=type, limit=limit, strict=strict, admit=admit,
                             updated_after=updated_after)
    ranked.older_matches = older
    return ranked


def _unmatched(store, cfg: RankingConfig, docs: list[int], now: float) -> Ranked:
    """Memories of a day the question names that hold none of its words (`docs`, as the day's
    filters chose them), scored as in process: relevance 0, their recency and revision."""
    found = [(d, fact_of(row)) for d, row in sorted(store.facts_by_doc(docs).items())]
    if not found:
        return Ranked.empty()
    c = np.array([d for d, _ in found], dtype=np.int64)
    facts = [f for _, f in found]
    rec = recency(np.array([epoch_seconds(f.updated_at) for f in facts]), now, cfg.recency_half_life_days)
    rev = revision(np.array([f.revision_count for f in facts], dtype=np.float64), cfg.revision_cap)
    return matching_nothing(c, rec, rev, cfg)


def meaning_sql(store, cfg: RankingConfig, model: EmbeddingModel, words: Ranked, updated: np.ndarray,
                held: np.ndarray, question: np.ndarray, *, now: float, user: str, project: str | None,
                kind: str | None, type: str | None, limit: int, strict: bool, admit: bool,
                updated_after: float | None = None) -> Ranked:
    """`with_meaning` from the vectors the store keeps: the same background (a fixed sample of
    them), admission and fusion (`fuse_meaning`)."""
    docs, got, n = store.vector_sample(question, model.name, VectorStore.SAMPLE)
    cos = sql_cosines(store, model, question, docs, got)
    mu, sd = spread(cos.size, float(cos.sum()), float(cos @ cos), cfg)
    need, cutoff = admission(cfg, mu, sd, n)
    both = words
    if admit:
        picks = store.vector_closest(question, model.name, cutoff, cfg.meaning_top, user, project, kind, type,
                                     words.doc_ids.tolist())
        if picks:
            docs, _, when, revs = (np.array(c) for c in zip(*picks))
            none = np.zeros(docs.size)
            rec = recency(when.astype(np.float64), now, cfg.recency_half_life_days)
            rev = revision(revs.astype(np.float64), cfg.revision_cap)
            both = words.followed_by(Ranked(docs.astype(np.int64), search_score(none, rec, rev, cfg), none, none,
                                            none, rec, rev, none))
            updated, held = np.concatenate([updated, when.astype(np.float64)]), np.concatenate([held, none])
    if not both.doc_ids.size:
        return both
    return fuse_meaning(both, sql_cosines(store, model, question, both.doc_ids.tolist()), mu, sd, need, cfg,
                        strict=strict, coverage=held.__getitem__, updated=updated, updated_after=updated_after,
                        limit=limit)


def sql_cosines(store, model: EmbeddingModel, question: np.ndarray, doc_ids: list[int],
                got: dict[int, float] | None = None) -> np.ndarray:
    """The question's cosine with each of these memories: the store's vector (`got`, else read
    here), else one worked out from the text (a row written before the file kept vectors, or by
    another model), as the in-process index does."""
    if got is None:
        got = store.vector_cosines(question, model.name, doc_ids)
    missing = [d for d in doc_ids if d not in got]
    if missing:
        facts = store.facts_by_doc(missing)
        found = [d for d in missing if d in facts]
        vecs = model.encode(fact_texts(fact_of(facts[d]) for d in found))
        got.update(zip(found, (vecs @ question).tolist()))
    return np.array([got.get(d, 0.0) for d in doc_ids])
