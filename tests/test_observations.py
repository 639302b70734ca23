"""API B: the per-user observation API and its two scores."""

import math
from datetime import datetime, timedelta

import pytest
from pydantic import ValidationError

from slm_magic import InvalidInput, Memory
from slm_magic.results.models import SessionStartResponse
from slm_magic.sessions.api_b import context_score


def test_session_start_new_then_reused_then_stale(mem, clock):
    first = mem.mem_session_start("alice")
    assert first.is_new and first.memories == [] and first.sessions_context == []
    with pytest.raises(ValidationError):
        first.is_new = False  # frozen
    clock.now += timedelta(hours=23)
    again = mem.mem_session_start("alice")
    assert not again.is_new and again.session_id == first.session_id
    clock.now += timedelta(hours=23)  # within 24h of the touch above: still the same
    assert mem.mem_session_start("alice").session_id == first.session_id
    mem.mem_save("alice", "prefers dark mode", type="preference", title="dark mode")
    clock.now += timedelta(hours=25)
    fresh = mem.mem_session_start("alice")
    assert fresh.is_new and fresh.session_id != first.session_id
    [past] = fresh.sessions_context
    assert past.session_id == first.session_id and past.is_auto_generated and "dark mode" in past.summary
    assert [m.title for m in fresh.memories] == ["dark mode"]
    assert isinstance(fresh, SessionStartResponse)


def test_session_start_lists_at_most_5_summaries_and_10_memories(mem, clock):
    for i in range(7):
        mem.mem_session_start("ana")
        mem.mem_save("ana", f"finding number {i} about churn", type="discovery", title=f"f{i}")
        mem.mem_save("ana", f"decision number {i} about churn", type="decision", title=f"d{i}")
        mem.mem_session_end("ana", summary=f"session {i} done")
        clock.now += timedelta(hours=1)
    start = mem.mem_session_start("ana")
    assert len(start.sessions_context) == 5 and len(start.memories) == 10
    assert [s.summary for s in start.sessions_context] == [f"session {i} done" for i in (6, 5, 4, 3, 2)]
    scores = [m.score for m in start.memories]
    assert scores == sorted(scores, reverse=True)


def test_mem_save_outcomes_and_reserved_type(mem, clock):
    created = mem.mem_save("ana", "Churn threshold is 0.4 from the pilot", type="decision", title="threshold",
                           topic_key="churn/t")
    assert created.outcome == "created" and created.topic_key == "churn/t"
    clock.now += timedelta(days=2)
    updated = mem.mem_save("ana", "Churn threshold is 0.35", type="decision", title="threshold", topic_key="churn/t")
    assert updated.outcome == "updated" and updated.id == created.id
    obs = mem.mem_get_observation("ana", created.id)
    assert obs.revision_count == 1 and obs.content == "Churn threshold is 0.35"
    assert obs.created_at == datetime(2026, 6, 1, 12) and obs.updated_at == datetime(2026, 6, 3, 12)
    # (the 2-day gap closed the first session: its auto-summary is an observation of type summary)
    assert [o.id for o in mem.mem_search("ana", "churn threshold", types=["decision"])] == [created.id]
    assert mem.mem_search("ana", "pilot", types=["decision"]) == []  # the old text is gone
    dup = mem.mem_save("ana", "  churn THRESHOLD is 0.35 ", type="pattern", title="again")
    assert dup.outcome == "deduped" and dup.id == created.id
    with pytest.raises(InvalidInput, match="reserved"):
        mem.mem_save("ana", "x", type="summary", title="t")
    with pytest.raises(InvalidInput, match="type must be one of"):
        mem.mem_save("ana", "x", type="fact", title="t")
    with pytest.raises(InvalidInput):
        mem.mem_save("", "x", type="decision", title="t")


def test_a_blank_topic_key_is_no_topic_and_revises_nothing(mem):
    """An assistant sent topic_key "" for the optional field: the second save with "" replaced
    the first, an unrelated memory, and said "updated"."""
    first = mem.mem_save("ana", "The churn label uses 30 days", type="decision", title="churn label", topic_key="")
    second = mem.mem_save("ana", "Revenue is in cents, not dollars", type="discovery", title="units", topic_key=" ")
    assert (first.outcome, second.outcome) == ("created", "created") and first.id != second.id
    assert first.topic_key is None and mem.get(first.id, user_id="ana").topic_key is None
    assert mem.get(first.id, user_id="ana").content == "The churn label uses 30 days"
    kept = mem.remember("a note through API A", topic_key="", user_id="ana")
    assert kept.topic_key is None and mem.mem_save("ana", "another", type="pattern", title="t",
                                                    topic_key="").outcome == "created"
    assert mem.count(user_id="ana") == 4


def test_private_spans_are_redacted_before_hashing_and_storing(mem):
    saved = mem.mem_save("ana", "api key <private>sk-live-123</private> rotates monthly", type="discovery", title="key")
    obs = mem.mem_get_observation("ana", saved.id)
    assert obs.content == "api key [REDACTED] rotates monthly"
    assert mem.mem_search("ana", "sk-live-123") == []
    other = mem.mem_save("ana", "api key <private>another-secret</private> rotates monthly", type="discovery",
                         title="key")
    assert other.outcome == "deduped"  # the hash saw only the redacted text


