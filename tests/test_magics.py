"""The magics through a real InteractiveShell (history off) on a temporary memory file."""

import pytest
from IPython.core.error import UsageError

from slm_magic import Memory
from slm_magic.results.models import Fact, MemoryChange, RecallResult, SessionInit


def cell(ip, source):
    """Run a cell as a user would; return (result, error)."""
    res = ip.run_cell(source, store_history=True)  # as a notebook does: the cell gets a number
    return res.result, res.error_in_exec


def test_remember_then_recall_with_provenance(ip, tmp_path, capsys):
    number = ip.execution_count
    fact, err = cell(ip, "%%remember --tags join,data-quality --type decision --project churn\n"
                         "The left join on customer_id drops 3% of rows.")
    assert err is None and isinstance(fact, MemoryChange) and fact.action == "remembered"
    assert isinstance(fact.fact, Fact) and str(fact).startswith("remembered ")
    assert "started session slm-" in capsys.readouterr().out  # said in one line
    assert fact.tags == ("join", "data-quality") and fact.type == "decision" and fact.project == "churn"
    assert fact.notebook == "/home/ana/churn/analysis.ipynb" and fact.cell == number
    _, err = cell(ip, "r = %recall customer join")
    r = ip.user_ns["r"]
    assert err is None and isinstance(r, RecallResult) and [m.fact_id for m in r] == [fact.fact_id]
    assert "customer_id" in r._repr_html_() and "match" in str(r) and r[0].score.bm25 > 0
    with Memory(tmp_path / "memory.duckdb") as mem:  # another kernel, later: it is in the file
        assert [m.fact_id for m in mem.recall("customer join")] == [fact.fact_id]


def test_slm_start_shows_the_context(ip):
    cell(ip, "%%remember\nchurn means 90 days without a login")
    init, err = cell(ip, '%slm_start --query "churn definition"')
    assert err is None and isinstance(init, SessionInit)
    assert init.memory_count == 1 and "Relevant Memory Context" in init._repr_html_()
    assert ip.magics_manager.registry["SLMMagic"].session_id == init.session_id


def test_pin_unpin_forget_feedback_status_close(ip):
    fact, _ = cell(ip, "%%remember\nalways fix the random seed")
    pinned, err = cell(ip, f"%slm_pin {fact.fact_id}")
    assert err is None and pinned.is_core
    assert not cell(ip, f"%slm_unpin {fact.fact_id}")[0].is_core
    msg, err = cell(ip, f"%slm_feedback {fact.fact_id} up")
    assert err is None and str(msg) == f"feedback up recorded for {fact.fact_id[:8]}"
    status, err = cell(ip, "%slm_status")
    assert err is None and status.memories == 1 and status.feedback_signals == 1
    closed, err = cell(ip, "%slm_close")
    assert err is None and closed.success and str(closed).startswith("closed session slm-")
    from slm_magic.results.models import CloseSessionResult  # (what many summaries are, said: 11 for 4 memories puzzled)

    many = str(CloseSessionResult(success=True, session_id="slm-x", summary_events_created=11))
    assert many == ("closed session slm-x: 11 session summaries written (one for the whole session, one for each "
                    "tag, project and name its memories touched)")
    assert str(CloseSessionResult(success=True, session_id="slm-x", summary_events_created=1)).endswith("written")
    assert "CloseSessionResult" not in closed._repr_html_()
    gone, err = cell(ip, f"%slm_forget {fact.fact_id}")
    assert err is None and gone.fact_id == fact.fact_id and str(gone).startswith("forgotten ")
    assert fact.fact_id not in [m.fact_id for m in cell(ip, "%recall random seed")[0]]


@pytest.mark.parametrize("source, message", [
    ("%recall", "needs a query"),
    ("%recall churn --limit 0", "at least 1"),
    ("%slm_start --max-results -5", "--max-results must be 0 or more; got -5"),
    ("%slm_start --max-age-days -1", "--max-age-days must be 0 or more; got -1"),
    ("%recall churn --nope", "unrecognized arguments"),
    ("%%remember --type fact\nx", "invalid choice"),
    ("%%remember\n   \n", "needs a cell body"),
    ("%slm_pin", "one memory id"),
    ("%slm_pin no-such-id", "no memory with id"),
    ("%slm_forget no-such-id", "no memory with id"),
    ("%slm_feedback abc sideways", "usage"),
    ("%slm_close", "no session is open"),
    ("%slm_status extra", "no arguments"),
])
def test_mistakes_are_one_line_usage_errors(ip, source, message, capsys):
    _, err = cell(ip, source)
    assert isinstance(err, UsageError) and message in str(err)
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err


