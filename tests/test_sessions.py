"""API A: session_init, recall/remember with a session, close_session."""

import re
from datetime import datetime

import pytest

from slm_magic import InvalidInput, Memory
from slm_magic.sessions.paths import query_from_path

DOCUMENTED = {"success", "session_id", "context", "memories", "memory_count", "core_memory", "degraded_mode",
              "retrieval_mode", "calibration_status", "calibration_id", "answer_confidence", "abstained",
              "abstention_reason", "learning"}


def test_session_init_returns_exactly_the_documented_fields(mem):
    init = mem.session_init("~/projects/churn")
    dumped = init.model_dump()
    assert set(dumped) == DOCUMENTED
    assert set(dumped["learning"]) == {"feedback_signals", "phase", "status"}
    assert init.calibration_status == "uncalibrated"
    assert init.calibration_id is None and init.answer_confidence is None


def test_query_is_derived_from_the_project_path(mem):
    assert query_from_path("~/projects/churn-model") == "churn model"
    assert query_from_path("/home/ana/work/telco_churn/notebooks") == "telco churn"  # ana: a person, not a topic
    mem.remember("the churn model uses a 90 day window")
    mem.remember("sales forecast with prophet")
    init = mem.session_init(project_path="~/projects/churn-model")
    assert [m.content for m in init.memories] == ["the churn model uses a 90 day window"]
    assert not init.abstained


def test_session_ids_are_fresh_and_well_formed(mem):
    a, b = mem.session_init(), mem.session_init()
    assert re.fullmatch(r"slm-20260601-[0-9a-f]{8}", a.session_id)
    assert a.session_id != b.session_id


def test_degraded_mode_is_honest(mem):
    mem.remember("a note on plotting colours")
    mem.remember("the churn model uses a 90 day window")
    normal = mem.session_init(query="churn window")
    assert normal.degraded_mode is False and normal.retrieval_mode == "full_bm25_tfidf_meaning"
    def out_of_memory(*args):
        raise MemoryError("the machine ran out of memory")

    mem.index.channel_scores = out_of_memory  # the machine fails, not the code
    broken = mem.session_init(query="churn window")
    assert broken.degraded_mode is True and broken.retrieval_mode == "bm25_meaning_sql_fallback"
    assert [m.content for m in broken.memories] == ["the churn model uses a 90 day window"]
    with Memory(":memory:", ngram_weight=0.0) as bm25_only:  # a channel switched off is said too
        bm25_only.remember("the churn model uses a 90 day window")
        init = bm25_only.session_init(query="churn window")
        assert init.retrieval_mode == "bm25_meaning_in_process" and not init.degraded_mode
    with Memory(":memory:", semantic=False) as words_only:  # the meaning channel switched off: said, not degraded
        words_only.remember("the churn model uses a 90 day window")
        init = words_only.session_init(query="churn window")
        assert init.retrieval_mode == "full_bm25_tfidf" and not init.degraded_mode
    with Memory(":memory:", embedding_model="/nonexistent/model.npz") as no_model:  # configured, could not run
        no_model.remember("the churn model uses a 90 day window")
        init = no_model.session_init(query="churn window")
        assert init.retrieval_mode == "full_bm25_tfidf" and init.degraded_mode
        assert [m.content for m in init.memories] == ["the churn model uses a 90 day window"]
        assert "did not load" in no_model.recall("churn").degraded_reason


def test_core_memories_are_merged_and_listed(mem):
    pinned = mem.remember("always fix the random seed to 42", core=True)
    mem.remember("the churn model uses a 90 day window")
    init = mem.session_init(query="churn window")
    assert [m.fact_id for m in init.core_memory] == [pinned.fact_id]
    assert pinned.fact_id in [m.fact_id for m in init.memories]
    assert [m.is_core for m in init.memories] == [False, True]
    assert init.memory_count == 2


def test_age_gate_keeps_close_old_matches_and_drops_weak_old_ones(words_mem, clock):
    mem = words_mem  # (on the lexical scale; tests/test_meaning.py: the gate reads the fused relevance)
    clock.now = datetime(2026, 1, 1)
    strong_old = mem.remember("seasonal decomposition of the weekly sales forecast")
    weak_old = mem.remember("sales numbers for the board deck")
    clock.now = datetime(2026, 5, 30)
    weak_fresh = mem.remember("sales call notes from the client visit")
    clock.now = datetime(2026, 6, 1)
    q = "seasonal decomposition weekly sales forecast"
    res = {m.fact_id: m.relevance for m in mem.recall(q)}
    assert res[strong_old.fact_id] >= 0.70 and res[weak_old.fact_id] < 0.70 and res[weak_fresh.fact_id] < 0.70
    kept = {m.fact_id for m in mem.session_init(query=q, max_age_days=30).memories}
    assert kept == {strong_old.fact_id, weak_fresh.fact_id}
    every = {m.fact_id for m in mem.session_init(query=q, max_age_days=0).memories}
    assert every == {strong_old.fact_id, weak_old.fact_id, weak_fresh.fact_id}


