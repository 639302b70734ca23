"""Writes, persistence, fallback and isolation through the public Memory API."""

import json
import subprocess
import textwrap

import duckdb
import pytest

from slm_magic.index.replica import IndexReplica
from slm_magic import InvalidInput, Memory, StoreError
from slm_magic.storage.migrations import SCHEMA_VERSION

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


def test_a_bulk_write_leaves_what_it_wrote_in_one_segment_and_a_small_one_copies_little(mem, monkeypatch):
    """A bulk write's segments merge at its end into as few as what it added allows, so a
    question reads one part of each term; a small bulk write after it copies its own postings,
    not the large segment before it."""
    from slm_magic.index import sparse

    monkeypatch.setattr(sparse, "TAIL_SEAL_POSTINGS", 2048)  # (segments as a big import leaves them)
    monkeypatch.setattr(sparse, "MAX_MERGE_POSTINGS", 8192)
    mem.remember_many(({"content": f"{c} (run {i})"} for i in range(300) for c in CORPUS), batch_size=200)
    big = list(mem.index.segments)
    assert len(big) == 1 and big[0].nnz > 2 * 8192
    mem.remember_many({"content": f"{c} (again {i})"} for i in range(3) for c in CORPUS)
    assert mem.index.segments[0] is big[0] and len(mem.index.segments) <= 2


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


def recall_from_sql(mem: Memory, query: str, **kw):
    """`mem.recall` as the SQL fallback answers it (the in-process index switched off for it)."""
    replica = mem.replica
    mem.replica, mem.index_error = None, "switched off by the test"
    try:
        return mem.recall(query, **kw)
    finally:
        mem.replica = replica


def test_sql_fallback_agrees_with_the_index(words_mem):
    mem = words_mem  # (the fallback has no vectors: the lexical channels on both paths)
    mem.remember_many({"content": c} for c in CORPUS)
    with_grams, mem.config = mem.config, bm25_only(mem)
    for q in ["churn", "customer_id rows", "holiday forecast", "feature churn label", "order value outliers"]:
        full = mem.recall(q)
        fb = recall_from_sql(mem, q)
        assert fb.degraded_mode and fb.retrieval_mode == "bm25_sql_fallback"
        assert not full.degraded_mode and full.retrieval_mode == "bm25_in_process"
        assert [r.fact_id for r in fb] == [r.fact_id for r in full]
        assert [r.score.value for r in fb] == pytest.approx([r.score.value for r in full])
        assert all(r.tfidf == 0 for r in fb)  # (the n-gram part it did not compute, said as zero)
    mem.config = with_grams
    assert mem.recall("holiday forecast").retrieval_mode == "full_bm25_tfidf"


def test_the_age_gate_and_its_count_are_the_same_on_both_paths(clock):
    """With an age gate, the file's answer keeps what the index keeps (old memories only when
    they match strongly) and counts the same older matches."""
    from datetime import timedelta

    with Memory(":memory:", clock=clock, semantic=False) as m:
        now = clock.now
        m.remember("the churn label leaks through tenure", created_at=now - timedelta(days=200))
        m.remember("churn churn churn: the churn label and the churn window", created_at=now - timedelta(days=90))
        m.remember("a churn cohort, this week", created_at=now - timedelta(days=1))
        m.remember("weekly churn dashboard", created_at=now - timedelta(days=400))
        m.config = bm25_only(m)
        for q in ["churn", "churn label tenure", "churn window label"]:
            full = m.recall(q, max_age_days=30)
            fb = recall_from_sql(m, q, max_age_days=30)
            assert fb.degraded_mode and [r.fact_id for r in fb] == [r.fact_id for r in full], q
            assert fb.older_matches == full.older_matches == 3, q


def test_the_age_gate_says_which_older_matches_it_shows(clock):
    """An older match shown because it matches strongly is said as shown, not counted as left
    out (a newcomer read "1 matching memory left out" above that very memory), on both paths
    and in a session's opening."""
    from datetime import timedelta

    with Memory(":memory:", clock=clock, semantic=False) as m:
        now = clock.now
        strong = m.remember("online orders: the client agreed to weekly online order files",
                            created_at=now - timedelta(days=60))
        m.remember("orders table has duplicates", created_at=now - timedelta(days=90))
        m.remember("online orders start next week", created_at=now - timedelta(days=1))
        for i in range(12):  # (a store of some size: the rare words weigh)
            m.remember(f"feature {i}: lag of the weekly sales", created_at=now - timedelta(days=2))
        m.config = bm25_only(m)
        q = "client agreed online order files"
        for res in (m.recall(q, max_age_days=30), recall_from_sql(m, q, max_age_days=30)):
            shown = [r.fact_id for r in res]
            assert strong.fact_id in shown and res.older_matches == 2 and res.older_shown == 1, shown
            assert "older than 30 days: 2 matching memories; 1 shown because it matches the question strongly, " \
                   "1 left out" in " ".join(str(res).split())
        gate_only = m.recall("duplicates", max_age_days=30)  # (weak and old: only left out)
        assert gate_only.older_shown == 0
        assert "1 matching memory left out unless it matches" in " ".join(str(gate_only).split())
        init = m.session_init(query=q, max_age_days=30)
        said = " ".join(str(init).split())
        assert init.age_gate == (30, 2, 1) and "2 matching memories; 1 shown because it matches" in said, said


