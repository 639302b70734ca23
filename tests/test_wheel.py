"""The package as a user gets it: a wheel and an sdist built with `python -m build`, the wheel
installed into a brand-new venv (not editable, not the dev venv) and used from there: the
console command on PATH, `%load_ext slm_magic` in a real kernel, the notebooks run, the widgets
imported from the installed package."""

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

import slm_magic

REPO = Path(__file__).resolve().parent.parent
RUNTIME = {"ipython", "ipywidgets", "pydantic", "duckdb", "scikit-learn", "numpy", "scipy", "pystemmer", "pyarrow",
           "tqdm"}
# (psutil is not here: IPython itself requires it.)
DEV_ONLY = {"pytest", "hypothesis", "playwright", "jupyterlab", "nbclient", "ipykernel", "build", "rank-bm25",
            "bm25s"}


def _run(cmd, **kw):
    got = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert got.returncode == 0, f"{cmd}\n{got.stdout[-2000:]}\n{got.stderr[-3000:]}"
    return got.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    work = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "build", "--outdir", work / "dist", REPO])
    wheel = next((work / "dist").glob("slm_magic-*.whl"))
    _run([sys.executable, "-m", "venv", work / "venv"])
    py = work / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SLM_MAGIC_DB")}
    env.update(JUPYTER_DATA_DIR=str(work / "jupyter-data"), JUPYTER_CONFIG_DIR=str(work / "jupyter-config"),
               IPYTHONDIR=str(work / "ipython"), PATH=f"{work / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    _run([py, "-m", "pip", "install", "-q", wheel], cwd=work, env=env)
    return {"work": work, "wheel": wheel, "py": py, "env": env, "sdist": next((work / "dist").glob("slm_magic-*.tar.gz"))}


def test_the_wheel_holds_the_package_the_widgets_and_the_licence(venv):
    names = zipfile.ZipFile(venv["wheel"]).namelist()
    assert "slm_magic/widgets/memories_view.py" in names and "slm_magic/notebooks/quickstart.ipynb" in names
    assert "slm_magic/data/static-minilm-256.npz" in names  # (the meaning channel's model)
    assert not any(n.startswith("widgets/") for n in names)  # no top-level `widgets` package
    assert any(n.endswith("licenses/LICENSE") for n in names)
    meta = zipfile.ZipFile(venv["wheel"]).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert f"Version: {slm_magic.__version__}" in meta and "License-Expression: MIT" in meta
    assert venv["sdist"].stat().st_size > 10_000


def test_installing_the_wheel_pulls_only_the_runtime_dependencies(venv, capsys):
    listed = json.loads(_run([venv["py"], "-m", "pip", "list", "--format", "json"], env=venv["env"]))
    names = {p["name"].lower() for p in listed}
    assert RUNTIME <= names and not names & DEV_ONLY
    size = int(_run(["du", "-sk", venv["work"] / "venv"]).split()[0]) // 1024
    with capsys.disabled():
        print(f"\n[wheel] {len(names)} packages, venv {size} MB")


def test_from_the_new_venv_the_command_the_kernel_and_the_notebooks_work(venv):
    work, py, env = venv["work"], venv["py"], venv["env"]
    db = work / "memory.duckdb"
    fact_id = _run(["slm-magic", "--db", db, "remember", "joins on customer_id drop 3% of rows"], env=env,
                   cwd=work).strip()
    assert len(fact_id) == 16
    assert "customer_id" in _run(["slm-magic", "--db", db, "recall", "rows lost in joins"], env=env, cwd=work)
    _run([py, "-m", "pip", "install", "-q", "nbclient", "ipykernel"], env=env, cwd=work)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext slm_magic"),
                nbformat.v4.new_code_cell("import slm_magic, slm_magic.widgets\n"
                                          "print(slm_magic.__file__)\nprint(slm_magic.widgets.__file__)"),
                nbformat.v4.new_code_cell("%%remember --tags wheel\nInstalled from the wheel, this still remembers."),
                nbformat.v4.new_code_cell("%recall installed from the wheel")]
    nbformat.write(nb, work / "check.ipynb")
    out = _run([py, "-m", "slm_magic.demo", work / "check.ipynb", "--out", work / "check-run"], env=env, cwd=work)
    site = str(work / "venv" / "lib")
    files = [line for line in out.splitlines() if line.endswith("__init__.py")]
    assert len(files) == 2 and all(f.startswith(site) for f in files), out  # the installed copy, not the repo
    assert "Installed from the wheel" in out and "Error" not in out
    for name in ("quickstart", "data_science_session"):  # the notebooks shipped in the wheel
        notebook = _run([py, "-c", f"from slm_magic.demo import notebooks_folder; "
                                   f"print(notebooks_folder() / '{name}.ipynb')"], env=env, cwd=work).strip()
        assert notebook.startswith(site) and "/slm_magic/notebooks/" in notebook
        ran = _run([py, "-m", "slm_magic.demo", notebook, "--out", work / f"run-{name}"], env=env, cwd=work)
        executed = nbformat.read(work / f"run-{name}" / f"{name}.executed.ipynb", as_version=4)
        errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert errors == [] and "recall '" in ran


LABEXT = "slm_magic-{v}.data/data/share/jupyter/labextensions/slm-magic-lab/"
SERVER_CONFIG = "slm_magic-{v}.data/data/etc/jupyter/jupyter_server_config.d/slm_magic_lab.json"


def test_the_memory_panel_comes_prebuilt_and_enabled(venv):
    """The JupyterLab extension built (no Node at install time) and its server extension
    enabled: `jupyter labextension list` and `jupyter server extension list` in the new venv,
    after `pip install slm-magic[lab]` from the wheel. (Last: it adds JupyterLab to the venv.)"""
    from slm_magic.lab import BUILT

    if not (BUILT / "package.json").exists():
        if os.environ.get("SLM_REQUIRE_BROWSER") == "1":
            pytest.fail("the Memory panel was not built before the wheel (make labext)")
        pytest.skip("the Memory panel is not built (make labext): the wheel has no panel")
    v = slm_magic.__version__
    names = zipfile.ZipFile(venv["wheel"]).namelist()
    base = LABEXT.format(v=v)
    assert f"{base}package.json" in names and any(n.startswith(f"{base}static/remoteEntry.") for n in names)
    assert SERVER_CONFIG.format(v=v) in names
    py, env, work = venv["py"], venv["env"], venv["work"]
    _run([py, "-m", "pip", "install", "-q", f"{venv['wheel']}[lab]"], env=env, cwd=work)
    jupyter = work / "venv" / "bin" / "jupyter"
    listed = subprocess.run([str(jupyter), "labextension", "list"], capture_output=True, text=True, env=env, cwd=work)
    out = _plain(listed.stdout + listed.stderr)
    assert listed.returncode == 0 and re.search(r"slm-magic-lab v[\d.]+ enabled OK", out), out
    servers = subprocess.run([str(jupyter), "server", "extension", "list"], capture_output=True, text=True, env=env,
                             cwd=work)
    out = _plain(servers.stdout + servers.stderr)
    assert "slm_magic.lab enabled" in out and re.search(r"slm_magic\.lab\s+OK", out), out


def _plain(text: str) -> str:
    """A command's output without its terminal colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
