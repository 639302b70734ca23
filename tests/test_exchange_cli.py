"""Export/import round trips on every field, and the `slm-magic` console command."""

import json
import subprocess
import sys
from datetime import datetime

import pytest

from slm_magic import InvalidInput, Memory
from slm_magic.errors import StoreError
from slm_magic.engine.exchange import EXPORT_COLUMNS


def rows(mem):
    cols = ", ".join(EXPORT_COLUMNS)
    return sorted(mem.store.con.execute(f"SELECT {cols} FROM memories").fetchall())


@pytest.fixture
def filled(tmp_path, clock):
    mem = Memory(tmp_path / "a.duckdb", clock=clock)
    sid = mem.session_init(query="x").session_id
    f = mem.remember("the join on customer_id drops 3% of rows", tags="join,dq", project="churn", type="decision",
                     title="join loss", topic_key="join/loss", core=True, session_id=sid,
                     notebook="/nb/a.ipynb", cell=7, source="probe", created_at=datetime(2026, 1, 2, 3, 4, 5))
    clock.now = datetime(2026, 6, 2)
    mem.revise(f.fact_id, content="the join on customer_id drops 2.8% of rows")
    mem.remember("ünïcödé, 'quotes' and \"double\" \\ backslashes; DROP TABLE memories; --", session_id=sid)
    mem.close_session(sid)
    yield mem
    mem.close()


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_round_trip_keeps_every_field_and_never_duplicates(filled, tmp_path, suffix):
    out = tmp_path / f"export{suffix}"
    n = filled.export(out)
    assert n.total == len(rows(filled)) >= 3 and n.memories == filled.status().memories
    assert n.summaries == filled.status().summaries > 0
    with Memory(tmp_path / f"b{suffix}.duckdb") as other:
        got = other.import_file(out)
        assert (got.memories, got.summaries, got.already_present) == (n.memories, n.summaries, 0)
        assert rows(other) == rows(filled)
        again = other.import_file(out)  # twice: nothing new
        assert (again.added, again.already_present) == (0, n.total)
        assert f"0 new, {n.total} already present" in str(again)
        assert rows(other) == rows(filled)
        hit = other.recall("customer_id join").memories[0]
        assert hit.fact.revision_count == 1 and hit.fact.is_core and hit.fact.cell == 7


def test_bad_files_are_clear_errors_and_change_nothing(filled, tmp_path):
    before = rows(filled)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    for path, msg in [(bad, "line 1 is not valid JSON"), (tmp_path / "none.jsonl", "not a file"),
                      (tmp_path / "x.csv", "use a .jsonl")]:
        with pytest.raises(InvalidInput, match=msg):
            filled.import_file(path)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"hello": "world"}) + "\n")
    with pytest.raises(InvalidInput):
        filled.import_file(other)
    assert rows(filled) == before


def test_cli(tmp_path):
    db = str(tmp_path / "cli.duckdb")
    run = lambda *a: subprocess.run([sys.executable, "-m", "slm_magic.cli", "--db", db, *a],  # noqa: E731
                                    capture_output=True, text=True)
    added = run("remember", "the join drops 3% of rows", "--tags", "join", "--type", "decision")
    assert added.returncode == 0
    fid = added.stdout.strip()
    got = run("recall", "join", "rows", "--json")
    assert got.returncode == 0 and json.loads(got.stdout)["memories"][0]["fact_id"] == fid
    assert "memories: 1" in run("stats").stdout
    out = tmp_path / "x.jsonl"
    assert run("export", str(out)).returncode == 0 and out.exists()
    db2 = str(tmp_path / "cli2.duckdb")
    imp = subprocess.run([sys.executable, "-m", "slm_magic.cli", "--db", db2, "import", str(out)],
                         capture_output=True, text=True)
    assert imp.returncode == 0 and "imported 1 new (1 memory, 0 session summaries)" in imp.stdout
    bad = run("recall", "x", "--limit", "0")
    assert bad.returncode == 2 and "at least 1" in bad.stderr and "Traceback" not in bad.stderr
    assert run("import", str(tmp_path / "nope.jsonl")).returncode == 2
    assert run("close").returncode == 0


