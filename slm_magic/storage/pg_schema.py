"""The schema on PostgreSQL, and the administrator's setup of a team's memory.

Versions 1 to 6 are those of `migrations.MIGRATIONS`, in PostgreSQL's SQL: a database and a file at
those versions hold the same tables and columns. From version 7 the server's schema has versions
of its own (`VERSION`), for what only a server needs: 7 keys each showing of a recall
(`recall_events.showing_id`), so a statement run again after a lost connection (the store
retries it) counts it once; a file is written by one process that never retries a committed
statement, and needs no key. Five things exist only here:

- `change_clock`, one row taken by `take_stamps(k)`: change stamps in commit order. A
  sequence hands stamps out when a row is written, not when it commits, so a reader catching
  up by "stamp > the last I saw" would skip a slower writer's rows; the row lock of the clock
  makes writers commit in stamp order instead.
- Roles: `slm_owner` owns every object and nobody logs in as it; `slm_team` is the team; each
  person is their own login role, a member of the team.
- Row-level security, forced on every table: a person reads and writes their own rows, and
  reads the memories (and their tombstones) the others shared. Not even raw SQL as that person
  reads more.
- A time limit on an idle transaction for every member (`IDLE_IN_TRANSACTION_S`): a
  transaction left open in a psql or a notebook (holding the clock, or a memory's row) is
  ended by the server before a teammate's kernel, which waits `Store.LOCK_WAIT_S` (30 s) for a
  lock, gives up. A kernel's own long reads (a snapshot) lift it for themselves.
- Triggers that decide what others' kernels trust: a memory's index position (from the
  sequence), its stamp (one the clock handed out), and its tombstones (written by the server
  when a position stops being live). A member's own SQL cannot corrupt a teammate's index.

Members cannot change the schema: `slm-magic pg-setup` (run by an administrator, again after
an upgrade of slm_magic) creates and migrates it, grants and policies included.
"""

from __future__ import annotations

SCHEMA = "slm"
OWNER = "slm_owner"
TEAM = "slm_team"

_V1 = """
CREATE SEQUENCE doc_seq START 0 MINVALUE 0;
CREATE SEQUENCE change_seq START 1;
CREATE TABLE memories (
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
CREATE TABLE tombstones (doc_id bigint NOT NULL, new_doc_id bigint,
                         changed bigint NOT NULL DEFAULT nextval('change_seq'));
CREATE TABLE sessions (
    session_id text PRIMARY KEY, user_id text NOT NULL, project text NOT NULL, api text NOT NULL,
    started_at timestamp NOT NULL, last_activity_at timestamp NOT NULL, ended_at timestamp,
    summary text, is_auto_generated boolean NOT NULL DEFAULT false);
CREATE TABLE feedback (
    signal_id text PRIMARY KEY, session_id text, fact_id text NOT NULL, signal text NOT NULL,
    value double precision NOT NULL, query text, rank integer, created_at timestamp NOT NULL);
CREATE TABLE summary_events (
    session_id text NOT NULL, entity text NOT NULL, fact_id text NOT NULL, created_at timestamp NOT NULL);
"""

_V2 = """
ALTER TABLE tombstones ADD COLUMN terms bigint[];
ALTER TABLE feedback ADD COLUMN user_id text;
CREATE TABLE recall_events (
    session_id text NOT NULL, fact_id text NOT NULL, doc_id bigint NOT NULL, query text NOT NULL,
    rank integer NOT NULL, created_at timestamp NOT NULL);
"""

_V3 = """
CREATE TABLE models (
    model_id text PRIMARY KEY, user_id text NOT NULL, kind text NOT NULL, version integer NOT NULL,
    created_at timestamp NOT NULL, trained_on integer NOT NULL, params text NOT NULL);
ALTER TABLE feedback ADD COLUMN project text;
ALTER TABLE recall_events ADD COLUMN project text;
CREATE TABLE outcomes (
    outcome_id text PRIMARY KEY, user_id text NOT NULL, query text NOT NULL,
    evidence double precision NOT NULL, answered boolean NOT NULL, source text NOT NULL,
    created_at timestamp NOT NULL);
"""

