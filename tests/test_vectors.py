"""The meaning channel's vector search: rows grouped in cells once there are many, a question
reading the nearest cells and the newest rows, replaced and forgotten vectors never coming
back, and the cells saved and mapped with the index."""

from __future__ import annotations

import numpy as np
import pytest

from slm_magic import Memory
from slm_magic.vectors import VectorStore

from test_meaning import FINDINGS, OTHER_WORDS


def clustered(n: int, dims: int = 64, topics: int = 40, seed: int = 0) -> np.ndarray:
    """Unit vectors around `topics` directions (texts are like this: many on few subjects)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((topics, dims))
    x = centres[rng.integers(0, topics, n)] + 0.6 * rng.standard_normal((n, dims))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def small_cells(monkeypatch):
    monkeypatch.setattr(VectorStore, "EXACT", 1_000)


def exact(x: np.ndarray, live: np.ndarray, q: np.ndarray, cutoff: float) -> set[int]:
    return set(np.flatnonzero((x @ q >= cutoff) & live).tolist())


def test_without_cells_every_row_is_read_and_the_answer_is_exact():
    x = clustered(3_000)
    vs = VectorStore(64, "m")
    vs.put(np.arange(3_000), x)
    assert not vs.settle() and vs.centroids.shape[0] == 0  # (below EXACT: no cells)
    q = x[7]
    docs, cos = vs.nearest(q, 0.5)
    assert set(docs.tolist()) == exact(x, np.ones(3_000, bool), q, 0.5)
    assert np.allclose(cos, x[docs] @ q)


def test_cells_find_what_the_whole_scan_finds_for_questions_near_memories(small_cells):
    x = clustered(12_000)
    vs = VectorStore(64, "m")
    for lo in range(0, 12_000, 1_000):  # written a batch at a time, grouped as it grows
        vs.put(np.arange(lo, lo + 1_000), x[lo: lo + 1_000])
        vs.settle()
    k = vs.centroids.shape[0]
    assert k >= 64 and vs.packed > 0 and vs.used - vs.packed <= vs.NEWEST_SHARE * vs.packed + 1024
    live = np.ones(12_000, bool)
    found = wanted = 0
    for d in range(0, 12_000, 300):
        q = x[d]
        docs, cos = vs.nearest(q, 0.8)
        assert d in docs.tolist()  # a memory's own vector is always in the cells read
        assert np.allclose(cos, x[docs] @ q, atol=1e-5)
        got, want = set(docs.tolist()), exact(x, live, q, 0.8)
        assert got <= want  # (never a row below the cutoff)
        found, wanted = found + len(got), wanted + len(want)
    assert found >= 0.9 * wanted  # the cells read hold almost all of the close rows


def test_a_replaced_or_dropped_vector_never_comes_back_and_its_row_is_reclaimed(small_cells):
    x = clustered(8_000)
    vs = VectorStore(64, "m")
    vs.put(np.arange(8_000), x)
    vs.settle()
    vs.put(np.array([5]), -x[5:6])  # replaced: the old row is dead, the new one is the newest
    vs.drop([6])
    docs, _ = vs.nearest(x[5], 0.9)
    assert 5 not in docs.tolist() and 6 not in vs.nearest(x[6], 0.9)[0].tolist()
    assert vs.cosine(np.array([5, 6]), x[5]) == pytest.approx([-1.0, 0.0], abs=1e-5)
    assert vs.live == 7_999 and not vs.has[6]
    vs.drop(np.arange(100, 6_000))  # most forgotten: their rows go at the next settle
    assert vs.settle() and vs.used == vs.live == 2_099 and vs.centroids.shape[0] > 0
    vs.drop(np.arange(6_000, 7_900))  # below EXACT again: no cells, every row read
    assert vs.settle() and vs.centroids.shape[0] == 0 and vs.used == vs.live == 199
    assert set(vs.nearest(x[7_950], 0.9)[0].tolist()) == exact(x, vs.has[:8_000], x[7_950], 0.9)


def test_a_memory_with_cells_finds_other_words_keeps_its_cells_in_the_saved_index_and_forgets(tmp_path, small_cells):
    db = str(tmp_path / "m.duckdb")
    first = Memory(db)
    first.remember_many([{"content": f"note {i} about the weekly sales of region {i % 7} in shop {i % 91}"}
                         for i in range(3_000)])
    for f in FINDINGS:
        first.remember(f)
    vs = first.index.vectors
    assert vs.centroids.shape[0] > 0 and vs.packed > 0
    assert first.recall(OTHER_WORDS).memories[0].content == FINDINGS[0]
    first.save_index()
    first.close()
    second = Memory(db)  # maps the saved index: its cells too
    assert second.replica.source == "saved index"
    assert np.array_equal(second.index.vectors.centroids, vs.centroids)
    top = second.recall(OTHER_WORDS).memories[0]
    assert top.content == FINDINGS[0] and top.similar
    second.forget(top.fact.fact_id)
    assert all(m.content != FINDINGS[0] for m in second.recall(OTHER_WORDS).memories)
    second.save_index()
    second.close()
    third = Memory(db)
    assert third.replica.source == "saved index"
    assert all(m.content != FINDINGS[0] for m in third.recall(OTHER_WORDS).memories)
    v3 = third.index.vectors
    rows = v3.data[: v3.used][v3.owner[: v3.used] < 0]
    assert not rows.any()  # the forgotten memory's vector is not in the saved file
    assert v3.live == third.index.n_live == 3_004
    third.close()
