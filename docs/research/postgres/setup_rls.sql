-- What an admin command ("slm-magic pg-setup URL --team slm_team --member alice --member bob") would run,
-- as a superuser (or a role with CREATEROLE that owns the database). Idempotent: runs twice without error.
-- Roles: slm_owner owns the objects (NOLOGIN); slm_team is the team; each person a LOGIN role in it.
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'slm_owner') THEN CREATE ROLE slm_owner NOLOGIN; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'slm_team') THEN CREATE ROLE slm_team NOLOGIN; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'alice') THEN CREATE ROLE alice LOGIN PASSWORD 'alice-pw'; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bob') THEN CREATE ROLE bob LOGIN PASSWORD 'bob-pw'; END IF;
END $$;
GRANT slm_team TO alice, bob;          -- (re-granting a held membership is only a NOTICE)

CREATE SCHEMA IF NOT EXISTS slm AUTHORIZATION slm_owner;
REVOKE ALL ON SCHEMA slm FROM PUBLIC;
GRANT USAGE ON SCHEMA slm TO slm_team;
SET search_path = slm;
SET ROLE slm_owner;                    -- objects created below are owned by slm_owner

-- schema v1..v4 (translated) ----------------------------------------------------------------
CREATE SEQUENCE IF NOT EXISTS doc_seq START 0 MINVALUE 0;
CREATE SEQUENCE IF NOT EXISTS change_seq START 1;     -- kept for the schema; stamps come from change_clock
CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL, applied_at timestamp NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    fact_id text PRIMARY KEY, doc_id bigint NOT NULL DEFAULT nextval('doc_seq'), seq bigint,
    user_id text NOT NULL DEFAULT current_user, session_id text, project text NOT NULL, type text NOT NULL,
    title text, topic_key text, content text NOT NULL, content_hash text NOT NULL, tags text[] NOT NULL,
    is_core boolean NOT NULL, source text, notebook text, cell integer, created_at timestamp NOT NULL,
    updated_at timestamp NOT NULL, revision_count integer NOT NULL, kind text NOT NULL, doc_len integer NOT NULL,
    terms bigint[] NOT NULL, tfs integer[] NOT NULL, changed bigint NOT NULL DEFAULT nextval('change_seq'),
    cell_id text, code text);
CREATE TABLE IF NOT EXISTS tombstones (doc_id bigint NOT NULL, new_doc_id bigint,
    changed bigint NOT NULL DEFAULT nextval('change_seq'), terms bigint[]);
CREATE TABLE IF NOT EXISTS sessions (session_id text PRIMARY KEY, user_id text NOT NULL DEFAULT current_user,
    project text NOT NULL, api text NOT NULL, started_at timestamp NOT NULL, last_activity_at timestamp NOT NULL,
    ended_at timestamp, summary text, is_auto_generated boolean NOT NULL DEFAULT false, origin text);
CREATE TABLE IF NOT EXISTS feedback (signal_id text PRIMARY KEY, session_id text, fact_id text NOT NULL,
    signal text NOT NULL, value double precision NOT NULL, query text, rank integer, created_at timestamp NOT NULL,
    user_id text DEFAULT current_user, project text);
CREATE TABLE IF NOT EXISTS summary_events (session_id text NOT NULL, entity text NOT NULL, fact_id text NOT NULL,
    created_at timestamp NOT NULL);
CREATE TABLE IF NOT EXISTS recall_events (session_id text NOT NULL, fact_id text NOT NULL, doc_id bigint NOT NULL,
    query text NOT NULL, rank integer NOT NULL, created_at timestamp NOT NULL, project text);
CREATE TABLE IF NOT EXISTS models (model_id text PRIMARY KEY, user_id text NOT NULL DEFAULT current_user,
    kind text NOT NULL, version integer NOT NULL, created_at timestamp NOT NULL, trained_on integer NOT NULL,
    params text NOT NULL);
CREATE TABLE IF NOT EXISTS outcomes (outcome_id text PRIMARY KEY, user_id text NOT NULL DEFAULT current_user,
    query text NOT NULL, evidence double precision NOT NULL, answered boolean NOT NULL, source text NOT NULL,
    created_at timestamp NOT NULL);