def test_the_console_stops_quietly_when_its_reader_has_gone_and_a_failed_import_makes_no_file(tmp_path):
    """`slm-magic recall … | head -1` ended in a BrokenPipeError traceback; `import missing.jsonl`
    failed but left a new empty memory file behind."""
    import os

    db = tmp_path / "m.duckdb"
    cli = [sys.executable, "-m", "slm_magic.cli", "--db", str(db)]
    subprocess.run([*cli, "remember", "the churn join doubles rows"], check=True, capture_output=True)
    read, write = os.pipe()
    os.close(read)  # (the reader is gone before a byte is written: every write fails, every time)
    try:
        gone = subprocess.run([*cli, "recall", "churn", "--jsonl"], stdout=write, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    assert gone.returncode == 1 and gone.stderr == ""
    fresh = tmp_path / "fresh.duckdb"
    missing = subprocess.run([sys.executable, "-m", "slm_magic.cli", "--db", str(fresh), "import",
                              str(tmp_path / "missing.jsonl")], capture_output=True, text=True)
    assert missing.returncode == 2 and "missing.jsonl is not a file" in missing.stderr and not fresh.exists()


def test_the_memory_options_may_come_after_the_command_too(tmp_path, capsys):
    """`slm-magic mcp --db FILE` (how a client's configuration is often written) was refused."""
    from slm_magic.cli import build_parser, main

    db = str(tmp_path / "after.duckdb")
    assert main(["remember", "a note written with the options last", "--db", db, "--user", "zed"]) == 0
    with Memory(db, user_id="zed") as mem:
        assert mem.count(user_id="zed") == 1
    parse = build_parser().parse_args
    before, after, both = (parse(["--db", "a", "stats"]), parse(["stats", "--db", "a", "--no-semantic"]),
                           parse(["--db", "a", "--user", "u", "mcp", "--embedding-model", "m"]))
    assert (before.db, before.user, before.semantic) == ("a", None, True)
    assert (after.db, after.user, after.semantic) == ("a", None, False)  # (one given after: the others keep theirs)
    assert (both.db, both.user, both.embedding_model) == ("a", "u", "m")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["mcp", "--help"])
    assert "--db" in capsys.readouterr().out


def test_a_memory_file_in_a_new_folder_is_said_on_the_console(tmp_path, capsys):
    """`slm-magic --db /mistyped/dir/x.duckdb remember hi` made the folder and a new file and
    printed only the id: a typo looked like a memory that had lost everything."""
    from slm_magic.cli import main

    db = tmp_path / "mistyped" / "x.duckdb"
    assert main(["--db", str(db), "remember", "hi"]) == 0
    out = capsys.readouterr()
    assert f"a new memory file at {db}, in a folder made for it" in out.err and len(out.out.split()) == 1
    assert main(["--db", str(db), "remember", "hi again"]) == 0
    out = capsys.readouterr()
    assert "new memory file" not in out.err  # (said once)
    assert main(["--db", str(db), "feedback", out.out.strip(), "UP"]) == 0  # (as "up")
    assert "feedback up recorded" in capsys.readouterr().out


def test_the_console_shares_a_memory_and_recalls_one_type(tmp_path, capsys):
    """The console lacked `remember --share` and `recall --type`, which the magics have."""
    from slm_magic.cli import main

    db = str(tmp_path / "m.duckdb")
    assert main(["--db", db, "remember", "the churn rule for the team", "--share", "--type", "decision"]) == 0
    assert main(["--db", db, "remember", "a churn note of my own"]) == 0
    with Memory(db) as mem:
        assert {f.content: f.shared for f in mem.browse().facts} == {"the churn rule for the team": True,
                                                                     "a churn note of my own": False}
    capsys.readouterr()
    assert main(["--db", db, "recall", "churn", "--type", "decision", "--jsonl"]) == 0
    assert [json.loads(line)["content"] for line in capsys.readouterr().out.splitlines()] == [
        "the churn rule for the team"]


