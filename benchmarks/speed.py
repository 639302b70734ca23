"""Speed benchmark: the slm_magic engine against the lexical baselines.

    python benchmarks/speed.py [--sizes 10000,100000,1000000] [--methods slm_magic,bm25s,...]
                               [--queries 200] [--json OUT] [--engine-opts '{"...": ...}']
                               [--beside bm25s_numba]

Every (size, method) pair runs in its own fresh subprocess, so peak RSS
belongs to that method alone and no import, cache or JIT warms another's run.
The child regenerates the deterministic synthetic corpus (benchmarks/synthetic.py)
and holds it in memory for every method; "delta RSS" is the peak above that
loaded-corpus baseline during indexing and querying, i.e. roughly what the
index itself costs.

Measured per row:
  * import   - memories/s for loading the whole corpus (engine: Memory() + remember_many;
               baselines: constructor + index(texts)), after a throwaway 200-document
               index has paid the lazy library imports;
  * recall   - median and p95 latency of top-10 searches over the generated queries,
               after 5 warm-up queries (stops early past --recall-budget seconds);
  * remember - engine only: median of 200 single remember() calls on the loaded store;
  * cold     - engine only: in a fresh process, Memory(path) on the closed DuckDB file
               plus the first recall (the OS page cache is warm: this is not a cold disk);
  * RSS      - peak resident set size of the child (ru_maxrss).
  * beside   - with --beside B: B built on the same notes in the engine's process (after its
               memory is read) and each question asked of the engine with its meaning channel,
               by words alone and of B, one after the other: ratios free of the minutes between
               the table's processes.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

ENGINE = "slm_magic"
# The engine by its words alone (semantic=False): what the meaning channel costs, in the same run.
WORDS = "slm_magic_words"
ENGINES = (ENGINE, WORDS)
DEFAULT_SIZES = "10000,100000,1000000"
TOP_K = 10
WARM_DOCS = 200  # size of the throwaway index that pays lazy imports before timing


# --------------------------------------------------------------------------
# helpers shared by parent and children


def _peak_rss_mb() -> float:
    # Linux reports ru_maxrss in KiB (macOS in bytes; this benchmark targets Linux).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _private_memory() -> dict:
    """The cold process's memory in MB (see timing.memory_now)."""
    from benchmarks.timing import memory_now

    return {f"cold_{k}_mb": v / 2**20 for k, v in memory_now().items()}


def _current_rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _start_index_phase(out: dict) -> None:
    """Record the loaded-corpus RSS and reset the kernel's peak counter.

    Corpus generation can leave a peak above what the index phase ever
    reaches; resetting (Linux /proc/self/clear_refs "5") makes the later
    ru_maxrss the peak of the index phase alone.  The peak so far is kept for
    the whole-process figure.
    """
    gc.collect()
    out["pre_index_peak_rss_mb"] = _peak_rss_mb()
    out["base_rss_mb"] = _current_rss_mb()
    try:
        Path("/proc/self/clear_refs").write_text("5")
        out["peak_reset"] = True
    except OSError:
        out["peak_reset"] = False


def _end_index_phase(out: dict) -> None:
    """The index phase's peak and delta RSS, read once (a baseline built beside the engine ends
    the engine's phase early)."""
    if "peak_rss_mb" in out:
        return
    phase_peak = _peak_rss_mb()
    out["peak_rss_mb"] = max(phase_peak, out["pre_index_peak_rss_mb"])
    out["delta_rss_mb"] = phase_peak - out["base_rss_mb"]


def _pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile: no interpolation, so p95 is a latency that really occurred."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def load_baselines() -> dict[str, type]:
    """Baselines by name, from benchmarks/baselines.py; empty if that file is missing."""
    try:
        from benchmarks import baselines
    except ImportError:
        return {}
    registry = getattr(baselines, "BASELINES", None)
    if isinstance(registry, dict):
        return dict(registry)
    # Fall back to any class that has the interface, should the registry disappear.
    found = {}
    for obj in vars(baselines).values():
        if (
            isinstance(obj, type)
            and obj.__module__ == baselines.__name__
            and callable(getattr(obj, "index", None))
            and callable(getattr(obj, "search", None))
            and isinstance(getattr(obj, "name", None), str)
            and obj.name not in ("baseline", "")
        ):
            found[obj.name] = obj
    return found


def _engine_available() -> str | None:
    """None if the engine can be imported, else why not."""
    try:
        from slm_magic import Memory  # noqa: F401
    except Exception as exc:  # a half-written engine may fail with anything
        return f"{type(exc).__name__}: {exc}"
    return None


