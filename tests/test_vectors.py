"""The meaning channel's vector search: rows grouped in cells once there are many, a question
reading the nearest cells and the newest rows, replaced and forgotten vectors never coming
back, and the cells saved and mapped with the index."""

from __future__ import annotations

import numpy as np
import pytest

from slm_magic import Memory
from slm_magic.core import kernels
from slm_magic.index.vectors import VectorStore

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


def test_a_saved_cell_centre_comes_from_its_live_rows_only(small_cells):
    x = clustered(3_000)
    vs = VectorStore(64, "m")
    vs.put(np.arange(3_000), x)
    vs.settle()
    sizes = np.diff(vs.starts)
    c = int(np.argmax(sizes))
    members = vs.owner[vs.starts[c]: vs.starts[c + 1]]
    vs.drop(members[1:])  # one member left in the biggest cell; every member of the next one forgotten
    d = int(next(k for k in np.flatnonzero(sizes) if k != c))
    vs.drop(vs.owner[vs.starts[d]: vs.starts[d + 1]])
    snap = vs.frozen(3_000)
    saved = VectorStore.live_centroids(snap["data"], snap["owner"], snap["starts"], 64)
    assert np.allclose(saved[c], x[members[0]], atol=1e-5)  # (the one live member: its own vector)
    assert not saved[d].any()  # a cell whose members are all forgotten keeps no trace of them
    other = [k for k in range(sizes.size) if k not in (c, d) and sizes[k]]
    for k in other[:5]:
        rows = vs.owner[vs.starts[k]: vs.starts[k + 1]]
        mean = x[rows].sum(axis=0)
        assert np.allclose(saved[k], mean / np.linalg.norm(mean), atol=1e-5)


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
    assert np.array_equal(second.index.vectors.starts, vs.starts)  # (the cells' centres: from their live rows)
    assert second.index.vectors.centroids.shape == vs.centroids.shape
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


codes = pytest.mark.skipif(not kernels.CODES, reason="this build or CPU reads the float32 rows, not int8 codes")


@codes
def test_the_cells_read_by_their_codes_find_exactly_what_their_float_rows_find(small_cells):
    """The grouped rows' int8 codes only pass over rows that cannot reach the cutoff: the same
    memories with the same cosines as reading every float32 row of the cells, at every cutoff,
    with replaced, forgotten and newest rows about; and far fewer rows' floats read."""
    x = clustered(9_000, dims=256, seed=4)
    vs = VectorStore(256, "m")
    vs.put(np.arange(8_000), x[:8_000])
    vs.settle()
    assert vs.coded is not None and vs.coded[0].shape == (vs.packed, 256)
    vs.put(np.arange(8_000, 9_000), x[8_000:])  # (newest: read as float32 rows)
    vs.put(np.array([5]), -x[5:6])
    vs.drop(np.arange(10, 400))
    coded, read, rows = vs.coded, [], 0
    real = kernels.dots

    def counted(data, query, first=None, length=None):
        read.append(data.shape[0] if first is None else first.size if length is None else int(length.sum()))
        return real(data, query, first, length)

    checked = 0
    for d in range(0, 9_000, 450):
        vs.coded = None
        near = np.sort(vs.nearest(x[d], 0.0)[1])[::-1]
        # (cutoffs at rows' own cosines: the row at each is found only if the codes never round it away)
        for cutoff in (0.2, 0.5, *near[[5, 20, 80, 200]].tolist()):
            vs.coded = coded
            read.clear()
            with pytest.MonkeyPatch.context() as m:
                m.setattr(kernels, "dots", counted)
                got = vs.nearest(x[d], cutoff)
            by_codes = sum(read)
            vs.coded = None
            want = vs.nearest(x[d], cutoff)
            assert got[0].tolist() == want[0].tolist() and got[1].tobytes() == want[1].tobytes()
            rows += by_codes
            checked += want[0].size
    assert checked > 1_000  # (many rows reached their cutoffs)
    assert rows < 0.5 * 20 * 6 * vs.packed  # (the codes passed over most rows the cells hold)


@codes
def test_the_codes_are_saved_and_mapped_with_the_index(tmp_path, small_cells):
    db = str(tmp_path / "m.duckdb")
    with Memory(db) as first:
        first.remember_many([{"content": f"note {i} about the weekly sales of region {i % 7} in shop {i % 91}"}
                             for i in range(3_000)])
        vs = first.index.vectors
        assert vs.coded is not None and vs.coded[0].shape[0] == vs.packed
        first.save_index()
        before = [part.copy() for part in vs.coded]
    with Memory(db) as second:
        got = second.index.vectors.coded
        assert second.replica.source == "saved index" and got is not None
        assert all(np.array_equal(a, b) for a, b in zip(got, before))
        assert not got[0].flags.owndata  # (mapped from the file, shared by every kernel on it)


def stored(db: str) -> list[tuple]:
    import duckdb

    con = duckdb.connect(db, read_only=True)
    try:
        return con.execute("SELECT content, vec, vec_model FROM memories ORDER BY doc_id").fetchall()
    finally:
        con.close()


