"""Questions about a day (issue 25, point 13): "what did I do today / yesterday / last Tuesday /
on 2026-06-01" brings that day's sessions first, each a strong match that names what it
touched; every other question ranks as before."""

from __future__ import annotations

from datetime import datetime

import pytest

from slm_magic import Memory
from slm_magic.sessions.summaries import entities_of


def day_key(day: datetime) -> str:
    """The topic key's start of a day's whole-session summaries (sessions.day_key)."""
    return f"session-day:{day:%Y%m%d}:"

DEMO = [  # the quickstart's session: four memories, ten entities
    ("The left join of orders on customer_id drops 3% of rows: 412 customers have no account.",
     "join,data-quality", "decision"),
    ("Dropped the tenure_days feature: it is computed after the churn date, so it leaks the label.",
     "churn,leakage", "decision"),
    ("Client (Ana): churn means 90 days without a login, not a cancelled contract.", "churn,definition",
     "preference"),
    ("Gradient boosting beats logistic regression by 0.04 AUC on the March holdout.", "churn,model", "discovery"),
]


def demo_session(mem: Memory, rows=DEMO, project: str = "churn") -> str:
    sid = mem.session_init(query="customer churn analysis").session_id
    for content, tags, kind in rows:
        mem.remember(content, tags=tags, type=kind, project=project, session_id=sid)
    mem.close_session(sid)
    return sid


def whole(m) -> bool:
    """Whether a recalled memory is a whole session's summary."""
    return m.fact.kind == "summary_event" and (m.fact.topic_key or "").startswith("session-day:")


def test_what_did_i_do_today_brings_the_session_first_as_a_strong_match(mem):
    sid = demo_session(mem)
    res = mem.recall("What did I do today?", limit=3)
    top = res[0]
    assert whole(top) and top.fact.session_id == sid and top.fact.topic_key == day_key(datetime(2026, 6, 1)) + sid
    assert top.relevance >= 0.70 and top.strength == "strong" and top.score.temporal == 1.0
    touched = {e for f in mem.session_facts(sid) for e in entities_of(f)}
    assert len(touched) == 10 and all(e in top.content for e in touched)  # what the session touched
    assert "4 memories" in top.content and "Monday 01 June 2026" in top.content
    # (and nothing else: the per-entity summaries it stands for followed it, and crowded a
    # terminal's answer with "weak match" rows of the same session)
    assert len(res) == 1
    assert [m.fact_id for m in res].count(top.fact_id) == 1


@pytest.mark.parametrize("asked, on", [("what did I do yesterday", datetime(2026, 6, 2, 9)),
                                       ("what did I do last Monday", datetime(2026, 6, 8, 9)),
                                       ("what happened on 2026-06-01", datetime(2026, 6, 20, 9)),
                                       ("and 3 days ago?", datetime(2026, 6, 4, 9))])
def test_every_way_of_naming_the_day_finds_it(mem, clock, asked, on):
    sid = demo_session(mem)
    clock.now = on
    top = mem.recall(asked, limit=5)[0]
    assert whole(top) and top.fact.session_id == sid and top.relevance >= 0.70


def test_only_the_named_days_sessions_come_first(mem, clock):
    monday = demo_session(mem)
    clock.now = datetime(2026, 6, 2, 10)
    tuesday = demo_session(mem, [("Sales forecast: prophet with holiday effects beats the naive baseline.",
                                  "forecast", "discovery")], project="sales")
    clock.now = datetime(2026, 6, 3, 9)
    res = mem.recall("what did I do yesterday", limit=10)
    firsts = [m for m in res if m.score.temporal > 0]
    assert [m.fact.session_id for m in firsts] == [tuesday] and res[0].fact_id == firsts[0].fact_id
    assert monday not in {m.fact.session_id for m in res if whole(m)}
    both = mem.recall("what did I do on 2026-06-01 and 2026-06-02", limit=10)
    assert {m.fact.session_id for m in both[:2]} == {monday, tuesday} and all(whole(m) for m in both[:2])
    scores = [m.score.value for m in both[:2]]
    assert scores == sorted(scores, reverse=True)  # best first among the day's sessions


