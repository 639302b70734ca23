"""The Memory panel's REST API on a real Jupyter server (a spawned `jupyter server` with the
slm_magic.lab extension): auth and XSRF, search with why each memory matched, browsing newest
first, the filters, the actions, provenance and the notebook path, the session timeline, the
memory user, and a Memory in another process writing to the same file while the server runs
(the server holds the file only during a request). On a team's PostgreSQL too, when one runs.
Then, in process (fast: `make check`), the memory user and the parts the endpoints are made of."""

import http.cookiejar
import json
import os
import urllib.error
import urllib.request
from datetime import date, datetime, timedelta

import pytest
from lab_server import serve

from slm_magic import Memory
from slm_magic.errors import InvalidInput
from slm_magic.lab import api
from slm_magic.lab.service import MemoryService, SlmMagicLab

slow = pytest.mark.slow  # (the tests that start a server process)


def _seed(db: str, user: str | None = None, notebook: str | None = None) -> dict[str, str]:
    """Memories written from this process, as a kernel would: the server is running meanwhile."""
    with Memory(db, user_id=user) as mem:
        sid = mem.session_init(max_results=0, origin=notebook or "kernel:test").session_id
        ids = {"join": mem.remember("The left join of orders on customer_id drops 3% of rows.", session_id=sid,
                                    tags="join,data-quality", type="decision", project="churn",
                                    notebook=notebook, cell=4, cell_id="cell-join", code="orders.merge(customers)"),
               "leak": mem.remember("Dropped the tenure_days feature: it leaks the churn label.", session_id=sid,
                                    tags="churn,leakage", type="decision", project="churn"),
               "ana": mem.remember("Client (Ana): churn means 90 days without a login.", session_id=sid,
                                   tags="churn,definition", type="preference", project="crm",
                                   created_at=datetime(2026, 1, 15, 9, 0))}
        mem.close_session(sid)
    return {k: f.fact_id for k, f in ids.items()}


