"""What a recall costs before any ranking, and the pieces around the ranking, on the speed
benchmark's synthetic store: the floor that no pruning can cut.

    python benchmarks/recall_floor.py [--n 100000] [--db PATH] [--repeat 500]

Prints the median of `--repeat` calls of each, by words alone (semantic=False):
  * a recall of a word no memory holds (arguments, analysis, the index's freshness check, an
    empty result): every recall pays this;
  * a recall with limit=0 (the same, without the channels' scores);
  * reading a page of ten rows from the index's Arrow rows (`FactRows.get`);
  * a typical recall of the speed benchmark's questions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def median_us(call, repeat: int) -> float:
    took = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        took.append(time.perf_counter() - t0)
    return statistics.median(took) * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--db", type=Path, default=None, help="the store (built there when missing)")
    ap.add_argument("--repeat", type=int, default=500)
    args = ap.parse_args(argv)
    from benchmarks.synthetic import build_store, generate_memories, generate_queries
    from slm_magic import Memory

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "floor.duckdb"
        if not db.exists():
            build_store(db, args.n)
        mem = Memory(str(db), semantic=False)
        questions = generate_queries(args.repeat + 20, seed=1, corpus_sample=list(generate_memories(2_000)))
        for q in questions[:20]:
            mem.recall(q)
        page = mem.recall(questions[0]).memories
        docs = [int(d) for d in mem.index.docs.alive.nonzero()[0][:: max(1, args.n // 10)][:10]]
        asked = iter(questions[20:] * 2)
        print(f"{args.n:,} notes, by words alone, median of {args.repeat} calls (us):")
        print(f"  recall of a word no memory holds   {median_us(lambda: mem.recall('zzqxv'), args.repeat):8.1f}")
        print(f"  recall with limit=0                {median_us(lambda: mem.recall('zzqxv', limit=0), args.repeat):8.1f}")
        print(f"  a page of ten rows (FactRows.get)  {median_us(lambda: mem.rows.get(docs), args.repeat):8.1f}")
        print(f"  a question of speed.py's           {median_us(lambda: mem.recall(next(asked)), args.repeat):8.1f}"
              f"  ({len(page)} shown for the first)")
        mem.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
