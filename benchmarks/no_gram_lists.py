"""What storing the 3-gram lists in DuckDB costs a bulk import: the same import with them and
with empty lists in their place (an experiment for a design choice, not a supported mode: an
index rebuilt from such a file has no 3-gram channel).

    python benchmarks/no_gram_lists.py --size 400000 --runs 2
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=400_000)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    import pyarrow as pa

    from benchmarks.synthetic import generate_memories
    from slm_magic import Memory
    from slm_magic.index.analysis import Postings
    from slm_magic.index.replica import IndexReplica

    IndexReplica.SAVE_MIN_DOCS = 10**12  # the import alone
    corpus = list(generate_memories(args.size, seed=0))
    stored = Postings.list_columns

    def without_grams(self):
        terms, tfs, grams, gtfs = stored(self)
        n = len(self.lengths)
        return terms, tfs, pa.array([[]] * n, type=grams.type), pa.array([[]] * n, type=gtfs.type)

    print("| gram lists | import (mem/s) | DuckDB file MB |\n|---|---|---|")
    for _ in range(args.runs):
        for name, columns in (("stored", stored), ("not stored", without_grams)):
            Postings.list_columns = columns
            folder = Path(tempfile.mkdtemp())
            try:
                m = Memory(str(folder / "m.duckdb"))
                t0 = time.perf_counter()
                m.remember_many(corpus)
                rate = args.size / (time.perf_counter() - t0)
                m.close()
                print(f"| {name} | {rate:,.0f} | {(folder / 'm.duckdb').stat().st_size / 2**20:,.0f} |")
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    Postings.list_columns = stored


if __name__ == "__main__":
    main()
