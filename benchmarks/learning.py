"""Does the learning loop learn? A simulated user on LoCoMo.

    python benchmarks/learning.py [--seeds 5] [--json OUT]

All ten conversations go into one memory (each conversation its own project; a question is
recalled with its conversation's project filter). The user asks the questions of
conversations 0-4 (categories 1-4) in a random order and, for the ten memories each recall
shows, gives 👍 when the memory is one of the question's evidence turns and 👎 otherwise.
Conversations 5-9 never give feedback: they are the held-out evaluation. Measured on them:
phase 1 (no signals: the default fusion), phase 2 (the first recall at >= 50 signals: the
per-memory prior), phase 3 as soon as it is reached (>= 200 signals: the first model), and
phase 3 after every training question gave feedback (the model retrained as signals grew).
The random order is the seed; each phase is reported as mean ± standard deviation over seeds.

Calibration: a judge "an evidence turn is in the top 10" labels the training questions;
on the held-out ones, the Brier score and expected calibration error of `answer_confidence`
against the same label, beside the uncalibrated top relevance read as a probability.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (str(HERE), str(HERE.parent)):
    if p not in sys.path:
        sys.path.insert(0, p)

import numpy as np  # noqa: E402

import locomo  # noqa: E402
from slm_magic import Memory  # noqa: E402

TRAIN, TEST = range(0, 5), range(5, 10)


def build(convs) -> tuple[Memory, dict[str, str]]:
    mem = Memory(":memory:")
    to_dia: dict[str, str] = {}
    for conv in convs:
        ids = mem.remember_many([{"content": t.text, "created_at": t.created_at, "project": f"conv{conv.index}",
                                  "session_id": f"locomo-{conv.index}-{t.session}", "source": t.dia_id}
                                 for t in conv.turns])
        to_dia.update((f"{conv.index}:{fid}", t.dia_id) for fid, t in zip(ids, conv.turns))
    return mem, to_dia


def questions(convs, which) -> list[tuple[int, locomo.Question]]:
    return [(c.index, q) for c in convs if c.index in which for q in c.questions if q.category in locomo.CATEGORIES]


def ranked_dia(mem: Memory, to_dia, ci: int, q) -> tuple[list[str], object]:
    res = mem.recall(q.text, project=f"conv{ci}", limit=locomo.K_MAX)
    return [to_dia[f"{ci}:{m.fact_id}"] for m in res.memories], res


def evaluate(mem: Memory, to_dia, held_out) -> dict[str, float]:
    rows = [locomo.score(ranked_dia(mem, to_dia, ci, q)[0], q.evidence) for ci, q in held_out]
    return {k: locomo.mean(rows, k) for k in ("r10", "ndcg10")}


def one_seed(convs, seed: int) -> dict:
    mem, to_dia = build(convs)
    held_out = questions(convs, TEST)
    train = questions(convs, TRAIN)
    random.Random(seed).shuffle(train)
    out = {"phase 1 (default fusion)": evaluate(mem, to_dia, held_out)}
    reached = {2: False, 3: False}
    started = time.perf_counter()
    for ci, q in train:
        dia, res = ranked_dia(mem, to_dia, ci, q)
        for rank, (m, d) in enumerate(zip(res.memories, dia), start=1):
            mem.feedback(m.fact_id, "up" if d in q.evidence else "down", query=q.text, rank=rank,
                         project=f"conv{ci}")
        status = mem.learning_status()
        if status.phase >= 2 and not reached[2]:
            reached[2] = True
            out["phase 2 (usefulness prior, first recall at >= 50 signals)"] = {
                **evaluate(mem, to_dia, held_out), "signals": status.feedback_signals}
        if status.phase == 3 and status.ranking == "learned model" and not reached[3]:
            reached[3] = True
            out["phase 3 (first model, >= 200 signals)"] = {
                **evaluate(mem, to_dia, held_out), "signals": status.feedback_signals}
    status = mem.learning_status()
    out["phase 3 (all training questions)"] = {**evaluate(mem, to_dia, held_out),
                                               "signals": status.feedback_signals, "model": status.model_id}
    out["seconds"] = time.perf_counter() - started
    mem.close()
    return out


def calibration(convs, seed: int) -> dict:
    """Judge-labelled training questions fit the calibration; held-out questions measure it."""
    mem, to_dia = build(convs)
    evidence_in_top10 = {}

    def judge(query: str, memories) -> bool:
        return evidence_in_top10[query]

    train = questions(convs, TRAIN)
    random.Random(seed).shuffle(train)
    for ci, q in train:
        dia, res = ranked_dia(mem, to_dia, ci, q)
        evidence_in_top10[q.text] = bool(set(dia) & set(q.evidence))
        mem.record_outcome(q.text, res, judge(q.text, res.memories))
    p_cal, p_raw, label = [], [], []
    for ci, q in questions(convs, TEST):
        dia, res = ranked_dia(mem, to_dia, ci, q)
        conf = mem.answer_confidence(res)
        p_cal.append(conf.answer_confidence)
        p_raw.append(max([m.relevance for m in res.memories] or [0.0]))
        label.append(float(bool(set(dia) & set(q.evidence))))
    status = conf.calibration_status, conf.calibration_id
    mem.close()
    y = np.array(label)
    return {"calibration": status, "held_out": len(y), "base_rate": float(y.mean()),
            "calibrated": {"brier": brier(np.array(p_cal), y), "ece": ece(np.array(p_cal), y)},
            "top relevance as probability": {"brier": brier(np.array(p_raw), y), "ece": ece(np.array(p_raw), y)}}


def brier(p: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((p - y) ** 2))


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over equal-width probability bins."""
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    return float(sum(abs(p[idx == b].mean() - y[idx == b].mean()) * (idx == b).mean()
                     for b in range(bins) if (idx == b).any()))


