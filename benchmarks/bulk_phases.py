"""Where a bulk write's time goes: timers around each step of `Memory.remember_many` on a fresh
file, and the CPU this process (with DuckDB's threads and the writer thread) and the analysis
worker spent. The steps overlap (the insert runs in a thread while the next batch is checked
and its postings come from the worker), so their times add up to more than the wall time.

    python benchmarks/bulk_phases.py --size 1000000
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STEPS = {  # (module, class or None, function): what the row is called
    ("engine.writer", "Writer", "_prepared"): "check a batch (validate)",
    ("index.bulk", "Worker", "send"): "hand a batch to the worker",
    ("index.bulk", "Worker", "receive"): "wait for and take its postings",
    ("storage.store", "Store", "insert_many"): "DuckDB insert (writer thread)",
    ("index.replica", "IndexReplica", "after_write"): "into the in-process index",
    ("index.ngrams", "GramStore", "add"): "  of which the 3-gram vectors",
    ("index.sparse", None, "merge"): "segment merges",
}


def _timed(totals: collections.Counter, label: str, f):
    @functools.wraps(f)
    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            totals[label] += time.perf_counter() - t0
    return timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--batch-size", type=int, default=20_000)
    args = ap.parse_args()
    import importlib

    from benchmarks.synthetic import generate_memories
    from slm_magic import Memory
    from slm_magic.storage import store

    corpus = list(generate_memories(args.size, seed=7))
    totals: collections.Counter = collections.Counter()
    for (module, cls, name), label in STEPS.items():
        owner = importlib.import_module(f"slm_magic.{module}")
        owner = getattr(owner, cls) if cls else owner
        setattr(owner, name, _timed(totals, label, getattr(owner, name)))
    bulk = store.Store.bulk

    @contextlib.contextmanager
    def timed_bulk(self):
        with bulk(self):
            yield
            totals["_t"], totals["_c"] = time.perf_counter(), time.process_time()
        totals["final checkpoint (wall)"] += time.perf_counter() - totals.pop("_t")
        totals["final checkpoint (CPU)"] += time.process_time() - totals.pop("_c")

    store.Store.bulk = timed_bulk
    tmp = Path(tempfile.mkdtemp(prefix="slm-phases-"))
    try:
        warm = Memory(tmp / "warm.duckdb")  # lazy imports and first-use setup, outside the timing
        warm.remember_many(corpus[:2000])
        warm.close()
        totals.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        own0 = resource.getrusage(resource.RUSAGE_SELF)
        mem = Memory(tmp / "m.duckdb")
        mem.remember_many(corpus, batch_size=args.batch_size)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        own = resource.getrusage(resource.RUSAGE_SELF)
        if mem.replica is not None:
            mem.replica.wait_saved()
        mem.close()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        n = args.size
        print("| step | µs per memory |\n|---|---|")
        for label, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
            print(f"| {label} | {seconds / n * 1e6:.1f} |")
        print(f"| **wall** | **{wall / n * 1e6:.1f}** ({n / wall:,.0f} memories/s) |")
        print(f"| CPU of this process (its threads, DuckDB's) | {cpu / n * 1e6:.1f} |")
        print(f"| CPU of the analysis worker | {(children.ru_utime + children.ru_stime) / n * 1e6:.1f} |")
        print(f"| of which in the kernel (system time): this process, the worker | "
              f"{(own.ru_stime - own0.ru_stime) / n * 1e6:.1f}, {children.ru_stime / n * 1e6:.1f} |")
        print(f"| page faults per memory: this process, the worker | "
              f"{(own.ru_minflt - own0.ru_minflt) / n:.2f}, {children.ru_minflt / n:.2f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
