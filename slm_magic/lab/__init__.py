"""The memory in JupyterLab's side bar: a Jupyter Server extension serving a small REST API over
the same memory the kernels use (the file, or the team's PostgreSQL), and the prebuilt
JupyterLab extension (the "Memory" panel) that calls it.

The server holds the memory file only while a request runs, as a kernel does (`Memory.attached`),
so kernels, the panel and the MCP server share one file. Whose memory: the server's user (on
JupyterHub the logged-in person), else the notebooks' default user; `c.SlmMagicLab.user` in the
server's config overrides both. Every endpoint needs the server's authentication and XSRF check.

Enabled by `jupyter_server_config.d/slm_magic_lab.json`, which the wheel installs; by hand:
`jupyter server --ServerApp.jpserver_extensions="{'slm_magic.lab': True}"`.
"""

from __future__ import annotations

from pathlib import Path

#: The JupyterLab extension's name (its folder under share/jupyter/labextensions/).
LABEXTENSION = "slm-magic-lab"
#: Where `jupyter labextension build` writes the prebuilt extension (the wheel copies it).
BUILT = Path(__file__).resolve().parent / "labextension"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "slm_magic.lab"}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": LABEXTENSION}]


def _load_jupyter_server_extension(serverapp) -> None:
    from .handlers import setup_handlers

    setup_handlers(serverapp)


# (the name jupyter_server 1 looked for)
load_jupyter_server_extension = _load_jupyter_server_extension
