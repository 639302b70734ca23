"""The sessions repository: the sessions table, the summary events a closed session wrote,
and what each session's recalls showed (its working set and the raw material of implicit
signals).

Statements only: the connection, its lock and the cached reads belong to the `Store` it is
part of (`store.sessions`).
"""

from __future__ import annotations


class SessionStore:
    """Every statement on sessions, summary_events and recall_events."""

    def __init__(self, db):
        self.db = db

    def open_session(self, session_id: str, user_id: str, project: str, api: str, now,
                     origin: str | None = None) -> None:
        # (a new session has no summary yet: cached counts and summaries stay right)
        self.db.write_meta("INSERT INTO sessions (session_id, user_id, project, api, started_at, last_activity_at, origin) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", [session_id, user_id, project, api, now, now, origin],
                   invalidate=False)

    def touch_if_live(self, session_id: str, now, not_before) -> bool:
        """Touch a session if it is still open and recently active; False if not."""
        return bool(self.db.write_meta(
            "UPDATE sessions SET last_activity_at = ? WHERE session_id = ? AND ended_at IS NULL "
            "AND greatest(last_activity_at, (SELECT max(created_at) FROM memories m "
            "WHERE m.session_id = sessions.session_id)) >= ? RETURNING session_id",
            [now, session_id, not_before], invalidate=False))

    def active_session(self, user_id: str, api: str, *, origin: str | None = None, by_origin: bool = False):
        """The user's open session of this API, most recently active first; `by_origin`: only
        one opened from `origin` (a notebook's path; None matches the APIs' own sessions)."""
        where, params = "", [user_id, api]
        if by_origin:
            where, params = " AND origin IS NOT DISTINCT FROM ?", [*params, origin]
        with self.db.lock:
            rows = self.db.con.execute(
                "SELECT session_id, last_activity_at FROM sessions WHERE user_id = ? AND api = ? AND ended_at IS NULL"
                f"{where} ORDER BY last_activity_at DESC LIMIT 1", params).fetchall()
        return rows[0] if rows else None

    def stale_sessions(self, user_id: str, api: str, not_before, limit: int) -> list[tuple]:
        """The user's open sessions of this API idle since before `not_before` (by the rule
        `touch_if_live` reads: its last touch or its newest memory), the `limit` oldest first:
        (session id, last activity)."""
        with self.db.lock:
            return self.db.con.execute(
                "SELECT session_id, active FROM (SELECT session_id, greatest(last_activity_at, (SELECT max(created_at) "
                "FROM memories m WHERE m.session_id = sessions.session_id)) AS active FROM sessions "
                "WHERE user_id = ? AND api = ? AND ended_at IS NULL) AS s WHERE active < ? ORDER BY active LIMIT ?",
                [user_id, api, not_before, limit]).fetchall()

    def claim_end(self, session_id: str, ended) -> bool:
        """End an open session at `ended` unless someone did first: True for the one who did
        (two kernels opening at once close a stale session once)."""
        return bool(self.db.write_meta("UPDATE sessions SET ended_at = ? WHERE session_id = ? AND ended_at IS NULL "
                                       "RETURNING session_id", [ended, session_id]))

    def session_closed(self, session_id: str) -> bool:
        """Whether this session was ended (by any kernel or process); an unknown one is not."""
        return self.db.cached_read(("session_closed", session_id), lambda: self._session_closed(session_id))

    def _session_closed(self, session_id: str) -> bool:
        with self.db.lock:
            rows = self.db.con.execute("SELECT ended_at IS NOT NULL FROM sessions WHERE session_id = ?",
                                    [session_id]).fetchall()
        return bool(rows and rows[0][0])

    def session_known(self, session_id: str, user_id: str) -> bool:
        """Whether this user ever opened a session with this id (by either API)."""
        with self.db.lock:
            return bool(self.db.con.execute("SELECT count(*) FROM sessions WHERE session_id = ? AND user_id = ?",
                                            [session_id, user_id]).fetchall()[0][0])

    def day_summaries(self, user_id: str, key_prefixes: list[str], project: str | None = None) -> list[int]:
        """Index positions of the user's whole-session summaries whose topic key starts with
        one of `key_prefixes` (one per day: `core.temporal.day_key`), of one project if given."""
        if not key_prefixes:
            return []
        # (one list per length of prefix, every day's the same: a month asked of is one lookup)
        lengths = sorted({len(k) for k in key_prefixes})
        where = " OR ".join(f"substr(topic_key, 1, {n}) IN (SELECT unnest(?::VARCHAR[]))" for n in lengths)
        params = [user_id, *([k for k in key_prefixes if len(k) == n] for n in lengths)]
        if project is not None:
            where = f"({where}) AND project = ?"
            params.append(project)
        with self.db.lock:
            return [int(d) for (d,) in self.db.con.execute(
                "SELECT doc_id FROM memories WHERE user_id = ? AND kind = 'summary_event' AND topic_key IS NOT NULL "
                f"AND ({where}) ORDER BY doc_id", params).fetchall()]

    def day_memories(self, user_id: str, spans: list[tuple], project: str | None, day_keys: list[str],
                     type: str | None, limit: int) -> list[int]:
        """Index positions of the user's memories written, or revised, within `spans` ((start,
        end) UTC times, end excluded) that no whole-session summary of those days stands for
        (its topic key is a day's key, `day_keys`, and its session id): those of a session still
        open, of a session filed under another day, or of none; of one `type` if given. The
        newest `limit`, in doc order."""
        if not spans or limit <= 0:
            return []
        where = " OR ".join(["(m.created_at >= ? AND m.created_at < ?) OR (m.revision_count > 0 AND "
                             "m.updated_at >= ? AND m.updated_at < ?)"] * len(spans))
        params = [user_id, *(t for span in spans for t in (*span, *span))]
        for column, value in (("project", project), ("type", type)):
            if value is not None:
                where = f"({where}) AND m.{column} = ?"
                params.append(value)
        with self.db.lock:
            rows = self.db.con.execute(
                "SELECT m.doc_id FROM memories m WHERE m.user_id = ? AND m.kind = 'memory' "
                f"AND ({where}) AND (m.session_id IS NULL OR NOT EXISTS (SELECT 1 FROM memories s "
                "WHERE s.session_id = m.session_id AND s.kind = 'summary_event' AND s.topic_key IN "
                "(SELECT k || m.session_id FROM (SELECT unnest(?::VARCHAR[]) AS k) AS day_keys))) "
                "ORDER BY greatest(m.created_at, m.updated_at) DESC, m.doc_id DESC LIMIT ?",
                [*params, day_keys, limit]).fetchall()
        return sorted(int(d) for (d,) in rows)

    def set_session_summary(self, session_id: str, summary: str) -> None:
        self.db.write_meta("UPDATE sessions SET summary = ? WHERE session_id = ?", [summary, session_id])

    def session(self, session_id: str) -> dict:
        with self.db.lock:
            cur = self.db.con.execute(
                "SELECT session_id, user_id, started_at, last_activity_at, ended_at, summary, is_auto_generated "
                "FROM sessions WHERE session_id = ?", [session_id])
            names = [d[0] for d in cur.description]
            return dict(zip(names, cur.fetchall()[0]))

    def recent_summaries(self, user_id: str, n: int, exclude: str | None = None) -> list[tuple]:
        return self.db.cached_read(("recent_summaries", user_id, n, exclude),
                            lambda: self._recent_summaries(user_id, n, exclude))

    def _recent_summaries(self, user_id: str, n: int, exclude: str | None) -> list[tuple]:
        with self.db.lock:
            return self.db.con.execute(
                "SELECT session_id, coalesce(ended_at, last_activity_at), summary, is_auto_generated FROM sessions "
                "WHERE user_id = ? AND summary IS NOT NULL AND session_id IS DISTINCT FROM ? "
                "ORDER BY coalesce(ended_at, last_activity_at) DESC LIMIT ?", [user_id, exclude, n]).fetchall()

    def latest_session(self, user_id: str) -> str | None:
        with self.db.lock:
            rows = self.db.con.execute(
                "SELECT session_id FROM sessions WHERE user_id = ? ORDER BY started_at DESC LIMIT 1", [user_id]
            ).fetchall()
        return rows[0][0] if rows else None

    def session_started(self, session_id: str):
        with self.db.lock:
            rows = self.db.con.execute("SELECT started_at FROM sessions WHERE session_id = ?", [session_id]).fetchall()
        return rows[0][0] if rows else None

    def end_session(self, session_id: str, now, summary: str | None = None, auto: bool = False) -> None:
        """Ended (the first end stands), with a summary: the user's own replaces any; a generated
        one (`auto`) replaces only a generated one, so closing again never overwrites what they
        wrote (and a session closed again with more in it is summarised anew)."""
        if summary is None:
            sets, params = "", []
        elif auto:
            sets, params = (", summary = CASE WHEN summary IS NULL OR is_auto_generated THEN ? ELSE summary END, "
                            "is_auto_generated = (summary IS NULL OR is_auto_generated)"), [summary]
        else:
            sets, params = ", summary = ?, is_auto_generated = false", [summary]
        self.db.write_meta(f"UPDATE sessions SET ended_at = coalesce(ended_at, ?){sets} WHERE session_id = ?",
                           [now, *params, session_id])

    def add_summary_events(self, rows: list[tuple]) -> None:
        """(session_id, entity, fact_id, created_at, user_id) rows: which entity each summary a
        close wrote stands for (written by the close, or brought back by an import)."""
        if rows:
            cols = [list(c) for c in zip(*rows)]
            self.db.write_meta("INSERT INTO summary_events (session_id, entity, fact_id, created_at, user_id) "
                               "SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
                               "unnest(?::TIMESTAMP[]), unnest(?::VARCHAR[])", cols)

    def summarised_entities(self, session_id: str) -> list[str]:
        with self.db.lock:
            return [r[0] for r in self.db.con.execute(
                "SELECT entity FROM summary_events WHERE session_id = ?", [session_id]).fetchall()]

    def written_summaries(self, user_id: str, session_ids: list[str]) -> list[tuple[str, str, str, bool]]:
        """(session, fact_id, project, linked) of every summary the engine wrote of these
        sessions from their memories, so quoting them: what a close wrote (one per entity and
        the whole session's, linked in summary_events: `linked`) and a stale session's
        generated line kept as a summary (`sessions.is_auto_generated`, API B). Summaries the
        user wrote are not among them."""
        if not session_ids:
            return []
        with self.db.lock:
            return [(s, f, p, bool(linked)) for s, f, p, linked in self.db.con.execute(
                "SELECT m.session_id, m.fact_id, m.project, m.fact_id IN (SELECT e.fact_id FROM summary_events e "
                "WHERE e.session_id = m.session_id) AS linked FROM memories m WHERE m.user_id = ? "
                "AND m.kind = 'summary_event' AND m.session_id IN (SELECT unnest(?::VARCHAR[])) "
                "AND (m.fact_id IN (SELECT e.fact_id FROM summary_events e WHERE e.session_id = m.session_id) "
                "OR EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = m.session_id AND s.is_auto_generated "
                "AND s.summary = m.content)) ORDER BY m.session_id, m.fact_id",
                [user_id, list(session_ids)]).fetchall()]

    def unlink_summaries(self, fact_ids: list[str]) -> None:
        """Forget which entity these summaries were written for (they are deleted)."""
        if fact_ids:
            self.db.write_meta("DELETE FROM summary_events WHERE fact_id IN (SELECT unnest(?::VARCHAR[]))",
                          [list(fact_ids)])

    def summary_state(self, session_id: str):
        """(api, is_auto_generated, started_at, summary) of a session, None if it was never opened."""
        with self.db.lock:
            rows = self.db.con.execute("SELECT api, is_auto_generated, started_at, summary FROM sessions WHERE session_id = ?",
                                       [session_id]).fetchall()
        return rows[0] if rows else None

    def rewrite_auto_summary(self, session_id: str, summary: str | None) -> None:
        """A new generated summary line for a session whose line was generated (one the user
        wrote stays); None: no line (nothing is left to summarise)."""
        self.db.write_meta("UPDATE sessions SET summary = ? WHERE session_id = ? AND is_auto_generated",
                      [summary, session_id])

    def last_showing(self, fact_id: str, not_before):
        """The latest (session_id, query, rank, project filter) a recall showed a memory at,
        since `not_before`."""
        with self.db.lock:
            rows = self.db.con.execute(
                "SELECT session_id, query, rank, project FROM recall_events WHERE fact_id = ? AND created_at >= ? "
                "ORDER BY created_at DESC LIMIT 1", [fact_id, not_before]).fetchall()
        return rows[0] if rows else None

    def session_showings(self, session_id: str, user_id: str, doc_ids: list[int] | None = None) -> list[tuple]:
        """Per memory of `user_id` a session's recalls showed (only `doc_ids`, if given):
        (fact_id, times, last query, best rank, that query's project filter)."""
        only = "" if doc_ids is None else "AND e.doc_id IN (SELECT unnest(?::BIGINT[])) "
        with self.db.lock:
            return self.db.con.execute(
                "SELECT e.fact_id, count(*), (array_agg(e.query ORDER BY e.created_at DESC))[1], min(e.rank), "
                "(array_agg(e.project ORDER BY e.created_at DESC))[1] FROM recall_events e "
                f"JOIN memories m USING (fact_id) WHERE e.session_id = ? AND m.user_id = ? {only}GROUP BY e.fact_id",
                [session_id, user_id] + ([list(doc_ids)] if doc_ids is not None else [])).fetchall()

    def working_set(self, session_id: str) -> list[tuple[int, int]]:
        with self.db.lock:
            return self.db.con.execute(
                "SELECT doc_id, count(*) FROM recall_events WHERE session_id = ? GROUP BY doc_id", [session_id]
            ).fetchall()

    def record_recalls(self, events: list[tuple]) -> None:
        """(session_id, fact_id, doc_id, query, rank, shown_at, project filter) rows, in one statement."""
        cols = list(zip(*events))
        self.db.write_meta("INSERT INTO recall_events (session_id, fact_id, doc_id, query, rank, created_at, project, "
                   "user_id) SELECT e.*, (SELECT user_id FROM sessions s WHERE s.session_id = e.sid) FROM ("
                   "SELECT unnest(?::VARCHAR[]) AS sid, unnest(?::VARCHAR[]), unnest(?::BIGINT[]), unnest(?::VARCHAR[]), "
                   "unnest(?::INTEGER[]), unnest(?::TIMESTAMP[]), unnest(?::VARCHAR[])) AS e",
                   [list(c) for c in cols])
