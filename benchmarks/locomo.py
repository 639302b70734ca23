"""LoCoMo retrieval benchmark: the engine against lexical baselines.

Task (see the dataset README): per conversation every turn is a memory, every
question of categories 1-4 is a query against its own conversation, and the
relevant memories are its evidence turns. Category 5 (adversarial) is scored
separately because its questions are about things that never happened.

    python benchmarks/locomo.py [--data PATH] [--methods a,b,...] [--json OUT]
                                [--engine-opts '{"key": value}']
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# Run as a plain script: make both `baselines` and the `slm_magic` package importable.
for p in (str(HERE), str(REPO)):
    if p not in sys.path:
        sys.path.insert(0, p)

from baselines import BASELINES  # noqa: E402

DATA_CANDIDATES = (
    Path("/work/shared/data/locomo/locomo10.json"),
    REPO.parent / "shared" / "data" / "locomo" / "locomo10.json",
)
ENGINE = "slm_magic"
CATEGORIES = (1, 2, 3, 4)
ADVERSARIAL = 5
K_MAX = 10

# --------------------------------------------------------------------------- data


@dataclass
class Turn:
    dia_id: str
    text: str
    created_at: datetime | None
    session: int


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    index: int
    turns: list[Turn]
    questions: list[Question] = field(default_factory=list)


_SESSION = re.compile(r"session_(\d+)")
_DIA = re.compile(r"D:?(\d+):(\d+)")


def parse_session_date(raw: str | None) -> datetime | None:
    """LoCoMo dates look like '1:56 pm on 8 May, 2023'; unparseable ones become None."""
    if not raw:
        return None
    try:
        dt = datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    # The data has no zone; pin UTC so the engine never mixes naive and aware times.
    return dt.replace(tzinfo=timezone.utc)


def normalise_evidence(raw: list, known: set[str]) -> list[str]:
    """Repair entries like 'D8:6; D9:17', 'D30:05', 'D:11:26' and keep ids that exist."""
    out: list[str] = []
    for entry in raw or []:
        for piece in re.split(r"[;,\s]+", str(entry)):
            m = _DIA.fullmatch(piece.strip())
            if not m:
                continue
            dia = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia in known and dia not in out:
                out.append(dia)
    return out


def load(path: Path) -> tuple[list[Conversation], dict[str, int]]:
    """Conversations with normalised questions, plus counts of what was dropped."""
    samples = json.loads(path.read_text())
    convs: list[Conversation] = []
    stats = {"questions_raw": 0, "dropped_no_evidence": 0}
    for idx, sample in enumerate(samples):
        conv = sample["conversation"]
        sessions = sorted(
            (int(m.group(1)), key)
            for key in conv
            if (m := _SESSION.fullmatch(key)) and isinstance(conv[key], list)
        )
        turns = []
        for n, key in sessions:
            date = parse_session_date(conv.get(f"{key}_date_time"))
            for t in conv[key]:
                turns.append(Turn(t["dia_id"], f"{t['speaker']}: {t['text']}", date, n))
        known = {t.dia_id for t in turns}
        c = Conversation(idx, turns)
        for qa in sample.get("qa", []):
            stats["questions_raw"] += 1
            evidence = normalise_evidence(qa.get("evidence", []), known)
            if not evidence:
                stats["dropped_no_evidence"] += 1
                continue
            c.questions.append(Question(qa["question"], int(qa["category"]), evidence))
        convs.append(c)
    return convs, stats


def default_data_path() -> Path:
    for p in DATA_CANDIDATES:
        if p.exists():
            return p
    return DATA_CANDIDATES[0]


# --------------------------------------------------------------------------- metrics


def score(ranked: list[str], relevant: list[str]) -> dict[str, float]:
    rel = set(relevant)
    top5, top10 = ranked[:5], ranked[:K_MAX]
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(top10) if d in rel)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(rel), K_MAX)))
    return {
        "r5": len(rel.intersection(top5)) / len(rel),
        "r10": len(rel.intersection(top10)) / len(rel),
        "ndcg10": dcg / idcg,
        "hit10": float(bool(rel.intersection(top10))),
    }


def mean(rows: list[dict[str, float]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows) if rows else float("nan")


# --------------------------------------------------------------------------- methods


def rank_with_baseline(name: str, conv: Conversation) -> list[list[str]]:
    """One fresh index per conversation, as each conversation is its own memory."""
    method = BASELINES[name]()
    method.index([t.text for t in conv.turns])
    return [[conv.turns[i].dia_id for i in method.search(q.text, K_MAX)] for q in conv.questions]


# Ablations of the engine, run side by side so the table shows what each part adds:
# the context channel (off: BM25 with the engine's analyser), and sessions (off: no memory has
# neighbours, the situation of a collection without sessions, where ranking must be BM25's).
ENGINE_VARIANTS = {
    ENGINE: ({}, True),
    f"{ENGINE} (bm25 channel only)": ({"context_weight": 0.0}, True),
    f"{ENGINE} (no sessions)": ({}, False),
    f"{ENGINE} (no stemming)": ({}, True),
}


@contextlib.contextmanager
def stemming_off():
    """Ablation: the analyser with its Snowball stemmer replaced by the identity."""
    from slm_magic.core import text

    saved = text._stem
    text._stem = lambda word: word
    text._word_terms.cache_clear()
    text._HASHES.clear()
    try:
        yield
    finally:
        text._stem = saved
        text._word_terms.cache_clear()
        text._HASHES.clear()


def rank_with_engine(conv: Conversation, opts: dict, sessions: bool = True) -> list[list[str]]:
    from slm_magic import Memory

    mem = Memory(":memory:", **opts)
    try:
        ids = mem.remember_many(
            [
                {
                    "content": t.text,
                    "created_at": t.created_at,
                    "session_id": f"locomo-{conv.index}-{t.session}" if sessions else None,
                    "source": t.dia_id,
                }
                for t in conv.turns
            ]
        )
        to_dia = {fid: t.dia_id for fid, t in zip(ids, conv.turns)}
        out = []
        for q in conv.questions:
            res = mem.recall(q.text, limit=K_MAX)
            out.append([to_dia[m.fact_id] for m in res.memories if m.fact_id in to_dia])
        return out
    finally:
        mem.close()


def run_method(name: str, convs: list[Conversation], engine_opts: dict) -> dict:
    """Per-question scores plus wall time for one method over all conversations."""
    if name in BASELINES:
        # Pay library import costs outside the timed region, as the engine's are.
        BASELINES[name]().index(["warm up"])
    t0 = time.perf_counter()
    rows = []
    for conv in convs:
        if name in ENGINE_VARIANTS:
            opts, sessions = ENGINE_VARIANTS[name]
            with stemming_off() if "no stemming" in name else contextlib.nullcontext():
                ranked = rank_with_engine(conv, {**opts, **engine_opts}, sessions)
        else:
            ranked = rank_with_baseline(name, conv)
        for q, r in zip(conv.questions, ranked):
            rows.append({"category": q.category, **score(r, q.evidence)})
    return {"rows": rows, "seconds": time.perf_counter() - t0}


def summarise(rows: list[dict]) -> dict:
    main = [r for r in rows if r["category"] in CATEGORIES]
    out = {"all": {k: mean(main, k) for k in ("r5", "r10", "ndcg10", "hit10")}}
    for c in (*CATEGORIES, ADVERSARIAL):
        sub = [r for r in rows if r["category"] == c]
        out[f"cat{c}"] = {k: mean(sub, k) for k in ("r5", "r10", "ndcg10", "hit10")}
    return out


# --------------------------------------------------------------------------- report


def markdown_table(results: dict[str, dict]) -> str:
    head = ["method", "R@5", "R@10", "nDCG@10", "hit@10"]
    for c in CATEGORIES:
        head += [f"c{c} R@10", f"c{c} nDCG"]
    head += ["c5 R@10", "time (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, res in results.items():
        s = res["summary"]
        cells = [name] + [f"{s['all'][k]:.3f}" for k in ("r5", "r10", "ndcg10", "hit10")]
        for c in CATEGORIES:
            cells += [f"{s[f'cat{c}']['r10']:.3f}", f"{s[f'cat{c}']['ndcg10']:.3f}"]
        cells += [f"{s['cat5']['r10']:.3f}", f"{res['seconds']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=default_data_path(), help="locomo10.json")
    ap.add_argument(
        "--methods",
        default=",".join([*BASELINES, *ENGINE_VARIANTS]),
        help=f"comma-separated subset of: {', '.join([*BASELINES, *ENGINE_VARIANTS])}",
    )
    ap.add_argument("--json", type=Path, help="also write summaries here")
    ap.add_argument("--engine-opts", default="{}", help="JSON object passed to Memory(':memory:', **opts)")
    args = ap.parse_args(argv)

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in BASELINES and m not in ENGINE_VARIANTS]
    if unknown:
        ap.error(f"unknown methods: {unknown}")
    engine_opts = json.loads(args.engine_opts)
    if not isinstance(engine_opts, dict):
        ap.error("--engine-opts must be a JSON object")

    convs, stats = load(args.data)
    cats = {c: sum(q.category == c for conv in convs for q in conv.questions) for c in (*CATEGORIES, 5)}
    print(f"data: {args.data}")
    print(
        f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns; "
        f"questions cat 1-4: {sum(cats[c] for c in CATEGORIES)} "
        f"({', '.join(f'c{c}={cats[c]}' for c in CATEGORIES)}), cat 5: {cats[5]}; "
        f"dropped for no valid evidence: {stats['dropped_no_evidence']} of {stats['questions_raw']}"
    )

    results: dict[str, dict] = {}
    for name in methods:
        if name in ENGINE_VARIANTS:
            try:
                import slm_magic  # noqa: F401
                from slm_magic import Memory  # noqa: F401
            except Exception as exc:  # engine still being written: report, don't fail
                print(f"skipping {ENGINE}: import failed ({type(exc).__name__}: {exc})")
                continue
        run = run_method(name, convs, engine_opts)
        results[name] = {"summary": summarise(run["rows"]), "seconds": run["seconds"]}
        print(f"{name}: {run['seconds']:.1f}s", flush=True)

    print()
    print(markdown_table(results))
    if args.json:
        payload = {
            "data": str(args.data),
            "question_counts": {f"cat{c}": n for c, n in cats.items()},
            "engine_opts": engine_opts,
            "methods": results,
        }
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
