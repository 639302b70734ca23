"""Two kernels on one memory file: what the second one adds, with the saved index mapped and
with the index rebuilt in each process.

    python benchmarks/shared_index.py --size 1000000 --db /tmp/shared/memory.duckdb

Builds the file once (the speed benchmark's corpus) if it is missing. Then, for each mode, a
kernel A opens the file, runs the recalls and lets go of the file (as the magics do between
cells); kernel B does the same while A holds its index; both report their memory. RSS counts
the mapped file's pages, which the page cache shares between processes; what a kernel holds of
its own is its anonymous memory (RssAnon) and its unique set (USS); PSS splits shared pages
between the processes that map them. "MemAvailable drop" is the machine's own account of what
starting B cost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KERNEL = r"""
import json, sys, time
sys.path.insert(0, "benchmarks")
from timing import memory_now as status
from slm_magic import Memory
from slm_magic.index.replica import IndexReplica

IndexReplica.SAVE_MIN_DOCS = 10**12   # measure, never save
queries = json.loads(sys.argv[2])

t0 = time.perf_counter()
m = Memory(sys.argv[1])
opened = time.perf_counter() - t0
for q in queries:
    m.recall(q, limit=10)
m.detach()
print(json.dumps({"source": m.replica.source, "open_s": opened, **status()}), flush=True)
sys.stdin.readline()
print(json.dumps(status()), flush=True)
sys.stdin.readline()
"""


def mem_available() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def build(db: Path, size: int) -> None:
    from benchmarks.synthetic import generate_memories
    from slm_magic import Memory

    db.parent.mkdir(parents=True, exist_ok=True)
    with Memory(str(db)) as m:
        m.remember_many(generate_memories(size, seed=0))
        m.replica.wait_saved()


def kernel(db: Path, queries: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", KERNEL, str(db), json.dumps(queries)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)


def measure(db: Path, queries: list[str]) -> dict:
    avail0 = mem_available()
    a = kernel(db, queries)
    first = json.loads(a.stdout.readline())
    avail1 = mem_available()
    b = kernel(db, queries)
    second = json.loads(b.stdout.readline())
    avail2 = mem_available()
    a.stdin.write("\n")
    a.stdin.flush()
    first_with_b = json.loads(a.stdout.readline())
    for p in (a, b):
        p.stdin.write("\n\n")
        p.stdin.flush()
        p.wait(timeout=600)
    return {"a": first, "b": second, "a_with_b": first_with_b, "avail_drop_a": avail0 - avail1,
            "avail_drop_b": avail1 - avail2}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--db", type=Path, default=Path("/tmp/slm_shared_index/memory.duckdb"))
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    from benchmarks.synthetic import generate_memories, generate_queries

    if not args.db.exists():
        t0 = time.perf_counter()
        build(args.db, args.size)
        print(f"built {args.size:,} memories in {time.perf_counter() - t0:.0f} s")
    corpus = list(generate_memories(min(args.size, 20_000), seed=0))
    queries = generate_queries(args.queries, seed=1, corpus_sample=corpus)
    idx = Path(str(args.db) + ".idx")
    rows = [("saved index, mapped", measure(args.db, queries))]
    aside = Path(str(idx) + ".aside")
    shutil.move(idx, aside)
    try:
        rows.append(("rebuilt in each kernel", measure(args.db, queries)))
    finally:
        shutil.move(aside, idx)
    mb = 2**20
    print(f"\n{args.size:,} memories, {len(queries)} recalls per kernel; MB\n")
    print("| mode | A: open s | A: RSS / USS / private | B: RSS / USS / private | A with B: USS / PSS "
          "| MemAvailable drop for A / B | B's private / A's RSS |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows:
        a, b, ab = r["a"], r["b"], r["a_with_b"]
        print(f"| {name} | {a['open_s']:.2f} | {a['rss'] / mb:,.0f} / {a['uss'] / mb:,.0f} / {a['anon'] / mb:,.0f} "
              f"| {b['rss'] / mb:,.0f} / {b['uss'] / mb:,.0f} / {b['anon'] / mb:,.0f} "
              f"| {ab['uss'] / mb:,.0f} / {ab['pss'] / mb:,.0f} "
              f"| {r['avail_drop_a'] / mb:,.0f} / {r['avail_drop_b'] / mb:,.0f} "
              f"| {b['anon'] / a['rss']:.0%} |")
    print(f"\nsources: {', '.join(r['a']['source'] + ' / ' + r['b']['source'] for _, r in rows)}")
    print(f"pid {os.getpid()}")


if __name__ == "__main__":
    main()
