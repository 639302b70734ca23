"""The saved index (`memory.duckdb.idx`): a new Memory maps it instead of rebuilding, answers
exactly as a rebuild does, catches up with what was written after the save, and never trusts a
file that does not check out, including one whose saver was killed mid-write."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from slm_magic import Memory
from slm_magic.index import index_file
from slm_magic.index.replica import IndexReplica
from slm_magic.index.rows import column_spec
from slm_magic.storage.columns import FACT_COLUMNS

WORDS = ("churn cohort retention join duplicate users revenue forecast client invoice schema table "
         "pipeline feature dropped leakage holdout sample weekly monthly region pricing discount "
         "refund session notebook kernel parquet spark warehouse dashboard metric anomaly outlier "
         "baseline model tuning gradient boosting lag seasonality holiday campaign funnel signup").split()
QUERIES = ["churn cohort", "duplicate users join", "revenue forecast region", "feature leakage holdout",
           "refund invoice client", "parquet warehouse schema", "seasonality holiday lag",
           "df_orders_v2 dedup", "what did the client say about pricing", "anomaly in the weekly dashboard"]


@pytest.fixture(autouse=True)
def save_small_stores(monkeypatch):
    """Stores in tests are small: save their index from the first memory on."""
    monkeypatch.setattr(IndexReplica, "SAVE_MIN_DOCS", 1)


@contextlib.contextmanager
def no_saves():
    """Memories opened here save no index (so they leave the file under test as it is)."""
    old, IndexReplica.SAVE_MIN_DOCS = IndexReplica.SAVE_MIN_DOCS, 10**9
    try:
        yield
    finally:
        IndexReplica.SAVE_MIN_DOCS = old


def records(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.choices(WORDS, k=rng.randint(6, 30))
        if i % 17 == 0:
            words.append("df_orders_v2")
        out.append({"content": " ".join(words), "session_id": f"s-{i // 12}", "tags": rng.sample(WORDS, 2),
                    "project": rng.choice(["crm", "billing", "growth"]),
                    "type": rng.choice(["profile", "preference", "decision", "pattern", "discovery"])})
    return out


def answers(m: Memory) -> list:
    """What a person gets back: ranked ids with scores, related memories, core memories."""
    out = [[(r.fact_id, r.score.value) for r in m.recall(q, limit=10).memories] for q in QUERIES]
    out += [[(r.fact_id, r.score.value) for r in m.recall(q, related=True, limit=15).memories] for q in QUERIES[:3]]
    out.append([(f.fact_id, 0.0) for f in m.sessions.core_memories()])
    return out


def assert_same(a: list, b: list) -> None:
    assert [[i for i, _ in row] for row in a] == [[i for i, _ in row] for row in b]
    for ra, rb in zip(a, b):
        for (_, sa), (_, sb) in zip(ra, rb):
            assert sa == pytest.approx(sb, abs=1e-6)


def build(path, clock) -> list[str]:
    """A store with everything an index holds: bulk and single writes, revisions, removals,
    pins, session summaries; its index saved by the bulk write."""
    with Memory(path, clock=clock) as m:
        ids = m.remember_many(records(600))
        m.replica.wait_saved()
        for i in range(0, 60, 6):
            m.revise(ids[i], content=f"revised: the join on df_orders_v2 duplicated users ({i})")
        for i in range(1, 60, 9):
            m.forget(ids[i])
        for i in range(3, 40, 13):
            m.pin(ids[i])
        for i in range(5):
            m.remember(f"churn cohort note {i} about the refund invoice", session_id="s-2", tags=["churn"])
        m.close_session("s-3")
        m.save_index()
    return ids


def rebuilt_answers(path, clock) -> list:
    """The reference: answers of an index rebuilt from DuckDB (the saved file moved aside)."""
    idx = index_file.path_for(str(path))
    aside = idx + ".aside"
    if os.path.exists(idx):
        os.replace(idx, aside)
    try:
        with no_saves(), Memory(path, clock=clock) as m:
            assert m.replica.source.startswith("rebuilt")
            return answers(m)
    finally:
        if os.path.exists(aside):
            os.replace(aside, idx)


def test_a_new_memory_maps_the_saved_index_and_answers_as_a_rebuild(db_path, clock):
    build(db_path, clock)
    assert os.path.exists(index_file.path_for(str(db_path)))
    assert oct(os.stat(index_file.path_for(str(db_path))).st_mode & 0o777) == "0o600"
    with Memory(db_path, clock=clock) as m:
        assert m.replica.source == "saved index"
        mapped = answers(m)
    assert any(mapped[:len(QUERIES)]), "the queries find memories"
    assert_same(mapped, rebuilt_answers(db_path, clock))


def test_rows_read_a_few_or_many_at_a_time_are_the_same(db_path, clock):
    build(db_path, clock)
    with Memory(db_path, clock=clock) as m:
        docs = m.replica.index.docs
        live = [d for d in range(docs.size) if docs.alive[d]]
        many = m.rows.get(live)
        few = {}
        for i in range(0, len(live), 5):  # (a recall's page at a time)
            few.update(m.rows.get(live[i:i + 5]))
    assert len(live) > 32 and len(many) == len(live)
    assert few == many


def test_rows_shown_are_the_stored_memories_field_by_field(db_path, clock):
    """The rows a recall shows are read from the index's Arrow buffers (`rows.value_reader`):
    each must be the file's own memory, every field, from a saved index mapped on open, from
    chunks built in the process and from single writes not yet packed."""
    recs = records(300, seed=3)
    for i, r in enumerate(recs):
        if i % 3 == 0:
            r.update(title=f"título {i} — naïve", notebook=f"nb/{i % 4}.ipynb", cell=i % 7, source="cell")
        if i % 5 == 0:
            r["core"] = True
    with Memory(db_path, clock=clock) as m:
        m.remember_many(recs)
        m.replica.wait_saved()
    with Memory(db_path, clock=clock) as m:  # the saved index, mapped
        assert m.replica.source == "saved index"
        m.remember_many(records(40, seed=4))  # a chunk of the process's own
        m.remember("日本語のメモ: the holdout leaked", title="ünïcode", cell=0, tags=["a", "ü"], share=True)
        docs = m.replica.index.docs
        shown = m.rows.get([d for d in range(docs.size) if docs.alive[d]])
        assert len(shown) == 341
        for fact in shown.values():
            assert fact == m.readable(fact.fact_id)
        assert sum(f.title is not None for f in shown.values()) == 101
        assert {f.cell for f in shown.values()} == {None, *range(7)}
        # (the compiled kernel reads every column of every chunk: none left to value_reader)
        assert len(m.rows.chunks) == 2
        assert all(column_spec(chunk.column(name).chunk(0)) is not None
                   for chunk in m.rows.chunks for name in FACT_COLUMNS)


def test_writes_after_the_save_are_caught_up_on_open(db_path, clock):
    ids = build(db_path, clock)
    with no_saves(), Memory(db_path, clock=clock) as other:  # another kernel writes after the save
        new = other.remember("zebra migration seen in the weekly dashboard", tags=["zebra"])
        other.revise(ids[100], content="the holdout leaked into the feature table")
        other.pin(ids[102])
    with Memory(db_path, clock=clock) as m:
        assert m.replica.source == "saved index" and m.replica.seen > m.replica.saved
        assert m.recall("zebra migration").memories[0].fact_id == new.fact_id
        assert m.get(ids[100]).content == "the holdout leaked into the feature table"
        got = answers(m)
    assert_same(got, rebuilt_answers(db_path, clock))


def test_writes_into_a_mapped_index_stay_private_and_reach_the_file(db_path, clock):
    build(db_path, clock)
    idx = index_file.path_for(str(db_path))
    before = open(idx, "rb").read()
    with no_saves(), Memory(db_path, clock=clock) as m:
        assert m.replica.source == "saved index"
        fresh = m.remember_many(records(50, seed=7))
        m.pin(fresh[0])
        assert m.recall(records(50, seed=7)[1]["content"]).memories
        assert open(idx, "rb").read() == before  # copy-on-write: the saved file is untouched
    with Memory(db_path, clock=clock) as m:  # and the next open sees them through the file
        assert m.replica.source == "saved index"
        assert m.get(fresh[1]) is not None and m.get(fresh[0]).is_core


def _flip_byte(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.seek(size - 5000)
        b = fh.read(1)
        fh.seek(size - 5000)
        fh.write(bytes([b[0] ^ 0xFF]))


def _truncate(path):
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 2)


def _garbage(path):
    with open(path, "wb") as fh:
        fh.write(b"not an index at all" * 100)


@pytest.mark.parametrize("spoil, why", [(_flip_byte, "damaged"), (_truncate, "truncated"),
                                        (_garbage, "not an index file")])
def test_a_damaged_index_is_rebuilt(db_path, clock, spoil, why):
    build(db_path, clock)
    reference = rebuilt_answers(db_path, clock)
    spoil(index_file.path_for(str(db_path)))
    with Memory(db_path, clock=clock) as m:
        assert m.replica.source.startswith("rebuilt (") and why in m.replica.source
        assert_same(answers(m), reference)


def test_a_large_blob_damaged_is_found_after_the_open_and_the_index_rebuilt(db_path, clock, monkeypatch):
    """Large blobs are checked once the first call is answered: a damaged one drops the saved
    index (never copied into a new save), and the next call builds the index from the file."""
    monkeypatch.setattr(index_file, "CHECK_LATER_FROM", 0)  # (every blob is large here)
    build(db_path, clock)
    reference = rebuilt_answers(db_path, clock)
    idx = index_file.path_for(str(db_path))
    _flip_byte(idx)
    with Memory(db_path, clock=clock) as m:
        assert m.replica.source == "saved index"  # (its header checks out)
        m.recall("churn cohort")  # answered, then the late checks begin
        m.replica.wait_checked()
        assert "damaged" in m.replica.damaged and not os.path.exists(idx)
        assert_same(answers(m), reference)  # (the first of them built the index again)
        assert m.replica.source.startswith("rebuilt (the saved index was damaged")


LEFT_OPEN = textwrap.dedent("""
    import atexit, sys, threading
    from slm_magic import Memory
    from slm_magic.index import index_file

    index_file.CHECK_LATER_FROM = 0  # (every blob is checked after the first call)
    real, shutting = index_file._damaged, threading.Event()

    def held(views, h, names):  # the late check waits until the interpreter is shutting down
        if threading.current_thread().name == "slm-magic-check-index":
            shutting.wait()
        return real(views, h, names)

    index_file._damaged = held
    m = Memory(sys.argv[1])
    assert m.replica.source == "saved index"
    m.recall("churn cohort")  # (the late check starts, and waits)

    def finish():  # (runs once the thread pools take no more work)
        shutting.set()
        m.replica.wait_checked()
        print("checked:", m.replica.damaged)

    atexit.register(finish)
    # the script ends without closing its memory
