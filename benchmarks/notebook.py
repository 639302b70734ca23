"""Notebook-memory retrieval benchmark: what a data scientist wrote in %%remember cells during
six analyses, asked back a week after the last one, the engine beside bm25s in the same run.

Data (benchmarks/data/notebook.json, original text): six analysis sessions, one per project
and about a week apart over six weeks, of 8-9 findings each, minutes apart (joins that
double-count, leakage, thresholds, definitions agreed with the business, dropped features,
timezone bugs, dedup steps), each with 1-3 tags, a type and sometimes a title; 55 questions,
each with the ids of the findings that answer it, of six kinds: in the finding's own words,
paraphrased, a tag alone, short (1-2 words), long (a full sentence with extra words), and a
word variant (plural, -ing, part of an identifier).

The product holds them as the magics would, through the public API only: one
`Memory(":memory:", clock=...)` per run whose clock stands at each finding's time; *sessions*:
`session_init(project_path=...)` when a project's analysis opens (as `%slm_start`), then
`remember(..., session_id=sid, tags, type, project, title)` per finding (as `%%remember`);
*no sessions*: the same remembers without a session. The questions are asked across projects,
with no session, a week after the last session: `recall(question, limit=10)`.
bm25s (Snowball stems, English stop words, as /work/shared/bench/quality.py) indexes the same
text: title + content + tags.

Metrics per question, averaged: nDCG@10 (binary gain), R@10, hit@1 (top result relevant), and
*unrelated/question*: the memories shown (up to 10) that are not an answer and share no word with the question, both
cut with bm25s's tokenizer (lowercase, English stop words removed, Snowball stems) over the
memory's own words: title + content + tags + project + type (every field it can be found by;
the row shows them all). The last column counts over title + content + tags alone, so a
memory found through its project name ("checkout") counts as unrelated there. bm25s returns
k ids even when fewer match; only its results with a score > 0 count as shown. Every memory
the engine returns counts as shown.

    .venv/bin/python benchmarks/notebook.py [--show-misses] [--by-kind] [--close-sessions]
                                            [--engine-opts '{"key": value}'] [--json OUT]

Reuse: `load()` gives (docs, questions); `run(engine_factory)` scores an engine built by
`engine_factory(clock)` (default `Memory(":memory:", clock=clock)`); `run_bm25s()` the baseline.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:  # run as a plain script: make the `slm_magic` package importable
    sys.path.insert(0, str(REPO))

DATA = HERE / "data" / "notebook.json"
K = 10
KINDS = ("verbatim", "paraphrase", "tag", "short", "long", "variant")

# --------------------------------------------------------------------------- data


def load(path: str | Path = DATA) -> tuple[list[dict], list[dict]]:
    """(docs, questions). A doc: id, session (index), project, project_path, notebook, cell,
    session_start, at (aware datetime), type, tags (list), title (or None), content, text (title +
    content + tags, what bm25s indexes). A question: id, kind, text, relevant (set of doc ids),
    asked_at (aware datetime)."""
    raw = json.loads(Path(path).read_text())
    asked_at = datetime.fromisoformat(raw["asked_at"])
    docs: list[dict] = []
    for s_index, s in enumerate(raw["sessions"]):
        for cell, f in enumerate(s["findings"], start=1):
            tags = [t.strip() for t in f["tags"].split(",") if t.strip()]
            title = f.get("title")
            docs.append({
                "id": f["id"], "session": s_index, "project": s["project"], "project_path": s["project_path"],
                "notebook": s["notebook"], "cell": cell * 2, "session_start": datetime.fromisoformat(s["start"]),
                "at": datetime.fromisoformat(f["at"]), "type": f["type"], "tags": tags, "title": title,
                "content": f["content"], "text": doc_text(title, f["content"], tags),
            })
    ids = {d["id"] for d in docs}
    questions = []
    for q in raw["questions"]:
        missing = set(q["relevant"]) - ids
        if missing:
            raise ValueError(f"question {q['id']} names unknown findings {sorted(missing)}")
        questions.append({"id": q["id"], "kind": q["kind"], "text": q["text"], "relevant": set(q["relevant"]),
                          "asked_at": asked_at})
    return docs, questions


def doc_text(title: str | None, content: str, tags: Sequence[str]) -> str:
    """A memory's words as bm25s sees them and as *shares no word* compares them."""
    return "\n".join(p for p in (title or "", content, " ".join(tags)) if p)


# --------------------------------------------------------------------------- words

_STEMMER = None


def tokens(text: str) -> set[str]:
    """bm25s's tokens of `text`: lowercase, English stop words out, Snowball stems."""
    import bm25s
    import Stemmer

    global _STEMMER
    if _STEMMER is None:
        _STEMMER = Stemmer.Stemmer("english")
    return set(bm25s.tokenize([text], stopwords="en", stemmer=_STEMMER, return_ids=False,
                              show_progress=False)[0])


# --------------------------------------------------------------------------- methods


@dataclass
class Shown:
    """One memory a method showed for a question."""

    doc_id: str | None  # the finding it is, None for anything else (e.g. a session summary)
    score: float
    text: str
    labels: str = ""    # its project and type: words of the memory too, though not of its text