@slow
def test_without_the_token_or_the_xsrf_check_nothing_is_given(tmp_path):
    db = str(tmp_path / "memory.duckdb")
    with serve(tmp_path, db=db) as srv:
        _seed(db)
        for method, path, body in [("GET", "memories", None), ("GET", "status", None), ("GET", "changes", None),
                                   ("GET", "facets", None), ("GET", "sessions", None),
                                   ("POST", "memories", {"content": "sneaked in"}), ("DELETE", "memories/abcdef12", None)]:
            status, out = srv.call(method, path, body, token=False)
            assert status in (401, 403), (method, path, status)
            assert "customer_id" not in json.dumps(out) and "tenure" not in json.dumps(out)
            status, _ = srv.call(method, path, body, token=False, headers={"Authorization": "token wrong"})
            assert status in (401, 403), (method, path, status)
        # a browser's login cookie without the XSRF token: reads work, changes are refused
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(f"{srv.base}/api/status?token={srv.token}").read()
        assert any(c.name.startswith("username-") for c in jar), list(jar)
        got = json.loads(opener.open(f"{srv.base}/slm-magic/api/status").read())
        assert got["memories"] == 3
        req = urllib.request.Request(f"{srv.base}/slm-magic/api/memories", data=b'{"content": "no xsrf"}',
                                     method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            opener.open(req)
        assert refused.value.code == 403
        opener.open(f"{srv.base}/login").read()  # (a page sets the _xsrf cookie, as JupyterLab's does)
        xsrf = next(c.value for c in jar if c.name == "_xsrf")
        req = urllib.request.Request(f"{srv.base}/slm-magic/api/memories", data=b'{"content": "with xsrf"}',
                                     method="POST", headers={"X-XSRFToken": xsrf})
        assert opener.open(req).status == 201
        assert srv.get("status")["memories"] == 4


@slow
def test_search_browse_filters_and_actions(tmp_path):
    db = str(tmp_path / "memory.duckdb")
    with serve(tmp_path, db=db) as srv:
        nb = str(tmp_path / "work" / "analysis.ipynb")
        ids = _seed(db, notebook=nb)
        # no query: every memory, newest (last updated) first, paged
        page = srv.get("memories?limit=2")
        assert page["total"] == 3 and len(page["items"]) == 2 and page["query"] == ""
        assert [m["fact_id"] for m in page["items"]] == [ids["leak"], ids["join"]]
        rest = srv.get("memories?limit=2&offset=2")
        assert [m["fact_id"] for m in rest["items"]] == [ids["ana"]]
        # a search: the ranking of %recall, with the score's parts and why it matched
        found = srv.get("memories?q=rows%20lost%20in%20the%20join")
        top = found["items"][0]
        assert top["fact_id"] == ids["join"] and top["score"] > 0 and "join" in top["reason"]
        assert set(top["parts"]) >= {"relevance", "bm25", "recency", "revision"} and top["strength"] in (
            "strong", "partial", "weak")
        # (in the words %recall's table uses, for the strength and each part)
        assert top["strength_words"] in ("strong match", "match", "weak match")
        assert top["part_words"]["bm25"] == "words" and top["part_words"]["relevance"] == "match"
        assert top["part_tips"]["bm25"].startswith("bm25: ")
        with Memory(db) as mem:  # the same order as %recall's engine call
            assert [m["fact_id"] for m in found["items"]] == [
                m.fact_id for m in mem.recall("rows lost in the join", limit=200).memories]
        # filters: project, type, tag, date (the engine's project and type; tag and date here)
        assert {m["fact_id"] for m in srv.get("memories?project=crm")["items"]} == {ids["ana"]}
        assert {m["fact_id"] for m in srv.get("memories?type=decision")["items"]} == {ids["join"], ids["leak"]}
        assert {m["fact_id"] for m in srv.get("memories?tag=churn")["items"]} == {ids["leak"], ids["ana"]}
        assert {m["fact_id"] for m in srv.get("memories?q=churn&tag=leakage")["items"]} == {ids["leak"]}
        assert {m["fact_id"] for m in srv.get("memories?until=2026-02-01")["items"]} == {ids["ana"]}
        today = date.today().isoformat()
        assert {m["fact_id"] for m in srv.get(f"memories?since={today}")["items"]} == {ids["join"], ids["leak"]}
        assert srv.call("GET", "memories?since=yesterday")[0] == 400
        assert srv.call("GET", "memories?type=nonsense")[0] == 400
        facets = srv.get("facets")
        assert facets["projects"] == ["churn", "crm"] and facets["tags"][0] == "churn" and not facets["team"]
        # pin, 👍, forget
        stamp = srv.get("changes")["stamp"]
        assert srv.call("POST", f"memories/{ids['ana']}/pin", {"core": True}) [1]["is_core"] is True
        assert srv.get("status")["core"] == 1 and srv.get("changes")["stamp"] != stamp
        status, out = srv.call("POST", f"memories/{ids['join']}/feedback", {"signal": "up", "query": "join"})
        assert status == 200 and out["phase"] == 1
        assert srv.get("status")["feedback"] == 1
        assert srv.call("POST", f"memories/{ids['join']}/feedback", {"signal": "meh"})[0] == 400
        assert srv.call("POST", f"memories/{ids['ana']}/pin", {"core": False})[1]["is_core"] is False
        status, out = srv.call("DELETE", f"memories/{ids['leak'][:8]}")  # (a prefix, as copied from a row)
        assert status == 200 and out["fact_id"] == ids["leak"]
        assert srv.call("GET", f"memories/{ids['leak']}")[0] == 404
        assert srv.get("status")["memories"] == 2
        with Memory(db) as mem:
            assert mem.get(ids["leak"]) is None and mem.feedback_count() == 1


@slow
def test_provenance_the_notebook_path_and_remembering_from_the_page(tmp_path):
    db = str(tmp_path / "memory.duckdb")
    with serve(tmp_path, db=db) as srv:
        nb = str(tmp_path / "work" / "analysis.ipynb")
        ids = _seed(db, notebook=nb)
        one = srv.get(f"memories/{ids['join']}")
        prov = one["provenance"]
        assert prov["notebook"] == nb and prov["cell"] == 4 and prov["cell_id"] == "cell-join"
        assert prov["path"] == "work/analysis.ipynb" and prov["code"] == "orders.merge(customers)"
        # kept from the page: a markdown finding, no kernel anywhere
        status, fact = srv.call("POST", "memories", {
            "content": "## Finding\nSeasonality: churn swings by a third within each month.", "tags": "seasonality",
            "type": "discovery", "notebook": "work/analysis.ipynb", "cell_id": "md-7", "code": "df.resample('W')"})
        assert status == 201 and fact["source"] == "jupyterlab" and fact["tags"] == ["seasonality"]
        assert fact["notebook"] == nb  # the absolute path, as a kernel's %%remember names it
        prov = srv.get(f"memories/{fact['fact_id']}")["provenance"]
        assert prov["cell_id"] == "md-7" and prov["path"] == "work/analysis.ipynb" and prov["code"] == "df.resample('W')"
        with Memory(db) as mem:  # found by a kernel's recall
            assert mem.recall("seasonality within the month").memories[0].fact_id == fact["fact_id"]
        assert srv.call("POST", "memories", {"content": "  "})[0] == 400
        assert srv.call("POST", "memories", {"content": "x", "type": "nonsense"})[0] == 400
        # the session timeline: the seeded session (closed, with its summary) and the page's own
        sessions = srv.get("sessions")["sessions"]
        assert len(sessions) == 2
        assert sessions[0]["notebooks"] == ["analysis.ipynb"] and sessions[0]["count"] == 1
        seeded = sessions[1]
        assert seeded["count"] == 3 and seeded["projects"] == ["churn", "crm"] and seeded["summary"]
        assert {m["fact_id"] for m in seeded["memories"]} == set(ids.values())


@slow
def test_another_process_writes_while_the_server_runs_and_the_stamp_moves(tmp_path):
    db = str(tmp_path / "memory.duckdb")
    with serve(tmp_path, db=db) as srv:
        before = srv.get("changes")["stamp"]
        assert srv.get("status")["memories"] == 0
        with Memory(db) as mem:  # the server does not hold the file between requests
            fid = mem.remember("Written by a kernel while the panel is open.", tags="live").fact_id
        # (each request catches up with the file as it takes it: the next one sees the write)
        assert srv.get("changes")["stamp"] != before
        assert srv.get("memories")["items"][0]["fact_id"] == fid
        with Memory(db) as mem:
            mem.forget(fid)
        assert srv.get("status")["memories"] == 0


@slow
def test_the_memory_user_is_the_notebooks_and_the_config_overrides_it(tmp_path):
    db = str(tmp_path / "memory.duckdb")
    env = {"SLM_MAGIC_USER": "dora"}
    with serve(tmp_path, db=db, env=env) as srv:
        assert srv.get("status")["user"] == "dora"  # the kernels' user ($SLM_MAGIC_USER), not "anonymous"
    with serve(tmp_path, db=db, env=env, extra=("--SlmMagicLab.user=ana",)) as srv:
        _seed(db, user="ana")
        with Memory(db, user_id="bob") as mem:
            mem.remember("Bob's private note on churn.")
        st = srv.get("status")
        assert st["user"] == "ana" and st["memories"] == 3
        assert "Bob" not in json.dumps(srv.get("memories?q=churn"))
        assert srv.get("config")["user"] == "ana"


@slow
def test_on_a_team_s_postgresql(tmp_path, team_db):
    """The panel of alice on the team database: her memories and what bob shared (with its
    author, and the author filter), never bob's private ones; her changes reach the database."""
    with Memory(team_db["bob"]) as bob:
        shared = bob.remember("Shared by bob: the events table is in local time.", tags="etl", share=True).fact_id
        bob.remember("Bob's private scratch note about events.")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "SLM_MAGIC_USER": "alice"}
    with serve(tmp_path, db=team_db["alice"], env=env) as srv:
        status, mine = srv.call("POST", "memories", {"content": "Alice: the orders table is in UTC.", "tags": "etl"})
        assert status == 201, mine
        facets = srv.get("facets")
        assert facets["team"] and facets["authors"] == ["alice", "bob"]
        found = srv.get("memories?q=which%20table%20is%20in%20local%20time")["items"]
        assert found[0]["fact_id"] == shared and found[0]["author"] == "bob" and not found[0]["mine"]
        assert "private scratch" not in json.dumps(srv.get("memories?limit=50"))
        assert [m["fact_id"] for m in srv.get("memories?author=bob")["items"]] == [shared]
        assert srv.call("DELETE", f"memories/{shared}")[0] == 400  # only its author forgets it
        assert srv.call("DELETE", f"memories/{mine['fact_id']}")[0] == 200
    with Memory(team_db["alice"]) as alice:
        assert alice.get(mine["fact_id"]) is None and alice.readable(shared) is not None