def test_context_block(mem, clock):
    empty = mem.session_init(query="anything")
    assert empty.context.startswith("# Relevant Memory Context\n")
    assert empty.abstained and empty.abstention_reason
    mem.remember("the churn model uses a 90 day window")
    mem.remember("churn labels come from the billing table", core=True)
    init = mem.session_init(query="churn model")
    bullets = [line for line in init.context.splitlines() if line.startswith("- ")]
    assert len(bullets) == init.memory_count == 2
    assert all(line.endswith("(2026-06-01)") for line in bullets)


def test_working_set_lifts_later_recalls_boundedly_and_stays_in_its_session(mem):
    mem.remember_many({"content": f"churn model note number {i}"} for i in range(5))
    a = mem.session_init(query="x").session_id
    b = mem.session_init(query="x").session_id
    first = mem.recall("churn model", session_id=a, limit=2)
    assert all(m.working_set == 0 for m in first)
    shown = {m.fact_id for m in first}
    for _ in range(10):
        later = mem.recall("churn model", session_id=a, limit=5)
    boosts = {m.fact_id: m.working_set for m in later}
    assert all(boosts[f] > 0 for f in shown)
    assert max(boosts.values()) <= mem.config.working_set_cap + 1e-12
    assert all(m.working_set == 0 for m in mem.recall("churn model", session_id=b, limit=5))
    assert all(m.working_set == 0 for m in mem.recall("churn model", limit=5))


@pytest.mark.parametrize("prefix", ["http:", "mcp:", "cli:", "probe:"])
def test_synthetic_session_ids_are_accepted_but_never_build_a_working_set(mem, prefix):
    mem.remember("the churn model uses a 90 day window")
    sid = f"{prefix}request-1"
    fact = mem.remember("churn is 90 days without login", session_id=sid)
    for _ in range(3):
        res = mem.recall("churn", session_id=sid)
    assert fact.session_id == sid
    assert all(m.working_set == 0 for m in res)
    assert mem.store.sessions.working_set(sid) == []


def test_learning_phases_follow_the_signal_count(mem):
    fact = mem.remember("the churn model uses a 90 day window")
    assert mem.session_init().learning.phase == 1
    for _ in range(50):
        mem.feedback(fact.fact_id, "up")
    assert mem.session_init().learning.model_dump() == {"feedback_signals": 50, "phase": 2, "status": "active learning"}
    for _ in range(150):
        mem.feedback(fact.fact_id, "down")
    assert mem.session_init().learning.phase == 3
    with pytest.raises(InvalidInput):
        mem.feedback(fact.fact_id, "sideways")
    with pytest.raises(InvalidInput):
        mem.feedback("nope", "up")


def test_close_session_writes_one_summary_per_entity_once(mem, clock):
    clock.now = datetime(2026, 6, 16, 10)  # a Tuesday
    sid = mem.session_init(query="churn").session_id
    mem.remember("the join on customer_id drops 3% of rows", session_id=sid, tags="data-quality")
    mem.remember("customer_id repeats in the March extract", session_id=sid, tags="data-quality")
    mem.remember("unrelated: lunch at noon", session_id="other")
    closed = mem.close_session()  # no id: the most recent session
    assert closed.success and closed.session_id == sid
    events = mem.store.sessions.summarised_entities(sid)
    assert sorted(events) == ["#data-quality", "*", "customer_id"]  # (*: the whole session's summary)
    assert closed.summary_events_created == 3
    again = mem.close_session(sid)
    assert again.summary_events_created == 0 and again.success

    clock.now = datetime(2026, 6, 19, 9)  # Friday
    by_id = mem.recall(f"what did I do in session {sid}")
    assert by_id.memories and all(sid in m.content for m in by_id.memories[:2])
    by_day = mem.recall("what did I do last Tuesday")
    assert by_day.memories and by_day.memories[0].fact.kind == "summary_event"
    assert "customer_id" in " ".join(m.content for m in by_day.memories)


