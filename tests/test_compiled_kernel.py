"""The compiled kernel (core/_kernels.c) gives numpy's numbers to the last bit and the same
choice among ties, loop by loop and for whole recalls, and refuses arrays it cannot read."""

import multiprocessing
import os
import random
from datetime import datetime

import numpy as np
import pytest

from slm_magic import Memory
from slm_magic.core import kernels
from slm_magic.core.scoring import RankingConfig

from test_ranking import VOCAB, corpus

compiled = pytest.mark.skipif(not kernels.COMPILED and os.environ.get("SLM_REQUIRE_KERNEL") != "1",
                              reason="built without a C compiler: numpy runs the loops")


@pytest.fixture
def by_numpy(monkeypatch):
    """Runs what is given the way a build without a compiler runs it."""
    def run(fn, *args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(kernels, "_kernels", None)
            return fn(*args, **kwargs)
    return run


def test_the_kernel_is_built_where_it_is_required():
    if os.environ.get("SLM_REQUIRE_KERNEL") != "1":
        pytest.skip("SLM_REQUIRE_KERNEL is not set (.ci/run sets it)")
    assert kernels.COMPILED, "the install did not build core/_kernels.c (a C compiler and Python's headers?)"


def postings(rng, n_docs, n_terms):
    docs = [np.sort(rng.choice(n_docs, size=rng.integers(1, n_docs // 2), replace=False)).astype(np.int32)
            for _ in range(n_terms)]
    tfs = [rng.integers(1, 6, size=d.size).astype(np.float32) for d in docs]
    weights = rng.uniform(0.1, 9.0, size=n_terms) * 2.2
    norm = rng.uniform(0.3, 3.0, size=n_docs + 1).astype(np.float32)
    return docs, tfs, weights, norm


@compiled
def test_postings_summed_per_memory_are_numpys_to_the_last_bit(by_numpy):
    """In blocks of memories (stores of one block and of several), a term's postings in one
    part or several (a term's segments; the kernel must add in numpy's order), and postings out
    of order (numpy sums them): the same sums and matches."""
    rng = np.random.default_rng(7)
    for trial in range(30):
        n_docs = int(rng.integers(2, 5000)) if trial % 3 else int(rng.integers(40_000, 150_000))
        docs, tfs, weights, norm = postings(rng, n_docs, int(rng.integers(1, 7)))
        if trial % 2:  # (each term in two parts, as a term's postings in two segments)
            cut = [int(rng.integers(0, d.size + 1)) for d in docs]
            docs = [p for d, c in zip(docs, cut) for p in (d[:c], d[c:])]
            tfs = [p for f, c in zip(tfs, cut) for p in (f[:c], f[c:])]
            weights = np.repeat(weights, 2)
        if trial % 5 == 4:  # (a part out of order: reversed, or two of its postings swapped,
            # which the kernel meets only on its way through the blocks)
            d0 = docs[0][::-1].copy() if trial % 10 == 4 else docs[0].copy()
            if trial % 10 == 9 and d0.size > 2:
                i, j = 0, int(rng.integers(1, d0.size - 1))  # (the first moved past a later one, not the last)
                d0[i], d0[j] = d0[j], d0[i]
            docs[0], tfs[0] = d0, tfs[0][::-1].copy() if trial % 10 == 4 else tfs[0]
        matched, scores = kernels.accumulate(docs, tfs, weights, norm, n_docs + 1)
        ref_matched, ref_scores = by_numpy(kernels.accumulate, docs, tfs, weights, norm, n_docs + 1)
        assert scores.tobytes() == ref_scores.tobytes()
        assert matched.dtype == np.int64 and matched.tolist() == ref_matched.tolist()
        assert matched.tolist() == sorted(set(np.concatenate(docs).tolist()))


@compiled
def test_the_best_sums_those_over_a_floor_and_any_memorys_sum_are_accumulates(by_numpy):
    """What a recall reads instead of every match: the k best (a tie to the lower memory; many
    ties where every tf and norm is one), those whose BM25 reaches a floor, and the BM25 of
    memories asked about, each the sum numpy's accumulate gives, to the last bit, in several
    blocks of memories; and nothing where the postings are out of order (numpy's turn)."""
    rng = np.random.default_rng(17)
    for trial in range(24):
        n_docs = int(rng.integers(2, 5000)) if trial % 3 else int(rng.integers(40_000, 150_000))
        docs, tfs, weights, norm = postings(rng, n_docs, int(rng.integers(1, 7)))
        if trial % 4 == 1:
            tfs, norm = [np.ones_like(f) for f in tfs], np.ones_like(norm)
        if trial % 6 == 5 and len(weights) > 1:  # (a term that adds 0: its memories that no other term holds are no match)
            weights = weights.copy()
            weights[0] = 0.0
        matched, sums = by_numpy(kernels.accumulate, docs, tfs, weights, norm, n_docs + 1)
        assert (sums != 0).all()
        whole = kernels.accumulate(docs, tfs, weights, norm, n_docs + 1)
        assert whole[0].tolist() == matched.tolist() and whole[1].tobytes() == sums.tobytes()
        for k in (1, 10, 104, matched.size + 3):
            best = np.sort(kernels.best(sums, matched, k))
            got = kernels.best_sums(docs, tfs, weights, norm, k=k)
            assert got[0].tolist() == matched[best].tolist() and got[1].tobytes() == sums[best].tobytes()
        for q in (0.0, 0.5, 0.97):
            floor = float(np.quantile(sums, q))
            got = kernels.best_sums(docs, tfs, weights, norm, floor=floor)
            assert got[0].tolist() == matched[sums >= floor].tolist()
            assert got[1].tobytes() == sums[sums >= floor].tobytes()
        asked = rng.integers(0, n_docs + 1, 40)
        want = np.array([sums[matched == d][0] if (matched == d).any() else 0.0 for d in asked.tolist()])
        assert kernels.sums_at(docs, tfs, weights, norm, asked).tobytes() == want.tobytes()
    big = postings(np.random.default_rng(5), 100_000, 3)
    for swap in ((0, -1), (1, 2), (-2, 5_000), (-3, -2)):  # (reversed ends; in one block; across blocks; before the last)
        docs, tfs, weights, norm = (list(a) if isinstance(a, list) else a for a in big)
        d0 = docs[0].copy()
        d0[swap[0]], d0[swap[1]] = d0[swap[1]], d0[swap[0]]
        docs[0] = d0
        assert kernels.best_sums(docs, tfs, weights, norm, k=3) is None
        assert kernels.best_sums(docs, tfs, weights, norm, floor=1.0) is None
        assert kernels.sums_at(docs, tfs, weights, norm, asked) is None
        matched, sums = kernels.accumulate(docs, tfs, weights, norm, 100_001)  # (numpy's, as it falls back)
        ref = by_numpy(kernels.accumulate, docs, tfs, weights, norm, 100_001)
        assert matched.tolist() == ref[0].tolist() and sums.tobytes() == ref[1].tobytes()
    # (and after each of them, sums as before: nothing of a stopped call is left in its buffer)
    docs, tfs, weights, norm = big
    matched, sums = by_numpy(kernels.accumulate, docs, tfs, weights, norm, 100_001)
    got = kernels.best_sums(docs, tfs, weights, norm, floor=0.0)
    assert got[0].tolist() == matched.tolist() and got[1].tobytes() == sums.tobytes()


def _halves_and_one_pass(docs, tfs, weights, norm, k, floor, room):
    """best_sums' (matches, their sums' bytes), the pass shared with the worker where it may be
    and never shared: the two the same."""
    out = []
    for split in (True, False):
        matched, sums = np.empty(room, np.int64), np.empty(room)
        n = kernels._kernels.best_sums(list(docs), list(tfs), [float(w) for w in weights], norm, k, floor, matched,
                                       sums, split)
        out.append((matched[:n].tolist(), sums[:n].tobytes()))
    assert out[0] == out[1]
    return out[0]


@compiled
def test_a_pass_shared_with_the_worker_gives_one_pass_s_sums_and_choice(by_numpy):
    """A pass of many postings is summed in two halves (this thread's blocks and the worker's,
    or both here while the worker reads a search): the same sums, the same k best with ties to
    the lower memory across the halves' seam (every tf and norm one: everything ties), the same
    matches over a floor, as one pass and as numpy; postings out of order just past the seam
    are still caught."""
    rng = np.random.default_rng(41)
    n_docs = 300_000
    docs, tfs, weights, norm = postings(rng, n_docs, 4)
    assert sum(d.size for d in docs) >= 65_536  # (what the kernel shares with its worker)
    ties = ([np.ones_like(f) for f in tfs], np.ones_like(norm))
    for tf, nm in ((tfs, norm), ties):
        matched, sums = by_numpy(kernels.accumulate, docs, tf, weights, nm, n_docs + 1)
        for k in (1, 144, 5_000):
            best = np.sort(kernels.best(sums, matched, k))
            assert _halves_and_one_pass(docs, tf, weights, nm, k, -np.inf, k) == (matched[best].tolist(),
                                                                                 sums[best].tobytes())
        for q in (0.0, 0.9):
            floor = float(np.quantile(sums, q))
            assert _halves_and_one_pass(docs, tf, weights, nm, 0, floor, matched.size) == (
                matched[sums >= floor].tolist(), sums[sums >= floor].tobytes())
    if kernels.CODES:  # (the worker busy with a search of the meaning channel's: this thread sums both halves)
        x = rng.standard_normal((1_000, 64)).astype(np.float32)
        coded = kernels.quantize(x)
        many = (np.tile(coded[0], (600, 1)), *(np.tile(a, 600) for a in coded[1:]))
        pending = kernels.near_codes(many, x[3], np.array([0], np.int64), np.array([600_000], np.int64), 0.5,
                                     later=True)
        got = kernels.best_sums(docs, tfs, weights, norm, k=144)
        pending()
        matched, sums = by_numpy(kernels.accumulate, docs, tfs, weights, norm, n_docs + 1)
        best = np.sort(kernels.best(sums, matched, 144))
        assert got[0].tolist() == matched[best].tolist() and got[1].tobytes() == sums[best].tobytes()
    for at in (150_000, 160_000, 299_000):  # (a posting moved just past the middle, and near the end)
        d0 = docs[0].copy()
        i = int(np.searchsorted(d0, at))
        d0[i], d0[i + 1] = d0[i + 1], d0[i]
        assert kernels.best_sums([d0, *docs[1:]], tfs, weights, norm, k=3) is None
        assert kernels.best_sums([d0, *docs[1:]], tfs, weights, norm, floor=1.0) is None
    # (more matches than the room, then postings out of order: the first error stands, shared or not)
    late = np.concatenate([np.arange(100_000), [150_000, 149_000, 160_000]]).astype(np.int32)
    for split in (True, False):
        with pytest.raises(ValueError, match="more matches"):
            kernels._kernels.best_sums([late], [np.ones(late.size, np.float32)], [1.0], norm, 0, -np.inf,
                                       np.empty(10, np.int64), np.empty(10), split)
    matched, sums = by_numpy(kernels.accumulate, docs, tfs, weights, norm, n_docs + 1)
    got = kernels.best_sums(docs, tfs, weights, norm, floor=0.0)  # (nothing of a stopped call left in a buffer)
    assert got[0].tolist() == matched.tolist() and got[1].tobytes() == sums.tobytes()


@compiled
def test_score_bounds_are_numpys_within_a_unit_of_1e_15(by_numpy):
    rng = np.random.default_rng(3)
    cfg = RankingConfig()
    n = 3000
    dense = np.where(rng.random(n + 1) < 0.4, rng.uniform(0, 30, n + 1), 0.0)
    own = np.flatnonzero(dense)
    raw = dense[own]
    rb = rng.uniform(0, 1.5, n + 1)
    revision = rng.integers(0, 25, n + 1).astype(np.int32)
    updated = rng.uniform(1.7e9, 1.8e9, n + 1)
    for idf_max, cmax, wg, lift, after in [(12.3, 0.0, 0.0, 0.0, None), (12.3, 0.8, 0.1, 0.25, 1.75e9),
                                          (0.0, 0.0, 0.1, 0.0, 1.79e9), (40.0, 1.0, 0.0, 0.5, 1.76e9)]:
        got = kernels.bounds(own, raw, rb, revision, updated, cfg, idf_max=idf_max, recency_scale=0.7,
                             context_max=cmax, gram_weight=wg, lift=lift, updated_after=after)
        ref = by_numpy(kernels.bounds, own, raw, rb, revision, updated, cfg, idf_max=idf_max, recency_scale=0.7,
                       context_max=cmax, gram_weight=wg, lift=lift, updated_after=after)
        assert (np.isneginf(got) == np.isneginf(ref)).all()
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-15)
        if after is not None:
            assert np.isneginf(got).any() and np.isfinite(got).any()


@compiled
def test_the_best_few_are_one_choice_whatever_the_order_and_the_ties(by_numpy):
    rng = np.random.default_rng(11)
    for _ in range(60):
        n = int(rng.integers(0, 3000))
        values = rng.integers(0, 40, n).astype(np.float64)  # (many ties)
        values[rng.random(n) < 0.05] = -np.inf
        ids = rng.permutation(10 * n + 1)[:n].astype(np.int64)
        for k in (0, 1, 7, 64, n, n + 5):
            got = kernels.best(values, ids, k)
            assert got.tolist() == by_numpy(kernels.best, values, ids, k).tolist()
            want = sorted(range(n), key=lambda i: (-values[i], ids[i]))[:k]
            assert got.tolist() == want


@compiled
def test_arrays_it_cannot_read_are_refused_not_read():
    f32 = np.zeros(10, np.float32)
    with pytest.raises(TypeError, match="float64"):
        kernels._kernels.best(np.zeros(3, np.float32), np.arange(3), np.empty(2, np.int64))
    with pytest.raises(IndexError, match="outside"):
        kernels._kernels.best_sums([np.array([3, 12], np.int32)], [np.ones(2, np.float32)], [1.0], f32, 0, -np.inf,
                                   np.empty(2, np.int64), np.empty(2))
    with pytest.raises(ValueError, match="differ"):
        kernels._kernels.best(np.zeros(3), np.arange(4), np.empty(2, np.int64))



@compiled
def test_recalls_are_the_same_with_the_kernel_and_with_numpy(clock, monkeypatch):
    """Whole recalls over a store big enough to prune (fields, sessions, the age gate): the
    same memories with the same scores, the kernel or numpy running the loops."""
    clock.now = datetime(2026, 6, 1)
    rnd = random.Random(5)
    records = corpus(6000, seed=3)
    for r in records:
        r["title"] = " ".join(rnd.sample(VOCAB[:80], 2))
    questions = [" ".join(rnd.sample(VOCAB[:60], rnd.randint(1, 4))) for _ in range(40)]
    with Memory(":memory:", clock=clock, user_id="ana") as m:
        m.remember_many(records)
        sid = m.session_init().session_id

        def answers():
            return [[(h.fact_id, round(h.score.value, 12)) for h in m.recall(q, limit=10, max_age_days=30)]
                    for q in questions]

        compiled_answers = answers()
        monkeypatch.setattr(kernels, "_kernels", None)
        numpy_answers = answers()
        m.recall(questions[0], session_id=sid)
    assert sum(len(a) for a in compiled_answers) >= 200
    assert compiled_answers == numpy_answers


@compiled
def test_the_3gram_dot_products_are_numpys_to_the_last_bit(by_numpy):
    """Memories whose entries lie in the saved index's arrays, in the grown ones, across both
    or none; a query's grams some memories hold and some none does, and ids 65,536 apart (the
    kernel's first test of an id reads it modulo 2^16)."""
    from slm_magic.index.ngrams import GramStore

    rng = np.random.default_rng(13)
    for _ in range(30):
        n_docs, base_used = int(rng.integers(1, 400)), int(rng.integers(0, 3000))
        lens = rng.integers(0, 40, n_docs)
        grown_used = max(0, int(lens.sum()) - base_used) + int(rng.integers(0, 50))
        store = GramStore.__new__(GramStore)  # (its arrays as a saved index and later writes leave them)
        store.start = np.zeros(n_docs, np.int64)
        store.start[1:] = np.cumsum(lens)[:-1]
        store.stop = store.start + lens
        keep = store.stop <= base_used + grown_used
        store.start, store.stop = np.where(keep, store.start, 0), np.where(keep, store.stop, 0)
        store.base_used = base_used
        store.base_gram = (rng.integers(0, 500, base_used) + (1 << 16) * rng.integers(0, 3, base_used)).astype(np.int32)
        store.base_w = rng.uniform(0.5, 3, base_used).astype(np.float32)
        store.gram_buf = (rng.integers(0, 500, grown_used) + (1 << 16) * rng.integers(0, 3, grown_used)).astype(np.int32)
        store.w_buf = rng.uniform(0.5, 3, grown_used).astype(np.float32)
        asked = int(rng.integers(1, 60))
        query_ids = np.unique(rng.integers(0, 520, asked) + (1 << 16) * rng.integers(0, 3, asked)).astype(np.int64)
        query_w = rng.uniform(0.1, 4, query_ids.size)
        docs = rng.integers(0, n_docs, int(rng.integers(0, 50))).astype(np.int64)
        got = kernels.gram_dots(docs, store, query_ids, query_w)
        ref = by_numpy(kernels.gram_dots, docs, store, query_ids, query_w)
        assert got.tobytes() == ref.tobytes()
    with pytest.raises(IndexError, match="outside"):
        kernels._kernels.gram_dots(np.array([n_docs]), store.start, store.stop, store.base_gram, store.base_w,
                                   store.gram_buf, store.w_buf, base_used, query_ids, query_w, np.empty(1))


@compiled
def test_the_meaning_channel_s_dot_products_are_numpys_to_the_last_bit(by_numpy, tmp_path):
    """Rows by runs (a cell's rows, the newest) and by slot (memories asked for), rows of 256
    numbers and of lengths with a tail past the last 32; rows in a read-only map (a saved
    index's); close to BLAS's products, and out-of-range rows or a wrong shape refused."""
    rng = np.random.default_rng(17)
    for d in (256, 384, 37, 5):
        data = rng.standard_normal((500, d)).astype(np.float32)
        data /= np.linalg.norm(data, axis=1, keepdims=True)
        query = data[3] + 0.1 * rng.standard_normal(d).astype(np.float32)
        first = np.array([0, 40, 40, 300, 499], np.int64)
        length = np.array([10, 0, 100, 150, 1], np.int64)
        slots = rng.integers(0, 500, 60).astype(np.int64)
        for args in ((first, length), (slots,), (np.empty(0, np.int64),)):
            got = kernels.dots(data, query, *args)
            ref = by_numpy(kernels.dots, data, query, *args)
            assert got.dtype == np.float32 and got.tobytes() == ref.tobytes()
        rows = np.concatenate([np.arange(a, a + n) for a, n in zip(first, length)])
        assert np.allclose(kernels.dots(data, query, first, length), data[rows] @ query, atol=1e-5)
    path = tmp_path / "rows.f32"
    data.tofile(path)
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=data.shape)
    assert kernels.dots(mapped, query, slots).tobytes() == kernels.dots(data, query, slots).tobytes()
    out = np.empty(1, np.float32)
    with pytest.raises(IndexError, match="outside"):
        kernels._kernels.dots(data, np.array([500], np.int64), None, query, out)
    with pytest.raises(IndexError, match="outside"):
        kernels._kernels.dots(data, np.array([490], np.int64), np.array([11], np.int64), query, out)
    with pytest.raises(ValueError, match="two-dimensional float32"):
        kernels._kernels.dots(data[:, :4].copy(), np.array([0], np.int64), None, query, out)
    with pytest.raises(ValueError, match="fewer"):
        kernels._kernels.dots(data, np.array([0, 1], np.int64), None, query, out)


@compiled
def test_the_codes_product_is_numpy_s_integer_product():
    """With no slack, a row is kept exactly when its codes' integer product with the question's
    (times both scales) reaches the cutoff, as numpy works it out: for rows of 256, 48 and 37
    numbers (32 at a time, then one by one), codes of ±127 included."""
    if not kernels.CODES:
        pytest.skip("this CPU reads the float32 rows")
    rng = np.random.default_rng(29)
    for d in (256, 48, 37):
        codes = rng.integers(-127, 128, (600, d)).astype(np.int8)
        codes[:5] = 127
        codes[5:10] = -127
        q8 = rng.integers(-127, 128, d).astype(np.int8)
        q8[:3] = -127
        scale, none = np.full(600, 0.01, np.float32), np.zeros(600, np.float32)
        dot = codes.astype(np.int64) @ q8.astype(np.int64)
        near = scale.astype(np.float64) * 0.02 * dot
        first, length = np.array([0], np.int64), np.array([600], np.int64)
        for cutoff in np.quantile(near, [0.0, 0.3, 0.9, 0.99]) + 0.5e-4:  # (between two products)
            out = np.empty(600, np.int64)
            n = kernels._kernels.near_codes(codes, scale, none, none, first, length, q8, 0.02, 0.0, 0.0,
                                            float(cutoff), out, False)
            assert out[:n].tolist() == np.flatnonzero(near + 1e-4 >= cutoff).tolist()


def _after_fork(search, parents, want, results) -> None:
    """In a forked child: the parent's pending search and two of the child's own, interleaved."""
    b = search()
    a_rows = parents().tolist()
    c = search()
    results.put([a_rows, c().tolist(), b().tolist()] == [want] * 3)


@compiled
def test_pending_searches_overlap_and_survive_a_fork():
    """Two pending searches at once (the second read by its caller: the worker holds one) give
    what a search read at once gives; a process forked while the parent's search is under way
    (or done and not yet asked for) has no worker: the child reads that search itself, starts a
    worker of its own, and its searches give the same rows (a child that waited on the
    parent's worker, or lost a search handed over, would never end)."""
    if not kernels.CODES:
        pytest.skip("this CPU reads the float32 rows")
    rng = np.random.default_rng(31)
    x = rng.standard_normal((3_000, 64)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    coded = kernels.quantize(x)
    first, length = np.array([0, 1_000], np.int64), np.array([800, 2_000], np.int64)
    want = [kernels.near_codes(coded, x[i], first, length, 0.3).tolist() for i in (5, 9)]
    one = kernels.near_codes(coded, x[5], first, length, 0.3, later=True)
    two = kernels.near_codes(coded, x[9], first, length, 0.3, later=True)
    assert [two().tolist(), one().tolist()] == want[::-1]
    many = np.tile(coded[0], (500, 1))  # (1,500,000 rows: a search long enough to be under way at the fork)
    coded_many = (many, *(np.tile(a, 500) for a in coded[1:]))
    whole = (np.array([0], np.int64), np.array([1_500_000], np.int64))
    every = kernels.near_codes(coded_many, x[9], *whole, 0.3).tolist()

    def search():
        return kernels.near_codes(coded_many, x[9], *whole, 0.3, later=True)
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    parents = search()
    child = ctx.Process(target=_after_fork, args=(search, parents, every, results))
    child.start()
    assert parents().tolist() == every
    child.join(timeout=120)  # (a bound on a hang, not a wait for an event that has one)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0 and results.get(timeout=5) is True


@compiled
def test_the_codes_bound_every_row_and_bad_arrays_are_refused():
    """A row is passed over by its int8 codes only when its float32 cosine is below the cutoff,
    for rows of 256 and of 37 numbers (a tail past the last 32), rows with a zero row among
    them; and arrays of the wrong kind or rows outside the codes are refused."""
    if not kernels.CODES:
        pytest.skip("this CPU reads the float32 rows")
    rng = np.random.default_rng(23)
    for d in (256, 37):
        x = rng.standard_normal((2_000, d)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        x[11] = 0.0
        coded = kernels.quantize(x)
        for _ in range(20):
            q = x[int(rng.integers(0, 2_000))] + 0.4 * rng.standard_normal(d).astype(np.float32)
            q /= np.linalg.norm(q)
            first, length = np.array([0, 700], np.int64), np.array([500, 1_300], np.int64)
            cos = kernels.dots(x, q, first, length)
            slots = np.concatenate([np.arange(0, 500), np.arange(700, 2_000)])
            for cutoff in np.sort(cos)[[-1, -3, -30, -300]]:
                now = kernels.near_codes(coded, q, first, length, float(cutoff))
                assert set(slots[cos >= cutoff].tolist()) <= set(now.tolist())
                later = kernels.near_codes(coded, q, first, length, float(cutoff), later=True)
                assert later().tolist() == now.tolist()  # (read by a thread of its own: the same rows)
    codes, scale, a, b = coded
    q8 = np.zeros(d, np.int8)
    out = np.empty(10, np.int64)
    with pytest.raises(IndexError, match="outside"):
        kernels._kernels.near_codes(codes, scale, a, b, np.array([1_995]), np.array([10]), q8, 1.0, 0.0, 1.0, 0.0, out, False)
    with pytest.raises(ValueError, match="as long"):
        kernels._kernels.near_codes(codes, scale, a, b, np.array([0]), np.array([1]), q8[:5], 1.0, 0.0, 1.0, 0.0, out, False)
    pending = kernels._kernels.near_codes(codes, scale, a, b, np.array([0]), np.array([10]), q8, 1.0, 0.0, 1.0, 0.0,
                                          out, True)
    assert kernels._kernels.near_wait(pending) == 10  # (a cutoff of 0 with slacks: every row may reach it)
    with pytest.raises(ValueError, match="incorrect name"):  # (a pending search gives its rows once)
        kernels._kernels.near_wait(pending)
    kernels._kernels.near_codes(codes, scale, a, b, np.array([0]), np.array([10]), q8, 1.0, 0.0, 1.0, 0.0, out, True)
    # (a pending search dropped unasked: its thread joined, its arrays given back)
    with pytest.raises(TypeError, match="int8"):  # (a wrong kind of array: TypeError, as every loop here says)
        kernels._kernels.quantize(x, np.empty((5, d), np.int16), scale, a, b)


@compiled
def test_a_page_of_rows_is_read_as_arrow_gives_each_value(by_numpy):
    """The kernel's row reader (index/rows.page_reader) gives every value as Arrow's `as_py`
    does: strings (empty, non-ASCII, null), large strings, bools, integers, floats, naive
    timestamps before 1970 and at the ends of the calendar, lists of strings (empty, null, with a
    null string), a column of nulls; from a table sliced off its buffers' start; and refuses a
    row it does not hold, or buffers its offsets overrun."""
    import pyarrow as pa

    from slm_magic.index.rows import column_spec, page_reader

    n = 50
    rng = random.Random(7)
    words = ["", "naïve", "日本語", "holdout", "a" * 300, None]
    ts = [datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999_999), datetime(1969, 12, 31, 23, 59, 59, 1),
          datetime(1970, 1, 1), datetime(2026, 2, 28, 12, 30, 5, 123_456), None]
    table = pa.table({
        "s": pa.array([rng.choice(words) for _ in range(n)], pa.string()),
        "big": pa.array([rng.choice(words) for _ in range(n)], pa.large_string()),
        "b": pa.array([rng.choice([True, False, None]) for _ in range(n)], pa.bool_()),
        "i32": pa.array([rng.choice([0, -2**31, 2**31 - 1, None]) for _ in range(n)], pa.int32()),
        "i64": pa.array([rng.choice([0, -2**63, 2**63 - 1, None]) for _ in range(n)], pa.int64()),
        "f": pa.array([rng.choice([0.1, -1e300, float("inf"), None]) for _ in range(n)], pa.float64()),
        "t": pa.array([rng.choice(ts) for _ in range(n)], pa.timestamp("us")),
        "tags": pa.array([rng.choice([[], None, ["a", None], ["ü", "", "x" * 40]]) for _ in range(n)],
                         pa.list_(pa.string())),
        "none": pa.nulls(n),
        "i16": pa.array(list(range(n)), pa.int16()),  # (a type the kernel leaves to value_reader)
    })
    names = table.column_names
    for part in (table.combine_chunks(), table.slice(7, 30).combine_chunks(), table.slice(13, 20)):
        rows = list(range(part.num_rows))
        want = part.to_pylist()
        assert page_reader(part, names)(rows) == want
        assert page_reader(part, names[:-1])(rows[::-1]) == [{k: r[k] for k in names[:-1]} for r in want[::-1]]
        assert by_numpy(page_reader, part, names)(rows) == want
    assert column_spec(table.column("i16").chunk(0)) is None
    read = page_reader(table, names[:-1])
    for bad in (n, -1):
        with pytest.raises(IndexError, match="row"):
            read([0, bad])
    spec = column_spec(pa.array(["abc", "def"]))  # (then its second string said to end past its data)
    lying = kernels.row_reader(["s"], [(*spec[:5], np.array([0, 3, 99], np.int32).tobytes(), b"abcdef", None, None)])
    assert lying([0]) == [{"s": "abc"}]
    with pytest.raises(ValueError, match="outside"):
        lying([1])
    with pytest.raises(ValueError, match="out of range"):  # (an offset whose bytes' place would overflow)
        kernels.row_reader(["x"], [(5, 1, 2**61, 0, None, np.arange(4).tobytes(), None, None, None)])
    spec = column_spec(pa.array([["a"], ["b", "c"]]))  # (its second list said to end far past its strings)
    lying = kernels.row_reader(["l"], [(*spec[:5], np.array([0, 1, 10**9], np.int32).tobytes(), *spec[6:])])
    assert lying([0]) == [{"l": ["a"]}]
    with pytest.raises(ValueError, match="outside"):
        lying([1])
