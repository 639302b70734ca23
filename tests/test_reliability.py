"""Nothing lost, nothing leaked: processes killed mid-write, four writers on one file, paths
that are not memory files, old schemas, the private parts of a memory, one user's memories
seen from another user."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime

import duckdb
import pytest

from slm_magic import Memory
from slm_magic.errors import InvalidInput, StoreError
from slm_magic.engine.exchange import BATCH, EXPORT_COLUMNS
from slm_magic.storage.migrations import SCHEMA_VERSION
from slm_magic.storage.store import Store

SINGLE_WRITER = """
import sys
from slm_magic import Memory
mem = Memory(sys.argv[1])
i = 0
while True:
    fact = mem.remember(f"acknowledged note {i} about crash safety and write ahead logs")
    print(fact.fact_id, flush=True)  # printed only once remember has returned: acknowledged
    i += 1
"""

IMPORTER = """
import sys, threading
from slm_magic import Memory
mem = Memory(sys.argv[1])
for i in range(5):
    print(mem.remember(f"acknowledged before the import {i}").fact_id, flush=True)
insert_many, batches = mem.store.insert_many, []


def insert_then_stop_inside_the_second(columns):  # the real insert; the second one is never committed
    batches.append(len(columns["content"]))
    if len(batches) == 1:
        got = insert_many(columns)  # a statement of its own: committed when it returns
        print("batch 1 committed", flush=True)
        return got
    mem.store.con.execute("BEGIN TRANSACTION")  # the same insert, its commit held back
    insert_many(columns)
    print(f"batch 2 written, not committed: {batches}", flush=True)
    threading.Event().wait()  # the SIGKILL lands here, in the middle of the second batch


mem.store.insert_many = insert_then_stop_inside_the_second
print("importing", flush=True)
mem.import_file(sys.argv[2], progress=False)
"""


def _spawn(code: str, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _reopened_state(db) -> tuple[set[str], int]:
    """Open the file afresh: its ids, and a recall's proof that the index rebuilt from it."""
    with Memory(db) as mem:
        ids = {r[0] for r in mem.store.con.execute("SELECT fact_id FROM memories").fetchall()}
        indexed = int(mem.index.docs.alive[: mem.index.docs.size].sum())
        assert indexed == len(ids)  # the index holds exactly what the file holds
        return ids, indexed


def test_sigkill_in_the_middle_of_single_remembers_loses_nothing_acknowledged(tmp_path):
    db = tmp_path / "crash.duckdb"
    proc = _spawn(SINGLE_WRITER, db)
    acked = []
    while len(acked) < 40:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()[-2000:]
        acked.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)  # the writer never stops remembering: it dies inside its loop
    proc.wait()
    acked += proc.stdout.read().split()  # what it acknowledged between our reading and the kill
    ids, _ = _reopened_state(db)
    assert set(acked) <= ids and len(ids) - len(acked) <= 1  # at most the unacknowledged one more
    with Memory(db) as mem:
        assert mem.recall("acknowledged note 39 crash safety").memories[0].fact_id == acked[39]


def test_sigkill_in_the_middle_of_a_bulk_import_keeps_whole_batches_only(tmp_path):
    src = tmp_path / "big.jsonl"
    now = datetime(2026, 5, 1, 12, 0)
    with src.open("w") as f:
        for i in range(3 * BATCH):
            row = dict.fromkeys(EXPORT_COLUMNS)
            row.update(fact_id=f"imp{i:08d}", user_id="", project="bulk", type="discovery", kind="memory",
                       content=f"imported memory {i} about partitioned parquet files and column {i % 97}",
                       content_hash=f"h{i}", tags=["bulk"], is_core=False, revision_count=0,
                       created_at=str(now), updated_at=str(now))
            f.write(json.dumps(row) + "\n")
    db = tmp_path / "crash.duckdb"
    proc = _spawn(IMPORTER, db, src)
    acked = [proc.stdout.readline().strip() for _ in range(5)]
    assert proc.stdout.readline().strip() == "importing", proc.stderr.read()[-2000:]
    assert proc.stdout.readline().strip() == "batch 1 committed", proc.stderr.read()[-2000:]
    assert proc.stdout.readline().strip() == f"batch 2 written, not committed: {[BATCH, BATCH]}", \
        proc.stderr.read()[-2000:]
    os.kill(proc.pid, signal.SIGKILL)  # the importer waits inside its second batch until it dies
    proc.wait()
    ids, _ = _reopened_state(db)
    assert set(acked) <= ids
    assert len(ids) - len(acked) == BATCH  # the committed batch whole, nothing of the one in flight
    with Memory(db) as mem:  # and the import can simply be run again: it adds only what is missing
        again = mem.import_file(src, progress=False)
        assert (again.memories, again.already_present) == (2 * BATCH, BATCH)
        assert mem.count() == 3 * BATCH + len(acked)


