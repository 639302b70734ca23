"""What a new user meets in the first hour, at the magics and the command line (issue 25):
a question ending in `?`, hand-written notes to import, reading commands on a missing file,
exports as private as the file, `recall --json`, `%slm_help`, paging without a query,
forgetting a project or everything only when confirmed."""

import json
import os
import stat
import subprocess
import sys

import pytest
from IPython.core.error import UsageError

from slm_magic import Memory
from slm_magic.results.models import RecallResult
from test_magics import cell

CHURN = "Accounts flagged as test users must be excluded before labelling churn."


def cli(*args, env=None, stdin=""):
    return subprocess.run([sys.executable, "-m", "slm_magic.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, input=stdin, timeout=120)


# --- a question mark ends the question ---------------------------------------------------------
def test_a_trailing_question_mark_is_part_of_the_question(ip, capsys):
    cell(ip, f"%%remember --tags churn\n{CHURN}")
    got, err = cell(ip, "%recall which accounts should be excluded before labelling churn?")
    out = capsys.readouterr().out
    assert err is None and "not found" not in out
    assert isinstance(got, RecallResult) and got.query.endswith("churn?") and got.memories[0].content == CHURN
    _, err = cell(ip, "r = %recall labelling churn?")
    assert err is None and ip.user_ns["r"].memories[0].content == CHURN
    init, err = cell(ip, "%slm_start --query \"why are test accounts excluded?\"")
    assert err is None and init.memories and init.memories[0].content == CHURN


def test_a_magic_and_a_question_mark_alone_still_show_help(ip):
    transformed = ip.transform_cell("%recall?")
    assert "pinfo" in transformed and "%recall" in transformed
    assert "pinfo2" in ip.transform_cell("%recall??")
    assert "run_line_magic('recall', 'why?')" in ip.transform_cell("%recall why?")


# --- %slm_help, paging without a query, forgetting many ----------------------------------------
def test_slm_help_lists_every_magic_in_one_line_each(ip):
    shown, err = cell(ip, "%slm_help")
    assert err is None and cell(ip, "%slm")[0].ROWS == shown.ROWS
    listed = " ".join(name for name, _ in shown.ROWS)
    magics = ip.magics_manager.lsmagic()
    ours = [f"%{n}" for n, fn in magics["line"].items() if type(getattr(fn, "__self__", None)).__name__ == "SLMMagic"]
    ours += [f"%%{n}" for n, fn in magics["cell"].items() if type(getattr(fn, "__self__", None)).__name__ == "SLMMagic"]
    assert len(ours) >= 14 and all(name in listed.replace(",", " ").split() for name in ours), ours
    assert "<table" in shown._repr_html_()


def test_slm_list_pages_through_every_memory_newest_first(ip):
    for i in range(5):
        cell(ip, f"%%remember --project {'churn' if i % 2 else 'pricing'}\nfinding number {i}")
    page, err = cell(ip, "%slm_list --limit 2")
    assert err is None and page.total == 5 and [f.content for f in page.facts] == ["finding number 4",
                                                                                   "finding number 3"]
    page, _ = cell(ip, "%slm_list --limit 2 --page 3")
    assert [f.content for f in page.facts] == ["finding number 0"]
    page, _ = cell(ip, "%slm_list --project churn")
    assert page.total == 2 and {f.project for f in page.facts} == {"churn"}
    with pytest.raises(UsageError):
        ip.run_line_magic("slm_list", "--page 0")


def test_forgetting_a_project_or_everything_needs_yes(ip, capsys):
    for i in range(4):
        cell(ip, f"%%remember --project {'churn' if i % 2 else 'pricing'}\nfinding number {i}")
    capsys.readouterr()
    done, err = cell(ip, "%slm_forget --project churn")
    assert err is None and done is None and "would forget 2 memories of project churn" in capsys.readouterr().out
    assert cell(ip, "%slm_list")[0].total == 4  # nothing went without --yes
    done, _ = cell(ip, "%slm_forget --project churn --yes")
    assert done.count == 2 and cell(ip, "%slm_list")[0].total == 2
    capsys.readouterr()
    cell(ip, "%slm_forget --project churn")  # (none left: nothing to ask about)
    assert "no memory of project churn: nothing to forget" in capsys.readouterr().out
    cell(ip, "%slm_forget --all --yes")
    assert cell(ip, "%slm_list")[0].total == 0
    for wrong in ("", "--all --project churn", "abc123 --all"):
        with pytest.raises(UsageError, match="one of"):
            ip.run_line_magic("slm_forget", wrong)


# --- import of hand-written notes ---------------------------------------------------------------
def _notes(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text("\n".join([
        json.dumps({"content": "The price column mixes EUR and USD before 2023", "tags": ["currency"],
                    "type": "decision"}),
        json.dumps({"content": "Churn means 30 days without a login <private>pw</private>", "tags": "churn,definition",
                    "created_at": "2026-11-02T10:00:00"}),
        "",
        json.dumps({"content": "A plain note", "content_hash": None, "fact_id": None}),
    ]) + "\n")
    return path


def test_a_file_of_plain_notes_imports_once(tmp_path):
    path = _notes(tmp_path)
    with Memory(tmp_path / "m.duckdb") as mem:
        first = mem.import_file(path)
        assert first.memories == 3 and mem.import_file(path).already_present == 3
        churn = mem.recall("churn login").memories[0].fact
        assert churn.tags == ("churn", "definition") and churn.created_at.year == 2026 and churn.created_at.month == 11
        assert "[REDACTED]" in churn.content and "pw" not in churn.content and churn.user_id == mem.user_id
        assert mem.recall("price column").memories[0].fact.type == "decision"


def test_an_export_without_content_hash_imports(tmp_path):
    with Memory(tmp_path / "a.duckdb") as mem:
        mem.remember("the join on customer_id drops 3% of rows", tags="join")
        mem.export(tmp_path / "out.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    lines[0]["content_hash"] = None
    del lines[0]["updated_at"]
    (tmp_path / "edited.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with Memory(tmp_path / "b.duckdb") as other:
        assert other.import_file(tmp_path / "edited.jsonl").memories == 1
        assert other.recall("join rows").memories[0].fact.tags == ("join",)


def test_an_unreadable_line_is_named_in_each_face_s_own_words(tmp_path, ip):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "fine"}\n{"tags": ["no content"]}\n{"content": "x", "tags": [1]}\n')
    out = cli("--db", str(tmp_path / "c.duckdb"), "import", str(bad))
    assert out.returncode == 2 and "line 2 has no content" in out.stderr and "--skip-invalid" in out.stderr
    assert "on_invalid" not in out.stderr and "Traceback" not in out.stderr
    with pytest.raises(UsageError, match="line 2 has no content.*--skip-invalid"):
        ip.run_line_magic("slm_import", str(bad))
    ok = cli("--db", str(tmp_path / "c.duckdb"), "import", str(bad), "--skip-invalid")
    assert ok.returncode == 0 and "skipped line 2" in ok.stdout and "skipped line 3" in ok.stdout
    assert ok.stdout.index("line 2") < ok.stdout.index("line 3")


# --- the command line ---------------------------------------------------------------------------
def test_reading_commands_on_a_missing_file_create_nothing(tmp_path):
    where = tmp_path / "nonexistent" / "dir" / "m.duckdb"
    for command in (["stats"], ["recall", "churn"], ["list"], ["export", str(tmp_path / "e.jsonl")],
                    ["forget", "--all", "--yes"], ["pin", "abcdef"]):
        out = cli("--db", str(where), *command)
        assert out.returncode == 2 and "no memory at" in out.stderr and "Traceback" not in out.stderr, command
    assert not (tmp_path / "nonexistent").exists() and not (tmp_path / "e.jsonl").exists()
    out = cli("stats", env={"SLM_MAGIC_DB": str(where)})
    assert out.returncode == 2 and not where.parent.exists()


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_an_export_is_as_private_as_the_file(tmp_path, suffix):
    with Memory(tmp_path / "m.duckdb") as mem:
        mem.remember("a finding worth keeping")
        old_mask = os.umask(0o022)
        try:
            mem.export(tmp_path / f"e{suffix}")
        finally:
            os.umask(old_mask)
    assert stat.S_IMODE(os.stat(tmp_path / f"e{suffix}").st_mode) == stat.S_IMODE(
        os.stat(tmp_path / "m.duckdb").st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".slm-export")) == []


def test_recall_json_is_one_document_with_every_field(tmp_path):
    db = str(tmp_path / "m.duckdb")
    assert cli("--db", db, "remember", "churn means 90 days without a login", "--tags", "churn,definition",
               "--type", "decision", "--project", "crm").returncode == 0
    out = cli("--db", db, "recall", "churn", "login", "--json")
    doc = json.loads(out.stdout)
    m = doc["memories"][0]
    assert doc["query"] == "churn login" and doc["retrieval_mode"]
    assert m["tags"] == ["churn", "definition"] and m["type"] == "decision" and m["project"] == "crm"
    assert m["created_at"] and m["updated_at"] and m["score"]["relevance"] > 0 and m["strength"]
    lines = cli("--db", db, "recall", "churn", "--jsonl").stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["tags"] == ["churn", "definition"]


def test_cli_list_and_forget_with_confirmation(tmp_path):
    db = str(tmp_path / "m.duckdb")
    for i in range(3):
        cli("--db", db, "remember", f"finding number {i}", "--project", "churn" if i else "pricing")
    page = json.loads(cli("--db", db, "list", "--json", "--limit", "2").stdout)
    assert page["total"] == 3 and [f["content"] for f in page["memories"]] == ["finding number 2", "finding number 1"]
    refused = cli("--db", db, "forget", "--project", "churn")  # (not at a terminal: no question can be asked)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert json.loads(cli("--db", db, "list", "--json").stdout)["total"] == 3
    assert cli("--db", db, "forget", "--project", "churn", "--yes").returncode == 0
    assert json.loads(cli("--db", db, "list", "--json").stdout)["total"] == 1


def test_a_terminal_is_not_told_about_a_notebook(ip, monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("JPY_SESSION_NAME")
    init, _ = cell(ip, '%slm_start --query "churn"')
    with Memory(tmp_path / "memory.duckdb") as other:  # closed elsewhere: slm-magic close, another kernel
        other.close_session(init.session_id)
    capsys.readouterr()
    cell(ip, "%%remember\nstill going")
    out = capsys.readouterr().out
    assert f"session {init.session_id} was closed elsewhere; this session goes on in slm-" in out
    assert "notebook" not in out


def test_a_session_without_a_question_says_so_instead_of_weak_matches(tmp_path):
    with Memory(tmp_path / "m.duckdb") as mem:
        mem.remember("always fix the random seed", core=True)
        mem.remember("the March snapshot misses 412 accounts")
        init = mem.session_init(project_path="/tmp/work/Untitled3.ipynb")
        assert init.opened_without_question and init.message
        assert [m.strength for m in init.scored_memories] == ["listed", "listed"]
        page = init._repr_html_()
        assert "weak match" not in page and init.message in page and "pinned: in every session" in page
        assert "weak match" not in str(init) and "📌" not in str(init)


def test_your_own_shared_memory_reads_shared_by_you_in_text_and_html(tmp_path):
    with Memory(tmp_path / "m.duckdb", user_id="alice") as alice:
        alice.remember("the client counts churn after 30 days", share=True)
        mine = alice.recall("client churn")
        assert "shared by you" in str(mine) and "shared by you" in mine._repr_html_() and "shared by alice" not in str(mine)
    with Memory(tmp_path / "m.duckdb", user_id="bob") as bob:
        theirs = bob.recall("client churn")
        assert "shared by alice" in str(theirs) and "shared by you" not in theirs._repr_html_()


def test_a_page_of_memories_fits_80_columns(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with Memory(tmp_path / "m.duckdb") as mem:
        for i in range(3):
            mem.remember(f"finding {i}: " + "the join of orders and accounts loses rows " * 4, tags="join,rows",
                         core=i == 0)
        page = mem.browse(limit=2)
        text = str(page)
        assert text.splitlines()[0].startswith("memories 1-2 of 3, newest first")
        assert all(len(line) <= 80 for line in text.splitlines()) and "* pinned" in str(mem.browse(limit=5))
        assert "<table" in page._repr_html_() and "finding 2" in page._repr_html_()


def test_a_question_mark_inside_a_cell_body_or_a_string_is_left_as_written(ip):
    note = "To list them, type:\n%recall which accounts are excluded?"
    change, err = cell(ip, f"%%remember\n{note}")
    assert err is None and change.fact.content == note
    _, err = cell(ip, 's = """\n%recall why?\n"""')
    assert err is None and ip.user_ns["s"] == "\n%recall why?\n"


def test_a_page_past_the_last_says_how_many_there_are(ip):
    cell(ip, "%%remember\nthe only finding")
    page, _ = cell(ip, "%slm_list --page 5")
    assert str(page) == "no memories on this page: there is 1, on 1 page of 10"


def test_the_cli_asks_at_a_terminal_with_the_file_let_go(tmp_path):
    import pty

    db = str(tmp_path / "m.duckdb")
    for i in range(2):
        cli("--db", db, "remember", f"finding number {i}")
    for answer, left in ((b"\x04", 2), (b"y\n", 0)):  # Ctrl-D: nothing forgotten, no traceback
        master, slave = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-m", "slm_magic.cli", "--db", db, "forget", "--all"],
                                stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        said = b""
        while b"[y/N]" not in said:
            said += os.read(master, 1024)
        assert b"forget 2 memories of yours, for good?" in said
        assert cli("--db", db, "stats").returncode == 0  # the file is free while the question waits
        os.write(master, answer)
        assert proc.wait(timeout=120) == 0
        rest = b""
        try:
            while chunk := os.read(master, 1024):
                rest += chunk
        except OSError:  # (the other end closed)
            pass
        os.close(master)
        assert b"Traceback" not in said + rest
        assert json.loads(cli("--db", db, "list", "--json").stdout)["total"] == left


def test_the_count_before_forgetting_leaves_out_what_others_shared(ip, tmp_path, capsys):
    with Memory(tmp_path / "memory.duckdb", user_id="bob") as bob:
        for i in range(3):
            bob.remember(f"bob's shared finding {i}", share=True)
    cell(ip, "%%remember\nmy own finding")
    capsys.readouterr()
    cell(ip, "%slm_forget --all")
    assert "would forget 1 memory of yours" in capsys.readouterr().out
    done, _ = cell(ip, "%slm_forget --all --yes")
    assert done.count == 1 and cell(ip, "%slm_list")[0].total == 3  # bob's are still there, his


def test_a_listing_says_shared_by_you_and_names_other_authors(tmp_path):
    with Memory(tmp_path / "m.duckdb", user_id="alice") as alice:
        alice.remember("the client counts churn after 30 days", share=True)
    with Memory(tmp_path / "m.duckdb", user_id="bob") as bob:
        bob.remember("bob's own finding", share=True)
        page = bob.browse()
        assert "shared by you" in str(page) and "shared by alice" in str(page)
        assert "shared by you" in page._repr_html_() and "shared by alice" in page._repr_html_()


def test_a_session_without_a_question_over_pinned_memories_alone_says_just_that(tmp_path):
    with Memory(tmp_path / "m.duckdb") as mem:
        mem.remember("always fix the random seed", core=True)
        init = mem.session_init(project_path="/tmp/work/Untitled3.ipynb")
        assert init.message == "No question was given: these are your pinned memories. Give a query to search them all."


def test_the_forget_question_fits_80_columns(ip, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    cell(ip, "%%remember --project a-rather-long-project-name\nsomething")
    capsys.readouterr()
    cell(ip, "%slm_forget --project a-rather-long-project-name")
    out = capsys.readouterr().out
    assert "add --yes to do it" in out and all(len(line) <= 80 for line in out.splitlines())


def test_a_closed_session_line_fits_80_columns_after_its_out_prompt(monkeypatch):
    """%slm_close said its many summaries in one line of 160 characters, which a terminal of 80
    cut anywhere: the line is wrapped at words, its first leaving room for "Out[n]: "."""
    from IPython.lib.pretty import pretty

    from slm_magic.results.models import OUT_PROMPT, CloseSessionResult

    monkeypatch.setenv("COLUMNS", "80")
    res = CloseSessionResult(success=True, session_id="slm-20261205-0a1b2c3d", summary_events_created=37)
    lines = pretty(res).splitlines()
    assert len(lines) > 1 and len(lines[0]) <= 80 - OUT_PROMPT and all(len(x) <= 80 for x in lines)
    assert " ".join(lines) == str(res)  # (every word kept, in order)


def test_the_score_legend_names_the_lifts_a_score_has(ip, monkeypatch):
    """The same %recall asked again in a session scored 0.822, 0.852, 0.882 with the same match
    while the legend said "0.60 match + 0.25 recency + 0.15 revisions": the session's lift was
    on no line a terminal shows."""
    monkeypatch.setenv("COLUMNS", "80")
    cell(ip, "%%remember\nthe churn label is 90 days without a login")
    first, _ = cell(ip, "%recall churn label")
    again, _ = cell(ip, "%recall churn label")
    assert again[0].score.working_set > 0 and again[0].score.value > first[0].score.value
    assert "lift" not in str(first) and "+ a lift for each time this session showed it" in " ".join(str(again).split())


def test_an_import_of_another_users_memories_says_whose_they_are(tmp_path):
    """`slm-magic --user bob import ana.jsonl` said "imported 3 new", and bob then found none:
    an export keeps each memory's author. The report says whose they are."""
    with Memory(tmp_path / "ana.duckdb", user_id="ana") as ana:
        for i in range(3):
            ana.remember(f"ana's finding {i} on the pricing model")
        ana.export(tmp_path / "ana.jsonl")
    with Memory(tmp_path / "bob.duckdb", user_id="bob") as bob:
        report = bob.import_file(tmp_path / "ana.jsonl")
        assert report.memories == 3 and report.others == {"ana": 3}
        assert "3 memories of them are ana's, not bob's: open the memory as ana to read them" in str(report)
        mine = bob.import_file(tmp_path / "ana.jsonl")
        assert mine.others == {} and "ana's" not in str(mine)  # (nothing new: nothing to say)


def test_wrapping_keeps_indents_and_never_touches_code(monkeypatch):
    """The wrap of long result lines re-flowed the code kept with a memory into invalid Python
    and lost the indent of an import report's skipped lines."""
    from IPython.lib.pretty import pretty

    from slm_magic.results.models import ImportReport, Provenance, Skipped

    monkeypatch.setenv("COLUMNS", "80")
    code = "df = orders.merge(accounts, on='customer_id', how='left', validate='many_to_one', indicator=True)  # x"
    prov = Provenance(fact_id="a" * 16, notebook="/work/churn.ipynb", cell=3, code=code)
    assert pretty(prov).splitlines()[-1] == code
    report = ImportReport(path="/work/x.jsonl", memories=1, summaries=0, already_present=0,
                          skipped=(Skipped(position=7, reason="content must be a non-empty string " * 4),))
    lines = pretty(report).splitlines()
    skipped = lines[next(i for i, x in enumerate(lines) if "skipped line 7" in x):]
    assert all(len(x) <= 80 for x in lines) and len(skipped) == 2 and all(x.startswith("  ") for x in skipped)


def test_a_private_span_in_a_sessions_summary_is_redacted_everywhere(tmp_path):
    """`%slm_close --summary "… <private>S3cret</private> …"` kept the secret in the session's
    row, and every later %slm_start showed it in "earlier sessions"; the summary memory itself
    was redacted. Both APIs' session summaries are redacted as every memory is."""
    secret = "Rotated the replica password to <private>S3cret-Pa55</private> and told the team"
    with Memory(tmp_path / "m.duckdb", user_id="ana") as mem:
        sid = mem.session_init().session_id
        mem.remember("the replica password rotates monthly", session_id=sid)
        mem.close_session(sid, summary=secret)
        mem.mem_session_start("ana")
        mem.mem_session_summary("ana", "api key <private>abc123</private> moved to the vault")
        mem.mem_session_end("ana", summary="done; <private>token-xyz</private> revoked")
        shown = str(mem.session_init()) + " ".join(s.summary for s in mem.mem_session_start("ana").sessions_context)
        assert "[REDACTED]" in shown and "S3cret" not in shown and "token-xyz" not in shown
    raw = (tmp_path / "m.duckdb").read_bytes()
    assert b"S3cret" not in raw and b"abc123" not in raw and b"token-xyz" not in raw


def test_a_negative_score_keeps_the_table_in_its_columns():
    """A learned part can take a score below 0, and "-0.061" pushed that row's match, id and
    memory one column right of the header's."""
    from datetime import datetime

    from slm_magic.results.display import recall_text
    from slm_magic.results.models import Fact, RecallResult, ScoredMemory, SearchScore

    def row(fid, value):
        fact = Fact(fact_id=fid * 16, content=f"memory {fid}", created_at=datetime(2026, 1, 1),
                    updated_at=datetime(2026, 1, 1))
        score = SearchScore(value=value, relevance=0.98, bm25=0.9, tfidf=0.0, recency=0.1, revision=0.0)
        return ScoredMemory(fact=fact, score=score)

    text = recall_text(RecallResult(query="replica", memories=[row("a", 0.612), row("b", -0.061)]), width=80)
    head, first, second = [x for x in text.splitlines() if x.lstrip().startswith(("#", "1 ", "2 "))][:3]
    assert head.index("match") + len("match") == first.index("0.98") + 4 == second.index("0.98") + 4
    assert first.index("memory a") == second.index("memory b") == head.index("memory")


def test_a_memory_with_a_long_url_or_blob_shows_its_start(tmp_path):
    """A memory holding a URL longer than the table's three lines showed as "See …", and a
    blob as " …": the word cut at the limit was dropped, and it was the whole text."""
    from slm_magic.results.display import recall_text, wrap

    url = "https://example.com/dashboards/churn?&p=" + "abcdef" * 60
    with Memory(tmp_path / "m.duckdb") as mem:
        mem.remember(f"See {url} for the dashboard.")
        mem.remember("x" * 20_000)
        link = recall_text(mem.recall("dashboard"), width=80)
        blob = str(mem.browse(limit=5))
    assert "See https://example.com/dashboards/churn" in link and link.count("abcdef") > 10
    assert "x" * 40 in blob
    # (an ordinary word cut at the limit is still left out: it would read as another word)
    prose = "the quick brown fox jumps over the lazy dog " * 20
    shown = " ".join(wrap(prose, 41, lines=2)).split()
    assert shown[-1] == "…" and set(shown[:-1]) <= set(prose.split()) and len(shown) > 10


def test_a_days_title_keeps_its_whole_date_at_80_columns():
    """"The session of Saturday 05…": the date of a day's summary was cut, and read as another."""
    from datetime import datetime

    from slm_magic.results.display import recall_text
    from slm_magic.results.models import Fact, RecallResult, ScoredMemory, SearchScore

    at = datetime(2026, 9, 30, 12)
    fact = Fact(fact_id="f" * 16, title="The session of Wednesday 30 September 2026", content="Churn EDA: 2 memories",
                type="summary", kind="summary_event", created_at=at, updated_at=at)
    score = SearchScore(value=0.76, relevance=0.85, bm25=0.0, tfidf=0.0, recency=1.0, revision=0.0, temporal=1.0)
    text = recall_text(RecallResult(query="what did I do on Wednesday", memories=[ScoredMemory(fact=fact, score=score)]),
                       width=80)
    assert "The session of Wednesday 30 September 2026: Churn" in " ".join(text.split())
