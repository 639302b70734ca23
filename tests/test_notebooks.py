"""The notebooks, executed by nbclient in a real kernel, as `make demo` runs them."""

import re

import nbformat

from slm_magic.demo import DEFAULT_NOTEBOOK, REPO, outputs_text, run_notebook

DATA_SCIENCE_NOTEBOOK = REPO / "notebooks" / "data_science_session.ipynb"


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
    assert "core_memories: 1" in text and "closed session slm-" in text and "Result(" not in text
    # asked in other words (no word in common), the join's memory comes back by its meaning
    other = next(t for t in outputs_text(executed) if t.startswith("recall 'how many buyers lack a profile"))
    assert "412 customers" in other and "similar meaning" in other
    from slm_magic.core.identity import default_user

    assert f"user_id: {default_user()}\n" in text  # (issue 25: it read "user_id: " with nothing after it)
    # the demo's last question: the day's session first, a strong match naming what it touched
    today = next(t for t in outputs_text(executed) if "recall 'what did I do today'" in t)
    first = today[today.index("recall 'what did I do today'"):]
    assert "The session of" in first and "4 memories, touching #join" in first and "strong match" in first
    assert "weak match" not in first  # (the day's session alone: its per-topic summaries crowded it)
    # the results were shown as widgets, whose state the notebook keeps
    views = [o.data["application/vnd.jupyter.widget-view+json"]["model_id"] for c in nb.cells
             if c.cell_type == "code" for o in c.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) == 5  # %slm_start, three %recall (one in other words), and the last %recall
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


def visible_html(nb) -> list[str]:
    """The values of the HTML widgets that are not hidden (their layout's display is not none)."""
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    hidden = {f"IPY_MODEL_{k}" for k, m in state.items()
              if m["model_name"] == "LayoutModel" and m["state"].get("display") == "none"}
    return [m["state"].get("value", "") for m in state.values()
            if m["model_name"] == "HTMLModel" and m["state"].get("layout") not in hidden]


def test_data_science_session_comes_back_in_a_fresh_kernel(tmp_path):
    executed = run_notebook(DATA_SCIENCE_NOTEBOOK, tmp_path)
    nb = nbformat.read(executed, as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    texts = outputs_text(executed)
    restart = next(i for i, c in enumerate(c for c in nb.cells if c.cell_type == "code")
                   if "restart-kernel" in c.metadata.get("tags", []))
    first, second = "\n".join(texts[:restart]), "\n".join(texts[restart:])
    assert "imported 4 new (4 memories, 0 session summaries)" in first
    # session one: the pilot's notes match but are months old: the age gate holds them back
    assert "answers this session's question well: 4 matching memories are older than 30 days" in first
    # session two, in a fresh kernel: a new session with yesterday's findings, the pinned decision,
    # and the first session's summary in the timeline
    start = next(t for t in texts[restart:] if t.startswith("new session slm-"))
    assert "answers this session's question well" not in start
    assert "(pinned) Decided with the clinic" in start and "mean perimeter" in start
    recall = next(t for t in texts[restart:] if t.startswith("recall 'why drop mean perimeter'"))
    assert "mean radius, mean perimeter and mean area" in recall.splitlines()[2]
    assert "Pilot: logistic regression without scaling" in second  # old, but what was asked
    shown = visible_html(nb)
    assert any("new session" in h for h in shown) and not any("continued session" in h for h in shown)
    assert any("earlier sessions" in h and "Breast-cancer screening: collinear size features" in h for h in shown)
    assert any("older than 30 days: 4 matching memories left out" in h for h in shown)
    assert any(">core<" in h and "Flag a tumour as malignant" in h for h in shown)
    assert any("answers this session's question well" in h and "older than 30 days" in h for h in shown)  # session one
