"""`make demo`: run notebooks/quickstart.ipynb headless, on a fresh memory file, in a real kernel.

    python -m slm_magic.demo [NOTEBOOK] [--out FOLDER]

The executed copy is written next to a fresh DuckDB file in FOLDER (default: a new temporary
folder), and what the notebook remembered and recalled is printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def notebooks_folder() -> Path:
    """The notebooks: installed inside the package (from a wheel), else the repository's folder."""
    installed = Path(__file__).resolve().parent / "notebooks"
    return installed if (installed / "quickstart.ipynb").is_file() else REPO / "notebooks"


DEFAULT_NOTEBOOK = notebooks_folder() / "quickstart.ipynb"


RESTART_TAG = "restart-kernel"  # a cell with this tag runs in a fresh kernel, as after Kernel → Restart


def run_notebook(notebook: Path, out_dir: Path, *, db: Path | None = None, timeout: int = 180) -> Path:
    """Execute a notebook in a python3 kernel started in the notebook's folder (as Jupyter does),
    with SLM_MAGIC_DB set; the kernel is restarted before each cell tagged `restart-kernel`.
    Widget state is kept in the executed copy, which is returned."""
    import nbformat
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient

    out_dir.mkdir(parents=True, exist_ok=True)
    db = db or out_dir / "memory.duckdb"
    nb = nbformat.read(notebook, as_version=4)
    env = {**os.environ, "SLM_MAGIC_DB": str(db)}
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.resolve().parent)}},
                            store_widget_state=True,
                            # (a kernel on this machine's loopback, as Jupyter's own: its warning
                            # about unencrypted TCP opened every demo)
                            extra_arguments=["--IPKernelApp.log_level=ERROR"])
    with client.setup_kernel(env=env):
        for index, cell in enumerate(nb.cells):
            if RESTART_TAG in cell.metadata.get("tags", []):
                run_sync(client.km.restart_kernel)(now=True)
                run_sync(client.kc.wait_for_ready)(timeout=timeout)
            client.execute_cell(cell, index)
        client.set_widgets_metadata()
    executed = out_dir / f"{notebook.stem}.executed.ipynb"
    nbformat.write(nb, executed)
    return executed


def outputs_text(notebook: Path) -> list[str]:
    """The plain-text outputs of an executed notebook, one string per cell."""
    return [text for _, text in cells_text(notebook)]


def cells_text(notebook: Path) -> list[tuple[str, str]]:
    """(source, plain-text output) of each code cell of an executed notebook."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    texts = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        parts = []
        for o in c.get("outputs", []):
            if o.output_type == "stream":
                parts.append(o.text)
            elif "data" in o and "text/plain" in o.data:
                parts.append(o.data["text/plain"])
            elif o.output_type == "error":
                parts.append(f"{o.ename}: {o.evalue}")
        texts.append((c.source, "".join(parts)))
    return texts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook", nargs="?", type=Path, default=DEFAULT_NOTEBOOK)
    ap.add_argument("--out", type=Path, default=None, help="folder for the executed copy and the memory file")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="slm_magic_demo_"))
    executed = run_notebook(args.notebook, out)
    for n, (source, text) in enumerate(cells_text(executed), 1):
        if text.strip():  # (each output under the cell that made it, as a notebook shows them)
            lines = source.strip().splitlines()
            shown = lines[:3] + (["..."] if len(lines) > 3 else [])
            prompt = f"In [{n}]: "
            print("\n".join(f"{prompt if i == 0 else '':{len(prompt)}}{line}" for i, line in enumerate(shown)))
            print(text.rstrip())
            print("-" * 60)
    print(f"executed notebook: {executed}")
    print(f"memory file:       {out / 'memory.duckdb'} (a scratch file: your own is $SLM_MAGIC_DB, else "
          "~/.slm_magic/memory.duckdb)")
    lab = "`make lab`" if (REPO / "Makefile").is_file() else f"`jupyter lab {executed}`"
    print(f"next: {lab} opens the notebook in JupyterLab, where the results are widgets and the Memory panel is in "
          "the side bar")
    return 0


if __name__ == "__main__":
    sys.exit(main())