@dataclass
class Outcome:
    method: str
    shown: list[list[Shown]]              # per question, best first
    seconds: float
    notes: dict = field(default_factory=dict)


class FixedClock:
    """A clock the run moves by hand: each finding is remembered at its own time."""

    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def default_factory(clock: Callable[[], datetime], **opts):
    from slm_magic import Memory

    return Memory(":memory:", clock=clock, **opts)


def run_engine(docs: list[dict], questions: list[dict], engine_factory: Callable | None = None, *,
               sessions: bool = True, close_sessions: bool = False, method: str | None = None) -> Outcome:
    """Remember every finding as the magics would (in its session or not), then ask each question."""
    factory = engine_factory or default_factory
    started = time.perf_counter()
    clock = FixedClock(docs[0]["session_start"])
    mem = factory(clock)
    by_fact: dict[str, str] = {}
    try:
        current, sid = None, None
        for d in sorted(docs, key=lambda d: d["at"]):
            if sessions and d["session"] != current:
                if sid and close_sessions:
                    mem.close_session(sid)
                current = d["session"]
                clock.now = d["session_start"]
                sid = mem.session_init(project_path=d["project_path"], reuse=True).session_id
            clock.now = d["at"]
            fact = mem.remember(d["content"], session_id=sid if sessions else None, tags=d["tags"],
                                type=d["type"], project=d["project"], title=d["title"], created_at=d["at"],
                                notebook=d["notebook"], cell=d["cell"])
            by_fact[fact.fact_id] = d["id"]
        if sid and close_sessions:
            mem.close_session(sid)
        shown = []
        for q in questions:
            clock.now = q["asked_at"]
            res = mem.recall(q["text"], limit=K)
            shown.append([Shown(by_fact.get(m.fact_id), m.score.value,
                                doc_text(m.fact.title, m.content, m.fact.tags), f"{m.fact.project} {m.fact.type}")
                          for m in res.memories])
        mode = res.retrieval_mode if questions else ""
    finally:
        mem.close()
    name = method or ("slm_magic sessions" if sessions else "slm_magic no sessions")
    return Outcome(name, shown, time.perf_counter() - started, {"retrieval_mode": mode})


def run_bm25s(docs: list[dict], questions: list[dict]) -> Outcome:
    """bm25s over title + content + tags; only results with a score > 0 count as shown."""
    import bm25s
    import Stemmer

    started = time.perf_counter()
    st = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([d["text"] for d in docs], stopwords="en", stemmer=st, show_progress=False),
                    show_progress=False)
    shown = []
    for q in questions:
        toks = bm25s.tokenize([q["text"]], stopwords="en", stemmer=st, show_progress=False)
        row: list[Shown] = []
        if toks.vocab:
            ids, scores = retriever.retrieve(toks, k=min(K, len(docs)), show_progress=False, return_as="tuple")
            for i, s in zip(ids[0].tolist(), scores[0].tolist()):
                if s > 0:
                    row.append(Shown(docs[i]["id"], float(s), docs[i]["text"],
                                     f"{docs[i]['project']} {docs[i]['type']}"))
        shown.append(row)
    return Outcome("bm25s", shown, time.perf_counter() - started)


# --------------------------------------------------------------------------- metrics


def ndcg(ranked: Sequence[str | None], rel: set[str], k: int = K) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, x in enumerate(ranked[:k]) if x in rel)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(k, len(rel))))
    return dcg / idcg


def per_question(outcome: Outcome, questions: list[dict]) -> list[dict]:
    """nDCG@10, R@10, hit@1 and the unrelated memories shown, for each question."""
    rows = []
    for q, shown in zip(questions, outcome.shown):
        ranked = [s.doc_id for s in shown[:K]]
        qt = tokens(q["text"])
        # (an answer is never unrelated, whatever words it shares: one found by meaning shares none)
        unrelated = [s for s in shown[:K] if not (tokens(f"{s.text} {s.labels}") & qt) and s.doc_id not in q["relevant"]]
        text_only = [s for s in shown[:K] if not (tokens(s.text) & qt) and s.doc_id not in q["relevant"]]
        rows.append({"id": q["id"], "kind": q["kind"], "ndcg": ndcg(ranked, q["relevant"]),
                     "recall": len(q["relevant"] & set(ranked)) / len(q["relevant"]),
                     "hit1": float(bool(ranked) and ranked[0] in q["relevant"]),
                     "unrelated": len(unrelated), "unrelated_text": len(text_only), "shown": len(shown[:K])})
    return rows


def summarise(rows: list[dict]) -> dict:
    n = len(rows) or 1
    return {"ndcg": sum(r["ndcg"] for r in rows) / n, "recall": sum(r["recall"] for r in rows) / n,
            "hit1": sum(r["hit1"] for r in rows) / n, "unrelated": sum(r["unrelated"] for r in rows) / n,
            "unrelated_text": sum(r["unrelated_text"] for r in rows) / n,
            "shown": sum(r["shown"] for r in rows) / n, "questions": len(rows)}


