"""Pydantic models the engine returns. Widgets and magics read these and nothing else."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MemoryType = Literal["profile", "preference", "decision", "pattern", "discovery"]
MEMORY_TYPES: tuple[str, ...] = ("profile", "preference", "decision", "pattern", "discovery")
#: How much a type matters when a session opens (ContextScore's type priority).
TYPE_PRIORITY: dict[str, float] = {
    "profile": 1.0,
    "preference": 0.9,
    "decision": 0.7,
    "pattern": 0.6,
    "discovery": 0.5,
}


class Fact(BaseModel):
    """One stored memory with every field both APIs expose."""

    model_config = ConfigDict(frozen=True)

    fact_id: str
    content: str
    user_id: str = ""
    session_id: str | None = None
    project: str = ""
    type: str = "discovery"
    title: str | None = None
    topic_key: str | None = None
    tags: tuple[str, ...] = ()
    is_core: bool = False
    source: str | None = None
    notebook: str | None = None
    cell: int | None = None
    created_at: datetime
    updated_at: datetime
    revision_count: int = 0
    kind: Literal["memory", "summary_event"] = "memory"


class SearchScore(BaseModel):
    """SearchScore = 0.60·relevance + 0.25·recency + 0.15·revision, with its parts.

    `bm25` and `tfidf` are the two channels that make up `relevance`; all values are in [0, 1].
    Not comparable with ContextScore: a different formula on a different scale.
    """

    model_config = ConfigDict(frozen=True)

    value: float
    relevance: float
    bm25: float
    tfidf: float
    recency: float
    revision: float


class ScoredMemory(BaseModel):
    """A recalled memory: the fact, its SearchScore and the parts of that score by name."""

    model_config = ConfigDict(frozen=True)

    fact: Fact
    score: SearchScore

    # The parts by name, so `m.bm25` reads like the breakdown it is.
    @property
    def fact_id(self) -> str:
        return self.fact.fact_id

    @property
    def content(self) -> str:
        return self.fact.content

    @property
    def relevance(self) -> float:
        return self.score.relevance

    @property
    def bm25(self) -> float:
        return self.score.bm25

    @property
    def tfidf(self) -> float:
        return self.score.tfidf

    @property
    def recency(self) -> float:
        return self.score.recency

    @property
    def revision(self) -> float:
        return self.score.revision


RetrievalMode = Literal["full_bm25_tfidf", "bm25_sql_fallback"]


class RecallResult(BaseModel):
    """What `Memory.recall` returns: memories best first, and which path produced them."""

    model_config = ConfigDict(frozen=True)

    query: str
    memories: list[ScoredMemory] = Field(default_factory=list)
    retrieval_mode: RetrievalMode = "full_bm25_tfidf"
    degraded_mode: bool = False
    degraded_reason: str | None = None
    elapsed_ms: float = 0.0

    def __len__(self) -> int:
        return len(self.memories)

    def __iter__(self):  # type: ignore[override]
        return iter(self.memories)

    def __getitem__(self, i: int) -> ScoredMemory:
        return self.memories[i]
