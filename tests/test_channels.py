"""The channels against independent computations: BM25 by hand, TF-IDF by scikit-learn; the
context channel re-orders matches and never admits a memory."""

import math

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from slm_magic import Memory
from slm_magic.core import text


def test_bm25_matches_a_hand_computed_example():
    docs = ["apple banana", "apple apple cherry", "banana durian elderberry fig"]
    with Memory(":memory:", context_weight=0.0) as m:
        m.remember_many({"content": d} for d in docs)
        index = m.index
        # query "apple": df=2, N=3, idf = ln(1 + (3-2+0.5)/(2+0.5)) = ln(1.6); the type label
        # ("discovery") matches but adds nothing to a memory's length
        idf = math.log(1.6)
        avgdl = (2 + 3 + 4) / 3
        k1, b = 1.2, m.config.b

        def bm(tf, dl):
            return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

        cs = index.channel_scores([text.term_hash("appl")], [1], 1)
        assert cs.bm25_of([0])[0] == pytest.approx(bm(1, 2))
        assert cs.bm25_of([1])[0] == pytest.approx(bm(2, 3))
        assert cs.bm25_of([2])[0] == 0
        # the ideal: the query as a document of length 1
        assert cs.ideal_bm25 == pytest.approx(idf * (k1 + 1) / (1 + k1 * (1 - b + b * 1 / avgdl)))


def test_bm25_configurable_k1_b():
    with Memory(":memory:", k1=2.0, b=0.0, context_weight=0.0) as m:
        m.remember_many({"content": d} for d in ["apple banana", "apple apple cherry", "fig"])
        cs = m.index.channel_scores([text.term_hash("appl")], [1], 1)
        idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
        assert cs.bm25_of([1])[0] == pytest.approx(idf * 2 * 3 / (2 + 2))  # b=0: no length normalisation


def test_tfidf_cosine_equals_scikit_learn():
    docs = ["churn model uses tenure and contract type", "tenure leaks the churn label",
            "contract type joins on customer id", "weekly sales forecast with prophet",
            "churn churn churn everywhere"]
    query = "churn tenure contract"
    with Memory(":memory:") as m:
        m.remember_many({"content": d, "type": "decision"} for d in docs)
        counts = {}
        for t in text.analyse(query):
            counts[t] = counts.get(t, 0) + 1
        cs = m.index.channel_scores([text.term_hash(t) for t in counts], list(counts.values()), 3)
        ours = cs.dot[: len(docs)] / (m.index.docs.norm[: len(docs)] * cs.query_norm)
    # every field is indexed: the content and the type label ("decision")
    vec = TfidfVectorizer(analyzer=text.analyse, sublinear_tf=True, smooth_idf=True, norm="l2")
    X = vec.fit_transform([f"{d} decision" for d in docs])
    expected = (X @ vec.transform([query]).T).toarray().ravel()
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)


def test_context_reorders_matches_and_admits_nothing():
    with Memory(":memory:", context_weight=0.6, ngram_weight=0.0, semantic=False) as m:
        m.remember_many([
            {"content": "which join lost rows in the churn table?", "session_id": "s1"},
            {"content": "the left merge on customer_id dropped 3% of the churn rows", "session_id": "s1"},
            {"content": "unrelated note about plotting colours", "session_id": "s1"},
            {"content": "churn rows counted twice in the weekly report", "session_id": "s2"},
        ])
        res = m.recall("join lost rows churn")
        by = {r.content: r for r in res}
        lifted = by["the left merge on customer_id dropped 3% of the churn rows"]
        alone = by["churn rows counted twice in the weekly report"]
        ctx = lifted.score.context
        assert ctx > 0.5 and alone.score.context == 0  # its neighbour matches: context; no session: none
        assert lifted.relevance == pytest.approx(1 - (1 - lifted.bm25) * (1 - 0.6 * ctx))
        assert lifted.relevance > alone.relevance and lifted.bm25 == pytest.approx(alone.bm25, rel=0.2)
        assert "unrelated note about plotting colours" not in by  # a neighbour that matches nothing
        assert all(r.bm25 > 0 and r.matched for r in res)


def test_related_memories_come_after_the_matches_with_their_reason():
    with Memory(":memory:") as m:
        m.remember_many([
            {"content": "which join lost rows in the churn table?", "session_id": "s1"},
            {"content": "I prefer plotting with seaborn", "session_id": "s1"},
            {"content": "weekly sales forecast with prophet", "session_id": "s2"},
        ])
        assert [r.content for r in m.recall("churn join")] == ["which join lost rows in the churn table?"]
        res = m.recall("churn join", related=True)
        assert [r.content for r in res] == ["which join lost rows in the churn table?",
                                            "I prefer plotting with seaborn"]
        match, near = res.memories
        assert match.related_to is None and match.matched == {"content": ("churn", "join")}
        assert near.related_to == 1 and near.reason == "same session as #1"
        assert near.relevance == 0 and near.bm25 == 0 and not near.matched