# (a database starts at version 5, so there are no rows to re-derive here as the file's v4 does)
_V4 = """
ALTER TABLE memories ADD COLUMN cell_id text;
ALTER TABLE memories ADD COLUMN code text;
ALTER TABLE sessions ADD COLUMN origin text;
ALTER TABLE memories ADD COLUMN grams bigint[] NOT NULL DEFAULT '{}';
ALTER TABLE memories ADD COLUMN gtfs integer[] NOT NULL DEFAULT '{}';
"""

_V5 = """
ALTER TABLE memories ADD COLUMN shared boolean NOT NULL DEFAULT false;
ALTER TABLE tombstones ADD COLUMN user_id text NOT NULL DEFAULT current_user;
ALTER TABLE tombstones ADD COLUMN shared boolean NOT NULL DEFAULT false;
ALTER TABLE summary_events ADD COLUMN user_id text NOT NULL DEFAULT current_user;
ALTER TABLE recall_events ADD COLUMN user_id text NOT NULL DEFAULT current_user;
ALTER TABLE memories ALTER COLUMN user_id SET DEFAULT current_user;
ALTER TABLE sessions ALTER COLUMN user_id SET DEFAULT current_user;
ALTER TABLE feedback ALTER COLUMN user_id SET DEFAULT current_user;
ALTER TABLE models ALTER COLUMN user_id SET DEFAULT current_user;
ALTER TABLE outcomes ALTER COLUMN user_id SET DEFAULT current_user;
-- stamps come from the clock only: a statement that forgot one fails instead of taking one
-- out of commit order
ALTER TABLE memories ALTER COLUMN changed DROP DEFAULT;
ALTER TABLE tombstones ALTER COLUMN changed DROP DEFAULT;
-- an index position comes from the guard (below) only: one per memory, none for a member to take
ALTER TABLE memories ALTER COLUMN doc_id DROP DEFAULT;
CREATE TABLE change_clock (one boolean PRIMARY KEY DEFAULT true CHECK (one), n bigint NOT NULL);
INSERT INTO change_clock VALUES (true, 0);
-- a catch-up reads by stamp, a recall's rows by index position, a person's rows by user
CREATE INDEX memories_changed ON memories (changed);
CREATE UNIQUE INDEX memories_doc_id ON memories (doc_id);
CREATE INDEX memories_user ON memories (user_id);
CREATE INDEX tombstones_changed ON tombstones (changed);
"""

# As the file's v6: no 3-gram lists, each kernel works them out from the text it reads.
_V6 = """
ALTER TABLE memories DROP CONSTRAINT IF EXISTS postings_readable;
ALTER TABLE memories DROP COLUMN grams, DROP COLUMN gtfs;
"""

# The server's own from here (see above): a key per showing, given before the first try.
_V7 = """
ALTER TABLE recall_events ADD COLUMN showing_id text;
CREATE UNIQUE INDEX recall_events_showing ON recall_events (showing_id);
"""

# As the file's v8: each memory's vector for the meaning channel, and the model that made it.
_V8 = """
ALTER TABLE memories ADD COLUMN vec real[];
ALTER TABLE memories ADD COLUMN vec_model text;
"""

MIGRATIONS = [_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8]
#: The schema version of a team's database (a file's is `migrations.SCHEMA_VERSION`).
VERSION = len(MIGRATIONS)

#: Seconds a member's transaction may sit idle before the server ends its session: less than
#: the 30 s a kernel waits for a lock (`Store.LOCK_WAIT_S`), so a transaction someone left open
#: is gone before a teammate's write gives up waiting for it.
IDLE_IN_TRANSACTION_S = 20