def summarise(runs: list[dict]) -> dict:
    out = {}
    for phase in [k for k in runs[0] if k != "seconds"]:
        got = [r[phase] for r in runs if phase in r]
        out[phase] = {k: (statistics.mean(g[k] for g in got), statistics.pstdev(g[k] for g in got))
                      for k in ("r10", "ndcg10", "signals") if k in got[0]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    convs, _ = locomo.load(args.data or locomo.default_data_path())
    runs = []
    for seed in range(args.seeds):
        runs.append(one_seed(convs, seed))
        print(f"seed {seed}: " + json.dumps({k: v for k, v in runs[-1].items()}, default=str), flush=True)
    table = summarise(runs)
    base = table["phase 1 (default fusion)"]
    print(f"\nheld-out conversations 5-9, {args.seeds} seeds (mean ± sd)")
    print("| ranking | signals | R@10 | nDCG@10 | nDCG@10 vs phase 1 |\n|---|---|---|---|---|")
    for phase, v in table.items():
        sig = f"{v['signals'][0]:.0f}" if "signals" in v else "0"
        print(f"| {phase} | {sig} | {v['r10'][0]:.3f} ± {v['r10'][1]:.3f} | {v['ndcg10'][0]:.3f} ± {v['ndcg10'][1]:.3f} "
              f"| {v['ndcg10'][0] - base['ndcg10'][0]:+.3f} |")
    cal = calibration(convs, 0)
    print(f"\ncalibration ({cal['calibration'][0]}, {cal['calibration'][1]}), {cal['held_out']} held-out questions, "
          f"label rate {cal['base_rate']:.3f}")
    print("| answer_confidence | Brier | ECE |\n|---|---|---|")
    for name in ("calibrated", "top relevance as probability"):
        print(f"| {name} | {cal[name]['brier']:.4f} | {cal[name]['ece']:.4f} |")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "table": table, "calibration": cal}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