LOAD_WRITER = """
import sys, time
from slm_magic import Memory
db, k, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mem = Memory(db)
mem.detach()
errors = 0
start = time.perf_counter()
for i in range(n):
    try:
        with mem.attached():
            mem.remember(f"process {k} finding {i}: shared file under load")
        if i % 5 == 0:
            with mem.attached():
                mem.recall(f"process finding {i} shared")
    except Exception as exc:
        errors += 1
        print("error", type(exc).__name__, exc, file=sys.stderr)
print(errors, time.perf_counter() - start)
"""


def test_four_processes_remember_and_recall_on_one_file(tmp_path, capsys):
    db = tmp_path / "shared.duckdb"
    Memory(db).close()
    started = time.perf_counter()
    procs = [_spawn(LOAD_WRITER, db, k, 250) for k in range(4)]
    outs = [p.communicate(timeout=600) for p in procs]
    took = time.perf_counter() - started
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert out.split()[0] == "0", err[-2000:]  # no process saw an error
    with Memory(db) as mem:
        contents = Counter(r[0] for r in mem.store.con.execute("SELECT content FROM memories").fetchall())
        assert len(contents) == 1000 and set(contents.values()) == {1}  # all there, each exactly once
        assert mem.count() == 1000
    with capsys.disabled():
        print(f"\n[load] 4 processes x 250 remembers (+50 recalls each) on one file: {took:.1f} s")


