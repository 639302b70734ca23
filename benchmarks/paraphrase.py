"""Asked in other words: a notebook memory whose questions share no content word with their
answers, the engine beside bm25s and a MiniLM dense retriever in the same run.

Data (benchmarks/data/paraphrase.json, written for this project): 50 data-science findings as a
notebook keeps them (joins, leakage, units, time zones, thresholds), 51 *paraphrase* questions,
5 of them with two answers, that share no content-word stem with any of their answers, and 30
*same-words* questions that do (a control: the meaning channel must not cost them). The script
first checks the promise: every paraphrase question against every answer, Snowball stems
(PyStemmer) of lowercase words and identifier parts after scikit-learn's English stop words;
it stops with an error naming the pair if one shares a stem.

Each finding is remembered through the public API (`Memory(":memory:")`), without sessions and
in sessions of ten (as `%slm_start` then `%%remember`); each question is `recall(q, limit=10)`.
Metrics per question, averaged: nDCG@10 (binary gain), hit@1, R@10, *non-answers*: memories
shown that are not an answer (every memory the engine returns is shown; bm25s's results count
when their score is > 0; MiniLM shows ten for every question, it has no notion of no match).

    .venv/bin/python benchmarks/paraphrase.py [--engine-opts '{"key": value}'] [--show]

MiniLM (all-MiniLM-L6-v2, sentence-transformers) runs in a venv of its own (benchmarks/minilm.py,
`make .venv-minilm`); without it its rows say so.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

DATA = HERE / "data" / "paraphrase.json"
K = 10
SETS = ("paraphrase", "same_words")


def load(path: Path = DATA) -> tuple[list[dict], list[dict]]:
    """(memories {id, content}, questions {id, set, text, relevant})."""
    raw = json.loads(Path(path).read_text())
    ids = {m["id"] for m in raw["memories"]}
    qs = []
    for q in raw["questions"]:
        rel = set(raw["qrels"][q["id"]])
        if rel - ids:
            raise ValueError(f"question {q['id']} names unknown memories {sorted(rel - ids)}")
        qs.append({**q, "relevant": rel})
    return raw["memories"], qs


def stems(text: str) -> set[str]:
    """Content-word stems: lowercase words and the letter runs inside identifiers, English stop
    words out, Snowball-stemmed."""
    import Stemmer
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    st = Stemmer.Stemmer("english")
    low = text.lower()
    words = re.findall(r"[a-z0-9]+", low.replace("'", "")) + re.findall(r"[a-z]+", low)
    return {st.stemWord(w) for w in words if w not in ENGLISH_STOP_WORDS and len(w) > 1}


def check_no_shared_stems(memories: list[dict], questions: list[dict]) -> list[str]:
    """Each (question, answer, shared stems) that breaks the paraphrase set's promise."""
    text = {m["id"]: m["content"] for m in memories}
    bad = []
    for q in questions:
        if q["set"] != "paraphrase":
            continue
        for a in sorted(q["relevant"]):
            shared = stems(q["text"]) & stems(text[a])
            if shared:
                bad.append(f"{q['id']} and {a} share {sorted(shared)}: {q['text']!r}")
    return bad


def run_engine(memories, questions, *, sessions: bool, opts: dict) -> list[list[str]]:
    from slm_magic import Memory

    mem = Memory(":memory:", **opts)
    by_fact = {}
    try:
        sid = None
        for i, m in enumerate(memories):
            if sessions and i % 10 == 0:
                sid = mem.session_init(project_path=f"/work/analysis-{i // 10 + 1}").session_id
            by_fact[mem.remember(m["content"], session_id=sid).fact_id] = m["id"]
        return [[by_fact.get(x.fact_id, "?") for x in mem.recall(q["text"], limit=K).memories] for q in questions]
    finally:
        mem.close()


def run_bm25s(memories, questions) -> list[list[str]]:
    """bm25s as the notebook benchmark runs it (its results with a score > 0 count as shown)."""
    import notebook

    docs = [{"id": m["id"], "text": m["content"], "project": "", "type": ""} for m in memories]
    return [[x.doc_id for x in row] for row in notebook.run_bm25s(docs, questions).shown]