def test_context_channel_needs_a_session():
    with Memory(":memory:") as m:
        m.remember_many([{"content": "which join lost rows in the churn table?"},
                         {"content": "the left merge on customer_id dropped 3%"}])
        assert [r.content for r in m.recall("join lost rows churn")] == ["which join lost rows in the churn table?"]


def test_ngram_channel_is_lnc_ltc_cosine_of_term_trigrams():
    """Memories: 1 + ln(tf) per 3-gram of their terms, cosine normalised; the query: (1 + ln tf)
    times the smooth idf of the gram over memories. Computed here from scratch."""
    from collections import Counter

    docs = ["deduplicated the events table", "dedup step before the join", "timezone bug in txn_ts",
            "weekly sales forecast"]
    query = "dedup events"

    def grams(t):
        out = Counter()
        for term in text.analyse(t):
            w = f" {term} "
            out.update(w[i:i + 3] for i in range(len(w) - 2))
        return out

    dg = [grams(d) for d in docs]  # (no title or tags: the type label is not text)
    qg = grams(query)
    n = len(docs)
    idf = {g: math.log((1 + n) / (1 + sum(g in d for d in dg))) + 1 for g in qg if any(g in d for d in dg)}
    qw = {g: (1 + math.log(c)) * idf[g] for g, c in qg.items() if g in idf}
    qn = math.sqrt(sum(v * v for v in qw.values()))
    expected = [sum(qw[g] * (1 + math.log(c)) for g, c in d.items() if g in qw)
                / (qn * math.sqrt(sum((1 + math.log(c)) ** 2 for c in d.values()))) for d in dg]
    with Memory(":memory:") as m:
        m.remember_many({"content": d} for d in docs)
        cs = m.index.channel_scores([text.term_hash(t) for t in text.analyse(query)], [1, 1], 2,
                                    text.query_grams(query))
        ours = m.index.grams.cosine(np.arange(n), *cs.grams)
        np.testing.assert_allclose(ours, expected, rtol=1e-5)
        res = m.recall(query)
        # it re-orders matches, and admits none: the timezone and sales notes share no term
        assert {r.content for r in res} == {docs[0], docs[1]}
        assert all(r.tfidf == pytest.approx(expected[docs.index(r.content)], rel=1e-5) for r in res)


def test_ngram_channel_sees_word_parts_and_typos_without_admitting_them():
    with Memory(":memory:", semantic=False) as m:  # (the n-gram channel by itself)
        m.remember_many([{"content": "deduplicated the events table before the join"},
                         {"content": "the join kept every event"}])
        res = m.recall("dedup join")  # both match "join"; only one is about deduplicating
        assert res.memories[0].content.startswith("deduplicated") and res.memories[0].tfidf > res.memories[1].tfidf
        typo = m.recall("deduplicatd join")  # a word no memory contains lowers nothing, its grams still count
        plain = m.recall("join")
        rel = {r.content: r.relevance for r in plain}
        assert all(r.relevance >= rel[r.content] - 1e-12 for r in typo)
        assert typo.memories[0].content.startswith("deduplicated")


def test_coverage_is_the_share_of_the_question_each_memory_holds_whatever_the_postings_order():
    """ChannelScores.coverage against its definition: the plain and idf-weighted share of the
    query's terms a document holds, read from postings in ascending order (a binary search)
    and out of order (marked), for documents that match and documents that do not."""
    from slm_magic.index.sparse import ChannelScores

    rng = np.random.default_rng(7)
    n = 500
    postings = [np.sort(rng.choice(n, size, replace=False)).astype(np.int32) for size in (300, 40, 1, 120)]
    idf = np.array([0.4, 2.1, 5.0, 1.3])
    docs = np.concatenate([rng.choice(n, 30), postings[2], [n]])  # (the sentinel holds no term)
    held = np.array([[d in set(p.tolist()) for d in docs.tolist()] for p in postings])
    want = (held.sum(axis=0) / 5, (idf[:, None] * held).sum(axis=0) / idf.sum())
    for terms in (postings, [p[::-1].copy() for p in postings]):
        cs = ChannelScores(np.zeros(n + 1), 1.0, 1.0, term_docs=terms, term_idf=idf,
                           n_terms=5, idf_total=float(idf.sum()))
        got = cs.coverage(docs)
        assert np.array_equal(got[0], want[0]) and np.allclose(got[1], want[1], rtol=0, atol=1e-12)
        assert got[0].max() > 0 and got[0].min() == 0


