"""Small helpers shared by the latency benchmarks."""

from __future__ import annotations

import statistics


def median_p95(times_ms: list[float]) -> tuple[float, float]:
    ordered = sorted(times_ms)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def cli_args(description: str, argv: list[str] | None):
    """--size and --calls, the two knobs of the session and kernel benchmarks."""
    import argparse

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=100)
    return ap.parse_args(argv)
