"""The phase-3 ranker: a logistic regression on features of each (query, memory) pair, fitted
on the user's feedback signals, that re-ranks the default fusion's top candidates.

Its part of a memory's score is `learned = weight · (p − base_rate)`, where p is the model's
probability that the memory is useful and base_rate its mean over the training signals: an
ordinary candidate is moved little, a likely-useful one is lifted, an unlikely one lowered.
The fitted model is stored as JSON numbers (scaler, coefficients), never as pickled code, and
applied with numpy: a memory file may come from someone else.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from ..index.sparse import ChannelScores, SparseIndex, locate
from ..core.fields import MEMORY_TYPES
from ..core.scoring import TYPE_PRIORITY
from ..core.fields import matched_fields

#: How many of the default fusion's best a learned ranking re-orders.
CANDIDATES = 50
#: Inverse regularisation strength: a first model sees only ~200 signals (RESULTS.md, section 5).
REGULARISATION_C = 0.1

FEATURES = (
    "bm25", "tfidf", "relevance", "recency", "revision", "inv_rank", "coverage", "coverage_idf",
    "bm25_vs_top", "score_vs_top", "log_length", "bm25_x_tfidf", "evidence", "context", "field_match",
    "type_priority", "core", "prior", "log_shown",
)
_PRIORITY_BY_CODE = np.array([TYPE_PRIORITY.get(t, 0.5) for t in MEMORY_TYPES] + [0.5])


@dataclass
class Usage:
    """Per memory (index position) of one user: the sum of its signal values and how often
    recalls showed it; sorted by doc id for lookups."""

    doc_ids: np.ndarray
    sums: np.ndarray
    shown: np.ndarray

    def __post_init__(self) -> None:  # sorted once; every recall in phases 2 and 3 looks up in it
        order = np.argsort(self.doc_ids, kind="stable")
        self.doc_ids, self.sums, self.shown = self.doc_ids[order], self.sums[order], self.shown[order]

    def lookup(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sums, shown = np.zeros(docs.size), np.zeros(docs.size)
        found, hit = locate(self.doc_ids, np.asarray(docs, dtype=np.int64))
        sums[hit], shown[hit] = self.sums[found], self.shown[found]
        return sums, shown


def prior(sums: np.ndarray) -> np.ndarray:
    """A memory's usefulness from its signals, bounded in (-1, 1): tanh of half their sum."""
    return np.tanh(np.asarray(sums, dtype=np.float64) / 2.0)


def field_match(docs: np.ndarray, words: dict[int, str], facts) -> np.ndarray:
    """Per candidate: the share of the query words it matched that sit in its title, tags,
    project or type (what a person filed it under) rather than only in its text."""
    out = np.zeros(docs.size)
    if not words or facts is None:
        return out
    got = facts.get(docs.tolist())
    for i, d in enumerate(docs.tolist()):
        f = got.get(d)
        if f is None:
            continue
        by_field = matched_fields(words, f.content, f.title, f.tags, f.project, f.type)
        every = {w for ws in by_field.values() for w in ws}
        filed = {w for k, ws in by_field.items() if k != "content" for w in ws}
        out[i] = len(filed) / max(1, len(every))
    return out


def feature_matrix(ranked, cs: ChannelScores, index: SparseIndex, usage_sums: np.ndarray,
                   shown: np.ndarray, facts=None) -> np.ndarray:
    """One row of FEATURES per candidate of `ranked` (in its default order); `facts` (the
    memory's rows, with `cs.words`) gives the field feature."""
    docs = ranked.doc_ids
    n = docs.size
    if not n:
        return np.zeros((0, len(FEATURES)))
    t = index.docs
    cov, cov_idf = cs.coverage(docs)
    # Rank and relative score as the default fusion alone gives them: training ranks without a
    # session, so the session's working-set boost is taken out here too.
    base = ranked.score - ranked.working_set
    rank = np.empty(n)
    rank[np.lexsort((docs, -base))] = np.arange(n)
    top_bm25 = float(ranked.bm25.max()) or 1.0
    top_score = float(base.max()) or 1.0
    cols = {
        "bm25": ranked.bm25, "tfidf": ranked.tfidf, "relevance": ranked.relevance,
        "recency": ranked.recency, "revision": ranked.revision,
        "inv_rank": 1.0 / (rank + 1.0), "coverage": cov, "coverage_idf": cov_idf,
        "bm25_vs_top": ranked.bm25 / top_bm25, "score_vs_top": base / top_score,
        "log_length": np.log1p(t.dl[docs].astype(np.float64)), "bm25_x_tfidf": ranked.bm25 * ranked.tfidf,
        # the BM25 part before it saturates: strong matches stay apart where relevance nears 1
        "evidence": -np.log2(np.maximum(1.0 - ranked.bm25, 1e-12)),
        "context": np.zeros(n) if ranked.context is None else ranked.context,
        "field_match": field_match(docs, cs.words, facts),
        "type_priority": _PRIORITY_BY_CODE[np.clip(t.type[docs], 0, len(_PRIORITY_BY_CODE) - 1)],
        "core": t.core[docs].astype(np.float64), "prior": prior(usage_sums),
        "log_shown": np.log1p(shown),
    }
    return np.column_stack([np.asarray(cols[f], dtype=np.float64) for f in FEATURES])


