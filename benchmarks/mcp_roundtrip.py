"""What the assistant pays for a memory call: the `recall` tool over MCP's stdio, client to
server and back, beside the same call made in process.

    python benchmarks/mcp_roundtrip.py [--size 100000] [--calls 200]

On one file of `--size` synthetic memories (benchmarks/synthetic.py): `slm-magic --db F mcp`
is started by the SDK's own stdio client and `--calls` recall tool calls are timed at the
client. In process, the same adapter (`mcp_tools.recall`: the engine's recall and the compact
JSON answer) runs as the server runs it, attaching the file and letting it go around each call;
`Memory.recall` on a held connection is the floor. p50 and p95 in ms, printed as a markdown table.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import anyio  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from timing import cli_args, print_latencies, workload  # noqa: E402

from slm_magic import Memory, mcp_tools  # noqa: E402

WARMUP = 5


async def over_stdio(db: Path, queries: list[str]) -> tuple[float, list[float], int]:
    """(seconds to a ready server, round trips in ms, mean answer bytes)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "slm_magic.cli", "--db", str(db), "mcp"])
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        init = await session.call_tool("session_init", {"query": "warm up", "max_results": 0})
        ready = time.perf_counter() - started
        sid = init.structured_content["session_id"]
        for q in queries[:WARMUP]:
            await session.call_tool("recall", {"query": q, "session_id": sid})
        times, sizes = [], []
        for q in queries:
            t = time.perf_counter()
            res = await session.call_tool("recall", {"query": q, "session_id": sid})
            times.append((time.perf_counter() - t) * 1000)
            assert not res.is_error, res.content[0].text
            sizes.append(len(res.content[0].text))
    return ready, times, sum(sizes) // len(sizes)


def in_process(db: Path, queries: list[str]) -> tuple[list[float], list[float]]:
    """(the adapter with attach/detach per call, ms; Memory.recall on a held connection, ms)."""
    mem = Memory(db)
    sid = mem.session_init(query="warm up", max_results=0).session_id
    mem.detach()
    for q in queries[:WARMUP]:
        with mem.attached():
            json.dumps(mcp_tools.recall(mem, q, sid))
    adapter = []
    for q in queries:
        t = time.perf_counter()
        with mem.attached():  # what the server does around each call
            json.dumps(mcp_tools.recall(mem, q, sid))
        adapter.append((time.perf_counter() - t) * 1000)
    held = []
    with mem.attached():
        for q in queries:
            t = time.perf_counter()
            mem.recall(q, session_id=sid)
            held.append((time.perf_counter() - t) * 1000)
    mem.close()
    return adapter, held


def main(argv: list[str] | None = None) -> int:
    args = cli_args(__doc__.split("\n\n")[0], argv, calls=200)
    corpus, queries = workload(args)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "memory.duckdb"
        with Memory(db) as mem:
            mem.remember_many(corpus)
        del corpus
        ready, stdio_ms, answer_bytes = anyio.run(over_stdio, db, queries)
        adapter_ms, held_ms = in_process(db, queries)
    print(f"{args.size:,} memories, {args.calls} recall calls (limit 10), answers {answer_bytes:,} bytes on average; "
          f"server ready (started, index loaded, first call) in {ready:.2f} s")
    print_latencies([("MCP tool call over stdio (client to server and back)", stdio_ms),
                     ("the same tool in process (attach, recall, JSON answer, detach)", adapter_ms),
                     ("Memory.recall, connection held", held_ms)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
