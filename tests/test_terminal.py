"""A terminal IPython at 80 columns: every line the magics print fits, wraps at word
boundaries, says whether the session is new or continued, and explains the pinned mark."""

import os
import re
import subprocess
import sys

from wcwidth import wcswidth

FINDING = ("The left join of orders on customer_id drops 3% of rows: 412 customers have no account in the "
           "warehouse snapshot of March, so every churn rate computed on it is too low.")
SCRIPT = f"""%load_ext slm_magic
get_ipython().run_cell_magic("remember", "--tags join,data-quality,warehouse,snapshot --type decision --core", {FINDING!r})
get_ipython().run_cell_magic("remember", "--tags churn,definition", "Client: churn means 90 days without a login.")
%recall customer join rows churn
%slm_start --query "join rows"
"""


def _ipython(tmp_path, columns: int) -> list[str]:
    env = {**os.environ, "COLUMNS": str(columns), "SLM_MAGIC_DB": str(tmp_path / "m.duckdb"), "TERM": "dumb"}
    env.pop("JPY_SESSION_NAME", None)
    out = subprocess.run([sys.executable, "-m", "IPython", "--simple-prompt", "--no-banner", "--colors=NoColor",
                          "--HistoryManager.enabled=False"], input=SCRIPT, capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    # (piped input puts the next prompt before each output: take the prompts off)
    return [re.sub(r"^(In \[\d+\]: |Out\[\d+\]: )+", "", line) for line in out.stdout.splitlines()]


def test_at_80_columns_every_line_fits_and_words_stay_whole(tmp_path):
    lines = _ipython(tmp_path, 80)
    text = "\n".join(lines)
    assert all(wcswidth(line) <= 80 for line in lines), [x for x in lines if wcswidth(x) > 80]
    words = set(re.findall(r"[\w%']+", "\n".join(lines)))
    assert all(w in words for w in re.findall(r"[\w%']+", FINDING))  # no word cut across two lines
    assert "recall 'customer join rows churn': 2 memories" in text
    assert "* pinned: in every session's context" in text  # the mark has its legend
    assert re.search(r"^continued session slm-\d{8}-[0-9a-f]{8}", text, re.M)  # new or continued, said
    assert "join, data-quality, warehouse, snapshot" in text  # every tag


def test_the_table_uses_a_wider_terminal(tmp_path):
    lines = _ipython(tmp_path, 140)
    row = next(line for line in lines if "* The left join" in line)
    assert 100 < wcswidth(row) <= 140


def test_a_one_line_result_fits_80_columns_with_its_out_prompt(tmp_path):
    """`Out[10]: remembered c9319d8a [preference] Client says …` was cut at 80 columns before
    IPython put its 9-column prompt in front: 89 columns, wrapped."""
    env = {**os.environ, "COLUMNS": "80", "SLM_MAGIC_DB": str(tmp_path / "m.duckdb"), "TERM": "dumb"}
    env.pop("JPY_SESSION_NAME", None)
    script = ("%load_ext slm_magic\n"
              f"get_ipython().run_cell_magic('remember', '--type preference', {FINDING!r})\n")
    out = subprocess.run([sys.executable, "-m", "IPython", "--simple-prompt", "--no-banner", "--colors=NoColor",
                          "--HistoryManager.enabled=False"], input=script, capture_output=True, text=True, env=env,
                         timeout=120)
    shown = [re.sub(r"^(In \[\d+\]: )+", "", line) for line in out.stdout.splitlines()]  # (piping's prompts only)
    result = next(line for line in shown if line.startswith("Out[") and "remembered" in line)
    assert result.endswith("…") and wcswidth(result) <= 80, result