def test_a_day_without_a_session_and_a_question_without_a_day_rank_as_before(mem):
    demo_session(mem)
    assert all(m.score.temporal == 0 for m in mem.recall("what did I do on 2026-05-20", limit=10))
    plain = mem.recall("why was a feature dropped", limit=10)
    assert plain.memories and all(m.fact.kind == "memory" and m.score.temporal == 0 for m in plain)
    values = [m.score.value for m in plain]
    assert values == sorted(values, reverse=True)
    assert all(not whole(m) for m in mem.recall("what did I do today", kind="memory"))  # kind still says


def test_a_date_with_no_session_is_not_answered_by_its_numbers(mem, clock):
    """"what did I do on 2026-11-12" (no session that day) brought other days' sessions as
    strong matches "on content: 2026, 12": a date is the temporal channel's, not three words."""
    demo_session(mem)  # (Monday 01 June 2026: its summaries say "2026-06-01")
    clock.now = datetime(2026, 6, 20, 9)
    other_day = mem.recall("what did I do on 2026-06-12", limit=10)
    assert all(m.score.bm25 == 0 and m.strength != "strong" for m in other_day), other_day  # (by meaning at most)
    named = mem.recall("what did I do on 2026-06-01", limit=3)
    assert whole(named[0]) and named[0].score.temporal == 1.0
    # (a question that does not ask of the sessions finds a memory by the date it holds)
    freeze = mem.remember("the release freeze starts 2026-06-12 for the whole team")
    assert [m.fact_id for m in mem.recall("what happens on 2026-06-12", limit=3)][:1] == [freeze.fact_id]


def test_a_session_ids_hex_is_one_term_never_its_fragments(mem):
    """Every summary quotes its session's id, `slm-YYYYMMDD-<8 hex>`, and the hex was cut into
    fragments ("3d9f0a12": 3, 9, 0, 12) that matched any question with those numbers, a random
    few in each run: `benchmarks/notebook.py` gave 0.904 or 0.911 from one run to the next."""
    from slm_magic.core import text

    assert text.analyse("slm-20260601-3d9f0a12") == ["slm", "20260601", "3d9f0a12"]
    assert text.analyse("df_churn_v2 x86_64") == ["df_churn_v2", "df", "churn", "2", "x86_64", "86", "64"]
    code = mem.remember("the nightly export ran as job 3d9f0a12 and wrote 12 files")
    plain = mem.remember("the export keeps 3 days of history")
    assert [m.fact_id for m in mem.recall("job 3d9f0a12", limit=3)][:1] == [code.fact_id]  # (found by its code)
    assert {m.fact_id for m in mem.recall("3 days", limit=10)} == {plain.fact_id}  # (not by its "3")
    model = mem.settings.model  # (nor by its word pieces: two codes embed alike, as nothing)
    assert (model.encode(["job 3d9f0a12 ran"]) == model.encode(["job 77be1c05 ran"])).all()


def test_the_sql_fallback_brings_the_day_first_too(mem):
    sid = demo_session(mem)
    mem.live.degrade("test: answer from SQL")
    res = mem.recall("what did I do today", limit=3)
    assert res.retrieval_mode == "bm25_meaning_sql_fallback"
    assert whole(res[0]) and res[0].fact.session_id == sid and res[0].relevance >= 0.70


def test_the_age_gate_and_the_project_filter_still_hold(mem, clock):
    demo_session(mem)
    clock.now = datetime(2026, 8, 1, 9)  # two months later, the age gate at 30 days
    res = mem.recall("what did I do on 2026-06-01", max_age_days=30, limit=5)
    assert whole(res[0]) and res[0].relevance >= 0.70  # strong: it passes the gate
    assert all(m.relevance >= 0.70 for m in res)
    assert not any(whole(m) for m in mem.recall("what did I do on 2026-06-01", project="sales"))


