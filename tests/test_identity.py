"""One person, one name (issue 25, point 2): a Memory opened without a user is the default
user's ($SLM_MAGIC_USER, else the login name), `status()` says who, and a file written when the
default user was "" (empty) is migrated so that its memories, sessions, signals and models stay
that person's, its saved index (holding "") rebuilt rather than trusted."""

from __future__ import annotations

from datetime import datetime

import pytest

from slm_magic import InvalidInput, Memory
from slm_magic.index import index_file
from slm_magic.core.identity import default_user
from slm_magic.index.analysis import Postings
from slm_magic.engine.validate import validate
from slm_magic.index.live import LiveIndex
from slm_magic.index.replica import IndexReplica
from slm_magic.storage.columns import INSERT_COLUMNS
from slm_magic.storage.migrations import SCHEMA_VERSION
from slm_magic.storage.store import Store

#: Every table with a user_id column (migrations.USER_TABLES, spelt out: what the migration must cover).
USER_TABLES = ("memories", "tombstones", "sessions", "feedback", "summary_events", "recall_events", "models",
               "outcomes")

WHEN = datetime(2026, 5, 20, 9)
OLD = ["the join on customer_id drops 3% of rows", "churn means 90 days without a login",
       "the tenure feature leaks the churn label", "weekly sales forecast uses prophet"]


@pytest.fixture
def ana(monkeypatch):
    monkeypatch.setenv("SLM_MAGIC_USER", "ana")
    return "ana"


def sixth_version_file(path, contents=OLD, users=("",)) -> list[str]:
    """A file as version 6 wrote it: memories of each of `users` ("" the old default user),
    with a session, a summary, a signal, a showing, a model and an outcome of each."""
    old = Store(path, upgrade_to=6)  # the project's own migration code, stopped at version 6
    ids = []
    for u in users:
        columns = validate([{"content": c, "project": "churn", "session_id": f"s-{u}"} for c in contents],
                           now=WHEN, default_user=u, offset=0)
        post = Postings.of_columns(columns)
        terms, tfs = post.list_columns()
        mine = [f"{u or 'nobody'}-{i:04d}" for i in range(len(contents))]
        columns.update(fact_id=mine, content_hash=[f"h{u}{i}" for i in range(len(contents))],
                       revision_count=[0] * len(contents), kind=["memory"] * len(contents),
                       doc_len=post.doc_len, terms=terms, tfs=tfs)
        columns["user_id"] = [u] * len(contents)
        old.insert_many({c: columns[c] for c in INSERT_COLUMNS})
        sql = old.con.execute
        sql("INSERT INTO sessions (session_id, user_id, project, api, started_at, last_activity_at, summary) "
            "VALUES (?, ?, 'churn', 'slm', ?, ?, 'two findings on churn')", [f"s-{u}", u, WHEN, WHEN])
        sql("INSERT INTO feedback (signal_id, session_id, fact_id, signal, value, query, rank, created_at, user_id) "
            "VALUES (?, ?, ?, 'up', 1.0, 'churn', 1, ?, ?)", [f"sig-{u}", f"s-{u}", mine[1], WHEN, u])
        sql("INSERT INTO recall_events (session_id, fact_id, doc_id, query, rank, created_at, user_id) "
            "VALUES (?, ?, 0, 'churn', 1, ?, ?)", [f"s-{u}", mine[1], WHEN, u])
        sql("INSERT INTO summary_events (session_id, entity, fact_id, created_at, user_id) VALUES (?, '#churn', ?, ?, ?)",
            [f"s-{u}", mine[0], WHEN, u])
        sql("INSERT INTO models VALUES (?, ?, 'ranker', 1, ?, 200, '{}')", [f"model-{u}", u, WHEN])
        sql("INSERT INTO outcomes VALUES (?, ?, 'churn', 0.8, true, 'label', ?)", [f"out-{u}", u, WHEN])
        ids += mine
    assert old.schema_version() == 6
    old.close()
    return ids


def test_the_migration_knows_every_table_with_a_user():
    from slm_magic.storage import migrations

    assert migrations.USER_TABLES == USER_TABLES


def owners(mem: Memory) -> dict[str, set[str]]:
    """Whose rows each table holds, straight from the file."""
    return {t: {u for (u,) in mem.store.con.execute(f"SELECT DISTINCT user_id FROM {t}").fetchall()}
            for t in USER_TABLES}


