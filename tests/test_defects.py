"""Defects found by outside use, each pinned by a test: revisions that keep what they were not
told to change, an index that degrades only for real failures and comes back, imports that say
where and why a file is wrong, long memories kept whole, bulk writes that can skip a bad record,
counts that agree, readable results and help."""

import json
import subprocess
import sys

import pytest
from IPython.core.error import UsageError

from slm_magic import Memory
from slm_magic.errors import InvalidImport, InvalidInput
from slm_magic.index.sparse import SparseIndex
from slm_magic.engine.validate import MAX_CONTENT_CHARS

from test_magics import cell  # (the real shell is conftest's `ip` fixture)


# --- 2. a revision changes only what it is asked to ---------------------------------------------
def test_remember_again_under_a_topic_keeps_the_options_not_given(ip):
    first, _ = cell(ip, "%%remember --topic churn/threshold --type decision --tags thr --project churn "
                        "--title 'Churn threshold'\nchurn threshold is 0.30")
    again, err = cell(ip, "%%remember --topic churn/threshold\nchurn threshold is 0.35 after the review")
    assert err is None and again.action == "revised" and again.fact_id == first.fact_id
    assert (again.type, again.tags, again.project, again.title) == ("decision", ("thr",), "churn", "Churn threshold")
    assert again.content == "churn threshold is 0.35 after the review" and again.revision_count == 1
    changed, _ = cell(ip, "%%remember --topic churn/threshold --type pattern --tags thr,review\nthreshold 0.35")
    assert (changed.type, changed.tags, changed.project) == ("pattern", ("thr", "review"), "churn")


def test_a_topic_revised_from_elsewhere_says_where_its_new_text_came_from(mem):
    """A topic revised from another cell kept the first cell as where it came from, and one
    the assistant revised kept no source: "where from" showed code that did not produce it."""
    first = mem.remember("churn threshold is 0.30", topic_key="churn/threshold", notebook="/w/eda.ipynb", cell=15,
                         cell_id="c-15", code="threshold = 0.30")
    again = mem.remember("churn threshold is 0.35 after the review", topic_key="churn/threshold",
                         notebook="/w/review.ipynb", cell=4, cell_id="c-4", code="threshold = pick(0.35)")
    assert again.fact_id == first.fact_id and (again.notebook, again.cell) == ("/w/review.ipynb", 4)
    where = mem.provenance(first.fact_id)
    assert (where.notebook, where.cell, where.cell_id, where.code) == ("/w/review.ipynb", 4, "c-4", "threshold = pick(0.35)")
    by_assistant = mem.remember("churn threshold is 0.40", topic_key="churn/threshold", source="mcp")
    assert (by_assistant.source, by_assistant.notebook, by_assistant.cell) == ("mcp", None, None)
    assert mem.provenance(first.fact_id).code is None
    assert mem.recall("threshold 0.40").memories[0].fact.source == "mcp"
    # (a revision by id, or under the topic by a call that says nothing of where, keeps where)
    assert mem.revise(first.fact_id, content="churn threshold is 0.45").source == "mcp"
    mem.remember("churn threshold is 0.50", topic_key="churn/threshold", notebook="/w/late.ipynb", cell=9)
    assert mem.remember("churn threshold is 0.55", topic_key="churn/threshold").notebook == "/w/late.ipynb"