def test_closing_twice_writes_no_second_whole_summary(mem):
    sid = demo_session(mem)
    assert mem.close_session(sid).summary_events_created == 0
    assert sum(1 for f in mem.browse(limit=100).facts if f.kind == "summary_event") == 0  # (browse: memories only)
    rows = mem.store.con.execute("SELECT count(*) FROM memories WHERE kind = 'summary_event' AND topic_key = ?",
                                 [day_key(datetime(2026, 6, 1)) + sid]).fetchall()
    assert rows == [(1,)]


@pytest.mark.parametrize("question", ["What did I do today?", "what did I do today about churn leakage"])
def test_a_day_s_session_is_scored_as_every_other_match_is(mem, question):
    """`rank_days` scores the day's summaries with the one per-candidate scoring `rank_index`
    uses (BM25, the n-gram channel, recency, revision): the same parts to the last bit, the
    temporal channel alone added by `days_first`."""
    from slm_magic.core import text
    from slm_magic.ranking.fusion import rank_days, rank_index
    from slm_magic.core.clock import epoch_seconds

    sid = demo_session(mem)
    now = mem.now()
    terms, qtf, qlen, _, days, *_ = mem.retrieval.analyse(question, now, "auto")
    cs = mem.index.channel_scores(terms, qtf, qlen, text.query_grams(question))
    q = mem.retrieval.question(question, now, user=mem.user_id, project=None, limit=10, kind="auto", type=None,
                               max_age_days=None, strict=True)
    day_docs = sum(mem.retrieval.day_docs(q), [])
    assert len(day_docs) == 1
    on_day = rank_days(mem.index, cs, mem.config, day_docs, now=epoch_seconds(now))
    every = rank_index(mem.index, cs, mem.config, now=epoch_seconds(now), user=mem.index.lookup_code("user", mem.user_id),
                       project=None, limit=100)
    at = list(every.doc_ids).index(day_docs[0])
    for part in ("score", "relevance", "bm25", "tfidf", "recency", "revision", "working_set"):
        assert getattr(on_day, part)[0] == getattr(every, part)[at], part
    assert mem.recall(question, limit=1)[0].fact.topic_key == day_key(datetime(2026, 6, 1)) + sid


def test_one_way_to_pick_rows_of_a_ranking():
    """`Ranked.take` picks rows by position or mask, every part with them (`subset` is gone)."""
    import numpy as np

    from slm_magic.ranking.ranked import Ranked

    r = Ranked(np.array([7, 3, 5]), *(np.array([0.9, 0.5, 0.1]) for _ in range(7)),
               related_to=np.array([0, 1, 1]), temporal=np.array([1.0, 0.0, 0.0]), older_matches=2)
    for rows, docs in ((np.array([2, 0]), [5, 7]), (np.array([True, False, True]), [7, 5])):
        got = r.take(rows)
        assert got.doc_ids.tolist() == docs and got.related_to.tolist() == [{5: 1, 7: 0}[d] for d in docs]
        assert got.temporal.tolist() == [float(d == 7) for d in docs] and got.older_matches == 2
        assert got.learned is None and got.score.tolist() == [{5: 0.1, 7: 0.9}[d] for d in docs]
    scored = r.take(np.array([1]), score=np.array([2.0]), learned=np.array([0.3]))
    assert scored.score.tolist() == [2.0] and scored.learned.tolist() == [0.3] and scored.relevance.tolist() == [0.5]
    assert not hasattr(Ranked, "subset")


# --- the days a person means: their own calendar, and spans of days ---------------------------