# --------------------------------------------------------------------------
# child: one method on one corpus size


def _time_recalls(search, queries: list[str], warmup: int, budget_s: float) -> dict:
    for q in queries[:warmup]:
        search(q)
    lat, hits = [], 0
    start = time.perf_counter()
    for q in queries[warmup:]:
        t0 = time.perf_counter()
        n = len(search(q))
        lat.append((time.perf_counter() - t0) * 1000)
        hits += n > 0
        if time.perf_counter() - start > budget_s:
            break
    return {
        "recall_p50_ms": statistics.median(lat),
        "recall_p95_ms": _pct(lat, 95),
        "recall_mean_ms": statistics.fmean(lat),
        "queries_timed": len(lat),
        "queries_with_hits": hits,
    }


def run_child(args: argparse.Namespace) -> dict:
    """Load the corpus, build the index, time recalls (and for the engine, remembers)."""
    from benchmarks.synthetic import generate_memories, generate_queries

    t0 = time.perf_counter()
    corpus = list(generate_memories(args.size, seed=args.seed))
    queries = generate_queries(args.warmup + args.queries, seed=args.seed + 1, corpus_sample=corpus)
    out: dict = {"generate_s": time.perf_counter() - t0, "first_query": queries[args.warmup]}

    if args.child in ENGINES:
        from slm_magic import Memory

        opts = json.loads(args.engine_opts) if args.engine_opts else {}
        if args.child == WORDS:
            opts["semantic"] = False
        # Pay lazy imports and first-use setup on a throwaway store, as baselines do below.
        warm_db = Path(args.db).with_name("warmup.duckdb")
        warm = Memory(str(warm_db), **opts)
        warm.remember_many(corpus[:WARM_DOCS])
        warm.recall(queries[0], limit=TOP_K)
        warm.close()
        for f in warm_db.parent.glob(warm_db.name + "*"):
            f.unlink()
        _start_index_phase(out)
        t0 = time.perf_counter()
        mem = Memory(args.db, **opts)
        mem.remember_many(corpus)
        out["import_s"] = time.perf_counter() - t0
        out["import_peak_rss_mb"] = _peak_rss_mb()
        # Beyond the writer's first VECTORS_INLINE memories the vectors follow the import in the
        # background (stored and searchable by words at once): timed until every memory has one.
        t0 = time.perf_counter()
        mem.wait_for_vectors()
        out["vectors_follow_s"] = time.perf_counter() - t0
        # The bulk write saves the index beside the file in a background thread; let it finish
        # (timed on its own) so that it does not run beside the timed recalls.
        t0 = time.perf_counter()
        if mem.replica is not None:
            mem.replica.wait_saved()
        out["save_wait_s"] = time.perf_counter() - t0
        out.update(_time_recalls(lambda q: mem.recall(q, limit=TOP_K).memories,
                                 queries, args.warmup, args.recall_budget))
        extra = list(generate_memories(args.remembers, seed=args.seed + 1000))
        lat = []
        for m in extra:
            t0 = time.perf_counter()
            mem.remember(m["content"], session_id=m["session_id"], tags=m["tags"],
                         project=m["project"], type=m["type"], created_at=m["created_at"])
            lat.append((time.perf_counter() - t0) * 1000)
        out["remember_p50_ms"] = statistics.median(lat)
        out["remember_p95_ms"] = _pct(lat, 95)
        if args.child == ENGINE and mem.index is not None:  # (after the remembers: both engines time them alike)
            out.update(_cells_agreement(mem, queries[args.warmup: args.warmup + out["queries_timed"]]))
            out.update(_meaning_cost(mem, queries[args.warmup: args.warmup + out["queries_timed"]]))
            if args.beside:  # (its index would count in this engine's memory: the peak is read first)
                _end_index_phase(out)
                out.update(_beside_baseline(mem, args.beside, [m["content"] for m in corpus],
                                            queries[args.warmup: args.warmup + out["queries_timed"]]))
        t0 = time.perf_counter()
        mem.close()
        out["close_s"] = time.perf_counter() - t0
        db = Path(args.db)
        out["db_mb"] = sum(f.stat().st_size for f in db.parent.glob(db.name + "*")) / 2**20
    else:
        texts = [m["content"] for m in corpus]
        cls = load_baselines()[args.child]
        # Baselines import their libraries lazily: keep that one-off cost out of the import rate.
        warm = cls()
        warm.index(texts[:WARM_DOCS])
        warm.search(queries[0], TOP_K)
        del warm
        _start_index_phase(out)
        t0 = time.perf_counter()
        method = cls()
        method.index(texts)
        out["import_s"] = time.perf_counter() - t0
        out.update(_time_recalls(lambda q: method.search(q, TOP_K),
                                 queries, args.warmup, args.recall_budget))
    out["import_rate"] = args.size / out["import_s"] if out["import_s"] > 0 else float("inf")
    _end_index_phase(out)
    return out