@slow
def test_days_before_today_are_not_today(tmp_path):
    """(the date filter's edges: until is inclusive, since is inclusive)"""
    db = str(tmp_path / "memory.duckdb")
    with serve(tmp_path, db=db) as srv:
        ids = _seed(db)
        day = "2026-01-15"
        assert {m["fact_id"] for m in srv.get(f"memories?since={day}&until={day}")["items"]} == {ids["ana"]}
        after = (date(2026, 1, 15) + timedelta(days=1)).isoformat()
        assert ids["ana"] not in {m["fact_id"] for m in srv.get(f"memories?since={after}")["items"]}
        assert os.path.exists(db)


# --- in process (no server): the parts the endpoints are made of ------------------------------
class _HubUser:
    username = "maria"


def test_the_memory_user(monkeypatch):
    """The configured user, else on JupyterHub the logged-in person, else the notebooks' user
    (a plain server's token login is a made-up anonymous name); a team's database: its login role."""
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("SLM_MAGIC_USER", "dora")
    monkeypatch.delenv("SLM_MAGIC_DB", raising=False)
    service = MemoryService(SlmMagicLab())
    assert service.user_of(_HubUser()) == "dora"
    monkeypatch.setenv("JUPYTERHUB_USER", "maria")
    assert service.user_of(_HubUser()) == "maria"
    assert service.user_of({"name": "maria"}) == "maria"
    assert MemoryService(SlmMagicLab(user="ana")).user_of(_HubUser()) == "ana"
    monkeypatch.delenv("JUPYTERHUB_USER")
    assert MemoryService(SlmMagicLab(db="postgresql://alice@db/team")).user_of(_HubUser()) == ""  # (its login role)
    service.close()


