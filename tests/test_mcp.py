"""`slm-magic mcp` through the SDK's own stdio client, in real processes: the tools and their
schemas, the session lifecycle, a notebook kernel in another process on the same file, errors
that leave the server serving, and a killed server or client that leaves the file whole.

No sleeps: each step waits for the line or the answer the other process sends back.
"""

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402  (comes with mcp)
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from slm_magic import Memory  # noqa: E402
from slm_magic.results.models import MEMORY_TYPES  # noqa: E402

TOOLS = {"session_init", "recall", "remember", "close_session", "mem_session_start", "mem_save", "mem_search",
         "mem_session_summary", "mem_session_end", "mem_get_observation", "mem_timeline", "mem_stats", "feedback",
         "pin", "list_memories", "forget", "forget_all"}
SESSION_INIT_KEYS = {"success", "session_id", "context", "memories", "memory_count", "core_memory", "degraded_mode",
                     "retrieval_mode", "calibration_status", "calibration_id", "answer_confidence", "abstained",
                     "abstention_reason", "learning"}
TIMEOUT_S = 30  # a bound for a hung process, never a wait: every step returns as soon as it is done


@pytest.fixture
def anyio_backend():
    return "asyncio"


def server_command(db, user: str | None = None) -> list[str]:
    return ["-m", "slm_magic.cli", "--db", str(db), *(["--user", user] if user else []), "mcp"]


@contextlib.asynccontextmanager
async def connected(db, tmp_path, user: str | None = None):
    """A ClientSession on `slm-magic --db DB mcp`, started by the SDK's stdio client."""
    params = StdioServerParameters(command=sys.executable, args=server_command(db, user))
    with open(tmp_path / "server.stderr", "a") as errlog:
        with anyio.fail_after(TIMEOUT_S):
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def call(session: ClientSession, tool: str, **arguments):
    """A tool call that must succeed; its structured answer."""
    res = await session.call_tool(tool, arguments)
    assert not res.is_error, res.content[0].text
    assert json.loads(res.content[0].text) == res.structured_content  # the text is the same JSON
    return res.structured_content


async def fails(session: ClientSession, tool: str, **arguments) -> str:
    """A tool call that must fail as a tool error; its message."""
    res = await session.call_tool(tool, arguments)
    assert res.is_error, res.structured_content
    return res.content[0].text


# --- the tools and their schemas ---------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.anyio
async def test_lists_every_tool_with_its_schema_subprocess(tmp_path):
    async with connected(tmp_path / "m.duckdb", tmp_path) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    required = {name: set(t.input_schema.get("required", ())) for name, t in tools.items()}
    assert required == {
        "session_init": set(), "recall": {"query"}, "remember": {"content"},
        "close_session": set(), "mem_session_start": set(), "mem_save": {"content", "type", "title"},
        "mem_search": {"query"}, "mem_session_summary": {"summary"}, "mem_session_end": {"summary"},
        "mem_get_observation": {"observation_id"}, "mem_timeline": {"observation_id"}, "mem_stats": set(),
        "feedback": {"fact_id", "signal"}, "pin": {"fact_id"}, "list_memories": set(), "forget": {"fact_id"},
        "forget_all": set()}

    def prop(tool: str, name: str) -> dict:
        return tools[tool].input_schema["properties"][name]

    init = tools["session_init"].input_schema["properties"]
    assert {k: (v["type"], v["default"]) for k, v in init.items()} == {
        "project_path": ("string", ""), "query": ("string", ""), "max_results": ("integer", 10),
        "max_age_days": ("integer", 30)}
    assert prop("recall", "limit")["type"] == "integer" and prop("recall", "limit")["default"] == 10
    assert prop("recall", "query")["type"] == "string"
    assert {t["type"] for t in prop("recall", "session_id")["anyOf"]} == {"string", "null"}  # default: the server's
    assert {s["type"] for s in prop("remember", "tags")["anyOf"]} == {"string", "array", "null"}
    assert set(MEMORY_TYPES) < set(prop("remember", "type")["enum"])
    assert prop("mem_save", "type")["enum"] == list(MEMORY_TYPES)
    assert prop("feedback", "signal")["enum"] == ["up", "down"]
    assert prop("pin", "core")["type"] == "boolean" and prop("pin", "core")["default"] is True
    assert prop("mem_search", "types")["anyOf"][0]["items"]["enum"][-1] == "summary"
    for t in tools.values():
        assert t.description and t.input_schema["type"] == "object"
        assert all(p.get("description") for p in t.input_schema["properties"].values()), t.name
    lifecycle = tools["session_init"].description
    assert "once" in lifecycle and "session_id" in lifecycle and "close_session" in lifecycle
    assert {n for n, t in tools.items() if t.annotations.read_only_hint} == {
        "mem_search", "mem_get_observation", "mem_timeline", "mem_stats", "list_memories"}
    assert {n for n, t in tools.items() if t.annotations.destructive_hint} == {"forget", "forget_all"}
    assert all(t.annotations.open_world_hint is False for t in tools.values())