def _cells_agreement(mem, queries: list[str]) -> dict:
    """How often the meaning channel's cells change a recall: each question's top 10 as timed,
    and with every cell read (the exact search), in the same store."""
    vs = mem.index.vectors
    out = {"vec_cells": int(vs.centroids.shape[0]), "vec_live": int(vs.live)}
    if not out["vec_cells"] or not queries:
        return out
    fast = [[m.fact.fact_id for m in mem.recall(q, limit=TOP_K).memories] for q in queries]
    vs.PROBE_SHARE = 1.0  # (this instance only)
    try:
        exact = [[m.fact.fact_id for m in mem.recall(q, limit=TOP_K).memories] for q in queries]
    finally:
        del vs.PROBE_SHARE
    same = sum(a == b for a, b in zip(fast, exact))
    overlap = [len(set(a) & set(b)) / len(b) if b else float(not a) for a, b in zip(fast, exact)]
    return {**out, "cells_same_top10": same / len(queries), "cells_overlap_top10": statistics.fmean(overlap)}


def _meaning_cost(mem, queries: list[str]) -> dict:
    """What the meaning channel adds to a recall on the same store: each question asked with the
    channel and then without it (the model set aside for that one recall), one after the other,
    so that both halves of the ratio see the same machine at the same moment."""
    lat_on, lat_off = [], []
    for q in queries:
        t0 = time.perf_counter()
        mem.recall(q, limit=TOP_K)
        lat_on.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        _by_words(mem, q)
        lat_off.append((time.perf_counter() - t0) * 1000)
    return {"paired_meaning_p50_ms": statistics.median(lat_on), "paired_words_p50_ms": statistics.median(lat_off)}


def _by_words(mem, q: str):
    """A recall with the meaning channel set aside for it alone (the model kept)."""
    model, mem.meaning = mem.meaning, None
    try:
        return mem.recall(q, limit=TOP_K)
    finally:
        mem.meaning = model


def _beside_baseline(mem, name: str, texts: list[str], queries: list[str]) -> dict:
    """The engine, with its meaning channel and by words alone, and a baseline built on the same
    notes in this process, each question asked of the three one after the other (each first in
    turn): ratios that every question's moment of the machine weighs alike, where the table's
    come from processes run minutes apart."""
    baseline = load_baselines()[name]()
    baseline.index(texts)
    lat = {"meaning": [], "words": [], "baseline": []}
    asks = [("meaning", lambda q: mem.recall(q, limit=TOP_K)), ("words", lambda q: _by_words(mem, q)),
            ("baseline", lambda q: baseline.search(q, TOP_K))]
    for q in queries[:5]:
        for _, ask in asks:
            ask(q)
    for i, q in enumerate(queries):
        for key, ask in asks[i % 3:] + asks[: i % 3]:
            t0 = time.perf_counter()
            ask(q)
            lat[key].append((time.perf_counter() - t0) * 1000)
    return {"beside": name, **{f"beside_{k}_p50_ms": statistics.median(v) for k, v in lat.items()},
            **{f"beside_{k}_p95_ms": _pct(v, 95) for k, v in lat.items()}}


def run_cold(args: argparse.Namespace) -> dict:
    """Open the closed store and answer one recall: what a user waits for in a new kernel."""
    t0 = time.perf_counter()
    from slm_magic import Memory

    out = {"engine_import_s": time.perf_counter() - t0}
    opts = json.loads(args.engine_opts) if args.engine_opts else {}
    if args.words:
        opts["semantic"] = False
    t0 = time.perf_counter()
    mem = Memory(args.db, **opts)
    out["open_ms"] = (time.perf_counter() - t0) * 1000
    res = mem.recall(args.query, limit=TOP_K)
    out["cold_ms"] = (time.perf_counter() - t0) * 1000
    out["cold_hits"] = len(res.memories)
    out["cold_source"] = mem.replica.source if mem.replica is not None else mem.index_error
    out.update(_private_memory())
    t0 = time.perf_counter()
    mem.recall(args.query, limit=TOP_K)
    out["second_recall_ms"] = (time.perf_counter() - t0) * 1000
    mem.close()
    out["cold_peak_rss_mb"] = _peak_rss_mb()
    return out


