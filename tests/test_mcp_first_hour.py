"""What a new user meets on the assistant's side (issue 25): the README's set-up finds what a
notebook remembered with every tool, calls without a session_id, a made-up session id, listing
and forgetting, and "shared by you".

Through the SDK's own clients: over stdio in a real process where the set-up is the point,
else its in-memory client on `build_server` (the same server, without a process).
"""

import contextlib
import json
import os
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402  (comes with mcp)
from mcp import Client, ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from slm_magic import Memory  # noqa: E402
from slm_magic.core.identity import default_user  # noqa: E402
from slm_magic.mcp_server import build_server  # noqa: E402

TIMEOUT_S = 30  # a bound for a hung process, never a wait
SID = re.compile(r"slm-\d{8}-[0-9a-f]{8}")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _json(res) -> dict:
    assert not res.is_error, res.content[0].text
    assert json.loads(res.content[0].text) == res.structured_content
    return res.structured_content


async def call(client, tool: str, **arguments) -> dict:
    return _json(await client.call_tool(tool, arguments))


async def fails(client, tool: str, **arguments) -> str:
    res = await client.call_tool(tool, arguments)
    assert res.is_error, res.structured_content
    return res.content[0].text


@contextlib.asynccontextmanager
async def served(mem: Memory):
    """The SDK's in-memory client on the server over `mem` (detached, as `serve` leaves it)."""
    mem.detach()
    async with Client(build_server(mem)) as client:
        yield client