# --- the lifecycle -----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.anyio
async def test_session_init_remember_recall_close_subprocess(tmp_path):
    async with connected(tmp_path / "m.duckdb", tmp_path) as session:
        init = await call(session, "session_init", project_path="~/projects/churn-model")
        assert set(init) == SESSION_INIT_KEYS and init["success"]
        sid = init["session_id"]
        assert re.fullmatch(r"slm-\d{8}-[0-9a-f]{8}", sid)
        assert init["context"].startswith("# Relevant Memory Context")
        assert init["learning"] == {"feedback_signals": 0, "phase": 1, "status": init["learning"]["status"]}

        fact = await call(session, "remember", content="Churn is defined as 30 days without a login, decided with finance.",
                          session_id=sid, tags="churn,definition", project="churn-model", type="decision")
        assert fact["action"] == "remembered" and fact["source"] == "mcp" and fact["session_id"] == sid
        assert fact["tags"] == ["churn", "definition"] and fact["type"] == "decision"
        same = await call(session, "remember", content="Churn model AUC is 0.81 on the March holdout.",
                          session_id=sid, tags=["churn", "metrics"], project="churn-model")
        assert same["tags"] == ["churn", "metrics"]  # a list means what the string does

        res = await call(session, "recall", query="how is churn defined", session_id=sid, limit=5)
        assert res["query"] == "how is churn defined" and res["retrieval_mode"] == "full_bm25_tfidf_meaning"
        top = res["memories"][0]
        assert top["fact_id"] == fact["fact_id"] and res["memory_count"] == len(res["memories"])
        assert set(top["score_parts"]) >= {"relevance", "bm25", "tfidf", "recency", "revision", "working_set"}
        assert top["content_truncated"] is False and top["type"] == "decision" and top["project"] == "churn-model"

        closed = await call(session, "close_session", session_id=sid)
        assert closed == {"success": True, "session_id": sid, "summary_events_created": closed["summary_events_created"]}
        assert closed["summary_events_created"] >= 1
        again = await call(session, "close_session", session_id=sid)
        assert again["summary_events_created"] == 0  # closing twice writes nothing new
        assert "closed" in await fails(session, "remember", content="too late", session_id=sid)

        # A second session_init is a new session, and a pinned memory comes with it.
        await call(session, "pin", fact_id=fact["fact_id"][:8])
        second = await call(session, "session_init", query="quarterly revenue")
        assert second["session_id"] != sid
        assert [m["fact_id"] for m in second["core_memory"]] == [fact["fact_id"]]


