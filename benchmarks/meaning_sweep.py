"""How the meaning channel's fusion was set: every benchmark at once, for each setting.

Each collection is remembered once per variant (with and without sessions) through the public
API; then, for each setting of the fusion (RankingConfig's meaning_* and word_* fields), every
question is asked again (`Memory.config` swapped between runs: the stores are the same).
Collections: LoCoMo (categories 1-4) and LongMemEval's pool (/work/shared/data, as
/work/shared/bench/quality.py reads them), the notebook benchmark (benchmarks/data/notebook.json)
and the paraphrase benchmark (benchmarks/data/paraphrase.json, its two sets apart).
Per collection: nDCG@10, R@10 and non-answers shown per question (the notebook's *unrelated*:
not an answer and sharing no word with the question).

    .venv/bin/python benchmarks/meaning_sweep.py --grid '{"meaning_admit": [0.35, 0.4]}' [--only ...]

A setting's row is judged against the first row (the defaults) and against semantic=False.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import functools
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (REPO, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

SHARED = Path("/work/shared/bench/quality.py")
if not SHARED.exists():
    SHARED = REPO.parent / "shared" / "bench" / "quality.py"


@functools.cache
def _quality():
    spec = importlib.util.spec_from_file_location("shared_quality", SHARED)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Collection:
    """Stores built once; `ask(config)` scores every question under one ranking config."""

    def __init__(self, name, stores, unrelated=None):
        self.name = name
        self.stores = stores  # [(Memory, {fact_id: doc id}, [(question, relevant set, extra)])]
        self.unrelated = unrelated  # (question extra, shown memory) -> bool, None: count non-answers

    def ask(self, config, semantic=True):
        nd = r10 = non = 0.0
        n = 0
        for mem, ids, qs in self.stores:
            mem.config = config
            saved = mem.meaning
            if not semantic:
                mem.meaning = None
            try:
                for q, rel, extra in qs:
                    got = mem.recall(q, limit=10).memories
                    ranked = [ids.get(m.fact_id) for m in got]
                    a, b = _quality().ndcg_r10(ranked, rel)
                    nd, r10, n = nd + a, r10 + b, n + 1
                    if self.unrelated is None:
                        non += sum(x not in rel for x in ranked)
                    else:
                        non += sum(self.unrelated(extra, m, ids.get(m.fact_id)) for m in got)
            finally:
                mem.meaning = saved
        return nd / n, r10 / n, non / n


def shared_collection(name, groups, sessions):
    from slm_magic import Memory

    stores = []
    for docs, qs in groups:
        mem = Memory(":memory:")
        recs = []
        for d in docs:
            r = {"content": d["text"][:100_000]}
            if sessions:
                r["session_id"] = d["session"]
            if d["when"]:
                r["created_at"] = d["when"]
            recs.append(r)
        ids = dict(zip(map(str, mem.remember_many(recs)), (d["id"] for d in docs)))
        stores.append((mem, ids, [(q, rel, None) for q, rel in qs]))
    return Collection(f"{name}{' +s' if sessions else ''}", stores)


def notebook_collection(sessions):
    import notebook
    from slm_magic import Memory

    docs, questions = notebook.load()
    clock = notebook.FixedClock(docs[0]["session_start"])
    mem = Memory(":memory:", clock=clock)
    ids, current, sid = {}, None, None
    for d in sorted(docs, key=lambda d: d["at"]):
        if sessions and d["session"] != current:
            current = d["session"]
            clock.now = d["session_start"]
            sid = mem.session_init(project_path=d["project_path"], reuse=True).session_id
        clock.now = d["at"]
        f = mem.remember(d["content"], session_id=sid if sessions else None, tags=d["tags"], type=d["type"],
                         project=d["project"], title=d["title"], created_at=d["at"], notebook=d["notebook"],
                         cell=d["cell"])
        ids[f.fact_id] = d["id"]
    clock.now = questions[0]["asked_at"]
    qs = [(q["text"], q["relevant"], q) for q in questions]

    def unrelated(q, m, doc):
        if doc in q["relevant"]:
            return False
        text = notebook.doc_text(m.fact.title, m.content, m.fact.tags)
        return not (notebook.tokens(f"{text} {m.fact.project} {m.fact.type}") & notebook.tokens(q["text"]))

    return Collection(f"notebook{' +s' if sessions else ''}", [(mem, ids, qs)], unrelated)


def paraphrase_collection(which):
    import paraphrase
    from slm_magic import Memory

    memories, questions = paraphrase.load()
    mem = Memory(":memory:")
    ids = {mem.remember(m["content"]).fact_id: m["id"] for m in memories}
    qs = [(q["text"], q["relevant"], q) for q in questions if q["set"] == which]
    return Collection(f"para:{which}", [(mem, ids, qs)])


def build(only):
    q = _quality()
    out = []
    wanted = lambda n: not only or any(n.startswith(o) for o in only)  # noqa: E731
    if wanted("para"):
        out += [paraphrase_collection("paraphrase"), paraphrase_collection("same_words")]
    if wanted("notebook"):
        out += [notebook_collection(False), notebook_collection(True)]
    if wanted("LoCoMo"):
        g = q.locomo()
        out += [shared_collection("LoCoMo", g, False), shared_collection("LoCoMo", g, True)]
    if wanted("LongMemEval"):
        g = q.longmemeval()
        out += [shared_collection("LongMemEval", g, False), shared_collection("LongMemEval", g, True)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", default="{}", help="JSON: RankingConfig field -> list of values")
    ap.add_argument("--only", nargs="*", default=[], help="collections whose name starts so")
    args = ap.parse_args(argv)
    from slm_magic.core.scoring import RankingConfig

    t = time.perf_counter()
    cols = build(args.only)
    print(f"built {len(cols)} collections in {time.perf_counter() - t:.0f} s", flush=True)
    grid = json.loads(args.grid)
    keys = list(grid)
    settings = [dict(zip(keys, vals)) for vals in itertools.product(*(grid[k] for k in keys))] or [{}]
    head = "| setting | " + " | ".join(c.name for c in cols) + " |"
    print(head)
    print("|---|" + "---|" * len(cols))
    base = RankingConfig()
    cells = [f"{nd:.3f} {r:.2f} {non:.1f}" for nd, r, non in (c.ask(base, semantic=False) for c in cols)]
    print("| words only (nDCG R@10 non-answers) | " + " | ".join(cells) + " |", flush=True)
    for s in settings:
        cfg = base.model_copy(update=s)
        cells = [f"{nd:.3f} {r:.2f} {non:.1f}" for nd, r, non in (c.ask(cfg) for c in cols)]
        print(f"| {json.dumps(s)} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
