"""What a bulk write of one record costs when every bulk write ends with a CHECKPOINT, against
checkpointing only when its log grew past DuckDB's usual threshold (Store.CHECKPOINT_WAL_BYTES).

    python benchmarks/small_bulk_writes.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slm_magic import Memory  # noqa: E402
from slm_magic.storage.store import Store  # noqa: E402


def main() -> None:
    usual = Store.CHECKPOINT_WAL_BYTES
    print("| bulk writes end with | ms per remember_many of one record |\n|---|---|")
    for name, limit in (("a checkpoint, always", -1), ("a checkpoint past 16 MiB of log", usual)):
        Store.CHECKPOINT_WAL_BYTES = limit
        with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "m.duckdb") as m:
            m.remember_many([{"content": f"note {i}"} for i in range(2000)])
            t0 = time.perf_counter()
            for i in range(50):
                m.remember_many([{"content": f"one more note {i}"}])
            print(f"| {name} | {(time.perf_counter() - t0) / 50 * 1000:.2f} |")
    Store.CHECKPOINT_WAL_BYTES = usual


if __name__ == "__main__":
    main()
