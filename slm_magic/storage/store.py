"""DuckDB storage: the connection and the statements on memories (their rows, postings and
change stamps); the schema's history is `migrations.py`, the column lists `columns.py`.
Sessions and signals have repositories of their own (`session_store.py`, `signal_store.py`),
held as `store.sessions` and `store.signals`. Only the modules of this package run SQL
(`tests/test_architecture.py` checks it); the server's forms are `pg_store.py` and `pg_schema.py`.

The memory's file (or the team's database) is the source of truth. Everything held in memory
(the sparse index, the session links) is derived from it and can be rebuilt from it at any time.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb
import numpy as np

from . import attachments
from ..core.clock import utcnow
from ..errors import StoreError
from .session_store import SessionStore
from .signal_store import SignalStore
from .columns import FACT_COLUMNS, FILL_VECTORS, INDEX_COLUMNS, VECTOR_COLUMNS, insert_columns, vector_columns
from .dialect import DUCKDB, Dialect
from .migrations import MIGRATIONS, SCHEMA_VERSION, USER_TABLES


def _cosines(values: Sequence) -> np.ndarray:
    """Cosines read back from SQL: a NULL or NaN (a zero or broken vector) counts as 0."""
    return np.nan_to_num(np.array([np.nan if v is None else v for v in values], dtype=np.float64), nan=0.0,
                         posinf=0.0, neginf=0.0)


def default_path() -> Path:
    """The file used when none is given: $SLM_MAGIC_DB, else ~/.slm_magic/memory.duckdb."""
    env = os.environ.get("SLM_MAGIC_DB")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".slm_magic" / "memory.duckdb"


# What the file or the machine can throw at a reader: the engine then answers from SQL instead
# of its in-process index (any other exception is a bug, and is raised).
STORAGE_FAILURES = (duckdb.Error, OSError, MemoryError, StoreError)


#: What an export or a data file is named; never a memory file.
EXPORT_SUFFIXES = frozenset((".jsonl", ".json", ".ndjson", ".parquet", ".pq", ".csv"))



def export_select(columns: Sequence[str]) -> str:
    """An export's columns: the memory's own, and `summary_of`, the thing a summary that a
    session's close wrote stands for (its link in summary_events; NULL for the others)."""
    return (f"{', '.join(columns)}, (SELECT min(e.entity) FROM summary_events e "
            "WHERE e.fact_id = memories.fact_id) AS summary_of")