@pytest.fixture
def new_york(monkeypatch):
    """The machine's time zone set to New York (UTC-4 in June), as a user's laptop there has it."""
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_day_is_the_users_own_day_not_greenwichs(mem, clock, new_york):
    """A session at 21:30 in New York on Monday 1 June is 01:30 UTC on Tuesday: it was filed under
    Tuesday, so "what did I do today" asked that evening found nothing."""
    clock.now = datetime(2026, 6, 2, 1, 30)  # (UTC)
    sid = demo_session(mem)
    assert sid.startswith("slm-20260601-")
    top = mem.recall("what did I do today", limit=3)[0]
    assert whole(top) and top.fact.session_id == sid and top.fact.topic_key == day_key(datetime(2026, 6, 1)) + sid
    assert "Monday 01 June 2026" in top.content and "Tuesday" not in top.content
    clock.now = datetime(2026, 6, 2, 14)  # (10:00 on Tuesday in New York)
    assert mem.recall("what did I do yesterday", limit=3)[0].fact.session_id == sid
    assert not any(m.score.temporal for m in mem.recall("what did I do today", limit=10))
    from slm_magic.results.display import when_text
    assert when_text(datetime(2026, 6, 2, 1, 30)) == "2026-06-01 21:30"  # (what the views show)


def test_a_span_of_days_brings_each_of_its_sessions(mem, clock):
    """"last week", "this week", "in June", "since Wednesday": each day's sessions of the span
    first, none from outside it."""
    days = {}
    for day in (datetime(2026, 6, 3, 9), datetime(2026, 6, 5, 9), datetime(2026, 6, 9, 9), datetime(2026, 5, 20, 9)):
        clock.now = day
        days[day.date()] = demo_session(mem, [(f"Worked on the forecast of {day:%A %d %B}.", "forecast", "discovery")],
                                        project="sales")
    clock.now = datetime(2026, 6, 10, 12)  # (a Wednesday)
    by_day = {sid: d for d, sid in days.items()}

    def sessions_first(question: str) -> set:
        res = mem.recall(question, limit=10)
        firsts = [m for m in res if m.score.temporal > 0]
        assert all(whole(m) for m in firsts) and res[:len(firsts)] == firsts, question
        return {by_day[m.fact.session_id].isoformat() for m in firsts}

    assert sessions_first("what did I do last week") == {"2026-06-03", "2026-06-05"}
    assert sessions_first("what did I do this week") == {"2026-06-09"}
    assert sessions_first("what did I work on in June?") == {"2026-06-03", "2026-06-05", "2026-06-09"}
    assert sessions_first("what did I do last month") == {"2026-05-20"}
    assert sessions_first("anything since Friday?") == {"2026-06-05", "2026-06-09"}
    assert sessions_first("what did I do on June 5th") == {"2026-06-05"}
    assert sessions_first("what did I do in the past 3 days") == {"2026-06-09"}
    assert sessions_first("and three weeks ago?") == {"2026-05-20"}
    assert sessions_first("what did I do two weeks ago") == set()


@pytest.mark.parametrize("question, first, last, n", [
    ("last week", "20260525", "20260531", 7), ("this week", "20260601", "20260601", 1),
    ("two weeks ago", "20260518", "20260524", 7), ("the past week", "20260526", "20260601", 7),
    ("in the last 3 days", "20260529", "20260601", 4), ("last month", "20260501", "20260531", 31),
    ("in October", "20251001", "20251031", 31), ("during May 2026", "20260501", "20260531", 31),
    ("the day before yesterday", "20260530", "20260530", 1), ("last weekend", "20260530", "20260531", 2),
    ("what did I do this morning", "20260601", "20260601", 1),
    ("between May 1 and May 5", "20260501", "20260505", 5), ("from Thursday to Saturday", "20260528", "20260530", 3),
    ("what did I do last night", "20260531", "20260531", 1),
    ("on 12 May", "20260512", "20260512", 1), ("May 12th", "20260512", "20260512", 1),
    ("since 2026-05-29", "20260529", "20260601", 4), ("a week ago", "20260525", "20260531", 7),
])
def test_the_days_each_phrase_names(question, first, last, n):
    from slm_magic.core.temporal import temporal_terms

    got = temporal_terms(question, datetime(2026, 6, 1, 12))  # (a Monday)
    assert (got[0], got[-1], len(got)) == (first, last, n)


@pytest.mark.parametrize("question", ["this may be wrong", "it may 12 times", "2 may fail", "the mar of the join",
                                      "weekends are quiet", "version 2 of the model", "in sep=';' files"])
