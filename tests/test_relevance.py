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
    assert top.relevance > 0.95
    assert 0.0 <= top.score.value <= 1.0


def test_all_parts_are_within_bounds(mem):
    mem.remember_many(filler(3, 300))
    for q in ["pipeline leakage", "gradient gradient variance", "cohort", "holdout stratified outlier lag"]:
        for r in mem.recall(q, limit=50):
            for v in (r.score.value, r.relevance, r.bm25, r.tfidf, r.recency, r.revision):
                assert 0.0 <= v <= 1.0


def test_partial_match_sits_between_and_both_sides_of_070_are_reachable(words_mem):
    mem = words_mem  # (the lexical channels' scale; tests/test_meaning.py: with the meaning channel)
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
    assert min(rels) > 0.1  # three words that hundreds of memories share: weak evidence


def test_relevance_does_not_depend_on_what_else_matched(words_mem):
    mem = words_mem  # (the lexical channels' scale; tests/test_meaning.py: with the meaning channel)
    """No per-query min-max: the top hit of a weak query is not handed 1.0, and a memory's
    relevance does not change when other memories come to match the query too."""
    mem.remember_many(filler(5, 100))
    small = mem.remember("one small mention of quarterly budgets among many other unrelated words here")
    q = "quarterly budgets approved by finance committee"
    top = mem.recall(q).memories[0]
    assert top.fact_id == small.fact_id and top.relevance < 0.9
    mem.remember("the finance committee approved nothing")
    again = next(r for r in mem.recall(q) if r.fact_id == small.fact_id)
    assert again.bm25 == pytest.approx(top.bm25, abs=0.01)  # (N grew by one: idf moved a little)
    # the n-gram channel's query norm now counts the words the new memory brought: a little lower
    assert again.relevance == pytest.approx(top.relevance, abs=0.05)


def test_a_word_no_memory_contains_changes_no_relevance(words_mem):
    mem = words_mem  # (the lexical channels' promise: the meaning channel reads every word)
    mem.remember_many(filler(6, 200))
    mem.remember("label leakage from the cancellation date", tags="leakage")
    before = {r.fact_id: r.relevance for r in mem.recall("leakage cancellation", limit=300)}
    after = {r.fact_id: r.relevance for r in mem.recall("leakage cancellation zygomorphic", limit=300)}
    assert before.keys() == after.keys()
    assert all(after[f] == pytest.approx(before[f], abs=1e-12) for f in before)


def test_a_word_the_memory_contains_in_any_field_never_lowers_its_relevance(mem):
    mem.remember_many(filler(7, 200))
    fact = mem.remember("label leakage from the cancellation date", tags="leakage", project="churn",
                        title="Labels", type="decision")
    base = ["label", "cancellation"]
    for extra in ("leakage", "churn", "labels", "decision", "date"):  # content, tag, project, title, type
        q0 = " ".join(base)
        r0 = next(r.relevance for r in mem.recall(q0, limit=300) if r.fact_id == fact.fact_id)
        r1 = next(r.relevance for r in mem.recall(f"{q0} {extra}", limit=300) if r.fact_id == fact.fact_id)
        assert r1 >= r0, extra


def test_every_field_is_searchable_and_says_where_it_matched(mem):
    fact = mem.remember("the join duplicated rows", tags=["dedup"], project="churn-model", title="Orders merge",
                        type="decision")
    mem.remember("unrelated words about colours")
    for q, field in (("dedup", "tags"), ("churn", "project"), ("merge", "title"), ("decision", "type"),
                     ("duplicated", "content")):
        res = mem.recall(q)
        assert [r.fact_id for r in res] == [fact.fact_id], q
        assert field in res[0].matched, q


def test_a_match_on_a_part_of_an_identifier_names_that_part(mem):
    """"usage_daily table" matching "the usage tables" says "usage", the word the memory holds,
    not "usage_daily", which it does not; a memory holding the identifier says it once."""
    part = mem.remember("the usage tables are complete from March")
    whole = mem.remember("usage_daily joins on the customer key")
    got = {r.fact_id: r.matched for r in mem.recall("usage_daily table")}
    assert got[part.fact_id] == {"content": ("usage", "table")}
    assert got[whole.fact_id] == {"content": ("usage_daily",)}
    plain = mem.remember("the user may use the main usage table at any age")  # (words inside others stay)
    said = next(r.matched for r in mem.recall("user use age usage main ai") if r.fact_id == plain.fact_id)
    assert said == {"content": ("user", "use", "age", "usage", "main")}


