"""How much the meaning channel's cells (slm_magic/vectors.py) change what comes back, on real text.

Every collection of benchmarks/meaning_sweep.py is built with the cells on from 1,024 vectors
(they start at VectorStore.EXACT, above most of these stores), then each question is asked with
the nearest cells read (the default share) and with every cell read (the exact search): the
share of questions whose top 10 is the same, and nDCG@10 both ways.

    .venv/bin/python benchmarks/meaning_cells.py [--only LongMemEval ...]

With `--sentences FILE --n N`: a store of N real sentences instead (the meaning model's build
corpus: `BUILD=/tmp/realtext python tools/meaning_model/build_corpus.py` writes
/tmp/realtext/corpus.json: docstrings, package descriptions, LongMemEval turns), cells as
shipped, asked the questions of LoCoMo, LongMemEval and the paraphrase benchmark.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (HERE.parent, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def compare(col) -> tuple[float, float, float, int, int]:
    """(same top 10, nDCG with cells, nDCG exact, questions, cells) over a collection."""
    import meaning_sweep

    same = nd_cells = nd_exact = 0.0
    n = cells = 0
    for mem, ids, qs in col.stores:
        vs = mem.index.vectors
        cells = max(cells, vs.centroids.shape[0])
        for q, rel, _ in qs:
            got = [m.fact_id for m in mem.recall(q, limit=10).memories]
            vs.PROBE_SHARE = 1.0  # (this store only: every cell read)
            try:
                exact = [m.fact_id for m in mem.recall(q, limit=10).memories]
            finally:
                del vs.PROBE_SHARE
            same += got == exact
            nd_cells += meaning_sweep._quality().ndcg_r10([ids.get(f) for f in got], rel)[0]
            nd_exact += meaning_sweep._quality().ndcg_r10([ids.get(f) for f in exact], rel)[0]
            n += 1
    return same / n, nd_cells / n, nd_exact / n, n, cells


def sentences_store(path: str, n: int, questions: int) -> None:
    """The cells against the exact search on a store of `n` real sentences."""
    import json
    import statistics

    import meaning_sweep
    import paraphrase
    from slm_magic import Memory

    texts = json.loads(Path(path).read_text())["sentences"][:n]
    q = meaning_sweep._quality()
    asked = [t for _, qs in q.locomo() for t, _ in qs][::5] + [t for _, qs in q.longmemeval() for t, _ in qs][::2]
    asked = (asked + [x["text"] for x in paraphrase.load()[1]])[:questions]
    t = time.perf_counter()
    mem = Memory(":memory:")
    mem.remember_many([{"content": x} for x in texts])
    vs = mem.index.vectors
    print(f"{len(texts):,} sentences remembered in {time.perf_counter() - t:.0f} s: {vs.centroids.shape[0]} cells, "
          f"{vs.PROBE_SHARE:.3f} of them read (at least {vs.PROBE_MIN})")
    same, overlap = 0, []
    for question in asked:
        got = [m.fact_id for m in mem.recall(question, limit=10).memories]
        vs.PROBE_SHARE = 1.0
        try:
            exact = [m.fact_id for m in mem.recall(question, limit=10).memories]
        finally:
            del vs.PROBE_SHARE
        same += got == exact
        overlap.append(len(set(got) & set(exact)) / len(exact) if exact else float(not got))
    print(f"same top 10 as exact: {same / len(asked):.1%} of {len(asked)} questions "
          f"(overlap {statistics.fmean(overlap):.2%})")
    words = Memory(":memory:", semantic=False)
    words.remember_many([{"content": x} for x in texts])
    p50 = {}
    for name, m in (("meaning", mem), ("words only", words), ("meaning again", mem), ("words only again", words)):
        lat = []
        for question in asked:
            t = time.perf_counter()
            m.recall(question, limit=10)
            lat.append((time.perf_counter() - t) * 1000)
        p50[name] = statistics.median(lat)
    print("recall p50 ms: " + ", ".join(f"{k} {v:.2f}" for k, v in p50.items())
          + f" (the second pair: {p50['meaning again'] / p50['words only again']:.2f}x)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=["LoCoMo", "LongMemEval"], help="collections whose name starts so")
    ap.add_argument("--sentences", help="a corpus.json of tools/meaning_model/build_corpus.py")
    ap.add_argument("--n", type=int, default=100_000, help="sentences remembered (with --sentences)")
    ap.add_argument("--questions", type=int, default=600, help="questions asked (with --sentences)")
    args = ap.parse_args(argv)
    if args.sentences:
        sentences_store(args.sentences, args.n, args.questions)
        return 0
    import meaning_sweep
    from slm_magic.vectors import VectorStore

    VectorStore.EXACT = 1_024
    t = time.perf_counter()
    cols = meaning_sweep.build(args.only)
    print(f"built {len(cols)} collections in {time.perf_counter() - t:.0f} s (cells from 1,024 vectors; "
          f"{VectorStore.PROBE_SHARE:.3f} of the cells read)")
    print("| collection | questions | cells (largest store) | same top 10 as exact | nDCG@10 cells | nDCG@10 exact |")
    print("|---|---|---|---|---|---|")
    for col in cols:
        same, a, b, n, k = compare(col)
        print(f"| {col.name} | {n} | {k} | {same:.1%} | {a:.3f} | {b:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