def test_a_session_left_open_is_closed_and_summarised_when_a_later_one_opens(mem, clock):
    """A kernel killed (or a notebook never closed) left its session open for good: never
    summarised, so "what did I do on Tuesday" found nothing of it. A new session closes the
    user's sessions idle past the timeout, as %slm_close would, ended at their last activity."""
    clock.now = datetime(2026, 6, 16, 10)  # a Tuesday
    left = mem.session_init(origin="/work/churn.ipynb", reuse=True).session_id
    mem.remember("the join on customer_id drops 3% of rows", session_id=left, tags="data-quality")
    clock.now = datetime(2026, 6, 16, 11)
    live = mem.session_init(origin="/work/other.ipynb", reuse=True).session_id  # (active an hour ago: stays)
    assert not mem.session_is_closed(left)
    clock.now = datetime(2026, 6, 18, 9)  # Thursday: both idle past the 24 hours
    mem.session_init(origin="/work/forecast.ipynb", reuse=True)
    assert mem.session_is_closed(left) and mem.session_is_closed(live)
    assert mem.store.sessions.session(left)["ended_at"] == datetime(2026, 6, 16, 10)  # (its last activity)
    assert "customer_id" in mem.store.sessions.summarised_entities(left)
    by_day = mem.recall("what did I do last Tuesday")
    assert by_day.memories and "customer_id" in " ".join(m.content for m in by_day.memories)


def test_a_session_still_writing_is_not_stale_and_a_bad_one_blocks_no_opening(mem, clock):
    """A session is idle by its newest memory too (as `%slm_start` continuing it reads), so a
    kernel that opened yesterday and wrote this morning keeps its session when another notebook
    opens. A session whose summary cannot be written (a label past the title's limit) is ended
    with a notice, and every later opening works."""
    clock.now = datetime(2026, 6, 15, 9)
    busy = mem.session_init(origin="/work/a.ipynb", reuse=True).session_id
    long_name = "x_" + "y" * 1_200
    mem.remember(f"the column {long_name} is always empty", session_id=busy)
    clock.now = datetime(2026, 6, 16, 8)
    mem.remember("the join on customer_id drops 3% of rows", session_id=busy)
    clock.now = datetime(2026, 6, 16, 9, 30)
    mem.session_init(origin="/work/b.ipynb", reuse=True)
    assert not mem.session_is_closed(busy)
    clock.now = datetime(2026, 6, 18, 9)  # (now idle past the timeout: closed, its summary too long for a title)
    mem.session_init(origin="/work/c.ipynb", reuse=True)
    assert mem.session_is_closed(busy)
    assert mem.store.sessions.session(busy)["ended_at"] == datetime(2026, 6, 16, 8)
    assert all(len(m.fact.title or "") <= 1_000 for m in mem.recall("what did I do on 2026-06-15", limit=20))
    assert mem.session_init(origin="/work/d.ipynb", reuse=True).is_new  # (nothing blocks an opening)


def test_closing_again_keeps_the_summary_the_user_wrote(mem, clock):
    """`%slm_close --summary ...`, then `slm-magic close` (the most recent session: the same
    one) replaced the user's summary with a generated one, and said it closed the session."""
    sid = mem.session_init(query="churn").session_id
    mem.remember("the join on customer_id drops 3% of rows", session_id=sid, tags="data-quality")
    first = mem.close_session(sid, summary="Churn EDA: the join loses 3% of customers")
    assert first.summary_events_created > 0 and not first.already_closed
    for _ in range(2):
        again = mem.close_session()
        assert again.session_id == sid and again.already_closed and again.summary_events_created == 0
        assert str(again) == f"session {sid} was already closed: nothing new to summarise"
    summaries = {s.session_id: s for s in mem.mem_session_start(mem.user_id).sessions_context}
    assert summaries[sid].summary == "Churn EDA: the join loses 3% of customers"
    assert not summaries[sid].is_auto_generated
    # (a generated one is written anew when the session closed again holds more)
    quiet = mem.session_init(query="pricing").session_id
    mem.remember("prices are in cents", session_id=quiet, tags="pricing")
    mem.close_session(quiet)
    mem.remember_many([{"content": "refunds are negative prices", "session_id": quiet, "tags": "pricing"}])
    mem.close_session(quiet)
    assert {s.session_id: s.summary for s in mem.mem_session_start(mem.user_id).sessions_context}[quiet] \
        .startswith("2 memories")
    # (the user's own words, given again, replace theirs)
    mem.close_session(sid, summary="Churn EDA, day one")
    assert {s.session_id: s.summary for s in mem.mem_session_start(mem.user_id).sessions_context}[sid] == \
        "Churn EDA, day one"


def test_close_session_with_nothing_to_close(mem):
    assert mem.close_session().success is False
    sid = mem.session_init().session_id
    assert mem.close_session(sid).summary_events_created == 0


