"""Where a recall's time goes, stage by stage, on the speed benchmark's synthetic store.

    python benchmarks/recall_stages.py [--n 100000] [--questions 200] [--db PATH] [--words]

Every question is asked once untimed, then once under Python's profiler; each stage's time is
its cumulative time per recall (a stage's own callees included), so the figures overlap and
do not add up; the profiler inflates Python-heavy stages more than compiled ones. The last line
is the recall's p50 without the profiler, the same questions asked again. `--words`: the
meaning channel off.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

#: (what a reader calls the stage, the function's file tail and name as the profiler names them)
STAGES = [
    ("the whole recall", "engine/recall.py", "recall"),
    ("the question's analysis", "engine/recall.py", "question"),
    ("channel scores (the postings summed)", "index/sparse.py", "channel_scores"),
    ("  of which the kernel's sums", "core/kernels.py", "best_sums"),
    ("ranking by words (pruned)", "ranking/fusion.py", "_rank_index"),
    ("  of which the bar and the floor", "ranking/fusion.py", "_can_reach"),
    ("  of which the 3-gram channel", "ranking/fusion.py", "with_grams"),
    ("the meaning channel", "ranking/meaning.py", "with_meaning"),
    ("  of which the nearest cells", "index/vectors.py", "nearest"),
    ("  of which the word probe", "ranking/meaning.py", "_with_word_matches"),
    ("the rows shown", "index/rows.py", "get"),
    ("the results (pydantic)", "engine/answers.py", "scored_memories"),
]


def main(argv: list[str] | None = None) -> int:
    from benchmarks.synthetic import generate_memories, generate_queries, store_arguments, store_at
    from slm_magic import Memory
    from slm_magic.core import kernels

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    store_arguments(ap, questions=200)
    ap.add_argument("--words", action="store_true", help="the meaning channel off")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = store_at(args.db, args.n, Path(tmp) / "stages.duckdb")
        mem = Memory(str(db), semantic=not args.words)
        corpus = list(generate_memories(args.n, seed=0))
        queries = generate_queries(args.questions, seed=1, corpus_sample=corpus)
        for q in queries:
            mem.recall(q, limit=10)
        profile = cProfile.Profile()
        profile.enable()
        for q in queries:
            mem.recall(q, limit=10)
        profile.disable()
        plain = []
        for q in queries:
            t0 = time.perf_counter()
            mem.recall(q, limit=10)
            plain.append((time.perf_counter() - t0) * 1000)
        mem.close()
    stats = pstats.Stats(profile).stats  # {(file, line, name): (calls, prim, tottime, cumtime, callers)}
    print(f"{args.n:,} notes, {len(queries)} questions, {'by words alone' if args.words else 'with the meaning channel'}, "
          f"the loops {'compiled' if kernels.COMPILED else 'in numpy'}; ms per recall under the profiler:")
    for label, tail, name in STAGES:
        cum = sum(v[3] for (file, _, fn), v in stats.items() if fn == name and file.endswith(tail))
        print(f"  {label:40s} {cum * 1000 / len(queries):7.3f}")
    print(f"recall p50 without the profiler: {statistics.median(plain):.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
