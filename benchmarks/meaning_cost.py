"""What each piece of the meaning channel costs a recall in place, and what the cells' scan
could cost with other number types.

    python benchmarks/meaning_cost.py [--n 100000] [--questions 400] [--db PATH]

Builds the speed benchmark's synthetic store of `--n` notes (kept at `--db` for the next run),
then asks each question several ways one after the other, in turns, on the same store: with
the channel, with one of its pieces left out (the answers then differ; only the time counts),
and by words alone. A piece's cost is the difference of the medians: in place, where the rest
of a recall has pushed its arrays out of the CPU's caches, which a piece timed on its own
never sees (RESULTS.md section 21).

The second part scans eight cells' worth of rows (the cells a question reads at 100,000) after
reading 40 MB of other memory: float32 rows by BLAS (what the index does), int8 rows turned into
float32 first, and int8 rows by simsimd's kernels when simsimd is installed (it is not a
dependency of the project).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def pieces(db: Path, n: int, questions: int) -> None:
    import slm_magic.index.sparse as sparse
    import slm_magic.index.vectors as vectors
    from benchmarks.synthetic import generate_memories, generate_queries
    from slm_magic import Memory

    corpus = list(generate_memories(n, seed=0))
    queries = generate_queries(questions + 20, seed=1, corpus_sample=corpus)
    mem = Memory(str(db))
    model, cfg = mem.meaning, mem.config
    store, scores = vectors.VectorStore, sparse.ChannelScores
    none = (np.empty(0, np.int64), np.empty(0, np.float32))
    left_out = {  # (class, attribute, stand-in) per piece
        "the cells' search and its picks": (store, "nearest", lambda self, q, c: none),
        "the weak word matches' share": (scores, "coverage", lambda self, d: (np.ones(len(d)), np.ones(len(d)))),
        "the question's background": (store, "background", lambda self, q, a: (2048, 2048 * 0.08, 2048 * 0.0185)),
        "the word matches' cosines": (store, "cosine", lambda self, d, q: np.zeros(len(d))),
    }
    narrow = cfg.model_copy(update={"meaning_pool": 10})
    ways = ["with the channel", *left_out, "a pool of 10 word matches", "by words alone"]
    for q in queries[:20]:
        mem.recall(q, limit=10)
    lat: dict[str, list[float]] = {w: [] for w in ways}
    for i, q in enumerate(queries[20:]):
        for way in ways[i % len(ways):] + ways[: i % len(ways)]:  # (each way first in turn)
            saved = None
            if way in left_out:
                cls, name, stand_in = left_out[way]
                saved = getattr(cls, name)
                setattr(cls, name, stand_in)
            elif way == "a pool of 10 word matches":
                mem.config = narrow
            elif way == "by words alone":
                mem.meaning = None
            try:
                t0 = time.perf_counter()
                mem.recall(q, limit=10)
                lat[way].append((time.perf_counter() - t0) * 1000)
            finally:
                if saved is not None:
                    setattr(cls, name, saved)
                mem.config, mem.meaning = cfg, model
    mem.close()
    full, words = statistics.median(lat["with the channel"]), statistics.median(lat["by words alone"])
    print(f"Recall p50 at {n:,}, {questions} questions: {full:.3f} ms with the meaning channel, "
          f"{words:.3f} ms by words alone ({full / words:.2f}x, {full - words:.3f} ms)")
    for way in ways[1:-1]:
        p50 = statistics.median(lat[way])
        label = f"without {way}" if way in left_out else f"with {way} (not {cfg.meaning_pool})"
        print(f"  {label}: {p50:.3f} ms (the difference: {full - p50:+.3f} ms)")


def scans(rounds: int = 300) -> None:
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((100_000, 256)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    small = np.round(rows * 300).clip(-127, 127).astype(np.int8)
    q = rows[5].copy()
    q8 = np.round(q * 300).clip(-127, 127).astype(np.int8)
    other = np.ones(5_000_000)
    ways = {"float32 rows, BLAS": lambda a, b: rows[a:b] @ q,
            "int8 rows made float32, BLAS": lambda a, b: small[a:b].astype(np.float32) @ q}
    try:
        import simsimd

        ways["int8 rows, simsimd"] = lambda a, b: simsimd.cdist(small[a:b], q8[None, :], metric="dot")
    except ImportError:
        print("  (simsimd is not installed: its line is left out)")
    for name, scan in ways.items():
        lat = []
        for _ in range(rounds):
            cells = [(s, s + 316) for s in rng.integers(0, rows.shape[0] - 316, 8)]
            other.sum()  # (what the rest of a recall does to the caches)
            t0 = time.perf_counter()
            for a, b in cells:
                scan(a, b)
            lat.append((time.perf_counter() - t0) * 1000)
        print(f"  eight cells of 316 rows, {name}: {statistics.median(lat):.3f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--questions", type=int, default=400)
    ap.add_argument("--db", type=Path, default=None, help="the store (built there when missing)")
    args = ap.parse_args(argv)
    from benchmarks.synthetic import build_store

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "meaning_cost.duckdb"
        if not db.exists():
            build_store(db, args.n)
        pieces(db, args.n, args.questions)
    print("The cells' scan, after 40 MB of other reads:")
    scans()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