def test_words_that_only_look_like_dates_name_no_day(question):
    from slm_magic.core.temporal import temporal_terms

    assert temporal_terms(question, datetime(2026, 6, 1, 12)) == []


def test_a_date_in_words_asked_of_the_sessions_is_not_its_numbers(mem, clock):
    demo_session(mem)  # (Monday 01 June 2026)
    clock.now = datetime(2026, 6, 20, 9)
    other_day = mem.recall("what did I do on June 12", limit=10)
    assert all(m.score.bm25 == 0 and not m.matched for m in other_day), other_day
    assert whole(mem.recall("what did I do on June 1st", limit=3)[0])


def test_a_day_still_in_an_open_session_is_answered_by_what_was_written(mem, clock):
    """"what did I do today" asked in the session still under way found nothing: a day had an
    answer only once its session was closed and summarised."""
    sid = mem.session_init(query="churn").session_id
    kept = [mem.remember(text, session_id=sid, tags=tags).fact_id for text, tags, _ in DEMO[:2]]
    clock.now = datetime(2026, 6, 1, 17)
    res = mem.recall("what did I do today", session_id=sid, limit=10)
    assert {m.fact_id for m in res} == set(kept) and all(m.score.temporal == 1.0 for m in res)
    assert {m.fact_id for m in mem.recall("what did I do today", kind="memory", limit=10)} == set(kept)
    assert mem.recall("what did I do today", kind="summary_event", limit=10).memories == []  # (kind still says)
    clock.now = datetime(2026, 6, 2, 9)  # (the next morning, the session still open: within the timeout)
    assert {m.fact_id for m in mem.recall("what did I do yesterday", limit=10)} == set(kept)
    assert mem.recall("what did I do today", limit=10).memories == []
    mem.close_session(sid)  # (once closed, its summary stands for them)
    closed = mem.recall("what did I do yesterday", limit=10)
    assert whole(closed[0]) and not {m.fact_id for m in closed if m.score.temporal} & set(kept)


def test_the_file_answers_a_days_open_session_as_the_index_does(tmp_path, clock):
    db = str(tmp_path / "m.duckdb")
    with Memory(db, clock=clock, semantic=False) as mem:
        sid = mem.session_init(query="churn").session_id
        kept = {mem.remember(text, session_id=sid, tags=tags).fact_id for text, tags, _ in DEMO[:3]}
        in_process = mem.recall("what did I do today", limit=10)
        mem.live.degrade("a test: the index is taken away")
        from_file = mem.recall("what did I do today", limit=10)
    assert from_file.degraded_mode and "sql" in from_file.retrieval_mode
    assert {m.fact_id for m in from_file} == {m.fact_id for m in in_process} == kept
    assert all(m.score.temporal == 1.0 for m in from_file)


def test_a_question_about_something_else_that_mentions_a_time_ranks_by_its_words(mem, clock):
    """"why does the left join drop rows today" is about the join, not about the day: the
    day's sessions and what it wrote do not come first (in a store written today they would
    be everything, in the order of their age)."""
    sid = demo_session(mem)
    mem.remember("the join keeps every order once customer_id is deduplicated", tags="join")
    res = mem.recall("why does the left join drop rows today", limit=5)
    assert res[0].fact.content.startswith("The left join of orders") and res[0].score.temporal == 0
    assert all(m.fact.kind == "memory" and m.score.temporal == 0 for m in res)
    assert whole(mem.recall("what did I do today", limit=5)[0])  # (a question about the day still is)
    assert sid


def test_a_question_about_a_time_is_answered_from_those_days_alone(mem, clock):
    """"anything since Monday?" brought another Monday's summary as a strong match on the word
    "monday", and "what did I do on December 5th" found nothing while "today" found six
    memories: the date's words were taken out, and no word was left to rank by."""
    monday = demo_session(mem)  # (Monday 01 June)
    clock.now = datetime(2026, 6, 9, 10)  # (a Tuesday: "since Monday" is yesterday and today)
    sid = mem.session_init(query="forecast").session_id
    kept = mem.remember("Weekly sales: Monday is the peak.", session_id=sid, tags="forecast").fact_id
    for question in ("anything since Monday?", "what did I do on June 9th", "what did I do 0 days ago",
                     "what did I do on 2026-06-09", "what did I work on this week"):
        res = mem.recall(question, limit=10)
        assert [m.fact_id for m in res] == [kept], question
    assert [m.fact.session_id for m in mem.recall("what did I do last week", limit=10)] == [monday]
    mem.recall("what did I do today", session_id=sid)  # (a question about a time is no judgement
    mem.close_session(sid)                               # of what it showed: nothing counts as ignored)
    assert mem.feedback_count() == 0