""")


def test_a_script_that_ends_with_the_late_check_running_ends_quietly(db_path, clock):
    """A script (or a kernel) that ends while the late check runs: the check has no verdict and
    says nothing, the process ends without a traceback, and the saved index stays."""
    build(db_path, clock)
    out = subprocess.run([sys.executable, "-c", LEFT_OPEN, str(db_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "Exception" not in out.stderr, out.stderr
    assert "checked: None" in out.stdout
    assert os.path.exists(index_file.path_for(str(db_path)))


def test_another_files_index_or_one_newer_than_the_file_is_rebuilt(tmp_path, clock):
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    build(a, clock)
    with Memory(b, clock=clock) as m:
        m.remember_many(records(300, seed=3))
    shutil.copy(index_file.path_for(str(a)), index_file.path_for(str(b)))
    with Memory(b, clock=clock) as m:
        assert m.replica.source == "rebuilt (saved for another memory file)"
        assert len(m.recall("churn cohort", limit=500).memories) > 0
    # a file put back from a backup, its index saved later
    backup = tmp_path / "backup.duckdb"
    shutil.copy(a, backup)
    with Memory(a, clock=clock) as m:
        m.remember_many(records(50, seed=4))
        m.save_index()
    shutil.copy(backup, a)
    with Memory(a, clock=clock) as m:
        assert m.replica.source == "rebuilt (newer than the memory file (a restored or replaced file))"
        got = answers(m)
    assert_same(got, rebuilt_answers(a, clock))  # (after close: its own save has finished)


SAVER = textwrap.dedent("""
    import sys
    from slm_magic import Memory
    from slm_magic.index import index_file
    from slm_magic.index.replica import IndexReplica

    IndexReplica.SAVE_MIN_DOCS = 10**9     # only the save below
    m = Memory(sys.argv[1])
    real, written = index_file._write_blob, []

    def blob(fh, data):
        real(fh, data)
        written.append(data.nbytes)
        if len(written) == 4:              # some arrays on disk, most not
            fh.flush()
            print("mid-write", flush=True)
            sys.stdin.readline()            # held here until the test kills us

    index_file._write_blob = blob
    m.save_index()
    print("finished", flush=True)
