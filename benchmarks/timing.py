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


def cli_args(description: str, argv: list[str] | None, calls: int = 100):
    """--size and --calls, the two knobs of the session, kernel and MCP benchmarks."""
    import argparse

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=calls)
    return ap.parse_args(argv)


def workload(args) -> tuple[list[dict], list[str]]:
    """The corpus of `args.size` memories and `args.calls` queries drawn from its start."""
    import synthetic

    corpus = list(synthetic.generate_memories(args.size))
    return corpus, synthetic.generate_queries(args.calls, corpus_sample=corpus[:2000])


def memory_now() -> dict[str, int]:
    """This process's memory in bytes: RSS, USS, PSS and its anonymous pages (RssAnon). A
    mapped index's pages count in RSS but are shared by every kernel on the file; what a
    process holds of its own is RssAnon / USS."""
    import psutil

    info = psutil.Process().memory_full_info()
    anon = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("RssAnon:"):
                anon = int(line.split()[1]) * 1024
    return {"rss": info.rss, "uss": info.uss, "pss": info.pss, "anon": anon}