def test_a_stray_byte_in_a_cell_is_a_usage_error_and_spoils_no_later_cell(ip, capsys):
    """A lone surrogate in a %%remember body ended in a UnicodeEncodeError traceback, and the
    next, valid %%remember failed too: the cell before it (its kept code) held the byte."""
    _, err = cell(ip, "%%remember --tags surr\nlone surrogate \udcff inside")
    assert isinstance(err, UsageError) and "content is not UTF-8 text: character 16" in str(err)
    fact, err = cell(ip, "%%remember --tags url\nthe dashboard lives on the team wiki")
    assert err is None and fact.action == "remembered" and ip.run_line_magic("recall", "dashboard").memories
    for source, message in (("%%remember --topic t\udcff\nx", "--topic is not UTF-8 text"),
                            ("%slm_list --project p\udcff", "--project is not UTF-8 text"),
                            ("%slm_export /tmp/ex\udcff.jsonl", "path is not UTF-8 text"),
                            (f"%slm_feedback {fact.fact_id[:8]}\udcff up", "no memory with id")):
        _, err = cell(ip, source)
        assert isinstance(err, UsageError) and message in str(err), (source, err)
    assert "Traceback" not in "".join(capsys.readouterr())


def test_an_option_may_stand_among_the_query_s_words(ip):
    """`%recall churn --limit 2 model` was refused: "unrecognized arguments: model"."""
    cell(ip, "%%remember --tags churn --type decision\nthe churn model uses gradient boosting")
    res, err = cell(ip, "%recall churn --limit 2 model")
    assert err is None and res.query == "churn model" and len(res.memories) == 1
    res, err = cell(ip, "%recall churn --type discovery model")
    assert err is None and res.query == "churn model" and res.memories == []


def test_usage_error_raised_directly(ip):
    with pytest.raises(UsageError):
        ip.run_line_magic("recall", "")
    with pytest.raises(UsageError):
        ip.run_cell_magic("remember", "--type summary", "x")


def test_help_comes_from_the_docstring(ip):
    doc = ip.find_line_magic("recall").__doc__
    assert "%recall" in doc and "--limit" in doc and "best first" in doc


def test_config(ip, tmp_path):
    other = tmp_path / "other.duckdb"
    cell(ip, f"%config SLMMagic.db_path = {str(other)!r}")
    cell(ip, "%config SLMMagic.user = 'bob'")
    cell(ip, "%config SLMMagic.limit = 1")
    cell(ip, "%%remember\nbob's churn note one")
    cell(ip, "%%remember\nbob's churn note two")
    res, _ = cell(ip, "%recall churn note")
    assert len(res) == 1 and res[0].fact.user_id == "bob"
    assert other.exists()
    cell(ip, "%config SLMMagic.user = 'carol'")
    assert cell(ip, "%recall churn note")[0].memories == []


def test_a_setting_of_the_ranking_keeps_the_session(ip, capsys):
    """`%config SLMMagic.semantic = False` made %slm_status say there was no session, and the
    next magic said it "continued this notebook's session": the file and user were the same."""
    init, _ = cell(ip, "%slm_start")
    cell(ip, "%config SLMMagic.semantic = False")
    status, err = cell(ip, "%slm_status")
    assert err is None and status.session_id == init.session_id
    capsys.readouterr()
    cell(ip, "%recall churn")
    assert "session" not in capsys.readouterr().out  # (no session opened or continued on the fly)
    cell(ip, "%config SLMMagic.user = 'bob'")  # (another user: not alice's session)
    assert cell(ip, "%slm_status")[0].session_id is None