""")


@pytest.mark.parametrize("earlier_index", [False, True])
def test_a_saver_killed_mid_write_leaves_the_next_open_correct_subprocess(db_path, clock, earlier_index):
    build(db_path, clock)
    idx = index_file.path_for(str(db_path))
    if not earlier_index:
        os.remove(idx)
    with no_saves(), Memory(db_path, clock=clock) as m:  # written after the earlier save: the killed one holds it
        m.remember_many(records(40, seed=9))
    before = open(idx, "rb").read() if earlier_index else None
    reference = rebuilt_answers(db_path, clock)
    child = subprocess.Popen([sys.executable, "-c", SAVER, str(db_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "mid-write", child.stderr.read()
        leftovers = [p for p in os.listdir(db_path.parent) if ".idx.tmp-" in p]
        assert len(leftovers) == 1
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert (open(idx, "rb").read() == before) if earlier_index else not os.path.exists(idx)
    with no_saves(), Memory(db_path, clock=clock) as m:
        assert m.replica.source == ("saved index" if earlier_index else "rebuilt (no saved index)")
        assert not [p for p in os.listdir(db_path.parent) if ".idx.tmp-" in p]  # the dead saver's file is gone
        assert_same(answers(m), reference)


def test_a_background_save_does_not_stop_writes(db_path, clock):
    with Memory(db_path, clock=clock) as m:
        ids = m.remember_many(records(400))  # starts a save in the background
        late = m.remember("written while the index was being saved: zebra", tags=["zebra"])
        m.forget(ids[3])
        m.replica.wait_saved()
        # (whether that save was published depends on whether the forget came before its end:
        # one from before a forget never is; either way the file is saved again when let go)
        assert m.replica.save_error is None
    with Memory(db_path, clock=clock) as m:
        assert m.replica.source == "saved index"
        assert m.recall("zebra").memories[0].fact_id == late.fact_id
        assert m.get(ids[3]) is None
        got = answers(m)
    assert_same(got, rebuilt_answers(db_path, clock))


def test_an_in_memory_store_saves_nothing(tmp_path, clock, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Memory(":memory:", clock=clock) as m:
        m.remember_many(records(50))
        assert not m.replica.worth_saving()
    assert os.listdir(tmp_path) == []


def test_a_restored_file_written_again_never_takes_the_old_index(db_path, clock):
    """A backup put back, then written past the old index's stamp by a writer that does not
    save: the old index must not be mapped (its memories are not in the file)."""
    with no_saves(), Memory(db_path, clock=clock) as m:
        m.remember_many([{"content": f"common note {i}"} for i in range(20)])
    backup = db_path.with_name("backup.duckdb")
    shutil.copy(db_path, backup)
    with Memory(db_path, clock=clock) as m:
        m.remember_many([{"content": f"zebra lost {i}"} for i in range(30)])
        m.save_index()
    shutil.copy(backup, db_path)
    with no_saves(), Memory(db_path, clock=clock) as m:
        assert m.replica.source.startswith("rebuilt (newer than the memory file")
        m.remember_many([{"content": f"yak kept {i}"} for i in range(40)])
    assert not os.path.exists(index_file.path_for(str(db_path)))  # the index that did not check out is gone
    with Memory(db_path, clock=clock) as m:
        assert m.replica.source == "rebuilt (no saved index)"
        assert m.recall("zebra lost").memories == []
        assert len(m.recall("yak kept", limit=100).memories) == 40


def test_forgetting_a_sessions_last_memory_links_the_next_one_as_a_rebuild_does(db_path, clock):
    with Memory(db_path, clock=clock) as m:
        a = m.remember("alpha churn note", session_id="s1")
        b = m.remember("beta refund note", session_id="s1")
        m.forget(b.fact_id)
        c = m.remember("gamma invoice note", session_id="s1")
        m.save_index()
    with Memory(db_path, clock=clock) as m:
        assert m.replica.source == "saved index"
        mapped = [r.fact_id for r in m.recall("gamma invoice", related=True).memories]
    assert mapped == [c.fact_id, a.fact_id]
    assert mapped == [i for i, _ in rebuilt_answers_of(db_path, clock, lambda m: [
        (r.fact_id, 0) for r in m.recall("gamma invoice", related=True).memories])]


def rebuilt_answers_of(path, clock, ask):
    idx = index_file.path_for(str(path))
    os.replace(idx, idx + ".aside")
    try:
        with no_saves(), Memory(path, clock=clock) as m:
            return ask(m)
    finally:
        os.replace(idx + ".aside", idx)


def test_status_says_where_the_index_came_from(db_path, clock):
    build(db_path, clock)
    with Memory(db_path, clock=clock) as m:
        assert m.status().index == "opened from the saved index; saved, up to date"
        with no_saves():
            m.remember("one more note")
        assert m.status().index == "opened from the saved index; saved, 1 change since"
    _garbage(index_file.path_for(str(db_path)))
    with Memory(db_path, clock=clock) as m:
        assert m.status().index.startswith("rebuilt (not an index file)")


KERNEL = textwrap.dedent("""
    import sys
    from slm_magic import Memory
    from slm_magic.index.replica import IndexReplica

    IndexReplica.SAVE_MIN_DOCS = 10**9
    m = Memory(sys.argv[1])
    m.detach()                                   # as the magics do between cells
    print(m.replica.source, flush=True)
    sys.stdin.readline()                         # another process writes meanwhile
    with m.attached():
        hits = m.recall("zebra crossing", limit=5).memories
        print(m.replica.source, len(hits), hits[0].content if hits else "", flush=True)
