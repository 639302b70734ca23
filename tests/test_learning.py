"""The learning loop and the calibration: signals (explicit and implicit), the three phases,
the stored model and its fallback, and calibrated abstention."""

import json
from datetime import timedelta

import pytest

from slm_magic import Memory
from slm_magic.errors import InvalidInput

TOPICS = ["churn", "forecast", "join", "leakage", "holiday", "threshold", "outlier", "sampling", "drift", "label"]


def signals(mem, session_id=None):
    return mem.store.con.execute(
        "SELECT signal, value, query, rank, session_id FROM feedback "
        + ("WHERE session_id = ? " if session_id else "") + "ORDER BY created_at, signal",
        [session_id] if session_id else []).fetchall()


@pytest.fixture
def corpus(mem):
    """Per topic, one memory that answers questions about it and two that only mention it."""
    useful, noise = {}, {}
    for t in TOPICS:
        useful[t] = mem.remember(f"decision on {t}: the {t} analysis settled it, {t} handled in the pipeline").fact_id
        noise[t] = [mem.remember(f"{t} was mentioned in passing while talking about {other}").fact_id
                    for other in ("lunch", "holidays plans")]
    return useful, noise


def simulate(mem, useful, rounds):
    """A user who gives 👍 to the memory that answers and 👎 to the rest of what is shown."""
    for i in range(rounds):
        t = TOPICS[i % len(TOPICS)]
        q = f"what did we decide about {t}"
        for rank, m in enumerate(mem.recall(q, limit=3), start=1):
            mem.feedback(m.fact_id, "up" if m.fact_id == useful[t] else "down", query=q, rank=rank)


def test_explicit_feedback_is_stored_with_its_context(mem, corpus):
    useful, _ = corpus
    sid = mem.session_init(max_results=0).session_id
    mem.feedback(useful["churn"], "up", session_id=sid, query="churn decision", rank=2)
    assert signals(mem) == [("up", 1.0, "churn decision", 2, sid)]
    with pytest.raises(InvalidInput, match="signal must be one of"):
        mem.feedback(useful["churn"], "sideways")
    with pytest.raises(InvalidInput, match="no memory"):
        mem.feedback("nope", "up")
    assert mem.feedback_count() == 1


def test_implicit_signals_from_what_the_user_does(mem, corpus, clock):
    useful, noise = corpus
    sid = mem.session_init(max_results=0).session_id
    for _ in range(3):
        shown = [m.fact_id for m in mem.recall("churn decision", session_id=sid, limit=3)]
    assert set(shown) == {useful["churn"], *noise["churn"]}
    mem.pin(useful["churn"])  # pinned after being shown: useful
    mem.revise(noise["churn"][0], content="churn was mentioned in passing; revised")
    # a remember of the same session that repeats a shown memory's words "uses" it
    mem.remember("decision on churn: the churn analysis settled it, churn handled in the pipeline, confirmed",
                 session_id=sid)
    mem.close_session(sid)  # noise["churn"][1]: shown three times, never useful: a weak negative
    got = {(s, v) for s, v, *_ in signals(mem, sid)}
    assert ("pinned", 1.0) in got and ("revised", 0.5) in got and ("used", 0.5) in got
    assert ("ignored", -0.25) in got
    rows = signals(mem, sid)
    assert all(q == "churn decision" and r is not None for _, _, q, r, _ in rows)  # with what was shown, where
    ignored = mem.store.con.execute("SELECT fact_id FROM feedback WHERE signal = 'ignored'").fetchall()
    assert ignored == [(noise["churn"][1],)]  # the others had positive signals


def test_a_memory_is_used_by_what_the_new_one_says_not_by_shared_labels(mem):
    """A note about the office move, filed under the same project and tags as a join finding
    the session had shown, counted as "using" that finding: tags and project are on every
    memory of a project, and 591 such signals taught the learned ranker to bury exact answers."""
    finding = mem.remember("The left join of orders on customer_id drops 3% of rows: 412 customers have no account.",
                           project="churn", tags=["data-quality", "join"])
    sid = mem.session_init(max_results=0).session_id
    assert [m.fact_id for m in mem.recall("rows dropped in the join", session_id=sid)] == [finding.fact_id]
    mem.remember("The office moves to building C next month; bring badges.", project="churn",
                 tags=["data-quality", "join"], session_id=sid)
    assert [s for s, *_ in signals(mem, sid)] == []
    short = mem.remember("churn label: 90 days", project="churn", tags=["churn"])  # (its labels repeat its word)
    assert short.fact_id in [m.fact_id for m in mem.recall("churn label", session_id=sid)]
    mem.remember("the churn dashboard moved to grafana last week", project="churn", session_id=sid)
    assert [s for s, *_ in signals(mem, sid)] == []
    mem.remember("the left join drops rows: 412 customers have no account, so orders lose 3%", session_id=sid)
    assert [s for s, *_ in signals(mem, sid)] == ["used"]  # (what it says repeats the finding)


