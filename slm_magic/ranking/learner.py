"""What recall applies of one user's learning (the learning loop in engine/learning.py decides
the phase and fits the model): the phase-2 prior or the phase-3 model's part, added to the
default fusion's candidates before they are cut to the limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .reranker import LinearRanker, Usage, feature_matrix, prior

if TYPE_CHECKING:
    from ..index.sparse import ChannelScores
    from .ranked import Ranked

PRIOR_CAP = 0.10          # the most a phase-2 prior moves a score, either way


@dataclass
class Learner:
    """What recall needs to apply one user's learning: the phase, the usage arrays, the model."""

    phase: int
    usage: Usage
    ranker: LinearRanker | None
    facts: object = None  # the memory's rows (FactRows), for the field feature

    def rerank(self, ranked: "Ranked", cs: "ChannelScores", index, limit: int) -> "Ranked":
        """Add the learned part to the default fusion's candidates, re-order, keep `limit`."""
        if not ranked.doc_ids.size:
            return ranked
        sums, shown = self.usage.lookup(ranked.doc_ids)
        if self.ranker is not None:
            learned = self.ranker.learned(feature_matrix(ranked, cs, index, sums, shown, self.facts))
        else:
            learned = PRIOR_CAP * prior(sums)
        score = ranked.score + learned
        order = np.lexsort((ranked.doc_ids, -score))[:limit]
        return ranked.take(order, score=score[order], learned=learned[order])