@pytest.mark.parametrize("numpy_loops", [False, True])
def test_the_few_sums_a_recall_reads_are_every_matchs_whatever_order_they_are_asked_in(numpy_loops, monkeypatch):
    """The best k by BM25 (a tie to the lower memory), the matches over a floor and any
    memories' BM25, asked in any order (each kept for the next question about the same query),
    are what every match's sums give; with numpy's loops (no compiler) too."""
    import random

    from slm_magic.core import kernels

    if numpy_loops:
        monkeypatch.setattr(kernels, "_kernels", None)
    rnd = random.Random(3)
    words = [f"w{i}" for i in range(60)]
    with Memory(":memory:") as m:
        m.remember_many({"content": " ".join(rnd.choices(words[: rnd.randint(5, 60)], k=rnd.randint(1, 12)))}
                        for _ in range(3000))
        index = m.index
        for _ in range(60):
            q = rnd.sample(words[:30], rnd.randint(1, 4))
            counts = text.term_counts(" ".join(q))
            whole = index.channel_scores(list(counts), list(counts.values()), sum(counts.values()))
            docs, raw = whole.matched, whole.matched_bm25
            few = index.channel_scores(list(counts), list(counts.values()), sum(counts.values()))
            asks = [("best", rnd.choice([1, 10, 144, 5000])) for _ in range(2)]
            asks += [("floor", float(np.quantile(raw, rnd.random())) if raw.size else 0.0) for _ in range(2)]
            asks += [("of", None)]
            rnd.shuffle(asks)
            for kind, arg in asks:
                if kind == "best":
                    got = few.best_bm25(arg)
                    at = np.sort(kernels.best(raw, docs, arg))
                    assert got[0].tolist() == docs[at].tolist() and got[1].tolist() == raw[at].tolist()
                elif kind == "floor":
                    got = few.bm25_at_least(arg)
                    assert got[0].tolist() == docs[raw >= arg].tolist()
                    assert got[1].tolist() == raw[raw >= arg].tolist()
                else:
                    asked = np.array(rnd.sample(range(3001), 30))
                    assert few.bm25_of(asked).tolist() == whole.bm25_of(asked).tolist()
            assert few.has_matches == bool(docs.size)


@pytest.mark.parametrize("numpy_loops", [False, True])
def test_postings_read_part_by_part_sum_as_the_joined_postings(numpy_loops, monkeypatch):
    """A term's postings lie in several segments and the tail; a question reads them there,
    part by part, without joining them: every sum (to the last bit), the best few, the
    coverage of each term and the TF-IDF dot products are those of the postings joined."""
    import dataclasses
    import random

    from slm_magic.core import kernels
    from slm_magic.index import sparse

    if numpy_loops:
        monkeypatch.setattr(kernels, "_kernels", None)
    monkeypatch.setattr(sparse, "TAIL_SEAL_POSTINGS", 4096)  # (a small store in several segments)
    monkeypatch.setattr(sparse, "MAX_MERGE_POSTINGS", 20_000)
    rnd = random.Random(11)
    words = [f"w{i}" for i in range(40)]

    def note() -> str:
        return " ".join(rnd.choices(words[: rnd.randint(4, 40)], k=rnd.randint(1, 10)))

    with Memory(":memory:") as m:
        for size in (9000, 300, 2500, 40):  # (segments of unlike sizes, left unmerged)
            m.remember_many({"content": note()} for _ in range(size))
        for _ in range(25):  # (the tail)
            m.remember(note())
        index = m.index
        assert len(index.segments) > 1 and index.tail
        several = 0
        for _ in range(40):
            counts = text.term_counts(" ".join(rnd.sample(words[:25], rnd.randint(1, 4))))
            cs = index.channel_scores(list(counts), list(counts.values()), sum(counts.values()))
            parts = np.ones(len(cs.term_docs), int) if cs.term_parts is None else cs.term_parts
            several += int(parts.max(initial=1) > 1)
            cut = np.cumsum(parts)[:-1]
            joined = dataclasses.replace(
                cs, term_docs=[np.concatenate(p) for p in np.split(np.array(cs.term_docs, dtype=object), cut)],
                term_tfs=[np.concatenate(p) for p in np.split(np.array(cs.term_tfs, dtype=object), cut)],
                term_weights=cs.term_weights[np.cumsum(parts) - parts], term_parts=None)
            assert cs.matched_bm25.tobytes() == joined.matched_bm25.tobytes()
            assert cs.matched.tolist() == joined.matched.tolist()
            fresh = index.channel_scores(list(counts), list(counts.values()), sum(counts.values()))
            for k in (1, 10, 200):
                assert [a.tolist() for a in fresh.best_bm25(k)] == [a.tolist() for a in joined.best_bm25(k)]
            asked = np.array(rnd.sample(range(index.docs.size + 1), 60))
            assert [a.tolist() for a in cs.coverage(asked)] == [a.tolist() for a in joined.coverage(asked)]
            assert cs.dot.tobytes() == joined.dot.tobytes()
        assert several > 10