def test_sql_fallback_returns_the_same_top_10_with_tags_titles_and_sessions(clock):
    """One definition of the fields and the score: the file's postings, ranked by DuckDB,
    give what the in-process index gives without its n-gram channel."""
    import random
    from datetime import timedelta

    rnd = random.Random(3)
    words = ("churn join leakage threshold cohort forecast dedup timezone seaborn label tenure "
             "customer_id orders weekly holdout sample bias drift").split()
    with Memory(":memory:", clock=clock, semantic=False) as m:  # (the fallback has no vectors)
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
            fb = recall_from_sql(m, q, limit=10)
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
    assert [r.content for r in recall_from_sql(mem, "churn threshold", user_id="bob")] == \
        ["bob's churn threshold is 0.37"]


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
    from slm_magic.storage.store import Store

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


# --- every memory without a query, forgetting many, known sessions (issue 25, point 12) ----------

def test_browse_pages_every_readable_memory_newest_first(db_path, clock):
    from datetime import datetime, timedelta

    from slm_magic.results.models import MemoryPage

    with Memory(db_path, user_id="ana", clock=clock) as ana, Memory(db_path, user_id="bob", clock=clock) as bob:
        start = clock.now
        mine = []
        for i, c in enumerate(CORPUS):
            clock.now = start + timedelta(minutes=i)
            mine.append(ana.remember(c, project="churn" if i % 2 else "sales", type="decision" if i < 3 else None))
        clock.now = start + timedelta(hours=1)
        shared = bob.remember("bob's shared finding on churn", share=True)
        bob.remember("bob's private note")
        ana.remember("a session summary is not a memory", session_id="s1")
        ana.close_session("s1")
        ana.live.refresh()
        page = ana.browse(limit=4)
        assert isinstance(page, MemoryPage) and (page.total, page.offset, page.limit) == (10, 0, 4)
        note = ana.browse(limit=1)[0]  # (written after bob's, at the same time: the later write first)
        assert note.content == "a session summary is not a memory"
        assert [f.fact_id for f in page] == [note.fact_id, shared.fact_id, mine[7].fact_id, mine[6].fact_id]
        assert page.has_more and all(f.kind == "memory" for f in page)
        rest = ana.browse(limit=4, offset=8)
        assert [f.fact_id for f in rest] == [mine[1].fact_id, mine[0].fact_id] and not rest.has_more
        assert ana.browse(offset=50).facts == [] and ana.browse(offset=50).total == 10
        churn = ana.browse(project="churn")
        assert churn.total == 4 and {f.project for f in churn} == {"churn"} and churn.project == "churn"
        assert [f.fact_id for f in ana.browse(type="decision")] == [mine[2].fact_id, mine[1].fact_id, mine[0].fact_id]
        assert "bob's private note" not in {f.content for f in ana.browse(limit=100)}
        assert str(page) and shared.fact_id[:8] in str(page)
        clock.now = datetime(2026, 6, 2)
        ana.revise(mine[0].fact_id, content="the join on customer_id drops 3% of rows (revised)")
        assert ana.browse(limit=1)[0].fact_id == mine[0].fact_id  # revised: the newest now
    with Memory(":memory:") as m:
        for bad in ({"limit": 0}, {"limit": 10_001}, {"limit": True}, {"offset": -1}, {"type": "summary"},
                    {"project": 3}):
            with pytest.raises(InvalidInput):
                m.browse(**bad)


