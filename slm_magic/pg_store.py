"""PostgreSQL storage for a team: the statements of `store.Store`, on a server.

`Memory("postgresql://...")` keeps its memories here instead of a DuckDB file. Each kernel
keeps its in-process index and catches up with the others' writes through the change stamps,
as on a file; what differs is below this module:

- One psycopg 3 connection per Store, held for the Store's life (connecting costs about 3 ms,
  a statement about 20 µs). Statements run in autocommit; the writes that take several
  statements run in one transaction.
- Change stamps come from `take_stamps(k)` (pg_schema.py): they commit in stamp order, so a
  reader that has read the clock at n has every change up to n, and a catch-up reads the
  clock, the tombstones and the rows in one snapshot.
- You are who you connect as: `user_id` is the login role, and row-level security gives each
  person their own rows and the shared ones.
- A lost connection (the server restarted) is reconnected, with backoff, for up to
  `RECONNECT_S`; the statement or the whole write transaction then runs again. Every write
  is keyed before its first try (fact_id, session_id, signal_id), so a write whose commit the
  server made but never confirmed is found, not written twice. One line says it happened.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from . import pg_schema
from .errors import StoreError
from .session_store import SessionStore
from .signal_store import SignalStore
from .store import INSERT_COLUMNS, SCHEMA_VERSION, Store

_locks: dict[str, threading.RLock] = {}
_locks_lock = threading.Lock()


class _Unreachable(StoreError):
    """The server does not take a connection (yet): retried while it may be restarting."""


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


class PgConnection:
    """The part of DuckDB's connection API the repositories use (`execute(sql, params)` with
    `?` parameters, `sql(...).to_arrow_table()`), on the store's psycopg connection."""

    def __init__(self, store: "PgStore"):
        self.store = store

    def execute(self, sql: str, params: Sequence | None = None) -> _Result:
        return self.store.run(lambda con: self.store.fetch(con, sql, params))

    def sql(self, sql: str, params: Sequence | None = None) -> _Result:
        return self.execute(sql, params)