def test_synthetic_sessions_give_no_implicit_signals(mem, corpus):
    useful, _ = corpus
    for sid in ("http:agent-1", "mcp:tool", "cli:run", "probe:x"):
        mem.recall("churn decision", session_id=sid)
        mem.pin(useful["churn"])
        mem.pin(useful["churn"], False)
        mem.close_session(sid)
    assert mem.feedback_count() == 0


def test_phase_two_lifts_what_was_useful_with_a_bounded_prior(mem, corpus):
    useful, noise = corpus
    simulate(mem, useful, 17)  # 51 signals
    status = mem.learning_status()
    assert status.phase == 2 and status.ranking == "usefulness prior" and status.status == "active learning"
    res = mem.recall("decision churn pipeline")
    top = res[0]
    assert top.fact_id == useful["churn"] and 0 < top.score.learned <= 0.10
    parts = top.score.contributions()
    assert sum(parts.values()) == pytest.approx(top.score.value)
    assert all(-0.10 <= m.score.learned <= 0.10 for m in res)


def test_phase_three_trains_stores_and_retrains_only_when_signals_grew(mem, corpus):
    useful, _ = corpus
    simulate(mem, useful, 67)  # 201 signals: the model is fitted at the 200th
    status = mem.learning_status()
    assert status.phase == 3 and status.ranking == "learned model" and status.status == "learned ranking"
    models = mem.store.con.execute("SELECT version, trained_on, params FROM models WHERE kind = 'ranker'").fetchall()
    assert [m[0] for m in models] == [1] and models[0][1] >= 150
    params = json.loads(models[0][2])
    assert "coef" in params and len(params["coef"]) == len(params["features"])  # numbers, not code
    res = mem.recall("what did we decide about leakage")
    assert res[0].fact_id == useful["leakage"] and res[0].score.learned != 0
    assert any(m.score.learned < res[0].score.learned for m in res[1:])
    simulate(mem, useful, 3)  # a few more signals: no retraining
    assert mem.store.con.execute("SELECT count(*) FROM models WHERE kind = 'ranker'").fetchall() == [(1,)]
    simulate(mem, useful, 30)  # grown by more than a quarter: retrained
    assert mem.store.con.execute("SELECT max(version) FROM models WHERE kind = 'ranker'").fetchall() == [(2,)]
    assert mem.learning_status().model_id.startswith("ranker-v2")


def test_a_model_that_cannot_be_loaded_falls_back_to_phase_two_and_says_why(mem, corpus):
    useful, _ = corpus
    simulate(mem, useful, 67)
    mem.store.con.execute("UPDATE models SET params = '{\"features\": [\"something else\"]}'")
    mem.store._cache.clear()
    mem.learning._rankers.clear()
    status = mem.learning_status()
    assert status.phase == 3 and status.ranking == "usefulness prior"
    assert "could not be loaded" in status.status
    res = mem.recall("decision churn pipeline")
    assert res[0].fact_id == useful["churn"] and 0 < res[0].score.learned <= 0.10  # the prior ranked it


def test_a_ranker_of_an_earlier_version_is_set_aside_then_retrained(mem, corpus):
    """A model fitted on another version's features is never applied to this one's: the
    status says why, and the next signal fits a model on the current features."""
    useful, _ = corpus
    simulate(mem, useful, 67)
    params = json.loads(mem.store.con.execute("SELECT params FROM models").fetchall()[0][0])
    old = [f if f != "field_match" else "context_only" for f in params["features"]]  # as an earlier version stored it
    mem.store.con.execute("UPDATE models SET params = ?", [json.dumps({**params, "features": old})])
    mem.store._cache.clear()
    mem.learning._rankers.clear()
    status = mem.learning_status()
    assert status.ranking == "usefulness prior" and "fitted on other features" in status.status
    simulate(mem, useful, 1)  # three more signals: far from a quarter more, but the stored model is unusable
    assert mem.learning_status().status == "learned ranking"
    assert mem.store.con.execute("SELECT max(version) FROM models WHERE kind = 'ranker'").fetchall() == [(2,)]