def test_a_closing_summary_is_the_sessions_not_an_ordinary_memory(ip):
    """`%slm_close --summary` also stored its words as an ordinary memory, which then came first
    for "how accurate is the churn model?" above the finding itself. It is the session's own
    summary: in its whole-session summary (found when a question asks about sessions or days),
    and in the timeline later sessions show."""
    finding, _ = cell(ip, "%%remember --tags churn\nthe churn model reaches AUC 0.81 on the March holdout")
    cell(ip, "%slm_close --summary 'churn: data joins, leakage, first model accuracy'")
    res, _ = cell(ip, "%recall how accurate is the churn model")
    assert [m.fact_id for m in res] == [finding.fact_id]  # (no memory of the summary's words)
    sessions, _ = cell(ip, "%recall what did I do in my churn sessions")
    assert any(m.fact.kind == "summary_event" and m.content.startswith("churn: data joins, leakage")
               for m in sessions)
    init, _ = cell(ip, "%slm_start --new")
    assert [s.summary for s in init.recent_sessions][:1] == ["churn: data joins, leakage, first model accuracy"]
    cell(ip, f"%slm_forget {finding.fact_id}")  # (its session's summaries written again: the user's words stay)
    after, _ = cell(ip, "%recall what did I do in my churn sessions")
    assert any(m.content.startswith("churn: data joins, leakage") for m in after)
    # (a terminal's %slm_start lists them too, as the notebook's view does)
    assert "earlier sessions:" in str(init) and "churn: data joins, leakage, first model accuracy" in str(init)


def test_a_closing_summary_needs_no_quotes(ip):
    """`%slm_close --summary churn features and the join` was "unrecognized arguments: features
    and the join": only a quoted summary was read."""
    cell(ip, "%%remember\nthe churn features are computed before the cut-off")
    closed, err = cell(ip, "%slm_close --summary churn features and the join")
    assert err is None and closed.success
    init, _ = cell(ip, "%slm_start --new")
    assert [s.summary for s in init.recent_sessions][:1] == ["churn features and the join"]


def test_learning_can_be_turned_off_in_a_notebook_and_says_so(ip):
    """`%config SLMMagic.learning = False` was "not recognized", and `Memory(learning=False)`
    still said "learned ranking": a user whose feedback misled the ranker had no way out."""
    fact, _ = cell(ip, "%%remember\nthe seed is fixed at 42")
    cell(ip, f"%slm_feedback {fact.fact_id} up")
    cell(ip, "%config SLMMagic.learning = False")
    status, err = cell(ip, "%slm_status")
    assert err is None and status.learning == "off (learning=False)" and status.feedback_signals == 1
    assert "learning: off (learning=False)" in str(status)
    init, _ = cell(ip, "%slm_start")
    assert "learning: off, the default ranking (1 signal kept)" in " ".join(str(init).split())
    assert ip.find_line_magic("recall").__self__.memory.settings.config.learning is False


def test_a_cell_run_again_keeps_its_memory_and_takes_new_labels(ip):
    """Re-running a %%remember cell (Run All, a notebook opened again) added the same memory
    each time: three identical rows for one finding. The same text from the same notebook is
    that memory; changed options relabel it; other text, or --topic, works as before."""
    source = "%%remember --tags pricing,churn --project pricing\nPrice increase of 5% on annual plans"
    first, _ = cell(ip, source)
    again, err = cell(ip, source)
    assert err is None and again.action == "kept" and again.fact_id == first.fact_id
    assert str(again).startswith(f"already remembered {first.fact_id[:8]}")
    tagged, _ = cell(ip, source.replace("pricing,churn", "pricing,churn,q3"))
    assert tagged.action == "revised" and tagged.fact_id == first.fact_id and tagged.tags == ("pricing", "churn", "q3")
    pinned, _ = cell(ip, "%%remember --core\nPrice increase of 5% on annual plans")
    assert pinned.action == "pinned" and pinned.fact_id == first.fact_id and pinned.is_core
    assert pinned.fact.revision_count == 1  # (the relabelling's; pinning alone is no revision)
    edited, _ = cell(ip, "%%remember\nPrice increase of 5% on Annual plans")  # (an edit a duplicate ignores)
    assert edited.action == "revised" and edited.fact_id == first.fact_id and "Annual" in edited.content
    secret = "%%remember\nthe API key is <private>abc123</private> for the staging proxy"
    kept, _ = cell(ip, secret)
    assert cell(ip, secret)[0].action == "kept" and "[REDACTED]" in kept.content  # (as it is stored)
    other, _ = cell(ip, "%%remember\nPrice increase of 7% on monthly plans")
    assert other.action == "remembered" and other.fact_id != first.fact_id
    status, _ = cell(ip, "%slm_status")
    assert status.memories == 3


