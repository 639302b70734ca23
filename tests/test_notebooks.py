"""The notebooks, executed by nbclient in a real kernel, as `make demo` runs them."""

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
    html = [o.data["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if "data" in o and "text/html" in o.data]
    assert any("SearchScore" in h and "tenure_days" in h for h in html)
    assert (tmp_path / "memory.duckdb").exists()
