"""Latency of opening a session, both APIs, on a store of synthetic memories.

    python benchmarks/sessions.py [--size 100000] [--calls 100]

`session_init` (API A: a new session row, a recall of the project query, the age gate, core
memories, the learning status) and `mem_session_start` (API B: reuse of the live session,
5 recent summaries, 10 observations by ContextScore) on one user's memories in a DuckDB file,
plus `close_session` of a 20-memory session. Medians and p95 in milliseconds.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from timing import cli_args, median_p95, workload  # noqa: E402

from slm_magic import Memory  # noqa: E402


def timed(fn, calls: int) -> tuple[float, float]:
    times = []
    for i in range(calls):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1000)
    return median_p95(times)


def main(argv: list[str] | None = None) -> int:
    args = cli_args(__doc__.split("\n\n")[0], argv)

    corpus, queries = workload(args)
    projects = sorted({m["project"] for m in corpus})
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(Path(tmp) / "memory.duckdb", user_id="alice")
        mem.remember_many({**m, "user_id": "alice"} for m in corpus)
        for m in corpus[:5]:
            mem.remember(m["content"], core=True)
        mem.mem_session_start("alice")
        rows = []
        med, p95 = timed(lambda i: mem.session_init(project_path=f"~/work/{projects[i % len(projects)]}"), args.calls)
        rows.append(("session_init(project_path)", med, p95))
        med, p95 = timed(lambda i: mem.session_init(query=queries[i]), args.calls)
        rows.append(("session_init(query)", med, p95))
        med, p95 = timed(lambda i: mem.mem_session_start("alice"), args.calls)
        rows.append(("mem_session_start (reuse)", med, p95))

        def close(i: int) -> None:
            sid = f"bench-close-{i}"
            mem.remember_many({"content": m["content"], "session_id": sid, "tags": m["tags"]}
                              for m in corpus[i * 20:(i + 1) * 20])
            t = time.perf_counter()
            mem.close_session(sid)
            close_times.append((time.perf_counter() - t) * 1000)

        close_times: list[float] = []
        for i in range(min(args.calls, 30)):
            close(i)
        rows.append(("close_session (20 memories)", *median_p95(close_times)))
        mem.close()
    print(f"{args.size:,} memories of one user, {args.calls} calls each")
    print("| call | median ms | p95 ms |\n|---|---|---|")
    for name, med, p95 in rows:
        print(f"| {name} | {med:.2f} | {p95:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
