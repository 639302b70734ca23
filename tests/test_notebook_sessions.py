"""A kernel's session and the ids a person types: a session closed elsewhere is noticed on the
next magic and never written into; any unique prefix of 6+ characters names a memory."""

import json
import subprocess
import sys

import pytest
from IPython.core.error import UsageError

from slm_magic import Memory
from slm_magic.errors import InvalidInput

from test_magics import cell, ip  # noqa: F401 - the real-shell fixture


def _magics(shell):
    return shell.magics_manager.registry["SLMMagic"]


def test_a_session_closed_elsewhere_is_noticed_and_never_written_into(ip, tmp_path, capsys):  # noqa: F811
    cell(ip, "%slm_start --query churn")
    first = _magics(ip).session_id
    with Memory(tmp_path / "memory.duckdb") as other:  # another kernel, or `slm-magic close`
        assert other.close_session(first).success
    capsys.readouterr()
    fact, err = cell(ip, "%%remember\nthe churn window is 90 days")
    said = capsys.readouterr().out
    second = _magics(ip).session_id
    assert err is None and second != first and fact.session_id == second
    notes = [line for line in said.splitlines() if line.startswith("slm_magic:")]
    assert len(notes) == 1 and f"session {first} was closed elsewhere" in notes[0] and second in notes[0]
    cell(ip, "%recall churn window")
    with Memory(tmp_path / "memory.duckdb") as other:
        assert other.session_facts(first) == [] and [f.fact_id for f in other.session_facts(second)] == [fact.fact_id]
        assert not other.session_is_closed(second)
    status, _ = cell(ip, "%slm_status")
    assert status.session_id == second


def test_closing_a_session_someone_else_closed_says_so(ip, tmp_path):  # noqa: F811
    cell(ip, "%slm_start --query churn")
    with Memory(tmp_path / "memory.duckdb") as other:
        other.close_session(_magics(ip).session_id)
    _, err = cell(ip, "%slm_close")
    assert isinstance(err, UsageError) and "already closed elsewhere" in str(err)


def test_the_api_refuses_to_remember_into_a_closed_session(mem):
    sid = mem.session_init(max_results=0).session_id
    mem.close_session(sid)
    with pytest.raises(InvalidInput, match="is closed"):
        mem.remember("late finding", session_id=sid)
    res = mem.recall("late finding", session_id=sid)  # a read is fine, but records no showing
    assert res.memories == [] and mem.count() == mem.status().summaries


def _with_ids(tmp_path, ids):
    """A memory file holding memories with these exact ids (through an exported file)."""
    src = tmp_path / "src.duckdb"
    with Memory(src) as m:
        m.remember("seed")
        m.export(tmp_path / "seed.jsonl")
    row = json.loads((tmp_path / "seed.jsonl").read_text().splitlines()[0])
    with (tmp_path / "ids.jsonl").open("w") as f:
        for i, fid in enumerate(ids):
            f.write(json.dumps(dict(row, fact_id=fid, content=f"memory number {i} about joins")) + "\n")
    with Memory(tmp_path / "memory.duckdb") as m:
        m.import_file(tmp_path / "ids.jsonl")


def test_a_unique_prefix_of_six_or_more_names_a_memory_in_every_magic(ip, tmp_path):  # noqa: F811
    _with_ids(tmp_path, ["abcdef0011223344", "abcdef9911223344", "0123456789abcdef"])
    pinned, err = cell(ip, "%slm_pin 012345")
    assert err is None and pinned.fact_id == "0123456789abcdef" and pinned.is_core
    assert cell(ip, "%slm_unpin 01234567")[0].is_core is False
    ok, err = cell(ip, "%slm_feedback abcdef00 up")
    assert err is None and ok.fact_id == "abcdef0011223344"
    _, err = cell(ip, "%slm_pin abcdef")
    assert isinstance(err, UsageError) and "abcdef0011223344" in str(err) and "abcdef9911223344" in str(err)
    _, err = cell(ip, "%slm_forget 01234")
    assert isinstance(err, UsageError) and "at least 6 characters" in str(err)
    gone, err = cell(ip, "%slm_forget abcdef99")
    assert err is None and gone.fact_id == "abcdef9911223344"


def test_the_console_takes_a_prefix_too(tmp_path):
    _with_ids(tmp_path, ["abcdef0011223344", "abcdef9911223344"])
    run = lambda *a: subprocess.run([sys.executable, "-m", "slm_magic.cli", "--db", str(tmp_path / "memory.duckdb"),  # noqa: E731
                                     *a], capture_output=True, text=True)
    got = run("pin", "abcdef00")
    assert got.returncode == 0 and got.stdout.startswith("pinned abcdef0011223344")
    amb = run("forget", "abcdef")
    assert amb.returncode == 2 and "several ids" in amb.stderr and "Traceback" not in amb.stderr
    assert run("feedback", "abcdef99", "down").returncode == 0
    assert run("forget", "abcdef99").stdout.startswith("forgotten abcdef9911223344")