class Store:
    """One DuckDB connection, the statements on memories, and the two other repositories.

    All access goes through `lock` so that one Memory can be shared between threads
    (ipywidgets callbacks run beside the cell that made them).
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, upgrade_to: int | None = None):
        self._begin(str(default_path() if path is None else path), SessionStore(self))
        new_folder = False
        if self.path != ":memory:":
            p = Path(self.path).expanduser()
            if p.is_dir():
                raise StoreError(f"{p} is a directory, not a DuckDB memory file")
            if p.suffix.lower() in EXPORT_SUFFIXES:  # (DuckDB would open it as a table, "of something else")
                raise StoreError(f"{p} is a {p.suffix} file, not a memory file: import it into one "
                                 "(%slm_import, slm-magic import) or give the memory file")
            new_folder = not p.parent.exists()
            if new_folder:  # a new folder for memories is private to its owner
                try:
                    p.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
                    p.parent.chmod(0o700)
                except OSError as exc:
                    raise StoreError(f"cannot create the folder for {p}: {exc.strerror or exc}") from None
            # One spelling per file (relative, symlinked, ~): the attachment is keyed on it, and a
            # later `%cd` cannot send the same Memory to another file.
            self.path = os.path.realpath(p)
        # Every Store of this process on one file takes the same lock: their writes never
        # interleave, so change stamps are committed in the order they are handed out.
        self.lock = threading.RLock() if self.path == ":memory:" else attachments.lock_for(self.path)
        new_file = self.path != ":memory:" and not os.path.exists(self.path)
        self._con: duckdb.DuckDBPyConnection | None = None
        self.connect()
        if new_file and os.path.exists(self.path):
            os.chmod(self.path, 0o600)  # memories are private: only their owner reads the file
            if new_folder:  # (said once: a mistyped path would otherwise look like memories lost)
                self.notice(f"a new memory file at {self.path}, in a folder made for it")
        self._migrate(SCHEMA_VERSION if upgrade_to is None else upgrade_to)

    def _begin(self, path: str, sessions) -> None:
        """What every store starts with, on the file or on the server."""
        self.sessions = sessions            # sessions, their summary events and recall showings
        self.signals = SignalStore(self)    # feedback signals, outcomes, fitted models
        self.path = path
        # The file's fingerprint when its changes were last taken in; our own writes to session
        # tables move it along, so they do not look like another process's writes.
        self.known_stamp: tuple = ()
        # Small read results (signal counts, recent summaries) kept until the file changes.
        self._cache: dict[tuple, tuple[tuple, object]] = {}
        # Lines for the user about what the storage went through (a new file, a reconnect), said once.
        self.notices: list[str] = []

    # --- the connection ---------------------------------------------------------------------
    LOCK_WAIT_S = 30.0
    #: The pieces of SQL that differ between the file and the server.
    dialect: Dialect = DUCKDB
    #: The database role this store is connected as, when the database knows people (None: a file).
    login_user: str | None = None
    sees_everything = True

    @property
    def index_stem(self) -> str | None:
        """What the saved in-process index is named after (index_file.path_for): the memory
        file itself, so the index lies beside it; None: never saved (a memory in RAM)."""
        return None if self.path == ":memory:" else self.path

    def index_mode(self) -> int:
        """The saved index holds the memories' text: as readable as the file, never more."""
        try:
            return os.stat(self.path).st_mode & 0o660 or 0o600
        except OSError:
            return 0o600

    def consistent(self, work, *, bulk: bool = False):  # noqa: ARG002 - (a server reads a whole load apart)
        """`work()`, reading one state of the data (a DuckDB file has one writer at a time)."""
        with self.lock:
            return work()

    def notice(self, line: str) -> None:
        """A line for the user from a part above the store (said with the storage's own)."""
        self.notices.append(line)

    def take_notices(self) -> list[str]:
        """The notices not yet taken (each is said once)."""
        out, self.notices = self.notices, []
        return out

    def connect(self) -> None:
        """Open the file, waiting (with backoff) while another process holds DuckDB's write lock:
        several kernels share one file by each holding it only while it works."""
        with self.lock:
            self._connect()

    def _connect(self) -> None:
        if self._con is not None:
            return
        delay, waited = 0.005, 0.0
        while True:
            try:
                self._con = (duckdb.connect(":memory:", config=attachments.INSTANCE_CONFIG)
                             if self.path == ":memory:" else attachments.attach(self.path))
                return
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or waited >= self.LOCK_WAIT_S:
                    raise StoreError(f"cannot open {self.path}: {exc}") from exc
            except duckdb.Error as exc:
                raise StoreError(f"cannot open {self.path} as a DuckDB memory file: {exc}") from exc
            time.sleep(delay)
            waited += delay
            delay = min(delay * 2, 0.2)

    def disconnect(self) -> None:
        """Let go of the file so another process can use it (an in-memory store keeps it)."""
        with self.lock:
            if self._con is not None and self.path != ":memory:":
                con, self._con = self._con, None
                attachments.detach(self.path, con)

    @property
    def connected(self) -> bool:
        return self._con is not None

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection, reopened on use after `disconnect` (calls outside `attached` work too)."""
        if self._con is None:
            self.connect()
        return self._con

    # --- schema -----------------------------------------------------------------------------
    def _migrate(self, target_version: int) -> None:
        con = self.con
        with self.lock:
            has = con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_catalog = current_database() "
                "AND table_name = 'schema_version'"
            ).fetchall()[0][0]
            if not has:
                others = con.execute(
                    "SELECT count(*) FROM information_schema.tables WHERE table_catalog = current_database()").fetchall()[0][0]
                if others:
                    raise StoreError(f"{self.path} is a DuckDB file of something else (no schema_version table)")
                con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at TIMESTAMP NOT NULL)")
                version = 0
            else:
                version = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchall()[0][0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {version}; this slm_magic knows up to "
                    f"{SCHEMA_VERSION}. Upgrade slm_magic to open it."
                )
            for target in range(version + 1, target_version + 1):
                con.execute("BEGIN TRANSACTION")
                try:
                    MIGRATIONS[target - 1](con)
                    con.execute("INSERT INTO schema_version VALUES (?, ?)", [target, utcnow()])
                    con.execute("COMMIT")
                except Exception:
                    con.execute("ROLLBACK")
                    raise

    def adopt_unowned(self, user: str) -> None:
        """Give the rows of the empty user to `user` (the default user), in every table: rows
        written since the upgrade (`_v7`) by a kernel still running an older slm_magic, which
        knows no default user. Only such a kernel writes them: an older slm_magic refuses to
        open a file of a newer schema (it has since the first release), so it must have
        opened this one before the upgrade, and this version writes no row of "". Nothing
        asks at open: the in-process index sees their user when it takes them in (a load or a
        catch-up) and `Memory` calls this then. The memories' stamps move, so every process's
        index catches up with whose they are."""
        with self.lock:
            self._cache.clear()
            con = self.con
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(f"UPDATE memories SET user_id = ?, changed = {self.dialect.next_stamp} WHERE user_id = ''", [user])
                for table in USER_TABLES[1:]:
                    con.execute(f"UPDATE {table} SET user_id = ? WHERE user_id = ''", [user])
                con.execute("COMMIT")
            except Exception:
                con.execute("ROLLBACK")
                raise

    def last_memory(self) -> tuple[int, str] | None:
        """(doc id, fact id) of the memory at the highest index position, if any."""
        with self.lock:
            rows = self.con.execute("SELECT doc_id, fact_id FROM memories ORDER BY doc_id DESC LIMIT 1").fetchall()
        return (int(rows[0][0]), rows[0][1]) if rows else None

    def holds(self, doc_id: int, fact_id: str, after: int) -> bool:
        """Is this memory still at this index position, or did it leave it after stamp `after`?"""
        with self.lock:
            return bool(self.con.execute(
                "SELECT EXISTS(SELECT 1 FROM memories WHERE doc_id = ? AND fact_id = ?) "
                "OR EXISTS(SELECT 1 FROM tombstones WHERE doc_id = ? AND changed > ?)",
                [doc_id, fact_id, doc_id, after]).fetchall()[0][0])

    def identity(self) -> str:
        """Which memory file this is: the moment its schema was first created (a saved index
        names it, so another file's index is never taken for this one's)."""
        with self.lock:
            rows = self.con.execute("SELECT applied_at FROM schema_version ORDER BY version LIMIT 1").fetchall()
        return rows[0][0].isoformat() if rows else ""

    def schema_version(self) -> int:
        with self.lock:
            return self.con.execute("SELECT max(version) FROM schema_version").fetchall()[0][0]

    def _select(self, columns) -> str:
        return ", ".join(columns).format(epoch=self.dialect.epoch)

    # --- change detection ------------------------------------------------------------------
    def file_stamp(self) -> tuple:
        """Cheap fingerprint of the file and its WAL: if unchanged, nobody has written."""
        if self.path == ":memory:":
            return ()
        out, modes = [], []
        for p in (self.path, self.path + ".wal"):
            try:
                st = os.stat(p)
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
                modes.append(st.st_mode & 0o777)
            except FileNotFoundError:
                out.append(None)
                modes.append(None)
        if modes[1] is not None and modes[0] == 0o600 and modes[1] != 0o600:
            try:  # DuckDB makes its log with the default mode: as private as the file itself
                os.chmod(self.path + ".wal", 0o600)
            except OSError:
                pass
        return tuple(out)

    def changed_elsewhere(self) -> bool:
        """Has the file moved since its changes were last taken in (by any connection)?"""
        return self.file_stamp() != self.known_stamp

    def caught_up(self, seen: int) -> None:  # noqa: ARG002 - (a server compares its clock with `seen`)
        """Everything in the file now is taken in (the replica has reached stamp `seen`): only a
        later write moves it again."""
        self.known_stamp = self.file_stamp()

    def last_change(self) -> int:
        """The newest change stamp handed out (a catalog read, O(1)); it may belong to a write
        not committed yet, so readers advance only to the stamps they actually applied."""
        with self.lock:
            rows = self.con.execute(
                "SELECT last_value FROM duckdb_sequences() WHERE database_name = current_database() "
                "AND sequence_name = 'change_seq'").fetchall()
        return int(rows[0][0] or 0) if rows else 0

    def max_change(self) -> int:
        """The newest committed change stamp."""
        with self.lock:
            return self.con.execute(
                "SELECT greatest((SELECT coalesce(max(changed), 0) FROM memories), "
                "(SELECT coalesce(max(changed), 0) FROM tombstones))"
            ).fetchall()[0][0]

    # --- writes -----------------------------------------------------------------------------
    def insert_one(self, row: dict) -> tuple[int, int]:
        """One memory in one statement (the single-remember path); returns (doc_id, changed)."""
        cols = insert_columns(row)
        with self.lock:
            self._cache.clear()
            return self.con.execute(
                f"INSERT INTO memories ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                "RETURNING doc_id, changed",
                [row[c] for c in cols],
            ).fetchall()[0]

    @contextlib.contextmanager
    def bulk(self):
        """Many inserts in a row: DuckDB checkpoints the file once, at the end, instead of after
        every batch (a checkpoint rewrites the fact_id index whole, so a million-memory import
        slowed down batch after batch). Each batch is still committed, in the write-ahead log."""
        attachments.bulk_begin()
        try:
            yield
        finally:
            attachments.bulk_end()
            if self.connected and self._wal_bytes() > self.CHECKPOINT_WAL_BYTES:  # (a small write: as before)
                with self.lock:
                    try:
                        self.con.execute("CHECKPOINT")
                    except duckdb.Error:  # (another transaction is open: DuckDB checkpoints later)
                        pass

    #: DuckDB's own default for checkpoint_threshold: a bulk write that logged less than this
    #: leaves the checkpoint to DuckDB, as any other write does.
    CHECKPOINT_WAL_BYTES = 16 * 2**20

    def _wal_bytes(self) -> int:
        try:
            return os.path.getsize(self.path + ".wal") if self.path != ":memory:" else 0
        except OSError:
            return 0

    def insert_many(self, columns: dict[str, Sequence]) -> dict[str, np.ndarray]:
        """Many memories in one statement from an Arrow table; returns fact_id, doc_id, changed."""
        import pyarrow as pa

        cols = insert_columns(columns)
        table = pa.table({c: columns[c] for c in cols})
        with self.lock:
            self._cache.clear()
            self.con.register("_new_memories", table)
            try:
                got = self.con.execute(
                    f"INSERT INTO memories ({', '.join(cols)}) "
                    f"SELECT {', '.join(cols)} FROM _new_memories RETURNING fact_id, doc_id, changed"
                ).fetchnumpy()
            finally:
                self.con.unregister("_new_memories")
        return got

    def fill_vectors(self, doc_ids: Sequence[int], vecs: np.ndarray, model: str) -> int:
        """Vectors of stored memories that had none (the columns.FILL_VECTORS rule); how many
        rows took one. Not a change: other kernels read them when they fill their own."""
        import pyarrow as pa

        table = pa.table({"doc_id": pa.array(np.asarray(doc_ids, np.int64)), **vector_columns(vecs, model)})
        with self.lock:
            self.con.register("_vectors_in", table)
            try:
                return len(self.con.execute(FILL_VECTORS.format(stamp="")).fetchall())
            finally:
                self.con.unregister("_vectors_in")

    # --- reads ------------------------------------------------------------------------------
    def vocabulary(self) -> dict[str, np.ndarray]:
        """Every term hash with its document frequency, sorted by hash."""
        with self.lock:
            return self.con.execute(
                "SELECT term, count(*) AS df FROM (SELECT unnest(terms) AS term FROM memories) AS t "
                "GROUP BY term ORDER BY term"
            ).fetchnumpy()

    def terms_present(self, hashes: list[int]) -> set[int]:
        """Which of these term hashes some memory's postings hold (a scan: the SQL fallback's
        answer to what the in-process vocabulary knows at once)."""
        with self.lock:
            return {int(r[0]) for r in self.con.execute(
                "SELECT DISTINCT t FROM (SELECT unnest(terms) AS t FROM memories) AS s WHERE t IN (SELECT unnest(?::BIGINT[]))",
                [hashes]).fetchall()}

    def doc_bounds(self) -> tuple[int, int]:
        with self.lock:
            lo, hi = self.con.execute(
                "SELECT coalesce(min(doc_id), 0), coalesce(max(doc_id), -1) FROM memories"
            ).fetchall()[0]
        return int(lo), int(hi)

    @staticmethod
    def _where(since: int, docs: tuple[int, int] | None) -> tuple[str, list]:
        # A doc_id range lets DuckDB skip row groups by their min/max: ids grow with inserts.
        where, params = "changed > ?", [since]
        if docs is not None:
            where += " AND doc_id BETWEEN ? AND ?"
            params += list(docs)
        return where, params

    _SESSION_MEMORIES = "session_id IS NOT NULL AND kind = 'memory'"

    def session_links(self) -> dict[str, np.ndarray]:
        """Each memory of a session with the one before it (of the same author), in insertion
        order."""
        with self.lock:
            return self.con.execute(
                f"""SELECT prev_doc, doc_id, session_id FROM (
                        SELECT doc_id, session_id,
                               lag(doc_id) OVER (PARTITION BY session_id, user_id
                                                 ORDER BY coalesce(seq, doc_id)) AS prev_doc
                        FROM memories WHERE {self._SESSION_MEMORIES}) AS s
                    WHERE prev_doc IS NOT NULL"""
            ).fetchnumpy()

    def session_ends(self) -> list[tuple[str, str, int]]:
        """(session, author, last memory) of each session's chain, where the next one is linked."""
        with self.lock:
            return self.con.execute(
                f"SELECT session_id, user_id, (array_agg(doc_id ORDER BY coalesce(seq, doc_id) DESC))[1] "
                f"FROM memories WHERE {self._SESSION_MEMORIES} GROUP BY session_id, user_id"
            ).fetchall()

    def index_rows(self, since: int = 0, docs: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
        """Per-memory fields the index needs, in insertion order, for rows changed after `since`."""
        where, params = self._where(since, docs)
        with self.lock:
            return self.con.execute(
                f"SELECT {self._select(INDEX_COLUMNS)} FROM memories WHERE {where} ORDER BY seq", params
            ).fetchnumpy()

    def index_postings(self, since: int = 0, doc_ids: Sequence[int] | None = None,
                       docs: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
        """(doc_id, term, tf) of rows changed after `since`."""
        where, params = self._where(since, docs)
        if doc_ids is not None:
            where += " AND doc_id IN (SELECT unnest(?::BIGINT[]))"
            params.append(list(map(int, doc_ids)))
        with self.lock:
            return self.con.execute(
                f"SELECT doc_id::INTEGER AS doc_id, unnest(terms) AS term, unnest(tfs) AS tf "
                f"FROM memories WHERE {where}", params
            ).fetchnumpy()

    def changes(self, since: int):
        """Everything the index and the rows need about rows changed after `since`, in one
        statement (the catch-up after another process wrote): an Arrow table in insertion order."""
        cols = self._select(dict.fromkeys([*INDEX_COLUMNS, *FACT_COLUMNS, "terms", "tfs", *VECTOR_COLUMNS]))
        with self.lock:
            return self.con.sql(f"SELECT {cols} FROM memories WHERE changed > {int(since)} ORDER BY seq").to_arrow_table()

    def tombstones(self, since: int) -> list[tuple[int, int | None, list[int] | None]]:
        with self.lock:
            return self.con.execute(
                "SELECT doc_id, new_doc_id, terms, changed FROM tombstones WHERE changed > ? ORDER BY changed", [since]
            ).fetchall()

    def revise(self, fact_id: str, values: dict) -> tuple[int, int, list[int], int]:
        """New content for a memory in one transaction: a new index position, revision + 1,
        created_at kept, the old position tombstoned. Returns (old doc, new doc, old terms,
        change stamp)."""
        with self.lock:
            self._cache.clear()
            self.con.execute("BEGIN TRANSACTION")
            try:
                old_doc, old_terms, user, shared = self.con.execute(
                    "SELECT doc_id, terms, user_id, shared FROM memories WHERE fact_id = ?", [fact_id]).fetchall()[0]
                sets = ", ".join(f"{k} = ?" for k in values)
                new_doc, changed = self.con.execute(
                    f"UPDATE memories SET seq = coalesce(seq, doc_id), doc_id = nextval('doc_seq'), "
                    f"revision_count = revision_count + 1, changed = nextval('change_seq'), {sets} "
                    f"WHERE fact_id = ? RETURNING doc_id, changed", [*values.values(), fact_id]).fetchall()[0]
                self.con.execute("INSERT INTO tombstones (doc_id, new_doc_id, terms, user_id, shared) "
                                 "VALUES (?, ?, ?, ?, ?)", [old_doc, new_doc, old_terms, user, shared])
                self.con.execute("COMMIT")
            except Exception:
                self.con.execute("ROLLBACK")
                raise
        return int(old_doc), int(new_doc), list(old_terms), int(changed)

    def set_core(self, fact_id: str, core: bool) -> bool:
        with self.lock:
            self._cache.clear()
            return bool(self.con.execute(
                f"UPDATE memories SET is_core = ?, changed = {self.dialect.next_stamp} WHERE fact_id = ? RETURNING fact_id",
                [core, fact_id]).fetchall())

    def set_shared(self, fact_id: str) -> bool:
        with self.lock:
            self._cache.clear()
            return bool(self.con.execute(
                f"UPDATE memories SET shared = true, code = NULL, changed = {self.dialect.next_stamp} "
                "WHERE fact_id = ? RETURNING fact_id",
                [fact_id]).fetchall())

    def delete(self, fact_id: str) -> bool:
        """Remove a memory; its index position is tombstoned so other processes drop it too."""
        with self.lock:
            self._cache.clear()
            self.con.execute("BEGIN TRANSACTION")
            try:
                rows = self.con.execute("SELECT doc_id, terms, user_id, shared FROM memories WHERE fact_id = ?",
                                        [fact_id]).fetchall()
                if rows:
                    self.con.execute("DELETE FROM memories WHERE fact_id = ?", [fact_id])
                    self.con.execute("INSERT INTO tombstones (doc_id, new_doc_id, terms, user_id, shared) "
                                     "VALUES (?, NULL, ?, ?, ?)", list(rows[0]))
                self.con.execute("COMMIT")
            except Exception:
                self.con.execute("ROLLBACK")
                raise
        return bool(rows)

    def forget_all(self, user_id: str, project: str | None) -> tuple[int, int]:
        """Delete for good every row of a user (of one project, if given), memories and session
        summaries alike, in one transaction: their index positions tombstoned (other processes
        drop them too), the signals, showings and summary links naming them gone with them; with
        no project the user's sessions lose their summary lines as well (the sessions stay
        known, and closed). Returns (memories, session summaries) deleted."""
        where, params = "user_id = ?", [user_id]
        if project is not None:
            where += " AND project = ?"
            params.append(project)
        with self.lock:
            self._cache.clear()
            self.con.execute("BEGIN TRANSACTION")
            try:
                for table in ("feedback", "recall_events", "summary_events"):
                    self.con.execute(f"DELETE FROM {table} WHERE fact_id IN (SELECT fact_id FROM memories "
                                     f"WHERE {where})", params)
                self.con.execute("INSERT INTO tombstones (doc_id, new_doc_id, terms, user_id, shared) "
                                 f"SELECT doc_id, NULL, terms, user_id, shared FROM memories WHERE {where}", params)
                kinds = [k for (k,) in self.con.execute(f"DELETE FROM memories WHERE {where} RETURNING kind",
                                                        params).fetchall()]
                if project is None:
                    self.con.execute("UPDATE sessions SET summary = NULL, is_auto_generated = false "
                                     "WHERE user_id = ? AND summary IS NOT NULL", [user_id])
                self.con.execute("COMMIT")
            except Exception:
                self.con.execute("ROLLBACK")
                raise
        return kinds.count("memory"), kinds.count("summary_event")

    def browse_rows(self, user_id: str, project: str | None, type_: str | None, limit: int,
                    offset: int) -> tuple[list[tuple], int]:
        """One page of the memories a user may read (their own and the shared ones), newest
        (last updated) first, and how many there are in all."""
        where, params = "(user_id = ? OR shared) AND kind = 'memory'", [user_id]
        for column, value in (("project", project), ("type", type_)):
            if value is not None:
                where += f" AND {column} = ?"
                params.append(value)
        with self.lock:
            total = self.con.execute(f"SELECT count(*) FROM memories WHERE {where}", params).fetchall()[0][0]
            rows = self.con.execute(
                f"SELECT {', '.join(FACT_COLUMNS)} FROM memories WHERE {where} "
                "ORDER BY updated_at DESC, coalesce(seq, doc_id) DESC LIMIT ? OFFSET ?",
                [*params, limit, offset]).fetchall()
        return rows, int(total)

    def find_live(self, user_id: str, *, topic_key: str | None = None, content_hash: str | None = None,
                  notebook: str | None | type(...) = ...):
        """fact_id of the user's newest memory with this topic key (or this normalised content),
        written from `notebook` when one is given (None: outside a notebook)."""
        col, val = ("topic_key", topic_key) if topic_key is not None else ("content_hash", content_hash)
        where, params = ("", []) if notebook is ... else (" AND notebook IS NOT DISTINCT FROM ?", [notebook])
        with self.lock:
            rows = self.con.execute(
                f"SELECT fact_id FROM memories WHERE user_id = ? AND {col} = ? AND kind = 'memory'{where} "
                "ORDER BY updated_at DESC LIMIT 1", [user_id, val, *params]).fetchall()
        return rows[0][0] if rows else None

    def fact_rows(self, since: int = 0, docs: tuple[int, int] | None = None, vectors: bool = False):
        """The displayable fields of rows changed after `since` (and their vectors), as an
        Arrow table."""
        where, params = self._where(since, docs)
        cols = ", ".join([*FACT_COLUMNS, *(VECTOR_COLUMNS if vectors else ())])
        with self.lock:
            return self.con.sql(
                f"SELECT doc_id, {cols} FROM memories WHERE {where} ORDER BY doc_id", params=params
            ).to_arrow_table()

    def facts_by_doc(self, doc_ids: Sequence[int]) -> dict[int, tuple]:
        with self.lock:
            rows = self.con.execute(
                f"SELECT doc_id, {', '.join(FACT_COLUMNS)} FROM memories WHERE doc_id IN (SELECT unnest(?::BIGINT[]))",
                [list(map(int, doc_ids))],
            ).fetchall()
        return {r[0]: r[1:] for r in rows}

    # --- the meaning channel, when the in-process index cannot run --------------------------
    def vector_sample(self, query: np.ndarray, model: str, size: int) -> tuple[list[int], dict[int, float], int]:
        """Up to `size` memories (always the same ones for the same memories), the question's
        cosine with those of them that have a vector of `model`, and how many memories there are."""
        with self.lock:
            n = self.con.execute("SELECT count(*) FROM memories").fetchall()[0][0]
            sql = self.dialect
            rows = self.con.execute(f"SELECT doc_id, CASE WHEN {sql.has_vector} THEN {sql.dot} END FROM memories "
                                    f"ORDER BY {sql.sample_order} LIMIT ?",
                                    [model, [float(x) for x in query], size]).fetchall()
        docs = [int(d) for d, _ in rows]
        have = [(int(d), c) for d, c in rows if c is not None]
        return docs, dict(zip((d for d, _ in have), _cosines([c for _, c in have]).tolist())), int(n)

    def vector_cosines(self, query: np.ndarray, model: str, doc_ids: Sequence[int]) -> dict[int, float]:
        """The question's cosine with those of these memories that have a vector of `model`."""
        with self.lock:
            got = self.con.execute(
                f"SELECT doc_id, {self.dialect.dot} FROM memories WHERE {self.dialect.has_vector} "
                "AND doc_id IN (SELECT unnest(?::BIGINT[]))",
                [[float(x) for x in query], model, list(map(int, doc_ids))]).fetchall()
        return dict(zip((int(d) for d, _ in got), _cosines([c for _, c in got]).tolist()))

    def vector_closest(self, query: np.ndarray, model: str, cutoff: float, k: int, user_id: str,
                       project: str | None, kind: str | None, type: str | None,
                       taken: Sequence[int]) -> list[tuple[int, float, float, int]]:
        """The `k` memories closest to the question at a cosine of at least `cutoff` that this
        user may see and the filters keep, not among `taken`: (doc_id, cosine, updated_at
        epoch, revision_count), closest first (a scan of every vector: the fallback's)."""
        filters, params = f"{self.dialect.has_vector} AND (user_id = ? OR shared)", [model, user_id]
        for column, value in (("project", project), ("kind", kind), ("type", type)):
            if value is not None:
                filters += f" AND {column} = ?"
                params.append(value)
        with self.lock:
            rows = self.con.execute(
                f"SELECT doc_id, cos, updated, revision_count FROM (SELECT doc_id, {self.dialect.dot} AS cos, "
                f"{self.dialect.epoch} AS updated, revision_count FROM memories WHERE {filters}) AS s "
                "WHERE cos >= ? AND cos <= 1.000001 AND doc_id NOT IN (SELECT unnest(?::BIGINT[])) "  # (not NaN)
                "ORDER BY cos DESC, doc_id LIMIT ?",
                [[float(x) for x in query], *params, float(cutoff), list(map(int, taken)), int(k)]).fetchall()
        return [(int(d), float(c), float(u), int(r)) for d, c, u, r in rows]

    def term_postings(self, terms: Sequence[int], user_id: str, project: str | None
                      ) -> tuple[int, float, dict[int, int], list[tuple[int, int, float, int, str, str, int, float]]]:
        """The stored postings of these terms, for when the in-process index is unusable: the
        number of memories and their mean length, each term's document frequency among them, and
        (doc_id, doc_len, updated_at epoch, revision_count, kind, type, term, tf) for every
        memory the user can read holding one (the caller scores them as the index does)."""
        with self.lock:
            n, avgdl = self.con.execute(
                "SELECT count(*), coalesce(avg(doc_len), 0) FROM memories"
            ).fetchall()[0]
            df = dict(self.con.execute(
                "SELECT term, count(*) FROM (SELECT unnest(terms) AS term FROM memories "
                "WHERE terms && ?::BIGINT[]) AS s WHERE term IN (SELECT unnest(?::BIGINT[])) GROUP BY term",
                [list(terms), list(terms)],
            ).fetchall())
            if not n or not df:
                return int(n), float(avgdl), {}, []
            filters = "(user_id = ? OR shared) AND terms && ?::BIGINT[]"
            params: list = [user_id, list(terms)]
            if project is not None:
                filters += " AND project = ?"
                params.append(project)
            rows = self.con.execute(
                f"""
                SELECT doc_id, doc_len, updated, revision_count, kind, type, term, tf
                FROM (SELECT doc_id, doc_len, {self.dialect.epoch} AS updated, revision_count, kind, type,
                             unnest(terms) AS term, unnest(tfs) AS tf
                      FROM memories WHERE {filters}) AS p
                WHERE term IN (SELECT unnest(?::BIGINT[]))
                ORDER BY doc_id, term
                """,
                [*params, list(terms)],
            ).fetchall()
        return int(n), float(avgdl), {int(t): int(c) for t, c in df.items()}, rows

    # --- sessions ---------------------------------------------------------------------------
    def cached_read(self, key: tuple, compute):
        """A read reused while the file is unchanged (by this process or any other)."""
        stamp = self.file_stamp()
        hit = self._cache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = compute()
        self._cache[key] = (stamp, value)
        return value

    def write_meta(self, sql: str, params: list, invalidate: bool = True) -> list:
        """A write to a table the index does not read (sessions, feedback, events). With
        `invalidate=False` the write cannot change a cached read, which stays valid."""
        with self.lock:
            before = self.file_stamp()
            rows = self.con.execute(sql, params).fetchall()
            after = self.file_stamp()
            if before == self.known_stamp:
                self.known_stamp = after
            if invalidate:
                self._cache.clear()
            else:  # entries that were current just before our write are current after it
                self._cache = {k: (after, v) for k, (st, v) in self._cache.items() if st == before}
        return rows

    def provenance(self, fact_id: str, user_id: str):
        """(notebook, cell, cell_id, code) of one memory: read when a person asks, not held."""
        with self.lock:
            rows = self.con.execute("SELECT notebook, cell, cell_id, code FROM memories WHERE fact_id = ? AND user_id = ?",
                                    [fact_id, user_id]).fetchall()
        return rows[0] if rows else None

    def fact_ids_starting(self, user_id: str, prefix: str, limit: int) -> list[str]:
        """Up to `limit` of the fact_ids the user may read (theirs, or shared) that begin with
        `prefix`, in id order."""
        with self.lock:
            return [r[0] for r in self.con.execute(
                "SELECT fact_id FROM memories WHERE (user_id = ? OR shared) AND starts_with(fact_id, ?) "
                "ORDER BY fact_id LIMIT ?",
                [user_id, prefix, limit]).fetchall()]

    def user_rows(self, user_id: str) -> list[tuple]:
        with self.lock:
            return self.con.execute(
                f"SELECT {', '.join(FACT_COLUMNS)} FROM memories WHERE user_id = ? AND kind = 'memory'",
                [user_id]).fetchall()

    def fact(self, fact_id: str, user_id: str):
        """One memory's FACT_COLUMNS, if this user has it."""
        with self.lock:
            rows = self.con.execute(f"SELECT {', '.join(FACT_COLUMNS)} FROM memories WHERE fact_id = ? AND user_id = ?",
                                    [fact_id, user_id]).fetchall()
        return rows[0] if rows else None

    def readable_fact(self, fact_id: str, user_id: str):
        """One memory's FACT_COLUMNS if this user may read it (theirs, or shared)."""
        with self.lock:
            rows = self.con.execute(f"SELECT {', '.join(FACT_COLUMNS)} FROM memories WHERE fact_id = ? "
                                    "AND (user_id = ? OR shared)", [fact_id, user_id]).fetchall()
        return rows[0] if rows else None

    def count(self, user_id: str) -> int:
        with self.lock:
            return self.con.execute("SELECT count(*) FROM memories WHERE user_id = ?", [user_id]).fetchall()[0][0]

    def own_count(self, user_id: str, project: str | None) -> int:
        """How many memories (not session summaries) the user wrote, of one project if given:
        what `forget_all` deletes (others' shared memories are not among them)."""
        where, params = "user_id = ? AND kind = 'memory'", [user_id]
        if project is not None:
            where += " AND project = ?"
            params.append(project)
        with self.lock:
            return int(self.con.execute(f"SELECT count(*) FROM memories WHERE {where}", params).fetchall()[0][0])

    def sessions_of_project(self, user_id: str, project: str) -> list[str]:
        """The sessions in which the user wrote rows of `project` (memories, or summaries filed
        under it): those whose summaries may quote what forgetting the project deletes."""
        with self.lock:
            return [s for (s,) in self.con.execute(
                "SELECT DISTINCT session_id FROM memories WHERE user_id = ? AND project = ? "
                "AND session_id IS NOT NULL ORDER BY session_id", [user_id, project]).fetchall()]

    def write_export(self, path: Path, fmt: str, user_id: str, columns: Sequence[str]) -> None:
        """Every row of one user, in insertion order, to a JSON Lines or Parquet file (DuckDB's
        own writer), with `summary_of` (`export_select`); an unwritable path raises DuckDB's error."""
        with self.lock:
            self.con.execute(f"COPY (SELECT {export_select(columns)} FROM memories WHERE user_id = ? "
                             f"ORDER BY coalesce(seq, doc_id)) TO {attachments.path_literal(path)} "
                             f"({'FORMAT JSON' if fmt == 'json' else 'FORMAT PARQUET'})", [user_id])

    def read_export(self, path: Path, fmt: str, types: Mapping[str, str]):
        """An exported file as an Arrow table of `types` with each row's `line_number`."""
        return attachments.read_table(path, fmt, types)

    def existing_fact_ids(self, fact_ids: list[str]) -> set[str]:
        """Which of these fact_ids are already stored (an import adds only the others)."""
        import pyarrow as pa

        with self.lock:
            self.con.register("_import_ids", pa.table({"fact_id": pa.array(fact_ids, pa.string())}))
            try:
                rows = self.con.execute(
                    "SELECT fact_id FROM memories WHERE fact_id IN (SELECT fact_id FROM _import_ids)").fetchall()
            finally:
                self.con.unregister("_import_ids")
        return {r[0] for r in rows}

    def projects(self, user_id: str) -> list[str]:
        """The projects of the memories a user may read (their own and those shared), sorted."""
        with self.lock:
            return [p for (p,) in self.con.execute(
                "SELECT DISTINCT project FROM memories WHERE (user_id = ? OR shared) AND kind = 'memory' "
                "AND project <> '' ORDER BY project", [user_id]).fetchall()]

    def user_stats(self, user_id: str) -> dict:
        with self.lock:
            by_type = dict(self.con.execute(
                "SELECT type, count(*) FROM memories WHERE user_id = ? AND kind = 'memory' GROUP BY type ORDER BY type",
                [user_id]).fetchall())
            sessions, active = self.con.execute(
                "SELECT count(*), count(*) FILTER (WHERE ended_at IS NULL) FROM sessions WHERE user_id = ?",
                [user_id]).fetchall()[0]
            summaries, first, last = self.con.execute(
                "SELECT count(*) FILTER (WHERE kind = 'summary_event'), min(created_at), max(updated_at) "
                "FROM memories WHERE user_id = ?", [user_id]).fetchall()[0]
        return {"user_id": user_id, "observations": sum(by_type.values()), "by_type": by_type,
                "sessions": sessions, "active_sessions": active, "summaries": summaries,
                "first_observation_at": first, "last_update_at": last}

    def session_rows(self, session_id: str, user_id: str) -> list[tuple]:
        with self.lock:
            return self.con.execute(
                f"SELECT {', '.join(FACT_COLUMNS)} FROM memories WHERE session_id = ? AND user_id = ? "
                "AND kind = 'memory' ORDER BY coalesce(seq, doc_id)", [session_id, user_id]).fetchall()

    def core_rows(self, user_id: str) -> list[tuple]:
        with self.lock:
            return self.con.execute(
                f"SELECT {', '.join(FACT_COLUMNS)} FROM memories WHERE is_core AND user_id = ? "
                "ORDER BY updated_at DESC", [user_id]).fetchall()

    def close(self) -> None:
        with self.lock:
            if self._con is not None:
                con, self._con = self._con, None
                try:
                    if self.path == ":memory:":
                        con.close()
                    else:
                        attachments.detach(self.path, con)
                except duckdb.Error:
                    pass
