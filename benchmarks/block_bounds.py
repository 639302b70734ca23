"""How many postings a block-max bound would still leave the words' pass to sum.

    python benchmarks/block_bounds.py [--n 1000000] [--questions 100] [--db PATH] [--ranges 64,128,512,4096]

Block-max pruning (issue 29's suggestion) skips a range of memories when the sum, over the
question's terms, of each term's largest BM25 part in that range cannot reach the bar the best
k must clear. This asks how far that could go on the speed benchmark's synthetic store, at its
most favourable: each range's bound from the exact largest part of each term in it (tighter than
any bound saved with the postings), and the bar known from the start (the final k-th best BM25
of the words' pass; k = 144, the 4·20 + 64 that `rank_index` holds for a page of ten). The share
of postings in ranges whose bound reaches the bar is what the pass would still read; the heavy
questions (many postings) make a recall's p95, so the share is given at its 90th percentile too.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    from benchmarks.synthetic import generate_memories, generate_queries, store_arguments, store_at
    from slm_magic import Memory
    from slm_magic.core.scoring import bm25_part
    from slm_magic.index import ngrams

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    store_arguments(ap, questions=100)
    ap.add_argument("--ranges", default="64,128,512,4096", help="memories per range, comma-separated")
    args = ap.parse_args(argv)
    k = 4 * max(10, ngrams.POOL) + 64  # (what rank_index's first pass holds for a page of ten)
    with tempfile.TemporaryDirectory() as tmp:
        db = store_at(args.db, args.n, Path(tmp) / "bounds.duckdb")
        mem = Memory(str(db), semantic=False)
        corpus = list(generate_memories(min(args.n, 100_000), seed=0))
        questions = generate_queries(args.questions, seed=1, corpus_sample=corpus)
        mem.recall(questions[0])
        index = mem.retrieval.live.index
        norm, size = index.length_norm, index.docs.size
        asked = []
        for q in questions:
            terms, qtf, qlen, *_ = mem.retrieval.analyse(q, mem.retrieval.clock(), "auto")
            cs = index.channel_scores(terms, qtf, qlen) if terms else None
            if cs is not None and cs.term_docs:
                asked.append((cs, float(cs.best_bm25(k)[1].min())))
        postings = np.mean([sum(d.size for d in cs.term_docs) for cs, _ in asked])
        print(f"{args.n:,} notes, {len(asked)} questions with word matches ({postings:,.0f} postings on average), "
              f"the bar of the best {k}:")
        print("| memories per range | postings still summed, mean | at the 90th percentile | ranges read |")
        print("|---|---|---|---|")
        for width in (int(r) for r in args.ranges.split(",")):
            shares, ranges = [], []
            for cs, bar in asked:
                bound, postings = np.zeros(size // width + 1), np.zeros(size // width + 1)
                for docs, tfs, weight in zip(cs.term_docs, cs.term_tfs, cs.term_weights):
                    at = docs // width
                    most = np.zeros(bound.size)
                    np.maximum.at(most, at, bm25_part(weight, tfs, norm[docs]))
                    bound += most
                    postings += np.bincount(at, minlength=bound.size)
                read = bound >= bar
                shares.append(postings[read].sum() / postings.sum())
                ranges.append(read[postings > 0].mean())
            print(f"| {width:,} | {np.mean(shares):.0%} | {np.percentile(shares, 90):.0%} | {np.mean(ranges):.0%} |")
        mem.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
