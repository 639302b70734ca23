"""The widgets in a real browser: JupyterLab on 127.0.0.1, Debian's chromium driven by
Python playwright, a notebook typed and run as a person would, and the feedback that a click
on 👍 sends checked in the memory file.

Runs when /usr/bin/chromium and playwright are there (`.ci/run` installs both)."""

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
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
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    serving = threading.Event()

    def copy_log() -> None:
        """Every line of the server's output into lab.log; the one naming its URL means it serves."""
        for line in proc.stdout:
            log.write(line)
            log.flush()
            if f"127.0.0.1:{port}/lab" in line:
                serving.set()
        serving.set()  # (the server ended: the check below says so)

    reader = threading.Thread(target=copy_log, daemon=True)
    reader.start()
    try:
        if not serving.wait(timeout=90) or proc.poll() is not None:
            raise RuntimeError("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        reader.join(timeout=20)
        log.close()


def _open_and_run(page, base: str, token: str, name: str, n_cells: int):
    """Open a notebook, wait until its kernel's websocket has delivered a message, then
    Shift+Enter through its cells; returns its panel (another notebook may be open in a hidden
    tab of the same workspace)."""
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda _: frames.append(ws.url))
            if "/api/kernels/" in ws.url else None)
    with page.expect_websocket(lambda ws: "/api/kernels/" in ws.url, timeout=90_000) as opened:
        # (a workspace of its own: only this notebook opens, so the websocket is its kernel's)
        page.goto(f"{base}/lab/workspaces/{Path(name).stem}/tree/{name}?reset&token={token}")
    if not frames:  # the kernel's first message, an event (it may have come already)
        opened.value.wait_for_event("framereceived", timeout=90_000)
    panel = page.locator(".jp-NotebookPanel:visible")
    panel.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=90_000)
    panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=90_000)
    cells = panel.locator(".jp-Notebook .jp-Cell")
    cells.first.click()
    for i in range(n_cells):  # Shift+Enter on each cell, as a person runs a notebook
        page.keyboard.press("Shift+Enter")
        expect(cells.nth(i + 1)).to_have_class(ACTIVE, timeout=30_000)  # taken: the next cell is active
    return panel


def _notebook(path: Path, sources: list[str]) -> None:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nbformat.write(nb, path)


WIDTHS = (1400, 1000, 600)


def _assert_rows_usable(page, out, width: int) -> None:
    """At this window width every action button of every row is on screen and clickable, and
    no tag, notebook name or cell number is cut."""
    buttons = out.locator(".slm-actions button")
    assert buttons.count() == 4 * out.locator(".slm-actions").count() >= 8
    for i in range(buttons.count()):
        b = buttons.nth(i)
        b.scroll_into_view_if_needed()
        expect(b).to_be_visible()
        box = b.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, (width, i, box)
        if b.is_enabled():  # (a 👍 already given is disabled on purpose)
            b.click(trial=True, timeout=10_000)  # actionable: visible, stable, not covered
    clipped = out.evaluate(
        "el => [...el.querySelectorAll('.slm-meta')].filter(m => m.scrollWidth > m.clientWidth + 1).length")
    assert clipped == 0, f"{clipped} meta lines cut at {width}px"