class PgStore(Store):
    """A team's memory on PostgreSQL (`postgresql://user@host/db`), with the Store's API."""

    EPOCH = "extract(epoch FROM updated_at)::float8"
    STAMPS_IN_COMMIT_ORDER = True
    RECONNECT_S = 60.0

    def __init__(self, url: str, *, upgrade_to: int | None = None):  # noqa: ARG002 - migrations: pg-setup
        self.sessions = SessionStore(self)
        self.signals = SignalStore(self)
        self.url = url
        self.path = shown_url(url)
        self.known_stamp: tuple = ()
        self._cache = {}
        self.notices: list[str] = []
        with _locks_lock:
            self.lock = _locks.setdefault(url, threading.RLock())
        self._pg = None
        self._adapter = PgConnection(self)
        self._in_transaction = False
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
            con = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as exc:
            raise _Unreachable(f"cannot connect to {self.path}: {_first_line(exc)}") from None
        except psycopg.ProgrammingError as exc:  # a malformed URL
            raise StoreError(f"cannot connect to {self.path}: {_first_line(exc)}") from None
        con.execute(f"SET search_path = {pg_schema.SCHEMA}")
        return con

    def _check_schema(self) -> None:
        rows = self.fetch(self._pg, "SELECT to_regclass('schema_version') IS NOT NULL", ()).rows
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
            raise StoreError(f"PostgreSQL refused, as {getattr(self, 'login_user', '?')}: "
                             f"{_first_line(exc)}") from None
        except (psycopg.OperationalError, psycopg.InterfaceError):
            raise  # (run() reconnects)
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error on {self.path}: {_first_line(exc)}") from exc

    def run(self, work, *, transaction: bool = False):
        """`work(connection)`, again on a new connection if the server went away (for up to
        RECONNECT_S); with `transaction`, all of it in one transaction."""
        psycopg = _psycopg()
        with self.lock:
            if self._in_transaction:  # (a statement inside a running transaction: no retry of its own)
                return work(self._pg)
            started = None
            delay = 0.05
            while True:
                try:
                    if self._pg is None or self._pg.closed:
                        self._pg = self._open()
                    if not transaction:
                        out = work(self._pg)
                    else:
                        self._in_transaction = True
                        try:
                            with self._pg.transaction():
                                out = work(self._pg)
                        finally:
                            self._in_transaction = False
                    if started is not None:
                        self.notices.append(f"the memory server {self.path} went away; reconnected after "
                                            f"{time.monotonic() - started:.1f} s, nothing lost")
                    return out
                except (psycopg.OperationalError, psycopg.InterfaceError, _Unreachable) as exc:
                    now = time.monotonic()
                    started = now if started is None else started
                    if now - started > self.RECONNECT_S:
                        raise StoreError(f"the memory server {self.path} did not answer for {self.RECONNECT_S:.0f} s "
                                         f"({_first_line(exc)}): this was not saved") from None
                    with contextlib.suppress(Exception):
                        if self._pg is not None:
                            self._pg.close()
                    self._pg = None
                    time.sleep(delay)  # backoff while the server restarts
                    delay = min(delay * 2, 1.0)

    def take_notices(self) -> list[str]:
        out, self.notices = self.notices, []
        return out

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

    @property
    def saves_index(self) -> bool:  # (each kernel builds its index from the server)
        return False

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

    def last_change(self) -> int:
        return int(self.con.execute("SELECT n FROM change_clock").fetchall()[0][0])

    def max_change(self) -> int:
        return self.last_change()

    def consistent(self, work):
        """`work()` reading one snapshot (the clock, tombstones and rows agree), run again
        whole if the connection is lost midway (it only reads)."""
        def in_snapshot(con):
            con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return work()
        return self.run(in_snapshot, transaction=True)

    def _cached(self, key: tuple, compute):
        # Writes to sessions and signals do not move the clock: a cached read could miss
        # another kernel's; these reads are small, so they are read each time.
        return compute()

    def _meta(self, sql: str, params: list, invalidate: bool = True) -> list:  # noqa: ARG002
        return self.con.execute(sql, params).fetchall()

    @contextlib.contextmanager
    def bulk(self):
        yield

    # --- writes ---------------------------------------------------------------------------------
    def insert_one(self, row: dict) -> tuple[int, int]:
        cols = ", ".join(INSERT_COLUMNS)
        values = [row[c] for c in INSERT_COLUMNS]

        def work(con):
            got = self.fetch(con, f"INSERT INTO memories ({cols}, changed) VALUES "
                                  f"({', '.join('?' * len(INSERT_COLUMNS))}, take_stamps(1)) "
                                  "ON CONFLICT (fact_id) DO NOTHING RETURNING doc_id, changed", values).rows
            if not got:  # a retry of a write the server had committed
                got = self.fetch(con, "SELECT doc_id, changed FROM memories WHERE fact_id = ?", [row["fact_id"]]).rows
            return got[0]
        return self.run(work, transaction=True)

    def insert_many(self, columns: dict[str, Sequence]) -> dict[str, np.ndarray]:
        """COPY into a temporary table, then one INSERT that takes the stamps (the clock is held
        only for that statement and the commit)."""
        n = len(columns["fact_id"])
        cols = ", ".join(INSERT_COLUMNS)
        rows = list(zip(*[_pylist(columns[c]) for c in INSERT_COLUMNS], range(n)))

        def work(con):
            con.execute(f"CREATE TEMP TABLE IF NOT EXISTS _new_memories ON COMMIT DELETE ROWS AS "
                        f"SELECT {cols}, 0::bigint AS ord FROM memories WITH NO DATA")
            with con.cursor().copy(f"COPY _new_memories ({cols}, ord) FROM STDIN") as copy:
                for r in rows:
                    copy.write_row(r)
            got = self.fetch(con, f"INSERT INTO memories ({cols}, doc_id, changed) "
                                  f"SELECT {cols}, nextval('doc_seq'), s.top - ? + ord + 1 FROM "
                                  f"(SELECT * FROM _new_memories ORDER BY ord) AS m, (SELECT take_stamps(?) AS top) AS s "
                                  "ON CONFLICT (fact_id) DO NOTHING RETURNING fact_id, doc_id, changed", [n, n]).rows
            if len(got) < n:  # a retry: some (or all) were committed before the connection broke
                have = {r[0] for r in got}
                missing = [f for f in columns["fact_id"] if f not in have]
                got += self.fetch(con, "SELECT fact_id, doc_id, changed FROM memories WHERE fact_id = ANY(?)",
                                  [missing]).rows
            return got
        got = self.run(work, transaction=True)
        return {"fact_id": np.array([r[0] for r in got], dtype=object),
                "doc_id": np.array([r[1] for r in got], dtype=np.int64),
                "changed": np.array([r[2] for r in got], dtype=np.int64)}

    def revise(self, fact_id: str, values: dict) -> tuple[int, int, list[int], int]:
        before = self.con.execute("SELECT doc_id, terms, user_id, shared FROM memories WHERE fact_id = ?",
                                  [fact_id]).fetchall()[0]
        old_doc, old_terms, user, shared = before
        sets = ", ".join(f"{k} = ?" for k in values)

        def work(con):
            top = self.fetch(con, "SELECT take_stamps(2)", ()).rows[0][0]
            got = self.fetch(con, f"UPDATE memories SET seq = coalesce(seq, doc_id), doc_id = nextval('doc_seq'), "
                                  f"revision_count = revision_count + 1, changed = ?, {sets} "
                                  "WHERE fact_id = ? AND doc_id = ? RETURNING doc_id, changed",
                             [top - 1, *values.values(), fact_id, old_doc]).rows
            if not got:  # done before the connection broke (or revised elsewhere meanwhile)
                return self.fetch(con, "SELECT doc_id, changed FROM memories WHERE fact_id = ?", [fact_id]).rows[0]
            self.fetch(con, "INSERT INTO tombstones (doc_id, new_doc_id, terms, user_id, shared, changed) "
                            "VALUES (?, ?, ?, ?, ?, ?)", [old_doc, got[0][0], old_terms, user, shared, top])
            return got[0]
        new_doc, changed = self.run(work, transaction=True)
        return int(old_doc), int(new_doc), list(old_terms), int(changed)

    def set_core(self, fact_id: str, core: bool) -> bool:
        return bool(self.con.execute(
            "UPDATE memories SET is_core = ?, changed = take_stamps(1) WHERE fact_id = ? RETURNING fact_id",
            [core, fact_id]).fetchall())

    def delete(self, fact_id: str) -> bool:
        def work(con):
            rows = self.fetch(con, "SELECT doc_id, terms, user_id, shared FROM memories WHERE fact_id = ?",
                              [fact_id]).rows
            if rows:
                top = self.fetch(con, "SELECT take_stamps(1)", ()).rows[0][0]
                self.fetch(con, "DELETE FROM memories WHERE fact_id = ?", [fact_id])
                self.fetch(con, "INSERT INTO tombstones (doc_id, new_doc_id, terms, user_id, shared, changed) "
                                "VALUES (?, NULL, ?, ?, ?, ?)", [*rows[0], top])
            return bool(rows)
        return self.run(work, transaction=True)

    # --- exchange: files are read and written by the local DuckDB ----------------------------------
    def write_export(self, path, fmt: str, user_id: str, columns: Sequence[str]) -> None:
        from . import attachments

        table = self.con.execute(f"SELECT {', '.join(columns)} FROM memories WHERE user_id = ? "
                                 "ORDER BY coalesce(seq, doc_id)", [user_id]).to_arrow_table()
        attachments.write_table(table, path, fmt)

    def read_export(self, path, fmt: str, types):
        from . import attachments

        return attachments.read_table(path, fmt, types)

    def existing_fact_ids(self, fact_ids: list[str]) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT fact_id FROM memories WHERE fact_id = ANY(?)",
                                               [fact_ids]).fetchall()}


def _pylist(values) -> list:
    """A column (list, numpy or Arrow array) as Python values, for COPY."""
    if hasattr(values, "to_pylist"):
        return values.to_pylist()
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def setup(url: str, members: Sequence[str] = ()) -> tuple[int, int]:
    """Create or migrate the schema, the roles, grants and policies (as an administrator);
    `members` become login roles of the team. Returns (version before, version after)."""
    psycopg = _psycopg()
    try:
        con = psycopg.connect(url, connect_timeout=10)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to {shown_url(url)}: {_first_line(exc)}") from None
    try:
        with con:  # one transaction: all of it or nothing
            roles = {r[0] for r in con.execute("SELECT rolname FROM pg_roles").fetchall()}
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