def test_the_age_gate_reads_relevance_and_keeps_only_strong_old_matches():
    from datetime import datetime, timedelta

    now = datetime(2026, 6, 1)
    with Memory(":memory:", clock=lambda: now) as m:
        m.remember_many(filler(8, 100))
        old = now - timedelta(days=90)
        strong = m.remember("seasonal decomposition of the sales forecast", tags="forecast", created_at=old)
        weak = m.remember("sales numbers for the board deck", created_at=old)
        fresh = m.remember("sales by region this week")
        q = "seasonal decomposition sales forecast"
        every = {r.fact_id: r.relevance for r in m.recall(q, limit=200)}
        assert every[strong.fact_id] >= 0.70 > every[weak.fact_id] > 0
        gated = {r.fact_id for r in m.recall(q, limit=200, max_age_days=30)}
        assert strong.fact_id in gated and fresh.fact_id in gated and weak.fact_id not in gated


def test_an_identifier_some_memory_holds_is_asked_for_whole(words_mem):
    mem = words_mem  # (the lexical channels' scale; tests/test_meaning.py: with the meaning channel)
    exact = mem.remember("store_master has one row per store and opening date")
    mem.remember("the store in Leeds closes on Sundays")
    mem.remember("the master branch was tagged v2")
    assert [m.fact_id for m in mem.recall("store_master")] == [exact.fact_id]
    # an identifier no memory holds is still found by its parts
    assert {m.content for m in mem.recall("leeds_store")} == {"the store in Leeds closes on Sundays",
                                                              "store_master has one row per store and opening date"}


def test_a_name_is_found_whichever_way_it_is_written(clock):
    """"bigquery" found nothing in a memory that says "BigQuery" (held whole, unstemmed), nor
    "BigQuery" in one that says "bigquery" (a plain word, stemmed): people type names lowercase."""
    with Memory(":memory:", clock=clock, semantic=False) as camel_only, \
            Memory(":memory:", clock=clock, semantic=False) as both:
        camel = camel_only.remember("We chose Snowflake over BigQuery: the client already pays for Snowflake.")
        camel_only.remember("the churn model is retrained every Monday")
        in_both = both.remember("We chose Snowflake over BigQuery: the client already pays for Snowflake.")
        plain = both.remember("the bigquery export lands in the raw bucket every night")
        for path in ("index", "sql"):
            if path == "sql":
                camel_only.live.degrade("a test: the file answers")
                both.live.degrade("a test: the file answers")
            for asked in ("bigquery", "BigQuery", "Bigquery", "why not bigquery?"):
                found = camel_only.recall(asked).memories
                assert [m.fact_id for m in found] == [camel.fact_id], (asked, path)
                assert "bigquery" in found[0].reason, (asked, path)
            # (a store that writes it both ways: each way finds both, the name as written first; a
            # name found no longer goes when a memory that writes it the other way comes)
            for asked in ("BigQuery", "bigquery", "Bigquery"):
                found = [m.fact_id for m in both.recall(asked).memories]
                assert set(found) == {in_both.fact_id, plain.fact_id}, (asked, path)
            assert [m.fact_id for m in both.recall("BigQuery").memories][0] == in_both.fact_id, path


def test_a_plain_word_some_memory_holds_asks_for_nothing_more(words_mem):
    """A plain word's unstemmed form is also the stem of longer words: "rational" brought "the
    rationale for ..." where a memory held "rational" itself."""
    mem = words_mem
    rational = mem.remember("a rational price ends in 99")
    mem.remember("the rationale for dropping the legacy table")
    assert [m.fact_id for m in mem.recall("rational").memories] == [rational.fact_id]
    assert [m.fact_id for m in mem.recall("rational pricing").memories] == [rational.fact_id]


def test_one_word_of_a_question_of_several_is_never_a_strong_match_by_itself():
    """"how do we handle days when shops were shut?" called a memory that said only "handle" a
    strong match (one rare word, its 3-grams and a little meaning reached 0.71)."""
    from datetime import datetime

    from slm_magic.core.text import term_words
    from slm_magic.results.models import Fact, ScoredMemory, SearchScore

    def shown(content: str, question: str, *, similar: bool = False, temporal: float = 0.0) -> str:
        at = datetime(2026, 6, 1)
        fact = Fact(fact_id="f", content=content, created_at=at, updated_at=at)
        score = SearchScore(value=0.7, relevance=0.71, bm25=0.58, tfidf=0.25, recency=1.0, revision=0.0,
                            temporal=temporal)
        return ScoredMemory(fact=fact, score=score, similar=similar, query_words=term_words(question)).strength

    question = "how do we handle days when shops were shut?"
    call_centre = "the call centre can only handle 10,000 calls a month"
    assert shown(call_centre, question) == "partial"
    assert shown("closed shops on public holidays: handle those days as missing", question) == "strong"
    assert shown(call_centre, question, similar=True) == "strong"  # (its meaning agrees)
    assert shown(call_centre, "handle") == "strong"  # (the whole of a one-word question)
    assert shown(call_centre, question, temporal=1.0) == "strong"  # (the day asked about)
