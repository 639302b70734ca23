"""Where a recall's time goes, stage by stage, on the speed benchmark's synthetic store.

    python benchmarks/recall_stages.py [--n 100000] [--questions 200] [--db PATH] [--words] [--wall]

Every question is asked once untimed, then once under Python's profiler; each stage's time is
its cumulative time per recall (a stage's own callees included), so the figures overlap and
do not add up; the profiler inflates Python-heavy stages more than compiled ones. The last line
is the recall's p50 without the profiler, the same questions asked again. `--words`: the
meaning channel off. `--wall`: each stage timed by the clock around its function instead of
the profiler (a fraction of a microsecond a call added), so the Python stages are not inflated.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
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
    ap.add_argument("--wall", action="store_true", help="stages timed by the clock, not the profiler")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = store_at(args.db, args.n, Path(tmp) / "stages.duckdb")
        mem = Memory(str(db), semantic=not args.words)
        corpus = list(generate_memories(args.n, seed=0))
        queries = generate_queries(args.questions, seed=1, corpus_sample=corpus)
        for q in queries:
            mem.recall(q, limit=10)
        timers = _clock_stages() if args.wall else None
        profile = cProfile.Profile()
        if timers is None:
            profile.enable()
        for q in queries:
            mem.recall(q, limit=10)
        profile.disable()
        plain = []
        if timers is not None:
            _clock_stages(undo=timers)
        for q in queries:
            t0 = time.perf_counter()
            mem.recall(q, limit=10)
            plain.append((time.perf_counter() - t0) * 1000)
        mem.close()
    how = "by the clock around each stage" if timers is not None else "under the profiler"
    print(f"{args.n:,} notes, {len(queries)} questions, {'by words alone' if args.words else 'with the meaning channel'}, "
          f"the loops {'compiled' if kernels.COMPILED else 'in numpy'}; ms per recall {how}:")
    if timers is None:
        stats = pstats.Stats(profile).stats  # {(file, line, name): (calls, prim, tottime, cumtime, callers)}
    for label, tail, name in STAGES:
        if timers is None:
            cum = sum(v[3] for (file, _, fn), v in stats.items() if fn == name and file.endswith(tail))
        else:
            cum = timers[(tail, name)][1]
        print(f"  {label:40s} {cum * 1000 / len(queries):7.3f}")
    print(f"recall p50 without the profiler: {statistics.median(plain):.3f} ms")
    return 0


def _clock_stages(undo: dict | None = None) -> dict:
    """Each stage's function wrapped in a clock, wherever the package holds it: its module or
    class, and every module that imported it by name. Returns {(file tail, name): [the places
    wrapped, seconds summed]}; with `undo` (that dict), the functions are put back."""
    import inspect

    if undo is not None:
        for places, _ in undo.values():
            for holder, attr, original in places:
                setattr(holder, attr, original)
        return undo
    modules = [m for n, m in list(sys.modules.items()) if n.startswith("slm_magic") and getattr(m, "__file__", None)]
    timers: dict = {}
    for _, tail, name in STAGES:
        key = (tail, name)
        if key in timers:
            continue
        timers[key] = entry = [[], 0.0]
        home = [m for m in modules if m.__file__.replace("\\", "/").endswith(tail)]
        targets = [(m, getattr(m, name)) for m in home if inspect.isfunction(getattr(m, name, None))]
        targets += [(c, c.__dict__[name]) for m in home for c in vars(m).values()
                    if inspect.isclass(c) and c.__module__ == m.__name__ and inspect.isfunction(c.__dict__.get(name))]
        for holder, fn in targets:
            @functools.wraps(fn)
            def timed(*a, _fn=fn, _entry=entry, **k):
                t0 = time.perf_counter()
                try:
                    return _fn(*a, **k)
                finally:
                    _entry[1] += time.perf_counter() - t0
            for place in [holder] + [m for m in modules if m is not holder and getattr(m, name, None) is fn]:
                entry[0].append((place, name, fn))
                setattr(place, name, timed)
    return timers


if __name__ == "__main__":
    sys.exit(main())