@pytest.mark.slow
@pytest.mark.anyio
async def test_long_contents_are_clipped_in_lists_and_whole_by_id_subprocess(tmp_path):
    long_text = "The nightly export of orders lists every refund. " + " ".join(["row data"] * 2_000)
    async with connected(tmp_path / "m.duckdb", tmp_path, user="ana") as session:
        sid = (await call(session, "session_init"))["session_id"]
        fid = (await call(session, "remember", content=long_text, session_id=sid))["fact_id"]
        hit = (await call(session, "recall", query="nightly export refunds", session_id=sid))["memories"][0]
        assert hit["fact_id"] == fid and hit["content_truncated"] is True
        assert hit["content_chars"] == len(long_text) and len(hit["content"]) == 2_001  # 2,000 and "…"
        whole = await call(session, "mem_get_observation", observation_id=fid)
        assert whole["content"] == long_text and whole["user_id"] == "ana"
        assert (await call(session, "mem_timeline", observation_id=fid))["observations"][0]["content_truncated"]


@pytest.mark.slow
@pytest.mark.anyio
async def test_api_b_tools_subprocess(tmp_path):
    async with connected(tmp_path / "m.duckdb", tmp_path, user="ana") as session:
        start = await call(session, "mem_session_start")
        assert start["is_new"] is True and start["memories"] == []
        saved = await call(session, "mem_save", content="Ana prefers plotly over matplotlib for dashboards.",
                           type="preference", title="plotting library", topic_key="plotting")
        assert saved["outcome"] == "created" and saved["session_id"] == start["session_id"]
        assert (await call(session, "mem_save", content="Ana prefers plotly over matplotlib for dashboards.",
                           type="preference", title="plotting library"))["outcome"] == "deduped"
        found = await call(session, "mem_search", query="plotly dashboards", types=["preference"])
        assert [o["id"] for o in found["observations"]] == [saved["id"]]
        assert (await call(session, "mem_session_start"))["is_new"] is False
        assert (await call(session, "mem_session_summary", summary="Chose the plotting library."))["outcome"] == "created"
        ended = await call(session, "mem_session_end", summary="Plotting settled: plotly.")
        assert ended["ended_at"] is not None and ended["user_id"] == "ana"
        stats = await call(session, "mem_stats")
        assert stats["observations"] == 1 and stats["by_type"] == {"preference": 1}
        other = await call(session, "mem_stats", user_id="bob")
        assert other["observations"] == 0  # a user never sees another's
        assert (await call(session, "feedback", fact_id=saved["id"], signal="up"))["learning"]["feedback_signals"] == 1
    with Memory(tmp_path / "m.duckdb") as mem:  # (what the assistant saved says so, as `remember`'s does)
        assert mem.get(saved["id"], user_id="ana").source == "mcp"


# --- errors ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.anyio
async def test_bad_arguments_are_tool_errors_and_the_server_goes_on_subprocess(tmp_path):
    async with connected(tmp_path / "m.duckdb", tmp_path) as session:
        sid = (await call(session, "session_init"))["session_id"]
        fid = (await call(session, "remember", content="The feature store refreshes at 02:00 UTC.",
                          session_id=sid))["fact_id"]
        assert "limit must be a non-negative integer; got -1" in await fails(
            session, "recall", query="feature store", session_id=sid, limit=-1)
        assert "no memory with id 'abcdef0123'" in await fails(session, "pin", fact_id="abcdef0123")
        assert "no memory with id" in await fails(session, "mem_get_observation", observation_id="zzzzzzzz",
                                                  user_id="ana")
        assert "type must be one of profile" in await fails(session, "remember", content="x", session_id=sid,
                                                            type="gossip")
        assert "signal must be one of up, down; got 'sideways'" in await fails(session, "feedback", fact_id=fid,
                                                                               signal="sideways")
        assert "content is empty" in await fails(session, "remember", content="   ", session_id=sid)
        assert "user_id must be a non-empty string" in await fails(session, "mem_stats", user_id=" ")
        assert "no session with id 'slm-20990101-00000000'" in await fails(
            session, "recall", query="feature store", session_id="slm-20990101-00000000")
        assert "Field required" in await fails(session, "recall")  # a required argument missing
        assert "Unknown tool" in await fails(session, "forget_everything")
        res = await call(session, "recall", query="feature store refresh", session_id=sid)  # still serving
        assert res["memories"][0]["content"] == "The feature store refreshes at 02:00 UTC."


