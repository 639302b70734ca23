"""The pruned top-k is exactly the exhaustive ranking."""

import random
from datetime import datetime, timedelta

import numpy as np

from slm_magic import Memory
from slm_magic.core import text
from slm_magic.ranking.fusion import rank_index

VOCAB = [f"w{i}" for i in range(400)]


def corpus(n: int, seed: int = 0) -> list[dict]:
    rnd = random.Random(seed)
    weights = [1 / (i + 1) for i in range(len(VOCAB))]  # Zipf-like: some words everywhere
    start = datetime(2026, 1, 1)
    out = []
    for i in range(n):
        words = rnd.choices(VOCAB, weights, k=rnd.randint(4, 20))
        out.append({"content": " ".join(words), "session_id": f"s{i // 12}",
                    "user_id": rnd.choice(["ana", "ben"]),
                    "created_at": start + timedelta(days=rnd.uniform(0, 150))})
    return out


def test_pruned_top_k_equals_the_exhaustive_ranking(clock):
    clock.now = datetime(2026, 6, 1)
    with Memory(":memory:", clock=clock) as m:
        m.remember_many(corpus(6000))
        rnd = random.Random(1)
        now = clock.now.timestamp()
        checked = 0
        for _ in range(60):
            q = " ".join(rnd.sample(VOCAB[:60], rnd.randint(1, 4)))
            counts = text.term_counts(q)
            cs = m.index.channel_scores(list(counts), list(counts.values()), sum(counts.values()))
            full = rank_index(m.index, cs, m.config, now=now, user=0, project=None, limit=10**6)
            for k in (1, 5, 10, 30):
                top = rank_index(m.index, cs, m.config, now=now, user=0, project=None, limit=k)
                assert list(top.doc_ids) == list(full.doc_ids[:k])
                np.testing.assert_allclose(top.score, full.score[:k])
                checked += 1
            # with the age gate (memories older than 30 days need relevance >= 0.70)
            after = now - 30 * 86_400
            gated = rank_index(m.index, cs, m.config, now=now, user=0, project=None, limit=10**6,
                               updated_after=after)
            assert all(m.index.docs.updated[d] >= after or r >= 0.70 for d, r in zip(gated.doc_ids, gated.relevance))
            for k in (1, 10):
                top = rank_index(m.index, cs, m.config, now=now, user=0, project=None, limit=k, updated_after=after)
                assert list(top.doc_ids) == list(gated.doc_ids[:k])
        assert checked == 240


def test_a_recall_is_the_same_without_pruning_with_fields_sessions_meaning_and_the_learned_ranker(clock, monkeypatch):
    """The whole recall, not only the word channels: memories with titles and tags, questions
    asked in sessions (their working sets lift what was shown), the meaning channel and the
    learned re-ranker (phase 3) all on; the top 10 with the pruning is the top 10 when every
    match is scored in full."""
    import slm_magic.ranking.fusion as fusion

    clock.now = datetime(2026, 6, 1)
    rnd = random.Random(4)
    records = corpus(6000, seed=2)
    for r in records:
        r["title"] = " ".join(rnd.sample(VOCAB[:80], 2))
        r["tags"] = rnd.sample(VOCAB[:40], 2)
    questions = [" ".join(rnd.sample(VOCAB[:60], rnd.randint(1, 4))) for _ in range(40)]
    with Memory(":memory:", clock=clock, user_id="ana") as m:
        m.remember_many(records)
        for i in range(220):  # (phase 3: a ranker trained on the user's own signals)
            q = questions[i % len(questions)]
            for rank, hit in enumerate(m.recall(q, limit=3), start=1):
                m.feedback(hit.fact_id, "up" if rank == 2 else "down", query=q, rank=rank)
        assert m.learning.learner("ana").phase == 3

        def top(session_id):
            return [[(h.fact_id, round(h.score.value, 9)) for h in m.recall(q, session_id=session_id, limit=10)]
                    for q in questions]

        a, b = m.session_init().session_id, m.session_init().session_id
        real, cut = fusion._can_reach, []

        def counted(t, cs, *rest):
            cand, raw = real(t, cs, *rest)
            cut.append(cand.size < cs.matched.size)
            return cand, raw

        monkeypatch.setattr(fusion, "_can_reach", counted)
        pruned = top(a)
        monkeypatch.setattr(fusion, "_can_reach", lambda t, cs, *rest: (cs.matched, cs.matched_bm25))
        whole = top(b)
    assert sum(cut) >= 20  # (the pruning left matches unscored for most questions)
    assert sum(len(r) for r in pruned) >= 300  # (most questions fill their ten)
    assert pruned == whole


def test_the_word_probe_reads_the_best_by_bm25_beyond_the_pool_from_the_ranking_s_one_pass(clock, monkeypatch):
    """The meaning channel's word probe (in a store big enough for it) is the `probe` word
    matches with the most BM25 outside the pool, a tie to the lower memory, as every match's
    sums rank them; and they come from the one pass over the postings that ranked the words."""
    from slm_magic.core import kernels
    from slm_magic.ranking.meaning import _with_word_matches

    clock.now = datetime(2026, 6, 1)
    with Memory(":memory:", clock=clock) as m:
        m.remember_many(corpus(6000, seed=6))
        index, rnd, now = m.index, random.Random(8), clock.now.timestamp()
        query = np.zeros(index.vectors.dims, np.float32)  # (cosine 0 with every memory: a cutoff of -1 takes all)
        calls = []
        real = kernels.best_sums
        monkeypatch.setattr(kernels, "best_sums", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
        narrowed = 0
        for _ in range(30):
            q = " ".join(rnd.sample(VOCAB[:60], rnd.randint(1, 4)))
            counts = text.term_counts(q)
            args = (list(counts), list(counts.values()), sum(counts.values()))
            every = index.channel_scores(*args)
            order = np.lexsort((every.matched, -every.matched_bm25))
            for probe in (5, 60, 400, 1500):
                cfg = m.config.model_copy(update={"meaning_word_probe": probe, "meaning_word_probe_from": 0})
                calls.clear()
                rank_index(index, index.channel_scores(*args), cfg, now=now, user=0, project=None, limit=50)
                words_only = len(calls)
                calls.clear()
                cs = index.channel_scores(*args)
                pool = rank_index(index, cs, cfg, now=now, user=0, project=None, limit=50, meaning=True).doc_ids
                got, _ = _with_word_matches(index, cs, pool, query, -1.0, probe, np.empty(0, np.int64),
                                            np.empty(0, np.float32))
                beyond = every.matched[order][~np.isin(every.matched[order], pool)]
                assert got.tolist() == sorted(beyond[:probe].tolist())
                assert len(calls) <= words_only  # (no pass of its own)
                narrowed += cs._every is None  # (the few summed, not every match)
        assert narrowed >= 40  # (most questions had matches enough not to sum every one)
