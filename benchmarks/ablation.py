"""What each channel, field and setting adds, on every collection at once, with and without sessions.

    python benchmarks/ablation.py [--notebook PATH] [--shared PATH] [--only NAME,...]

Collections: the notebook-memory benchmark (`--notebook`, default benchmarks/notebook.py, whose
data and protocol it reuses: its `run()`), LoCoMo categories 1-4 and LongMemEval (one store),
loaded as ../shared/bench/quality.py loads them (`--shared`, the folder holding it: each turn a
memory, with its session id or without, created at its session's date). Every variant is a fresh
store built by the public API; field weights are applied at write time, so each variant
re-remembers everything. Prints one row per variant: nDCG@10 / R@10 / hit@1 per collection (and
the unrelated memories per question of the notebook benchmark), without and with sessions.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

#: name -> (Memory options, field weights): each the default with one thing changed.
VARIANTS = {
    "default": ({}, {}),
    "n-gram channel off": ({"ngram_weight": 0.0}, {}),
    "context channel on (0.6)": ({"context_weight": 0.6}, {}),
    "title and tags weight 1": ({}, {"title": 1, "tags": 1}),
    "title and tags weight 3": ({}, {"title": 3, "tags": 3}),
    "project not searchable": ({}, {"project": 0}),
    "type not searchable": ({}, {"type": 0}),
    "only content searchable": ({}, {"title": 0, "tags": 0, "project": 0, "type": 0}),
    "BM25 b = 0.75": ({"b": 0.75}, {}),
    "n-gram weight 0.5": ({"ngram_weight": 0.5}, {}),
    "n-gram weight 1.0": ({"ngram_weight": 1.0}, {}),
}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # (dataclasses look their module up)
    spec.loader.exec_module(mod)
    return mod


def conversational(groups, sessions: bool, opts: dict) -> tuple[float, float, float]:
    from slm_magic import Memory

    nd, r10, h1 = [], [], []
    for docs, qs in groups:
        with Memory(":memory:", **opts) as mem:
            recs = [{"content": d["text"][:100_000], **({"session_id": d["session"]} if sessions else {}),
                     **({"created_at": d["when"]} if d["when"] else {})} for d in docs]
            ids = dict(zip(mem.remember_many(recs), (d["id"] for d in docs)))
            for q, rel in qs:
                ranked = [ids.get(m.fact_id) for m in mem.recall(q, limit=10).memories]
                dcg = sum(1 / np.log2(i + 2) for i, x in enumerate(ranked) if x in rel)
                nd.append(dcg / sum(1 / np.log2(i + 2) for i in range(min(10, len(rel)))))
                r10.append(len(rel & set(ranked)) / len(rel))
                h1.append(float(bool(ranked) and ranked[0] in rel))
    return float(np.mean(nd)), float(np.mean(r10)), float(np.mean(h1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notebook", type=Path, default=HERE / "notebook.py")
    ap.add_argument("--shared", type=Path, default=HERE.parent.parent / "shared" / "bench")
    ap.add_argument("--only", default="", help="comma-separated variant names")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    from slm_magic import Memory
    from slm_magic.core import fields

    nb = _load("notebook_bench", args.notebook)
    quality = _load("quality_bench", args.shared / "quality.py")
    locomo, lme = quality.locomo(), quality.longmemeval()
    default_weights = dict(fields.FIELD_WEIGHTS)
    names = [n for n in VARIANTS if not args.only or n in args.only.split(",")]
    print("| variant | sessions | notebook nDCG / R@10 / hit@1 / unrelated | LoCoMo nDCG / R@10 / hit@1 | "
          "LongMemEval nDCG / R@10 / hit@1 |")
    print("|---|---|---|---|---|")
    out = {}
    for name in names:
        opts, weights = VARIANTS[name]
        fields.FIELD_WEIGHTS.clear()
        fields.FIELD_WEIGHTS.update({**default_weights, **weights})
        for sessions in (False, True):
            s = nb.run(lambda clock, opts=opts: Memory(":memory:", clock=clock, **opts), sessions=sessions).summary
            lo, lm = conversational(locomo, sessions, opts), conversational(lme, sessions, opts)
            out[f"{name}|{sessions}"] = {"notebook": s, "locomo": lo, "longmemeval": lm}
            print(f"| {name} | {'yes' if sessions else 'no'} | {s['ndcg']:.3f} / {s['recall']:.3f} / {s['hit1']:.3f} / "
                  f"{s['unrelated']:.2f} | {lo[0]:.3f} / {lo[1]:.3f} / {lo[2]:.3f} | "
                  f"{lm[0]:.3f} / {lm[1]:.3f} / {lm[2]:.3f} |", flush=True)
    fields.FIELD_WEIGHTS.clear()
    fields.FIELD_WEIGHTS.update(default_weights)
    docs, questions = nb.load()
    by_id = {d["id"]: d for d in docs}
    shown = nb.run_engine(docs, questions, sessions=False).shown
    labelled = sum(not (nb.tokens(f"{s.text} {by_id[s.doc_id]['project']} {by_id[s.doc_id]['type']}")
                        & nb.tokens(q["text"])) for q, row in zip(questions, shown) for s in row)
    print(f"\nnotebook, default, no sessions: unrelated per question with a memory's project and type "
          f"counted as its words: {labelled / len(questions):.2f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
