"""Which store a memory's address opens: a DuckDB file (or ":memory:"), or a PostgreSQL
server for a team (a postgresql:// URL). The same address works everywhere one is given:
`Memory(...)`, $SLM_MAGIC_DB, `%config SLMMagic.db_path`, `slm-magic --db`, the MCP server."""

from __future__ import annotations

import os

from .store import Store, default_path

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(address) -> bool:
    return isinstance(address, str) and address.startswith(URL_SCHEMES)


def resolve(address: str | os.PathLike[str] | None):
    """The address meant: None is $SLM_MAGIC_DB (a file or a URL), else ~/.slm_magic/memory.duckdb."""
    if address is None:
        env = os.environ.get("SLM_MAGIC_DB")
        return env if is_url(env) else default_path()
    return address


def open_store(address: str | os.PathLike[str] | None) -> Store:
    """The store at `address` (None: $SLM_MAGIC_DB, else ~/.slm_magic/memory.duckdb)."""
    address = resolve(address)
    if is_url(address):
        from .pg_store import PgStore

        return PgStore(address)
    return Store(address)


def missing_file(address: str | os.PathLike[str] | None) -> str | None:
    """The memory file `address` names when there is none yet (None: it exists, or the
    address is a server or RAM): what a command that only reads says instead of creating it."""
    address = resolve(address)
    if is_url(address) or str(address) == ":memory:":
        return None
    path = os.path.expanduser(str(address))
    return None if os.path.exists(path) else path
