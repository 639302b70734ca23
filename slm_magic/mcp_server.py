"""`slm-magic mcp`: both memory APIs as MCP tools on stdio, over the file the kernels use.

Built on the official SDK's `MCPServer`. A tool call holds the memory file only while it runs,
as a magic does (`Memory.attached`), so notebooks and the assistant share one file: each sees
the other's memories on its next call, and neither meets a lock error (the engine waits for the
other's call instead). Calls run one at a time. An engine error (a bad argument, an unknown id)
becomes a tool error carrying the engine's message; any other exception is a bug, which the SDK
reports as a tool error and logs, and the server goes on serving.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from . import __version__, mcp_tools
from .errors import SlmMagicError
from .memory import Memory

INSTRUCTIONS = """\
Long-term memory shared with the user's Jupyter notebooks (slm_magic): what you remember here
the user finds with %recall in a notebook, and what they remember there you find with recall.
Lifecycle: call session_init once when a piece of work starts; pass its session_id unchanged to
every recall, remember and feedback call (left out, this server's session is used: the one
session_init opened, or one opened on first need); call close_session when the work is done.
recall before answering from memory; remember results, decisions and definitions worth keeping.
The mem_* tools are the same memory as per-user observations (mem_session_start, mem_save,
mem_search, ...), of the same user as the notebooks. list_memories pages through everything
without a query. forget and forget_all delete for good: only when the user asks.
A long content is clipped in lists; mem_get_observation returns it whole.
"""

#: How long shutting down waits for a running call before closing the file anyway.
SHUTDOWN_WAIT_S = 30.0


def build_server(memory: Memory, lock: threading.Lock | None = None) -> MCPServer:
    """An MCP server whose tools are `mcp_tools.TOOLS` on `memory` (which should be detached:
    each call attaches it). `lock` serialises the calls; pass one to wait for them yourself."""
    lock = lock or threading.Lock()
    server = MCPServer(name="slm-magic", title="slm_magic notebook memory", instructions=INSTRUCTIONS,
                       version=__version__, log_level="WARNING")
    for tool in mcp_tools.TOOLS:
        server.add_tool(_served(tool, memory, lock), name=tool.__name__, annotations=annotations(tool.__name__))
    return server


def annotations(name: str) -> ToolAnnotations:
    """What a client may show or ask before a call: read-only, or a change; a deletion for
    good (destructive); safe to repeat (idempotent). Nothing here reaches outside the memory."""
    read_only = name in mcp_tools.READ_ONLY
    return ToolAnnotations(read_only_hint=read_only, destructive_hint=name in mcp_tools.DESTRUCTIVE,
                           idempotent_hint=read_only or name in mcp_tools.IDEMPOTENT, open_world_hint=False)


def _served(tool: Callable[..., dict[str, Any]], memory: Memory, lock: threading.Lock) -> Callable[..., Any]:
    """The adapter as the SDK sees it: its parameters after the Memory (their annotations make
    the input schema), run on the attached file, engine errors turned into tool errors."""
    sig = inspect.signature(tool, eval_str=True)
    params = list(sig.parameters.values())[1:]

    def call(**arguments: Any) -> dict[str, Any]:
        with lock:
            try:
                with memory.attached():
                    return tool(memory, **arguments)
            except SlmMagicError as exc:
                raise ToolError(str(exc)) from exc

    call.__name__ = call.__qualname__ = tool.__name__
    call.__doc__ = inspect.cleandoc(tool.__doc__ or "")
    call.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
    return call


def serve(path: str | os.PathLike[str] | None = None, *, user_id: str | None = None, semantic: bool = True,
          embedding_model: str | None = None) -> int:
    """Open the memory (an unusable file fails here, before serving), then serve on stdio
    until the client goes away; the file is let go after every call and closed at the end.
    `user_id` None (or empty: no --user given) is the notebooks' default user (`Memory`'s)."""
    memory = Memory(path, user_id=user_id or None, semantic=semantic, embedding_model=embedding_model)
    memory.detach()
    lock = threading.Lock()
    # A client that stops its server with SIGTERM still gets the pending showings written.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        build_server(memory, lock).run("stdio")
    except KeyboardInterrupt:
        return 130
    finally:
        if lock.acquire(timeout=SHUTDOWN_WAIT_S):  # a call still running finishes first
            try:
                with contextlib.suppress(SlmMagicError), memory.attached():
                    mcp_tools.end_server_session(memory)
            finally:
                memory.close()
    return 0
