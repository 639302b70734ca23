"""The memories the panel reads and changes, one `Memory` per user of this server, each holding
its file only while a call runs (as a kernel and the MCP server do), the calls one at a time on a
worker thread (the server's event loop never waits on the file)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from traitlets import Bool, Int, Unicode
from traitlets.config import Configurable

from ..core.identity import default_user
from ..memory import Memory

T = TypeVar("T")


class SlmMagicLab(Configurable):
    """The panel's server side (`c.SlmMagicLab.user = "ana"` in jupyter_server_config.py)."""

    user = Unicode("", config=True, help="Whose memory the panel shows and changes. Default: on JupyterHub the "
                                         "logged-in person, else the notebooks' user ($SLM_MAGIC_USER, else the "
                                         "login name).")
    db = Unicode("", config=True, help="The memory: a file path or a postgresql:// URL. Default: the kernels' "
                                       "($SLM_MAGIC_DB, else ~/.slm_magic/memory.duckdb).")
    semantic = Bool(True, config=True, help="Rank with the meaning channel too, as %recall does.")
    poll_ms = Int(3000, config=True, help="How often the panel asks whether anything changed (ms).")


class MemoryService:
    """One detached `Memory` per user, opened on first need; `call` runs a function on it with
    the file attached, on the single worker thread."""

    def __init__(self, config: SlmMagicLab):
        self.config = config
        self.memories: dict[str, Memory] = {}
        self.lock = threading.Lock()
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="slm-magic-lab")

    def user_of(self, current_user: Any) -> str:
        """The memory user for a request: the configured one, else on JupyterHub the hub's
        user (the logged-in person), else the notebooks' own default user. (A plain server's
        token login is an anonymous made-up name, not a person: the kernels would not share it.)"""
        if self.config.user.strip():
            return self.config.user.strip()
        if "://" in self.config.db or "://" in os.environ.get("SLM_MAGIC_DB", ""):
            return ""  # a team's database: who the server connects as (its login role), as a kernel there
        if os.environ.get("JUPYTERHUB_USER"):
            name = getattr(current_user, "username", None) or getattr(current_user, "name", None)
            if isinstance(current_user, dict):
                name = current_user.get("name")
            if name:
                return str(name)
        return default_user()

    def memory(self, user: str) -> Memory:
        mem = self.memories.get(user)
        if mem is None:
            path = self.config.db.strip() or None
            mem = Memory(path, user_id=user or None, semantic=self.config.semantic)
            mem.detach()
            self.memories[user] = mem
        return mem

    def run(self, user: str, fn: Callable[[Memory], T]) -> T:
        """`fn(memory)` with the file held for the call alone."""
        with self.lock:
            mem = self.memory(user)
            with mem.attached():
                return fn(mem)

    async def call(self, user: str, fn: Callable[[Memory], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.worker, self.run, user, fn)

    def close(self) -> None:
        with self.lock:
            for mem in self.memories.values():
                mem.close()
            self.memories.clear()
        self.worker.shutdown(wait=False)
