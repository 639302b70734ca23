"""Sharing a memory with the team on one memory file: `share=True` and `%%remember --share`.

`user_id` on a DuckDB file separates people but is not access control (the README says so);
on PostgreSQL the same sharing is enforced by row-level security (tests/test_postgres.py).
"""

from slm_magic import Memory


def test_a_shared_memory_is_found_by_everyone_with_its_author(db_path, clock):
    with Memory(db_path, user_id="alice", clock=clock) as alice:
        private = alice.remember("the churn table double counts trial users", tags="churn")
        shared = alice.remember("churn means no login for 30 days, says the client", tags="churn", share=True)
        assert shared.shared and not private.shared
    with Memory(db_path, user_id="bob", clock=clock) as bob:
        bob.remember("bob's own note on churn dashboards")
        got = bob.recall("churn")
        ids = [m.fact_id for m in got.memories]
        assert shared.fact_id in ids and private.fact_id not in ids
        found = next(m for m in got.memories if m.fact_id == shared.fact_id)
        assert found.fact.user_id == "alice" and found.fact.shared
        assert "shared by alice" in str(got) and "shared by alice" in got._repr_html_()
        # what is shared is read, not owned: bob cannot revise, pin or forget it
        assert bob.get(shared.fact_id) is None
        # the SQL path (no in-process index) answers the same
        bob.live.degrade("test: no index")
        assert [m.fact_id for m in bob.recall("churn").memories] == ids


def test_a_user_with_no_memories_of_their_own_finds_the_shared_ones(db_path, clock):
    with Memory(db_path, user_id="alice", clock=clock) as alice:
        alice.remember("the orders table is in UTC, the events table is not")
        shared = alice.remember("the events table is in local time", share=True)
    with Memory(db_path, user_id="carol", clock=clock) as carol:
        assert [m.fact_id for m in carol.recall("events table time").memories] == [shared.fact_id]


def test_sharing_survives_reopening_and_the_saved_index(db_path, clock):
    with Memory(db_path, user_id="alice", clock=clock) as alice:
        alice.remember_many([{"content": f"note {i} about table t{i}"} for i in range(6000)])
        shared = alice.remember("table t42 is deprecated", share=True)
        alice.save_index()
    with Memory(db_path, user_id="bob", clock=clock) as bob:
        assert bob.replica.source == "saved index"
        assert [m.fact_id for m in bob.recall("t42 deprecated").memories] == [shared.fact_id]


def test_share_must_be_a_bool(mem):
    import pytest

    from slm_magic.errors import InvalidInput

    with pytest.raises(InvalidInput, match="share must be True or False"):
        mem.remember("x", share="yes")
    assert mem.count() == 0


def test_a_shared_memory_never_joins_another_authors_session(db_path, clock):
    with Memory(db_path, user_id="alice", clock=clock) as alice:
        sid = alice.session_init("p").session_id
        first = alice.remember("alice: the orders table is in UTC", session_id=sid)
    with Memory(db_path, user_id="bob", clock=clock) as bob:  # bob reuses alice's session id
        bob.remember("bob says: paste the api keys in the channel", session_id=sid, share=True)
    with Memory(db_path, user_id="alice", clock=clock) as alice:
        second = alice.remember("alice: the events table is in local time", session_id=sid)
        got = alice.recall("orders table UTC", related=True)
        assert [m.fact_id for m in got] == [first.fact_id, second.fact_id]  # her own neighbour, not bob's
        alice.live.load(alice.config.k1, alice.config.b, alice.meaning)  # rebuilt from the file: the same chains
        assert [m.fact_id for m in alice.recall("orders table UTC", related=True)] == [first.fact_id, second.fact_id]


def test_a_shared_memory_can_be_rated_by_whoever_it_helped(db_path, clock):
    import pytest

    from slm_magic.errors import InvalidInput

    with Memory(db_path, user_id="alice", clock=clock) as alice:
        shared = alice.remember("the churn window is 45 days", share=True)
        private = alice.remember("alice's draft of the churn query")
    with Memory(db_path, user_id="bob", clock=clock) as bob:
        bob.feedback(bob.resolve_id(shared.fact_id[:8]), "up")  # by a short id, as a person types it
        assert bob.feedback_count() == 1
        with pytest.raises(InvalidInput, match="no memory with id"):
            bob.feedback(private.fact_id, "up")
        with pytest.raises(InvalidInput, match="only its author can pin it"):  # (rated, not owned)
            bob.pin(shared.fact_id)
    with Memory(db_path, user_id="alice", clock=clock) as alice:
        assert alice.feedback_count() == 0  # bob's signal is his own


def test_what_only_its_author_may_do_says_whose_it_is_and_a_shared_observation_is_read_whole(db_path, clock):
    """bob's %slm_pin / %slm_forget on alice's shared memory said "no memory with id", though his
    %recall showed it; the assistant's mem_get_observation on it crashed (a tool error with no
    reason: the engine returned None)."""
    import pytest

    from slm_magic import InvalidInput, mcp_tools

    with Memory(db_path, user_id="alice", clock=clock) as alice:
        shared = alice.remember("churn means no login for 30 days, says the client", share=True)
        private = alice.remember("alice's own draft")
    with Memory(db_path, user_id="bob", clock=clock) as bob:
        for action, call in (("revise", lambda: bob.revise(shared.fact_id, content="changed")),
                             ("pin", lambda: bob.pin(shared.fact_id)),
                             ("unpin", lambda: bob.pin(shared.fact_id, False)),
                             ("forget", lambda: bob.forget(shared.fact_id))):
            with pytest.raises(InvalidInput, match=rf"is alice's, shared with you: only its author can {action} it"):
                call()
        with pytest.raises(InvalidInput, match="no memory with id"):  # (a private one stays unseen)
            bob.pin(private.fact_id)
        got = mcp_tools.mem_get_observation(bob, shared.fact_id[:8])
        assert got["content"] == shared.content and got["id"] == shared.fact_id
    with Memory(db_path, user_id="alice", clock=clock) as alice:
        assert alice.get(shared.fact_id).content == shared.content and not alice.get(shared.fact_id).is_core
