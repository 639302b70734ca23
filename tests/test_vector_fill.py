"""The vectors that follow a bulk write (index/fill.py): its memories are found by their words
at once, a recall says it is degraded while their vectors are worked out in the background,
and then finds them by meaning too; the vectors are in the file, a fill cut short is finished
by the next open, and a vector is never given to a memory revised since."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from slm_magic import Memory
from slm_magic.engine.writer import Writer
from slm_magic.index.fill import VectorFill

from test_meaning import FINDINGS, OTHER_WORDS


N = 10_000


@pytest.fixture(autouse=True)
def words_first(monkeypatch):
    """Every bulk write here is stored words first (in use, those beyond its first 200,000)."""
    monkeypatch.setattr(Writer, "VECTORS_INLINE", 0)


def bulk(n: int = N) -> list[dict]:
    """One batch of memories, with the findings in it."""
    filler = [{"content": f"note {i} about the weekly sales of region {i % 7} and store {i % 113}"}
              for i in range(n - len(FINDINGS))]
    return filler + [{"content": f} for f in FINDINGS]


def vectors_in_file(m: Memory) -> tuple[int, int]:
    with m.store.lock:  # (as every statement of the store: the fill's thread shares the connection)
        return tuple(m.store.con.execute("SELECT count(*), count(vec) FROM memories").fetchall()[0])


@pytest.fixture
def gate(monkeypatch):
    """The fill waits at its first step until the test opens the gate."""
    opened = threading.Event()
    real = VectorFill._fill

    def gated(self, *args):
        opened.wait(timeout=60)  # (a failed assertion before the test opens it must not hang the close)
        return real(self, *args)

    monkeypatch.setattr(VectorFill, "_fill", gated)
    return opened


def test_a_bulk_write_is_found_by_words_at_once_and_by_meaning_once_its_vectors_follow(tmp_path, gate):
    with Memory(str(tmp_path / "m.duckdb")) as m:
        m.remember_many(bulk())
        assert vectors_in_file(m) == (N, 0)  # stored without waiting for the vectors
        words = m.recall("huskies wolves snow")
        assert words.memories[0].content == FINDINGS[0]
        assert words.degraded_mode and "vectors are still being worked out" in words.degraded_reason
        assert "being worked out" in m.status().meaning
        assert not m.recall(OTHER_WORDS).memories  # not by meaning yet: no vector to compare
        gate.set()
        assert m.wait_for_vectors(timeout=120)
        found = m.recall(OTHER_WORDS)
        assert not found.degraded_mode and found.degraded_reason is None
        assert found.memories[0].content == FINDINGS[0] and found.memories[0].similar
        assert vectors_in_file(m) == (N, N)
        assert f"vectors for {N:,} of {N:,}" in m.status().meaning


def test_a_fill_cut_short_is_finished_by_the_next_open(tmp_path, monkeypatch):
    db = str(tmp_path / "m.duckdb")
    real, steps = VectorFill._fill, []

    def one_step_then_the_file_fails(self, *args):
        if steps:
            raise OSError("the disk went away")
        steps.append(1)
        return real(self, *args)

    monkeypatch.setattr(VectorFill, "_fill", one_step_then_the_file_fails)
    with Memory(db) as m:
        m.remember_many(bulk())
        assert m.wait_for_vectors(timeout=120)
        assert "the disk went away" in m.live.fill.error
        assert vectors_in_file(m) == (N, VectorFill.STEP)  # the first step is kept
    monkeypatch.setattr(VectorFill, "_fill", real)
    with Memory(db) as again:  # the next kernel fills what is left
        assert again.wait_for_vectors(timeout=120) and again.live.fill.total == N - VectorFill.STEP
        assert vectors_in_file(again) == (N, N)
        assert again.recall(OTHER_WORDS).memories[0].content == FINDINGS[0]


def test_a_kernel_between_cells_holds_the_file_only_while_a_step_writes(tmp_path, gate):
    m = Memory(str(tmp_path / "m.duckdb"))
    m.detach()
    with m.attached():  # as %slm_import does
        m.remember_many(bulk())
    assert not m.store.connected
    gate.set()
    assert m.wait_for_vectors(timeout=120)
    assert not m.store.connected  # each step let go of what it opened
    with m.attached():
        assert vectors_in_file(m) == (N, N)
        assert m.recall(OTHER_WORDS).memories[0].content == FINDINGS[0]
    m.close()


@pytest.mark.parametrize("where", ["file", "server"])
def test_a_filled_vector_never_replaces_one_of_its_model_or_lands_on_a_revision(where, tmp_path, request, clock):
    url = str(tmp_path / "m.duckdb") if where == "file" else request.getfixturevalue("team_db")["alice"]
    with Memory(url, clock=clock) as m:
        fact = m.remember(FINDINGS[0])
        doc = m.store.con.execute("SELECT doc_id FROM memories WHERE fact_id = ?", [fact.fact_id]).fetchall()[0][0]
        other = np.ones((1, m.meaning.dims), np.float32)
        assert m.store.fill_vectors([doc], other, m.meaning.name) == 0  # it has one of this model
        assert m.store.fill_vectors([doc], other, "another-model") == 1  # another model's is replaced
        m.revise(fact.fact_id, content=FINDINGS[1])
        assert m.store.fill_vectors([doc], other, m.meaning.name) == 0  # the old position is no row now
        kept = m.store.con.execute("SELECT vec_model FROM memories WHERE fact_id = ?", [fact.fact_id]).fetchall()
        assert kept == [(m.meaning.name,)]  # the revision's own vector, of its new text


def test_an_import_is_stored_words_first_and_its_vectors_follow(tmp_path):
    with Memory(str(tmp_path / "a.duckdb")) as a:
        a.remember_many(bulk())
        assert a.wait_for_vectors(timeout=120)
        a.export(tmp_path / "all.jsonl")
    with Memory(str(tmp_path / "b.duckdb")) as b:
        b.import_file(tmp_path / "all.jsonl")
        assert vectors_in_file(b)[1] < N  # (a file's vectors are never taken: made again, here after the words)
        assert b.wait_for_vectors(timeout=120)
        assert vectors_in_file(b) == (N, N)
        assert b.recall(OTHER_WORDS).memories[0].content == FINDINGS[0]
