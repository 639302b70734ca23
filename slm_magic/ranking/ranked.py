"""What one ranking stage hands the next: the best memories as parallel arrays of their parts
(`Ranked`), and the lift a session's earlier recalls give (`WorkingSet`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.scoring import RankingConfig


@dataclass
class Ranked:
    """Parallel arrays for the top memories, best first."""

    doc_ids: np.ndarray
    score: np.ndarray
    relevance: np.ndarray
    bm25: np.ndarray
    tfidf: np.ndarray
    recency: np.ndarray
    revision: np.ndarray
    working_set: np.ndarray
    older_matches: int = 0  # with an age gate: matching memories older than it (shown only if relevant)
    learned: np.ndarray | None = None  # the learning loop's part, already inside `score`
    related_to: np.ndarray | None = None  # per row: 0 for a match, else the rank of the match it is beside
    context: np.ndarray | None = None     # the context channel's part (in `relevance`), when it is on
    temporal: np.ndarray | None = None    # the temporal channel's part (in `relevance`): 1 for a day's session
    meaning: np.ndarray | None = None     # the meaning channel's part (in `relevance`), when it ran
    similar: np.ndarray | None = None     # per row: its cosine reached the admission threshold

    def take(self, rows: np.ndarray, *, score: np.ndarray | None = None,
             learned: np.ndarray | None = None) -> "Ranked":
        """The rows `rows` picks (a mask or positions, in their order), every part with them;
        `score` and `learned`, when given, are the new scores and their learned parts (already
        in that order)."""
        opt = {f: None if getattr(self, f) is None else getattr(self, f)[rows]
               for f in ("learned", "related_to", "context", "temporal", "meaning", "similar")}
        if learned is not None:
            opt["learned"] = learned
        return Ranked(self.doc_ids[rows], self.score[rows] if score is None else score,
                      *(getattr(self, f)[rows] for f in ("relevance", "bm25", "tfidf", "recency", "revision",
                                                         "working_set")),
                      older_matches=self.older_matches, **opt)

    def then_related(self, near: "Ranked", of: np.ndarray) -> "Ranked":
        """These matches followed by related memories `near` (beside matches `of`)."""
        if not near.doc_ids.size:
            return self
        out = self.followed_by(near)
        out.related_to = np.concatenate([np.zeros(self.doc_ids.size, np.int64), of])
        return out

    def followed_by(self, other: "Ranked") -> "Ranked":
        """These rows, then `other`'s; a part one side lacks is 0 (False) on that side."""
        def col(f: str):
            mine, theirs = getattr(self, f), getattr(other, f)
            if mine is None and theirs is None:
                return None
            like = mine if mine is not None else theirs
            return np.concatenate([np.zeros(self.doc_ids.size, like.dtype) if mine is None else mine,
                                   np.zeros(other.doc_ids.size, like.dtype) if theirs is None else theirs])

        return Ranked(*(col(f) for f in ("doc_ids", "score", "relevance", "bm25", "tfidf", "recency", "revision",
                                         "working_set")),
                      older_matches=self.older_matches,
                      **{f: col(f) for f in ("learned", "related_to", "context", "temporal", "meaning", "similar")})

    @classmethod
    def empty(cls) -> "Ranked":
        z = np.empty(0)
        return cls(np.empty(0, np.int64), z, z, z, z, z, z, z)


class WorkingSet:
    """The boost each memory gets in one session's recall: sorted doc ids and their boosts."""

    def __init__(self, hits: dict[int, int], cfg: RankingConfig):
        docs = np.array(sorted(hits), dtype=np.int64)
        self.docs = docs
        self.boost = np.array([min(cfg.working_set_cap, cfg.working_set_step * hits[d]) for d in docs.tolist()])
        self.max = float(self.boost.max()) if docs.size else 0.0

    def lookup(self, cand: np.ndarray) -> np.ndarray:
        out = np.zeros(cand.size)
        if self.docs.size:
            pos = np.minimum(np.searchsorted(self.docs, cand), self.docs.size - 1)
            hit = self.docs[pos] == cand
            out[hit] = self.boost[pos[hit]]
        return out
