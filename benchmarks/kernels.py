"""What sharing one file between kernels costs a %recall: the magic opens the file, catches up
with other kernels' writes and lets go again, every time.

    python benchmarks/kernels.py [--size 100000] [--calls 100]

Compares, on the same store: `Memory.recall` on a held connection; `%recall` through a real
InteractiveShell (open + catch up + recall + close); and `%recall` right after another
process wrote a memory (the catch-up has work to do).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from timing import cli_args, print_latencies, workload  # noqa: E402

from slm_magic import Memory  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args = cli_args(__doc__.split("\n\n")[0], argv)
    corpus, queries = workload(args)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "memory.duckdb"
        with Memory(db) as mem:
            mem.remember_many(corpus)
            held = []
            for q in queries:
                t = time.perf_counter()
                mem.recall(q)
                held.append((time.perf_counter() - t) * 1000)

        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config

        config = Config()
        config.HistoryManager.enabled = False
        ip = InteractiveShell.instance(config=config)
        ip.run_line_magic("load_ext", "slm_magic")
        ip.run_line_magic("config", f"SLMMagic.db_path = {str(db)!r}")
        ip.run_line_magic("recall", "warm up")  # the first open builds the index
        magic = []
        for q in queries:
            t = time.perf_counter()
            ip.run_line_magic("recall", q)
            magic.append((time.perf_counter() - t) * 1000)
        after_write = []
        writer = [sys.executable, "-m", "slm_magic.cli", "--db", str(db), "remember"]
        for i, q in enumerate(queries[: max(10, args.calls // 5)]):
            subprocess.run([*writer, f"note {i} from another kernel: {q}"], check=True, capture_output=True)
            t = time.perf_counter()
            ip.run_line_magic("recall", q)
            after_write.append((time.perf_counter() - t) * 1000)
        ip.run_line_magic("unload_ext", "slm_magic")
    print(f"{args.size:,} memories, {args.calls} queries")
    print_latencies([("Memory.recall, connection held", held), ("%recall (open, catch up, close)", magic),
                     ("%recall after another process wrote", after_write)], mid="median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