def test_paths_that_are_not_memory_files_are_refused_untouched(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_bytes(b"my notes, not a database" * 100)
    with pytest.raises(StoreError, match="notes.txt"):
        Memory(text)
    assert text.read_bytes() == b"my notes, not a database" * 100
    with pytest.raises(StoreError, match="directory"):
        Memory(tmp_path)
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE sales (x INTEGER)")
    con.close()
    before = other.read_bytes()
    with pytest.raises(StoreError, match="other.duckdb"):
        Memory(other)
    assert other.read_bytes() == before
    with pytest.raises(StoreError, match="/sys/slm_magic/memory.duckdb"):  # read-only even for root
        Memory("/sys/slm_magic/memory.duckdb")
    with pytest.raises(StoreError, match="/sys/memory.duckdb"):
        Memory("/sys/memory.duckdb")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
def test_a_read_only_folder_is_a_clear_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(StoreError, match="locked"):
        Memory(locked / "memory.duckdb")


def test_a_newer_schema_is_refused_and_never_touched(tmp_path):
    db = tmp_path / "future.duckdb"
    with Memory(db) as mem:
        mem.remember("written by this version")
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_version VALUES (?, now())", [SCHEMA_VERSION + 1])
    con.close()
    before = db.read_bytes()
    with pytest.raises(StoreError, match=rf"{db}.*schema version {SCHEMA_VERSION + 1}"):
        Memory(db)
    assert db.read_bytes() == before


def test_a_filled_first_version_file_upgrades_in_place_with_nothing_lost(tmp_path):
    from slm_magic.core import text

    db = tmp_path / "v1.duckdb"
    old = Store(db, upgrade_to=1)  # the project's own migration code, stopped at version 1
    rows = [(f"f{i}", f"first-version memory {i} about sampling weights", f"s{i % 3}") for i in range(30)]
    for fid, content, sid in rows:
        counts = text.term_counts(content)
        old.con.execute(
            "INSERT INTO memories (fact_id, user_id, session_id, project, type, content, content_hash, tags, "
            "is_core, created_at, updated_at, revision_count, kind, doc_len, terms, tfs, changed) VALUES "
            "(?, '', ?, 'p', 'discovery', ?, ?, ['old'], ?, ?, ?, 0, 'memory', ?, ?, ?, nextval('change_seq'))",
            [fid, sid, content, f"h{fid}", fid == "f0", datetime(2026, 1, 5), datetime(2026, 1, 5),
             sum(counts.values()), list(counts.keys()), list(counts.values())])
    old.con.execute("INSERT INTO sessions (session_id, user_id, project, api, started_at, last_activity_at) "
                    "VALUES ('s0', '', 'p', 'slm', ?, ?)", [datetime(2026, 1, 5), datetime(2026, 1, 5)])
    old.con.execute("INSERT INTO feedback VALUES ('sig1', 's0', 'f3', 'up', 1.0, 'sampling', 1, ?)",
                    [datetime(2026, 1, 5)])
    assert old.schema_version() == 1
    old.close()
    with Memory(db) as mem:
        assert mem.store.schema_version() == SCHEMA_VERSION
        assert mem.count() == 30 and mem.get("f0").is_core and mem.get("f7").tags == ("old",)
        assert mem.store.con.execute("SELECT count(*) FROM sessions").fetchall() == [(1,)]
        assert mem.store.con.execute("SELECT fact_id, query FROM feedback").fetchall() == [("f3", "sampling")]
        assert {m.fact_id for m in mem.recall("sampling weights", limit=50)} == {f for f, _, _ in rows}
        # version 4 re-derived every memory's postings from all its fields: the tag is searchable now
        assert {m.fact_id for m in mem.recall("old", limit=50)} == {f for f, _, _ in rows}
        assert mem.recall("old").memories[0].matched == {"tags": ("old",)}
        assert all(m.tfidf > 0 for m in mem.recall("sampling weights"))  # and its 3-grams were stored
        new = mem.remember("written after the upgrade about sampling")
        assert new.fact_id in [m.fact_id for m in mem.recall("after the upgrade")]


def test_a_fifth_version_file_lets_its_grams_go(tmp_path, fifth_version):
    """Version 5 stored each memory's 3-grams (64-bit hashes), version 6 does not: an index
    works them out from the text. The upgraded file answers exactly as a file written by
    this version."""
    import pyarrow as pa

    from slm_magic.index.analysis import Postings
    from slm_magic.engine.validate import validate
    from slm_magic.storage.columns import INSERT_COLUMNS

    records = [{"content": c, "title": t, "tags": g, "project": "p", "created_at": datetime(2026, 1, 5)}
               for c, t, g in fifth_version.memories]
    db = tmp_path / "v5.duckdb"
    old = Store(db, upgrade_to=5)  # the project's own migration code, stopped at version 5
    columns = validate(records, now=datetime(2026, 1, 5), default_user="", offset=0)
    post = Postings.of_columns(columns)
    grams = [fifth_version.grams_of(c, t, g) for c, t, g in fifth_version.memories]
    assert all(max(map(abs, g)) >= 2**31 for g in grams)  # 64-bit hashes, as version 5 wrote them
    terms, tfs = post.list_columns()
    columns.update(fact_id=[f"f{i}" for i in range(len(records))], content_hash=[f"h{i}" for i in range(len(records))],
                   revision_count=[0] * len(records), kind=["memory"] * len(records), doc_len=post.doc_len,
                   terms=terms, tfs=tfs, grams=pa.array([list(g) for g in grams], type=pa.list_(pa.int64())),
                   gtfs=pa.array([list(g.values()) for g in grams], type=pa.list_(pa.int32())))
    names = [*INSERT_COLUMNS, "grams", "gtfs"]
    old.con.register("_v5_rows", pa.table({c: columns[c] for c in names}))
    old.con.execute(f"INSERT INTO memories ({', '.join(names)}) SELECT {', '.join(names)} FROM _v5_rows")
    assert old.schema_version() == 5
    old.close()

    fresh = Memory(tmp_path / "fresh.duckdb")
    fresh.remember_many(records)
    with Memory(db) as mem:
        assert mem.store.schema_version() == SCHEMA_VERSION >= 7
        kept = {r[0] for r in mem.store.con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = 'memories'").fetchall()}
        assert "terms" in kept and not kept & {"grams", "gtfs"}
        for query in ("dedup orders join", "churn leakage", "evenements timestamp", "httpserver", "cohort median"):
            got = [(m.content, round(m.tfidf, 9), round(m.relevance, 9)) for m in mem.recall(query).memories]
            want = [(m.content, round(m.tfidf, 9), round(m.relevance, 9)) for m in fresh.recall(query).memories]
            assert got == want and got, query
            assert any(t > 0 for _, t, _ in got)
    fresh.close()


SECRET = "sk-live-4242-ZEBRA-TOKEN"


def test_private_spans_never_reach_the_file(tmp_path):
    db = tmp_path / "private.duckdb"
    Memory(db).close()
    assert db.stat().st_mode & 0o777 == 0o600  # a new memory file is readable by its owner only
    with Memory(db, user_id="ana") as mem:
        fact = mem.remember(f"The API key is <private>{SECRET}</private>; rotate it monthly.",
                            title=f"key <private>{SECRET}</private>", tags="secrets")
        assert SECRET not in fact.content and "[REDACTED]" in fact.content and SECRET not in fact.title
        mem.mem_save("ana", f"password <private>{SECRET}</private> lives in the vault", type="decision",
                     title="vault")
        assert mem.recall("ZEBRA TOKEN").memories == []  # its words were never indexed either
        mem.export(tmp_path / "out.jsonl")
    blobs = [db.read_bytes()] + ([p.read_bytes()] if (p := tmp_path / "private.duckdb.wal").exists() else [])
    blobs.append((tmp_path / "out.jsonl").read_bytes())
    for blob in blobs:
        assert SECRET.encode() not in blob and b"ZEBRA" not in blob


def test_one_user_sees_nothing_of_another_through_any_read_path(tmp_path):
    db = tmp_path / "two.duckdb"
    with Memory(db) as mem:
        bob_obs = mem.mem_save("bob", "bob's churn threshold is 0.37", type="decision", title="bob threshold").id
        mem.mem_save("alice", "alice's churn threshold is 0.42", type="decision", title="alice threshold")
        bob_fact = mem.remember("bob pinned: churn dashboard refresh", user_id="bob", core=True).fact_id
    with Memory(db, user_id="alice") as alice:
        assert all("bob" not in m.content for m in alice.recall("churn threshold dashboard"))
        assert all("bob" not in o.snippet for o in alice.mem_search("alice", "churn threshold"))
        assert alice.mem_get_observation("alice", bob_obs) is None and alice.mem_timeline("alice", bob_obs) == []
        assert alice.get(bob_fact) is None and alice.get(bob_obs) is None
        assert alice.mem_stats("alice")["observations"] == 1
        init = alice.session_init(query="churn threshold dashboard")
        assert all("bob" not in m.content for m in init.memories + init.core_memory)
        assert all("bob" not in o.snippet for o in alice.mem_session_start("alice").memories)
        for act in (lambda: alice.pin(bob_fact), lambda: alice.forget(bob_fact),
                    lambda: alice.feedback(bob_fact, "up"), lambda: alice.revise(bob_fact, content="mine now")):
            with pytest.raises(InvalidInput, match="no memory"):
                act()
        assert alice.export(tmp_path / "alice.jsonl").total == 1
        exported = [json.loads(x) for x in (tmp_path / "alice.jsonl").read_text().splitlines()]
        assert [r["user_id"] for r in exported] == ["alice"]
    with Memory(db, user_id="bob") as bob:  # and bob's memory is untouched by alice's attempts
        assert bob.get(bob_fact).content == "bob pinned: churn dashboard refresh" and bob.get(bob_fact).is_core