def test_forget_all_of_a_project_takes_only_its_own_memories(db_path, clock):
    with Memory(db_path, user_id="ana", clock=clock) as ana, Memory(db_path, user_id="bob", clock=clock) as bob:
        sid = ana.session_init(query="churn").session_id
        gone = [ana.remember(f"churn finding {i} about tenure", project="churn", session_id=sid) for i in range(3)]
        kept = ana.remember("sales forecast with prophet about tenure", project="sales")
        theirs = bob.remember("bob's churn finding about tenure", project="churn", share=True)
        ana.feedback(gone[0].fact_id, "up", query="tenure")
        ana.recall("tenure", session_id=sid)
        ana.close_session(sid)
        ana.live.refresh()
        report = ana.forget_all(project="churn")
        assert (report.count, report.project) == (3, "churn") and report.summaries > 0
        assert str(report).startswith("forgot 3 memories of project churn") and len(str(report)) < 80
        assert [f.fact_id for f in ana.browse()] == [theirs.fact_id, kept.fact_id]
        assert {m.fact_id for m in ana.recall("tenure", kind=None, limit=20)} == {theirs.fact_id, kept.fact_id}
        assert ana.feedback_count() == 0  # the signals on what went, went with it
        assert ana.store.con.execute("SELECT count(*) FROM recall_events WHERE fact_id IN (?, ?, ?)",
                                     [g.fact_id for g in gone]).fetchall() == [(0,)]
        assert bob.get(theirs.fact_id) is not None
    with Memory(db_path, user_id="ana", clock=clock) as again:  # another process sees the same
        assert again.count() == 1 and again.recall("churn finding").memories[0].fact_id == theirs.fact_id


def test_forget_all_takes_everything_of_the_user_and_nothing_of_others(db_path, clock):
    with Memory(db_path, user_id="ana", clock=clock) as ana, Memory(db_path, user_id="bob", clock=clock) as bob:
        sid = ana.session_init(query="x").session_id
        ana.remember_many([{"content": c, "session_id": sid, "project": "p"} for c in CORPUS])
        ana.remember("pinned seed note", core=True, share=True)
        ana.close_session(sid)
        bobs = bob.remember("bob's own churn note")
        report = ana.forget_all()
        assert (report.count, report.project) == (len(CORPUS) + 1, None) and report.summaries >= 1
        assert str(report).startswith(f"forgot {len(CORPUS) + 1} memories and ") and len(str(report)) < 80
        assert ana.count() == 0 and ana.browse().total == 0 and ana.core_memories() == []
        assert ana.recall("churn customer_id", kind=None).memories == []
        assert ana.session_init().recent_sessions == []  # the sessions' summary lines went too
        assert ana.session_known(sid)  # (the session itself is still known, and closed)
        bob.live.refresh()
        assert bob.count() == 1 and bob.recall("churn note")[0].fact_id == bobs.fact_id
        assert str(ana.forget_all()) == "forgot nothing: you had no memories"
        long = ana.forget_all(project="a project name far longer than anyone would type at a prompt, really")
        assert str(long).startswith("forgot nothing: you had no memories in project a project") and len(str(long)) < 80
        with pytest.raises(InvalidInput):
            bob.forget_all(project=["p"])
        assert bob.count() == 1


def test_session_known_says_whether_this_user_opened_it(mem):
    a = mem.session_init().session_id
    b = mem.mem_session_start(mem.user_id).session_id
    assert mem.session_known(a) and mem.session_known(b) and mem.session_known(f" {a} ")
    assert not mem.session_known("slm-20260601-deadbeef") and not mem.session_known("")
    mem.remember("a note under a made-up session", session_id="slm-20260601-cafecafe")
    assert not mem.session_known("slm-20260601-cafecafe")  # remembering under an id opens nothing
    with Memory(":memory:", user_id="bob") as bob:
        assert not bob.session_known(a)
    with pytest.raises(InvalidInput):
        mem.session_known(None)


# --- one-line acknowledgements fit 80 columns (issue 25, point 10) -----------------------------

@pytest.mark.parametrize("columns", ["80", "100"])
def test_remembered_pinned_forgotten_lines_fit_80_columns(mem, monkeypatch, columns):
    from slm_magic.results.models import MemoryChange

    monkeypatch.setenv("COLUMNS", columns)  # (a kernel's or a pipe's stdout reports 100)
    fact = mem.pin(mem.remember("The left join of orders on customer_id drops 3% of rows: 412 customers have "
                                "no account, and the churn model never sees them.", type="preference").fact_id)
    for action in ("remembered", "revised", "pinned", "unpinned", "forgotten"):
        line = str(MemoryChange(action=action, fact=fact))
        assert len(line) <= 80 and line.endswith("…"), line
        assert line.startswith(f"{action} {fact.fact_id[:8]} [preference, core] The left join")
    short = str(MemoryChange(action="remembered", fact=mem.remember("seed 42")))
    assert short.endswith("] seed 42") and "…" not in short
