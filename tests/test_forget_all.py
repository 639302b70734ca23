"""Forgetting takes the text away (issue 25, review of point 12): a forgotten memory lives on in
no session summary, per entity or of the whole session, whether one memory, a project's or all
of them is forgotten; what its sessions have left is summarised again. And the count a
confirmation shows is the user's own memories, in one statement."""

from __future__ import annotations

from datetime import datetime

import pytest

from slm_magic import InvalidInput, Memory

SECRET = "SECRET-X the salary_table joins on employee_id, which leaks pay bands"
OTHERS = ["Churn means 90 days without a login in the March extract",
          "The holdout is the last 8 weeks: weekly_sales beats the naive baseline"]


def summaries(mem: Memory) -> list[str]:
    """Every summary event of the user, straight from the file."""
    return [c for (c,) in mem.store.con.execute(
        "SELECT content FROM memories WHERE user_id = ? AND kind = 'summary_event' ORDER BY doc_id",
        [mem.user_id]).fetchall()]


def session_lines(mem: Memory) -> list[str]:
    return [s for (s,) in mem.store.con.execute(
        "SELECT summary FROM sessions WHERE user_id = ? AND summary IS NOT NULL", [mem.user_id]).fetchall()]


def everything_said(mem: Memory) -> str:
    """All the text a person can still be shown: summaries, session lines, recalls, timelines."""
    recalled = [m.content for q in ("what did I do today?", "salary_table employee_id pay bands", "SECRET-X")
                for m in mem.recall(q, kind=None, limit=50)]
    timeline = [s.summary for s in mem.sessions.recent_summaries(mem.user_id, 50)]
    return "\n".join([*summaries(mem), *session_lines(mem), *recalled, *timeline])


def a_session(mem: Memory, secret_project: str = "x", other_project: str = "y") -> tuple[str, str]:
    """One session: the secret in `secret_project`, two memories in `other_project`, closed.
    Returns (session id, the secret's id)."""
    sid = mem.session_init(query="payroll analysis").session_id
    secret = mem.remember(SECRET, project=secret_project, session_id=sid, tags="payroll")
    for c in OTHERS:
        mem.remember(c, project=other_project, session_id=sid, tags="analysis")
    mem.close_session(sid)
    assert any("SECRET-X" in s for s in summaries(mem)) and "salary_table" in " ".join(session_lines(mem))
    return sid, secret.fact_id


@pytest.fixture(params=["memory", "file"])
def store(request, tmp_path, clock):
    """A Memory on RAM and one on a file (the saved index and another kernel in play)."""
    path = ":memory:" if request.param == "memory" else tmp_path / "m.duckdb"
    with Memory(path, user_id="ana", clock=clock) as m:
        yield m


def test_forgetting_a_project_takes_its_text_out_of_the_whole_session_summary(store):
    sid, _ = a_session(store)
    report = store.forget_all(project="x")
    assert report.count == 1 and report.summaries >= 2 and report.rewritten >= 2
    said = everything_said(store)
    assert "SECRET-X" not in said and "salary_table" not in said and "employee_id" not in said
    top = store.recall("what did I do today?", limit=3)[0]  # the session is still there, with what is left
    assert top.fact.session_id == sid and top.score.temporal == 1.0 and top.relevance >= 0.70
    assert "2 memories" in top.content and all(c.split(":")[0] in top.content for c in OTHERS)
    assert top.fact.project == "y"
    assert store.sessions.recent_summaries(store.user_id, 5)[0].summary.startswith("2 memories about")
    assert store.close_session(sid).summary_events_created == 0  # (written again once, not twice)


def test_forgetting_one_memory_rewrites_every_summary_that_quoted_it(store):
    sid, secret = a_session(store, secret_project="y")  # (one project: the summaries stay under it)
    n_before = len(summaries(store))
    store.forget(secret)
    said = everything_said(store)
    assert "SECRET-X" not in said and "salary_table" not in said and "#payroll" not in said
    assert 0 < len(summaries(store)) < n_before  # (its own entities' summaries went, the rest came back)
    whole = [m for m in store.recall("what did I do today?", limit=5) if m.score.temporal]
    assert len(whole) == 1 and whole[0].fact.session_id == sid and "2 memories" in whole[0].content


def test_forgetting_the_last_memory_of_a_session_leaves_no_summary_of_it(store):
    sid = store.session_init(query="payroll").session_id
    only = store.remember(SECRET, project="x", session_id=sid)
    store.close_session(sid)
    store.forget(only.fact_id)
    assert summaries(store) == [] and session_lines(store) == []
    assert "SECRET-X" not in everything_said(store)


def test_forgetting_everything_leaves_no_summary(store):
    a_session(store)
    report = store.forget_all()
    assert report.count == 3 and report.rewritten == 0
    assert summaries(store) == [] and session_lines(store) == [] and "SECRET-X" not in everything_said(store)