def test_widgets_render_and_feedback_reaches_the_file(lab, tmp_path):
    base, token = lab
    sources = ["%load_ext slm_magic", "orders = {'customers': 4120, 'without_account': 412}\norders",
               *(f"%%remember {opts}\n{text}" for opts, text in FINDINGS),
               '%slm_start --query "churn label leakage"', "%recall why was a feature dropped"]
    _notebook(tmp_path / "session.ipynb", sources)
    second = ["%load_ext slm_magic", '%slm_start --query "churn definition"', "%recall tenure_days leak"]
    _notebook(tmp_path / "second.ipynb", second)
    shots = []

    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=HEADLESS_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        panel = _open_and_run(page, base, token, "session.ipynb", len(sources))
        recall_out = panel.locator(".jp-Cell").nth(len(sources) - 1).locator(".jp-OutputArea").first
        recall_out.locator(".slm-bar").first.wait_for(timeout=90_000)
        context_out = panel.locator(".jp-Cell").nth(len(sources) - 2).locator(".jp-OutputArea").first
        # the %%remember cells started this notebook's session; %slm_start continues it
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
        expect(recall_out.locator(".slm-id").first).to_have_text(re.compile(r"^[0-9a-f]{8}$"))
        # why it matched: the question's words marked in the row, and how well in words
        expect(recall_out.locator("mark.slm-hit", has_text="feature").first).to_be_visible()
        expect(recall_out.locator(".slm-match").first).to_have_text(re.compile(r"^(strong match|match|weak match) "))

        # the parts on demand
        recall_out.get_by_text("score parts").click()
        recall_out.locator(".slm-breakdown").first.wait_for(state="visible", timeout=10_000)

        # 👍 on the first row: the signal reaches the file
        up = recall_out.locator("button[title^='👍']").first
        up.click()
        recall_out.get_by_text("marked useful").wait_for(timeout=30_000)
        expect(up).to_be_disabled(timeout=30_000)  # the row's new state, drawn before the screenshots
        expect(up).to_have_class(re.compile(r"\bmod-success\b"))

        # where the memory came from, on demand
        recall_out.get_by_text("where from").first.click()
        recall_out.get_by_text("the cell run just before it").first.wait_for(timeout=30_000)
        expect(recall_out.get_by_text("'without_account': 412").first).to_be_visible()

        shot, recall_shot = tmp_path / "widgets.png", tmp_path / "recall.png"
        context_out.scroll_into_view_if_needed()
        page.screenshot(path=str(shot))
        recall_out.scroll_into_view_if_needed()
        recall_out.screenshot(path=str(recall_shot))  # the %recall output alone (the README's picture)
        shots += [shot, recall_shot]

        # the table at every width, the file browser open: actions reachable, nothing cut
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 1000})
            _assert_rows_usable(page, recall_out, width)
            recall_out.scroll_into_view_if_needed()
            shots.append(tmp_path / f"recall-{width}.png")
            page.screenshot(path=str(shots[-1]))
        # the forget question fits its column too (at the middle width, and kept)
        page.set_viewport_size({"width": 1000, "height": 1000})
        recall_out.locator("button[title^='forget this memory']").last.click()
        keep = recall_out.get_by_role("button", name="keep")
        yes = recall_out.get_by_role("button", name="forget", exact=True)
        for b in (keep, yes):
            expect(b).to_be_visible()
            box = b.bounding_box()
            assert box and box["x"] + box["width"] <= 1000
            assert b.evaluate("el => el.scrollWidth <= el.clientWidth + 1")  # the label is whole
        shots.append(tmp_path / "forget-1000.png")
        page.screenshot(path=str(shots[-1]))
        keep.click()

        # a second notebook in a second kernel: a session of its own, the same memories
        page.set_viewport_size({"width": 1400, "height": 1000})
        other = browser.new_page(viewport={"width": 1400, "height": 1000})
        panel2 = _open_and_run(other, base, token, "second.ipynb", len(second))
        out2 = panel2.locator(".jp-Cell").nth(len(second) - 2).locator(".jp-OutputArea").first
        out2.get_by_text("new session").wait_for(timeout=60_000)
        found = panel2.locator(".jp-Cell").nth(len(second) - 1).locator(".jp-OutputArea").first
        expect(found.get_by_text("Dropped the tenure_days feature").first).to_be_visible(timeout=60_000)
        shots.append(tmp_path / "second-notebook.png")
        other.screenshot(path=str(shots[-1]))
        browser.close()

    if os.environ.get("SLM_SCREENSHOT_DIR"):  # kept when asked
        for s in shots:
            shutil.copy(s, Path(os.environ["SLM_SCREENSHOT_DIR"]) / s.name)
    assert shots[0].stat().st_size > 10_000 and shots[1].stat().st_size > 5_000
    with Memory(tmp_path / "memory.duckdb") as mem:
        rows = mem.store.con.execute("SELECT f.signal, f.query, f.rank, m.content FROM feedback f "
                                     "JOIN memories m USING (fact_id)").fetchall()
        origins = mem.store.con.execute("SELECT origin FROM sessions WHERE api = 'slm' ORDER BY started_at").fetchall()
    assert rows == [("up", "why was a feature dropped", 1,
                     "Dropped the tenure_days feature: it is computed after the churn date, so it leaks the label.")]
    assert [Path(o).name for (o,) in origins] == ["session.ipynb", "second.ipynb"]  # one session per notebook