""")


def test_another_process_maps_the_index_and_sees_later_writes_subprocess(db_path, clock):
    build(db_path, clock)
    child = subprocess.Popen([sys.executable, "-c", KERNEL, str(db_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "saved index", child.stderr.read()
        with no_saves(), Memory(db_path, clock=clock) as m:
            m.remember("a zebra crossing outside the office", tags=["zebra"])
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "saved index 1 a zebra crossing outside the office"
    finally:
        child.kill()
        child.wait(timeout=60)


def _forget_one(m):
    secret = m.remember("the client's password hint is blue-walrus-42", tags=["secret"])
    return lambda: m.forget(secret.fact_id)


def _forget_a_project(m):
    for i in range(3):
        m.remember(f"the client's password hint {i} is blue-walrus-42", project="vault")
    return lambda: m.forget_all(project="vault")


@pytest.mark.parametrize("forgetting", [_forget_one, _forget_a_project])
def test_forgotten_text_leaves_the_saved_index_at_once(db_path, clock, forgetting):
    """%slm_forget, and forget_all (issue 25, point 12) as forget, delete for good: the text of
    what went must not stay on disk in the saved index, and the next kernel maps one that
    answers as a rebuild does."""
    build(db_path, clock)
    idx = index_file.path_for(str(db_path))
    with Memory(db_path, clock=clock) as m:
        forget = forgetting(m)
        m.save_index()
        assert b"blue-walrus-42" in open(idx, "rb").read()
        forget()
        m.replica.wait_saved()
        assert m.replica.save_error is None
        assert b"blue-walrus-42" not in open(idx, "rb").read()  # saved again, without it
    with Memory(db_path, clock=clock) as m:
        assert m.replica.source == "saved index"
        assert m.recall("blue walrus password").memories == []
        got = answers(m)
    assert_same(got, rebuilt_answers(db_path, clock))


def test_an_index_of_a_newer_version_is_left_for_it(db_path, clock):
    build(db_path, clock)
    idx = index_file.path_for(str(db_path))
    data = bytearray(open(idx, "rb").read())
    n = int.from_bytes(data[8:16], "little")
    head = bytes(data[16:16 + n]).replace(b'"format": %d' % index_file.FORMAT, b'"format": %d' % (index_file.FORMAT + 1))
    import zlib

    data[16:20 + n] = head + zlib.crc32(head).to_bytes(4, "little")  # (one digit longer from format 10)
    data[8:16] = len(head).to_bytes(8, "little")
    open(idx, "wb").write(bytes(data))
    with no_saves(), Memory(db_path, clock=clock) as m:
        assert m.replica.source.startswith("rebuilt (index format")
    assert open(idx, "rb").read() == bytes(data)  # not removed: the newer version can still use it


def test_a_save_running_when_a_memory_is_forgotten_is_not_published(db_path, clock, monkeypatch):
    build(db_path, clock)
    idx = index_file.path_for(str(db_path))
    started, go = threading.Event(), threading.Event()
    real = index_file._write_blob

    def held(fh, data):  # the background save waits, mid-write, until the forget is done
        started.set()
        go.wait()
        real(fh, data)

    with Memory(db_path, clock=clock) as m:
        secret = m.remember("the vault code is orange-heron-77")
        monkeypatch.setattr(index_file, "_write_blob", held)
        m.replica.save(background=True)      # its snapshot holds the memory
        started.wait()
        m.forget(secret.fact_id)             # removes the saved index; the running save is stale
        monkeypatch.setattr(index_file, "_write_blob", real)
        go.set()
        m.replica.wait_saved()
        assert not os.path.exists(idx) or b"orange-heron-77" not in open(idx, "rb").read()
    assert b"orange-heron-77" not in open(idx, "rb").read()  # close saved one without it
    with Memory(db_path, clock=clock) as m:
        assert m.replica.source == "saved index" and m.recall("vault code orange heron").memories == []


def test_a_rebuild_range_by_range_with_the_worker_answers_as_the_saved_index(db_path, clock, monkeypatch):
    """The file keeps no 3-grams: a rebuild works them out from the text, range after range,
    the next range's in the analysis worker while this one loads. It answers exactly as the
    index the bulk write built and saved."""
    from slm_magic.index import bulk

    started = []
    spawn = bulk.Worker.__init__

    def counted(self):
        spawn(self)
        started.append(self)

    monkeypatch.setattr(bulk.Worker, "__init__", counted)
    monkeypatch.setattr(IndexReplica, "LOAD_CHUNK", 10_000)
    with Memory(db_path, clock=clock) as m:
        m.remember_many(records(25_000, seed=4))
        m.replica.wait_saved()
        live = answers(m)
    with Memory(db_path, clock=clock) as m:
        assert m.replica.source == "saved index"
        assert_same(answers(m), live)
    started.clear()
    assert_same(rebuilt_answers(db_path, clock), live)
    assert len(started) == 1  # (three ranges: the second and third analysed in the worker)