def test_a_summary_the_user_wrote_stays_and_other_sessions_are_untouched(store, clock):
    sid, secret = a_session(store)
    clock.now = datetime(2026, 6, 2, 9)
    other = store.session_init(query="sales").session_id
    store.remember("Weekly sales forecast: prophet with holiday effects", project="y", session_id=other)
    store.close_session(other, summary="the forecast, as I put it")
    kept = {c for c in summaries(store) if "prophet" in c}
    store.forget(secret)
    assert kept <= set(summaries(store))  # (another session's summaries are as they were)
    assert "the forecast, as I put it" in session_lines(store)


def test_another_kernel_sees_the_rewritten_summaries(tmp_path, clock):
    db = tmp_path / "m.duckdb"
    with Memory(db, user_id="ana", clock=clock) as ana, Memory(db, user_id="ana", clock=clock) as other:
        a_session(ana)
        other.live.refresh()
        assert any("SECRET-X" in m.content for m in other.recall("what did I do today?", limit=5))
        ana.forget_all(project="x")
        other.live.refresh()
        assert not any("SECRET-X" in m.content for m in other.recall("what did I do today?", kind=None, limit=50))
    with Memory(db, user_id="ana", clock=clock) as reopened:  # the saved index holds no summary of it either
        assert "SECRET-X" not in everything_said(reopened)


def test_an_observation_session_s_generated_summary_forgets_it_too(mem, clock):
    """API B: a stale session's end writes a generated summary of its observations' titles."""
    user = mem.user_id
    mem.mem_session_start(user)
    secret = mem.mem_save(user, SECRET, type="discovery", title="SECRET-X salary bands")
    mem.mem_save(user, OTHERS[0], type="discovery", title="churn definition")
    clock.now = datetime(2026, 6, 3, 12)  # two days later: the session is stale
    mem.mem_session_start(user)  # (ends the stale one with a generated summary)
    assert any("SECRET-X" in s for s in summaries(mem)) and any("SECRET-X" in s for s in session_lines(mem))
    mem.forget(secret.id)
    assert not any("SECRET-X" in s for s in summaries(mem) + session_lines(mem))
    assert any("churn definition" in s for s in summaries(mem))


# --- the confirmation's count, and an empty project -------------------------------------------

def test_own_count_is_the_users_own_memories_in_one_count(tmp_path, clock):
    db = tmp_path / "m.duckdb"
    with Memory(db, user_id="ana", clock=clock) as ana, Memory(db, user_id="bob", clock=clock) as bob:
        a_session(ana)  # three memories and their summaries
        ana.remember("a note without a project")
        bob.remember("bob's shared churn finding", project="x", share=True)
        bob.remember("bob's private note", project="x")
        ana.live.refresh()
        assert ana.browse().total == 5  # (what was counted before: bob's shared memory too)
        assert ana.own_count() == 4 and ana.own_count(project="x") == 1 and ana.own_count(project="y") == 2
        assert ana.own_count(project="nothing here") == 0 and bob.own_count(project="x") == 2
        assert ana.forget_all(project="x").count == ana.own_count(project="x") + 1
        assert ana.own_count() == ana.forget_all().count == 3
        for bad in ("", "  ", 3):
            with pytest.raises(InvalidInput):
                ana.own_count(project=bad)


def test_forget_all_refuses_an_empty_project(mem):
    mem.remember("a note without a project")
    mem.remember("a note of project p", project="p")
    for empty in ("", "   "):
        with pytest.raises(InvalidInput, match="project must be a non-empty name; forget_all\\(\\) without "
                                                "project forgets everything"):
            mem.forget_all(project=empty)
    assert mem.own_count() == 2  # nothing was forgotten


def test_on_the_team_server_too(team_db, clock):
    """PostgreSQL: the same statements (the server writes the tombstones of what goes)."""
    with Memory(team_db["alice"], clock=clock) as alice, Memory(team_db["bob"], clock=clock) as bob:
        sid, secret = a_session(alice)
        bob.remember("bob's shared finding about payroll", project="x", share=True)
        alice.live.refresh()
        assert alice.own_count() == 3 and alice.own_count(project="x") == 1 and alice.browse().total == 4
        report = alice.forget_all(project="x")
        assert report.count == 1 and report.rewritten >= 2 and "SECRET-X" not in everything_said(alice)
        top = alice.recall("what did I do today?", limit=3)[0]
        assert top.fact.session_id == sid and "2 memories" in top.content
        one = alice.browse(project="y").facts[0]
        alice.forget(one.fact_id)
        assert one.content.split(":")[0] not in everything_said(alice) and alice.own_count() == 1
        with pytest.raises(InvalidInput):
            alice.forget_all(project="")
    with Memory(team_db["alice"], clock=clock) as again:  # a new kernel, from its saved index or the server
        assert "SECRET-X" not in everything_said(again)
