"""Writes, persistence, fallback and isolation through the public Memory API."""

import json
import subprocess
import textwrap

import duckdb
import pytest

from slm_magic.replica import IndexReplica
from slm_magic import InvalidInput, Memory, StoreError
from slm_magic.store import SCHEMA_VERSION

CORPUS = [
    "the join on customer_id drops 3% of rows in df_orders",
    "dropped the tenure feature: it leaks the churn label",
    "client says churn means 90 days without a login",
    "weekly sales forecast uses prophet with holiday effects",
    "the left merge duplicates rows when customer_id repeats",
    "feature importance: contract type dominates churn",
    "outliers in order value above the 99.9th percentile are test orders",
    "the holiday calendar for germany is missing 2024",
]


def test_a_write_is_visible_to_the_next_recall(mem):
    assert mem.recall("prophet forecast").memories == []
    fact = mem.remember("weekly sales forecast uses prophet", tags="forecast,decision", project="sales")
    res = mem.recall("prophet forecast")
    assert [r.fact_id for r in res] == [fact.fact_id]
    got = mem.get(fact.fact_id)
    assert got.tags == ("forecast", "decision") and got.project == "sales"


def test_remember_many_returns_ids_in_input_order(mem):
    ids = mem.remember_many({"content": c} for c in CORPUS)
    assert len(ids) == len(set(ids)) == len(CORPUS)
    assert [mem.get(i).content for i in ids] == CORPUS


def test_bad_input_is_rejected_and_nothing_is_written(mem):
    mem.remember("keep me")
    for bad in ["", "   \n\t", None, 42]:
        with pytest.raises(InvalidInput):
            mem.remember(bad)
    with pytest.raises(InvalidInput, match="type must be one of"):
        mem.remember("x", type="summary")
    with pytest.raises(InvalidInput, match="unknown memory field"):
        mem.remember_many([{"content": "ok"}, {"content": "ok", "colour": "red"}])
    with pytest.raises(InvalidInput):
        mem.recall("x", limit=-1)
    assert mem.count() == 1


def test_a_write_does_not_rebuild_the_index(mem):
    mem.remember_many({"content": f"{c} (run {i})"} for i in range(700) for c in CORPUS)
    index, segments = mem.index, list(mem.index.segments)
    assert segments and mem.index.tail_nnz == 0
    mem.remember("a brand new finding about gradient boosting")
    assert mem.index is index and mem.index.segments == segments  # same objects, untouched
    # brand, new, find, gradient, boost and its type label: only the new memory's postings were added
    assert mem.index.tail_nnz == 6
    assert mem.recall("gradient boosting").memories[0].content.startswith("a brand new finding")


