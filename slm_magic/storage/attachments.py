"""The process's one DuckDB instance, and the memory files attached to it while they are in use.

Starting a DuckDB database costs about 30 ms, nearly all of it registering the built-in
functions; attaching a file to a running instance costs about 2 ms and detaching it 1 ms, and
an attached file is locked against other processes exactly as an opened one is. So a kernel
keeps one in-memory instance for its whole life and attaches the memory file only while a
magic runs. Stores of one process on the same file share its attachment, counted, the way
DuckDB's own instance cache shares a file opened twice.
"""

from __future__ import annotations

import hashlib
import threading

import duckdb

# DuckDB would otherwise cache up to 80% of RAM; a notebook helper should stay small. And it
# never downloads an extension: what the engine uses (JSON, Parquet) is built into the wheel,
# and nothing leaves the machine.
INSTANCE_CONFIG = {"memory_limit": "512MB", "allocator_flush_threshold": "16MB",
                   "autoinstall_known_extensions": False, "autoload_known_extensions": False}

_lock = threading.Lock()
_instance: duckdb.DuckDBPyConnection | None = None
_holders: dict[str, int] = {}
_file_locks: dict[str, threading.RLock] = {}
_bulk = {"depth": 0, "threshold": None}


def lock_for(path: str) -> threading.RLock:
    """The one lock of this process's Stores on the file at `path`."""
    with _lock:
        return _file_locks.setdefault(path, threading.RLock())


def _connection() -> duckdb.DuckDBPyConnection:
    global _instance
    if _instance is None:
        _instance = duckdb.connect(":memory:", config=INSTANCE_CONFIG)
    return _instance


def bulk_begin() -> None:
    """A bulk write starts: no automatic checkpoint until the last one running ends (the
    setting belongs to the instance, so it is counted here for every Store of the process)."""
    with _lock:
        con = _connection()
        if not _bulk["depth"]:
            _bulk["threshold"] = con.execute("SELECT current_setting('checkpoint_threshold')").fetchall()[0][0]
            con.execute("SET checkpoint_threshold = '1TB'")
        _bulk["depth"] += 1


def bulk_end() -> None:
    with _lock:
        _bulk["depth"] -= 1
        if not _bulk["depth"]:
            _connection().execute(f"SET checkpoint_threshold = {_sql_string(_bulk['threshold'])}")


def alias(path: str) -> str:
    """The catalog name a file is attached under: stable per path, a valid bare identifier."""
    return "slm_" + hashlib.blake2b(path.encode(), digest_size=6).hexdigest()


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def attach(path: str) -> duckdb.DuckDBPyConnection:
    """A new connection whose default catalog is the file at `path`, attaching the file first
    if no other Store of this process holds it. DuckDB's errors (another process's lock, a
    file that is not a database) come out unchanged for the caller to explain."""
    with _lock:
        _connection()
        name = alias(path)
        if not _holders.get(path):
            _instance.execute(f"ATTACH {_sql_string(path)} AS {name}")
            _holders[path] = 0
        _holders[path] += 1
        try:
            con = _instance.cursor()
            con.execute(f"USE {name}")
        except BaseException:
            _release(path)
            raise
        return con


def detach(path: str, con: duckdb.DuckDBPyConnection) -> None:
    """Close `con`; the last holder in this process lets go of the file (DuckDB checkpoints it
    then), so another process can take it."""
    with _lock:
        try:
            con.close()
        finally:
            _release(path)


def _release(path: str) -> None:
    if _holders[path] == 1:
        _instance.execute(f"DETACH {alias(path)}")  # (if this fails, the file stays counted as held)
        del _holders[path]
    else:
        _holders[path] -= 1


def path_literal(path) -> str:
    """A path as a SQL string literal (DuckDB's readers and writers take no parameters there)."""
    return _sql_string(str(path))


def write_table(table, path, fmt: str) -> None:
    """An Arrow table to a JSON Lines or Parquet file, with DuckDB's own writer (the export of a
    memory kept elsewhere: the file is the same as a DuckDB file's export)."""
    with _lock:
        con = _connection().cursor()
    try:
        con.register("_export", table)
        con.execute(f"COPY (SELECT * FROM _export) TO {path_literal(path)} "
                    f"({'FORMAT JSON' if fmt == 'json' else 'FORMAT PARQUET'})")
    finally:
        con.close()


def read_table(path, fmt: str, types):
    """An exported file as an Arrow table of `types` (name -> DuckDB type; a column the file
    lacks, from an earlier version, is NULL) with each row's `line_number` (from 1)."""
    if fmt == "json":
        spec = ", ".join(f"{k}: '{v}'" for k, v in types.items())
        reader = f"read_json({path_literal(path)}, format = 'newline_delimited', columns = {{{spec}}})"
    else:
        reader = f"read_parquet({path_literal(path)})"
    with _lock:
        con = _connection().cursor()
    try:
        have = set(types) if fmt == "json" else {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()}
        select = ", ".join(f"CAST({c if c in have else 'NULL'} AS {t}) AS {c}" for c, t in types.items())
        return con.sql(f"SELECT {select}, row_number() OVER () AS line_number FROM {reader}").to_arrow_table()
    finally:
        con.close()
