"""A real Jupyter server (or JupyterLab) with the Memory panel's server extension, for the panel's
tests: its own config, runtime, data and settings folders, 127.0.0.1, a token, a free port;
started as a process and stopped at the end. The prebuilt JupyterLab extension (when built) is
found through JUPYTER_PATH, as the wheel's share/jupyter/labextensions would be."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

from lab_listening import LISTENING

from slm_magic.lab import BUILT, LABEXTENSION

TOKEN = "slm-lab-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, base: str, root: Path, proc: subprocess.Popen, log: Path):
        self.base, self.root, self.proc, self.log = base, root, proc, log
        self.token = TOKEN

    def call(self, method: str, path: str, body: dict | None = None, *, token: bool = True,
             headers: dict | None = None) -> tuple[int, object]:
        """One request to the panel's API; (status, the JSON answer or the raw text)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.base}/slm-magic/api/{path}", data=data, method=method,
                                     headers={**({"Authorization": f"token {self.token}"} if token else {}),
                                              "Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def rest(self, method: str, path: str, body: dict | None = None):
        """One call to the server's own REST API (kernels, sessions), with the token."""
        req = urllib.request.Request(f"{self.base}/{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read().decode()
        return json.loads(text) if text else None

    def get(self, path: str):
        status, out = self.call("GET", path)
        assert status == 200, (path, status, out)
        return out


def lab_env(tmp_path: Path, db: str) -> dict[str, str]:
    jpath = tmp_path / ".jupyter-path"
    ext = jpath / "labextensions" / LABEXTENSION
    ext.parent.mkdir(parents=True, exist_ok=True)
    if BUILT.exists() and not ext.exists():
        ext.symlink_to(BUILT, target_is_directory=True)
    return {**os.environ, "SLM_MAGIC_DB": db, "JUPYTER_PATH": str(jpath),
            "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter"), "JUPYTER_RUNTIME_DIR": str(tmp_path / ".runtime"),
            "JUPYTER_DATA_DIR": str(tmp_path / ".jupyter-data"),
            "IPYTHONDIR": str(tmp_path / ".ipython"), "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / ".lab-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / ".lab-workspaces")}


@contextlib.contextmanager
def serve(tmp_path: Path, *, lab: bool = False, db: str | None = None, extra: tuple[str, ...] = (),
          env: dict[str, str] | None = None):
    """The server on tmp_path (JupyterLab with `lab`), serving until the block ends."""
    port = free_port()
    environ = {**lab_env(tmp_path, db or str(tmp_path / "memory.duckdb")), **(env or {})}
    # (the tests' own server extension, lab_listening, is found beside this file)
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), environ.get("PYTHONPATH")]))
    news = tmp_path / ".lab-settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True, exist_ok=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    log_path = tmp_path / "server.log"
    log = open(log_path, "w")
    app = ["-m", "jupyterlab", "--LabApp.news_url=", "--LabServerApp.announcements_url="] if lab else ["-m",
                                                                                                       "jupyter_server"]
    proc = subprocess.Popen(
        [sys.executable, *app, "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={tmp_path}", "--ServerApp.open_browser=False",
         "--ServerApp.jpserver_extensions={'slm_magic.lab': True, 'lab_listening': True}", *extra],
        env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    serving = threading.Event()  # (the port is bound: lab_listening's line, or the server ended)

    def copy_log() -> None:
        for line in proc.stdout:
            log.write(line)
            log.flush()
            if LISTENING in line:
                serving.set()
        serving.set()

    reader = threading.Thread(target=copy_log, daemon=True)
    reader.start()
    try:
        if not serving.wait(timeout=90) or proc.poll() is not None:
            raise RuntimeError("the server does not listen:\n" + log_path.read_text()[-3000:])
        yield Server(f"http://127.0.0.1:{port}", tmp_path, proc, log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        reader.join(timeout=20)
        log.close()