def test_persistence_across_processes(db_path, python):
    write = textwrap.dedent(f"""
        from slm_magic import Memory
        with Memory({str(db_path)!r}) as m:
            print(m.remember("the churn label leaks through tenure", tags="churn").fact_id)
    """)
    fid = subprocess.run([python, "-c", write], check=True, capture_output=True, text=True).stdout.strip()
    read = textwrap.dedent(f"""
        import json
        from slm_magic import Memory
        with Memory({str(db_path)!r}) as m:
            r = m.recall("tenure leak")
            print(json.dumps([x.fact_id for x in r]))
    """)
    out = subprocess.run([python, "-c", read], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == [fid]


def test_another_connection_s_writes_are_picked_up(db_path):
    with Memory(db_path) as a, Memory(db_path) as b:
        a.remember_many({"content": c} for c in CORPUS)
        assert len(b.recall("churn")) == 3
        fact = b.remember("churn also spikes after price changes")
        assert fact.fact_id in [r.fact_id for r in a.recall("churn price")]


def test_two_stores_of_one_process_share_the_file_and_the_last_lets_go(db_path):
    a, b = Memory(db_path), Memory(db_path)
    a.remember("joins on customer_id duplicate rows")
    a.close()  # b still holds the file: it keeps working
    assert [r.content for r in b.recall("customer_id joins")] == ["joins on customer_id duplicate rows"]
    b.close()  # now nobody in this process holds it: a plain DuckDB connection can open it
    con = duckdb.connect(str(db_path))
    assert con.execute("SELECT count(*) FROM memories").fetchall() == [(1,)]
    con.close()


def bm25_only(m: Memory):
    """What the SQL fallback computes: the in-process ranking without its n-gram channel (the
    file keeps no 3-grams)."""
    return m.config.model_copy(update={"ngram_weight": 0.0})


def test_sql_fallback_agrees_with_the_index(mem):
    mem.remember_many({"content": c} for c in CORPUS)
    with_grams, mem.config = mem.config, bm25_only(mem)
    for q in ["churn", "customer_id rows", "holiday forecast", "feature churn label", "order value outliers"]:
        full = mem.recall(q)
        replica = mem.replica
        mem.replica, mem.index_error = None, "switched off by the test"
        fb = mem.recall(q)
        mem.replica = replica
        assert fb.degraded_mode and fb.retrieval_mode == "bm25_sql_fallback"
        assert not full.degraded_mode and full.retrieval_mode == "bm25_in_process"
        assert [r.fact_id for r in fb] == [r.fact_id for r in full]
        assert [r.score.value for r in fb] == pytest.approx([r.score.value for r in full])
        assert all(r.tfidf == 0 for r in fb)  # (the n-gram part it did not compute, said as zero)
    mem.config = with_grams
    assert mem.recall("holiday forecast").retrieval_mode == "full_bm25_tfidf"


def test_sql_fallback_returns_the_same_top_10_with_tags_titles_and_sessions(clock):
    """One definition of the fields and the score: the file's postings, ranked by DuckDB,
    give what the in-process index gives without its n-gram channel."""
    import random
    from datetime import timedelta

    rnd = random.Random(3)
    words = ("churn join leakage threshold cohort forecast dedup timezone seaborn label tenure "
             "customer_id orders weekly holdout sample bias drift").split()
    with Memory(":memory:", clock=clock) as m:
        now = clock.now
        for i in range(300):
            m.remember(" ".join(rnd.choice(words) for _ in range(rnd.randint(4, 20))),
                       session_id=f"s{i // 12}", project=rnd.choice(["churn", "pricing", ""]),
                       tags=rnd.sample(words, rnd.randint(0, 2)), title=rnd.choice([None, "Join audit", "Leakage"]),
                       type=rnd.choice(["discovery", "decision", "pattern"]),
                       created_at=now - timedelta(days=rnd.randint(0, 90)))
        m.config = bm25_only(m)
        for q in ["churn join", "leakage", "timezone dedup orders", "audit", "decision threshold", "cohort drift"]:
            full = m.recall(q, limit=10)
            replica = m.replica
            m.replica, m.index_error = None, "switched off by the test"
            fb = m.recall(q, limit=10)
            m.replica = replica
            assert fb.degraded_mode and len(full) == 10
            assert [r.fact_id for r in fb] == [r.fact_id for r in full], q
            assert [r.score.value for r in fb] == pytest.approx([r.score.value for r in full]), q
            assert [r.matched for r in fb] == [r.matched for r in full], q


def test_a_corrupted_index_is_a_bug_raised_not_a_fallback_hiding_it(mem):
    mem.remember_many({"content": c} for c in CORPUS)
    mem.index.docs.alive = mem.index.docs.alive[:1]  # corrupt the cached index for real
    with pytest.raises(IndexError):
        mem.recall("churn")  # (a failing file or machine degrades instead: see test_defects.py)


def test_users_never_see_each_other(mem):
    mem.remember("alice's secret churn threshold is 0.42", user_id="alice")
    mem.remember("bob's churn threshold is 0.37", user_id="bob")
    assert [r.content for r in mem.recall("churn threshold", user_id="alice")] == ["alice's secret churn threshold is 0.42"]
    assert [r.content for r in mem.recall("churn threshold", user_id="bob")] == ["bob's churn threshold is 0.37"]
    assert mem.recall("churn threshold").memories == []  # the default user has none
    assert mem.recall("churn threshold", user_id="carol").memories == []
    replica = mem.replica
    mem.replica, mem.index_error = None, "test"
    assert [r.content for r in mem.recall("churn threshold", user_id="bob")] == ["bob's churn threshold is 0.37"]
    mem.replica = replica


def test_project_filter(mem):
    mem.remember("churn model v1", project="telco")
    mem.remember("churn model v2", project="bank")
    assert [r.content for r in mem.recall("churn model", project="bank")] == ["churn model v2"]
    assert len(mem.recall("churn model")) == 2
    assert mem.recall("churn model", project="nope").memories == []


def test_schema_is_versioned(db_path):
    with Memory(db_path) as m:
        assert m.store.schema_version() == SCHEMA_VERSION


def test_newer_schema_is_refused_and_the_file_untouched(db_path):
    Memory(db_path).close()
    con = duckdb.connect(str(db_path))
    con.execute("INSERT INTO schema_version VALUES (?, now())", [SCHEMA_VERSION + 1])
    con.close()
    before = db_path.read_bytes()
    with pytest.raises(StoreError, match=str(db_path)):
        Memory(db_path)
    assert db_path.read_bytes() == before


def test_a_foreign_file_is_refused_and_not_overwritten(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a database")
    with pytest.raises(StoreError, match="notes.txt"):
        Memory(path)
    assert path.read_text() == "not a database"
    with pytest.raises(StoreError, match="directory"):
        Memory(tmp_path)


def test_default_path_from_environment(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "env.duckdb"
    monkeypatch.setenv("SLM_MAGIC_DB", str(target))
    with Memory() as m:
        m.remember("stored where the environment says")
    assert target.exists()


def test_reopen_rebuilds_the_same_ranking_when_loaded_in_chunks(db_path, monkeypatch, clock):
    records = [{"content": c, "session_id": f"s{i % 3}"} for i, c in enumerate(CORPUS * 4)]
    queries = ["churn", "customer_id rows", "holiday forecast", "feature churn label", "order value"]

    def snapshot(m):  # rounded: summation order may differ in the last bits
        return [sorted((-round(r.score.value, 9), r.fact_id, round(r.score.context, 9)) for r in m.recall(q, limit=50))
                for q in queries]

    with Memory(db_path, clock=clock, context_weight=0.6) as m:
        m.remember_many(records)
        m.remember("one more about churn labels", session_id="s1")
        live = snapshot(m)
    with Memory(db_path, clock=clock, context_weight=0.6) as m:
        whole = snapshot(m)
    monkeypatch.setattr(IndexReplica, "LOAD_CHUNK", 7)  # many chunks, sessions crossing their borders
    with Memory(db_path, clock=clock, context_weight=0.6) as m:
        chunked = snapshot(m)
    assert chunked == whole
    assert any(t > 0 for res in whole for _, _, t in res)  # the context channel took part
    # While open, idf moves a little with each write; a reopen recomputes it: same memories.
    for a, b in zip(live, whole):
        assert {f for _, f, _ in a} == {f for _, f, _ in b}
        assert sorted(s for s, _, _ in a) == pytest.approx(sorted(s for s, _, _ in b), abs=0.01)


def test_another_connection_s_revision_replaces_the_old_text(db_path):
    with Memory(db_path, context_weight=0.6) as a, Memory(db_path, context_weight=0.6) as b:
        sid = "s1"
        a.remember("first note of the session about sampling", session_id=sid)
        fact = a.remember("the churn threshold is 0.4 from the pilot", session_id=sid, topic_key="t")
        a.remember("third note about plotting", session_id=sid)
        assert [r.fact_id for r in b.recall("pilot threshold")][:1] == [fact.fact_id]
        a.revise(fact.fact_id, content="the churn threshold is 0.35 after review")
        got = b.recall("churn threshold review")
        assert got.memories[0].fact_id == fact.fact_id and got.memories[0].fact.revision_count == 1
        assert fact.fact_id not in [r.fact_id for r in b.recall("pilot") if r.bm25 > 0]
        # the revised memory keeps its place in the session: it and its neighbour give each other context
        assert b.recall("sampling").memories[0].content.startswith("first note")
        assert all(r.score.context > 0 for r in b.recall("sampling churn threshold"))


def test_a_first_version_database_upgrades_in_place(db_path):
    from slm_magic.store import Store

    old = Store(db_path, upgrade_to=1)
    assert old.schema_version() == 1
    old.close()
    with Memory(db_path) as m:
        assert m.store.schema_version() == SCHEMA_VERSION
        fact = m.remember("written after the upgrade", session_id="s")
        assert [r.fact_id for r in m.recall("upgrade", session_id="s")] == [fact.fact_id]


def test_default_file_under_home_in_a_private_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("SLM_MAGIC_DB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with Memory() as m:
        m.remember("where does this live?")
        assert m.path == str(tmp_path / ".slm_magic" / "memory.duckdb")
    assert (tmp_path / ".slm_magic").stat().st_mode & 0o777 == 0o700


def test_calls_after_detach_reopen_the_file(db_path):
    with Memory(db_path) as m:
        m.remember("still reachable after detach")
        m.detach()
        assert not m.store.connected
        assert [r.content for r in m.recall("reachable")] == ["still reachable after detach"]


def test_one_file_spelt_two_ways_is_one_file(db_path, monkeypatch):
    monkeypatch.chdir(db_path.parent)
    with Memory(db_path) as a, Memory(db_path.name) as b:  # absolute, then relative: shared, no conflict
        fact = a.remember("spelt two ways, stored once")
        assert b.get(fact.fact_id) == fact and a.path == b.path == str(db_path)