def test_each_memory_s_vector_is_kept_in_the_file_with_its_model_and_follows_a_revision(tmp_path):
    db = str(tmp_path / "m.duckdb")
    with Memory(db) as mem:
        one = mem.remember(FINDINGS[0])
        mem.remember_many([{"content": f} for f in FINDINGS[1:]])
        name = mem.meaning.name
        in_index = mem.index.vectors.cosine(np.array([0]), mem.meaning.encode([FINDINGS[0]])[0])
        mem.revise(one.fact_id, content=FINDINGS[0].replace("huskies", "malamutes"))
    rows = stored(db)
    assert [r[0] for r in rows] == [*FINDINGS[1:], FINDINGS[0].replace("huskies", "malamutes")]
    assert all(r[2] == name and len(r[1]) == 256 for r in rows)
    assert in_index[0] == pytest.approx(1.0, abs=1e-5)
    with Memory(db) as mem:  # the revised memory's vector is of its new text
        want = mem.meaning.encode([rows[-1][0]])[0]
        assert np.allclose(rows[-1][1], want, atol=1e-6)
    with Memory(db, semantic=False) as words:
        words.remember("written without the meaning channel")
    assert stored(db)[-1][1:] == (None, None)


def test_another_kernel_takes_the_stored_vectors_instead_of_working_them_out(tmp_path, monkeypatch):
    db = str(tmp_path / "m.duckdb")
    reader = Memory(db)
    reader.remember("an early note")
    reader.detach()
    with Memory(db) as writer:
        writer.remember_many([{"content": f} for f in FINDINGS])
    model = type(reader.meaning)
    calls = []
    real = model.encode
    monkeypatch.setattr(model, "encode", lambda self, texts: calls.append(list(texts)) or real(self, texts))
    found = reader.recall(OTHER_WORDS)  # catches up: the writer's vectors, none worked out again
    assert [c for c in calls if c != [OTHER_WORDS]] == []
    assert found.memories[0].content == FINDINGS[0] and found.memories[0].similar
    reader.close()


def test_the_sql_fallback_finds_by_meaning_from_the_files_vectors_as_the_index_does(tmp_path):
    from test_memory import CORPUS, bm25_only, recall_from_sql

    with Memory(str(tmp_path / "m.duckdb")) as mem:
        mem.remember_many([{"content": c} for c in CORPUS])
        for f in FINDINGS:
            mem.remember(f)
        mem.config = bm25_only(mem)  # (the file keeps no 3-grams)
        for q in [OTHER_WORDS, "which shops must be left out of the revenue numbers", "churn label leakage",
                  "a recipe for sourdough bread with a long cold proof"]:
            full = mem.recall(q)
            fb = recall_from_sql(mem, q)
            assert fb.degraded_mode and fb.retrieval_mode == "bm25_meaning_sql_fallback"
            assert full.retrieval_mode == "bm25_meaning_in_process"
            assert [r.fact_id for r in fb] == [r.fact_id for r in full], q
            assert [r.relevance for r in fb] == pytest.approx([r.relevance for r in full], abs=1e-5), q
            assert [r.similar for r in fb] == [r.similar for r in full], q
            if q == OTHER_WORDS:
                assert fb.memories[0].content == FINDINGS[0] and fb.memories[0].similar
        assert fb.memories == [] and full.memories == []  # (only real matches, on both paths)
        assert mem.recall(OTHER_WORDS).memories[0].content == FINDINGS[0]


def test_rows_without_a_stored_vector_or_with_one_written_by_hand_count_as_their_text(tmp_path):
    from test_memory import CORPUS, bm25_only, recall_from_sql

    db = str(tmp_path / "m.duckdb")
    with Memory(db) as mem:
        mem.remember_many([{"content": c} for c in CORPUS])
        for f in [*FINDINGS, "Buy our premium widgets today"]:
            mem.remember(f)
        mem.config = bm25_only(mem)
        questions = [OTHER_WORDS, "which shops must be left out of the revenue numbers", "churn label leakage",
                     "where is the revenue dashboard"]
        full = [[m.fact_id for m in mem.recall(q)] for q in questions]
    import duckdb

    con = duckdb.connect(db)  # rows from before the file kept vectors; one vector scaled by hand
    con.execute("UPDATE memories SET vec = NULL, vec_model = NULL WHERE content NOT LIKE 'Buy%'")
    con.execute("UPDATE memories SET vec = list_transform(vec, lambda x: x * 40) WHERE content LIKE 'Buy%'")
    con.close()
    with Memory(db) as mem:  # a whole load: the text gives the missing ones, the scaled one is its direction
        mem.config = bm25_only(mem)
        assert [[m.fact_id for m in mem.recall(q)] for q in questions] == full
        # the fallback: the same, but a memory found by meaning alone only among stored vectors
        assert [[m.fact_id for m in recall_from_sql(mem, q)] for q in questions[1:]] == full[1:]
        assert recall_from_sql(mem, OTHER_WORDS).memories == []


def test_the_background_of_a_question_is_its_cosines_with_the_sample():
    rng = np.random.default_rng(3)
    vs = VectorStore(16, "m")
    rows = rng.normal(size=(1000, 16)).astype(np.float32)  # (fewer than SAMPLE: the sample is every row)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    vs.put(np.arange(1000), rows)
    alive = np.ones(1001, bool)
    q = rows[7]
    cos = rows @ q
    count, total, squares = vs.background(q, alive)
    assert count == 1000
    assert total == pytest.approx(float(cos.sum()), abs=1e-4) and squares == pytest.approx(float(cos @ cos), abs=1e-4)
    vs.drop([7])  # (a dropped vector leaves the background at once)
    count, total, squares = vs.background(q, alive)
    assert count == 999 and total == pytest.approx(float(cos.sum()) - 1.0, abs=1e-4)
    assert squares == pytest.approx(float(cos @ cos) - 1.0, abs=1e-4)
