"""DuckDB storage: the schema, its migrations, and every SQL statement the engine runs.

The DuckDB file is the source of truth. Everything held in memory (the sparse index, the
session links) is derived from it and can be rebuilt from it at any time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import numpy as np

from .errors import StoreError

# Each migration takes the schema from version i to i + 1. Never edit a released one:
# add a new function at the end. The first release is version 1.
def _v1(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE store_state (
            id INTEGER PRIMARY KEY,
            generation BIGINT NOT NULL,      -- bumped by every write; readers refresh on change
            next_doc_id BIGINT NOT NULL,     -- next index position to hand out
            next_seq BIGINT NOT NULL         -- next insertion sequence number
        );
        INSERT INTO store_state VALUES (1, 0, 0, 0);

        CREATE TABLE memories (
            fact_id VARCHAR PRIMARY KEY,
            doc_id BIGINT NOT NULL,          -- index position; a content change gets a new one
            seq BIGINT NOT NULL,             -- insertion order, fixed for the fact's life
            user_id VARCHAR NOT NULL,
            session_id VARCHAR,
            project VARCHAR NOT NULL,
            type VARCHAR NOT NULL,
            title VARCHAR,
            topic_key VARCHAR,
            content VARCHAR NOT NULL,
            content_hash VARCHAR NOT NULL,
            tags VARCHAR[] NOT NULL,
            is_core BOOLEAN NOT NULL,
            source VARCHAR,
            notebook VARCHAR,
            cell INTEGER,
            created_at TIMESTAMP NOT NULL,   -- UTC, naive
            updated_at TIMESTAMP NOT NULL,
            revision_count INTEGER NOT NULL,
            kind VARCHAR NOT NULL,           -- 'memory' or 'summary_event'
            doc_len INTEGER NOT NULL,        -- number of index terms
            changed_gen BIGINT NOT NULL      -- generation of the last change to this row
        );

        -- Term postings of live memories: what the SQL fallback scores and the index loads.
        CREATE TABLE postings (
            doc_id BIGINT NOT NULL,
            term BIGINT NOT NULL,            -- text.term_hash of the term
            tf INTEGER NOT NULL
        );

        -- Index positions that stopped being live (content changed, memory forgotten), so
        -- another process's index can drop them when it refreshes.
        CREATE TABLE tombstones (
            doc_id BIGINT NOT NULL,
            new_doc_id BIGINT,
            generation BIGINT NOT NULL
        );

        CREATE TABLE sessions (
            session_id VARCHAR PRIMARY KEY,
            user_id VARCHAR NOT NULL,
            project VARCHAR NOT NULL,
            api VARCHAR NOT NULL,            -- 'slm' (session_init) or 'mem' (mem_session_start)
            started_at TIMESTAMP NOT NULL,
            last_activity_at TIMESTAMP NOT NULL,
            ended_at TIMESTAMP,
            summary VARCHAR,
            is_auto_generated BOOLEAN NOT NULL DEFAULT false
        );

        CREATE TABLE feedback (
            signal_id VARCHAR PRIMARY KEY,
            session_id VARCHAR,
            fact_id VARCHAR NOT NULL,
            signal VARCHAR NOT NULL,         -- e.g. 'up', 'down', 'pinned', 'revised', 'ignored'
            value DOUBLE NOT NULL,           -- +1 useful ... -1 not useful
            query VARCHAR,
            rank INTEGER,
            created_at TIMESTAMP NOT NULL
        );

        CREATE TABLE summary_events (
            session_id VARCHAR NOT NULL,
            entity VARCHAR NOT NULL,
            fact_id VARCHAR NOT NULL,        -- the summary, stored as a searchable memory
            created_at TIMESTAMP NOT NULL
        );
        """
    )


MIGRATIONS: list[Callable[[duckdb.DuckDBPyConnection], None]] = [_v1]
SCHEMA_VERSION = len(MIGRATIONS)

MEMORY_COLUMNS = (
    "fact_id", "doc_id", "seq", "user_id", "session_id", "project", "type", "title", "topic_key",
    "content", "content_hash", "tags", "is_core", "source", "notebook", "cell", "created_at",
    "updated_at", "revision_count", "kind", "doc_len", "changed_gen",
)
FACT_COLUMNS = (
    "fact_id", "content", "user_id", "session_id", "project", "type", "title", "topic_key",
    "tags", "is_core", "source", "notebook", "cell", "created_at", "updated_at",
    "revision_count", "kind",
)


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def default_path() -> Path:
    """The file used when none is given: $SLM_MAGIC_DB, else ~/.slm_magic/memory.duckdb."""
    env = os.environ.get("SLM_MAGIC_DB")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".slm_magic" / "memory.duckdb"


