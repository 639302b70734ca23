"""`make demo`: remember a few notebook findings in a fresh database, then recall them.

Run with `python -m slm_magic.demo [PATH]`; without PATH a new file in a temporary folder.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from . import Memory

FINDINGS = [
    ("The left join of orders on customer_id drops 3% of rows: 412 customers have no account.", "data-quality,join", "decision"),
    ("Dropped the `tenure_days` feature: it is computed after the churn date, so it leaks the label.", "churn,leakage", "decision"),
    ("Client (Ana, 2026-11-12): churn means 90 days without a login, not a cancelled contract.", "churn,definition", "preference"),
    ("Gradient boosting beats logistic regression by 0.04 AUC on the March holdout.", "churn,model", "discovery"),
    ("Order values above the 99.9th percentile are internal test orders; filter them out.", "data-quality", "pattern"),
]

QUERIES = ["why did we drop a feature?", "what does churn mean for the client", "rows lost in the join"]


def main(argv: list[str]) -> int:
    folder = None
    if argv:
        path = Path(argv[0])
    else:
        folder = tempfile.mkdtemp(prefix="slm_magic_demo_")
        path = Path(folder) / "memory.duckdb"
    print(f"memory file: {path}")
    with Memory(path) as mem:
        for content, tags, kind in FINDINGS:
            fact = mem.remember(content, tags=tags, type=kind, project="churn-study", session_id="demo-session")
            print(f"remembered {fact.fact_id}  [{kind}] {content[:70]}")
    # A new Memory on the same file: what a new kernel tomorrow would see.
    with Memory(path) as mem:
        for q in QUERIES:
            res = mem.recall(q, limit=3)
            print(f"\nrecall {q!r}  ({res.retrieval_mode}, {res.elapsed_ms:.1f} ms)")
            for r in res:
                s = r.score
                print(f"  {s.value:.3f}  rel {s.relevance:.2f} (bm25 {s.bm25:.2f}, tfidf {s.tfidf:.2f})"
                      f"  recency {s.recency:.2f}  {r.content[:70]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
