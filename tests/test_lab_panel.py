"""The Memory panel in a real browser: JupyterLab on 127.0.0.1 with the prebuilt extension and its
server extension, Debian's chromium driven by Python playwright. A memory written in another
notebook is found without typing into one's own (every memory, newest first), then by a search
with why it matched; a filter; pin, 👍 and forget (with its confirmation) reach the file; the
memory's notebook opens at its cell (by mouse and by keyboard); a markdown cell is kept with
"Remember this cell" with no kernel running; what another process and a notebook's kernel
remember appears without a reload (and the kernel's opens at its cell); the session timeline;
the panel at three widths and in the dark theme, photographed.

Runs when /usr/bin/chromium, playwright and the built extension are there (`make labext`;
`.ci/run` builds it and sets SLM_REQUIRE_BROWSER=1, where a skip would hide a failure)."""

import os
import re
from pathlib import Path

import nbformat
import pytest
from lab_server import serve

from slm_magic import Memory
from slm_magic.lab import BUILT

CHROMIUM = "/usr/bin/chromium"
HEADLESS_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"]
REQUIRED = os.environ.get("SLM_REQUIRE_BROWSER") == "1"
if not REQUIRED:
    pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed", allow_module_level=True)
    if not (BUILT / "package.json").exists():
        pytest.skip("the Memory panel is not built (make labext)", allow_module_level=True)
import playwright.sync_api as playwright_api  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.slow
SHOTS = Path(__file__).resolve().parent.parent / ".tmp" / "lab-panel"  # (gitignored: looked at, then kept in docs/)
WIDTHS = (260, 400, 600)


def _notebooks(root: Path) -> dict[str, str]:
    """other.ipynb (where the memories came from) and mine.ipynb (a markdown finding); their cell ids."""
    other = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                              "language": "python"}})
    other.cells = [nbformat.v4.new_markdown_cell("# Orders and customers"),
                   *(nbformat.v4.new_code_cell(f"step_{i} = {i}") for i in range(12)),
                   nbformat.v4.new_code_cell("orders.merge(customers, on='customer_id', how='left')"),
                   *(nbformat.v4.new_code_cell(f"later_{i} = {i}") for i in range(12))]
    mine = nbformat.v4.new_notebook(metadata=other.metadata)
    mine.cells = [nbformat.v4.new_code_cell("weekly = df.resample('W').churn.mean()"),
                  nbformat.v4.new_markdown_cell("Seasonality: weekly churn swings by a third within each month.")]
    kernel = nbformat.v4.new_notebook(metadata=other.metadata)
    kernel.cells = [nbformat.v4.new_code_cell("%load_ext slm_magic"),
                    nbformat.v4.new_code_cell("%%remember --tags live,kernel --type discovery\n"
                                              "Remembered by a kernel: the churn model is retrained every Monday.")]
    nbformat.write(other, root / "other.ipynb")
    nbformat.write(mine, root / "mine.ipynb")
    nbformat.write(kernel, root / "kernel.ipynb")
    return {"join": other.cells[13].id, "finding": mine.cells[1].id, "kernel": kernel.cells[1].id}


def _seed(db: str, notebook: str, cell_id: str) -> dict[str, str]:
    """What a kernel in other.ipynb remembered (with its provenance), from this process."""
    with Memory(db) as mem:
        sid = mem.session_init(max_results=0, origin=notebook).session_id
        out = {"join": mem.remember("The left join of orders on customer_id drops 3% of rows: 412 customers have "
                                    "no account.", session_id=sid, tags="join,data-quality", type="decision",
                                    project="churn", notebook=notebook, cell=14, cell_id=cell_id,
                                    code="orders.merge(customers, on='customer_id', how='left')"),
               "leak": mem.remember("Dropped the tenure_days feature: it is computed after the churn date, so it "
                                    "leaks the label.", session_id=sid, tags="churn,leakage", type="decision",
                                    project="churn", notebook=notebook, cell=15),
               "ana": mem.remember("Client (Ana): churn means 90 days without a login, not a cancelled contract.",
                                   session_id=sid, tags="churn,definition", type="preference", project="crm")}
        for i in range(40):  # enough for a second page
            mem.remember(f"Column c{i} of table t{i} holds {i % 7} nulls.", tags="etl", project="etl",
                         created_at=mem.now().replace(year=2025))
    return {k: f.fact_id for k, f in out.items()}


