"""What a long memory costs: remembering a pasted training log of 1 MB and 10 MB (the limit)
into a file of 10,000 ordinary findings, and recalling it, beside the same for a one-line
finding. Each figure is the median of 5 runs (5 different questions for recall); the file is on disk, as a user has it.

    .venv/bin/python benchmarks/long_memory.py
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

from slm_magic import Memory
from slm_magic.engine.validate import MAX_CONTENT_CHARS

RUNS = 5


def training_log(chars: int) -> str:
    lines, size, i = [], 0, 0
    while size < chars:
        lines.append(f"epoch {i // 100} step {i}: loss {1 / (i + 1):.6f} lr 0.001 grad_norm {i % 17}.{i % 7}\n")
        size += len(lines[-1])
        i += 1
    return "".join(lines)[: chars - 60] + "\nRuntimeError: CUDA out of memory in the attention block\n"


QUERIES = ["CUDA out of memory attention", "attention block out of memory", "RuntimeError CUDA memory",
           "CUDA memory attention block", "out of memory RuntimeError attention"]


def median_ms(fn) -> float:
    times = []
    for run in range(RUNS):
        t = time.perf_counter()
        fn(run)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(Path(tmp) / "long.duckdb")
        mem.remember_many({"content": f"finding {i}: the join on customer_id drops rows in week {i % 52}"}
                          for i in range(10_000))
        print("| memory | characters | remember (ms) | recall it (ms) | found first |")
        print("|---|---|---|---|---|")
        for label, content in (("one-line finding", "the attention block ran out of CUDA memory at batch 512"),
                               ("training log, 1 MB", training_log(1_000_000)),
                               ("training log, 10 MB (the limit)", training_log(MAX_CONTENT_CHARS))):
            ids = []
            remember = median_ms(lambda run, ids=ids, content=content: ids.append(mem.remember(content).fact_id))
            results = []
            recall = median_ms(lambda run, results=results: results.append(mem.recall(QUERIES[run], limit=10)))
            first = results[-1].memories[0].fact_id in ids
            print(f"| {label} | {len(content):,} | {remember:.1f} | {recall:.1f} | {'yes' if first else 'no'} |")
            for fid in ids:
                mem.forget(fid)
        mem.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
