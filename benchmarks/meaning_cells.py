"""How much the meaning channel's cells (slm_magic/vectors.py) change what comes back, on real text.

Every collection of benchmarks/meaning_sweep.py is built with the cells on from 1,024 vectors
(they start at VectorStore.EXACT, above most of these stores), then each question is asked with
the nearest cells read (the default share) and with every cell read (the exact search): the
share of questions whose top 10 is the same, and nDCG@10 both ways.

    .venv/bin/python benchmarks/meaning_cells.py [--only LongMemEval ...]

With `--sentences FILE --n N`: a store of N real sentences instead (the meaning model's build
corpus: `BUILD=/tmp/realtext python tools/meaning_model/build_corpus.py` writes
/tmp/realtext/corpus.json: docstrings, package descriptions, LongMemEval turns), cells as
shipped, asked the questions of LoCoMo, LongMemEval and the paraphrase benchmark; with
`--synthetic --n N`, the speed benchmark's notes and questions. `--shares 1/24:12,1/48` reads
those shares of the cells (at least 12, at least the default) against every cell;
`--word-probes 0,1024` also works out that many word matches' cosines exactly (0: none).
`--db PATH` (with `--synthetic`): that store of the `--n` notes, built there when missing, is
opened instead of remembering the notes in memory.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (HERE.parent, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def compare(col) -> tuple[float, float, float, int, int]:
    """(same top 10, nDCG with cells, nDCG exact, questions, cells) over a collection."""
    import meaning_sweep

    same = nd_cells = nd_exact = 0.0
    n = cells = 0
    for mem, ids, qs in col.stores:
        vs = mem.index.vectors
        cells = max(cells, vs.centroids.shape[0])
        for q, rel, _ in qs:
            got = [m.fact_id for m in mem.recall(q, limit=10).memories]
            vs.PROBE_SHARE = 1.0  # (this store only: every cell read)
            try:
                exact = [m.fact_id for m in mem.recall(q, limit=10).memories]
            finally:
                del vs.PROBE_SHARE
            same += got == exact
            nd_cells += meaning_sweep._quality().ndcg_r10([ids.get(f) for f in got], rel)[0]
            nd_exact += meaning_sweep._quality().ndcg_r10([ids.get(f) for f in exact], rel)[0]
            n += 1
    return same / n, nd_cells / n, nd_exact / n, n, cells


def store_agreement(path: str | None, n: int, questions: int, shares: list[str], word_probes: list[int],
                    db: Path | None = None) -> None:
    """The cells against the exact search on a store of `n` real sentences (or, with no path,
    of the speed benchmark's synthetic notes and its questions), for each share of the cells read
    and each number of word matches beyond the pool whose cosines are worked out exactly
    (RankingConfig.meaning_word_probe, from meaning_word_probe_from vectors), with the median time
    of a recall."""
    import json
    import statistics

    from slm_magic import Memory
    from slm_magic.index.vectors import VectorStore

    if path:
        import meaning_sweep
        import paraphrase

        texts = json.loads(Path(path).read_text())["sentences"][:n]
        q = meaning_sweep._quality()
        asked = [t for _, qs in q.locomo() for t, _ in qs][::5] + [t for _, qs in q.longmemeval() for t, _ in qs][::2]
        asked = (asked + [x["text"] for x in paraphrase.load()[1]])[:questions]
        rows = [{"content": x} for x in texts]
    else:
        from synthetic import generate_memories, generate_queries

        rows = list(generate_memories(n, seed=0))
        asked = generate_queries(questions + 5, seed=1, corpus_sample=rows)[5:]  # (as speed.py asks them)
    t = time.perf_counter()
    if db is not None and not path:
        from synthetic import store_at

        mem = Memory(str(store_at(db, n, db)))
    else:
        mem = Memory(":memory:")
        mem.remember_many(rows)
    vs = mem.index.vectors
    how = "opened" if db and not path else "remembered"
    print(f"{len(rows):,} {'sentences' if path else 'synthetic notes'} {how} in {time.perf_counter() - t:.0f} s: "
          f"{vs.centroids.shape[0]} cells")
    vs.PROBE_SHARE = 1.0
    exact = [[m.fact_id for m in mem.recall(question, limit=10).memories] for question in asked]
    base = mem.config
    print("| cells read | at least | word matches probed | same top 10 as exact | overlap | recall p50 ms |")
    print("|---|---|---|---|---|---|")
    for share in shares:
        frac, least = share.split(":") if ":" in share else (share, str(VectorStore.PROBE_MIN))
        num, den = (float(x) for x in frac.split("/")) if "/" in frac else (float(frac), 1.0)
        vs.PROBE_SHARE, vs.PROBE_MIN = num / den, int(least)
        for probe in word_probes:
            mem.config = base.model_copy(update={"meaning_word_probe": probe})
            got, took = [], []
            for question in asked:
                t = time.perf_counter()
                got.append([m.fact_id for m in mem.recall(question, limit=10).memories])
                took.append((time.perf_counter() - t) * 1000)
            same = sum(a == b for a, b in zip(got, exact)) / len(asked)
            overlap = statistics.fmean(len(set(a) & set(b)) / len(b) if b else float(not a)
                                       for a, b in zip(got, exact))
            print(f"| {frac} | {least} | {probe if vs.live >= base.meaning_word_probe_from else 'off (small)'} | "
                  f"{same:.1%} of {len(asked)} | {overlap:.2%} | {statistics.median(took):.1f} |", flush=True)
    mem.config = base
    del vs.PROBE_SHARE, vs.PROBE_MIN


def main(argv=None) -> int:
    from slm_magic.index.vectors import VectorStore

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=["LoCoMo", "LongMemEval"], help="collections whose name starts so")
    ap.add_argument("--sentences", help="a corpus.json of tools/meaning_model/build_corpus.py")
    ap.add_argument("--n", type=int, default=100_000, help="sentences remembered (with --sentences)")
    ap.add_argument("--synthetic", action="store_true", help="the speed benchmark's synthetic notes instead")
    ap.add_argument("--questions", type=int, default=600, help="questions asked (with --sentences or --synthetic)")
    ap.add_argument("--db", type=Path, default=None, help="with --synthetic: the store of the --n notes (built when missing)")
    ap.add_argument("--shares", default=f"1/{round(1 / VectorStore.PROBE_SHARE)}",
                    help="shares of the cells read, comma-separated, each as 1/48 or 1/48:8 (at least 8)")
    ap.add_argument("--word-probes", default=None,
                    help="word matches beyond the pool probed exactly, comma-separated (default: the config's)")
    args = ap.parse_args(argv)
    if args.sentences or args.synthetic:
        from slm_magic.core.scoring import RankingConfig

        probes = ([int(x) for x in args.word_probes.split(",")] if args.word_probes
                  else [RankingConfig().meaning_word_probe])
        store_agreement(args.sentences, args.n, args.questions, args.shares.split(","), probes, args.db)
        return 0
    import meaning_sweep

    VectorStore.EXACT = 1_024
    t = time.perf_counter()
    cols = meaning_sweep.build(args.only)
    print(f"built {len(cols)} collections in {time.perf_counter() - t:.0f} s (cells from 1,024 vectors; "
          f"{VectorStore.PROBE_SHARE:.3f} of the cells read)")
    print("| collection | questions | cells (largest store) | same top 10 as exact | nDCG@10 cells | nDCG@10 exact |")
    print("|---|---|---|---|---|---|")
    for col in cols:
        same, a, b, n, k = compare(col)
        print(f"| {col.name} | {n} | {k} | {same:.1%} | {a:.3f} | {b:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
