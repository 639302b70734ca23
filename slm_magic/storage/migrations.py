"""The memory file's schema, version by version: each migration takes it from version i to
i + 1 (the server's own history is pg_schema.py)."""

from __future__ import annotations

from collections.abc import Callable

import duckdb


# Each migration takes the schema from version i to i + 1. Never edit a released one:
# add a new function at the end. The first release is version 1.
#: The first schema: the memories with their postings, the tombstones, sessions, feedback and
#: the summaries' events (each later version changes it in its own function).
_V1_SCHEMA = """
-- doc_id: a memory's position in the in-process index; a content change gets a new one.
CREATE SEQUENCE doc_seq START 0 MINVALUE 0;
-- change stamps: every insert, update and removal takes the next one, so a reader
-- that remembers the highest stamp it has seen can catch up with what changed since.
CREATE SEQUENCE change_seq START 1;

CREATE TABLE memories (
    fact_id VARCHAR PRIMARY KEY,
    doc_id BIGINT NOT NULL DEFAULT nextval('doc_seq'),
    seq BIGINT,                      -- insertion order if not doc_id (kept across revisions)
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
    terms BIGINT[] NOT NULL,         -- postings: text.term_hash of each distinct term ...
    tfs INTEGER[] NOT NULL,          -- ... and its frequency in the content
    changed BIGINT NOT NULL DEFAULT nextval('change_seq')
);

-- Index positions that stopped being live (content changed, memory forgotten), so
-- another process's index can drop them when it catches up.
CREATE TABLE tombstones (
    doc_id BIGINT NOT NULL,
    new_doc_id BIGINT,
    changed BIGINT NOT NULL DEFAULT nextval('change_seq')
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


def _v1(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(_V1_SCHEMA)


def _v2(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        -- What each recall of a session showed, at which rank: the session's working set,
        -- and the raw material of implicit feedback ("shown often, never used").
        -- The terms a retired index position had, so another process can correct its counts.
        ALTER TABLE tombstones ADD COLUMN terms BIGINT[];
        -- Whose signal it is: the learning status counts one user's signals without a join.
        ALTER TABLE feedback ADD COLUMN user_id VARCHAR;

        CREATE TABLE recall_events (
            session_id VARCHAR NOT NULL,
            fact_id VARCHAR NOT NULL,
            doc_id BIGINT NOT NULL,
            query VARCHAR NOT NULL,
            rank INTEGER NOT NULL,
            created_at TIMESTAMP NOT NULL
        );
        """
    )


