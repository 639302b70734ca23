"""PostgreSQL storage for a team: the statements of `store.Store`, on a server.

`Memory("postgresql://...")` keeps its memories here instead of a DuckDB file. Each kernel
keeps its in-process index and catches up with the others' writes through the change stamps,
as on a file; what differs is below this module:

- Two drivers, each where it measured best (benchmarks/RESULTS.md, section 12): one psycopg 3
  connection per Store, held for its life, for every ordinary statement (connecting costs
  about 3 ms, a statement about 20 µs; ADBC's cost 33 ms and 50-130 µs); ADBC's PostgreSQL
  driver, on a connection of its own for the length of one job, to move whole columns as
  Arrow: a bulk write and the whole load of a new kernel's index (psycopg turns every array
  into Python objects, which made both several times slower).
- Change stamps come from `take_stamps(k)` (pg_schema.py): they commit in stamp order, so a
  reader that has read the clock at n has every change up to n, and a catch-up reads the
  clock, the tombstones and the rows in one snapshot.
- You are who you connect as: `user_id` is the login role, and row-level security gives each
  person their own rows and the shared ones.
- A lost connection (the server restarted) is reconnected, with backoff, for up to
  `RECONNECT_S`; the statement or the whole write transaction then runs again. Memories,
  sessions, signals, models, outcomes and each showing of a recall are keyed before the first
  try, so a write whose commit the server made but never confirmed is found, not written
  twice. One line says it happened.
- A member's transaction left idle is ended by the server (pg-setup sets
  `idle_in_transaction_session_timeout` for every member); a kernel's own snapshot reads,
  which may pause between statements while it builds its index, lift it for themselves.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from . import pg_schema
from ..errors import StoreError
from .session_store import SessionStore
from .store import Store, export_select
from .columns import FILL_VECTORS, insert_columns, vector_columns
from .dialect import POSTGRES

#: The schema version this slm_magic gives a team's database (its own numbers from 7 on).
SCHEMA_VERSION = pg_schema.VERSION

_locks: dict[str, threading.RLock] = {}
_locks_lock = threading.Lock()


class _Unreachable(StoreError):
    """The connection or the server went away, or does not take a connection (yet): worth
    another try on a new connection while it may be restarting."""

    def __init__(self, where: str, reason: str):
        super().__init__(f"cannot reach {where}: {reason}")
        self.reason = reason


def shown_url(url: str) -> str:
    """The URL without its password (it is shown in status lines and messages)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=netloc[0].split(":", 1)[0] + ":***@" + netloc[1]))


def _psycopg():
    try:
        import psycopg
    except ImportError:  # an optional dependency: a single user on a file never needs it
        raise StoreError("PostgreSQL needs psycopg: pip install 'slm-magic[postgres]'") from None
    return psycopg


# PostgreSQL type OIDs of the columns the engine reads, as Arrow types.
def _arrow_types():
    import pyarrow as pa

    return {16: pa.bool_(), 20: pa.int64(), 21: pa.int16(), 23: pa.int32(), 25: pa.string(),
            1043: pa.string(), 701: pa.float64(), 700: pa.float32(), 1114: pa.timestamp("us"),
            1016: pa.list_(pa.int64()), 1007: pa.list_(pa.int32()), 1009: pa.list_(pa.string()),
            1015: pa.list_(pa.string()), 1700: pa.float64()}


_NUMPY = {16: np.bool_, 20: np.int64, 21: np.int64, 23: np.int64, 701: np.float64, 1700: np.float64}


class _Result:
    """A statement's whole answer, fetched before the connection is let go (a retry never
    hands back half of one), readable as DuckDB's results are."""

    def __init__(self, description, rows: list[tuple]):
        self.description = description
        self.rows = rows

    def fetchall(self) -> list[tuple]:
        return self.rows

    def _columns(self):
        cols = list(zip(*self.rows)) if self.rows else [()] * len(self.description)
        return zip(self.description, cols)

    def fetchnumpy(self) -> dict[str, np.ndarray]:
        return {d.name: np.array(c, dtype=_NUMPY.get(d.type_code, object)) for d, c in self._columns()}

    def to_arrow_table(self):
        import pyarrow as pa

        types = _arrow_types()
        return pa.table({d.name: pa.array(list(c), type=types.get(d.type_code)) for d, c in self._columns()})


