"""A team's memory on PostgreSQL against the DuckDB file, in the same run.

    python benchmarks/postgres.py [--size 1000000] [--calls 200] [--url postgresql://admin@host/db]

`--url` is a superuser's URL (default: $SLM_TEST_PG_URL, which `.ci/pg.sh` prints); the
benchmark creates a database of its own there, sets it up with `Memory.setup_team` and
works as an ordinary member (row-level security on). For each backend:

  * import - memories/s of `remember_many` over the synthetic corpus (benchmarks/synthetic.py);
  * fresh kernel - in a new process, `Memory(address)` plus its first recall, mapping the
    saved index (beside the file; in the user's cache for a server) and catching up;
  * no saved index - the same for a kernel that has none yet (a person's first kernel on a
    server, a file whose index was removed): it builds the index from the store;
  * recall - p50/p95 of `recall` in that kernel, each inside `attached()` as a magic runs it,
    while another process remembers one memory after another into the same store; and how
    many writes the writer made meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from timing import median_p95, workload  # noqa: E402

READER = r"""
import json, subprocess, sys, time
sys.path[:0] = [sys.argv[3], sys.argv[4]]
from timing import workload
t0 = time.perf_counter()
from slm_magic import Memory
address, calls = sys.argv[1], int(sys.argv[2])
mem = Memory(address)
with mem.attached():
    mem.recall("table")
first_ms = (time.perf_counter() - t0) * 1000
mem.detach()
class A: size = 2000; calls = int(sys.argv[2])
_, queries = workload(A)
writer = subprocess.Popen([sys.executable, "-c", sys.argv[5], address], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
assert writer.stdout.readline().strip() == "writing"  # the writer has started writing
times = []
for q in queries:
    t = time.perf_counter()
    with mem.attached():
        mem.recall(q)
    times.append((time.perf_counter() - t) * 1000)
writer.stdin.close()
writes = int(writer.stdout.readline())
writer.wait()
mem.close()
print(json.dumps({"first_ms": first_ms, "times": times, "writes": writes}))
"""

WRITER = r"""
import sys, threading
from slm_magic import Memory
mem = Memory(sys.argv[1])
mem.detach()
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
n = 0
print("writing", flush=True)
while not stop.is_set():
    with mem.attached():
        mem.remember(f"writer note {n}: the nightly job for table w{n} finished")
    n += 1
mem.close()
print(n, flush=True)
"""


def run(address: str, corpus: list[dict], calls: int) -> dict:
    from slm_magic import Memory

    t = time.perf_counter()
    with Memory(address) as mem:
        mem.remember_many(corpus)
        imported = time.perf_counter() - t
    out = subprocess.run([sys.executable, "-c", READER, address, str(calls), str(HERE), str(HERE.parent), WRITER],
                         capture_output=True, text=True)
    if out.returncode:  # (say why: the capture would keep it from the reader)
        raise SystemExit(f"the reader on {address} failed:\n{out.stderr[-4000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    with tempfile.TemporaryDirectory() as cache:  # no saved index: a file's is moved away, a server's cache is empty
        saved = Path(address + ".idx")
        if saved.exists():
            saved.rename(Path(cache) / "moved.idx")
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sys; from slm_magic import Memory; m = Memory(sys.argv[1]); "
                        "m.recall('table'); m.replica.save = lambda **k: None; m.close()", address],
                       check=True, env={**os.environ, "XDG_CACHE_HOME": cache})
        rebuilt_ms = (time.perf_counter() - t) * 1000
    p50, p95 = median_p95(got["times"])
    return {"import_per_s": len(corpus) / imported, "first_ms": got["first_ms"], "rebuilt_ms": rebuilt_ms,
            "p50": p50, "p95": p95, "writes": got["writes"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--url", default=os.environ.get("SLM_TEST_PG_URL"))
    args = ap.parse_args(argv)
    if not args.url:
        ap.error("a superuser's postgresql:// URL: --url or $SLM_TEST_PG_URL (bash .ci/pg.sh prints one)")
    import psycopg
    from urllib.parse import urlsplit, urlunsplit

    from slm_magic import Memory

    corpus, _ = workload(args)
    name = f"slm_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.url, autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(args.url)
    admin = urlunsplit(parts._replace(path=f"/{name}"))
    member = urlunsplit(parts._replace(netloc="bench@" + parts.netloc.rsplit("@", 1)[-1], path=f"/{name}"))
    Memory.setup_team(admin, ["bench"])
    rows = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows["DuckDB file"] = run(str(Path(tmp) / "memory.duckdb"), corpus, args.calls)
        rows["PostgreSQL"] = run(member, corpus, args.calls)
    finally:
        with psycopg.connect(args.url, autocommit=True) as con:
            con.execute(f"DROP DATABASE {name} WITH (FORCE)")
    print(f"{args.size:,} memories, {args.calls} recalls while another process writes\n")
    print("| store | import /s | fresh kernel: open + first recall ms | no saved index: process ms | "
          "recall p50 ms | p95 ms | writes meanwhile |")
    print("|---|---|---|---|---|---|---|")
    for k, r in rows.items():
        print(f"| {k} | {r['import_per_s']:,.0f} | {r['first_ms']:,.0f} | {r['rebuilt_ms']:,.0f} | {r['p50']:.2f} | "
              f"{r['p95']:.2f} | {r['writes']:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