# What guards the team's kernels, re-created on every setup (an upgrade of slm_magic may mend
# them without a new schema version): the clock's function, the triggers, the checks.
GUARDS = """
CREATE OR REPLACE FUNCTION take_stamps(k integer) RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = slm, pg_temp AS $f$
DECLARE top bigint;
BEGIN
  IF k IS NULL OR k < 1 OR k > 10000000 THEN
    RAISE EXCEPTION 'take_stamps takes 1 to 10000000 stamps, not %', k;
  END IF;
  UPDATE change_clock SET n = n + k RETURNING n INTO top;
  RETURN top;
END $f$;
-- What the server decides, whatever a member's statement says: other kernels index every row
-- they may read by its doc_id and catch up by its stamp, so a member must not choose either.
-- A new index position always comes from the sequence; a stamp is one the clock handed out;
-- a shared memory stays shared (unsharing it would leave it in the team's kernels).
CREATE OR REPLACE FUNCTION guard_memory() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = slm, pg_temp AS $f$
BEGIN
  IF TG_OP = 'INSERT' THEN
    NEW.doc_id := nextval('doc_seq');
    NEW.seq := NULL;
  ELSE
    -- new postings or new text are a new position (other kernels count a position's terms
    -- once, when it arrives, and take the same ones out when it retires; its 3-grams come
    -- from its text when it arrives)
    IF NEW.doc_id IS DISTINCT FROM OLD.doc_id OR (NEW.terms, NEW.tfs, NEW.doc_len, NEW.content, NEW.title, NEW.tags)
        IS DISTINCT FROM (OLD.terms, OLD.tfs, OLD.doc_len, OLD.content, OLD.title, OLD.tags) THEN
      NEW.doc_id := nextval('doc_seq');
    END IF;
    IF NEW.seq IS DISTINCT FROM OLD.seq AND NEW.seq IS DISTINCT FROM coalesce(OLD.seq, OLD.doc_id) THEN
      RAISE EXCEPTION 'seq keeps a memory''s first position';
    END IF;
    IF OLD.shared AND NOT NEW.shared THEN
      RAISE EXCEPTION 'a shared memory cannot be unshared: forget it, then remember it again';
    END IF;
    IF NEW.changed IS NULL OR NEW.changed <= OLD.changed THEN
      RAISE EXCEPTION 'a change needs a new stamp from take_stamps()';
    END IF;
  END IF;
  IF NEW.changed IS NULL OR NEW.changed > (SELECT n FROM change_clock) THEN
    RAISE EXCEPTION 'a change stamp comes from take_stamps()';
  END IF;
  -- a term counts once per memory in everyone's document frequencies (checked where others
  -- count it: a private memory is in its author's index only)
  IF NEW.shared AND (SELECT count(DISTINCT t) FROM unnest(NEW.terms) AS t) <> cardinality(NEW.terms) THEN
    RAISE EXCEPTION 'a memory lists each term once';
  END IF;
  RETURN NEW;
END $f$;
DROP TRIGGER IF EXISTS guard ON memories;
CREATE TRIGGER guard BEFORE INSERT OR UPDATE ON memories FOR EACH ROW EXECUTE FUNCTION guard_memory();
-- postings the other kernels can take in: each term with its count, counts positive
ALTER TABLE memories DROP CONSTRAINT IF EXISTS postings_readable;
ALTER TABLE memories ADD CONSTRAINT postings_readable CHECK (
    cardinality(terms) = cardinality(tfs) AND 0 < ALL (tfs) AND doc_len >= 0 AND revision_count >= 0
    AND kind IN ('memory', 'summary_event'));
-- Tombstones are the server's own record of positions that stopped being live: written by
-- this trigger only (members cannot insert one), so each is true of a row that was there.
CREATE OR REPLACE FUNCTION tombstone_memory() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = slm, pg_temp AS $f$
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO tombstones (doc_id, new_doc_id, terms, user_id, shared, changed)
        VALUES (OLD.doc_id, NULL, OLD.terms, OLD.user_id, OLD.shared, take_stamps(1));
    RETURN OLD;
  END IF;
  IF NEW.doc_id IS DISTINCT FROM OLD.doc_id THEN
    INSERT INTO tombstones (doc_id, new_doc_id, terms, user_id, shared, changed)
        VALUES (OLD.doc_id, NEW.doc_id, OLD.terms, OLD.user_id, OLD.shared, take_stamps(1));
  END IF;
  RETURN NEW;
END $f$;
DROP TRIGGER IF EXISTS tombstone ON memories;
CREATE TRIGGER tombstone AFTER UPDATE OR DELETE ON memories FOR EACH ROW EXECUTE FUNCTION tombstone_memory();
-- statistics right after a bulk write (only the owner may ANALYZE): without them the planner
-- takes "changed > n" for a third of the table, and every catch-up scans all of it
CREATE OR REPLACE FUNCTION analyze_memories() RETURNS void LANGUAGE sql SECURITY DEFINER
    SET search_path = slm, pg_temp AS $f$ ANALYZE memories; ANALYZE tombstones $f$;
"""

