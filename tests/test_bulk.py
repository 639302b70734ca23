"""Bulk writes on two cores: the analysis worker gives the postings the process itself would,
a worker that dies costs speed and nothing else, and a script without a main guard is never
run twice."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from slm_magic import Memory
from slm_magic.index import bulk
from slm_magic.index.analysis import Postings

WORDS = "churn cohort df_orders_v2 customerId Straße café refund invoice pricing holiday lag the of".split()


def columns(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"content": [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 30)))) for _ in range(n)],
            "title": [None if i % 3 else f"title {i} churn" for i in range(n)],
            "tags": [("churn", "q3") if i % 2 else () for i in range(n)],
            "project": ["crm" if i % 5 else "" for i in range(n)], "type": ["decision"] * n}


@pytest.fixture
def workers(monkeypatch):
    """Batches of tests are small: use the worker from the first one on, and count workers."""
    started = []

    class Counted(bulk.Worker):
        def __init__(self):
            super().__init__()
            started.append(self)

    monkeypatch.setattr(bulk, "WORKER_MIN_BATCH", 1)
    monkeypatch.setattr(bulk, "Worker", Counted)
    return started


def same(a: Postings, b: Postings) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in
               ("lengths", "terms", "tfs", "doc_len", "glengths", "grams", "gtfs"))


def test_the_worker_analyses_as_this_process_does(workers):
    batches = [columns(200, seed) for seed in range(4)]
    got = list(bulk.analysed(batches, lambda b: b, lambda b: len(b["content"])))
    assert len(workers) == 1 and workers[0].proc.poll() is not None  # one worker, ended with the batches
    assert [last for *_, last in got] == [False, False, False, True]
    assert all(same(post, Postings.of_columns(b)) for b, post, _ in got)


def test_a_worker_that_dies_costs_speed_only(workers, db_path, monkeypatch):
    receive = bulk.Worker.receive

    def dies(self):
        self.proc.kill()
        self.proc.wait()
        return receive(self)

    monkeypatch.setattr(bulk.Worker, "receive", dies)
    records = [{"content": c, "tags": list(t)} for b in (columns(100, s) for s in range(3))
               for c, t in zip(b["content"], b["tags"])]
    with Memory(db_path) as m:
        ids = m.remember_many(records, batch_size=100)
        assert len(workers) == 1 and len(ids) == 300 and len(set(ids)) == 300
        assert m.store.user_stats(m.user_id)["observations"] == 300
        hit = m.recall("df_orders_v2", limit=500).memories
        assert {h.fact_id for h in hit} == {i for i, r in zip(ids, records) if "df_orders_v2" in r["content"]}


def test_an_invalid_batch_stops_the_import_where_it_stood(workers, db_path):
    records = [{"content": f"memory {i} about churn"} for i in range(250)]
    records[210]["type"] = "nonsense"
    with Memory(db_path) as m:
        with pytest.raises(Exception, match="record 210"):
            m.remember_many(records, batch_size=100)
        assert m.store.user_stats(m.user_id)["observations"] == 200  # the batches before it, not the one after


SCRIPT = textwrap.dedent("""
    import sys
    from slm_magic import Memory
    from slm_magic.index import bulk
    print("top level ran", flush=True)       # no `if __name__ == "__main__"` guard, on purpose
    bulk.WORKER_MIN_BATCH = 1
    m = Memory(sys.argv[1])
    ids = m.remember_many(({"content": f"note {i} on churn"} for i in range(3000)), batch_size=500)
    m.close()
    print("stored", len(ids), flush=True)
