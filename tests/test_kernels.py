"""Several kernels on one file: two IPython shells in separate processes write and read at once."""

import json
import subprocess
import sys
import textwrap

import duckdb

WORKER = textwrap.dedent("""
    import json, sys, time
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    name, n = sys.argv[1], int(sys.argv[2])
    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    ip.run_line_magic("load_ext", "slm_magic")
    errors, seen_other, times = [], 0, []
    for i in range(n):
        r = ip.run_cell(f"%%remember --tags {name}\\nfinding {i} from kernel {name} about churn", store_history=True)
        if r.error_in_exec is not None or r.error_before_exec is not None:
            errors.append(repr(r.error_in_exec or r.error_before_exec))
        if i % 10 == 9:
            t = time.perf_counter()
            r = ip.run_cell("_r = %recall kernel churn finding --limit 50", store_history=True)
            times.append((time.perf_counter() - t) * 1000)
            if r.error_in_exec is not None:
                errors.append(repr(r.error_in_exec))
            else:
                seen_other = max(seen_other, sum(1 for m in ip.user_ns["_r"] if name not in m.fact.tags))
    print(json.dumps({"errors": errors, "seen_other": seen_other, "recall_ms": sorted(times)}))
""")


def test_two_kernels_write_and_read_the_same_file_at_once(tmp_path):
    db = tmp_path / "shared.duckdb"
    env = {"SLM_MAGIC_DB": str(db), "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, name, "500"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for name in ("a", "b")]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert all(o["errors"] == [] for o in outs), [o["errors"][:3] for o in outs]
    assert any(o["seen_other"] > 0 for o in outs)  # a kernel's recall saw the other's memories
    con = duckdb.connect(str(db), read_only=True)
    total, distinct = con.execute(
        "SELECT count(*), count(DISTINCT content) FROM memories WHERE kind = 'memory'").fetchall()[0]
    per = dict(con.execute("SELECT tags[1], count(*) FROM memories WHERE kind = 'memory' GROUP BY 1").fetchall())
    con.close()
    assert total == distinct == 1000 and per == {"a": 500, "b": 500}


LONG_WRITER = textwrap.dedent("""
    import itertools, os, sys
    from slm_magic import Memory
    mem = Memory(sys.argv[1])
    mem.detach()
    stop, batch = sys.argv[2], int(sys.argv[3])

    def records():  # until the test says stop: the write cannot end before the other kernel is done
        for i in itertools.count():
            if i % batch == 0 and os.path.exists(stop):
                return
            yield {"content": f"bulk memory {i} about pipelines and joins {i % 97}"}

    with mem.attached():  # as %slm_import does: the file is held, but given up between batches
        print("started", flush=True)
        written = len(mem.remember_many(records(), batch_size=batch))
    print(written)
""")

WAITER = textwrap.dedent("""
    import sys
    from slm_magic import Memory
    with Memory(sys.argv[1]) as mem:
        print(len(mem.recall("pipelines joins", limit=5)), mem.count())
""")


def test_a_long_write_in_one_kernel_lets_another_kernel_in(tmp_path):
    """The test stops the writer only after the waiter has finished, so the waiter's recall ran
    while the writer held the file in `attached`. If no kernel could get in between batches,
    the waiter gives up on the lock and the test fails; it cannot pass late."""
    db, stop, batch = str(tmp_path / "shared.duckdb"), tmp_path / "waiter-done", 2000
    with __import__("slm_magic").Memory(db) as m:
        m.remember("a first memory about pipelines")
    writer = subprocess.Popen([sys.executable, "-c", LONG_WRITER, db, str(stop), str(batch)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "started"  # the writer holds the file from here on
        waiter = subprocess.run([sys.executable, "-c", WAITER, db], capture_output=True, text=True, timeout=300)
        stop.touch()
        out, err = writer.communicate(timeout=300)
    finally:
        writer.kill()
    assert writer.returncode == 0, err[-2000:]
    assert waiter.returncode == 0, waiter.stderr[-2000:]
    hits, seen = map(int, waiter.stdout.split())
    written = int(out.split()[-1])
    assert hits >= 1
    assert seen > 1 and (seen - 1) % batch == 0  # it read between two of the writer's batches, not in one
    assert written >= seen - 1  # and all it saw was the writer's