def test_bad_arguments_are_clear_errors(mem):
    with pytest.raises(InvalidInput):
        mem.session_init(max_results=-1)
    with pytest.raises(InvalidInput):
        mem.session_init(max_age_days="30")
    with pytest.raises(InvalidInput):
        mem.session_init(project_path=3)
    with pytest.raises(InvalidInput):
        mem.close_session(session_id=None)


def test_working_set_survives_a_new_kernel(db_path, clock):
    with Memory(db_path, clock=clock) as m:
        m.remember_many({"content": f"churn model note number {i}"} for i in range(5))
        sid = m.session_init(query="x").session_id
        shown = [r.fact_id for r in m.recall("churn model", session_id=sid, limit=2)]
    with Memory(db_path, clock=clock) as m:  # another process would see the same file
        again = {r.fact_id: r.working_set for r in m.recall("churn model", session_id=sid, limit=5)}
    assert all(again[f] > 0 for f in shown)
    assert sum(1 for v in again.values() if v > 0) == len(shown)


# --- a session opened without a question (issue 25, point 11) ----------------------------------

def test_a_path_without_words_gives_no_question():
    for path in ("/home/ana/work/Untitled.ipynb", "/home/ana/notebooks/Untitled3.ipynb", "/tmp/work/2024/",
                 "C:\\Users\\ana\\Documents\\Untitled-Copy1.ipynb", "~/work", "/mnt/zed/notebooks/x.ipynb"):
        assert query_from_path(path, ignore={"zed"}) == "", path
    assert query_from_path("/home/ana/work/churn/eda_leakage.ipynb") == "eda leakage churn"
    assert query_from_path("/srv/zed/df_orders_v2", ignore={"zed"}) == "df orders v2 srv"


def test_a_session_opened_without_a_question_shows_what_is_pinned_and_newest(mem, clock):
    clock.now = datetime(2026, 4, 1)
    old = mem.remember("a note from april on the sales forecast")
    clock.now = datetime(2026, 5, 30)
    pinned = mem.remember("always fix the random seed to 42", core=True)
    clock.now = datetime(2026, 6, 1)
    newer = [mem.remember(f"finding {i} on the churn model") for i in range(3)]
    init = mem.session_init(max_results=2)  # notebook B, %slm_start: no question, no path
    assert init.opened_without_question and init.query == ""
    assert not init.abstained and init.abstention_reason is None  # it does not abstain
    assert [m.fact_id for m in init.memories] == [pinned.fact_id, newer[2].fact_id, newer[1].fact_id]
    assert old.fact_id not in {m.fact_id for m in init.memories}  # (older than the age gate)
    assert "No question was given" in init.message and init.message in " ".join(init.context.split())
    assert set(init.model_dump()) == DOCUMENTED  # the new fields stay out of the documented shape
    untitled = mem.session_init(project_path="/home/ana/work/Untitled.ipynb", max_age_days=0, max_results=10)
    assert untitled.opened_without_question and not untitled.abstained
    assert old.fact_id in {m.fact_id for m in untitled.memories} and untitled.memory_count == 5


def test_a_notebook_whose_name_has_words_asks_them(mem):
    mem.remember("the leakage check on the churn features found tenure_days")
    mem.remember("sales forecast with prophet")
    init = mem.session_init(project_path="/home/ana/work/churn/leakage.ipynb")
    assert not init.opened_without_question and init.query == "leakage churn" and init.message is None
    assert [m.content for m in init.memories] == ["the leakage check on the churn features found tenure_days"]


def test_a_notebook_whose_name_matches_nothing_shows_what_is_newest(mem):
    """`%slm_start` in /tmp/nc1/w/nb1.ipynb asked "nb1 nc1": no memory says that, and the
    session showed nothing, not even what this notebook had just remembered."""
    note = mem.remember("the parquet files are partitioned by month")
    init = mem.session_init(project_path="/tmp/nc1/w/nb1.ipynb")
    assert init.opened_without_question and not init.abstained and init.abstention_reason is None
    assert [m.fact_id for m in init.memories] == [note.fact_id]
    assert init.message.startswith("No memory matches this project's name (nb1 nc1): these are your newest")
    asked = mem.session_init(project_path="/tmp/nc1/w/nb1.ipynb", query="nb1 nc1")  # asked: an honest nothing
    assert asked.abstained and not asked.memories and asked.message is None


def test_a_session_without_a_question_on_an_empty_memory_says_there_is_nothing(mem):
    init = mem.session_init()
    assert init.opened_without_question and init.nothing_stored and init.abstained
    assert init.abstention_reason.startswith("no memories yet") and init.memory_count == 0