def _row(panel, fact_id: str):
    return panel.locator(f".slm-lab-item[data-id='{fact_id}']")


def _sidebar_width(page, width: int) -> None:
    """Drag the handle between the left side bar and the main area to make the panel `width` px."""
    stack = page.locator("#jp-left-stack")
    box = stack.bounding_box()
    handle = page.evaluate("""() => { const s = document.querySelector('#jp-left-stack').getBoundingClientRect();
        const h = [...document.querySelectorAll('.lm-SplitPanel-handle')].filter(h => h.offsetParent !== null)
          .map(h => h.getBoundingClientRect()).find(r => Math.abs(r.left - s.right) < 6 && r.height > 100);
        return h ? [h.left + h.width / 2, h.top + h.height / 2] : null; }""")
    assert handle, "no split handle beside the side bar"
    page.mouse.move(*handle)
    page.mouse.down()
    page.mouse.move(box["x"] + width, handle[1], steps=8)
    page.mouse.up()
    page.wait_for_function("w => Math.abs(document.querySelector('#jp-left-stack').getBoundingClientRect().width - w)"
                           " <= 3", arg=width, timeout=10_000)


def _assert_fits(page, width: int) -> None:
    """At this width nothing of the panel is cut: no sideways scrolling, every action button of
    every visible row inside the panel, no text wider than its box."""
    report = page.evaluate("""() => {
        const panel = document.querySelector('#slm-memory-panel'), p = panel.getBoundingClientRect();
        const out = {sideways: [], outside: [], cut: []};
        for (const e of panel.querySelectorAll('*')) {
          if (e.offsetParent === null) continue;
          const r = e.getBoundingClientRect();
          if (getComputedStyle(e).overflowX !== 'visible' && e.scrollWidth > e.clientWidth + 1
              && !e.matches('select, input')) out.sideways.push(e.className);
          if (e.matches('button') && (r.left < p.left - 1 || r.right > p.right + 1)) out.outside.push(e.textContent);
          if (e.matches('button') && e.scrollWidth > e.clientWidth + 1) out.cut.push(e.textContent);
        }
        return out; }""")
    assert report == {"sideways": [], "outside": [], "cut": []}, (width, report)