@pytest.mark.anyio
async def test_a_bug_in_a_tool_is_a_tool_error_and_the_next_call_works(monkeypatch):
    """In process (the SDK's in-memory client): an exception that is not the engine's own."""
    from mcp import Client

    from slm_magic.mcp_server import build_server

    with Memory(":memory:") as mem:
        server = build_server(mem)
        async with Client(server) as client:
            sid = (await client.call_tool("session_init", {})).structured_content["session_id"]
            monkeypatch.setattr(mem, "recall", lambda *a, **k: 1 / 0)
            res = await client.call_tool("recall", {"query": "x", "session_id": sid})
            assert res.is_error and res.content[0].text == "Error executing tool recall"  # no internals leak
            monkeypatch.undo()
            res = await client.call_tool("recall", {"query": "x", "session_id": sid})
            assert not res.is_error


# --- one file, two processes -------------------------------------------------------------------
KERNEL = textwrap.dedent("""
    import contextlib, io, json, sys
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    ip.run_line_magic("load_ext", "slm_magic")
    ip.run_line_magic("config", f"SLMMagic.db_path = {sys.argv[1]!r}")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:  # one cell per line; one JSON answer per cell
        with contextlib.redirect_stdout(io.StringIO()):
            r = ip.run_cell(json.loads(line), store_history=True)
        error = r.error_before_exec or r.error_in_exec
        value = r.result
        memories = [{"fact_id": m.fact_id, "content": m.content, "source": m.fact.source} for m in value] \\
            if type(value).__name__ == "RecallResult" else None
        print(json.dumps({"error": None if error is None else repr(error), "memories": memories,
                          "fact_id": getattr(value, "fact_id", None)}), flush=True)
""")