def _v3(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        -- Fitted learning models per user: the phase-3 ranker and the answer calibration.
        -- Parameters are JSON numbers, never pickled code: a memory file may come from elsewhere.
        CREATE TABLE models (
            model_id VARCHAR PRIMARY KEY,
            user_id VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,           -- 'ranker' or 'calibration'
            version INTEGER NOT NULL,
            created_at TIMESTAMP NOT NULL,
            trained_on INTEGER NOT NULL,     -- how many signals (or outcomes) it was fitted on
            params VARCHAR NOT NULL
        );
        -- Whether a recall answered its query, from the user's judge or fed in as labels:
        -- the calibration's training data. `evidence` is the ranking's top relevance.
        -- The project filter of the recall a signal judged (and of each showing), so training
        -- re-ranks the same candidates the user saw.
        ALTER TABLE feedback ADD COLUMN project VARCHAR;
        ALTER TABLE recall_events ADD COLUMN project VARCHAR;
        CREATE TABLE outcomes (
            outcome_id VARCHAR PRIMARY KEY,
            user_id VARCHAR NOT NULL,
            query VARCHAR NOT NULL,
            evidence DOUBLE NOT NULL,
            answered BOOLEAN NOT NULL,
            source VARCHAR NOT NULL,         -- 'judge' or 'label'
            created_at TIMESTAMP NOT NULL
        );
        """
    )


def _v4(con: duckdb.DuckDBPyConnection) -> None:
    """Provenance and sessions per notebook (new columns), and every field searchable: postings
    re-derived from content, title, tags, project and type with their field weights
    (core/fields.FIELD_WEIGHTS), and the character 3-grams of each memory's terms stored for the
    n-gram channel, in chunks of rows."""
    con.execute(
        """
        -- Where a memory came from, beyond the notebook's path and the execution count (which
        -- changes on every re-run): the front end's stable cell id, and the source of the cell
        -- run just before %%remember (the code that produced the finding).
        ALTER TABLE memories ADD COLUMN cell_id VARCHAR;
        ALTER TABLE memories ADD COLUMN code VARCHAR;
        -- Whose session it is: a notebook's path or one terminal IPython (a session belongs to
        -- a notebook, not to a user; NULL for sessions the APIs open).
        ALTER TABLE sessions ADD COLUMN origin VARCHAR;
        """
    )

    import pyarrow as pa

    from ..core.fields import field_counts, field_grams

    con.execute("ALTER TABLE memories ADD COLUMN grams BIGINT[] DEFAULT []")
    con.execute("ALTER TABLE memories ADD COLUMN gtfs INTEGER[] DEFAULT []")
    lo, hi = con.execute("SELECT coalesce(min(doc_id), 0), coalesce(max(doc_id), -1) FROM memories").fetchall()[0]
    for start in range(int(lo), int(hi) + 1, 50_000):
        rows = con.execute("SELECT doc_id, content, title, tags, project, type FROM memories "
                           "WHERE doc_id BETWEEN ? AND ?", [start, start + 49_999]).fetchall()
        if not rows:
            continue
        # (one by one, with the analyser the index uses: a file this old is small)
        counted = [field_counts(c, t, g or (), p, y) for _, c, t, g, p, y in rows]
        grammed = [field_grams(c, t, g or ()) for _, c, t, g, _, _ in rows]
        con.register("_reindexed", pa.table({
            "doc_id": [r[0] for r in rows], "doc_len": [length for _, length in counted],
            "terms": [list(c) for c, _ in counted], "tfs": [list(c.values()) for c, _ in counted],
            "grams": [list(g) for g in grammed], "gtfs": [list(g.values()) for g in grammed]}))
        try:
            con.execute("UPDATE memories SET doc_len = r.doc_len, terms = r.terms, tfs = r.tfs, grams = r.grams, "
                        "gtfs = r.gtfs FROM _reindexed r WHERE memories.doc_id = r.doc_id")
        finally:
            con.unregister("_reindexed")


def _v5(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        -- A memory its author shared: every user of the memory finds it, showing who wrote it
        -- (on PostgreSQL, row-level security lets them read it and nothing else of the author's).
        ALTER TABLE memories ADD COLUMN shared BOOLEAN DEFAULT false;
        -- Whose retired index position it is, and whether it was shared: on PostgreSQL a reader
        -- sees the tombstones of the rows it could read, and no others.
        ALTER TABLE tombstones ADD COLUMN user_id VARCHAR;
        ALTER TABLE tombstones ADD COLUMN shared BOOLEAN DEFAULT false;
        -- Whose rows these are, so that a row-level policy needs no join.
        ALTER TABLE summary_events ADD COLUMN user_id VARCHAR;
        ALTER TABLE recall_events ADD COLUMN user_id VARCHAR;
        """
    )


def _v6(con: duckdb.DuckDBPyConnection) -> None:
    """No 3-gram lists: an index works them out from the text when it loads (the same ones).
    They were more than half the file and a fifth of a bulk import's time, and the saved
    index keeps them anyway."""
    con.execute("ALTER TABLE memories DROP COLUMN grams; ALTER TABLE memories DROP COLUMN gtfs;")


#: Every table with a user_id column: whose each row is.
USER_TABLES = ("memories", "tombstones", "sessions", "feedback", "summary_events", "recall_events", "models",
               "outcomes")


def _v7(con: duckdb.DuckDBPyConnection) -> None:
    """One person, one name (issue 25): until now a memory written without a user belonged to
    the empty user "", and every face now defaults to `identity.default_user()` instead. So
    the rows of "" become that user's, in every table, and stay the person's who wrote them.

    The name is the one in force when the file is upgraded ($SLM_MAGIC_USER, else the login
    name): the first slm_magic of this version to open the file decides. Rows already under
    that name are merged with them (nothing is overwritten: every table is keyed by its own
    ids). Another name later (a different $SLM_MAGIC_USER) finds them under this one,
    `Memory(path, user_id=<it>)` or `--user <it>`; nothing is dropped. A saved index names
    the schema version it was made for, so one from before (holding "") is rebuilt."""
    from ..core.identity import default_user

    user = default_user()
    for table in USER_TABLES:
        con.execute(f"UPDATE {table} SET user_id = ? WHERE user_id = ''", [user])


def _v8(con: duckdb.DuckDBPyConnection) -> None:
    """The meaning channel's vector of each memory, and the model that made it (issue 26): a
    kernel whose model is the writer's takes it instead of working it out again (a transformer
    takes 10 ms a memory); a row without one, or of another model, is embedded from its text."""
    con.execute("ALTER TABLE memories ADD COLUMN vec FLOAT[]; ALTER TABLE memories ADD COLUMN vec_model VARCHAR;")


MIGRATIONS: list[Callable[[duckdb.DuckDBPyConnection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8]


SCHEMA_VERSION = len(MIGRATIONS)
