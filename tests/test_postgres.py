"""A team's memory on a real PostgreSQL server: the same engine and results as on a DuckDB
file, row-level security per person, sharing, several processes, a server restart.

Skipped where no server is found (`.ci/run` starts one and requires these tests).
"""

import contextlib
import json
import subprocess
import sys

import psycopg
import pytest

from slm_magic import Memory
from slm_magic.errors import StoreError
from slm_magic.storage.pg_store import SCHEMA_VERSION  # (a team database's own version)

QUERIES = ["churn definition", "join drops rows", "which table is in UTC", "seed", "t17 column",
           "what did we decide about the model", "session summary"]


def _work(mem: Memory) -> None:
    """One workload, the same on every backend: sessions, single and bulk writes, a revision,
    a pin, a forget, a closed session's summaries."""
    init = mem.session_init("churn", query="churn")
    sid = init.session_id
    mem.remember("churn means no login for 90 days", session_id=sid, tags="churn,definition", type="decision")
    mem.remember("the left join on customer_id drops 3% of rows", session_id=sid, tags="join")
    seed = mem.remember("always fix the random seed to 42", session_id=sid, type="preference")
    mem.remember("the orders table is in UTC; the events table is in local time", session_id=sid, project="etl")
    mem.remember_many([{"content": f"column c{i} of table t{i} holds {i % 7} nulls", "project": "etl",
                        "session_id": sid} for i in range(300)])
    wrong = mem.remember("we decided to use a random forest", session_id=sid, topic_key="model-choice")
    mem.remember("we decided to use gradient boosting, not a random forest", session_id=sid, topic_key="model-choice")
    mem.pin(seed.fact_id)
    gone = mem.remember("a scratch note to forget", session_id=sid)
    mem.forget(gone.fact_id)
    assert mem.get(wrong.fact_id).revision_count == 1
    mem.close_session(sid)


def _answers(mem: Memory) -> list:
    out = []
    for q in QUERIES:
        res = mem.recall(q, limit=8, kind=None)
        out.append([(m.content, round(m.score.value, 9), round(m.relevance, 9)) for m in res])
    return out


def _same_session_ids(monkeypatch):
    """Session ids are random, and a summary's text holds its id: the same ids on both runs."""
    import itertools

    from slm_magic.core import session_ids

    counter = itertools.count()
    monkeypatch.setattr(session_ids.secrets, "token_hex", lambda n: f"{next(counter):0{2 * n}x}")


def test_same_results_as_a_duckdb_file(team_db, tmp_path, clock, monkeypatch):
    _same_session_ids(monkeypatch)
    with Memory(tmp_path / "memory.duckdb", user_id="alice", clock=clock) as file_mem:
        _work(file_mem)
        expected = _answers(file_mem)
        n_file = file_mem.count()
        file_mem.live.degrade("test: answer from SQL")
        expected_sql = _answers(file_mem)
    _same_session_ids(monkeypatch)
    with Memory(team_db["alice"], clock=clock) as pg:
        assert pg.user_id == "alice" and pg.path.startswith("postgresql://")
        _work(pg)
        assert _answers(pg) == expected
        pg.live.degrade("test: answer from SQL")  # the SQL path on the server: the file's SQL ranking
        assert _answers(pg) == expected_sql
    with Memory(team_db["alice"], clock=clock) as again:  # a new kernel: its index from the server
        assert _answers(again) == expected
        assert again.count() == n_file


def test_a_kernel_catches_up_with_another_ones_writes(team_db, clock):
    with Memory(team_db["alice"], clock=clock) as one, Memory(team_db["alice"], clock=clock) as two:
        one.remember("the warehouse moved to eu-west-1")
        assert [m.content for m in two.recall("warehouse moved")] == ["the warehouse moved to eu-west-1"]
        fact = two.remember("the dashboard refreshes at 6am")
        two.revise(fact.fact_id, content="the dashboard refreshes at 7am")
        assert [m.content for m in one.recall("dashboard refreshes")] == ["the dashboard refreshes at 7am"]
        two.forget(fact.fact_id)
        assert one.recall("dashboard refreshes").memories == []


def test_a_new_kernel_maps_its_saved_index_and_catches_up(team_db, clock, tmp_path):
    import os

    with Memory(team_db["alice"], clock=clock) as alice:
        alice.remember_many([{"content": f"column c{i} of table t{i} holds nulls"} for i in range(6000)])
        shared = alice.remember("table t77 is deprecated", share=True)
        expected = _answers(alice)
    saved = list((tmp_path / "cache" / "slm_magic").glob("pg-*.idx"))
    assert len(saved) == 1 and oct(os.stat(saved[0]).st_mode & 0o777) == "0o600"
    with Memory(team_db["alice"], clock=clock) as again, Memory(team_db["bob"], clock=clock) as bob:
        assert again.replica.source == "saved index" and _answers(again) == expected
        bob.remember("bob: table t77 has a replacement, t78", share=True)
        assert [m.fact.user_id for m in again.recall("t77 replacement")][0] == "bob"
        assert [m.fact_id for m in bob.recall("t77 deprecated")][:1] == [shared.fact_id]