@dataclass
class Result:
    outcome: Outcome
    rows: list[dict]
    summary: dict
    by_kind: dict[str, dict]


def score(outcome: Outcome, questions: list[dict]) -> Result:
    rows = per_question(outcome, questions)
    groups = defaultdict(list)
    for r in rows:
        groups[r["kind"]].append(r)
    return Result(outcome, rows, summarise(rows), {k: summarise(v) for k, v in groups.items()})


def run(engine_factory: Callable | None = None, *, sessions: bool = True, close_sessions: bool = False,
        data: str | Path = DATA, method: str | None = None) -> Result:
    """Score an engine (`engine_factory(clock)` -> a Memory-like object) on this benchmark."""
    docs, questions = load(data)
    return score(run_engine(docs, questions, engine_factory, sessions=sessions, close_sessions=close_sessions,
                            method=method), questions)


# --------------------------------------------------------------------------- report


def table(results: Sequence[Result]) -> str:
    lines = ["| method | nDCG@10 | R@10 | hit@1 | unrelated/question | by text and tags alone |",
             "|---|---|---|---|---|---|"]
    for r in results:
        s = r.summary
        lines.append(f"| {r.outcome.method} | {s['ndcg']:.3f} | {s['recall']:.3f} | {s['hit1']:.3f} "
                     f"| {s['unrelated']:.2f} | {s['unrelated_text']:.2f} |")
    return "\n".join(lines)


def kind_table(results: Sequence[Result]) -> str:
    kinds = [k for k in KINDS if any(k in r.by_kind for r in results)]
    head = "| method | " + " | ".join(f"{k} ({results[0].by_kind[k]['questions']})" for k in kinds) + " |"
    lines = ["nDCG@10 / unrelated per question, by kind of question:", "", head,
             "|---|" + "---|" * len(kinds)]
    for r in results:
        cells = [f"{r.by_kind[k]['ndcg']:.3f} / {r.by_kind[k]['unrelated']:.1f}" for k in kinds]
        lines.append(f"| {r.outcome.method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def show_misses(result: Result, questions: list[dict]) -> str:
    """Each question whose top result is wrong or that shows unrelated memories, with what came back."""
    out = [f"### misses of {result.outcome.method}"]
    for q, row, shown in zip(questions, result.rows, result.outcome.shown):
        if row["hit1"] and not row["unrelated"]:
            continue
        qt = tokens(q["text"])
        out.append(f"\n{q['id']} [{q['kind']}] {q['text']!r} -> relevant {', '.join(sorted(q['relevant']))}; "
                   f"nDCG {row['ndcg']:.2f}, hit@1 {int(row['hit1'])}, unrelated {row['unrelated']}")
        for rank, s in enumerate(shown[:K], 1):
            mark = "*" if s.doc_id in q["relevant"] else ("u" if not (tokens(s.text) & qt) else " ")
            snippet = " ".join(s.text.split())[:90]
            out.append(f"  {rank:2d} {mark} {s.doc_id or '-':>3} {s.score:7.3f}  {snippet}")
        if not shown:
            out.append("   (nothing shown)")
    out.append("\n(* relevant, u shares no word with the question)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DATA), help="the benchmark's JSON file")
    ap.add_argument("--show-misses", action="store_true",
                    help="per question where the engine's top-1 is wrong or unrelated memories are shown, "
                         "the question and what came back")
    ap.add_argument("--by-kind", action="store_true", help="also nDCG@10 and unrelated per kind of question")
    ap.add_argument("--close-sessions", action="store_true",
                    help="close each session before the next opens (as %%slm_close)")
    ap.add_argument("--engine-opts", default="{}", help="JSON keyword arguments for Memory(...)")
    ap.add_argument("--json", default=None, help="write the per-question rows here")
    args = ap.parse_args(argv)

    started = time.perf_counter()
    opts = json.loads(args.engine_opts)
    docs, questions = load(args.data)

    def factory(clock):
        return default_factory(clock, **opts)

    results = [score(run_bm25s(docs, questions), questions)]
    for sessions in (False, True):
        results.append(score(run_engine(docs, questions, factory, sessions=sessions,
                                        close_sessions=args.close_sessions), questions))
    kinds = defaultdict(int)
    for q in questions:
        kinds[q["kind"]] += 1
    n_sessions = len({d["session"] for d in docs})
    print(table(results))
    print()
    print(f"{n_sessions} sessions, {len(docs)} findings, {len(questions)} questions "
          f"({', '.join(f'{kinds[k]} {k}' for k in KINDS if kinds[k])}); "
          + ", ".join(f"{r.outcome.method} {r.outcome.seconds:.2f} s" for r in results)
          + f"; {time.perf_counter() - started:.1f} s in all")
    if args.by_kind:
        print()
        print(kind_table(results))
    if args.show_misses:
        for r in results[1:]:
            print()
            print(show_misses(r, questions))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {r.outcome.method: {"summary": r.summary, "by_kind": r.by_kind, "rows": r.rows,
                                "shown": [[s.doc_id for s in row] for row in r.outcome.shown]}
             for r in results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