class Store:
    """One DuckDB connection and the statements run on it.

    All access goes through `lock` so that one Memory can be shared between threads
    (ipywidgets callbacks run beside the cell that made them).
    """

    def __init__(self, path: str | os.PathLike[str] | None):
        if path is None:
            path = default_path()
        self.path = str(path)
        self.lock = threading.RLock()
        if self.path != ":memory:":
            p = Path(self.path).expanduser()
            if p.is_dir():
                raise StoreError(f"{p} is a directory, not a DuckDB memory file")
            if not p.parent.exists():
                p.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
            self.path = str(p)
        try:
            self.con = duckdb.connect(self.path)
        except duckdb.Error as exc:
            raise StoreError(f"cannot open {self.path} as a DuckDB memory file: {exc}") from exc
        self._migrate()

    # --- schema -----------------------------------------------------------------------------
    def _migrate(self) -> None:
        con = self.con
        with self.lock:
            has = con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
            ).fetchone()[0]
            if not has:
                others = con.execute("SELECT count(*) FROM information_schema.tables").fetchone()[0]
                if others:
                    raise StoreError(f"{self.path} is a DuckDB file of something else (no schema_version table)")
                con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at TIMESTAMP NOT NULL)")
                version = 0
            else:
                version = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {version}; this slm_magic knows up to "
                    f"{SCHEMA_VERSION}. Upgrade slm_magic to open it."
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                con.execute("BEGIN TRANSACTION")
                try:
                    MIGRATIONS[target - 1](con)
                    con.execute("INSERT INTO schema_version VALUES (?, ?)", [target, utcnow()])
                    con.execute("COMMIT")
                except Exception:
                    con.execute("ROLLBACK")
                    raise

    def schema_version(self) -> int:
        with self.lock:
            return self.con.execute("SELECT max(version) FROM schema_version").fetchone()[0]

    # --- state ------------------------------------------------------------------------------
    def generation(self) -> int:
        with self.lock:
            return self.con.execute("SELECT generation FROM store_state").fetchone()[0]

    def reserve(self, n_docs: int, n_seq: int) -> tuple[int, int, int]:
        """Inside a write transaction: hand out doc ids and seqs, bump the generation."""
        gen, doc, seq = self.con.execute("SELECT generation, next_doc_id, next_seq FROM store_state").fetchone()
        self.con.execute(
            "UPDATE store_state SET generation = ?, next_doc_id = ?, next_seq = ?",
            [gen + 1, doc + n_docs, seq + n_seq],
        )
        return gen + 1, doc, seq

    # --- writes -----------------------------------------------------------------------------
    def insert_memories(self, columns: dict[str, Sequence], postings: dict[str, np.ndarray]) -> None:
        """Append rows (column -> values) and their postings; caller holds the transaction."""
        import pyarrow as pa

        rows = pa.table({name: columns[name] for name in MEMORY_COLUMNS})
        self.con.register("_new_memories", rows)
        try:
            self.con.execute(f"INSERT INTO memories SELECT {', '.join(MEMORY_COLUMNS)} FROM _new_memories")
        finally:
            self.con.unregister("_new_memories")
        if len(postings["doc_id"]):
            p = pa.table(postings)
            self.con.register("_new_postings", p)
            try:
                self.con.execute("INSERT INTO postings SELECT doc_id, term, tf FROM _new_postings")
            finally:
                self.con.unregister("_new_postings")

    # --- reads ------------------------------------------------------------------------------
    def facts_by_doc(self, doc_ids: Sequence[int]) -> dict[int, tuple]:
        with self.lock:
            rows = self.con.execute(
                f"SELECT doc_id, {', '.join(FACT_COLUMNS)} FROM memories WHERE doc_id IN (SELECT unnest(?::BIGINT[]))",
                [list(map(int, doc_ids))],
            ).fetchall()
        return {r[0]: r[1:] for r in rows}

    def bm25_sql(self, terms: Sequence[int], qtf: Sequence[int], k1: float, b: float, limit: int,
                 user_id: str, project: str | None) -> tuple[list[tuple[int, float]], dict[int, float], float]:
        """BM25 straight from the stored postings, for when the in-process index is unusable.

        Returns (doc_id, bm25) best first, the idf of each query term, and avgdl, so the caller
        can normalise exactly as the in-process path does.
        """
        with self.lock:
            n, avgdl = self.con.execute(
                "SELECT count(*), coalesce(avg(doc_len), 0) FROM memories"
            ).fetchone()
            df = dict(self.con.execute(
                "SELECT p.term, count(*) FROM postings p WHERE p.term IN (SELECT unnest(?::BIGINT[])) GROUP BY p.term",
                [list(terms)],
            ).fetchall())
            idf = {t: float(np.log(1.0 + (n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5))) for t in terms}
            if not n or not df:
                return [], idf, float(avgdl or 1.0)
            filters = "m.user_id = ?"
            params: list = [list(terms), [idf[t] for t in terms], list(qtf), k1, b, float(avgdl), user_id]
            if project is not None:
                filters += " AND m.project = ?"
                params.append(project)
            params.append(limit)
            rows = self.con.execute(
                f"""
                WITH q AS (SELECT unnest(?::BIGINT[]) AS term, unnest(?::DOUBLE[]) AS idf,
                                  unnest(?::INTEGER[]) AS qtf),
                     k AS (SELECT ?::DOUBLE AS k1, ?::DOUBLE AS b, ?::DOUBLE AS avgdl)
                SELECT m.doc_id,
                       sum(q.qtf * q.idf * p.tf * (k.k1 + 1)
                           / (p.tf + k.k1 * (1 - k.b + k.b * m.doc_len / k.avgdl))) AS score
                FROM postings p JOIN q USING (term) JOIN memories m USING (doc_id), k
                WHERE {filters}
                GROUP BY m.doc_id
                ORDER BY score DESC, m.doc_id
                LIMIT ?
                """,
                params,
            ).fetchall()
        return [(int(d), float(s)) for d, s in rows], idf, float(avgdl)

    def close(self) -> None:
        with self.lock:
            try:
                self.con.close()
            except duckdb.Error:
                pass