def test_a_memory_opened_without_a_user_is_the_default_users(ana):
    assert default_user() == "ana"
    with Memory(":memory:") as mem:
        assert mem.user_id == "ana"
        fact = mem.remember("the join on customer_id drops 3% of rows")
        assert fact.user_id == "ana"
        status = mem.status()
        assert status.user_id == "ana" and "user_id: ana" in str(status)  # (it read "user_id: " before)
    with Memory(":memory:", user_id="") as empty:  # "" is nobody's name: the default user's memory
        assert empty.user_id == "ana"
    with Memory(":memory:", user_id="bob") as bob:  # an explicit user still wins
        assert bob.user_id == "bob" and bob.status().user_id == "bob"
    with pytest.raises(InvalidInput, match="user_id must be a string"):
        Memory(":memory:", user_id=7)


def test_an_old_files_memories_of_the_empty_user_become_the_default_users(tmp_path, ana):
    db = tmp_path / "v6.duckdb"
    ids = sixth_version_file(db, users=("", "bob"))
    with Memory(db) as mem:
        assert mem.store.schema_version() == SCHEMA_VERSION >= 7
        assert owners(mem) == {t: {"ana", "bob"} for t in USER_TABLES if t != "tombstones"} | {"tombstones": set()}
        assert mem.count() == len(OLD) and mem.get(ids[0]).user_id == "ana"
        assert [m.fact_id for m in mem.recall("login without")] == [ids[1]]
        assert mem.feedback_count() == 1 and mem.status().sessions == 1
        assert [s.summary for s in mem.sessions.recent_summaries("ana", 5)] == ["two findings on churn"]
        assert mem.store.signals.latest_model("ana", "ranker")[0] == "model-"  # the old default user's model
    with Memory(db, user_id="bob") as bob:  # another user's rows are left as they were
        assert bob.count() == len(OLD) and {f.user_id for f in bob.browse().facts} == {"bob"}


def test_the_migration_merges_with_rows_already_under_the_default_name(tmp_path, ana):
    db = tmp_path / "v6.duckdb"
    ids = sixth_version_file(db, users=("", "ana"))  # (ana used --user ana on some days)
    with Memory(db) as mem:
        assert mem.count() == 2 * len(OLD)  # nothing overwritten, nothing lost
        assert {mem.get(i).fact_id for i in ids} == set(ids)
        assert owners(mem)["sessions"] == {"ana"} and mem.status().sessions == 2


def test_a_later_default_name_finds_the_migrated_memories_under_the_first(tmp_path, monkeypatch):
    """The name in force at the upgrade keeps them: under another name later they are not
    lost, only under the first one ($SLM_MAGIC_USER or --user reads them)."""
    db = tmp_path / "v6.duckdb"
    ids = sixth_version_file(db)
    monkeypatch.setenv("SLM_MAGIC_USER", "ana")
    Memory(db).close()  # the upgrade, as ana
    monkeypatch.setenv("SLM_MAGIC_USER", "ana.lopez")
    with Memory(db) as later:
        assert later.user_id == "ana.lopez" and later.count() == 0
        assert later.store.con.execute("SELECT count(*) FROM memories WHERE user_id = ''").fetchall() == [(0,)]
    with Memory(db, user_id="ana") as first:
        assert sorted(f.fact_id for f in first.browse().facts) == sorted(ids)


def test_a_saved_index_from_before_the_migration_is_rebuilt_not_trusted(tmp_path, ana, monkeypatch):
    """A saved index names the user of each memory by code, and the old one holds "": it is
    made for schema 6, so the upgraded file rebuilds it (and saves a new one)."""
    monkeypatch.setattr(IndexReplica, "SAVE_MIN_DOCS", 1)
    db = tmp_path / "v6.duckdb"
    ids = sixth_version_file(db)
    old = Store(db, upgrade_to=6)
    replica = IndexReplica.load(old, 1.2, 0.8)
    replica.save()
    assert replica.index.lookup_code("user", "") >= 0 and replica.index.lookup_code("user", "ana") < 0
    old.close()
    saved = index_file.path_for(str(db))
    with Memory(db) as mem:
        assert mem.replica.source.startswith("rebuilt (saved for schema version 6")
        assert [m.fact_id for m in mem.recall("login without")] == [ids[1]]
        mem.save_index()
    with Memory(db) as again:  # the new saved index is the upgraded file's, and is used
        assert again.replica.source == "saved index"
        assert [m.fact_id for m in again.recall("login without")] == [ids[1]]
        assert again.index.lookup_code("user", "") < 0
    assert saved


