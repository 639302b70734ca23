"""The widgets in a real browser: JupyterLab on 127.0.0.1, Debian's chromium driven by
Python playwright, a notebook typed and run as a person would, and the feedback that a click
on 👍 sends checked in the memory file; the views at 1400, 1000 and 600 px (nothing cut, no
stray scrollbar); then the notebook saved, its kernel shut down, closed and opened again, an
untrusted copy of it, and its `jupyter nbconvert --to html` page: the saved results alone.

Runs when /usr/bin/chromium and playwright are there (`.ci/run` installs both)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lab_server import serve

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


@pytest.fixture
def lab(tmp_path):
    """JupyterLab serving tmp_path, with its own config, data and runtime folders (the lab tests'
    server, XSRF off for the widgets' comms from a page opened by token)."""
    with serve(tmp_path, lab=True, extra=("--ServerApp.disable_check_xsrf=True",)) as server:
        yield server.base, server.token


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
# A long memory (shared, pinned): its row folds it to two lines, "more" opens it in place.
LONG = ("Seasonality: the weekly churn rate swings by a third between the first and the last week of each month, "
        "because invoices go out on the first working day; every comparison of churn across months must use the "
        "same week of the month, or the four-week rolling mean, else a change of a few points is noise. The "
        "finance team confirmed it in March and again in May, and the dashboard now shows the rolling mean.")


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


def _assert_nothing_cut(page, width: int) -> None:
    """No output scrolls sideways (no stray scrollbar), no button's label is cut ("s…"), and a
    memory's text shows "more" exactly when it is folded (and only then)."""
    scrolled = page.evaluate("""() => [...document.querySelectorAll('.jp-OutputArea-output, .jp-OutputArea-output *')]
        .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1
                && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
        .map(e => e.className.toString().slice(0, 60))""")
    assert scrolled == [], (width, scrolled)
    cut = page.evaluate("""() => [...document.querySelectorAll('.slm-live button')]
        .filter(b => b.offsetParent !== null && b.scrollWidth > b.clientWidth + 1).map(b => b.innerText)""")
    assert cut == [], (width, cut)
    checked = page.evaluate("""() => [...document.querySelectorAll('.slm-live .slm-text')]
        .filter(t => { const r = t.getBoundingClientRect(), area = t.closest('.jp-WindowedPanel-outer');
                       const a = area && area.getBoundingClientRect();  // (the notebook's scrolled area)
                       return t.offsetParent !== null && a && r.top >= a.top && r.bottom <= a.bottom; })
        .map(t => { const m = t.querySelector('.slm-more').getBoundingClientRect();
                    const folded = t.scrollHeight > t.clientHeight + 1;
                    const shown = document.elementFromPoint(m.left + m.width / 2, m.top + m.height / 2)
                                  === t.querySelector('.slm-more');
                    return [folded, shown, t.innerText.slice(0, 40)]; })""")
    assert checked, width  # (some memory's text is on screen)
    wrong = [c for c in checked if c[0] != c[1]]
    assert wrong == [], (width, wrong)


def _visible_outputs(cell) -> list[str]:
    """The text of a cell's outputs that are on screen (hidden ones left out)."""
    cell.scroll_into_view_if_needed()
    return cell.evaluate("""c => [...c.querySelectorAll('.jp-OutputArea-child')]
        .filter(o => o.offsetParent !== null).map(o => o.innerText.trim())""")


def _assert_saved_form_alone(panel, cells: dict[str, tuple[int, str]]) -> None:
    """Where the live views cannot render, each result shows its saved HTML (its table, its
    words) and nothing else: no "model not found", no "Loading widget...", no widget repr."""
    for name, (index, words) in cells.items():
        cell = panel.locator(".jp-Cell").nth(index)
        expect(cell.locator(".slm-static")).to_be_visible()
        expect(cell.locator(".slm-live")).to_have_count(0)
        texts = _visible_outputs(cell)
        assert len(texts) == 1 and words in texts[0], (name, texts)
    text = panel.inner_text()
    for raw in ("model not found", "Loading widget", "VBox(", "LiveSearch(", "📌"):
        assert raw not in text, raw


def test_widgets_render_and_feedback_reaches_the_file(lab, tmp_path):
    base, token = lab
    sources = ["%load_ext slm_magic", "orders = {'customers': 4120, 'without_account': 412}\norders",
               *(f"%%remember {opts}\n{text}" for opts, text in FINDINGS),
               f"%%remember --tags seasonality --share --core\n{LONG}",
               '%slm_start --query "churn label leakage"', "%recall why was a feature dropped",
               "%recall weekly churn seasonality", "%recall"]
    START, RECALL, LONG_RECALL, SEARCH = range(len(sources) - 4, len(sources))
    _notebook(tmp_path / "session.ipynb", sources)
    second = ["%load_ext slm_magic", '%slm_start --query "churn definition"', "%recall tenure_days leak"]
    _notebook(tmp_path / "second.ipynb", second)
    shots = []

    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=HEADLESS_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        panel = _open_and_run(page, base, token, "session.ipynb", len(sources))
        cell = panel.locator(".jp-Cell").nth
        recall_area = cell(RECALL).locator(".jp-OutputArea").first
        recall_out = cell(RECALL).locator(".slm-live").first  # the live view (its saved form is above it, hidden)
        recall_out.locator(".slm-bar").first.wait_for(timeout=90_000)
        context_out = cell(START).locator(".slm-live").first
        # the %%remember cells started this notebook's session; %slm_start continues it
        context_out.get_by_text("continued session").wait_for(timeout=30_000)
        cell(SEARCH).locator(".slm-live input").wait_for(timeout=30_000)
        # live: each result shows its widget alone, the saved form above it hidden
        for index in (START, RECALL, LONG_RECALL, SEARCH):
            expect(cell(index).locator(".slm-static")).to_be_hidden()
            assert len(_visible_outputs(cell(index))) == 1, index

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
        # the pinned memory in words and JupyterLab's icon font (no emoji font here), and yours
        pinned = context_out.locator(".slm-core").first
        expect(pinned).to_have_text("core")
        expect(context_out.get_by_text("shared by you").first).to_be_visible()
        context_out.get_by_text("context block").first.click()
        icon = context_out.locator(".jp-RenderedMarkdown i.fa-thumb-tack").first
        expect(icon).to_be_visible()
        assert icon.bounding_box()["width"] > 4  # drawn by the font, not an empty box of an emoji
        shots.append(tmp_path / "context-block.png")
        context_out.screenshot(path=str(shots[-1]))
        assert "📌" not in page.locator(".jp-NotebookPanel:visible").inner_text()
        context_out.get_by_text("memories", exact=True).first.click()

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
        recall_area.scroll_into_view_if_needed()
        recall_area.screenshot(path=str(recall_shot))  # the %recall output alone (the README's picture)
        shots += [shot, recall_shot]

        # a search typed in the live search box
        search = cell(SEARCH).locator(".slm-live").first
        search.locator("input").fill("churn login")
        search.locator(".slm-bar").first.wait_for(timeout=30_000)
        timing = search.get_by_text(re.compile(r"\d memor(y|ies) in [\d.]+ ms"))

        # the table at every width, the file browser open: actions reachable, nothing cut
        long_out = cell(LONG_RECALL).locator(".slm-live").first
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 1000})
            _assert_rows_usable(page, recall_out, width)
            for out in (context_out, recall_out, long_out, search):
                out.scroll_into_view_if_needed()
                _assert_nothing_cut(page, width)
            # the search's status whole, on one line beside or under the box
            timing.scroll_into_view_if_needed()
            box, left = timing.bounding_box(), search.bounding_box()["x"]
            assert box["x"] >= left and box["x"] + box["width"] <= width and box["height"] < 30, (width, box)
            recall_area.scroll_into_view_if_needed()
            shots.append(tmp_path / f"recall-{width}.png")
            page.screenshot(path=str(shots[-1]))
            long_out.scroll_into_view_if_needed()
            shots.append(tmp_path / f"long-{width}.png")
            page.screenshot(path=str(shots[-1]))

        # at 1000 px the long memory is folded, and opens in place
        page.set_viewport_size({"width": 1000, "height": 1000})
        text = long_out.locator(".slm-text", has_text="Seasonality").first
        text.scroll_into_view_if_needed()
        assert text.evaluate("t => t.scrollHeight > t.clientHeight + 1")  # folded: more to read
        text.locator(".slm-more").click()
        expect(text).to_have_class(re.compile(r"\bslm-open\b"))
        assert text.evaluate("t => t.scrollHeight <= t.clientHeight + 1")  # all of it, in place
        expect(text).to_contain_text("now shows the rolling mean.")
        shots.append(tmp_path / "long-open-1000.png")
        long_out.screenshot(path=str(shots[-1]))

        # the forget question fits its row, in a recall and in %slm_start's tab, at every width (and is kept)
        for width in (1000, 600):
            page.set_viewport_size({"width": width, "height": 1000})
            for out in (recall_out, context_out):
                row = out.locator(".slm-grid").last  # (the last row of its table)
                row.locator("button[title^='forget this memory']").click()
                keep = row.get_by_role("button", name="keep")
                yes = row.get_by_role("button", name="forget", exact=True)
                keep.scroll_into_view_if_needed()
                edge = row.bounding_box()
                for b in (keep, yes, row.get_by_text("forget for good?")):
                    expect(b).to_be_visible()
                    box = b.bounding_box()
                    assert box and edge["x"] <= box["x"] and box["x"] + box["width"] <= edge["x"] + edge["width"], \
                        (width, box, edge)
                    assert b.evaluate("el => el.scrollWidth <= el.clientWidth + 1")  # the label is whole
                # the row does not scroll sideways (its left edge would be cut)
                assert row.evaluate("el => el.scrollWidth <= el.clientWidth + 1 && el.scrollLeft === 0"), width
                shots.append(tmp_path / f"forget-{'recall' if out == recall_out else 'start'}-{width}.png")
                page.screenshot(path=str(shots[-1]))
                keep.click()

        # forgotten in the search: the same memory greys out in %slm_start's table
        page.set_viewport_size({"width": 1400, "height": 1000})
        ana = search.locator(".slm-grid", has_text="Client (Ana)").first
        ana.locator("button[title^='forget this memory']").click()
        search.get_by_role("button", name="forget", exact=True).click()
        search.get_by_text("forgot “Client (Ana)").wait_for(timeout=30_000)
        twin = context_out.locator(".slm-grid", has_text="Client (Ana)").first
        expect(twin.locator(".slm-forgotten")).to_have_text("forgotten")
        expect(twin.locator("button[title^='👍']")).to_be_disabled()
        twin.scroll_into_view_if_needed()
        shots.append(tmp_path / "forgotten-elsewhere.png")
        page.screenshot(path=str(shots[-1]))

        # a second notebook in a second kernel: a session of its own, the same memories
        other = browser.new_page(viewport={"width": 1400, "height": 1000})
        panel2 = _open_and_run(other, base, token, "second.ipynb", len(second))
        out2 = panel2.locator(".jp-Cell").nth(len(second) - 2).locator(".slm-live").first
        out2.get_by_text("new session").wait_for(timeout=60_000)
        found = panel2.locator(".jp-Cell").nth(len(second) - 1).locator(".slm-live").first
        expect(found.get_by_text("Dropped the tenure_days feature").first).to_be_visible(timeout=60_000)
        shots.append(tmp_path / "second-notebook.png")
        other.screenshot(path=str(shots[-1]))
        other.close()

        # saved, its kernel shut down, closed and opened again: the saved forms alone
        saved = {"%slm_start": (START, "continued session"), "%recall": (RECALL, "Dropped the tenure_days feature"),
                 "%recall long": (LONG_RECALL, "Seasonality"), "live search": (SEARCH, "recall churn login")}
        page.keyboard.press("Control+s")
        expect(page.locator(".lm-TabBar-tab.jp-mod-dirty")).to_have_count(0)  # saved
        page.get_by_text("Kernel", exact=True).first.click()
        page.get_by_text("Shut Down Kernel", exact=True).click()
        expect(panel.locator(".jp-Toolbar").get_by_text("No Kernel")).to_be_visible()
        page.locator(".lm-TabBar-tab.jp-mod-current .lm-TabBar-tabCloseIcon").click()
        expect(panel).to_have_count(0)
        nb = nbformat.read(tmp_path / "session.ipynb", as_version=4)
        assert "widgets" not in nb.metadata  # (JupyterLab saves no widget state unless asked)
        page.goto(f"{base}/lab/workspaces/reopened/tree/session.ipynb?reset&token={token}")
        panel = page.locator(".jp-NotebookPanel:visible")
        # the widget renderer has given up on each live view (its model is not in the new kernel)
        expect(panel.get_by_text("Error displaying widget: model not found")).to_have_count(4, timeout=90_000)
        _assert_saved_form_alone(panel, saved)
        shots.append(tmp_path / "reopened.png")
        cell = panel.locator(".jp-Cell").nth
        cell(START).scroll_into_view_if_needed()
        page.screenshot(path=str(shots[-1]))

        # an untrusted copy (its outputs sanitized: no <style>, no widgets)
        nb.cells.insert(0, nbformat.v4.new_markdown_cell("A copy from someone else"))
        nbformat.write(nb, tmp_path / "copy.ipynb")
        page.goto(f"{base}/lab/workspaces/copy/tree/copy.ipynb?reset&token={token}")
        panel = page.locator(".jp-NotebookPanel:visible")
        panel.locator(".slm-static").first.wait_for(timeout=90_000)
        for index, words in saved.values():
            c = panel.locator(".jp-Cell").nth(index + 1)
            texts = _visible_outputs(c)
            assert words in texts[0] and all(t == "" for t in texts[1:]), texts  # the widget's text is empty
        assert "model not found" not in panel.inner_text() and "VBox(" not in panel.inner_text()
        shots.append(tmp_path / "untrusted.png")
        page.screenshot(path=str(shots[-1]))

        # jupyter nbconvert --to html, opened in the browser
        subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", str(tmp_path / "session.ipynb")],
                       check=True, capture_output=True, timeout=120)
        page.goto((tmp_path / "session.html").as_uri())
        _assert_saved_form_alone(page.locator("main"), saved)
        for index in (START, SEARCH):  # saved as the live views last showed them: the forgotten memory left out
            table = page.locator(".jp-Cell").nth(index).locator(".slm-static table")
            expect(table).to_contain_text("Dropped the tenure_days feature")
            expect(table).not_to_contain_text("Client (Ana)")
        page.locator(".jp-Cell").nth(RECALL).scroll_into_view_if_needed()
        shots.append(tmp_path / "nbconvert.png")
        page.screenshot(path=str(shots[-1]))
        browser.close()

    if os.environ.get("SLM_SCREENSHOT_DIR"):  # kept when asked
        for s in shots:
            shutil.copy(s, Path(os.environ["SLM_SCREENSHOT_DIR"]) / s.name)
    assert all(s.stat().st_size > 5_000 for s in shots)  # (each picture has something in it)
    with Memory(tmp_path / "memory.duckdb") as mem:
        rows = mem.store.con.execute("SELECT f.signal, f.query, f.rank, m.content FROM feedback f "
                                     "JOIN memories m USING (fact_id)").fetchall()
        origins = mem.store.con.execute("SELECT origin FROM sessions WHERE api = 'slm' ORDER BY started_at").fetchall()
    assert rows == [("up", "why was a feature dropped", 1,
                     "Dropped the tenure_days feature: it is computed after the churn date, so it leaks the label.")]
    assert [Path(o).name for (o,) in origins] == ["session.ipynb", "second.ipynb"]  # one session per notebook