def test_the_memory_panel(tmp_path):
    cells = _notebooks(tmp_path)
    db = str(tmp_path / "memory.duckdb")
    ids = _seed(db, str(tmp_path / "other.ipynb"), cells["join"])
    SHOTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with serve(tmp_path, lab=True, db=db, extra=("--LabApp.expose_app_in_browser=True",
                                                 "--SlmMagicLab.poll_ms=1000")) as srv, \
            playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=HEADLESS_FLAGS)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=srv.base)
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)) if not _lab_closing(str(e)) else None)
        page.goto(f"{srv.base}/lab/workspaces/panel?reset&token={srv.token}")
        tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='slm-memory-panel']")
        tab.click(timeout=90_000)
        panel = page.locator("#slm-memory-panel")
        expect(panel).to_be_visible()

        # without typing anything: every memory, newest first, a page at a time
        items = panel.locator(".slm-lab-item")
        expect(items).to_have_count(30, timeout=30_000)
        expect(items.first).to_contain_text("Client (Ana)")
        expect(panel.locator(".slm-lab-info")).to_have_text("43 memories, newest first (showing 30)")
        expect(panel.locator(".slm-lab-count-line")).to_contain_text("43 memories · 0 pinned · 1 session")
        expect(panel.locator(".slm-lab-learning")).to_contain_text("learning phase 1")
        panel.get_by_role("button", name="show the next memories").click()
        expect(items).to_have_count(43)
        expect(panel.locator(".slm-lab-more")).to_be_hidden()

        # a search, as you type: the ranking of %recall, and why each matched
        search = panel.locator(".slm-lab-search")
        search.fill("rows lost in the join")
        expect(items.first).to_have_attribute("data-id", ids["join"], timeout=15_000)
        expect(items.first.locator(".slm-lab-reason")).to_contain_text("join")
        expect(items.first.locator("mark.slm-lab-hit", has_text="join").first).to_be_visible()  # the words, in place
        expect(items.first.locator(".slm-lab-strength")).to_have_text(  # (as %recall's table says it)
            re.compile(r"^(strong match|match|weak match) \d\.\d\d$"))
        items.first.locator(".slm-lab-parts summary").click()
        expect(items.first.locator(".slm-lab-parts-grid")).to_contain_text("words")
        page.screenshot(path=str(SHOTS / "search.png"))

        # a filter (tag), then cleared
        search.fill("")
        expect(items).to_have_count(30, timeout=15_000)
        panel.locator(".slm-lab-f-tag").select_option("churn")
        expect(items).to_have_count(2, timeout=15_000)
        expect(panel.locator(".slm-lab-info")).to_have_text("2 memories, newest first")
        panel.locator(".slm-lab-f-type").select_option("preference")
        expect(items).to_have_count(1, timeout=15_000)
        expect(items.first).to_have_attribute("data-id", ids["ana"])
        panel.locator(".slm-lab-f-tag").select_option("etl")  # (no etl memory is a preference: an empty page)
        expect(items).to_have_count(0, timeout=15_000)
        expect(panel.locator(".slm-lab-info")).to_have_text("no memory matches these filters")
        panel.get_by_role("button", name="show memories of every project, type, tag, day and author").click()
        expect(items).to_have_count(30, timeout=15_000)
        expect(panel.locator(".slm-lab-f-tag")).to_have_value("")
        expect(panel.locator(".slm-lab-clear")).to_be_hidden()

        # pin; 👍; forget, asked first (keep, then forget)
        ana = _row(panel, ids["ana"])
        ana.get_by_role("button", name="pin: always in a session’s context").click()
        expect(ana.locator(".slm-lab-pinned")).to_have_text("pinned", timeout=15_000)
        expect(panel.locator(".slm-lab-count-line")).to_contain_text("1 pinned")
        with Memory(db) as mem:
            assert mem.get(ids["ana"]).is_core
        _row(panel, ids["join"]).locator(".slm-lab-up").click()
        expect(page.locator(".jp-toast-message", has_text="marked useful").first).to_be_visible(timeout=15_000)
        assert _feedback(db) == 1  # (said once the server has written it)
        expect(_row(panel, ids["join"]).locator(".slm-lab-up")).to_be_disabled()
        expect(_row(panel, ids["join"]).locator(".slm-lab-down")).to_be_enabled()  # (a mind may change)
        leak = _row(panel, ids["leak"])
        leak.locator(".slm-lab-forget").click()
        confirm = leak.locator(".slm-lab-confirm")
        expect(confirm).to_contain_text("forget for good?")
        confirm.get_by_role("button", name="keep it").click()
        expect(confirm).to_have_count(0)
        leak.locator(".slm-lab-forget").click()
        leak.get_by_role("button", name="yes, forget it for good").click()
        expect(_row(panel, ids["leak"])).to_have_count(0, timeout=15_000)
        with Memory(db) as mem:
            assert mem.get(ids["leak"]) is None

        # where it came from: in the row on demand, and its id copied
        join = _row(panel, ids["join"])
        join.locator(".slm-lab-from summary").click()
        expect(join.locator(".slm-lab-from")).to_contain_text(f"cell id {cells['join']}")
        expect(join.locator(".slm-lab-from .slm-lab-code")).to_have_text(
            "orders.merge(customers, on='customer_id', how='left')")
        join.locator(".slm-lab-copy").click()
        expect(page.locator(".jp-toast-message", has_text=f"copied {ids['join']}").first).to_be_visible(timeout=10_000)
        assert page.evaluate("navigator.clipboard.readText()") == ids["join"]

        # where it came from, one click away: other.ipynb opens at the cell
        _row(panel, ids["join"]).get_by_role("button", name="open other.ipynb at its cell").click()
        notebook = page.locator(".jp-NotebookPanel:visible")
        active = notebook.locator(".jp-Cell.jp-mod-active")
        expect(active).to_contain_text("orders.merge(customers", timeout=60_000)
        expect(page.locator(".lm-TabBar-tab.jp-mod-current", has_text="other.ipynb")).to_be_visible()
        assert active.bounding_box()["y"] < 900  # scrolled to (it is the 14th of 26 cells)
        page.screenshot(path=str(SHOTS / "opened-cell.png"))

        # the keyboard: from the search box down the results and back, Enter opens
        _close_all(page)
        search.fill("churn")
        expect(items.nth(1)).to_be_visible(timeout=15_000)
        search.focus()
        page.keyboard.press("ArrowDown")
        expect(items.first).to_be_focused()
        page.keyboard.press("ArrowDown")
        expect(items.nth(1)).to_be_focused()
        page.keyboard.press("ArrowUp")
        expect(items.first).to_be_focused()
        page.keyboard.press("ArrowUp")
        expect(search).to_be_focused()
        search.fill("orders customer_id join")
        expect(items.first).to_have_attribute("data-id", ids["join"], timeout=15_000)
        page.keyboard.press("ArrowDown")
        expect(items.first).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator(".jp-NotebookPanel:visible .jp-Cell.jp-mod-active")).to_contain_text(
            "orders.merge(customers", timeout=60_000)

        # "Remember this cell" on a markdown cell, from its context menu
        page.evaluate("window.jupyterapp.commands.execute('docmanager:open', {path: 'mine.ipynb'})")
        mine = page.locator(".jp-NotebookPanel:visible")
        md = mine.locator(".jp-MarkdownCell").first
        md.wait_for(timeout=60_000)
        for kernel in srv.rest("GET", "api/kernels"):  # no kernel anywhere: the server keeps it
            srv.rest("DELETE", f"api/kernels/{kernel['id']}")
        assert srv.rest("GET", "api/kernels") == []
        md.click(button="right")
        page.locator(".lm-Menu-item", has_text="Remember this cell").click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog.locator(".jp-Dialog-header")).to_have_text("Remember this cell of mine.ipynb")  # (a markdown cell)
        expect(dialog.locator(".slm-lab-remember-text")).to_have_value(re.compile("^Seasonality: weekly churn"))
        dialog.locator(".slm-lab-remember-tags").fill("seasonality,finding")
        dialog.locator(".slm-lab-remember-type").select_option("discovery")
        text = dialog.locator(".slm-lab-remember-text").input_value()
        dialog.locator(".slm-lab-remember-text").fill("   ")  # (nothing to remember: Remember waits for text)
        expect(dialog.get_by_role("button", name="Remember")).to_be_disabled()
        dialog.locator(".slm-lab-remember-text").fill(text)
        expect(dialog.locator(".slm-lab-remember-share")).to_be_in_viewport(ratio=1)  # (whole, above the buttons)
        page.screenshot(path=str(SHOTS / "remember-dialog.png"))
        dialog.get_by_role("button", name="Remember").click()
        search.fill("")
        kept = items.filter(has_text="Seasonality: weekly churn")
        expect(kept).to_have_count(1, timeout=15_000)
        with Memory(db) as mem:
            fact = mem.browse(limit=1).facts[0]
            prov = mem.provenance(fact.fact_id)
        assert fact.content.startswith("Seasonality") and fact.tags == ("seasonality", "finding")
        assert fact.source == "jupyterlab" and prov.notebook == str(tmp_path / "mine.ipynb")
        assert prov.cell_id == cells["finding"] and "resample" in prov.code
        assert srv.rest("GET", "api/kernels") == []

        # the palette has the command too
        page.evaluate("window.jupyterapp.commands.execute('apputils:activate-command-palette')")
        palette = page.locator(".lm-CommandPalette-input")
        expect(palette).to_be_visible(timeout=30_000)  # (a busy machine draws it late)
        palette.fill("Remember this cell")
        expect(page.locator(".lm-CommandPalette-item", has_text="Remember this cell")).to_be_visible(timeout=30_000)
        page.keyboard.press("Escape")

        # what another process remembers appears without a reload
        with Memory(db) as mem:
            live = mem.remember("Written by a kernel while the panel is open: the churn model is retrained weekly.",
                                tags="live").fact_id
        expect(_row(panel, live)).to_be_visible(timeout=30_000)
        expect(items.first).to_have_attribute("data-id", live)
        no_notebook = _row(panel, live).locator(".slm-lab-open")  # (nothing to open: it says why instead)
        expect(no_notebook).to_be_disabled()
        expect(no_notebook).to_have_attribute("title", "no notebook: written outside a notebook")

        # a notebook renamed since: its memory says so where it opens, without an error
        with Memory(db) as mem:
            gone = mem.remember("Written in a notebook renamed since.", tags="live",
                                notebook=str(tmp_path / "renamed-since.ipynb"), cell=3).fact_id
        expect(_row(panel, gone)).to_be_visible(timeout=30_000)
        _row(panel, gone).locator(".slm-lab-open").click()
        expect(_row(panel, gone).locator(".slm-lab-provenance")).to_contain_text(
            "renamed-since.ipynb, cell [3] (no longer there: renamed or deleted?)", timeout=30_000)

        # ... and what a kernel remembers (%%remember run in a notebook), which opens at its cell
        page.evaluate("window.jupyterapp.commands.execute('docmanager:open', {path: 'kernel.ipynb'})")
        running = page.locator(".jp-NotebookPanel:visible")
        running.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=90_000)
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        by_kernel = items.filter(has_text="Remembered by a kernel")
        expect(by_kernel).to_have_count(1, timeout=90_000)
        expect(by_kernel.locator(".slm-lab-where")).to_contain_text("kernel.ipynb")
        _close_all(page)
        by_kernel.locator(".slm-lab-open").click()
        expect(page.locator(".jp-NotebookPanel:visible .jp-Cell.jp-mod-active")).to_contain_text(
            "%%remember --tags live,kernel", timeout=60_000)
        with Memory(db) as mem:
            fid = by_kernel.get_attribute("data-id")
            assert mem.provenance(fid).cell_id == cells["kernel"]  # the stable id JupyterLab sent the kernel

        # the session timeline
        panel.get_by_role("tab", name="show the sessions").click()
        sessions = panel.locator(".slm-lab-session")
        expect(sessions.first).to_be_visible(timeout=15_000)
        expect(panel.locator(".slm-lab-sessions")).to_contain_text("other.ipynb")
        expect(panel.locator(".slm-lab-sessions")).to_contain_text("mine.ipynb")
        ana_line = panel.locator(".slm-lab-session-memories li", has_text="Client (Ana)")
        ana_line.locator(".slm-lab-link").click()
        expect(ana_line.locator(".slm-lab-session-memory")).to_contain_text("not a cancelled contract.")  # whole
        panel.screenshot(path=str(SHOTS / "sessions.png"))
        panel.get_by_role("tab", name="show the memories").click()

        # narrow and wide, light and dark: nothing cut, photographed
        _close_all(page)
        search.fill("churn")
        expect(items.first).to_be_visible(timeout=15_000)
        items.first.locator(".slm-lab-parts summary").click()
        for width in WIDTHS:
            _sidebar_width(page, width)
            _assert_fits(page, width)
            panel.screenshot(path=str(SHOTS / f"panel-{width}.png"))
        page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
        page.locator("body[data-jp-theme-light='false']").wait_for(state="attached", timeout=30_000)
        page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=30_000)  # (the theme's splash)
        colours = panel.locator(".slm-lab-text").first.evaluate(
            "t => [getComputedStyle(t).color, getComputedStyle(t.closest('.slm-lab-item')).backgroundColor]")
        fg, bg = (_luminance(c) for c in colours)
        assert fg > 0.5 > bg, colours  # light text on a dark row
        _assert_fits(page, WIDTHS[-1])
        panel.screenshot(path=str(SHOTS / "panel-dark.png"))
        page.screenshot(path=str(SHOTS / "lab-dark.png"))
        browser.close()
    assert errors == [], errors