TABLES = ("memories", "tombstones", "sessions", "feedback", "summary_events", "recall_events", "models",
          "outcomes")
READ_SHARED = ("memories", "tombstones")  # a team member also reads the shared rows of these


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _idle_limit(seconds: int) -> str:
    """Every member of the team (those named now and those of earlier setups) gets the limit
    on an idle transaction, in this database only: their other databases keep their own."""
    return f"""DO $f$
DECLARE r record;
BEGIN
  FOR r IN SELECT m.rolname FROM pg_auth_members a JOIN pg_roles m ON m.oid = a.member
           JOIN pg_roles t ON t.oid = a.roleid WHERE t.rolname = '{TEAM}' LOOP
    EXECUTE format('ALTER ROLE %I IN DATABASE %I SET idle_in_transaction_session_timeout = %L',
                   r.rolname, current_database(), '{int(seconds)}s');
  END LOOP;
END $f$"""


def setup_statements(version: int, target: int, members: list[str], existing_roles: set[str]) -> list[str]:
    """The statements that take a database from `version` to `target` and (again) set the
    roles, grants and policies, for `members` too. Run by a superuser (or a role with
    CREATEROLE that may create the schema), in one transaction."""
    out = []
    for role in (OWNER, TEAM):
        if role not in existing_roles:
            out.append(f"CREATE ROLE {role} NOLOGIN")
    for m in members:
        if m not in existing_roles:
            out.append(f"CREATE ROLE {_ident(m)} LOGIN")
        out.append(f"GRANT {TEAM} TO {_ident(m)}")
    out += [f"CREATE SCHEMA IF NOT EXISTS {SCHEMA} AUTHORIZATION {OWNER}",
            f"REVOKE ALL ON SCHEMA {SCHEMA} FROM PUBLIC",
            f"GRANT USAGE ON SCHEMA {SCHEMA} TO {TEAM}",
            f"SET LOCAL search_path = {SCHEMA}",
            f"SET LOCAL ROLE {OWNER}",
            "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL, applied_at timestamp NOT NULL)"]
    for v in range(version + 1, target + 1):
        out.append(MIGRATIONS[v - 1])
        out.append(f"INSERT INTO schema_version VALUES ({v}, now() AT TIME ZONE 'UTC')")
    out.append(GUARDS)
    out.append("RESET ROLE")
    tables = ", ".join(TABLES)
    out += [f"REVOKE ALL ON ALL TABLES IN SCHEMA {SCHEMA} FROM PUBLIC",
            f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {SCHEMA} FROM PUBLIC",
            "REVOKE ALL ON FUNCTION take_stamps(integer), analyze_memories(), guard_memory(), tombstone_memory() "
            "FROM PUBLIC",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON {tables} TO {TEAM}",
            f"REVOKE INSERT, UPDATE, DELETE ON tombstones FROM {TEAM}",  # the server's own record
            f"GRANT SELECT ON schema_version, change_clock TO {TEAM}",
            f"REVOKE ALL ON SEQUENCE doc_seq, change_seq FROM {TEAM}",  # positions and stamps: the guards' to give
            f"GRANT EXECUTE ON FUNCTION take_stamps(integer), analyze_memories() TO {TEAM}"]
    out += ["DROP POLICY IF EXISTS derived ON tombstones",  # (the trigger writes them, as the owner)
            f"CREATE POLICY derived ON tombstones FOR INSERT TO {OWNER} WITH CHECK (true)"]
    out.append(_idle_limit(IDLE_IN_TRANSACTION_S))
    for t in TABLES:
        out += [f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY",
                f"ALTER TABLE {t} FORCE ROW LEVEL SECURITY",  # the owner too
                f"DROP POLICY IF EXISTS own ON {t}",
                f"CREATE POLICY own ON {t} FOR ALL TO {TEAM} USING (user_id = current_user) "
                "WITH CHECK (user_id = current_user)"]
        if t in READ_SHARED:
            out += [f"DROP POLICY IF EXISTS team_reads_shared ON {t}",
                    f"CREATE POLICY team_reads_shared ON {t} FOR SELECT TO {TEAM} USING (shared)"]
    return out