# --- the README's set-up: `slm-magic mcp`, no --db, no --user ------------------------------------
def _readme_command() -> tuple[str, list[str]]:
    """`/path/to/venv/bin/slm-magic mcp`, as the README's `claude mcp add` line has it."""
    script = Path(sys.executable).with_name("slm-magic")
    return (str(script), ["mcp"]) if script.exists() else (sys.executable, ["-m", "slm_magic.cli", "mcp"])


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_readmes_set_up_finds_a_notebooks_memory_with_every_tool_subprocess(tmp_path, monkeypatch):
    """What a notebook remembers (a Memory with the default user, on the default file) every tool
    of the assistant finds, the server started exactly as the README's line starts it."""
    env = {k: v for k, v in os.environ.items() if k not in ("SLM_MAGIC_DB", "SLM_MAGIC_USER")}
    env["HOME"] = str(tmp_path)  # the default file is ~/.slm_magic/memory.duckdb, here
    for name in ("SLM_MAGIC_DB", "SLM_MAGIC_USER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    me = default_user()
    with Memory() as notebook:  # the notebook's side: its default file and its default user
        assert notebook.user_id == me and Path(notebook.path) == tmp_path / ".slm_magic" / "memory.duckdb"
        sid = notebook.session_init(query="churn", origin="/work/churn.ipynb").session_id
        label = notebook.remember("The churn label is 30 days without a login, agreed with finance.",
                                  session_id=sid, tags="churn,definition", project="churn-model", type="decision")
        later = notebook.remember("Trial users are left out of the churn training set.", session_id=sid,
                                  tags="churn", project="churn-model")
    command, args = _readme_command()
    params = StdioServerParameters(command=command, args=args, env=env)
    with open(tmp_path / "server.stderr", "w") as errlog, anyio.fail_after(TIMEOUT_S):
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            found = await call(session, "mem_search", query="churn label login")
            assert found["observations"][0]["id"] == label.fact_id
            stats = await call(session, "mem_stats")
            assert stats["observations"] == 2 and stats["by_type"] == {"decision": 1, "discovery": 1}
            whole = await call(session, "mem_get_observation", observation_id=label.fact_id[:8])
            assert whole["content"] == label.content and whole["user_id"] == me
            timeline = await call(session, "mem_timeline", observation_id=label.fact_id)
            assert [o["id"] for o in timeline["observations"]] == [label.fact_id, later.fact_id]
            start = await call(session, "mem_session_start")
            assert {m["id"] for m in start["memories"]} == {label.fact_id, later.fact_id}
            recalled = await call(session, "recall", query="how is the churn label defined")  # no session_id
            assert recalled["memories"][0]["fact_id"] == label.fact_id
            assert "no session_id given" in recalled["note"] and SID.fullmatch(recalled["session_id"])
            init = await call(session, "session_init", query="churn training set")
            assert later.fact_id in {m["fact_id"] for m in init["memories"]}
            listed = await call(session, "list_memories")
            assert listed["total"] == 2 and {m["fact_id"] for m in listed["memories"]} == {label.fact_id, later.fact_id}
            assert (await call(session, "feedback", fact_id=label.fact_id[:6], signal="up"))["fact_id"] == label.fact_id
            assert (await call(session, "pin", fact_id=later.fact_id))["is_core"] is True
    assert "Traceback" not in (tmp_path / "server.stderr").read_text()
    with Memory() as notebook:  # and it was the notebook's memory the assistant pinned
        assert [f.fact_id for f in notebook.core_memories()] == [later.fact_id]


# --- calls that name no session -------------------------------------------------------------------
@pytest.mark.anyio
async def test_calls_without_a_session_id_run_in_the_servers_session(tmp_path, clock):
    with Memory(tmp_path / "m.duckdb", user_id="ana", clock=clock) as mem:
        async with served(mem) as client:
            assert "this server has opened no session" in await fails(client, "close_session")
            first = await call(client, "remember", content="The feature store refreshes at 02:00 UTC.")
            sid = first["session_id"]
            assert SID.fullmatch(sid) and first["note"].startswith("no session_id given: opened this server's session")
            assert sid in first["note"]
            got = await call(client, "recall", query="feature store refresh")
            assert got["session_id"] == sid and f"session {sid} was used" in got["note"]
            again = await call(client, "recall", query="feature store refresh")
            assert again["memories"][0]["score_parts"]["working_set"] > 0  # the session builds on itself
            closed = await call(client, "close_session")  # no id: this server's session
            assert closed["session_id"] == sid and closed["summary_events_created"] >= 1
            assert mem.session_is_closed(sid)
            after = await call(client, "remember", content="The feature store moved to 03:00 UTC.")
            assert after["session_id"] != sid and "opened" in after["note"]  # a new one, never the closed one
            init = await call(client, "session_init", query="feature store")
            named = await call(client, "recall", query="feature store", session_id=init["session_id"])
            assert "note" not in named  # a session named: nothing to say
            unnamed = await call(client, "recall", query="feature store")
            assert unnamed["session_id"] == init["session_id"]  # session_init's session is the server's


@pytest.mark.anyio
async def test_recall_without_a_session_id_is_not_a_validation_error_subprocess_free(tmp_path, clock):
    """The schema no longer requires it (an assistant that leaves it out gets an answer)."""
    with Memory(tmp_path / "m.duckdb", clock=clock) as mem:
        async with served(mem) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["recall"].input_schema["required"] == ["query"]
            assert tools["remember"].input_schema["required"] == ["content"]
            res = await client.call_tool("recall", {"query": "anything"})
            assert not res.is_error and "validation" not in res.content[0].text


@pytest.mark.anyio
async def test_a_made_up_session_id_is_refused_and_nothing_is_stored(tmp_path, clock):
    with Memory(tmp_path / "m.duckdb", clock=clock) as mem:
        async with served(mem) as client:
            sid = (await call(client, "session_init"))["session_id"]
            fid = (await call(client, "remember", content="The churn model is retrained on Mondays.",
                              session_id=sid))["fact_id"]
            made_up = "slm-20260101-deadbeef"
            for tool, args in (("recall", {"query": "churn model"}), ("remember", {"content": "a note"}),
                               ("feedback", {"fact_id": fid, "signal": "up"}), ("close_session", {})):
                message = await fails(client, tool, session_id=made_up, **args)
                assert f"no session with id '{made_up}'" in message and "session_init" in message, tool
            assert mem.count() == 1 and mem.feedback_count() == 0  # nothing stored
            assert not mem.session_is_closed(sid)
            # a tool's synthetic id is accepted, as the engine documents (it builds no working set)
            assert (await call(client, "remember", content="A probe note.", session_id="mcp:probe"))["success"]
            assert (await call(client, "recall", query="churn model", session_id=sid))["memories"][0]["fact_id"] == fid


# --- listing and forgetting ---------------------------------------------------------------------
@pytest.mark.anyio
async def test_list_forget_and_forget_all(tmp_path, clock):
    with Memory(tmp_path / "m.duckdb", clock=clock) as mem:
        a = [mem.remember(f"alpha finding {i} about the orders table", project="alpha").fact_id for i in range(3)]
        b = [mem.remember(f"beta finding {i} about the refunds table", project="beta").fact_id for i in range(2)]
        async with served(mem) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert {n for n, t in tools.items() if t.annotations.destructive_hint} == {"forget", "forget_all"}
            assert tools["list_memories"].annotations.read_only_hint
            assert not tools["forget"].annotations.read_only_hint
            assert tools["forget_all"].input_schema["properties"]["confirm"]["default"] is False

            pages, offset = [], 0
            while offset is not None:  # page through everything, no query
                page = await call(client, "list_memories", limit=2, offset=offset)
                assert page["total"] == 5 and len(page["memories"]) <= 2
                pages += [m["fact_id"] for m in page["memories"]]
                offset = page["next_offset"]
            assert sorted(pages) == sorted(a + b) and len(pages) == 5
            beta = await call(client, "list_memories", project="beta")
            assert beta["total"] == 2 and {m["fact_id"] for m in beta["memories"]} == set(b)

            gone = await call(client, "forget", fact_id=a[0][:8])
            assert gone["action"] == "forgotten" and gone["fact_id"] == a[0]
            assert mem.get(a[0]) is None and mem.count() == 4
            assert "no memory with id" in await fails(client, "forget", fact_id=a[0])
            assert "no memory with id" in await fails(client, "forget", fact_id="abc")

            message = await fails(client, "forget_all", project="alpha")
            assert "confirm: true" in message and "2 memories" in message and "nothing was deleted" in message
            assert "confirm: true" in await fails(client, "forget_all", project="alpha", confirm=False)
            assert mem.count() == 4  # nothing deleted without the confirmation
            done = await call(client, "forget_all", project="alpha", confirm=True)
            assert done["forgotten"] == 2 and done["project"] == "alpha"
            assert (await call(client, "list_memories", project="alpha"))["total"] == 0
            assert (await call(client, "list_memories"))["total"] == 2
            assert "all 2 memories of yours" in await fails(client, "forget_all")
            assert (await call(client, "forget_all", confirm=True))["forgotten"] == 2
            assert (await call(client, "list_memories"))["total"] == 0 and mem.count() == 0


# --- shared by you ------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_a_memory_you_shared_says_so(tmp_path, clock):
    db = tmp_path / "team.duckdb"
    with Memory(db, user_id="bob", clock=clock) as bob:
        theirs = bob.remember("bob: the churn dashboard reads the nightly snapshot", share=True)
    with Memory(db, user_id="alice", clock=clock) as alice:
        mine = alice.remember("alice: churn is 30 days without a login", share=True)
        async with served(alice) as client:
            sid = (await call(client, "session_init"))["session_id"]
            got = await call(client, "recall", query="churn", session_id=sid)
            by = {m["fact_id"]: (m["shared_by"], m["shared_by_you"]) for m in got["memories"]}
            assert by == {mine.fact_id: ("you", True), theirs.fact_id: ("bob", False)}
            listed = await call(client, "list_memories")
            assert {m["fact_id"]: m["shared_by"] for m in listed["memories"]} == {mine.fact_id: "you",
                                                                                 theirs.fact_id: "bob"}
            again = await call(client, "remember", content="alice: churn excludes trial users", share=True,
                               session_id=sid)
            assert again["shared_by"] == "you" and again["shared_by_you"] is True
            message = await fails(client, "forget", fact_id=theirs.fact_id)
            assert "bob's" in message and "only its author" in message
            assert "all 2 memories of yours" in await fails(client, "forget_all")  # not bob's shared one
            assert (await call(client, "forget_all", confirm=True))["forgotten"] == 2
            assert [m["shared_by"] for m in (await call(client, "list_memories"))["memories"]] == ["bob"]