""")


def test_a_script_without_a_main_guard_runs_once_subprocess(tmp_path):
    script = tmp_path / "import_notes.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "m.duckdb")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["top level ran", "stored 3000"]


def broken_source():
    """Four records, then the source fails."""
    for i in range(4):
        yield {"content": f"note {i} on churn"}
    raise RuntimeError("the source broke")


def test_reading_ahead_changes_nothing_a_caller_sees(workers, db_path):
    with Memory(db_path) as m:
        with pytest.raises(RuntimeError, match="the source broke"):
            m.remember_many(broken_source(), batch_size=2)
        assert m.store.user_stats(m.user_id)["observations"] == 4  # both full batches, as without read-ahead
        bad_first = [{"content": ""}] + [{"content": f"x {i}"} for i in range(5)]
        with pytest.raises(Exception, match="content is empty"):
            m.remember_many(bad_first, batch_size=2)
        assert m.store.user_stats(m.user_id)["observations"] == 4


def test_a_bulk_write_leaves_duckdb_as_it_found_it(db_path, tmp_path):
    from slm_magic.storage import attachments

    def threshold():
        return attachments._connection().execute("SELECT current_setting('checkpoint_threshold')").fetchall()[0][0]

    before = threshold()
    with Memory(db_path) as a, Memory(tmp_path / "other.duckdb") as b:
        with a.store.bulk():
            with b.store.bulk():
                pass
            assert threshold() != before  # still inside a's bulk write
        assert threshold() == before
        with pytest.raises(RuntimeError):
            with a.store.bulk():
                raise RuntimeError("stop")
        assert threshold() == before


def test_a_batch_is_written_while_the_next_is_read_and_an_error_stops_both(workers, db_path, monkeypatch):
    """A bulk write inserts batch k in a thread while batch k + 1 is checked and analysed: what
    was stored before an error is in the index too, and nothing after a failed insert is written."""
    from slm_magic.errors import StoreError

    with Memory(db_path) as m:
        with pytest.raises(RuntimeError, match="the source broke"):
            m.remember_many(broken_source(), batch_size=2)
        assert m.index.n_live == 4 and len(m.recall("note churn").memories) == 4  # the last one in flight too
        insert, calls = m.store.insert_many, []

        def second_fails(columns):
            calls.append(len(columns["content"]))
            if len(calls) == 2:
                raise StoreError("the disk is full")
            return insert(columns)

        monkeypatch.setattr(m.store, "insert_many", second_fails)
        with pytest.raises(StoreError, match="disk is full"):
            m.remember_many([{"content": f"later {i} on churn"} for i in range(300)], batch_size=100)
        assert calls == [100, 100]  # the third batch was read, never written
        assert m.store.user_stats(m.user_id)["observations"] == 104
        assert m.index.n_live == 104 and len(m.recall("later", limit=200).memories) == 100


def _insert_announced(m, monkeypatch):
    """The store's insert, setting an event each time one returns (the batch is in the file)."""
    import threading

    inserted = threading.Event()
    insert = m.store.insert_many

    def announced(columns):
        got = insert(columns)
        inserted.set()
        return got

    monkeypatch.setattr(m.store, "insert_many", announced)
    return inserted


def test_a_recall_while_a_batch_is_written_sees_it_once(db_path, monkeypatch):
    """The records' own generator recalls (a dedupe check) right after a batch reached the file:
    the catch-up waits until that batch is in the index too, instead of adding it a second time."""
    with Memory(db_path) as m:
        m.remember("first note about billing")
        inserted = _insert_announced(m, monkeypatch)

        def source():
            for i in range(400):
                if i == 250:  # (read after batch 1 was handed to the writer)
                    assert inserted.wait(60)
                    m.recall("churn")
                yield {"content": f"note {i} on churn retries"}

        m.remember_many(source(), batch_size=100)
        assert m.index.n_live == 401 == m.count()
        hits = [r.fact_id for r in m.recall("churn retries", limit=1000).memories]
        assert len(hits) == len(set(hits)) == 400


def test_another_memory_writing_during_a_bulk_write_keeps_the_session_chains(db_path, monkeypatch, tmp_path):
    """A second Memory on the file writes into the same session between two batches of a bulk
    write: both kernels' session chains equal those of an index rebuilt from the file."""
    a, b = Memory(db_path), Memory(db_path)
    a.remember("seed note", session_id="s1")
    b.recall("seed")
    inserted = _insert_announced(a, monkeypatch)

    def source():
        for i in range(500):
            if i in (250, 350, 450):
                assert inserted.wait(60)
                inserted.clear()
                b.remember(f"b note {i} churn", session_id="s1")
            yield {"content": f"a note {i} churn", "session_id": "s1"}

    a.remember_many(source(), batch_size=100)
    b.recall("churn")
    chains = {}
    for name, mem in (("a", a), ("b", b)):
        docs = mem.index.docs
        live = np.flatnonzero(docs.alive[: docs.size])
        chains[name] = (live.tolist(), docs.prev[live].tolist(), docs.next[live].tolist())
    a.close()
    b.close()
    for f in tmp_path.glob("*.idx"):
        f.unlink()
    with Memory(db_path) as rebuilt:
        docs = rebuilt.index.docs
        live = np.flatnonzero(docs.alive[: docs.size])
        assert chains["a"] == chains["b"] == (live.tolist(), docs.prev[live].tolist(), docs.next[live].tolist())
        assert len(live) == 504


def test_an_interrupt_while_a_batch_is_indexed_does_not_index_it_again(db_path, monkeypatch):
    with Memory(db_path) as m:
        add_table, calls = m.replica.rows.add_table, []

        def interrupted(table):
            calls.append(table.num_rows)
            if len(calls) == 2:
                raise KeyboardInterrupt  # Ctrl-C while the second batch goes into the index
            return add_table(table)

        monkeypatch.setattr(m.replica.rows, "add_table", interrupted)
        with pytest.raises(KeyboardInterrupt):
            m.remember_many([{"content": f"note {i} on churn"} for i in range(300)], batch_size=100)
        assert calls == [100, 100] and m.count() == 200 == m.index.n_live