class _ArrowResult:
    """An ADBC answer: Arrow columns, read as the other results are."""

    def __init__(self, table):
        self.table = table

    def fetchall(self) -> list[tuple]:
        cols = [c.to_pylist() for c in self.table.columns]
        return list(zip(*cols)) if cols else []

    def fetchnumpy(self) -> dict[str, np.ndarray]:
        return {name: self.table.column(name).to_numpy(zero_copy_only=False) for name in self.table.column_names}

    def to_arrow_table(self):
        return self.table


def _insert_types():
    import pyarrow as pa

    return {"tags": pa.list_(pa.string()), "is_core": pa.bool_(), "shared": pa.bool_(), "cell": pa.int32(),
            "created_at": pa.timestamp("us"), "updated_at": pa.timestamp("us"), "revision_count": pa.int32(),
            "doc_len": pa.int32(), "terms": pa.list_(pa.int64()), "tfs": pa.list_(pa.int32()),
            "vec": pa.list_(pa.float32())}


def _numbered(sql: str) -> str:
    """`?` parameters as ADBC's `$1`, `$2`, ..."""
    parts = sql.split("?")
    return parts[0] + "".join(f"${i}{p}" for i, p in enumerate(parts[1:], 1))


class PgSessionStore(SessionStore):
    """The sessions repository on a server: as on a file, but each showing of a recall gets a
    key before the first try, so the same batch sent again (after a lost connection whose
    commit the server made) is counted once."""

    def record_recalls(self, events: list[tuple]) -> None:
        """(session_id, fact_id, doc_id, query, rank, shown_at, project filter) rows, in one
        statement; each with a key of its own (a batch key and its place in the batch)."""
        batch = secrets.token_hex(8)
        keys = [f"{batch}-{i}" for i in range(len(events))]
        cols = [list(c) for c in zip(*events)]
        self.db.write_meta("INSERT INTO recall_events (showing_id, session_id, fact_id, doc_id, query, rank, created_at, "
                      "project, user_id) SELECT e.*, (SELECT user_id FROM sessions s WHERE s.session_id = e.sid) "
                      "FROM (SELECT unnest(?::text[]), unnest(?::text[]) AS sid, unnest(?::text[]), "
                      "unnest(?::bigint[]), unnest(?::text[]), unnest(?::integer[]), unnest(?::timestamp[]), "
                      "unnest(?::text[])) AS e ON CONFLICT (showing_id) DO NOTHING", [keys, *cols])


class PgConnection:
    """The part of DuckDB's connection API the repositories use (`execute(sql, params)` with
    `?` parameters, `sql(...).to_arrow_table()`), on the store's psycopg connection."""

    def __init__(self, store: "PgStore"):
        self.store = store

    def execute(self, sql: str, params: Sequence | None = None) -> _Result:
        if self.store.in_bulk:  # inside a bulk job: its statements go through ADBC
            return self.store.fetch_arrow(sql, params)
        return self.store.run(lambda con: self.store.fetch(con, sql, params))

    def sql(self, sql: str, params: Sequence | None = None) -> _Result:
        return self.execute(sql, params)