def test_the_listing_s_query_is_checked():
    q = api.parse_query({"q": " churn ", "tag": "etl", "since": "2026-01-02", "limit": "5", "offset": "10"})
    assert (q.q, q.tag, q.since, q.limit, q.offset, q.narrowed) == ("churn", "etl", date(2026, 1, 2), 5, 10, True)
    assert not api.parse_query({"project": "crm", "type": "decision"}).narrowed
    for bad in ({"type": "nonsense"}, {"since": "today"}, {"limit": "many"}, {"limit": "100000"}, {"offset": "-1"}):
        with pytest.raises(InvalidInput):
            api.parse_query(bad)


def test_a_notebook_s_path_under_the_server_s_root(tmp_path):
    root = tmp_path / "root"
    (root / "work").mkdir(parents=True)
    assert api.contents_path(str(root / "work" / "a.ipynb"), str(root)) == "work/a.ipynb"
    assert api.contents_path(str(tmp_path / "elsewhere.ipynb"), str(root)) is None  # outside: not openable
    assert api.contents_path("a.ipynb", str(root)) == "a.ipynb"
    assert api.contents_path(None, str(root)) is None


def test_the_endpoints_answers_on_a_memory_in_process(clock):
    with Memory(":memory:", clock=clock) as mem:
        join = mem.remember("The left join drops 3% of rows.", tags="join", project="churn").fact_id
        clock.now += timedelta(minutes=1)
        later = mem.remember("Churn means 90 days without a login.", tags="churn", type="preference").fact_id
        page = api.listing(mem, api.Query(limit=1))
        assert page["total"] == 2 and [m["fact_id"] for m in page["items"]] == [later]
        found = api.listing(mem, api.Query(q="rows lost in the join"))
        assert found["items"][0]["fact_id"] == join and found["items"][0]["matched"]["content"]
        assert api.listing(mem, api.Query(tag="churn"))["total"] == 1
        before = api.stamp(mem)
        api.pin(mem, join, True)
        assert api.stamp(mem) != before and api.overview(mem)["core"] == 1
        api.feedback(mem, join, "up", "join")
        assert api.overview(mem)["feedback"] == 1
        facets = api.facets(mem)
        assert facets["projects"] == ["churn"] and set(facets["tags"]) == {"join", "churn"}
        assert api.forget(mem, join[:8])["fact_id"] == join
        with pytest.raises(InvalidInput):
            api.detail(mem, join, "/")


@slow
def test_a_kernel_remembers_its_notebook_by_the_name_it_has_now(tmp_path):
    """JupyterLab names a kernel's notebook once, when it starts it (Untitled.ipynb); a rename
    reaches only the server. Memories written after it named a file that no longer existed,
    and the panel's "open" failed on them."""
    from jupyter_client import BlockingKernelClient

    db = str(tmp_path / "memory.duckdb")
    # (a proxy set for the web, which the kernel inherits, is no way to the server on this machine)
    with serve(tmp_path, db=db, env={"http_proxy": "http://10.255.255.1:9", "HTTP_PROXY": "http://10.255.255.1:9",
                                     "no_proxy": "", "NO_PROXY": ""}) as srv:
        session = srv.rest("POST", "api/sessions", {"path": "Untitled.ipynb", "name": "Untitled.ipynb",
                                                    "type": "notebook", "kernel": {"name": "python3"}})
        client = BlockingKernelClient(connection_file=str(tmp_path / ".runtime" / f"kernel-{session['kernel']['id']}.json"))
        client.load_connection_file()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=60)

            def run(code: str) -> None:
                reply = client.execute_interactive(code, timeout=60, output_hook=lambda msg: None)
                assert reply["content"]["status"] == "ok", reply["content"]

            run("%load_ext slm_magic")
            run("%%remember\nwritten while it was still Untitled")
            srv.rest("PATCH", f"api/sessions/{session['id']}", {"path": "churn_analysis.ipynb",
                                                                "name": "churn_analysis.ipynb"})
            run("%%remember\nwritten after the rename")
        finally:
            client.stop_channels()
            srv.rest("DELETE", f"api/sessions/{session['id']}")
    with Memory(db) as mem:
        where = {f.content: f.notebook for f in mem.browse().facts}
    assert where == {"written while it was still Untitled": str(tmp_path / "Untitled.ipynb"),
                     "written after the rename": str(tmp_path / "churn_analysis.ipynb")}