# --------------------------------------------------------------------------
# parent: orchestration and the table


def _spawn(argv: list[str], result: Path, timeout: float) -> dict:
    """Run this script as a child and read its JSON result; failures become an 'error' entry."""
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--out", str(result)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f}s", "wall_s": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not result.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {proc.returncode}: {tail[0][:200]}", "wall_s": wall}
    data = json.loads(result.read_text())
    data["wall_s"] = wall
    return data


def run_one(size: int, method: str, args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"slm_speed_{method}_{size}_"))
    try:
        common = ["--size", str(size), "--seed", str(args.seed), "--db", str(tmp / "memory.duckdb")]
        if args.engine_opts:
            common += ["--engine-opts", args.engine_opts]
        row = _spawn(
            ["--child", method, *common, "--queries", str(args.queries), "--warmup", str(args.warmup),
             "--remembers", str(args.remembers), "--recall-budget", str(args.recall_budget),
             *(["--beside", args.beside] if args.beside and method == ENGINE else [])],
            tmp / "run.json", args.timeout,
        )
        if method in ENGINES and "error" not in row:
            cold = _spawn(["--cold", *common, "--query", row["first_query"], *(["--words"] if method == WORDS else [])],
                          tmp / "cold.json", args.timeout)
            if "error" in cold:
                row["cold_error"] = cold["error"]
            else:
                row.update({k: v for k, v in cold.items() if k != "wall_s"})
                row["wall_s"] += cold["wall_s"]
        return row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fmt(value, digits: int = 3) -> str:
    """Three significant digits reads well for anything from 0.05 ms to 400 ms."""
    if value is None:
        return "-"
    if value >= 10 ** digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def render_table(rows: list[dict]) -> str:
    head = ("| n | method | import (mem/s) | index save s | recall p50 ms | recall p95 ms | remember p50 ms "
            "| cold open ms | cold from | cold RSS / private MB | peak RSS MB | delta RSS MB | run s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['n']:,} | {r['method']} | {r['error']} |  |  |  |  |  |  |  |  |  | "
                         f"{_fmt(r.get('wall_s'))} |")
            continue
        recall_p50 = _fmt(r["recall_p50_ms"])
        if r["queries_timed"] < r["queries_requested"]:
            recall_p50 += f" (n={r['queries_timed']})"
        lines.append(
            "| " + " | ".join([
                f"{r['n']:,}",
                r["method"],
                _fmt(r["import_rate"]),
                _fmt(r.get("save_wait_s")),
                recall_p50,
                _fmt(r["recall_p95_ms"]),
                _fmt(r.get("remember_p50_ms")),
                _fmt(r.get("cold_ms")),
                str(r.get("cold_source") or "-").split(" (")[0],
                (f"{r['cold_rss_mb']:,.0f} / {r['cold_anon_mb']:,.0f}" if "cold_rss_mb" in r else "-"),
                f"{r['peak_rss_mb']:,.0f}",
                f"{r['delta_rss_mb']:,.0f}",
                _fmt(r["wall_s"]),
            ]) + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated corpus sizes")
    ap.add_argument("--methods", default=None, help=f"comma-separated; default {ENGINE} and every baseline")
    ap.add_argument("--queries", type=int, default=200, help="timed recall queries per run")
    ap.add_argument("--warmup", type=int, default=5, help="untimed queries first")
    ap.add_argument("--remembers", type=int, default=200, help="single remember() calls timed (engine)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine-opts", default=None, help="JSON object passed as Memory(path, **opts)")
    ap.add_argument("--json", type=Path, default=None, help="write raw numbers here")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds before a child is killed")
    ap.add_argument("--recall-budget", type=float, default=120,
                    help="stop timing recalls after this many seconds (slow baselines at 1M)")
    ap.add_argument("--beside", default=None, metavar="BASELINE",
                    help="also build BASELINE (e.g. bm25s_numba) in the engine's own process and time it there "
                         "beside the engine, question by question")
    # Internal: how the parent starts children.
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--cold", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--words", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("--query", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child or args.cold:
        result = run_cold(args) if args.cold else run_child(args)
        args.out.write_text(json.dumps(result))
        return 0

    if args.engine_opts:
        json.loads(args.engine_opts)  # fail now, not in every child
    baselines = load_baselines()
    if args.beside and args.beside not in baselines:
        ap.error(f"unknown baseline {args.beside!r} for --beside; known: {list(baselines)}")
    methods = args.methods.split(",") if args.methods else [ENGINE, *baselines]
    unknown = [m for m in methods if m not in ENGINES and m not in baselines]
    if unknown:
        ap.error(f"unknown method(s) {unknown}; known: {[ENGINE, *baselines]}")
    notes = []
    if ENGINE in methods and (why := _engine_available()):
        notes.append(f"{ENGINE} skipped: cannot import Memory ({why})")
        methods.remove(ENGINE)

    rows, size_wall = [], {}
    for size in (int(s) for s in args.sizes.split(",")):
        t_size = time.perf_counter()
        for method in methods:
            print(f"[speed] n={size:,} {method} ...", file=sys.stderr, flush=True)
            row = run_one(size, method, args)
            row.update(n=size, method=method, queries_requested=args.queries)
            rows.append(row)
            if "cold_error" in row:
                notes.append(f"{method} n={size:,}: cold open failed: {row['cold_error']}")
            print(f"[speed]   done in {row.get('wall_s', 0):.1f}s"
                  + (f" ({row['error']})" if "error" in row else ""), file=sys.stderr, flush=True)
        size_wall[size] = time.perf_counter() - t_size

    print(render_table(rows))
    print()
    print("Wall time per size: " + ", ".join(f"{n:,}: {s:.0f}s" for n, s in size_wall.items()))
    print(f"Top-{TOP_K} recall over {args.queries} queries after {args.warmup} warm-up; "
          "delta RSS = peak while indexing and querying minus RSS with the corpus loaded; cold open = Memory(path) + first "
          "recall in a fresh process (page cache warm); cold from = a saved index mapped or the index rebuilt; "
          "private = that process's anonymous memory (RssAnon: what it holds that no other kernel shares); "
          "index save s = the background save after the import, waited for before the timed recalls.")
    for r in rows:
        if r.get("vectors_follow_s"):
            print(f"Vectors after the import at {r['n']:,} ({r['method']}): every memory had one "
                  f"{r['vectors_follow_s']:.1f} s after the import returned "
                  f"({r['n'] / (r['import_s'] + r['vectors_follow_s']):,.0f} memories/s with them).")
    for r in rows:
        if "cells_same_top10" in r:
            print(f"Meaning cells at {r['n']:,}: {r['vec_cells']:,} cells; the top {TOP_K} with the nearest cells read is "
                  f"the exact search's for {r['cells_same_top10']:.1%} of the timed questions "
                  f"(overlap {r['cells_overlap_top10']:.2%}).")
        if "beside" in r:
            print(f"Beside {r['beside']} at {r['n']:,}, built on the same notes in the engine's process, each question "
                  f"asked of the three in turn: p50 with the meaning channel {r['beside_meaning_p50_ms']:.2f} ms "
                  f"({r['beside_meaning_p50_ms'] / r['beside_baseline_p50_ms']:.2f}x), by words "
                  f"{r['beside_words_p50_ms']:.2f} ms ({r['beside_words_p50_ms'] / r['beside_baseline_p50_ms']:.2f}x), "
                  f"{r['beside']} {r['beside_baseline_p50_ms']:.3f} ms; p95 by words {r['beside_words_p95_ms']:.2f} "
                  f"against {r['beside_baseline_p95_ms']:.2f} ms "
                  f"({r['beside_words_p95_ms'] / r['beside_baseline_p95_ms']:.2f}x).")
        if "paired_meaning_p50_ms" in r:
            print(f"Meaning channel at {r['n']:,}, the same store and questions, each asked with it and then without "
                  f"it: recall p50 {r['paired_meaning_p50_ms']:.2f} against {r['paired_words_p50_ms']:.2f} ms "
                  f"({r['paired_meaning_p50_ms'] / r['paired_words_p50_ms']:.2f}x).")
    from slm_magic.core import kernels
    print("The engine's loops over every match ran " + ("compiled (core/_kernels.c)." if kernels.COMPILED else
          "in numpy: the package was built without a C compiler (core/kernels.py)."))
    for note in notes:
        print(f"Note: {note}")
    if args.json:
        args.json.write_text(json.dumps(
            {"argv": sys.argv[1:], "rows": rows, "size_wall_s": size_wall, "notes": notes},
            indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