def test_work_after_midnight_is_that_days_even_once_its_session_is_closed(mem, clock):
    """A session opened in the afternoon and continued the next morning is filed under its
    first day when closed: the next day's part went missing from "today"."""
    clock.now = datetime(2026, 6, 1, 14)
    sid = mem.session_init(query="churn").session_id
    mem.remember("afternoon: the join drops rows", session_id=sid)
    clock.now = datetime(2026, 6, 2, 9)
    morning = mem.remember("morning: deduplicated customer_id before the join", session_id=sid).fact_id
    clock.now = datetime(2026, 6, 2, 12)
    mem.close_session(sid)
    today = mem.recall("what did I do today", limit=10)
    assert [m.fact_id for m in today] == [morning]
    both = mem.recall("what did I do in the past 2 days", limit=10)
    assert whole(both[0]) and morning not in [m.fact_id for m in both]  # (the summary stands for both days)


@pytest.mark.parametrize("question", ["summarize yesterday", "recap of yesterday", "what did we discuss yesterday",
                                      "what did I fix yesterday", "show me yesterday's notes",
                                      "what did I work on yesterday morning", "remind me what I did yesterday",
                                      "where did I leave off yesterday", "what did I debug yesterday"])
def test_the_ways_people_ask_about_a_day_each_bring_it(mem, clock, question):
    sid = demo_session(mem)
    clock.now = datetime(2026, 6, 2, 9)
    top = mem.recall(question, limit=5)[0]
    assert whole(top) and top.fact.session_id == sid, question


def test_a_question_about_sessions_naming_a_topic_brings_no_day_of_unrelated_memories(mem, clock):
    """"which session fixed the join today?" after a bulk import of the day's notes: the import
    came first, every row a "strong match" on the day."""
    mem.remember_many([{"content": f"imported note {i} about store {i} footfall"} for i in range(300)])
    sid = demo_session(mem)
    res = mem.recall("which session fixed the join today?", limit=5)
    assert res[0].fact.session_id == sid and all(m.fact.kind == "summary_event" for m in res)
    assert mem.recall("what did I do today", type="summary", limit=20).memories  # (the type filter holds:
    assert all(m.fact.type == "summary" for m in mem.recall("what did I do today", type="summary", limit=20))


def test_from_is_not_since(mem, clock):
    from slm_magic.core.temporal import temporal_terms

    wednesday = datetime(2026, 6, 10, 12)
    assert temporal_terms("anything from last week?", wednesday) == [f"202606{d:02d}" for d in range(1, 8)]
    assert temporal_terms("my notes from yesterday", wednesday) == ["20260609"]
    assert len(temporal_terms("since last week", wednesday)) == 10


def test_a_date_alone_that_names_no_day_stays_a_word(mem):
    """"dec 12" alone is not taken for a date, and so is not taken out of the question either."""
    from slm_magic.core.temporal import without_days

    assert without_days("what did I do dec 12", datetime(2026, 6, 1)) == "what did I do dec 12"
    assert without_days("what did I do on dec 12", datetime(2026, 6, 1)).split() == ["what", "did", "I", "do"]


def test_a_memory_revised_on_a_day_is_that_days_work_too(mem, clock):
    """A topic revised today left no trace in "what did I do today": the memory was written on
    another day."""
    demo_session(mem)  # (Monday 01 June, closed)
    old = mem.remember("the holdout is March", topic_key="holdout").fact_id
    clock.now = datetime(2026, 6, 3, 10)
    sid = mem.session_init(query="holdout").session_id
    revised = mem.remember("the holdout is April: March had the outage", topic_key="holdout", session_id=sid)
    assert revised.fact_id == old and revised.revision_count == 1
    assert [m.fact_id for m in mem.recall("what did I do today", limit=10)] == [old]