def test_a_fit_that_orders_unseen_feedback_worse_than_the_default_is_not_adopted():
    """A five-month history's feedback taught a model to bury exact answers (a 0.92 match 24th).
    Each fit is now first scored on the feedback of questions it was not fitted on, beside the
    default fusion; a model that orders those pairs worse is not adopted."""
    import numpy as np

    from slm_magic.ranking.reranker import FEATURES, held_out_orders

    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(20), 2)
    y = np.tile([True, False], 20)
    X = rng.normal(0, 0.01, (40, len(FEATURES)))
    score, length = FEATURES.index("score_vs_top"), FEATURES.index("log_length")
    # the default's score puts every useful memory first, by a hair within its question ...
    X[:, score] = 0.1 * groups + np.where(y, 0.01, 0.0)
    # ... and the length, which the model reads across questions, says so in 14 of 20 only
    X[:, length] = np.where(y == (groups < 14), 5.0, 1.0)
    model, default = held_out_orders(X, y, groups, weight=1.0)
    assert default == 1.0 and model < default
    X[:, length] = np.where(y, 5.0, 1.0)  # (the length says so everywhere: the model is as good)
    model, default = held_out_orders(X, y, groups, weight=1.0)
    assert model == default == 1.0
    assert held_out_orders(X[:2], y[:2], groups[:2], weight=1.0) is None  # (one question: nothing held out)


def test_a_stored_model_adopted_without_the_check_is_set_aside_then_refitted(mem, corpus):
    useful, _ = corpus
    simulate(mem, useful, 67)
    params = json.loads(mem.store.con.execute("SELECT params FROM models").fetchall()[0][0])
    assert params["checked"] is True
    del params["checked"]  # (as an earlier version stored it)
    mem.store.con.execute("UPDATE models SET params = ?", [json.dumps(params)])
    mem.store._cache.clear()
    mem.learning._rankers.clear()
    status = mem.learning_status()
    assert status.ranking == "usefulness prior" and "without the check" in status.status
    simulate(mem, useful, 1)
    assert mem.learning_status().status == "learned ranking"


def test_a_rejected_fit_ranks_as_phase_two_and_waits_for_new_signals(mem, corpus):
    """A fit the check sets aside is stored as rejected, with its reason in the status, and the
    next fit waits for the signals to grow as after any fit (not one fit per click)."""
    useful, _ = corpus
    simulate(mem, useful, 67)
    models = "SELECT count(*) FROM models WHERE kind = 'ranker'"
    assert mem.store.con.execute(models).fetchall() == [(1,)]
    reason = "a learned ranking ordered your own feedback … worse than the default (0.43 of the pairs against 0.57)"
    mem.store.con.execute("UPDATE models SET params = ?", [json.dumps({"rejected": reason})])
    mem.store._cache.clear()
    mem.learning._rankers.clear()
    status = mem.learning_status()
    assert status.ranking == "usefulness prior" and status.status == f"phase 2 ranking used: {reason}"
    assert all(m.score.learned <= 0.10 for m in mem.recall("what did we decide about churn"))  # (the prior's bound)
    simulate(mem, useful, 3)  # (nine more signals: no fit yet)
    assert mem.store.con.execute(models).fetchall() == [(1,)]


def test_training_that_cannot_tell_anything_apart_says_so(mem, corpus):
    useful, _ = corpus
    for i in range(200):
        t = TOPICS[i % len(TOPICS)]
        mem.feedback(useful[t], "up", query=f"decision {t}", rank=1)
    status = mem.learning_status()
    assert status.phase == 3 and status.ranking == "usefulness prior"
    assert "all useful or all not useful" in status.status


def test_learning_can_be_switched_off(clock):
    with Memory(":memory:", clock=clock, learning=False) as mem:
        ids = [mem.remember(f"memory {i} about churn") for i in range(3)]
        for _ in range(60):
            mem.feedback(ids[0].fact_id, "up", query="churn", rank=1)
        assert all(m.score.learned == 0 for m in mem.recall("churn"))


def test_uncalibrated_abstention_is_only_nothing_relevant(mem, corpus):
    init = mem.session_init(query="churn decision")
    assert init.calibration_status == "uncalibrated" and init.answer_confidence is None and not init.abstained
    none = mem.session_init(query="quantum chromodynamics")
    assert none.abstained and none.abstention_reason == "no stored memory is relevant to the query"


def test_a_judge_calibrates_answer_confidence(mem, corpus, clock):
    judged = []

    def judge(query, memories):
        judged.append(query)
        return any("decision on" in m.content for m in memories[:1])

    mem.set_judge(judge)
    for i in range(40):
        t = TOPICS[i % len(TOPICS)]
        mem.session_init(query=f"decision on {t}" if i % 2 else f"{t} lunch plans unrelated words", max_age_days=0)
        clock.now += timedelta(minutes=1)
    assert len(judged) == 40
    init = mem.session_init(query="decision on drift")
    assert init.calibration_status == "calibrated" and init.calibration_id.startswith("cal-v")
    assert 0.0 <= init.answer_confidence <= 1.0 and not init.abstained
    weak = mem.session_init(query="sampling lunch")
    assert weak.answer_confidence < init.answer_confidence
    strict = Memory(":memory:", abstain_below=0.99)
    assert strict.abstain_below == 0.99
    with pytest.raises(InvalidInput, match="abstain_below"):
        Memory(":memory:", abstain_below=2)
    with pytest.raises(InvalidInput, match="judge"):
        mem.set_judge("not callable")