def test_a_project_no_memory_has_is_named_with_the_ones_there_are(ip, capsys):
    """`%recall join --project Forecast` said only "no memory matched": projects are told apart
    by case, and nothing said that no memory is filed under that one."""
    cell(ip, "%%remember --project forecast\nthe join of sales on stores drops closed shops")
    cell(ip, "%%remember --project churn\nthe churn label is 90 days without a login")
    capsys.readouterr()
    res, err = cell(ip, "%recall join --project Forecast")
    out = capsys.readouterr().out
    assert err is None and res.memories == []
    assert "no memory is filed under project 'Forecast' (projects: churn, forecast)" in out
    cell(ip, "%recall nothing like it --project forecast")  # (a project there is: no such line)
    assert "filed under" not in capsys.readouterr().out


def test_settings_in_a_profile_load_and_bad_ones_are_refused_when_set(tmp_path, monkeypatch, caplog):
    """`c.SLMMagic.user = 'bob'` in ipython_config.py (or --SLMMagic.db_path=...) made
    %load_ext fail with an AttributeError: setting a trait closed a memory not made yet."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("SLM_MAGIC_DB", str(tmp_path / "not-this.duckdb"))
    config = Config()
    config.HistoryManager.enabled = False
    config.SLMMagic.db_path = str(tmp_path / "team.duckdb")
    config.SLMMagic.user = "bob"
    shell = InteractiveShell.instance(config=config)
    try:
        shell.run_line_magic("load_ext", "slm_magic")
        status, err = cell(shell, "%slm_status")
        assert err is None and status.user_id == "bob" and status.database == str(tmp_path / "team.duckdb")
        magic = shell.magics_manager.registry["SLMMagic"]
        for setting, value in (("limit", -1), ("limit", 0), ("max_age_days", -5), ("session_timeout_hours", 0)):
            cell(shell, f"%config SLMMagic.{setting} = {value}")
            assert f"SLMMagic.{setting} must be" in caplog.text  # (IPython's %config logs it in one line)
        assert (magic.limit, magic.max_age_days, magic.session_timeout_hours) == (10, 30, 24.0)
        assert cell(shell, "%recall anything")[1] is None  # (no magic fails later over an option not typed)
    finally:
        shell.run_line_magic("unload_ext", "slm_magic")
        InteractiveShell.clear_instance()


def test_a_bad_value_in_a_profile_is_said_and_the_extension_loads_with_the_default(tmp_path, monkeypatch, capsys):
    """`c.SLMMagic.limit = -1` in a profile (or --SLMMagic.limit=-1) stopped %load_ext with a
    TraitError traceback: no magic existed afterwards."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("SLM_MAGIC_DB", str(tmp_path / "m.duckdb"))
    config = Config()
    config.HistoryManager.enabled = False
    config.SLMMagic.limit = -1
    shell = InteractiveShell.instance(config=config)
    try:
        shell.run_line_magic("load_ext", "slm_magic")
        assert "slm_magic: SLMMagic.limit must be at least 1; got -1: 10 instead" in capsys.readouterr().out
        assert shell.magics_manager.registry["SLMMagic"].limit == 10 and cell(shell, "%slm_status")[1] is None
    finally:
        shell.run_line_magic("unload_ext", "slm_magic")
        InteractiveShell.clear_instance()


def test_a_new_memory_file_is_said_once(ip, tmp_path, capsys):
    """SLM_MAGIC_DB=/nonexistent/dir/x.duckdb (a typo) made the folders and an empty file in
    silence: `memories: 0` looked like memories lost."""
    typo = tmp_path / "nonexistent" / "dir" / "x.duckdb"
    cell(ip, f"%config SLMMagic.db_path = {str(typo)!r}")
    capsys.readouterr()
    cell(ip, "%slm_status")
    assert f"slm_magic: a new memory file at {typo}, in a folder made for it" in capsys.readouterr().out
    cell(ip, "%slm_status")
    assert "a new memory file" not in capsys.readouterr().out  # (once)
    cell(ip, f"%config SLMMagic.db_path = {str(tmp_path / 'nonexistent' / 'second.duckdb')!r}")
    cell(ip, "%slm_status")
    assert "a new memory file" not in capsys.readouterr().out  # (a new file in a folder there already: first use)


