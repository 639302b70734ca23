"""What each session's recalls have shown (its working set, which lifts those memories a little
in its later recalls), and the showings not yet written to the file.

A part of its own, held by `Memory` as `working_sets`: recall adds to it, a session's opening
starts one empty, the learning loop reads it (what a session saw and did not use). A recall
does not pay for an insert: showings are written with the next write, when the file is let go
of, or every `PENDING_MAX` of them."""

from __future__ import annotations

from datetime import datetime

from ..core.session_ids import is_synthetic_session


class WorkingSets:
    PENDING_MAX = 200

    def __init__(self, store):
        self.store = store
        self._sets: dict[str, dict[int, int]] = {}
        self._pending: list[tuple] = []

    def of(self, session_id: str) -> dict[int, int]:
        """doc_id -> how often this session's recalls showed it (from the file on first use)."""
        ws = self._sets.get(session_id)
        if ws is None:
            self.flush()
            ws = {int(d): int(n) for d, n in self.store.sessions.working_set(session_id)}
            self._sets[session_id] = ws
        return ws

    def known(self, session_id: str) -> dict[int, int] | None:
        """This session's working set if this process holds it, without asking the file."""
        return self._sets.get(session_id)

    def start(self, session_id: str) -> None:
        """A new session: nothing shown yet, no need to ask the file."""
        self._sets[session_id] = {}

    def clear(self) -> None:
        """Forget what is held (read again from the file when next needed)."""
        self._sets.clear()

    @property
    def pending(self) -> int:
        """How many showings wait to be written."""
        return len(self._pending)

    def note_shown(self, session_id: str, query: str, shown: list[tuple[str, int]], now: datetime,
                   project: str | None = None) -> None:
        """Remember what a recall showed, (fact_id, doc_id) best first: in the working set at
        once, in the file with the next flush."""
        if not session_id or is_synthetic_session(session_id):
            return
        self._pending.extend(
            (session_id, fact_id, doc_id, query, rank, now, project)
            for rank, (fact_id, doc_id) in enumerate(shown, start=1))
        ws = self.of(session_id)
        for _, d in shown:
            ws[d] = ws.get(d, 0) + 1
        if len(self._pending) >= self.PENDING_MAX:
            self.flush()

    def flush(self) -> None:
        """Write the showings that wait (before anything reads or deletes them in the file)."""
        if self._pending:
            events, self._pending = self._pending, []
            self.store.sessions.record_recalls(events)
