"""A kernel's session and the ids a person types: a session closed elsewhere is noticed on the
next magic and never written into; any unique prefix of 6+ characters names a memory."""

import json
import subprocess
import sys

import pytest
from IPython.core.error import UsageError

from slm_magic import Memory
from slm_magic.errors import InvalidInput

from test_magics import cell  # (the real shell is conftest's `ip` fixture)


def _magics(shell):
    return shell.magics_manager.registry["SLMMagic"]


def test_a_session_closed_elsewhere_is_noticed_and_never_written_into(ip, tmp_path, capsys):
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


def test_closing_a_session_someone_else_closed_says_so(ip, tmp_path):
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


def test_a_unique_prefix_of_six_or_more_names_a_memory_in_every_magic(ip, tmp_path):
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
    assert got.returncode == 0 and got.stdout.startswith("pinned abcdef00 [")  # (the short id)
    amb = run("forget", "abcdef")
    assert amb.returncode == 2 and "several ids" in amb.stderr and "Traceback" not in amb.stderr
    assert run("feedback", "abcdef99", "down").returncode == 0
    assert run("forget", "abcdef99").stdout.startswith("forgotten abcdef99 [")


def _reload(shell):
    """A new kernel's magics (the extension loaded again), on the same file."""
    shell.run_line_magic("unload_ext", "slm_magic")
    shell.run_line_magic("load_ext", "slm_magic")


def test_each_notebook_continues_its_own_session(ip, monkeypatch):
    a, _ = cell(ip, "%slm_start --query churn")
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/ana/churn/second.ipynb")  # another notebook's kernel
    _reload(ip)
    b, _ = cell(ip, "%slm_start --query churn")
    assert b.is_new and b.session_id != a.session_id
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/ana/churn/analysis.ipynb")  # the first one, restarted
    _reload(ip)
    again, _ = cell(ip, "%slm_start --query churn")
    assert not again.is_new and again.session_id == a.session_id
    fresh, _ = cell(ip, "%slm_start --new --query churn")
    assert fresh.is_new and fresh.session_id not in (a.session_id, b.session_id)


def test_a_terminal_ipython_has_its_own_session(ip, monkeypatch):
    a, _ = cell(ip, "%slm_start --query churn")
    monkeypatch.delenv("JPY_SESSION_NAME")
    _reload(ip)
    magics = _magics(ip)
    assert magics.origin.startswith("ipython:") and magics.origin.endswith(f":{__import__('os').getpid()}")
    t, _ = cell(ip, "%slm_start --query churn")
    assert t.is_new and t.session_id != a.session_id


def test_the_api_keeps_its_sessions_apart_from_the_notebooks(mem):
    nb = mem.session_init(max_results=0, reuse=True, origin="/work/a.ipynb")
    api = mem.session_init(max_results=0, reuse=True)
    assert api.session_id != nb.session_id
    assert mem.session_init(max_results=0, reuse=True).session_id == api.session_id
    assert mem.session_init(max_results=0, reuse=True, origin="/work/a.ipynb").session_id == nb.session_id
    one = mem.mem_session_start("ana")  # API B: one live session per user, as its seed documents
    assert mem.mem_session_start("ana").session_id == one.session_id


def test_a_finding_keeps_its_cell_id_and_the_code_before_it(ip):
    from IPython.core.interactiveshell import ExecutionInfo

    ip.events.trigger("pre_run_cell", ExecutionInfo("df = load()\ndf.groupby('x').size()", True, False, True,
                                                     cell_id="cell-aaa"))
    ip.events.trigger("pre_run_cell", ExecutionInfo("%%remember\n...", True, False, True, cell_id="cell-bbb"))
    fact = ip.run_cell_magic("remember", "--tags eda", "the groups are balanced")
    origin = ip.magics_manager.registry["SLMMagic"].memory.provenance(fact.fact_id)
    assert origin.cell_id == "cell-bbb" and origin.code == "df = load()\ndf.groupby('x').size()"
    ip.events.trigger("pre_run_cell", ExecutionInfo("%%remember\n...", True, False, True, cell_id="cell-ccc"))
    second = ip.run_cell_magic("remember", "", "and the sizes are equal")  # a %%remember right after another
    assert ip.magics_manager.registry["SLMMagic"].memory.provenance(second.fact_id).code == origin.code
    assert origin.notebook == "/home/ana/churn/analysis.ipynb" and "groupby" in str(origin)
    cell(ip, "%config SLMMagic.keep_code = False")
    ip.events.trigger("pre_run_cell", ExecutionInfo("secret = 1", True, False, True, cell_id="c1"))
    ip.events.trigger("pre_run_cell", ExecutionInfo("%%remember\n...", True, False, True, cell_id="c2"))
    off = ip.run_cell_magic("remember", "", "no code kept for this one")
    assert ip.magics_manager.registry["SLMMagic"].memory.provenance(off.fact_id).code is None


def test_provenance_travels_through_export_and_import(tmp_path):
    with Memory(tmp_path / "a.duckdb") as a:
        fid = a.remember("balanced groups", notebook="n.ipynb", cell=3, cell_id="abc", code="df.size()").fact_id
        a.export(tmp_path / "a.parquet")
    with Memory(tmp_path / "b.duckdb") as b:
        b.import_file(tmp_path / "a.parquet")
        got = b.provenance(fid)
        assert (got.notebook, got.cell, got.cell_id, got.code) == ("n.ipynb", 3, "abc", "df.size()")


def test_closing_an_unknown_session_is_an_error_not_a_success(mem):
    with pytest.raises(InvalidInput, match="no session with id 'slm-20260601-nothere'"):
        mem.close_session("slm-20260601-nothere")
    mem.remember("a finding in a session only the memories know", session_id="s1")
    assert mem.close_session("s1").success  # (sessions given by id alone, as benchmarks do, still close)


def test_a_kernel_no_server_here_knows_keeps_its_first_name_and_stops_asking(tmp_path):
    """A kernel started by a server that is not on this machine (or a stale server file) keeps
    the name it started with, and does not look through the runtime folder at every %%remember."""
    import json
    import socket

    from slm_magic.notebook_path import NotebookPath

    with socket.socket() as s:  # (a port nothing listens on: refused at once)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "jpserver-1.json").write_text(json.dumps({"url": f"http://127.0.0.1:{port}/", "token": "t",
                                                          "root_dir": str(tmp_path)}))
    path = NotebookPath(str(tmp_path / "kernel-abc.json"))
    assert path.kernel_id == "abc" and path.current("/work/a.ipynb") == "/work/a.ipynb"
    assert path.runtime is None  # (not asked again)
    assert NotebookPath(None).current("/work/a.ipynb") == "/work/a.ipynb"  # (a terminal: nothing to ask)
    assert NotebookPath(str(tmp_path / "not-a-kernel.json")).kernel_id is None
