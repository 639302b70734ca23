"""How much the meaning channel's cells (slm_magic/vectors.py) change what comes back, on real text.

Every collection of benchmarks/meaning_sweep.py is built with the cells on from 1,024 vectors
(they start at VectorStore.EXACT, above most of these stores), then each question is asked with
the nearest cells read (the default share) and with every cell read (the exact search): the
share of questions whose top 10 is the same, and nDCG@10 both ways.

    .venv/bin/python benchmarks/meaning_cells.py [--only LongMemEval ...]
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=["LoCoMo", "LongMemEval"], help="collections whose name starts so")
    args = ap.parse_args(argv)
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
