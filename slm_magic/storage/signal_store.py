"""The signals repository: feedback signals (explicit and implicit), the outcomes the answer
calibration fits on, and the fitted models (the ranker and the calibration) as JSON.

Statements only: the connection, its lock and the cached reads belong to the `Store` it is
part of (`store.signals`).
"""

from __future__ import annotations


import numpy as np


class SignalStore:
    """Every statement on feedback, outcomes and models."""

    def __init__(self, db):
        self.db = db

    def feedback_count(self, user_id: str) -> int:
        def count() -> int:
            with self.db.lock:
                return self.db.con.execute("SELECT count(*) FROM feedback WHERE user_id = ?", [user_id]).fetchall()[0][0]

        return self.db.cached_read(("feedback_count", user_id), count)

    def add_feedback(self, rows: list[tuple]) -> None:
        """(signal_id, session_id, fact_id, signal, value, query, rank, created_at, user_id, project) rows."""
        if rows:
            cols = [list(c) for c in zip(*rows)]
            self.db.write_meta("INSERT INTO feedback (signal_id, session_id, fact_id, signal, value, query, rank, created_at, "
                       "user_id, project) SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
                       "unnest(?::VARCHAR[]), unnest(?::FLOAT8[]), unnest(?::VARCHAR[]), unnest(?::INTEGER[]), "
                       "unnest(?::TIMESTAMP[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]) ON CONFLICT DO NOTHING", cols)

    def judgements(self, session_id: str, user_id: str, fact_id: str, query: str | None, project: str | None,
                   signals) -> list[tuple[str, str]]:
        """(signal_id, signal) of the user's judgements (`signals`) of a memory for a query and
        project filter (None: for none) in a session, newest first."""
        with self.db.lock:
            return [(r[0], r[1]) for r in self.db.con.execute(
                "SELECT signal_id, signal FROM feedback WHERE session_id = ? AND user_id = ? AND fact_id = ? AND query "
                "IS NOT DISTINCT FROM ? AND project IS NOT DISTINCT FROM ? AND signal IN (SELECT unnest(?::VARCHAR[])) "
                "ORDER BY created_at DESC", [session_id, user_id, fact_id, query, project, list(signals)]).fetchall()]

    def drop_signals(self, signal_ids: list[str]) -> None:
        if signal_ids:
            self.db.write_meta("DELETE FROM feedback WHERE signal_id IN (SELECT unnest(?::VARCHAR[]))", [signal_ids])

    # --- learning ---------------------------------------------------------------------------
    def signal_sums(self, user_id: str):
        """Per live memory of a user: (doc_ids, sum of signal values, times shown), cached."""
        def read():
            with self.db.lock:
                rows = self.db.con.execute(
                    "WITH s AS (SELECT fact_id, sum(value) AS v FROM feedback WHERE user_id = ? GROUP BY fact_id), "
                    "e AS (SELECT fact_id, count(*) AS n FROM recall_events GROUP BY fact_id) "
                    "SELECT m.doc_id, coalesce(s.v, 0), coalesce(e.n, 0) FROM memories m "
                    "LEFT JOIN s USING (fact_id) LEFT JOIN e USING (fact_id) "
                    "WHERE m.user_id = ? AND (s.v IS NOT NULL OR e.n IS NOT NULL)", [user_id, user_id]).fetchall()
            return (np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.float64),
                    np.array([r[2] for r in rows], dtype=np.float64))
        return self.db.cached_read(("signal_sums", user_id), read)

    def training_signals(self, user_id: str) -> list[tuple]:
        """(query, project filter, doc_id, value) of every signal with a query, on a live memory."""
        with self.db.lock:
            return self.db.con.execute(
                "SELECT f.query, f.project, m.doc_id, f.value FROM feedback f JOIN memories m USING (fact_id) "
                "WHERE f.user_id = ? AND f.query IS NOT NULL ORDER BY f.created_at", [user_id]).fetchall()

    def latest_model(self, user_id: str, kind: str):
        """(model_id, version, trained_on, params JSON) of the newest model, or None; cached."""
        def read():
            with self.db.lock:
                rows = self.db.con.execute(
                    "SELECT model_id, version, trained_on, params FROM models WHERE user_id = ? AND kind = ? "
                    "ORDER BY version DESC LIMIT 1", [user_id, kind]).fetchall()
            return rows[0] if rows else None
        return self.db.cached_read(("latest_model", user_id, kind), read)

    def save_model(self, model_id: str, user_id: str, kind: str, version: int, now, trained_on: int,
                   params: str) -> None:
        self.db.write_meta("INSERT INTO models VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                   [model_id, user_id, kind, version, now, trained_on, params])

    def session_signals(self, session_id: str, user_id: str) -> list[tuple]:
        """(fact_id, signal) a user already gave in a session (an implicit signal is given once)."""
        with self.db.lock:
            return self.db.con.execute("SELECT fact_id, signal FROM feedback WHERE session_id = ? AND user_id = ?",
                                    [session_id, user_id]).fetchall()

    def add_outcome(self, outcome_id: str, user_id: str, query: str, evidence: float, answered: bool,
                    source: str, now) -> None:
        self.db.write_meta("INSERT INTO outcomes VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                   [outcome_id, user_id, query, evidence, answered, source, now])

    def outcomes(self, user_id: str) -> list[tuple]:
        with self.db.lock:
            return self.db.con.execute("SELECT evidence, answered FROM outcomes WHERE user_id = ? ORDER BY created_at",
                                    [user_id]).fetchall()

    def outcome_count(self, user_id: str) -> int:
        def count() -> int:
            with self.db.lock:
                return self.db.con.execute("SELECT count(*) FROM outcomes WHERE user_id = ?", [user_id]).fetchall()[0][0]
        return self.db.cached_read(("outcome_count", user_id), count)