def test_a_question_about_sessions_naming_a_topic_finds_it_in_the_session_still_open(mem, clock):
    """"which session fixed the join today?" with the session still open: no summary yet, and
    its memories came only to a question that asks nothing else, so nothing came back."""
    sid = mem.session_init(query="churn").session_id
    join = mem.remember("fixed the join: deduplicated customer_id first", session_id=sid).fact_id
    mem.remember("the seed is 42", session_id=sid)
    assert [m.fact_id for m in mem.recall("which session fixed the join today?", limit=5)] == [join]


def test_a_type_asked_for_holds_in_a_question_about_a_time(mem, clock):
    sid = mem.session_init(query="churn").session_id
    decided = mem.remember("use the March holdout", type="decision", session_id=sid).fact_id
    mem.remember("the seed is 42", session_id=sid)
    assert [m.fact_id for m in mem.recall("what did I do today", type="decision", limit=5)] == [decided]
    mem.close_session(sid)
    assert all(m.fact.type == "summary" for m in mem.recall("join", type="summary", limit=5))
    assert mem.recall("what did I do today", type="summary", limit=5).memories


@pytest.mark.parametrize("question", ["what did I do?", "what was I working on?", "what have I been up to",
                                      "what did I do recently", "anything lately?"])
def test_what_was_i_working_on_names_the_days_just_past(mem, clock, question):
    """The first thing a person back from a weekend asks found nothing: no day was named."""
    sid = demo_session(mem)  # (Monday 01 June)
    clock.now = datetime(2026, 6, 3, 9)
    res = mem.recall(question, limit=5)
    assert [m.fact.session_id for m in res] == [sid] and whole(res[0])
    clock.now = datetime(2026, 6, 20, 9)  # (nothing in the last seven days: nothing, said so)
    assert mem.recall(question, limit=5).memories == []


@pytest.mark.parametrize("question", ["what did I do?", "what was I working on?", "what was I working on",
                                      "what have I done so far", "what was I up to",
                                      "what was I working on 10 minutes ago", "what did I do in the last hour",
                                      "anything in the past 2 hours", "what did I do in 2026"])
def test_what_was_i_working_on_finds_the_session_still_open(mem, clock, question):
    """It found only closed sessions' summaries: today's work, in the session still open,
    came back to "what did I do today" and "recently" but not to these."""
    sid = mem.session_init(query="churn").session_id
    written = {mem.remember(t, session_id=sid).fact_id for t in ("the left join drops 3% of rows",
                                                                 "tenure leaks the label")}
    assert {m.fact_id for m in mem.recall(question, limit=5)} == written
    mem.live.degrade("a test: the file answers")
    assert {m.fact_id for m in mem.recall(question, limit=5)} == written


@pytest.mark.parametrize("question", ["working", "what is it?", "what did we decide about the join?",
                                      "what is the most recent churn rate", "what was the churn rate in 2026"])
def test_a_question_that_says_more_is_not_taken_for_the_days_just_past(question):
    from slm_magic.core.temporal import recent_days

    assert recent_days(question, datetime(2026, 6, 1)) == []


@pytest.mark.parametrize("question", ["what was the churn rate in 2026", "which model ran in the last hour of the job",
                                      "how many rows have I cleaned so far"])
def test_a_question_about_something_else_naming_a_time_is_not_about_the_time(question):
    from slm_magic.core.temporal import asks_what_was_done, temporal_terms

    assert temporal_terms(question, datetime(2026, 6, 1)) and not asks_what_was_done(question)


def test_recent_alone_names_no_days():
    """"my recent Facebook Live session" is a question about a session, not about the last week."""
    from slm_magic.core.temporal import temporal_terms

    assert temporal_terms("comments on my recent live session", datetime(2026, 6, 1)) == []
