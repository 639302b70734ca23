-- slm_magic schema v1..v4 translated to PostgreSQL (one file here; in the engine: one function per migration).
-- _v1
CREATE SEQUENCE IF NOT EXISTS doc_seq START 0 MINVALUE 0;
CREATE SEQUENCE IF NOT EXISTS change_seq START 1;
CREATE TABLE IF NOT EXISTS memories (
    fact_id text PRIMARY KEY,
    doc_id bigint NOT NULL DEFAULT nextval('doc_seq'),
    seq bigint,
    user_id text NOT NULL,
    session_id text,
    project text NOT NULL,
    type text NOT NULL,
    title text,
    topic_key text,
    content text NOT NULL,
    content_hash text NOT NULL,
    tags text[] NOT NULL,
    is_core boolean NOT NULL,
    source text,
    notebook text,
    cell integer,
    created_at timestamp NOT NULL,
    updated_at timestamp NOT NULL,
    revision_count integer NOT NULL,
    kind text NOT NULL,
    doc_len integer NOT NULL,
    terms bigint[] NOT NULL,
    tfs integer[] NOT NULL,
    changed bigint NOT NULL DEFAULT nextval('change_seq')
);
CREATE TABLE IF NOT EXISTS tombstones (
    doc_id bigint NOT NULL,
    new_doc_id bigint,
    changed bigint NOT NULL DEFAULT nextval('change_seq')
);
CREATE TABLE IF NOT EXISTS sessions (
    session_id text PRIMARY KEY, user_id text NOT NULL, project text NOT NULL, api text NOT NULL,
    started_at timestamp NOT NULL, last_activity_at timestamp NOT NULL, ended_at timestamp,
    summary text, is_auto_generated boolean NOT NULL DEFAULT false);
CREATE TABLE IF NOT EXISTS feedback (
    signal_id text PRIMARY KEY, session_id text, fact_id text NOT NULL, signal text NOT NULL,
    value double precision NOT NULL, query text, rank integer, created_at timestamp NOT NULL);
CREATE TABLE IF NOT EXISTS summary_events (
    session_id text NOT NULL, entity text NOT NULL, fact_id text NOT NULL, created_at timestamp NOT NULL);
-- _v2
ALTER TABLE tombstones ADD COLUMN IF NOT EXISTS terms bigint[];
ALTER TABLE feedback ADD COLUMN IF NOT EXISTS user_id text;
CREATE TABLE IF NOT EXISTS recall_events (
    session_id text NOT NULL, fact_id text NOT NULL, doc_id bigint NOT NULL, query text NOT NULL,
    rank integer NOT NULL, created_at timestamp NOT NULL);
-- _v3
CREATE TABLE IF NOT EXISTS models (
    model_id text PRIMARY KEY, user_id text NOT NULL, kind text NOT NULL, version integer NOT NULL,
    created_at timestamp NOT NULL, trained_on integer NOT NULL, params text NOT NULL);
ALTER TABLE feedback ADD COLUMN IF NOT EXISTS project text;
ALTER TABLE recall_events ADD COLUMN IF NOT EXISTS project text;
CREATE TABLE IF NOT EXISTS outcomes (
    outcome_id text PRIMARY KEY, user_id text NOT NULL, query text NOT NULL,
    evidence double precision NOT NULL, answered boolean NOT NULL, source text NOT NULL,
    created_at timestamp NOT NULL);
-- _v4
ALTER TABLE memories ADD COLUMN IF NOT EXISTS cell_id text;
ALTER TABLE memories ADD COLUMN IF NOT EXISTS code text;
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS origin text;
-- PostgreSQL only: the catch-up reads by stamp need indexes (DuckDB scans with zone maps)
CREATE INDEX IF NOT EXISTS memories_changed ON memories (changed);
CREATE INDEX IF NOT EXISTS memories_doc_id ON memories (doc_id);
CREATE INDEX IF NOT EXISTS tombstones_changed ON tombstones (changed);
