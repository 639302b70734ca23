"""The widgets in a real browser: JupyterLab on 127.0.0.1, Debian's chromium driven by
Python playwright, a notebook typed and run as a person would, and the feedback that a click
on 👍 sends checked in the memory file.

Runs when /usr/bin/chromium and playwright are there (`.ci/run` installs both)."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from slm_magic import Memory

CHROMIUM = "/usr/bin/chromium"
HEADLESS_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"]
REQUIRED = os.environ.get("SLM_REQUIRE_BROWSER") == "1"  # .ci/run sets it: there a skip would hide a failure
if not REQUIRED:
    pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed", allow_module_level=True)
import playwright.sync_api as playwright_api  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

FINDINGS = [
    ("--tags join,data-quality --type decision",
     "The left join of orders on customer_id drops 3% of rows: 412 customers have no account."),
    ("--tags churn,leakage --type decision",
     "Dropped the tenure_days feature: it is computed after the churn date, so it leaks the label."),
    ("--tags churn,definition --type preference",
     "Client (Ana): churn means 90 days without a login, not a cancelled contract."),
]


ACTIVE = re.compile(r"\bjp-mod-active\b")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture
def lab(tmp_path):
    """JupyterLab serving tmp_path, with its own config, data and runtime folders."""
    port, token = _free_port(), "slm-browser-test"
    env = {**os.environ, "SLM_MAGIC_DB": str(tmp_path / "memory.duckdb"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter"), "JUPYTER_RUNTIME_DIR": str(tmp_path / ".runtime"),
           "IPYTHONDIR": str(tmp_path / ".ipython"), "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / ".lab-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / ".lab-workspaces")}
    news = tmp_path / ".lab-settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')  # no "news?" pop-up over the cells
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}", "--ServerApp.open_browser=False",
         "--LabApp.news_url=", "--LabServerApp.announcements_url=", "--ServerApp.disable_check_xsrf=True"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                _get(f"{base}/api/status?token={token}")
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:]) from None
                time.sleep(0.5)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _kernel_connected(base: str, token: str) -> bool:
    return any(k.get("connections", 0) > 0 for k in _get(f"{base}/api/kernels?token={token}"))


def test_widgets_render_and_feedback_reaches_the_file(lab, tmp_path):
    base, token = lab
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("%load_ext slm_magic")]
    nb.cells += [nbformat.v4.new_code_cell(f"%%remember {opts}\n{text}") for opts, text in FINDINGS]
    nb.cells += [nbformat.v4.new_code_cell('%slm_start --query "churn label leakage"'),
                 nbformat.v4.new_code_cell("%recall why was a feature dropped")]
    nbformat.write(nb, tmp_path / "session.ipynb")

    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=HEADLESS_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{base}/lab/tree/session.ipynb?token={token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
        deadline = time.time() + 90
        while not _kernel_connected(base, token):  # the kernel's websocket, before any cell runs
            assert time.time() < deadline, "the notebook's kernel never connected"
            time.sleep(0.5)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)

        cells = page.locator(".jp-Notebook .jp-Cell")
        cells.first.click()
        for i in range(len(nb.cells)):  # Shift+Enter on each cell, as a person runs a notebook
            page.keyboard.press("Shift+Enter")
            expect(cells.nth(i + 1)).to_have_class(ACTIVE, timeout=30_000)  # taken: the next cell is active
        recall_out = page.locator(".jp-Cell").nth(len(nb.cells) - 1).locator(".jp-OutputArea").first
        recall_out.locator(".slm-bar").first.wait_for(timeout=90_000)
        context_out = page.locator(".jp-Cell").nth(len(nb.cells) - 2).locator(".jp-OutputArea").first
        # the %%remember cells started the kernel's session; %slm_start continues it
        context_out.get_by_text("continued session").wait_for(timeout=30_000)

        # on screen: the memory's text, its score with a visible bar, the context view's tab
        expect(recall_out.get_by_text("Dropped the tenure_days feature").first).to_be_visible()
        bar = recall_out.locator(".slm-bar").first
        box = bar.bounding_box()
        assert box and box["width"] > 50 and box["height"] > 5
        relevance = recall_out.locator(".slm-seg.slm-relevance").first.bounding_box()
        assert relevance and 0 < relevance["width"] <= box["width"]
        value = recall_out.locator(".slm-value").first.inner_text()
        assert 0 < float(value) <= 1
        expect(context_out.get_by_text("context block").first).to_be_visible()

        # the parts on demand
        recall_out.get_by_text("score parts").click()
        recall_out.locator(".slm-breakdown").first.wait_for(state="visible", timeout=10_000)

        # 👍 on the first row: the signal reaches the file
        up = recall_out.locator("button[title^='👍']").first
        up.click()
        recall_out.get_by_text("👍 recorded").wait_for(timeout=30_000)
        expect(up).to_be_disabled(timeout=30_000)  # the row's new state, drawn before the screenshots
        expect(up).to_have_class(re.compile(r"\bmod-success\b"))
        shot, recall_shot = tmp_path / "widgets.png", tmp_path / "recall.png"
        context_out.scroll_into_view_if_needed()
        page.screenshot(path=str(shot))
        recall_out.scroll_into_view_if_needed()
        recall_out.screenshot(path=str(recall_shot))  # the %recall output alone (the README's picture)
        if os.environ.get("SLM_SCREENSHOT_DIR"):  # kept when asked
            for s in (shot, recall_shot):
                shutil.copy(s, Path(os.environ["SLM_SCREENSHOT_DIR"]) / s.name)
        browser.close()

    assert shot.stat().st_size > 10_000 and recall_shot.stat().st_size > 5_000
    with Memory(tmp_path / "memory.duckdb") as mem:
        rows = mem.store.con.execute("SELECT f.signal, f.query, f.rank, m.content FROM feedback f "
                                     "JOIN memories m USING (fact_id)").fetchall()
    assert rows == [("up", "why was a feature dropped", 1,
                     "Dropped the tenure_days feature: it is computed after the churn date, so it leaks the label.")]