@pytest.mark.parametrize("name", ["out.jsonl", "notes.JSON", "memories.parquet", "table.csv"])
def test_an_export_given_as_the_memory_file_is_named_for_what_it_is(tmp_path, name):
    """`--db out.jsonl` (an export) said "a DuckDB file of something else (no schema_version
    table)"; the file is left as it was, and none is made where there was none."""
    there = tmp_path / name
    there.write_text('{"content": "an exported note"}\n')
    with pytest.raises(StoreError, match=rf"is a \{there.suffix} file, not a memory file: import it"):
        Memory(there)
    assert there.read_text() == '{"content": "an exported note"}\n'
    with pytest.raises(StoreError, match="not a memory file"):
        Memory(tmp_path / f"new{there.suffix}")
    assert not (tmp_path / f"new{there.suffix}").exists()


def test_the_console_reads_a_note_from_stdin_as_a_cell_and_has_nothing_to_ask_of_an_empty_project(
        tmp_path, monkeypatch, capsys):
    import io

    from slm_magic.cli import main

    db = str(tmp_path / "m.duckdb")
    monkeypatch.setattr(sys, "stdin", io.StringIO("a note piped in\n\n"))
    assert main(["--db", db, "remember", "-"]) == 0
    with Memory(db) as mem:
        assert [f.content for f in mem.browse().facts] == ["a note piped in"]  # (no trailing newline)
    capsys.readouterr()
    assert main(["--db", db, "forget", "--project", "nosuch"]) == 0  # (was: exit 2, "forget 0 memories? add --yes")
    assert capsys.readouterr().out == "slm-magic: no memory of project nosuch: nothing to forget\n"


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_an_import_drops_nuls_from_every_kind_of_file(tmp_path, suffix):
    """A NUL in an imported value is dropped as a write drops it (PostgreSQL's text refuses
    it): in a JSON line it is an escape, decoded row by row, in a parquet file a character;
    a file without one is not looked at row by row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / f"notes{suffix}"
    rows = [{"content": "a note with a NUL \x00 inside", "tags": ["x\x00y"]}, {"content": "a plain note", "tags": []}]
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # ("\x00" written as its escape)
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    with Memory(tmp_path / "m.duckdb") as mem:
        assert mem.import_file(path).memories == 2
        got = {(f.content, f.tags) for f in mem.browse().facts}
    assert got == {("a note with a NUL  inside", ("xy",)), ("a plain note", ())}


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_forget_in_the_importing_file_rewrites_the_summaries_that_quote_it(filled, tmp_path, clock, suffix):
    """An export kept the summaries but not what each stands for: in the file it was imported
    into, forgetting a memory left its words in the session's summaries."""
    out = tmp_path / f"export{suffix}"
    filled.export(out)
    secret = next(f for f in filled.session_facts(next(iter(
        {r[0] for r in filled.store.con.execute("SELECT session_id FROM summary_events").fetchall()})))
        if f.content.startswith("ünïcödé"))
    with Memory(tmp_path / "b.duckdb", clock=clock) as other:
        other.import_file(out)
        quoting = lambda m: [r[0] for r in m.store.con.execute(  # noqa: E731
            "SELECT fact_id FROM memories WHERE kind = 'summary_event' AND content LIKE '%DROP TABLE%'").fetchall()]
        assert quoting(other)  # (the close's summaries quote it, in the file and in its copy)
        other.forget(secret.fact_id)
        assert quoting(other) == [] and not any("DROP TABLE" in m.content for m in other.recall("ünïcödé quotes"))
        assert other.recall("join customer_id", limit=3)[0].fact.kind == "memory"  # (the rest as it was)


def test_the_console_closes_a_session_with_the_user_s_words(tmp_path, capsys):
    from slm_magic.cli import main

    db = tmp_path / "m.duckdb"
    with Memory(db) as mem:
        sid = mem.session_init().session_id
        mem.remember("the join drops 3% of rows", session_id=sid)
    assert main(["--db", str(db), "close", sid, "--summary", "join", "checked"]) == 0
    assert f"closed session {sid}" in capsys.readouterr().out
    with Memory(db) as mem:
        assert {s.session_id: s.summary for s in mem.mem_session_start(mem.user_id).sessions_context}[sid] == \
            "join checked"
