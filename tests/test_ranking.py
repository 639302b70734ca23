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