class PgStore(Store):
    """A team's memory on PostgreSQL (`postgresql://user@host/db`), with the Store's API."""

    dialect = POSTGRES
    RECONNECT_S = 60.0
    #: A snapshot read locks no row (it stalls no writer), and a kernel may pause between its
    #: statements while it builds its index from them: the members' idle limit is not for it.
    NO_IDLE_LIMIT = "SET LOCAL idle_in_transaction_session_timeout = 0"

    def __init__(self, url: str, *, upgrade_to: int | None = None):  # noqa: ARG002 - migrations: pg-setup
        self._begin(shown_url(url), PgSessionStore(self))
        self.url = url
        with _locks_lock:
            self.lock = _locks.setdefault(url, threading.RLock())
        self._pg = None
        self._adapter = PgConnection(self)
        self._in_transaction = False
        self._arrow = None  # the ADBC cursor of a bulk job while one runs
        self._down_since: float | None = None  # when the server went away, if a call gave up on it
        with self.lock:
            self._pg = self._open()
            self._check_schema()
            self.login_user, self.sees_everything = self.fetch(
                self._pg, "SELECT current_user, rolsuper OR rolbypassrls FROM pg_roles "
                          "WHERE rolname = current_user", ()).rows[0]

    # --- the connection -----------------------------------------------------------------------
    def _open(self):
        psycopg = _psycopg()
        try:
            # (never prepared: a generic plan of "changed > $1" guesses a third of the table and
            # scans it; each catch-up is planned for its own stamp instead)
            con = psycopg.connect(self.url, autocommit=True, connect_timeout=10, prepare_threshold=None)
        except psycopg.OperationalError as exc:
            raise _Unreachable(self.path, _first_line(exc)) from None
        except psycopg.ProgrammingError as exc:  # a malformed URL
            raise StoreError(f"cannot connect to {self.path}: {_first_line(exc)}") from None
        con.execute(f"SET search_path = {pg_schema.SCHEMA}")
        con.execute(f"SET lock_timeout = '{self.LOCK_WAIT_S:.0f}s'")  # (a transaction left open elsewhere)
        return con

    def _check_schema(self) -> None:
        rows = self.fetch(self._pg, f"SELECT to_regclass('schema_version') IS NOT NULL, EXISTS (SELECT FROM "
                                    f"pg_namespace WHERE nspname = '{pg_schema.SCHEMA}')", ()).rows
        if rows[0][1] and not rows[0][0]:  # (the schema is there, but this role may not use it)
            raise StoreError(f"{self.path}: this role is not a member of the team: an administrator adds it with "
                             "`slm-magic pg-setup URL --member ROLE`")
        if not rows[0][0]:
            raise StoreError(f"{self.path} has no slm_magic schema: an administrator creates it with "
                             "`slm-magic pg-setup URL --member ROLE ...` (README: a team on PostgreSQL)")
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema version {version}; this slm_magic knows up to "
                             f"{SCHEMA_VERSION}. Upgrade slm_magic to use it.")
        if version < SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema version {version}; this slm_magic needs {SCHEMA_VERSION}: "
                             "ask your administrator to run `slm-magic pg-setup` again")

    def fetch(self, con, sql: str, params: Sequence | None) -> _Result:
        """Run one statement on `con` and read its whole answer. The engine's SQL uses `?`."""
        psycopg = _psycopg()
        text = sql.replace("%", "%%").replace("?", "%s")
        try:
            cur = con.execute(text, list(params) if params is not None else None, binary=True)
            return _Result(cur.description, cur.fetchall() if cur.description else [])
        except psycopg.errors.InsufficientPrivilege as exc:
            me = getattr(self, "login_user", "?")
            # (a row another user's: said as what it means, the way the facade says it when opened)
            why = (f"{me} writes only {me}'s own memories and sessions (a user_id other than {me!r}? connect as "
                   "that role instead)" if "row-level security" in str(exc) else _first_line(exc))
            raise StoreError(f"PostgreSQL refused, as {me}: {why}") from None
        except psycopg.Error as exc:
            raise self._failure(exc, isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))) from None

    def run(self, work, *, transaction: bool = False):
        """`work(connection)`, again on a new connection if the server went away (for up to
        RECONNECT_S); with `transaction`, all of it in one transaction."""
        psycopg = _psycopg()
        with self.lock:
            if self._in_transaction:  # (a statement inside a running transaction: no retry of its own)
                return work(self._pg)

            def attempt():
                try:
                    if self._pg is None or self._pg.closed:
                        self._pg = self._open()
                    if not transaction:
                        return work(self._pg)
                    self._in_transaction = True
                    try:
                        with self._pg.transaction():
                            return work(self._pg)
                    finally:
                        self._in_transaction = False
                except psycopg.Error as exc:  # (ending a transaction on a dead connection)
                    raise self._failure(exc, isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))) \
                        from None
            return self._retrying(attempt)

    def _retrying(self, attempt):
        """The one retry of this store: `attempt()` again after a lost connection, with backoff,
        for up to RECONNECT_S; then one line for the user that it happened (or one error that
        says nothing was done)."""
        started, delay = None, 0.05
        while True:
            try:
                out = attempt()
            except _Unreachable as exc:
                now = time.monotonic()
                if self._down_since is not None:  # (known down since a call waited its while: one try each)
                    raise StoreError(f"the memory server {self.path} is still not answering, "
                                     f"{now - self._down_since:.0f} s after it went away ({exc.reason}); "
                                     "this was not done, nothing of it was saved") from None
                started = now if started is None else started
                if now - started > self.RECONNECT_S:
                    if self._down_since is None:
                        self._down_since = started
                    raise StoreError(f"the memory server {self.path} did not answer for {self.RECONNECT_S:.0f} s "
                                     f"({exc.reason}); this was not done, nothing of it was saved") from None
                with contextlib.suppress(Exception):
                    if self._pg is not None:
                        self._pg.close()
                self._pg = None
                time.sleep(delay)  # backoff while the server restarts
                delay = min(delay * 2, 1.0)
                continue
            if started is not None or self._down_since is not None:
                down = self._down_since if self._down_since is not None else started
                self.notices.append(f"the memory server {self.path} went away; reconnected after "
                                    f"{time.monotonic() - down:.1f} s" + (", nothing lost" if self._down_since is None else ""))
                self._down_since = None
            return out

    def _failure(self, exc, stateless_is_lost: bool) -> StoreError:
        """A driver's error as the engine's, for either driver: a lost connection or a server
        going down (SQLSTATE class 08, 57P01-57P03, or no state where the driver says it lost
        the connection) is worth a retry; a lock wait or a statement timeout is an answer."""
        state = getattr(exc, "sqlstate", None) or ""
        if state == "55P03" or "lock timeout" in str(exc):
            return StoreError(f"waited {self.LOCK_WAIT_S:.0f} s for another transaction on {self.path} "
                              "(a session left one open?); nothing was changed")
        if state.startswith("08") or state in ("57P01", "57P02", "57P03") or (not state and stateless_is_lost):
            return _Unreachable(self.path, _first_line(exc))
        return StoreError(f"PostgreSQL error on {self.path}: {_first_line(exc)}")

    def connect(self) -> None:  # the connection is held for the Store's life
        pass

    def disconnect(self) -> None:
        pass

    @property
    def connected(self) -> bool:
        return True

    @property
    def con(self) -> PgConnection:
        return self._adapter

    @functools.cached_property
    def index_stem(self) -> str:
        """The saved index of this role's view of the database lives in the user's own cache
        ($XDG_CACHE_HOME or ~/.cache, slm_magic/, private): it holds what this role may read."""
        import hashlib
        import os
        from pathlib import Path

        home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "slm_magic"
        home.mkdir(parents=True, mode=0o700, exist_ok=True)
        key = f"{self.path}\n{self.login_user}\n{self.sees_everything}"  # (a URL may leave the role to PGUSER)
        return str(home / ("pg-" + hashlib.blake2b(key.encode(), digest_size=10).hexdigest()))

    def index_mode(self) -> int:
        return 0o600

    def close(self) -> None:
        with self.lock:
            if self._pg is not None:
                with contextlib.suppress(Exception):
                    self._pg.close()
                self._pg = None

    # --- schema and change detection ------------------------------------------------------------
    def identity(self) -> str:
        rows = self.con.execute("SELECT applied_at FROM schema_version ORDER BY version LIMIT 1").fetchall()
        return rows[0][0].isoformat() if rows else ""

    def file_stamp(self) -> tuple:
        """The clock: every committed change to memories moves it."""
        return (self.last_change(),)

    def caught_up(self, seen: int) -> None:
        """The replica has every change up to `seen`: a clock past it means something to take in
        (not the clock read now: a write committed since would look taken in)."""
        self.known_stamp = (seen,)

    def last_change(self) -> int:
        return int(self.con.execute("SELECT n FROM change_clock").fetchall()[0][0])

    def max_change(self) -> int:
        return self.last_change()

    def consistent(self, work, *, bulk: bool = False):
        """`work()` reading one snapshot (the clock, tombstones and rows agree), run again
        whole if the connection is lost midway (it only reads). `bulk`: a whole load, through
        ADBC."""
        if bulk:
            def in_arrow_snapshot():
                with self.arrow_job(snapshot=True):
                    return work()
            with self.lock:
                return self._retrying(in_arrow_snapshot)

        def in_snapshot(con):
            con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            con.execute(self.NO_IDLE_LIMIT)
            return work()
        return self.run(in_snapshot, transaction=True)

    @contextlib.contextmanager
    def arrow_job(self, *, snapshot: bool = False):
        """An ADBC connection for one job, in one transaction (REPEATABLE READ with `snapshot`):
        committed at the end, rolled back on an error."""
        try:
            import adbc_driver_postgresql.dbapi as adbc
        except ImportError:
            raise StoreError("PostgreSQL needs ADBC's driver: pip install 'slm-magic[postgres]'") from None
        try:
            con = adbc.connect(self.url)
        except adbc.Error as exc:
            raise _Unreachable(self.path, _first_line(exc)) from None
        try:
            cur = con.cursor()
            cur.execute(f"SET search_path = {pg_schema.SCHEMA}")
            cur.execute(f"SET lock_timeout = '{self.LOCK_WAIT_S:.0f}s'")
            if snapshot:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cur.execute(self.NO_IDLE_LIMIT)
            self._arrow = cur
            try:
                yield cur
                con.commit()
            except adbc.Error as exc:
                raise self._failure(exc, isinstance(exc, adbc.OperationalError)) from None
            finally:
                self._arrow = None
                cur.close()
        finally:
            with contextlib.suppress(Exception):
                con.close()

    @property
    def in_bulk(self) -> bool:
        """Whether a bulk job's ADBC cursor is open (its statements go through it)."""
        return self._arrow is not None

    def fetch_arrow(self, sql: str, params: Sequence | None) -> _ArrowResult:
        import pyarrow as pa

        cur = self._arrow
        cur.execute(_numbered(sql), list(params) if params else None)
        return _ArrowResult(cur.fetch_arrow_table() if cur.description is not None else pa.table({}))

    def cached_read(self, key: tuple, compute):
        # Writes to sessions and signals do not move the clock: a cached read could miss
        # another kernel's; these reads are small, so they are read each time.
        return compute()

    def write_meta(self, sql: str, params: list, invalidate: bool = True) -> list:  # noqa: ARG002
        return self.con.execute(sql, params).fetchall()

    #: A bulk write of this many memories or more refreshes the planner's statistics after it.
    ANALYZE_AFTER = 10_000

    @contextlib.contextmanager
    def bulk(self):
        """Many inserts in a row: the statistics are refreshed once at the end, if it was many."""
        before = self.last_change()
        yield
        if self.last_change() - before >= self.ANALYZE_AFTER:
            self.con.execute("SELECT analyze_memories()")

    # --- writes ---------------------------------------------------------------------------------
    def insert_one(self, row: dict) -> tuple[int, int]:
        names = insert_columns(row)
        cols = ", ".join(names)
        values = [row[c] for c in names]

        def work(con):
            got = self.fetch(con, f"INSERT INTO memories ({cols}, changed) VALUES "
                                  f"({', '.join('?' * len(names))}, take_stamps(1)) "
                                  "ON CONFLICT (fact_id) DO NOTHING RETURNING doc_id, changed", values).rows
            if not got:  # a retry of a write the server had committed
                got = self.fetch(con, "SELECT doc_id, changed FROM memories WHERE fact_id = ?", [row["fact_id"]]).rows
            return got[0]
        return self.run(work, transaction=True)

    def insert_many(self, columns: dict[str, Sequence]) -> dict[str, np.ndarray]:
        """The batch into a temporary table as Arrow (ADBC), then one INSERT that takes the
        stamps: the clock is held only for that statement and the commit. A batch cut short
        by a lost connection is written again; what had been committed is found, not doubled."""
        import pyarrow as pa

        insert_types = _insert_types()
        n = len(columns["fact_id"])
        names = insert_columns(columns)
        cols = ", ".join(names)
        batch = pa.table({**{c: pa.array(columns[c], type=insert_types.get(c, pa.string())) if not isinstance(
            columns[c], (pa.Array, pa.ChunkedArray)) else columns[c].cast(insert_types.get(c, pa.string()))
            for c in names}, "ord": np.arange(n, dtype=np.int64)})
        def attempt():
            with self.arrow_job() as cur:
                cur.adbc_ingest("_new_memories", batch, mode="replace", temporary=True)
                got = self.fetch_arrow(
                    f"INSERT INTO memories ({cols}, changed) "  # (the server numbers them, in this order)
                    f"SELECT {cols}, s.top - ?::bigint + ord + 1 FROM "
                    f"(SELECT * FROM _new_memories ORDER BY ord) AS m, (SELECT take_stamps(?::int) AS top) AS s "
                    "ON CONFLICT (fact_id) DO NOTHING RETURNING fact_id, doc_id, changed", [n, n]).table
                if got.num_rows < n:  # a retry: some were committed before the connection broke
                    got = self.fetch_arrow("SELECT fact_id, doc_id, changed FROM memories "
                                           "WHERE fact_id = ANY(?::text[])", [list(columns["fact_id"])]).table
                if got.num_rows < n:  # ids this role cannot see: someone else's (an import of their export)
                    raise StoreError(f"{n - got.num_rows} of these memories have ids that belong to someone "
                                     "else's memories here; nothing of this batch was written")
                return got
        with self.lock:
            got = self._retrying(attempt)
        return {"fact_id": got.column("fact_id").to_numpy(zero_copy_only=False),
                "doc_id": got.column("doc_id").to_numpy().astype(np.int64),
                "changed": got.column("changed").to_numpy().astype(np.int64)}

    def fill_vectors(self, doc_ids: Sequence[int], vecs: np.ndarray, model: str) -> int:
        """As on a file, through a temporary table (row-level security: only your own rows take one)."""
        import pyarrow as pa

        batch = pa.table({"doc_id": pa.array(np.asarray(doc_ids, np.int64)), **vector_columns(vecs, model)})

        def attempt() -> int:  # (again on a new connection: setting a missing vector twice is the same)
            with self.arrow_job() as cur:
                cur.adbc_ingest("_vectors_in", batch, mode="replace", temporary=True)
                return self.fetch_arrow(FILL_VECTORS.format(stamp=f", changed = {self.dialect.next_stamp}"),
                                        []).table.num_rows
        with self.lock:
            return self._retrying(attempt)

    def revise(self, fact_id: str, values: dict) -> tuple[int, int, list[int], int]:
        """New content in one transaction, the row locked first (a concurrent revise or forget
        waits, then this one sees what it left); the server writes the tombstone."""
        sets = ", ".join(f"{k} = ?" for k in values)
        first: list[int] = []  # the position the first try found

        def work(con):
            old = self.fetch(con, "SELECT doc_id, terms FROM memories WHERE fact_id = ? FOR UPDATE", [fact_id]).rows
            if not old:
                raise StoreError(f"memory {fact_id} cannot be revised: it is gone, or it is not yours")
            old_doc, old_terms = old[0]
            if not first:
                first.append(old_doc)
            elif old_doc != first[0]:  # the first try had committed before the connection broke
                return first[0], *self.fetch(con, "SELECT doc_id, changed FROM memories WHERE fact_id = ?",
                                             [fact_id]).rows[0], None
            got = self.fetch(con, f"UPDATE memories SET seq = coalesce(seq, doc_id), doc_id = -1, "
                                  f"revision_count = revision_count + 1, changed = take_stamps(1), {sets} "
                                  "WHERE fact_id = ? RETURNING doc_id, changed", [*values.values(), fact_id]).rows
            return old_doc, got[0][0], got[0][1], old_terms
        old_doc, new_doc, changed, old_terms = self.run(work, transaction=True)
        return int(old_doc), int(new_doc), list(old_terms or []), int(changed)

    def delete(self, fact_id: str) -> bool:
        """The server writes the tombstone (of the row actually deleted)."""
        return bool(self.con.execute("DELETE FROM memories WHERE fact_id = ? RETURNING doc_id", [fact_id]).fetchall())

    def forget_all(self, user_id: str, project: str | None) -> tuple[int, int]:
        """As on a file, in one transaction, but the server writes the tombstones (the trigger,
        one per row deleted: a member cannot write one). Row-level security keeps it to this
        role's own rows whatever `user_id` says. A retry after a commit the server made but
        never confirmed finds nothing left, and reports what the first try deleted."""
        where, params = "user_id = ?", [user_id]
        if project is not None:
            where += " AND project = ?"
            params.append(project)
        first: list[list[str]] = []

        def work(con) -> list[str]:
            for table in ("feedback", "recall_events", "summary_events"):
                self.fetch(con, f"DELETE FROM {table} WHERE fact_id IN (SELECT fact_id FROM memories "
                                f"WHERE {where})", params)
            kinds = [k for (k,) in self.fetch(con, f"DELETE FROM memories WHERE {where} RETURNING kind", params).rows]
            if project is None:
                self.fetch(con, "UPDATE sessions SET summary = NULL, is_auto_generated = false "
                                "WHERE user_id = ? AND summary IS NOT NULL", [user_id])
            if not first:
                first.append(kinds)
            return kinds or first[0]
        kinds = self.run(work, transaction=True)
        return kinds.count("memory"), kinds.count("summary_event")

    # --- exchange: files are read and written by the local DuckDB ----------------------------------
    def write_export(self, path, fmt: str, user_id: str, columns: Sequence[str]) -> None:
        from . import attachments

        table = self.con.execute(f"SELECT {export_select(columns)} FROM memories WHERE user_id = ? "
                                 "ORDER BY coalesce(seq, doc_id)", [user_id]).to_arrow_table()
        attachments.write_table(table, path, fmt)

    def read_export(self, path, fmt: str, types):
        from . import attachments

        return attachments.read_table(path, fmt, types)

    def existing_fact_ids(self, fact_ids: list[str]) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT fact_id FROM memories WHERE fact_id = ANY(?)",
                                               [fact_ids]).fetchall()}


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def setup(url: str, members: Sequence[str] = ()) -> tuple[int, int]:
    """Create or migrate the schema, the roles, grants and policies (as an administrator);
    `members` become login roles of the team. Returns (version before, version after)."""
    psycopg = _psycopg()
    reserved = {pg_schema.OWNER, pg_schema.TEAM, "public"} & set(members)
    if reserved:
        raise StoreError(f"{', '.join(sorted(reserved))} cannot be a member: the name is the schema's own")
    bad = [m for m in members if not isinstance(m, str) or not m.strip() or len(m.encode()) > 63]
    if bad:  # (PostgreSQL would cut a longer name to 63 bytes, or refuse an empty one in its own words)
        raise StoreError(f"{bad[0]!r} cannot be a member: a role's name is 1 to 63 bytes")
    try:
        con = psycopg.connect(url, connect_timeout=10)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to {shown_url(url)}: {_first_line(exc)}") from None
    try:
        with con:  # one transaction: all of it or nothing
            roles = {r[0] for r in con.execute("SELECT rolname FROM pg_roles").fetchall()}
            # (row-level security does not hold them: a member who is one would read everyone's memories)
            above = [r[0] for r in con.execute("SELECT rolname FROM pg_roles WHERE (rolsuper OR rolbypassrls) "
                                               "AND rolname = ANY(%s)", [list(members)]).fetchall()]
            if above:
                raise StoreError(f"{', '.join(sorted(above))} cannot be a member: a superuser, or a role that "
                                 "bypasses row-level security, would read everyone's private memories")
            has = con.execute(f"SELECT to_regclass('{pg_schema.SCHEMA}.schema_version') IS NOT NULL").fetchone()[0]
            version = con.execute(f"SELECT coalesce(max(version), 0) FROM {pg_schema.SCHEMA}.schema_version"
                                  ).fetchone()[0] if has else 0
            if version > SCHEMA_VERSION:
                raise StoreError(f"{shown_url(url)} has schema version {version}; this slm_magic knows up to "
                                 f"{SCHEMA_VERSION}: upgrade slm_magic first")
            for sql in pg_schema.setup_statements(version, SCHEMA_VERSION, list(members), roles):
                con.execute(sql)
    except psycopg.Error as exc:
        raise StoreError(f"setup of {shown_url(url)} failed, nothing was changed: {_first_line(exc)}") from None
    finally:
        con.close()
    return version, SCHEMA_VERSION


