"""The notebooks, executed by nbclient in a real kernel, as `make demo` runs them."""

import re

import nbformat

from slm_magic.demo import DEFAULT_NOTEBOOK, outputs_text, run_notebook


def test_quickstart_runs_and_remembers_and_recalls(tmp_path):
    executed = run_notebook(DEFAULT_NOTEBOOK, tmp_path)
    nb = nbformat.read(executed, as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    text = "\n".join(outputs_text(executed))
    assert text.count("remembered ") >= 4
    assert "recall 'why was a feature dropped'" in text
    recall_out = next(t for t in outputs_text(executed) if t.startswith("recall 'why was a feature dropped'"))
    assert recall_out.splitlines()[2].split()[-1] != "" and "tenure_days" in recall_out.splitlines()[2]
    assert "core_memories: 1" in text and "summary_events_created" in text
    # the results were shown as widgets, whose state the notebook keeps
    views = [o.data["application/vnd.jupyter.widget-view+json"]["model_id"] for c in nb.cells
             if c.cell_type == "code" for o in c.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) == 4  # %slm_start, two %recall, and the last %recall
    html = widget_html(nb)
    top = next(v for v in html if "tenure_days" in v and "line-through" not in v)
    assert "Dropped the tenure_days feature" in top
    bars = [v for v in html if "class='slm-bar'" in v]
    assert bars and all(re.search(r">0\.\d{3}<", b) for b in bars)
    assert (tmp_path / "memory.duckdb").exists()


def widget_html(nb) -> list[str]:
    """The values of every HTML widget in the notebook's saved widget state."""
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return [m["state"].get("value", "") for m in state.values() if m["model_name"] == "HTMLModel"]