def test_the_api_and_the_console_keep_what_a_revision_was_not_given(tmp_path):
    db = tmp_path / "m.duckdb"
    with Memory(db) as mem:
        fact = mem.remember("join on customer_id", type="decision", tags="join,dq", project="churn",
                            title="the join", topic_key="churn/join")
        rev = mem.revise(fact.fact_id, content="join on customer_id and day")
        assert (rev.type, rev.tags, rev.project, rev.title) == ("decision", ("join", "dq"), "churn", "the join")
        again = mem.remember("join on customer_id, day and region", topic_key="churn/join")
        assert again.fact_id == fact.fact_id and again.revision_count == 2 and again.tags == ("join", "dq")
        assert mem.count() == 1
        assert mem.recall("region join")[0].fact.project == "churn"
    run = subprocess.run([sys.executable, "-m", "slm_magic.cli", "--db", str(db), "remember",
                          "join on customer_id only", "--topic", "churn/join"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    with Memory(db) as mem:
        got = mem.get(fact.fact_id)
        assert (got.content, got.type, got.tags, got.revision_count) == (
            "join on customer_id only", "decision", ("join", "dq"), 3)


# --- 3. the index degrades only when the file or the machine fails, and comes back ----------------
def test_a_programming_error_in_the_index_is_raised_not_hidden(db_path, monkeypatch):
    with Memory(db_path) as mem:
        mem.remember("partitioned parquet files")

    def broken(self, *a, **k):
        raise TypeError("a bug in the index")

    monkeypatch.setattr(SparseIndex, "channel_scores", broken)
    with Memory(db_path) as mem, pytest.raises(TypeError, match="a bug in the index"):
        mem.recall("parquet")


def test_a_degraded_memory_builds_its_index_again_on_its_next_attach(db_path, monkeypatch):
    with Memory(db_path) as mem:
        mem.remember("partitioned parquet files are faster to scan")
    real = SparseIndex.add_documents

    def no_memory(self, *a, **k):
        raise MemoryError("out of memory while building")

    monkeypatch.setattr(SparseIndex, "add_documents", no_memory)
    mem = Memory(db_path)
    mem.detach()
    with mem.attached():
        res = mem.recall("parquet scan")
    assert mem.index is None and res.retrieval_mode == "bm25_meaning_sql_fallback" and res.degraded_mode
    assert "MemoryError" in res.degraded_reason and len(res) == 1  # the fallback still answers
    monkeypatch.setattr(SparseIndex, "add_documents", real)
    with mem.attached():
        res = mem.recall("parquet scan")
    assert mem.index is not None and "sql" not in res.retrieval_mode and not res.degraded_mode
    assert len(res) == 1
    mem.close()


# --- 4. an import error names the line and the problem, and imports nothing -----------------------
def _exported(tmp_path, n=3):
    src = tmp_path / "src.jsonl"
    with Memory(tmp_path / "src.duckdb") as mem:
        for i in range(n):
            mem.remember(f"finding {i} about the churn join")
        mem.export(src)
    return [json.loads(line) for line in src.read_text().splitlines()]


@pytest.mark.parametrize("lines, where", [
    (["garbage"], "line 1 is not valid JSON"),
    (["GOOD", "GOOD", "{\"fact_id\": "], "line 3 is not valid JSON"),
    (["GOOD", "[1, 2]"], "line 2 is a JSON list, not an object"),
])
def test_a_file_that_is_not_json_lines_names_its_line(tmp_path, lines, where):
    good = _exported(tmp_path)
    path = tmp_path / "garbage.jsonl"
    path.write_text("\n".join(json.dumps(good[i]) if x == "GOOD" else x for i, x in enumerate(lines)) + "\n")
    with Memory(tmp_path / "m.duckdb") as mem:
        with pytest.raises(InvalidInput) as got:
            mem.import_file(path)
        assert where in str(got.value) and "nothing was imported" in str(got.value)
        assert "Invalid Input Error" not in str(got.value) and "byte" not in str(got.value)
        assert mem.count() == 0


def test_an_invalid_row_names_its_line_and_imports_nothing_unless_skipped(tmp_path):
    rows = _exported(tmp_path, 5)
    rows[3]["content"] = "   "
    path = tmp_path / "one_bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Memory(tmp_path / "m.duckdb") as mem:
        with pytest.raises(InvalidInput, match="line 4 has no content; nothing was imported"):
            mem.import_file(path)
        assert mem.count() == 0
        got = mem.import_file(path, on_invalid="skip")
        assert got.added == 4 and [(s.position, s.reason) for s in got.skipped] == [(4, "has no content")]
        assert "skipped line 4: has no content" in str(got) and mem.count() == 4


def test_lines_that_are_not_json_objects_are_skipped_too_with_their_own_numbers(tmp_path, ip):
    """--skip-invalid stopped at a line that was not JSON or not UTF-8 and imported nothing;
    the lines after one set aside keep their numbers in the file."""
    good = _exported(tmp_path, 4)
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join([json.dumps(good[0]).encode(), b"", b'{"content": "no closing brace"',
                                  json.dumps(good[1]).encode(), b"\xe9t\xe9 in latin-1", b"[1, 2]",
                                  b'{"content": 42}', json.dumps(good[2]).encode()]) + b"\n")
    with Memory(tmp_path / "m.duckdb") as mem:
        with pytest.raises(InvalidImport, match="line 3 is not valid JSON.*on_invalid='skip' imports the valid"):
            mem.import_file(path)
        assert mem.count() == 0
        got = mem.import_file(path, on_invalid="skip")
        assert got.added == 3 and mem.count() == 3
        assert [(s.position, s.reason.split(" (")[0]) for s in got.skipped] == [
            (3, "is not valid JSON"), (5, "is not UTF-8 text"), (6, "is a JSON list, not an object with a memory's fields"),
            (7, "has content that is not text")]
        again = mem.import_file(path, on_invalid="skip")
        assert again.added == 0 and again.already_present == 3 and mem.count() == 3
    got, err = cell(ip, f"%slm_import '{path}' --skip-invalid")
    assert err is None and got.added == 3 and "skipped line 5: is not UTF-8 text" in str(got)


def test_import_magic_and_console_take_skip_invalid(ip, tmp_path):
    rows = _exported(tmp_path, 3)
    rows[0]["kind"] = "nonsense"
    path = tmp_path / "bad row.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, err = cell(ip, f"%slm_import '{path}'")
    assert isinstance(err, UsageError) and "line 1 has an unknown kind 'nonsense'" in str(err)
    got, err = cell(ip, f"%slm_import '{path}' --skip-invalid")
    assert err is None and got.added == 2 and "skipped line 1" in str(got)
    db = tmp_path / "cli.duckdb"
    run = lambda *a: subprocess.run([sys.executable, "-m", "slm_magic.cli", "--db", str(db), *a],  # noqa: E731
                                    capture_output=True, text=True)
    refused = run("import", str(path))
    assert refused.returncode == 2 and "line 1 has an unknown kind" in refused.stderr
    assert "Traceback" not in refused.stderr
    took = run("import", str(path), "--skip-invalid")
    assert took.returncode == 0 and "imported 2 new" in took.stdout and "skipped line 1" in took.stdout


# --- 5. a long memory is kept whole --------------------------------------------------------------
def test_a_memory_of_a_megabyte_is_kept_whole_and_found(mem):
    log = "".join(f"step {i}: loss {1 / (i + 1):.6f} lr 0.001 batch 512\n" for i in range(25_000))
    log += "Traceback: CUDA out of memory in the attention block\n"
    assert len(log) > 1_000_000
    fact = mem.remember(log, tags="training,log")
    assert mem.get(fact.fact_id).content == log
    assert mem.recall("CUDA out of memory attention")[0].fact_id == fact.fact_id


def test_beyond_the_limit_the_message_says_what_to_do(mem):
    with pytest.raises(InvalidInput, match="protects this machine: save the text to a file"):
        mem.remember("x" * (MAX_CONTENT_CHARS + 1))
    assert mem.count() == 0


# --- 6. a bulk write can skip its bad records ----------------------------------------------------
def test_remember_many_refuses_all_by_default_and_skips_on_request(mem):
    records = [{"content": f"finding {i} about the warehouse"} for i in range(1_400)]
    records[700] = {"content": ""}
    records[1_100] = {"content": "ok", "type": "fact"}
    with pytest.raises(InvalidInput, match=r"content is empty \(record 700\)"):
        mem.remember_many(records)
    assert mem.count() == 0
    got = mem.remember_many(records, on_invalid="skip", batch_size=500)
    assert len(got) == 1_398 == mem.count()
    assert [s.position for s in got.skipped] == [700, 1_100]
    assert "content is empty" in got.skipped[0].reason and "type must be one of" in got.skipped[1].reason
    assert mem.get(got[0]).content == "finding 0 about the warehouse"


def test_a_bad_record_in_a_later_batch_is_named_by_its_place_in_the_input(mem):
    records = [{"content": f"finding {i}"} for i in range(30)]
    records[25] = {"content": 3}
    with pytest.raises(InvalidInput, match=r"\(record 25\)"):
        mem.remember_many(records, batch_size=10)


# --- 7. counts that agree ------------------------------------------------------------------------
def test_status_and_export_count_the_same_rows_by_kind(ip, tmp_path):
    for i in range(3):
        cell(ip, f"%%remember --tags t{i}\nfinding number {i} on the pipeline")
    cell(ip, "%slm_close --summary 'pipeline review'")
    status, _ = cell(ip, "%slm_status")
    out = tmp_path / "all.jsonl"
    exported, _ = cell(ip, f"%slm_export {out}")
    assert (status.memories, status.summaries) == (exported.memories, exported.summaries)
    assert exported.total == len(out.read_text().splitlines()) and exported.summaries > 0
    again, _ = cell(ip, f"%slm_import {out}")
    assert str(again).startswith(f"imported 0 new, {exported.total} already present")


# --- 8. and 9. results and help a person can read ------------------------------------------------
@pytest.mark.parametrize("source", ["%slm_close", "%slm_export {out}", "%slm_import {out}",
                                    "%slm_feedback {fid} up", "%slm_pin {fid}", "%slm_status"])
def test_every_result_reads_as_text_and_as_html(ip, tmp_path, source):
    fact, _ = cell(ip, "%%remember\nthe seed is fixed at 42")
    out = tmp_path / "x.jsonl"
    if "import" in source:
        cell(ip, f"%slm_export {out}")
    got, err = cell(ip, source.format(out=out, fid=fact.fact_id))
    assert err is None
    text, page = str(got), got._repr_html_()
    for raw in ("Result(", "Report(", "Recorded(", "Change(", "success=", "'exported"):
        assert raw not in text and raw not in page
    assert text.splitlines()[0] and "<" not in text


def test_magic_help_has_no_stray_rest_marker(ip):
    for name in ("recall", "slm_start", "slm_close", "slm_import", "slm_export"):
        doc = ip.find_line_magic(name).__doc__
        assert not doc.lstrip().startswith("::") and doc.startswith(f"%{name} "), doc[:40]
    assert ip.find_cell_magic("remember").__doc__.startswith("%remember ")


def test_a_topic_revised_from_the_console_says_so(tmp_path, capsys):
    """`slm-magic remember --topic owner ...` over a notebook's memory kept the notebook's cell
    and its code as where the new text came from."""
    from slm_magic.cli import main

    db = tmp_path / "m.duckdb"
    with Memory(db) as mem:
        first = mem.remember("The churn dashboard is owned by Ana.", topic_key="owner", notebook="/w/a.ipynb", cell=4,
                             code='prep = "x"')
    assert main(["--db", str(db), "remember", "--topic", "owner", "The churn dashboard is owned by Bruno."]) == 0
    with Memory(db) as mem:
        fact, where = mem.get(first.fact_id), mem.provenance(first.fact_id)
    assert fact.content.endswith("Bruno.") and fact.source == "console"
    assert (where.notebook, where.cell, where.code) == (None, None, None)