def test_labelled_outcomes_fed_in_calibrate_too(mem, corpus):
    for i in range(30):
        t = TOPICS[i % len(TOPICS)]
        q = f"decision on {t}" if i % 2 else f"zebra {i}"
        res = mem.recall(q)
        mem.record_outcome(q, res, answered=bool(i % 2))
    conf = mem.answer_confidence(mem.recall("decision on churn"))
    assert conf.calibration_status == "calibrated" and conf.answer_confidence > 0.5
    low = mem.answer_confidence(mem.recall("zebra crossing"))
    assert low.answer_confidence < 0.5 and low.abstained and "below 0.50" in low.abstention_reason


def test_a_failed_training_waits_for_new_signals_instead_of_retrying_on_each(mem, corpus, monkeypatch):
    useful, _ = corpus
    for i in range(200):
        mem.feedback(useful[TOPICS[i % len(TOPICS)]], "up", query=f"decision {TOPICS[i % len(TOPICS)]}", rank=1)
    attempts = []
    real = type(mem.learning)._training_rows
    monkeypatch.setattr(type(mem.learning), "_training_rows",
                        lambda self, user: attempts.append(user) or real(self, user))
    for _ in range(49):
        mem.feedback(useful["churn"], "up", query="decision churn", rank=1)
    assert attempts == []  # the failure at 200 is not retried on every new signal
    mem.feedback(useful["churn"], "up", query="decision churn", rank=1)
    assert len(attempts) == 1


def test_a_signal_keeps_the_project_filter_of_the_recall_it_judged(mem, corpus):
    useful, _ = corpus
    mem.remember("decision on churn for the bank project", project="bank")
    sid = mem.session_init(max_results=0).session_id
    res = mem.recall("decision churn", session_id=sid, project="bank")
    assert res.project == "bank"
    mem.feedback(res[0].fact_id, "up", session_id=sid)  # as %slm_feedback does: no query, no project
    assert mem.store.con.execute("SELECT query, rank, project FROM feedback").fetchall() == [
        ("decision churn", 1, "bank")]


def test_a_judgement_given_again_in_a_session_counts_once_and_a_changed_mind_replaces_it(ip):
    """A 👍 clicked twice, or a `%slm_feedback` cell run again, counted as two signals: the
    learning loop reached its phases on repeats."""
    def cell(source):
        res = ip.run_cell(source, store_history=True)
        return res.result, res.error_in_exec

    fact, _ = cell("%%remember\nalways fix the random seed")
    cell("%recall random seed")
    for _ in range(3):
        msg, err = cell(f"%slm_feedback {fact.fact_id} up")
        assert err is None and str(msg) == f"feedback up recorded for {fact.fact_id[:8]}"
    mem = ip.magics_manager.registry["SLMMagic"].memory
    rows = lambda: mem.store.con.execute("SELECT signal, query FROM feedback").fetchall()  # noqa: E731
    assert rows() == [("up", "random seed")] and mem.feedback_count() == 1
    cell(f"%slm_feedback {fact.fact_id} down")
    assert rows() == [("down", "random seed")] and mem.feedback_count() == 1
    cell("%recall fix the seed")  # (another question: a judgement of its own)
    cell(f"%slm_feedback {fact.fact_id} up")
    assert sorted(rows()) == [("down", "random seed"), ("up", "fix the seed")]
    mem.feedback(fact.fact_id, "up", query="random seed")  # (outside a session every call is a signal, as before)
    assert mem.feedback_count() == 3


def test_a_thumb_down_is_not_also_counted_as_ignored(mem, corpus):
    """A memory given 👎 in a session, and shown three times, also got an "ignored" signal at
    the close: the same judgement twice."""
    _, noise = corpus
    sid = mem.session_init(max_results=0).session_id
    for _ in range(3):
        mem.recall("churn decision", session_id=sid, limit=3)
    mem.feedback(noise["churn"][1], "down", session_id=sid)
    mem.close_session(sid)
    got = mem.store.con.execute("SELECT fact_id, signal FROM feedback WHERE fact_id = ?", [noise["churn"][1]]).fetchall()
    assert got == [(noise["churn"][1], "down")]
