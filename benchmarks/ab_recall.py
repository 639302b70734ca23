"""Two versions of the engine on the same store, question by question: the same answers, and
what each recall costs, with the meaning channel and by words alone.

    python benchmarks/ab_recall.py --base REV [--n 100000] [--questions 600] [--db PATH] [--imported]

The package as it was at commit REV (`git archive`) is imported under another name beside this
checkout's, each opens its own copy of the speed benchmark's synthetic store of `--n` notes
(built by this checkout, kept at `--db` for the next run), and every question is asked of both,
each first in turn, with the channel and then without it. A change that should leave every
answer alone says so in the "same answers" line; timing differences between two runs minutes
apart are larger than most changes, so both versions are timed in one process, one question
after the other. `--imported`: each version imports the notes into a file of its own and is
asked in the same process, by words alone, as a store is just after a bulk import (its index
in the segments the import left, not the one saved and mapped on the next open).
"""

from __future__ import annotations

import argparse
import importlib
import io
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def base_package(rev: str, into: Path) -> str:
    """The package at `rev`, unpacked under `into` as slm_magic_base; its module name."""
    tar = subprocess.run(["git", "-C", str(REPO), "archive", rev, "slm_magic"], check=True,
                         capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    (into / "slm_magic").rename(into / "slm_magic_base")
    if (into / "slm_magic_base" / "core" / "_kernels.c").exists():  # (its compiled kernel, as an install builds it)
        ext = "setuptools.Extension('slm_magic_base.core._kernels', ['slm_magic_base/core/_kernels.c'], " \
              "extra_compile_args=['-O2', '-ffp-contract=off'])"
        subprocess.run([sys.executable, "-c", f"import setuptools; setuptools.setup(name='base', ext_modules=[{ext}], "
                        "script_args=['-q', 'build_ext', '--inplace'])"], cwd=into, check=True, capture_output=True)
    sys.path.insert(0, str(into))
    return "slm_magic_base"


def answers(result, by_content: bool = False) -> list[tuple[str, float]]:
    """Each memory (by id; by its text where two imports gave the same notes other ids) and its score."""
    return [(m.fact.content if by_content else m.fact.fact_id, m.score.value) for m in result.memories]


def agree(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> tuple[bool, bool, float]:
    """(the same memories and scores to nine decimals, the same memories in the same order, the
    largest difference of a score where the memories are the same)."""
    order = [m for m, _ in a] == [m for m, _ in b]
    gap = max((abs(x - y) for (_, x), (_, y) in zip(a, b)), default=0.0) if order else 0.0
    return order and all(round(x, 9) == round(y, 9) for (_, x), (_, y) in zip(a, b)), order, gap


def main(argv: list[str] | None = None) -> int:
    import slm_magic
    from benchmarks.synthetic import generate_memories, generate_queries, store_arguments, store_at
    from benchmarks.timing import median_p95
    from slm_magic.core import kernels

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the commit to compare this checkout with")
    store_arguments(ap, questions=600)
    ap.add_argument("--imported", action="store_true", help="each version imports the notes itself (by words)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = importlib.import_module(base_package(args.base, tmp / "pkg"))
        corpus = list(generate_memories(args.n, seed=0))
        if args.imported:
            engines = {}
            for k, package in (("base", base), ("this", slm_magic)):
                engines[k] = package.Memory(str(tmp / f"{k}.duckdb"), semantic=False)
                engines[k].remember_many(corpus)
                engines[k].replica.wait_saved()  # (the save after the import, not beside the timed recalls)
        else:
            db = store_at(args.db, args.n, tmp / "ab.duckdb")
            copy = tmp / "base.duckdb"
            for f in db.parent.glob(db.name + "*"):
                shutil.copy(f, copy.with_name(f.name.replace(db.name, copy.name)))
            engines = {"base": base.Memory(str(copy)), "this": slm_magic.Memory(str(db))}
        queries = generate_queries(args.questions + 20, seed=1, corpus_sample=corpus)
        for q in queries[:20]:
            for mem in engines.values():
                mem.recall(q, limit=10)
        lat = {(k, way): [] for k in engines for way in ("meaning", "words")}
        same = ordered = 0
        gap = 0.0
        for i, q in enumerate(queries[20:]):
            got = {}
            for k in (("base", "this") if i % 2 else ("this", "base")):
                mem = engines[k]
                model = mem.meaning
                t0 = time.perf_counter()
                got[k] = answers(mem.recall(q, limit=10), args.imported)
                lat[(k, "meaning" if model is not None else "words")].append((time.perf_counter() - t0) * 1000)
                if model is None:
                    continue
                mem.meaning = None
                try:
                    t0 = time.perf_counter()
                    mem.recall(q, limit=10)
                    lat[(k, "words")].append((time.perf_counter() - t0) * 1000)
                finally:
                    mem.meaning = model
            exact, in_order, most = agree(got["base"], got["this"])
            same, ordered, gap = same + exact, ordered + in_order, max(gap, most)
        for mem in engines.values():
            mem.close()
    base_compiled = getattr(getattr(getattr(base, "core", None), "kernels", None), "COMPILED", False)
    print(f"{args.n:,} notes, {args.questions} questions, recall p50 with the meaning channel / by words alone "
          f"(the loops {'compiled' if base_compiled else 'in numpy'} in {args.base}, "
          f"{'compiled' if kernels.COMPILED else 'in numpy'} in this checkout):")
    for k, name in (("base", args.base), ("this", "this checkout")):
        off, p95 = median_p95(lat[(k, "words")])
        if not lat[(k, "meaning")]:
            print(f"  {name}: - / {off:.3f} ms, p95 by words {p95:.3f} ms (each version's own import)")
            continue
        on = statistics.median(lat[(k, "meaning")])
        print(f"  {name}: {on:.3f} / {off:.3f} ms ({on / off:.2f}x, the channel {on - off:.3f} ms), "
              f"p95 by words {p95:.3f} ms")
    print(f"same answers (memories and scores to nine decimals): {same} of {args.questions}; the same memories "
          f"in the same order: {ordered}, their scores at most {gap:.1e} apart")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
