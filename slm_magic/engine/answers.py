"""Ranked rows as the answers a recall returns: each a `ScoredMemory` with its score's parts and
the question's words it matched. Both recall paths (the kernel's index, the file) end here."""

from __future__ import annotations

from collections.abc import Mapping

from ..ranking.ranked import Ranked
from ..results.models import Fact, ScoredMemory, SearchScore


def scored_memories(ranked: Ranked, facts: Mapping[int, Fact], words: Mapping[int, str]) -> list[ScoredMemory]:
    """Scored memories of ranked rows (by doc id in `facts`), each with the query words it matched."""
    out = []
    rel_to = ranked.related_to
    for i, d in enumerate(ranked.doc_ids.tolist()):
        fact = facts.get(d)
        if fact is None:  # removed by another process since we ranked it
            continue
        near = 0 if rel_to is None else int(rel_to[i])
        out.append(ScoredMemory(fact=fact, score=SearchScore(
            value=float(ranked.score[i]), relevance=float(ranked.relevance[i]), bm25=float(ranked.bm25[i]),
            tfidf=float(ranked.tfidf[i]), recency=float(ranked.recency[i]), revision=float(ranked.revision[i]),
            working_set=float(ranked.working_set[i]),
            context=0.0 if ranked.context is None else float(ranked.context[i]),
            learned=0.0 if ranked.learned is None else float(ranked.learned[i]),
            temporal=0.0 if ranked.temporal is None else float(ranked.temporal[i]),
            meaning=0.0 if ranked.meaning is None else float(ranked.meaning[i])),
            similar=ranked.similar is not None and bool(ranked.similar[i]),
            related_to=near or None, query_words=words if ranked.bm25[i] > 0 else {}))  # (none: by meaning)
    return out