def test_the_file_is_free_between_magics(ip, tmp_path):
    cell(ip, "%%remember\nheld only while a magic runs")
    with Memory(tmp_path / "memory.duckdb") as other:  # would fail on DuckDB's lock otherwise
        other.remember("written by another kernel")
    res, _ = cell(ip, "%recall kernel")
    assert [m.content for m in res] == ["written by another kernel"]


def test_export_import_magics(ip, tmp_path):
    cell(ip, "%%remember --tags a\nexported finding")
    out = tmp_path / "mem.parquet"
    msg, err = cell(ip, f"%slm_export {out}")
    assert err is None and str(msg) == f"exported 1 memory and 0 session summaries to {out}"
    cell(ip, f"%config SLMMagic.db_path = {str(tmp_path / 'fresh.duckdb')!r}")
    msg, err = cell(ip, f"%slm_import {out}")
    assert err is None and str(msg).startswith("imported 1 new (1 memory, 0 session summaries), 0 already")
    assert [m.content for m in cell(ip, "%recall exported")[0]] == ["exported finding"]
    _, err = cell(ip, f"%slm_import {tmp_path / 'missing.jsonl'}")
    assert isinstance(err, UsageError) and "not a file" in str(err)
    _, err = cell(ip, "%slm_export")
    assert isinstance(err, UsageError)


def test_quoted_option_values_lose_their_quotes(ip):
    fact, err = cell(ip, '%%remember --title "Screening threshold" --tags "a,b"\nFlag tumours at P >= 0.3.')
    assert err is None and fact.title == "Screening threshold" and fact.tags == ("a", "b")
    init, err = cell(ip, "%slm_start --query 'screening threshold'")
    assert err is None and init.memories and init.memories[0].content == "Flag tumours at P >= 0.3."


def test_feedback_from_the_magic_carries_the_query_and_rank_it_was_shown_at(ip, tmp_path):
    cell(ip, "%%remember\nthe holdout is March; never tune on it")
    cell(ip, "%%remember\nthe seed is fixed at 42 for every split")
    res, _ = cell(ip, "%recall which seed for the split")
    target = res[0].fact_id
    msg, err = cell(ip, f"%slm_feedback {target} up")
    assert err is None
    with Memory(tmp_path / "memory.duckdb") as mem:
        got = mem.store.con.execute("SELECT signal, query, rank, session_id FROM feedback").fetchall()
    assert got == [("up", "which seed for the split", 1, ip.magics_manager.registry["SLMMagic"].session_id)]


def test_recall_of_one_type_records_only_what_it_shows(ip, tmp_path):
    for i in range(6):
        cell(ip, f"%%remember\npandas merge note {i} about join keys")
    cell(ip, "%%remember --type decision\nwe merge on customer_id only")
    res, err = cell(ip, "%recall pandas merge join --type decision -n 1")
    assert err is None and [m.fact.type for m in res] == ["decision"]
    ip.magics_manager.registry["SLMMagic"].close()  # writes the pending showings
    with Memory(tmp_path / "memory.duckdb") as mem:
        shown = mem.store.con.execute("SELECT fact_id FROM recall_events").fetchall()
    assert shown == [(res[0].fact_id,)]


def test_recall_brings_related_memories_only_when_asked(ip):
    cell(ip, "%%remember --tags leakage\nDropped the tenure_days feature: it leaks the label")
    cell(ip, "%%remember\nI prefer plotting with seaborn")  # the same session, about something else
    plain, _ = cell(ip, "%recall tenure_days leakage")
    assert [m.content for m in plain] == ["Dropped the tenure_days feature: it leaks the label"]
    both, err = cell(ip, "%recall tenure_days leakage --related")
    assert err is None and [m.related_to for m in both] == [None, 1]
    assert both[1].reason == "same session as #1"


def test_remember_share_in_a_notebook(ip, tmp_path):
    change, err = cell(ip, "%%remember --share --tags churn\nchurn means no login for 30 days, says the client")
    assert err is None and change.fact.shared
    private, _ = cell(ip, "%%remember\nmy churn query is slow")
    with Memory(tmp_path / "memory.duckdb", user_id="someone-else") as other:
        got = other.recall("churn")
        assert [m.fact_id for m in got] == [change.fact.fact_id]
        assert "shared by" in str(got)
