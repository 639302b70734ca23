"""Feedback signals: what the user said (or showed) about a recalled memory.

Signals are stored per session and per memory, with the query and the rank it was shown at;
the learning phases read their count (phase 1 under 50, 2 from 50, 3 from 200).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from .errors import InvalidInput

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory

#: Explicit signals and their value: +1 useful, -1 not useful.
EXPLICIT_SIGNALS = {"up": 1.0, "down": -1.0}


class FeedbackSignals:
    """A mixin of `Memory`: `feedback(fact_id, "up" | "down", ...)`."""

    def feedback(self: "Memory", fact_id: str, signal: str, *, session_id: str | None = None,
                 query: str | None = None, rank: int | None = None) -> str:
        """Record that a memory was useful ("up") or not ("down"); returns the signal's id."""
        if signal not in EXPLICIT_SIGNALS:
            raise InvalidInput(f"signal must be one of {', '.join(EXPLICIT_SIGNALS)}; got {signal!r}")
        fact = self.get(fact_id) if isinstance(fact_id, str) else None
        if fact is None:
            raise InvalidInput(f"no memory with id {fact_id!r}")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
            raise InvalidInput(f"rank must be a positive integer; got {rank!r}")
        signal_id = uuid.uuid4().hex[:16]
        self.store.add_feedback(signal_id, session_id, fact_id, signal, EXPLICIT_SIGNALS[signal], query, rank,
                                self.now(), fact.user_id)
        return signal_id

    def feedback_count(self: "Memory", user_id: str | None = None) -> int:
        return self.store.feedback_count(self.user_id if user_id is None else user_id)