-- proposed v5: sharing, an owner on every row, commit-ordered change stamps ------------------
ALTER TABLE memories ADD COLUMN IF NOT EXISTS shared boolean NOT NULL DEFAULT false;
ALTER TABLE tombstones ADD COLUMN IF NOT EXISTS user_id text NOT NULL DEFAULT current_user;
ALTER TABLE tombstones ADD COLUMN IF NOT EXISTS shared boolean NOT NULL DEFAULT false; -- the retired row was shared
ALTER TABLE summary_events ADD COLUMN IF NOT EXISTS user_id text NOT NULL DEFAULT current_user;
ALTER TABLE recall_events ADD COLUMN IF NOT EXISTS user_id text NOT NULL DEFAULT current_user;
CREATE TABLE IF NOT EXISTS change_clock (one boolean PRIMARY KEY DEFAULT true CHECK (one), n bigint NOT NULL);
INSERT INTO change_clock VALUES (true, 0) ON CONFLICT DO NOTHING;
-- n stamps for the calling transaction; the row lock (held to commit) makes stamps commit in order
CREATE OR REPLACE FUNCTION take_stamps(k integer) RETURNS bigint LANGUAGE sql SECURITY DEFINER
    SET search_path = slm, pg_temp AS $f$ UPDATE change_clock SET n = n + k RETURNING n $f$;
CREATE INDEX IF NOT EXISTS memories_changed ON memories (changed);
CREATE INDEX IF NOT EXISTS memories_doc_id ON memories (doc_id);
CREATE INDEX IF NOT EXISTS memories_user ON memories (user_id);
CREATE INDEX IF NOT EXISTS tombstones_changed ON tombstones (changed);
INSERT INTO schema_version SELECT v, now() FROM generate_series(1, 5) v
    WHERE NOT EXISTS (SELECT FROM schema_version WHERE version = v);
RESET ROLE;

-- grants: no DDL, no TRUNCATE, no setval (UPDATE on a sequence), stamps only through take_stamps
REVOKE ALL ON ALL TABLES IN SCHEMA slm FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA slm FROM PUBLIC;
REVOKE ALL ON FUNCTION take_stamps(integer) FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON memories, tombstones, sessions, feedback, summary_events,
    recall_events, models, outcomes TO slm_team;
GRANT SELECT ON schema_version, change_clock TO slm_team;
GRANT USAGE ON SEQUENCE doc_seq, change_seq TO slm_team;           -- nextval/currval, not setval
GRANT EXECUTE ON FUNCTION take_stamps(integer) TO slm_team;
REVOKE UPDATE, DELETE ON tombstones FROM slm_team;                  -- append-only

-- row-level security, also for the owner (FORCE); superusers and BYPASSRLS roles still bypass
DO $$ DECLARE t text; BEGIN
  FOREACH t IN ARRAY ARRAY['memories', 'tombstones', 'sessions', 'feedback', 'summary_events',
                           'recall_events', 'models', 'outcomes'] LOOP
    EXECUTE format('ALTER TABLE slm.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE slm.%I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('DROP POLICY IF EXISTS own ON slm.%I', t);
    IF t IN ('memories', 'tombstones') THEN   -- own rows, plus what the team shares (read only)
      EXECUTE format('CREATE POLICY own ON slm.%I FOR ALL TO slm_team USING (user_id = current_user) '
                     'WITH CHECK (user_id = current_user)', t);
      EXECUTE format('DROP POLICY IF EXISTS team_reads_shared ON slm.%I', t);
      EXECUTE format('CREATE POLICY team_reads_shared ON slm.%I FOR SELECT TO slm_team USING (shared)', t);
    ELSE
      EXECUTE format('CREATE POLICY own ON slm.%I FOR ALL TO slm_team USING (user_id = current_user) '
                     'WITH CHECK (user_id = current_user)', t);
    END IF;
  END LOOP;
END $$;