def _lab_closing(error: str) -> bool:
    """JupyterLab's own rejections when a notebook closes while its kernel connection still waits
    for a subshell it asked the kernel for (JupyterLab 4.6 with ipykernel 7), or while its
    session is still starting or its file being saved (its SessionContext and context reject
    with "Disposed"): they come or not by the timing of `_close_all`, from JupyterLab's code,
    not the panel's."""
    return error.startswith("Error: Canceled future for create_subshell_request message") or \
        error in ("Disposed", "Error: Disposed")


def _close_all(page) -> None:
    """Every notebook closed (a notebook the browser marked changed is discarded)."""
    page.evaluate("window.jupyterapp.commands.execute('application:close-all')")
    discard = page.locator(".jp-Dialog").get_by_role("button", name=re.compile("Discard|Don.t Save", re.I))
    for _ in range(4):
        try:
            discard.first.click(timeout=1500)
        except playwright_api.TimeoutError:
            break
    expect(page.locator(".jp-NotebookPanel")).to_have_count(0, timeout=15_000)


def _feedback(db: str) -> int:
    with Memory(db) as mem:
        return mem.feedback_count()


def _luminance(css: str) -> float:
    r, g, b = (int(x) for x in re.findall(r"\d+", css)[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_the_panel_on_a_team_s_postgresql(tmp_path, team_db):
    """alice's panel on the team database: bob's shared memory with its author, the author
    filter (shown on a team database), never bob's private memories."""
    with Memory(team_db["bob"]) as bob:
        shared = bob.remember("Shared by bob: the events table is in local time.", tags="etl", share=True).fact_id
        bob.remember("Bob's private scratch note about the events table.")
    with Memory(team_db["alice"]) as alice:
        own = alice.remember("Alice: the orders table is in UTC.", tags="etl").fact_id
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    with serve(tmp_path, lab=True, db=team_db["alice"], env=env) as srv, playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=HEADLESS_FLAGS)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(f"{srv.base}/lab/workspaces/team?reset&token={srv.token}")
        page.locator(".jp-SideBar .lm-TabBar-tab[data-id='slm-memory-panel']").click(timeout=90_000)
        panel = page.locator("#slm-memory-panel")
        items = panel.locator(".slm-lab-item")
        expect(items).to_have_count(2, timeout=30_000)
        expect(panel.locator(".slm-lab-who")).to_contain_text("alice")
        expect(_row(panel, shared).locator(".slm-lab-author-name")).to_have_text("by bob")
        expect(_row(panel, shared).locator(".slm-lab-forget")).to_be_disabled()  # only its author forgets it
        assert "private scratch" not in panel.inner_text()
        author = panel.locator(".slm-lab-f-author")
        expect(author).to_be_visible()
        author.select_option("bob")
        expect(items).to_have_count(1, timeout=15_000)
        expect(items.first).to_have_attribute("data-id", shared)
        author.select_option("alice")
        expect(items).to_have_count(1, timeout=15_000)
        expect(items.first).to_have_attribute("data-id", own)
        panel.screenshot(path=str(SHOTS / "panel-team.png"))
        browser.close()