def _older_kernel_writes(store, fact_id: str, content: str, session_id: str | None = None) -> None:
    """What an older kernel's remember (and session_init) does: rows of user ''."""
    from slm_magic.core import text

    counts = text.term_counts(content)
    store.con.execute(
        "INSERT INTO memories (fact_id, user_id, project, type, content, content_hash, tags, is_core, created_at, "
        "updated_at, revision_count, kind, doc_len, terms, tfs) VALUES (?, '', '', 'discovery', ?, "
        "?, [], false, ?, ?, 0, 'memory', ?, ?, ?)",
        [fact_id, content, f"h-{fact_id}", WHEN, WHEN, sum(counts.values()), list(counts.keys()),
         list(counts.values())])
    if session_id:
        store.con.execute("INSERT INTO sessions (session_id, user_id, project, api, started_at, "
                          "last_activity_at) VALUES (?, '', '', 'slm', ?, ?)", [session_id, WHEN, WHEN])


def test_what_an_older_kernel_writes_after_the_upgrade_is_adopted_too(tmp_path, ana):
    """A kernel started before slm_magic was upgraded still writes under "" into the upgraded
    file; the first kernel of this version to take those rows in (on its next catch-up, or
    when it opens the file) gives them to the default user, and every other one takes that in."""
    db = tmp_path / "memory.duckdb"
    with Memory(db) as running, Memory(db) as other:
        running.remember("written by this version about the churn window")
        older = Store(db)  # (another connection, as the older kernel's)
        _older_kernel_writes(older, "old-kernel-1", "written by an older kernel about the holdout split", "old-s")
        running.live.refresh()  # its catch-up sees a row of "" and adopts it
        assert [m.fact_id for m in running.recall("holdout split")] == ["old-kernel-1"]
        assert running.get("old-kernel-1").user_id == "ana" and owners(running)["sessions"] == {"ana"}
        other.live.refresh()
        assert [m.fact_id for m in other.recall("holdout split")] == ["old-kernel-1"]
        _older_kernel_writes(older, "old-kernel-2", "the older kernel again: the march holdout leaks")
        older.close()
    with Memory(db) as opened:  # (nobody caught up in between: the next kernel to open the file adopts it)
        assert opened.get("old-kernel-2").user_id == "ana"
        assert [m.fact_id for m in opened.recall("march holdout leaks")][0] == "old-kernel-2"
        assert opened.store.con.execute("SELECT count(*) FROM memories WHERE user_id = ''").fetchall() == [(0,)]


def test_a_saved_index_holding_rows_of_the_empty_user_has_them_adopted(tmp_path, ana, monkeypatch):
    """A saved index that took rows of "" in, saved before anyone adopted them, still gets
    them adopted when it is opened (the index knows the code of "")."""
    monkeypatch.setattr(IndexReplica, "SAVE_MIN_DOCS", 1)
    adopt = LiveIndex._adopt_unowned
    monkeypatch.setattr(LiveIndex, "_adopt_unowned", lambda self: None)  # (a kernel that never adopted)
    db = tmp_path / "memory.duckdb"
    with Memory(db) as mem:
        mem.remember("a first memory about the churn window")
        _older_kernel_writes(mem.store, "old-kernel-1", "written by an older kernel about the holdout split")
        mem.live.sync()
        assert mem.index.lookup_code("user", "") >= 0
        mem.save_index()
    monkeypatch.setattr(LiveIndex, "_adopt_unowned", adopt)
    with Memory(db) as opened:
        assert opened.replica.source == "saved index" and opened.get("old-kernel-1").user_id == "ana"
        assert [m.fact_id for m in opened.recall("holdout split")] == ["old-kernel-1"]


def test_opening_a_file_asks_nothing_about_the_empty_user(tmp_path, ana, monkeypatch):
    """Adopting rows of "" costs an open nothing when there are none (it ran two existence
    checks on every open before): the index sees whose each row is as it takes it in."""
    calls = []
    db = tmp_path / "memory.duckdb"
    with Memory(db) as mem:
        mem.remember_many([{"content": c, "session_id": "s1"} for c in OLD])
    for name in ("_adopt_unowned", "adopt_unowned"):  # (the check's name before, and the adoption's now)
        monkeypatch.setattr(Store, name, lambda *a, _n=name, **k: calls.append(_n), raising=False)
    for i in range(2):
        with Memory(db) as mem:
            assert calls == []
            assert mem.count() == len(OLD) + i and mem.recall("churn label").memories
            mem.remember("a new memory about the holdout", user_id="")  # ("" is this Memory's user)
    assert calls == []
    with Memory(db) as mem:
        assert mem.store.con.execute("SELECT count(*) FROM memories WHERE user_id = ''").fetchall() == [(0,)]