class Kernel:
    """A terminal IPython with slm_magic loaded, in its own process, run one cell at a time."""

    def __init__(self, db, tmp_path):
        env = {**os.environ, "HOME": str(tmp_path), "IPYTHONDIR": str(tmp_path / "ipython")}
        self.proc = subprocess.Popen([sys.executable, "-c", KERNEL, str(db)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    async def answer(self) -> dict:
        with anyio.fail_after(TIMEOUT_S):
            line = await anyio.to_thread.run_sync(self.proc.stdout.readline)
        assert line, self.proc.stderr.read()[-2000:]
        return json.loads(line)

    async def run(self, cell: str) -> dict:
        self.proc.stdin.write(json.dumps(cell) + "\n")
        self.proc.stdin.flush()
        out = await self.answer()
        assert out["error"] is None, out["error"]
        return out

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(TIMEOUT_S)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_kernel_and_the_assistant_share_one_file_subprocess(tmp_path):
    db = tmp_path / "shared.duckdb"
    Memory(db).close()  # the file exists before either opens it
    kernel = Kernel(db, tmp_path)
    try:
        assert (await kernel.answer())["ready"]
        async with connected(db, tmp_path) as session:
            sid = (await call(session, "session_init", query="dashboard latency"))["session_id"]
            mine = await call(session, "remember", session_id=sid, tags="dashboard",
                              content="The dashboard latency regression comes from the unindexed orders join.")
            # The kernel's next cell finds what the assistant remembered, marked as the assistant's.
            seen = (await kernel.run("%recall dashboard latency regression"))["memories"]
            assert seen and seen[0] == {"fact_id": mine["fact_id"], "content": mine["content"], "source": "mcp"}
            # The human remembers in the kernel; the assistant's next call finds it.
            theirs = await kernel.run("%%remember --tags churn\nThe churn label is 30 days of inactivity.")
            res = await call(session, "recall", query="churn label inactivity", session_id=sid)
            assert res["memories"][0]["fact_id"] == theirs["fact_id"]
            assert res["memories"][0]["source"] is None and res["memories"][0]["cell"] is not None
            # And on, back and forth, both still running and writing.
            for i in range(3):
                await call(session, "remember", session_id=sid, content=f"assistant note {i} on the orders join")
                await kernel.run(f"%%remember\nkernel note {i} on the orders join")
                got = (await kernel.run("%recall orders join note --limit 20"))["memories"]
                assert {f"assistant note {i} on the orders join", f"kernel note {i} on the orders join"} <= {
                    m["content"] for m in got}
            res = await call(session, "recall", query="orders join note", session_id=sid, limit=20)
            assert len([m for m in res["memories"] if "note" in m["content"]]) == 6
            # At the same time: a cell that writes 25 memories while the assistant writes 25.
            kernel.proc.stdin.write(json.dumps(
                "for i in range(25):\n"
                "    get_ipython().run_cell_magic('remember', '--tags race', f'kernel race {i} on the refunds table')"
            ) + "\n")
            kernel.proc.stdin.flush()
            for i in range(25):
                await call(session, "remember", session_id=sid, tags="race", content=f"assistant race {i} on refunds")
            assert (await kernel.answer())["error"] is None  # no lock error reached the kernel
            res = await call(session, "recall", query="race refunds", session_id=sid, limit=60)
            assert len([m for m in res["memories"] if "race" in m["content"]]) == 50
    finally:
        kernel.close()
    assert "Error" not in (tmp_path / "server.stderr").read_text()


# --- a killed server, a vanished client --------------------------------------------------------
class RawClient:
    """The server driven over its pipes by hand, so the test holds its process (to kill it)."""

    def __init__(self, db):
        self.proc = subprocess.Popen([sys.executable, *server_command(db)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.ids = iter(range(1, 10_000))
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict, *, wait: bool = True):
        self.send({"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params})
        if wait:
            return json.loads(self.proc.stdout.readline())["result"]

    def remember(self, content: str, *, wait: bool = True):
        res = self.request("tools/call", {"name": "remember", "arguments": {"content": content}}, wait=wait)
        return res and res["structuredContent"]["fact_id"]


def _acknowledged_then(db, end) -> list[str]:
    client = RawClient(db)
    acked = [client.remember(f"acknowledged memory {i} about the billing pipeline") for i in range(5)]
    client.remember("a long one still being written " * 200_000, wait=False)  # in flight when the end comes
    end(client.proc)
    return acked


@pytest.mark.slow
@pytest.mark.parametrize("end", ["kill the server", "the client goes away"])
def test_a_killed_server_or_a_vanished_client_leaves_the_file_whole_subprocess(tmp_path, end):
    db = tmp_path / "m.duckdb"

    def kill(proc):
        proc.kill()
        assert proc.wait(TIMEOUT_S) == -9

    def vanish(proc):  # the client's pipes close: the server finishes its call, lets go and exits
        proc.stdin.close()
        proc.stdout.close()
        assert proc.wait(TIMEOUT_S) == 0, proc.stderr.read()[-2000:]

    acked = _acknowledged_then(db, kill if end == "kill the server" else vanish)
    with Memory(db) as mem:  # openable, with every acknowledged memory
        assert all(mem.get(fid) is not None for fid in acked)
        assert mem.count() in (5, 6)
        assert {m.fact_id for m in mem.recall("billing pipeline acknowledged", limit=10)} >= set(acked)
    client = RawClient(db)  # and a new server serves it
    assert client.remember("after the restart") is not None
    client.proc.stdin.close()
    assert client.proc.wait(TIMEOUT_S) == 0


# --- the command line --------------------------------------------------------------------------
def test_without_the_sdk_the_command_says_how_to_install_it(monkeypatch, capsys, tmp_path):
    from slm_magic import cli

    for name in ["mcp", *(n for n in sys.modules if n.startswith(("mcp.", "mcp_types")))]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    monkeypatch.delitem(sys.modules, "slm_magic.mcp_server", raising=False)
    assert cli.main(["--db", str(tmp_path / "m.duckdb"), "mcp"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'slm-magic[mcp]'" in err


def test_an_unusable_file_fails_before_serving(capsys, tmp_path):
    from slm_magic import cli

    assert cli.main(["--db", str(tmp_path), "mcp"]) == 2  # a directory, not a memory file
    err = capsys.readouterr().err
    assert err.startswith("slm-magic: ") and "directory" in err and err.count("\n") == 1


# --- a team's memory on PostgreSQL ---------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.anyio
async def test_an_assistant_on_the_team_memory_subprocess(team_db, tmp_path):
    """The server on a postgresql:// URL, as bob: it finds what alice shared (with its author),
    never her private memories, and what it remembers with share=true reaches alice."""
    with Memory(team_db["alice"]) as alice:
        alice.remember("alice's private note: the salary table is sensitive")
        shared = alice.remember("the client defines churn as 30 days without login", share=True)
    async with connected(team_db["bob"], tmp_path) as session:
        sid = (await call(session, "session_init", project_path="team"))["session_id"]
        got = await call(session, "recall", query="salary churn client", session_id=sid)
        assert [(m["fact_id"], m["shared_by"]) for m in got["memories"]] == [(shared.fact_id, "alice")]
        mine = await call(session, "remember", content="bob: churn is computed in the nightly job", session_id=sid,
                          share=True)
        assert (mine["shared_by"], mine["shared_by_you"]) == ("you", True)  # bob's own, not "shared by bob"
        both = await call(session, "recall", query="churn client nightly job", session_id=sid)
        assert {m["fact_id"]: m["shared_by"] for m in both["memories"]} == {shared.fact_id: "alice",
                                                                           mine["fact_id"]: "you"}
        assert "only its author can pin it" in await fails(session, "pin", fact_id=shared.fact_id)  # read, never owned
        assert "alice's, shared with you" in await fails(session, "forget", fact_id=shared.fact_id)
    with Memory(team_db["alice"]) as alice:
        assert [m.fact.user_id for m in alice.recall("churn nightly job")][:1] == ["bob"]


def test_the_server_s_own_session_ends_with_it_when_it_holds_nothing(tmp_path):
    """Each one-shot client run (`inspector --cli ... tools/call recall`) left an open session:
    22 of 24 were still open after 30 calls."""
    from slm_magic import mcp_tools

    with Memory(tmp_path / "m.duckdb") as mem:
        recalled = mcp_tools.recall(mem, query="churn definition")
        quiet = re.search(r"slm-\d{8}-[0-9a-f]{8}", recalled["note"]).group()
        mcp_tools.end_server_session(mem)
        assert mem.session_is_closed(quiet)
        kept = mcp_tools.remember(mem, content="churn is 30 days without a login")["session_id"]
        assert kept != quiet
        mcp_tools.end_server_session(mem)  # (what it holds waits for the timeout, or the same work's next run)
        assert not mem.session_is_closed(kept)
        asked = mcp_tools.session_init(mem)["session_id"]  # (one session_init opened: the client's to close)
        mcp_tools.recall(mem, query="churn")
        mcp_tools.end_server_session(mem)
        assert not mem.session_is_closed(asked)


def test_closing_a_session_again_says_so(tmp_path):
    """A second close_session answered as the first did: nothing said it was closed already."""
    from slm_magic import mcp_tools

    with Memory(tmp_path / "m.duckdb") as mem:
        sid = mcp_tools.session_init(mem)["session_id"]
        mcp_tools.remember(mem, content="churn is 30 days without a login", session_id=sid)
        first = mcp_tools.close_session(mem, session_id=sid)
        assert set(first) == {"success", "session_id", "summary_events_created"}
        again = mcp_tools.close_session(mem, session_id=sid)
        assert again["summary_events_created"] == 0 and "already closed" in again["note"]