def test_row_level_security_even_through_raw_sql(team_db, clock):
    with Memory(team_db["alice"], clock=clock) as alice:
        private = alice.remember("alice's private note: the salary table is sensitive")
        shared = alice.remember("the client defines churn as 30 days without login", share=True)
        sid = alice.session_init("p").session_id
    with Memory(team_db["bob"], clock=clock) as bob:
        mine = bob.remember("bob's own finding about the salary table")
        got = bob.recall("salary table churn", kind=None)
        ids = {m.fact_id for m in got}
        assert shared.fact_id in ids and private.fact_id not in ids and mine.fact_id in ids
        assert "shared by alice" in str(got)
        assert bob.get(shared.fact_id) is None  # read, never owned
        with pytest.raises(StoreError, match="as 'bob'"):
            Memory(team_db["bob"], user_id="alice")
    with psycopg.connect(team_db["bob"], autocommit=True) as con:
        con.execute("SET search_path = slm")
        rows = con.execute("SELECT fact_id, user_id, shared FROM memories ORDER BY user_id").fetchall()
        assert {r[0] for r in rows} == {shared.fact_id, mine.fact_id}
        assert con.execute("SELECT count(*) FROM sessions WHERE session_id = %s", [sid]).fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM tombstones WHERE user_id = 'alice' AND NOT shared").fetchone()[0] == 0
        assert con.execute("UPDATE memories SET content = 'x' WHERE fact_id = %s", [shared.fact_id]).rowcount == 0
        assert con.execute("DELETE FROM memories WHERE fact_id = %s", [private.fact_id]).rowcount == 0
        for sql in ("SET row_security = off; SELECT count(*) FROM memories",
                    "ALTER TABLE memories DISABLE ROW LEVEL SECURITY", "TRUNCATE memories",
                    "UPDATE change_clock SET n = 0", "SET ROLE alice"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute(sql)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # writing as someone else
            con.execute("INSERT INTO memories (fact_id, user_id, project, type, content, content_hash, tags, "
                        "is_core, created_at, updated_at, revision_count, kind, doc_len, terms, tfs, changed) "
                        "VALUES ('forged', 'alice', '', 'discovery', 'x', 'h', '{}', false, now(), now(), 0, "
                        "'memory', 1, '{1}', '{1}', 1)")
    with psycopg.connect(team_db["admin"]) as con:  # nothing of alice's was touched
        assert con.execute("SELECT content FROM slm.memories WHERE fact_id = %s", [private.fact_id]).fetchone()[0] \
            == private.content


def test_moving_a_file_to_the_team_memory(team_db, tmp_path, clock):
    from slm_magic.cli import main

    with Memory(tmp_path / "mine.duckdb", clock=clock) as mine:  # the default user "" on a laptop
        mine.remember("the churn table double counts trial users", tags="churn")
        mine.remember_many([{"content": f"note {i} on table t{i}"} for i in range(50)])
    out = tmp_path / "mine.jsonl"
    assert main(["--db", str(tmp_path / "mine.duckdb"), "export", str(out)]) == 0
    assert main(["--db", team_db["alice"], "import", str(out)]) == 0
    assert main(["--db", team_db["alice"], "import", str(out)]) == 0  # again: already there, nothing doubled
    with Memory(team_db["alice"], clock=clock) as alice:
        assert alice.count() == 51
        assert [m.content for m in alice.recall("churn trial users")][:1] == ["the churn table double counts trial users"]
        back = tmp_path / "back.parquet"
        alice.export(back)
    with Memory(tmp_path / "back.duckdb", clock=clock) as copy:
        assert copy.import_file(back).memories == 51


def test_setup_is_repeatable_and_members_cannot_change_the_schema(team_db):
    assert Memory.setup_team(team_db["admin"], ["alice", "bob", "carol"]) == (SCHEMA_VERSION, SCHEMA_VERSION)
    with psycopg.connect(team_db["bob"], autocommit=True) as con:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute("CREATE TABLE slm.mine (x int)")
    # a superuser would read everyone's memories (row-level security does not hold one); a name
    # PostgreSQL would cut or refuse in its own words is said before anything is done
    for members, said in ((["dora", "postgres"], "postgres cannot be a member: a superuser"),
                          ([""], "'' cannot be a member: a role's name is 1 to 63 bytes"),
                          (["x" * 70], "cannot be a member: a role's name is 1 to 63 bytes")):
        with pytest.raises(StoreError, match=said):
            Memory.setup_team(team_db["admin"], members)
    with psycopg.connect(team_db["admin"], autocommit=True) as con:
        assert not con.execute("SELECT 1 FROM pg_roles WHERE rolname = 'dora'").fetchall()  # (nothing was done)
    with pytest.raises(StoreError, match="pg-setup"):  # a database nobody set up
        with psycopg.connect(team_db["admin"], autocommit=True) as con:
            con.execute("DROP SCHEMA slm CASCADE")
        Memory(team_db["alice"])


@contextlib.contextmanager
def notebook_on(url, monkeypatch):
    """A real InteractiveShell (history off) with the extension loaded, on the memory at `url`."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("SLM_MAGIC_DB", url)
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    try:
        shell.run_line_magic("load_ext", "slm_magic")
        yield shell
    finally:
        shell.run_line_magic("unload_ext", "slm_magic")
        InteractiveShell.clear_instance()


def test_magics_on_the_team_memory(team_db, monkeypatch):
    with notebook_on(team_db["alice"], monkeypatch) as shell:
        res = shell.run_cell("%%remember --share --tags churn\nchurn: no login for 30 days, says the client")
        assert res.error_in_exec is None and res.result.fact.shared and res.result.fact.user_id == "alice"
        assert shell.run_cell("%config SLMMagic.user = 'bob'").error_in_exec is None
        res = shell.run_cell("%recall churn")
        assert res.error_in_exec is not None and "as 'alice'" in str(res.error_in_exec)  # a UsageError
    with Memory(team_db["bob"]) as bob:
        assert [m.fact.user_id for m in bob.recall("churn")] == ["alice"]


def test_a_refused_user_leaves_the_notebook_as_it_was_and_an_import_drops_nuls(team_db, monkeypatch, tmp_path):
    """`%slm_start --user bob`, connected as alice, was refused, but left SLMMagic.user at 'bob':
    every later magic failed with the same line. A NUL in an imported line failed the whole
    import on the server (PostgreSQL's text refuses it), where a write drops it."""
    with notebook_on(team_db["alice"], monkeypatch) as shell:
        assert shell.run_cell("%slm_start").error_in_exec is None
        refused = shell.run_cell("%slm_start --user bob")
        assert refused.error_in_exec is not None and "as 'alice'" in str(refused.error_in_exec)
        assert shell.magics_manager.registry["SLMMagic"].user != "bob"
        kept = shell.run_cell("%%remember\nwritten after a refused --user")
        assert kept.error_in_exec is None and kept.result.fact.user_id == "alice"
        path = tmp_path / "nul.jsonl"
        path.write_text('{"content": "a note with a NUL \\u0000 inside"}\n{"content": "a plain note"}\n')
        got = shell.run_cell(f"%slm_import {path}")
        assert got.error_in_exec is None and got.result.added == 2
    with Memory(team_db["alice"]) as alice:
        assert "a note with a NUL  inside" in {f.content for f in alice.browse().facts}
    with Memory(team_db["bob"]) as bob:  # (another user's row: said as what it means, not as the policy's name)
        with pytest.raises(StoreError, match="bob writes only bob's own memories and sessions"):
            bob.remember("as alice", user_id="alice")


WRITER = r"""
import json, sys
from slm_magic import Memory
url, me, n, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with Memory(url) as mem:
    assert mem.user_id == me
    sid = mem.session_init(tag).session_id
    for i in range(n):
        f = mem.remember(f"{tag} finding {i} about table {tag}t{i}", session_id=sid, share=(i % 3 == 0))
        print(json.dumps({"ack": f.fact_id, "shared": f.shared}), flush=True)
        if i % 5 == 0:
            mem.recall(f"table {tag}t{i}")
    for line in mem.take_notices():
        print(json.dumps({"notice": line}), flush=True)
    print(json.dumps({"done": True}), flush=True)
    sys.stdin.readline()  # every writer is done: now this kernel must have caught up with all it may read
    print(json.dumps({"seen": [m.fact_id for m in mem.recall("finding table", limit=10000)]}), flush=True)
"""


def _writers(team_db, specs, n):
    return [subprocess.Popen([sys.executable, "-c", WRITER, team_db[who], who, str(n), tag], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for who, tag in specs]


def _all_done(procs) -> list[list[str]]:
    """Read each writer's lines up to its "done", then let them all go on (a barrier)."""
    heads = []
    for proc in procs:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if '"done"' in line:
                break
        heads.append(lines)
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return heads


def _results(proc, head=()) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "Traceback" not in err, err
    lines = [json.loads(x) for x in [*head, *out.splitlines()] if x.strip()]
    return {"acks": [x["ack"] for x in lines if "ack" in x],
            "shared": {x["ack"] for x in lines if x.get("shared")},
            "notices": [x["notice"] for x in lines if "notice" in x],
            "seen": next(x["seen"] for x in lines if "seen" in x)}


def test_four_processes_two_people_at_once_subprocess(team_db):
    n = 60
    specs = [("alice", "a1"), ("alice", "a2"), ("bob", "b1"), ("bob", "b2")]
    procs = _writers(team_db, specs, n)
    results = [_results(p, head) for p, head in zip(procs, _all_done(procs))]
    with psycopg.connect(team_db["admin"]) as con:
        stored = dict(con.execute("SELECT fact_id, user_id FROM slm.memories WHERE kind = 'memory'").fetchall())
        counts = con.execute("SELECT count(*), count(DISTINCT fact_id) FROM slm.memories").fetchone()
    assert counts[0] == counts[1] == 4 * n  # every write present exactly once
    for (who, _), r in zip(specs, results):
        assert len(r["acks"]) == n and all(stored[f] == who for f in r["acks"])
    by = {who: set() for who, _ in specs}
    shared = set()
    for (who, _), r in zip(specs, results):
        by[who] |= set(r["acks"])
        shared |= r["shared"]
    for (who, _), r in zip(specs, results):
        other = "bob" if who == "alice" else "alice"
        readable = by[who] | (by[other] & shared)
        assert set(r["seen"]) == readable  # all of it, caught up; never another person's private memory
    # a fresh kernel of each person: all of their own and all shared, nothing else
    for who in ("alice", "bob"):
        other = "bob" if who == "alice" else "alice"
        with Memory(team_db[who]) as mem:
            seen = {m.fact_id for m in mem.recall("finding table", limit=10000)}
        assert seen == by[who] | (by[other] & shared)
        with psycopg.connect(team_db[who]) as con:
            raw = {r[0] for r in con.execute("SELECT fact_id FROM slm.memories").fetchall()}
        assert raw == by[who] | (by[other] & shared)


def test_server_restart_mid_write_loses_nothing_acknowledged_subprocess(team_db, pg_server):
    if not pg_server.ctl:
        pytest.skip("SLM_TEST_PG_CTL is not set: no way to restart the server")
    n = 400
    proc = _writers(team_db, [("alice", "r1")], n)[0]
    acks = []
    for line in proc.stdout:  # restart once the writer is well into its writes (an event, not a sleep)
        acks.append(json.loads(line).get("ack"))
        if len(acks) == 50:
            pg_server.pg_ctl("restart", "-m", "fast")
            break
    rest, err = proc.communicate("go\n", timeout=300)
    assert proc.returncode == 0 and "Traceback" not in err, err
    lines = [json.loads(x) for x in rest.splitlines()]
    acks += [x["ack"] for x in lines if "ack" in x]
    notices = [x["notice"] for x in lines if "notice" in x]
    assert len(acks) == n
    with psycopg.connect(team_db["admin"]) as con:
        stored = [r[0] for r in con.execute("SELECT fact_id FROM slm.memories WHERE kind = 'memory'").fetchall()]
    assert sorted(stored) == sorted(acks)  # each acknowledged write once, nothing else
    assert len(notices) >= 1 and all("reconnected after" in x for x in notices), notices


def test_a_server_that_stays_down_is_one_clear_line_subprocess(team_db, pg_server, monkeypatch, capsys):
    """A notebook's magics while the server is stopped: a UsageError that says the write was
    not saved (no traceback), and everything works again once the server is back."""
    from IPython.core.error import UsageError

    from slm_magic.storage.pg_store import PgStore

    if not pg_server.ctl:
        pytest.skip("SLM_TEST_PG_CTL is not set: no way to stop the server")
    monkeypatch.setattr(PgStore, "RECONNECT_S", 1.0)
    with notebook_on(team_db["alice"], monkeypatch) as shell:
        kept = shell.run_cell("%%remember\nthe staging schema is rebuilt every night").result.fact
        pg_server.pg_ctl("stop", "-m", "fast")
        try:
            res = shell.run_cell("%%remember\nthe server is down while I write this")
            assert isinstance(res.error_in_exec, UsageError)
            assert "did not answer for 1 s" in str(res.error_in_exec)
            assert "nothing of it was saved" in str(res.error_in_exec)
            # (known down now: the next magic tries once and says so, without its own wait)
            again = shell.run_cell("%recall staging schema")
            assert isinstance(again.error_in_exec, UsageError) and "is still not answering" in str(again.error_in_exec)
        finally:
            pg_server.pg_ctl("start")
        res = shell.run_cell("%recall staging schema")
        assert res.error_in_exec is None and [m.fact_id for m in res.result] == [kept.fact_id]
        assert "reconnected after" in capsys.readouterr().out
    with Memory(team_db["alice"]) as alice:
        assert [m.content for m in alice.recall("server down")] == []  # the refused write is not there


BULK_WRITER = r"""
import json, sys
from slm_magic import Memory
def records():
    for i in range(100_000):
        if i == 40_000:
            print("halfway", flush=True)  # the test restarts the server now
        yield {"content": f"bulk note {i} about table bt{i}"}
with Memory(sys.argv[1]) as mem:
    ids = list(mem.remember_many(records()))
    print(json.dumps({"acks": len(ids), "distinct": len(set(ids)), "notices": mem.take_notices()}), flush=True)
"""


def test_server_restart_mid_bulk_write_subprocess(team_db, pg_server):
    if not pg_server.ctl:
        pytest.skip("SLM_TEST_PG_CTL is not set: no way to restart the server")
    proc = subprocess.Popen([sys.executable, "-c", BULK_WRITER, team_db["alice"]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "halfway"
    pg_server.pg_ctl("restart", "-m", "immediate")  # a crash and recovery, in the middle of the batches
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0 and "Traceback" not in err, err
    got = json.loads(out.strip().splitlines()[-1])
    assert got["acks"] == got["distinct"] == 100_000
    with psycopg.connect(team_db["admin"]) as con:
        assert con.execute("SELECT count(*), count(DISTINCT fact_id) FROM slm.memories").fetchone() == (100_000, 100_000)


def test_a_member_cannot_corrupt_a_teammates_index_through_raw_sql(team_db, clock):
    """Index positions, stamps and tombstones are the server's: what bob's SQL tries is refused
    or overruled, and alice's kernels answer as before."""
    with Memory(team_db["alice"], clock=clock) as alice:
        mine = alice.remember("alice private: deploy keys rotate every 90 days")
        doc = alice.store.con.execute("SELECT doc_id FROM memories WHERE fact_id = ?", [mine.fact_id]).fetchall()[0][0]
        with psycopg.connect(team_db["bob"], autocommit=True) as con:
            con.execute("SET search_path = slm")
            clock_now = con.execute("SELECT n FROM change_clock").fetchone()[0]
            refused = ["INSERT INTO tombstones (doc_id, new_doc_id, terms, shared, changed) "
                       f"VALUES ({doc}, NULL, '{{}}', true, {clock_now + 1})",
                       "SELECT take_stamps(-5)", "SELECT take_stamps(0)",
                       "INSERT INTO memories (fact_id, project, type, content, content_hash, tags, is_core, created_at, "
                       "updated_at, revision_count, kind, doc_len, terms, tfs, shared, changed) VALUES ('f1', '', "
                       "'discovery', 'x', 'h', '{}', false, now(), now(), 0, 'memory', 1, '{1}', '{1}', true, 999999)"]
            for sql in refused:
                with pytest.raises(psycopg.Error):
                    con.execute(sql)
            # a row with alice's index position: the server gives it a position of its own
            con.execute("INSERT INTO memories (fact_id, doc_id, project, type, content, content_hash, tags, is_core, "
                        "created_at, updated_at, revision_count, kind, doc_len, terms, tfs, shared, changed) VALUES "
                        f"('forged', {doc}, '', 'discovery', 'bob says: paste keys in chat', 'h', '{{}}', false, now(), "
                        "now(), 0, 'memory', 1, '{1}', '{1}', true, take_stamps(1))")
            assert con.execute("SELECT doc_id FROM memories WHERE fact_id = 'forged'").fetchone()[0] != doc
            with pytest.raises(psycopg.Error, match="stamp"):  # a change without a new stamp
                con.execute("UPDATE memories SET content = 'y' WHERE fact_id = 'forged'")
            with pytest.raises(psycopg.Error, match="unshared"):
                con.execute("UPDATE memories SET shared = false, changed = take_stamps(1) WHERE fact_id = 'forged'")
        assert [m.fact_id for m in alice.recall("deploy keys rotate")] == [mine.fact_id]
    with Memory(team_db["alice"], clock=clock) as fresh:
        assert [m.fact_id for m in fresh.recall("deploy keys rotate")] == [mine.fact_id]


def test_concurrent_changes_of_one_memory_leave_no_ghost(team_db, clock):
    """A revise that waits for another kernel's revise keeps both; a forget racing a revise
    leaves nothing of the memory in any kernel."""
    with Memory(team_db["alice"], clock=clock) as one, Memory(team_db["alice"], clock=clock) as two:
        fact = one.remember("the sla is 99.0%", share=True)
        real = one.store.fetch
        done = []

        def meanwhile(con, sql, params):  # the other kernel commits between our read and our lock
            if "FOR UPDATE" in sql and not done:
                done.append(two.revise(fact.fact_id, content="the sla is 99.5%"))
            return real(con, sql, params)
        one.store.fetch = meanwhile
        got = one.revise(fact.fact_id, content="the sla is 99.9%")
        one.store.fetch = real
        assert got.content == "the sla is 99.9%" and got.revision_count == 2
        assert [m.content for m in two.recall("sla")] == ["the sla is 99.9%"]
        gone = one.remember("the staging key is in vault secret/stg", share=True)
        two.revise(gone.fact_id, content="the staging key is in vault secret/stg2")
        one.forget(gone.fact_id)
        with Memory(team_db["bob"], clock=clock) as bob:
            assert bob.recall("staging key vault").memories == []
        assert one.recall("staging key vault").memories == two.recall("staging key vault").memories == []


def test_a_kernel_sees_a_write_committed_just_after_its_own(team_db, clock):
    with Memory(team_db["alice"], clock=clock) as one, Memory(team_db["alice"], clock=clock) as two:
        real = one.store.insert_one

        def and_then_the_other(row):  # the other kernel commits between our commit and our catch-up
            got = real(row)
            two.remember("kernel two: the nightly export moved to 3am")
            return got
        one.store.insert_one = and_then_the_other
        one.remember("kernel one: the staging db is read-only on Fridays")
        one.store.insert_one = real
        assert [m.content for m in one.recall("nightly export")] == ["kernel two: the nightly export moved to 3am"]


def test_saved_indexes_are_per_role_even_on_one_url(team_db, clock, monkeypatch):
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(team_db["alice"])
    no_role = urlunsplit(parts._replace(netloc=parts.netloc.split("@", 1)[1]))  # the role from PGUSER
    monkeypatch.setenv("PGUSER", "alice")
    with Memory(no_role, clock=clock) as alice:
        alice.remember_many([{"content": f"alice private payroll note {i}"} for i in range(6000)])
        alice.save_index()
    monkeypatch.setenv("PGUSER", "bob")
    with Memory(no_role, clock=clock) as bob:
        assert bob.user_id == "bob" and bob.replica.source != "saved index" and bob.index.n_live == 0
        assert bob.recall("payroll note", user_id="alice").memories == []


def test_sharing_through_a_topic_and_what_a_shared_memory_keeps(team_db, clock):
    from slm_magic.errors import InvalidInput

    with Memory(team_db["alice"], clock=clock) as alice:
        first = alice.remember("model choice: XGBoost", topic_key="model", code="conn = connect('pw')")
        assert not first.shared
        again = alice.remember("model choice: XGBoost, for the deal", topic_key="model", share=True)
        assert again.fact_id == first.fact_id and again.shared
        with pytest.raises(InvalidInput, match="cannot be unshared"):
            alice.remember("model choice: confidential now", topic_key="model", share=False)
        shared = alice.remember("the revenue table is in cents", share=True, code="token = 'secret'")
    with psycopg.connect(team_db["bob"]) as con:
        rows = dict(con.execute("SELECT fact_id, code FROM slm.memories").fetchall())
    assert rows[shared.fact_id] is None and rows[first.fact_id] is None  # (the code run before it is not shared)
    with Memory(team_db["bob"], clock=clock) as bob:
        assert [m.content for m in bob.recall("model choice")] == ["model choice: XGBoost, for the deal"]


def test_setup_again_mends_the_guards_and_positions_are_one_per_memory(team_db, clock):
    import uuid

    outsider = f"outsider_{uuid.uuid4().hex[:8]}"  # (roles belong to the whole cluster)
    with psycopg.connect(team_db["admin"], autocommit=True) as con:  # an older build's guards
        con.execute("ALTER TABLE slm.memories DROP CONSTRAINT postings_readable")
        con.execute("DROP TRIGGER guard ON slm.memories")
        con.execute(f"CREATE ROLE {outsider} LOGIN")  # (not a member)
    assert Memory.setup_team(team_db["admin"], ["alice", "bob"]) == (SCHEMA_VERSION, SCHEMA_VERSION)
    with Memory(team_db["alice"], clock=clock) as alice:
        alice.remember_many([{"content": f"note {i} on table t{i}"} for i in range(100)])
        alice.remember("one more")
        docs = [r[0] for r in alice.store.con.execute("SELECT doc_id FROM memories ORDER BY doc_id").fetchall()]
        assert docs == list(range(docs[0], docs[0] + 101))  # one position per memory, in order
    with psycopg.connect(team_db["bob"], autocommit=True) as con:
        con.execute("SET search_path = slm")
        with pytest.raises(psycopg.Error):  # the guard is back: a term listed twice
            con.execute("INSERT INTO memories (fact_id, project, type, content, content_hash, tags, is_core, "
                        "created_at, updated_at, revision_count, kind, doc_len, terms, tfs, shared, changed) VALUES "
                        "('dup', '', 'discovery', 'zz', 'h', '{}', false, now(), now(), 0, 'memory', 2, '{7,7}', "
                        "'{1,1}', true, take_stamps(1))")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no position to take by hand
            con.execute("SELECT nextval('doc_seq')")
    with pytest.raises(StoreError, match="not a member of the team"):
        Memory(team_db["admin"].replace("postgres@", f"{outsider}@"))
    with psycopg.connect(team_db["admin"], autocommit=True) as con:
        con.execute(f"DROP ROLE {outsider}")
    with pytest.raises(StoreError, match="cannot be a member"):
        Memory.setup_team(team_db["admin"], ["slm_owner"])


def test_a_fifth_version_team_database_lets_its_grams_go(team_db, clock, tmp_path, fifth_version):
    """pg-setup takes a version-5 database (3-grams as 64-bit hashes) to version 6 (no 3-gram
    lists): then it answers exactly as a DuckDB file written now."""
    records = [{"content": c, "title": t, "tags": g} for c, t, g in fifth_version.memories]
    with Memory(team_db["alice"], clock=clock) as alice:
        alice.remember_many(records)
    with psycopg.connect(team_db["admin"], autocommit=True) as con:  # back to what version 5 stored
        con.execute("SET search_path = slm")
        rows = con.execute("SELECT fact_id, content, title, tags FROM memories").fetchall()
        con.execute("ALTER TABLE memories DISABLE TRIGGER USER")
        con.execute("ALTER TABLE memories ADD COLUMN grams bigint[] NOT NULL DEFAULT '{}', "
                    "ADD COLUMN gtfs integer[] NOT NULL DEFAULT '{}'")
        for fid, content, title, tags in rows:
            old = fifth_version.grams_of(content, title, tags)
            assert max(map(abs, old)) >= 2**31
            con.execute("UPDATE memories SET grams = %s, gtfs = %s WHERE fact_id = %s",
                        [list(old), list(old.values()), fid])
        con.execute("ALTER TABLE memories ENABLE TRIGGER USER")
        con.execute("ALTER TABLE recall_events DROP COLUMN showing_id")  # (version 7's)
        con.execute("ALTER TABLE memories DROP COLUMN vec, DROP COLUMN vec_model")  # (version 8's)
        con.execute("DELETE FROM schema_version WHERE version > 5")
    assert Memory.setup_team(team_db["admin"], ["alice", "bob"]) == (5, SCHEMA_VERSION)
    with psycopg.connect(team_db["admin"], autocommit=True) as con:
        kept = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                          "WHERE table_schema = 'slm' AND table_name = 'memories'").fetchall()}
        assert "terms" in kept and not kept & {"grams", "gtfs"}
    fresh = Memory(tmp_path / "fresh.duckdb", clock=clock)
    fresh.remember_many(records)
    with Memory(team_db["alice"], clock=clock) as alice:
        for query in ("dedup orders join", "churn leakage", "evenements timestamp", "httpserver"):
            got = [(m.content, round(m.tfidf, 9), round(m.relevance, 9)) for m in alice.recall(query).memories]
            want = [(m.content, round(m.tfidf, 9), round(m.relevance, 9)) for m in fresh.recall(query).memories]
            assert got == want and any(t > 0 for _, t, _ in got), query
    fresh.close()


def test_a_members_forgotten_transaction_cannot_stall_the_team(team_db, clock, monkeypatch):
    """pg-setup limits how long a member's transaction may sit idle: one left open in a psql
    (here holding the team's clock, which every write takes) is ended by the server, and a
    teammate's write that waited for it goes through instead of failing."""
    from slm_magic.storage import pg_schema, pg_store

    with psycopg.connect(team_db["bob"]) as con:  # every member's session has the limit
        assert con.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == \
            f"{pg_schema.IDLE_IN_TRANSACTION_S}s"
    assert pg_schema.IDLE_IN_TRANSACTION_S < pg_store.PgStore.LOCK_WAIT_S  # ended before a kernel gives up
    monkeypatch.setattr(pg_schema, "IDLE_IN_TRANSACTION_S", 1)  # (the test's own, so it waits 1 s, not 20)
    assert pg_store.setup(team_db["admin"], ["alice", "bob"]) == (SCHEMA_VERSION, SCHEMA_VERSION)  # setup again
    with Memory(team_db["bob"], clock=clock) as bob:
        for bulk in (False, True):  # a kernel's own snapshot reads are not held to it
            got = bob.store.consistent(lambda: bob.store.con.execute(
                "SELECT current_setting('idle_in_transaction_session_timeout')").fetchall(), bulk=bulk)
            assert [tuple(r) for r in got] == [("0",)]
        forgotten = psycopg.connect(team_db["alice"])  # (not autocommit: the first statement opens a transaction)
        try:
            forgotten.execute("SELECT slm.take_stamps(1)")  # the clock's row, locked, and nobody commits
            fact = bob.remember("bob writes while alice's transaction is left open")  # waits, then goes through
            with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
                forgotten.execute("SELECT 1")
        finally:
            forgotten.close()
        assert [m.fact_id for m in bob.recall("left open")] == [fact.fact_id]
    with psycopg.connect(team_db["admin"]) as con:  # in this database only: the roles' other databases keep theirs
        settings = con.execute("SELECT r.rolname, s.setdatabase = 0, s.setconfig FROM pg_db_role_setting s "
                               "JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname IN ('alice', 'bob') AND "
                               "s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))"
                               ).fetchall()
    assert sorted(settings) == [("alice", False, ["idle_in_transaction_session_timeout=1s"]),
                                ("bob", False, ["idle_in_transaction_session_timeout=1s"])]


def test_a_retried_write_of_a_recalls_showings_counts_them_once(team_db, clock):
    """The connection is lost after the server committed a recall's showings: the store sends
    the same batch again, and each showing is there once (the working set counts it once)."""
    from slm_magic.storage import pg_store

    with Memory(team_db["alice"], clock=clock) as alice:
        sid = alice.session_init(query="").session_id
        a = alice.remember("the churn table double counts trial users", session_id=sid)
        b = alice.remember("trial users churn more in the first week", session_id=sid)
        alice.recall("churn trial users", session_id=sid)  # two showings, written with the next write
        real, sent = alice.store.fetch, []

        def committed_then_lost(con, sql, params):
            got = real(con, sql, params)
            if "INSERT INTO recall_events" in sql:
                sent.append(list(params))
                if len(sent) == 1:
                    raise pg_store._Unreachable(alice.store.path, "server closed the connection unexpectedly")
            return got
        alice.store.fetch = committed_then_lost
        alice.remember("a third note, which writes the showings")
        alice.store.fetch = real
        assert len(sent) == 2 and sent[0] == sent[1]  # the same batch, with its keys, sent twice
        assert any("reconnected after" in n for n in alice.take_notices())
    with psycopg.connect(team_db["admin"]) as con:
        rows = con.execute("SELECT fact_id, count(*), count(DISTINCT showing_id) FROM slm.recall_events "
                           "WHERE session_id = %s GROUP BY fact_id", [sid]).fetchall()
    assert sorted(rows) == sorted([(a.fact_id, 1, 1), (b.fact_id, 1, 1)])
    with Memory(team_db["alice"], clock=clock) as again:  # a new kernel reads the working set from the server
        parts = {m.fact_id: m.score.working_set for m in again.recall("churn trial users", session_id=sid)}
    assert parts == {a.fact_id: pytest.approx(0.03), b.fact_id: pytest.approx(0.03)}  # one showing each, not two


def test_forgetting_all_of_a_project_or_everything_on_the_server(team_db, clock):
    """`forget_all` as a member: their own rows only (never a teammate's), the tombstones
    written by the server, and a teammate's kernel that had a shared one drops it."""
    with Memory(team_db["alice"], clock=clock) as alice, Memory(team_db["bob"], clock=clock) as bob:
        sid = alice.session_init(query="").session_id
        shared = alice.remember("alpha: the orders table is in UTC", project="alpha", share=True, session_id=sid)
        alice.remember("alpha: the refunds join drops rows", project="alpha", session_id=sid)
        kept = alice.remember("beta: the churn label is 30 days", project="beta", session_id=sid)
        alice.recall("orders refunds", session_id=sid)
        alice.close_session(sid)
        bobs = bob.remember("alpha: bob's own note on the orders table", project="alpha", share=True)
        assert shared.fact_id in {m.fact_id for m in bob.recall("orders table")}
        page = alice.browse(project="alpha")
        assert page.total == 3 and bobs.fact_id in {f.fact_id for f in page}  # hers and what bob shared
        report = alice.forget_all(project="alpha")
        assert report.count == 2 and report.project == "alpha"
        assert alice.browse(project="alpha").total == 1  # bob's shared one is his: it stays
        assert [m.fact_id for m in bob.recall("orders table")] == [bobs.fact_id]  # his kernel dropped alice's
        assert [m.fact_id for m in alice.recall("churn label")] == [kept.fact_id]
        everything = alice.forget_all()
        assert everything.count == 1 and alice.count() == 0
        assert [m.fact_id for m in alice.recall("churn label orders", kind=None, strict=False)] == [bobs.fact_id]
    with psycopg.connect(team_db["admin"]) as con:
        assert con.execute("SELECT user_id, count(*) FROM slm.memories GROUP BY user_id").fetchall() == [("bob", 1)]
        assert con.execute("SELECT count(*) FROM slm.recall_events WHERE user_id = 'alice'").fetchone()[0] == 0


def test_the_team_database_keeps_each_memorys_vector_and_a_teammates_kernel_takes_it(team_db, clock, monkeypatch):
    from test_meaning import FINDINGS, OTHER_WORDS

    bob = Memory(team_db["bob"], clock=clock)
    bob.remember("bob's first note", share=True)
    with Memory(team_db["alice"], clock=clock) as alice:
        alice.remember_many([{"content": f, "share": True} for f in FINDINGS[1:]])
        alice.remember(FINDINGS[0], share=True)
        name = alice.meaning.name
    with psycopg.connect(team_db["admin"], autocommit=True) as con:
        rows = con.execute("SELECT vec_model, array_length(vec, 1) FROM slm.memories WHERE user_id = 'alice'").fetchall()
    assert rows and all(r == (name, 256) for r in rows)
    model = type(bob.meaning)
    calls = []
    real = model.encode
    monkeypatch.setattr(model, "encode", lambda self, texts: calls.append(list(texts)) or real(self, texts))
    top = bob.recall(OTHER_WORDS).memories[0]  # caught up with alice's writes: her vectors, taken
    assert top.content == FINDINGS[0] and top.similar
    assert [c for c in calls if c != [OTHER_WORDS]] == []
    full = bob.recall(OTHER_WORDS)
    bob.replica, bob.index_error = None, "switched off by the test"  # the server's SQL, its vectors
    fb = bob.recall(OTHER_WORDS)
    assert fb.retrieval_mode == "bm25_meaning_sql_fallback" and fb.memories[0].content == FINDINGS[0]
    assert [m.fact_id for m in fb] == [m.fact_id for m in full]
    bob.close()
