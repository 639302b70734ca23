"""Relevance is absolute: bounded, 0 for no match, ~1 for the query itself, stable across stores."""

import random

import pytest

from slm_magic import Memory

WORDS = ("pipeline feature leakage cohort baseline retention forecast anomaly quantile gradient "
         "bootstrap variance encoder embedding holdout stratified outlier imputation lag seasonal").split()


def filler(seed: int, n: int) -> list[dict]:
    rnd = random.Random(seed)
    return [{"content": " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(5, 15)))} for _ in range(n)]


def test_no_match_scores_zero_and_is_not_returned(mem):
    mem.remember_many(filler(1, 50))
    assert mem.recall("kangaroo marmalade").memories == []


def test_memory_that_is_the_query_scores_close_to_one(mem):
    mem.remember_many(filler(2, 200))
    fact = mem.remember("the churn cohort of march lost its weekly retention")
    top = mem.recall("the churn cohort of march lost its weekly retention").memories[0]
    assert top.fact_id == fact.fact_id
    assert top.relevance == pytest.approx(1.0, abs=1e-6)
    assert 0.0 <= top.score.value <= 1.0


def test_all_parts_are_within_bounds(mem):
    mem.remember_many(filler(3, 300))
    for q in ["pipeline leakage", "gradient gradient variance", "cohort", "holdout stratified outlier lag"]:
        for r in mem.recall(q, limit=50):
            for v in (r.score.value, r.relevance, r.bm25, r.tfidf, r.recency, r.revision):
                assert 0.0 <= v <= 1.0


def test_partial_match_sits_between_and_both_sides_of_070_are_reachable(mem):
    strong = mem.remember("seasonal decomposition of the sales forecast")
    weak = mem.remember("sales numbers for the board deck")
    mem.remember_many(filler(4, 100))
    res = {r.fact_id: r.relevance for r in mem.recall("seasonal decomposition sales forecast")}
    assert res[strong.fact_id] >= 0.70
    assert 0 < res[weak.fact_id] < 0.70


def test_same_memory_and_query_score_the_same_in_different_stores_of_similar_size():
    q = "leakage in the stratified holdout"
    target = "we found leakage in the stratified holdout split"
    rels = []
    for seed in (10, 20, 30):
        with Memory(":memory:") as m:
            m.remember_many(filler(seed, 2000))
            fact = m.remember(target)
            rels.append(next(r.relevance for r in m.recall(q, limit=2001) if r.fact_id == fact.fact_id))
    assert max(rels) - min(rels) < 0.05
    assert min(rels) > 0.5


def test_relevance_does_not_depend_on_what_else_matched(mem):
    """No per-query min-max: the top hit of a weak query is not handed 1.0."""
    mem.remember_many(filler(5, 100))
    mem.remember("one small mention of quarterly budgets among many other unrelated words here")
    top = mem.recall("quarterly budgets approved by finance committee").memories[0]
    assert top.relevance < 0.7
