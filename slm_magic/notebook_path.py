"""Which notebook a kernel runs for, now. The Jupyter server names it once, when it starts the
kernel (`$JPY_SESSION_NAME`); a rename in JupyterLab afterwards reaches only the server's
sessions. So a kernel asks its server (found in the runtime folder beside the kernel's own
connection file, with that server's token), and keeps the name it was started with when no
server answers: a terminal IPython, a kernel started by hand, a server not running here."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

#: How long a kernel waits for its server's sessions before it keeps the name it started with.
TIMEOUT_S = 1.0
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _server_files(runtime: Path) -> list[Path]:
    """The running servers' files in a runtime folder, the newest first."""
    return sorted(runtime.glob("jpserver-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)


class NotebookPath:
    """The path of the notebook this kernel runs for, asked of its server each time (a rename
    can come at any moment); the server that answered is remembered."""

    def __init__(self, connection_file: str | None):
        name = Path(connection_file).name if connection_file else ""
        self.kernel_id = name[len("kernel-"):-len(".json")] if name.startswith("kernel-") and \
            name.endswith(".json") else None
        self.runtime = Path(connection_file).parent if self.kernel_id else None
        self._server: dict | None = None

    def current(self, started_as: str | None) -> str | None:
        """The notebook's path as the server has it now; `started_as` where none says."""
        if self.kernel_id is None or not started_as:
            return started_as
        path = self._ask(self._server) if self._server else None
        if path is not None:
            return path
        if self.runtime is None:
            return started_as
        try:  # (the server that answered last has gone, or none has yet: the others here)
            servers = [s for s in map(self._read, _server_files(self.runtime)) if s and s != self._server]
        except OSError:
            servers = []
        for server in servers:
            path = self._ask(server)
            if path is not None:
                self._server = server
                return path
        if self._server is None:  # (no server here knows this kernel: not asked again, each ask can wait)
            self.runtime = None
        return started_as

    @staticmethod
    def _read(path: Path) -> dict | None:
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return info if isinstance(info, dict) and info.get("url") and info.get("root_dir") else None

    def _ask(self, server: dict) -> str | None:
        """This kernel's notebook among the server's sessions (None: it does not know the kernel)."""
        req = urllib.request.Request(f"{server['url'].rstrip('/')}/api/sessions",
                                     headers={"Authorization": f"token {server.get('token', '')}"})
        try:  # (straight to it: a proxy set for the web would not know a server on this machine)
            with _DIRECT.open(req, timeout=TIMEOUT_S) as answer:
                sessions = json.loads(answer.read())
        except (OSError, ValueError):
            return None
        for session in sessions if isinstance(sessions, list) else ():
            kernel = session.get("kernel") or {}
            if kernel.get("id") == self.kernel_id and session.get("path"):
                return os.path.join(server["root_dir"], *session["path"].split("/"))
        return None
