"""What checking a saved index costs a new kernel: one checksum over every array of an index
file, as `index_file.read` runs it (the file mapped copy-on-write), with zlib's CRC-32 (format
6) and with XXH3 (format 7). Each run is a fresh process, so the map's first page faults count.

    python benchmarks/checksums.py /tmp/shared/memory.duckdb.idx --runs 3

Any saved index will do, e.g. the one `benchmarks/shared_index.py` builds at 1M memories.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CHILD = r"""
import mmap, os, sys, time, zlib
import xxhash

path, how = sys.argv[1], sys.argv[2]
with open(path, "rb") as fh:
    mm = mmap.mmap(fh.fileno(), os.fstat(fh.fileno()).st_size, access=mmap.ACCESS_COPY)
view = memoryview(mm)
t0 = time.perf_counter()
zlib.crc32(view) if how == "crc32" else xxhash.xxh3_64_intdigest(view)
print((time.perf_counter() - t0) * 1000)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index", help="a saved index file (memory.duckdb.idx)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    times: dict[str, list[float]] = {"crc32": [], "xxh3": []}
    for _ in range(args.runs):
        for how in times:  # alternating, so that both see the same machine
            out = subprocess.run([sys.executable, "-c", CHILD, args.index, how], check=True,
                                 capture_output=True, text=True).stdout
            times[how].append(float(out))
    size = os.path.getsize(args.index)
    print(f"{size / 2**20:,.0f} MB, {args.runs} fresh processes each")
    print("| checksum | ms per run | GB/s (best) |")
    print("|---|---|---|")
    for how, ms in times.items():
        print(f"| {how} | {' / '.join(f'{t:.1f}' for t in ms)} | {size / min(ms) / 1e6:.1f} |")


if __name__ == "__main__":
    main()