def test_search_filters_and_limits(mem):
    mem.mem_save("ana", "churn model prefers gradient boosting", type="decision", title="model")
    mem.mem_save("ana", "churn dashboards in dark mode", type="preference", title="ui")
    assert {o.type for o in mem.mem_search("ana", "churn")} == {"decision", "preference"}
    assert [o.type for o in mem.mem_search("ana", "churn", types=["preference"])] == ["preference"]
    assert [o.type for o in mem.mem_search("ana", "churn", types_exclude=["preference"])] == ["decision"]
    assert len(mem.mem_search("ana", "churn", limit=1)) == 1
    with pytest.raises(InvalidInput, match="not both"):
        mem.mem_search("ana", "churn", types=["decision"], types_exclude=["pattern"])
    for bad in (0, -3):
        with pytest.raises(InvalidInput, match="limit"):
            mem.mem_search("ana", "churn", limit=bad)
    with pytest.raises(InvalidInput, match="unknown type"):
        mem.mem_search("ana", "churn", types=["nope"])


def test_users_are_isolated_on_every_read(mem):
    saved = mem.mem_save("ana", "ana's churn threshold is 0.42", type="decision", title="t")
    mem.mem_save("bob", "bob's churn threshold is 0.37", type="decision", title="t")
    assert [o.snippet for o in mem.mem_search("bob", "churn threshold")] == ["bob's churn threshold is 0.37"]
    assert mem.mem_get_observation("bob", saved.id) is None
    assert mem.mem_timeline("bob", saved.id) == []
    assert mem.mem_stats("bob")["observations"] == 1
    assert all(m.id != saved.id for m in mem.mem_session_start("bob").memories)


def test_summary_end_timeline_and_stats(mem, clock):
    with pytest.raises(InvalidInput, match="no active session"):
        mem.mem_session_summary("ana", "nothing yet")
    with pytest.raises(InvalidInput, match="no active session"):
        mem.mem_session_end("ana", summary="nothing")
    mem.mem_session_start("ana")
    ids = []
    for i in range(12):
        clock.now += timedelta(minutes=1)
        ids.append(mem.mem_save("ana", f"step {i} of the cleaning", type="discovery", title=f"s{i}").id)
    with pytest.raises(InvalidInput, match="empty"):
        mem.mem_session_summary("ana", "  ")
    summary = mem.mem_session_summary("ana", "cleaned the March extract")
    assert summary.outcome == "created"
    assert mem.mem_search("ana", "March extract cleaned")[0].type == "summary"
    with pytest.raises(InvalidInput, match="empty"):
        mem.mem_session_end("ana", summary="")
    ended = mem.mem_session_end("ana", summary="cleaning done")
    assert ended.ended_at is not None and ended.summary == "cleaning done" and not ended.is_auto_generated
    line = mem.mem_timeline("ana", ids[6])
    assert [o.id for o in line] == ids[1:12]
    assert [o.created_at for o in line] == sorted(o.created_at for o in line)
    stats = mem.mem_stats("ana")
    assert stats["observations"] == 12 and stats["by_type"] == {"discovery": 12} and stats["sessions"] == 1


def test_context_score_formula_on_hand_computed_cases(mem, clock):
    # A decision revised twice, last updated 30 days ago (one half-life): 0.5·0.5 + 0.3·0.2 + 0.2·0.7
    assert context_score(0.5, 0.2, 0.7) == pytest.approx(0.25 + 0.06 + 0.14)
    clock.now = datetime(2026, 5, 2, 12)
    mem.mem_save("ana", "threshold v1", type="decision", title="t", topic_key="k")
    mem.mem_save("ana", "threshold v2", type="decision", title="t", topic_key="k")
    mem.mem_save("ana", "threshold v3", type="decision", title="t", topic_key="k")
    clock.now = datetime(2026, 6, 1, 12)
    [hit] = mem.mem_session_start("ana").memories
    assert hit.score == pytest.approx(0.5 * 0.5 + 0.3 * 0.2 + 0.2 * 0.7)


def test_search_score_formula_and_the_scales_are_not_mixed(mem, clock):
    clock.now = datetime(2026, 5, 2, 12)
    saved = mem.mem_save("ana", "seasonal decomposition of weekly sales", type="profile", title="t")
    clock.now = datetime(2026, 6, 1, 12)  # 30 days later: recency 0.5
    [hit] = mem.mem_search("ana", "seasonal decomposition of weekly sales")
    # The text is the query: relevance close to 1. SearchScore = 0.60·relevance + 0.25·0.5 + 0.15·0
    [full] = mem.recall("seasonal decomposition of weekly sales", user_id="ana").memories
    assert full.relevance > 0.9 and full.recency == pytest.approx(0.5)
    assert hit.score == pytest.approx(0.60 * full.relevance + 0.125)
    [ctx] = [m for m in mem.mem_session_start("ana").memories if m.id == saved.id]
    # ContextScore of the same observation: 0.50·0.5 + 0.30·0 + 0.20·1.0 (profile)
    assert ctx.score == pytest.approx(0.25 + 0.20)
    assert not math.isclose(hit.score, ctx.score)


def test_cached_reads_see_another_connection_s_writes(db_path, clock):
    with Memory(db_path, clock=clock) as a, Memory(db_path, clock=clock) as b:
        a.mem_session_start("ana")
        assert b.mem_session_start("ana").sessions_context == []
        fact = a.remember("a finding of the default user")
        assert b.session_init().learning.feedback_signals == 0
        a.feedback(fact.fact_id, "up")
        a.mem_session_end("ana", summary="first session done")
        assert b.session_init().learning.feedback_signals == 1
        assert [s.summary for s in b.mem_session_start("ana").sessions_context] == ["first session done"]