@dataclass
class LinearRanker:
    """A fitted ranker: standardisation, logistic coefficients, and how its part is scaled."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    base_rate: float
    weight: float

    def probability(self, X: np.ndarray) -> np.ndarray:
        z = ((X - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))

    def learned(self, X: np.ndarray) -> np.ndarray:
        return self.weight * (self.probability(X) - self.base_rate)

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, *, weight: float, seed: int = 0) -> "LinearRanker":
        """Fit on labelled rows (y: useful or not); both classes must be present."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler

        y = np.asarray(y, dtype=bool)
        if y.all() or not y.any():
            raise ValueError("the signals are all useful or all not useful: nothing to tell apart yet")
        scaler = StandardScaler().fit(X)
        model = LogisticRegression(C=REGULARISATION_C, class_weight="balanced", max_iter=2000, random_state=seed)
        model.fit(scaler.transform(X), y)
        scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
        out = cls(FEATURES, scaler.mean_.copy(), scale, model.coef_[0].copy(), float(model.intercept_[0]), 0.0, weight)
        out.base_rate = float(out.probability(X).mean())
        return out

    def to_json(self) -> str:
        return json.dumps({"features": list(self.features), "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                           "coef": self.coef.tolist(), "intercept": self.intercept, "base_rate": self.base_rate,
                           "weight": self.weight, "checked": True})

    @classmethod
    def from_json(cls, text: str) -> "LinearRanker":
        """Parse and check a stored model; ValueError if it is not one this version can apply."""
        try:
            d = json.loads(text)
            features = tuple(d["features"])
            arrays = [np.asarray(d[k], dtype=np.float64) for k in ("mean", "scale", "coef")]
            numbers = [float(d[k]) for k in ("intercept", "base_rate", "weight")]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"unreadable ranker parameters ({exc})") from None
        if features != FEATURES:
            raise ValueError("it was fitted on other features (made by another slm_magic version)")
        if d.get("checked") is not True:
            raise ValueError("it was adopted without the check on feedback it was not fitted on "
                             "(made by an earlier slm_magic version)")
        if any(a.shape != (len(FEATURES),) or not np.isfinite(a).all() for a in arrays) or not all(
                math.isfinite(x) for x in numbers) or (arrays[1] <= 0).any():
            raise ValueError("its parameters are malformed")
        return cls(features, *arrays, *numbers)


def held_out_orders(X: np.ndarray, y: np.ndarray, groups: np.ndarray, *, weight: float,
                    folds: int = 5) -> tuple[float, float] | None:
    """How well a model orders feedback it was not fitted on, beside the default fusion: the
    share of (useful, not useful) pairs of one question that each puts in the right order,
    each row scored by a model fitted on the other questions (`folds` groups of questions).
    None when no question has both kinds of signal, or too few questions to hold any out."""
    y = np.asarray(y, dtype=bool)
    asked = np.unique(groups)
    if asked.size < 2:
        return None
    fold_of = {g: i % folds for i, g in enumerate(asked.tolist())}
    fold = np.array([fold_of[g] for g in groups.tolist()])
    p = np.full(y.size, np.nan)
    for f in np.unique(fold).tolist():
        train = fold != f
        if y[train].all() or not y[train].any():
            return None
        p[~train] = LinearRanker.fit(X[train], y[train], weight=weight).probability(X[~train])
    default = X[:, FEATURES.index("score_vs_top")]
    model_right = default_right = pairs = 0.0
    for g in asked.tolist():
        rows = groups == g
        pos, neg = rows & y, rows & ~y
        if not pos.any() or not neg.any():
            continue
        for score, add in ((p, 0), (default, 1)):
            d = score[pos][:, None] - score[neg][None, :]
            right = float((d > 0).sum() + 0.5 * (d == 0).sum())
            if add:
                default_right += right
            else:
                model_right += right
        pairs += float(pos.sum() * neg.sum())
    return (model_right / pairs, default_right / pairs) if pairs else None