def run_minilm(memories, questions) -> list[list[str]]:
    import minilm
    import numpy as np

    vecs = minilm.embed([m["content"] for m in memories] + [q["text"] for q in questions])
    mv, qv = vecs[: len(memories)], vecs[len(memories):]
    sims = qv @ mv.T
    return [[memories[j]["id"] for j in np.argsort(-s, kind="stable")[:K]] for s in sims]


def metrics(shown: list[list[str]], questions: list[dict]) -> dict[str, dict]:
    from notebook import ndcg

    out = {}
    for name in SETS:
        rows = [(s, q["relevant"]) for s, q in zip(shown, questions) if q["set"] == name]
        n = len(rows)
        out[name] = {
            "ndcg": sum(ndcg(s, r) for s, r in rows) / n,
            "hit1": sum(bool(s) and s[0] in r for s, r in rows) / n,
            "recall": sum(len(set(s[:K]) & r) / len(r) for s, r in rows) / n,
            "non_answers": sum(sum(x not in r for x in s[:K]) for s, r in rows) / n,
            "questions": n,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine-opts", default="{}", help="JSON keyword arguments for Memory(...)")
    ap.add_argument("--show", action="store_true", help="the engine's results for each paraphrase question")
    ap.add_argument("--no-minilm", action="store_true", help="leave the MiniLM baseline out")
    args = ap.parse_args(argv)
    memories, questions = load()
    bad = check_no_shared_stems(memories, questions)
    if bad:
        print("paraphrase questions sharing a content-word stem with an answer:\n  " + "\n  ".join(bad))
        return 1
    opts = json.loads(args.engine_opts)
    methods: list[tuple[str, object]] = [("bm25s", lambda: run_bm25s(memories, questions))]
    if not args.no_minilm:
        import minilm

        why = minilm.available()
        methods.append(("MiniLM (all-MiniLM-L6-v2, cosine)",
                        (lambda: run_minilm(memories, questions)) if why is None else why))
    methods += [("slm_magic, no sessions", lambda: run_engine(memories, questions, sessions=False, opts=opts)),
                ("slm_magic, sessions", lambda: run_engine(memories, questions, sessions=True, opts=opts))]
    print("| method | other words: nDCG@10 | hit@1 | R@10 | non-answers/q | same words: nDCG@10 | hit@1 "
          "| non-answers/q | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    engine_shown = None
    for name, fn in methods:
        if isinstance(fn, str):
            print(f"| {name} | skipped: {fn} |||||||")
            continue
        t = time.perf_counter()
        shown = fn()
        secs = time.perf_counter() - t
        m = metrics(shown, questions)
        p, s = m["paraphrase"], m["same_words"]
        print(f"| {name} | {p['ndcg']:.3f} | {p['hit1']:.3f} | {p['recall']:.3f} | {p['non_answers']:.2f} "
              f"| {s['ndcg']:.3f} | {s['hit1']:.3f} | {s['non_answers']:.2f} | {secs:.1f} |")
        if name == "slm_magic, no sessions":
            engine_shown = shown
    n_p = sum(q["set"] == "paraphrase" for q in questions)
    print(f"\n{len(memories)} memories; {n_p} questions in other words "
          f"({sum(len(q['relevant']) > 1 for q in questions if q['set'] == 'paraphrase')} with two answers, "
          f"no content-word stem shared with an answer: checked), {len(questions) - n_p} in the same words.")
    if args.show and engine_shown is not None:
        text = {m["id"]: m["content"] for m in memories}
        for q, shown in zip(questions, engine_shown):
            if q["set"] != "paraphrase":
                continue
            print(f"\n{q['id']} {q['text']!r} -> {', '.join(sorted(q['relevant']))}")
            for rank, x in enumerate(shown, 1):
                print(f"  {rank:2d} {'*' if x in q['relevant'] else ' '} {x} {text.get(x, '')[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
