"""Small helpers shared by the latency benchmarks."""

from __future__ import annotations

import statistics


def median_p95(times_ms: list[float]) -> tuple[float, float]:
    ordered = sorted(times_ms)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def print_latencies(rows: list[tuple[str, list[float]]], first: str = "recall", mid: str = "p50") -> None:
    """One markdown table: each row's name, then the median and p95 of its times (ms)."""
    print(f"| {first} | {mid} ms | p95 ms |\n|---|---|---|")
    for name, times in rows:
        med, p95 = median_p95(times)
        print(f"| {name} | {med:.2f} | {p95:.2f} |")


def cli_args(description: str, argv: list[str] | None):
    """--size and --calls, the two knobs of the session and kernel benchmarks."""
    import argparse

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=100)
    return ap.parse_args(argv)
