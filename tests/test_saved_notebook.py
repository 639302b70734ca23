"""A notebook saved with its results, read where no kernel runs: its outputs as nbclient
saves them from a real kernel, and `jupyter nbconvert --to html` of it, with and without the
widget state (JupyterLab saves none unless asked). Each result is a saved form (the whole
HTML and text table) and then the live widget, whose text is empty. The browser test
(tests/test_browser.py) looks at the same outputs in JupyterLab with the kernel shut down."""

import html
import re
import subprocess
import sys

import nbformat
import pytest

from slm_magic.demo import run_notebook

pytestmark = pytest.mark.slow

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SOURCES = ["%load_ext slm_magic",
           "%%remember --tags churn,leakage --type decision --share\n"
           "Dropped the tenure_days feature: it is computed after the churn date, so it leaks the label.",
           "%%remember --tags churn,definition\nClient (Ana): churn means 90 days without a login.",
           '%slm_start --query "churn label leakage"',
           "%recall why was a feature dropped",
           "%recall"]
START, RECALL, SEARCH = 3, 4, 5  # the cells that show results


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(src) for src in SOURCES]
    nbformat.write(nb, folder / "findings.ipynb")
    return run_notebook(folder / "findings.ipynb", folder)


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_each_result_is_saved_as_html_and_text_then_the_widget(executed):
    nb = nbformat.read(executed, as_version=4)
    for index, words in ((START, "continued session"), (RECALL, "recall why was a feature dropped"),
                         (SEARCH, "live search over")):
        shown = [o for o in nb.cells[index].outputs if o.output_type in ("display_data", "execute_result")]
        assert [o.output_type for o in shown] == ["display_data", "display_data"], index
        saved, live = shown
        assert WIDGET_VIEW not in saved.data and "class='slm-static'" in saved.data["text/html"]
        assert words in _text(saved.data["text/html"]), index
        assert WIDGET_VIEW in live.data and live.data["text/plain"] == ""  # (the table is not said twice)
        # what GitHub or a text reader shows: the text table, once
        assert "".join(o.data["text/plain"] for o in shown) == saved.data["text/plain"]
    recall = nb.cells[RECALL].outputs[-2].data
    assert recall["text/plain"].startswith("recall 'why was a feature dropped'")
    assert "Dropped the tenure_days feature" in _text(recall["text/html"])
    assert "shared by you" in recall["text/plain"] and "shared by you" in recall["text/html"]


@pytest.mark.parametrize("widget_state", [True, False], ids=["with widget state", "without widget state"])
def test_nbconvert_html_shows_the_tables_and_no_widget_repr(executed, tmp_path, widget_state):
    nb = nbformat.read(executed, as_version=4)
    if not widget_state:
        nb.metadata.pop("widgets", None)
    source = tmp_path / "findings.ipynb"
    nbformat.write(nb, source)
    run = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", str(source)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    page = (tmp_path / "findings.html").read_text()
    assert len(re.findall(r"class=[\"']slm-static[\"']", page)) == 3  # the saved form of each result
    assert ".jp-OutputArea-child:has(.slm-static) + .jp-OutputArea-child:not(:has(.slm-live))" in page
    text = _text(page)
    assert "Dropped the tenure_days feature" in text and "Client (Ana): churn means 90 days" in text
    for raw in ("model not found", "VBox(", "Tab(", "HTML(value", "LiveSearch"):
        assert raw not in text, raw
