import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from slm_magic import Memory

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def utc_days():
    """Every test on UTC days, whatever the machine's time zone (a day is the machine's own,
    and the tests' clocks name UTC times): a test that wants another zone sets its own."""
    import os
    import time

    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


class FixedClock:
    """An injectable clock: tests move time instead of sleeping."""

    def __init__(self, now: datetime = datetime(2026, 6, 1, 12, 0, 0)):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock():
    return FixedClock()


@pytest.fixture
def mem(clock):
    with Memory(":memory:", clock=clock) as m:
        yield m


@pytest.fixture
def words_mem(clock):
    """A memory ranked by the lexical channels alone (semantic=False): for what they promise
    by themselves (the meaning channel reads every word of a question, known or not)."""
    with Memory(":memory:", clock=clock, semantic=False) as m:
        yield m


@pytest.fixture
def ip(tmp_path, monkeypatch):
    """A real InteractiveShell with the extension loaded, on a temporary memory file, as a
    notebook at /home/ana/churn/analysis.ipynb (history off: a clean, isolated shell)."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("SLM_MAGIC_DB", str(tmp_path / "memory.duckdb"))
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/ana/churn/analysis.ipynb")
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    shell.run_line_magic("load_ext", "slm_magic")
    yield shell
    shell.run_line_magic("unload_ext", "slm_magic")
    InteractiveShell.clear_instance()


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "memory.duckdb"


@pytest.fixture
def python():
    return sys.executable


#: Test files that start kernels, processes, a browser or a build: `make check` leaves them out.
SLOW_FILES = {"test_browser.py", "test_kernels.py", "test_notebooks.py", "test_reliability.py", "test_wheel.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_FILES or "subprocess" in item.name:
            item.add_marker(pytest.mark.slow)


class PgServer:
    """A real PostgreSQL server for the team tests (`.ci/pg.sh` starts a throwaway cluster and
    sets SLM_TEST_PG_URL: a superuser over the local socket, trust authentication)."""

    def __init__(self, admin_url: str, ctl: str | None):
        self.admin_url = admin_url
        self.ctl = ctl

    def url(self, role: str, database: str) -> str:
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(self.admin_url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit(parts._replace(netloc=f"{role}@{host}", path=f"/{database}"))

    def pg_ctl(self, *args: str) -> None:
        """pg_ctl on the test cluster (restart, stop, start), as the cluster's owner."""
        import os
        import shlex
        import subprocess

        cmd = [*shlex.split(self.ctl), *args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


@pytest.fixture(scope="session")
def pg_server():
    import os

    url = os.environ.get("SLM_TEST_PG_URL")
    if not url:
        if os.environ.get("SLM_REQUIRE_PG") == "1":  # .ci/run: a skip there would hide a failure
            pytest.fail("SLM_REQUIRE_PG=1 but SLM_TEST_PG_URL is not set (.ci/pg.sh sets it)")
        pytest.skip("no PostgreSQL server: run `eval \"$(bash .ci/pg.sh | sed 's/^/export /')\"` to start one")
    return PgServer(url, os.environ.get("SLM_TEST_PG_CTL"))


@pytest.fixture
def team_db(pg_server, tmp_path, monkeypatch):
    """A fresh database set up for a team of two (alice, bob): {role: URL}, and "admin".
    Saved indexes go to a cache folder of the test's own."""
    import uuid

    import psycopg

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    name = f"slm_t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server.admin_url, autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    admin = pg_server.url("postgres", name)
    Memory.setup_team(admin, ["alice", "bob"])
    yield {"admin": admin, "alice": pg_server.url("alice", name), "bob": pg_server.url("bob", name)}
    with psycopg.connect(pg_server.admin_url, autocommit=True) as con:
        con.execute(f"DROP DATABASE {name} WITH (FORCE)")


FIFTH_VERSION_MEMORIES = [
    ("The join on df_orders_v2 duplicated customerId rows", "Dedup before the join", ["billing"]),
    ("Deduplicated the orders table; churn model retrained", None, ["churn", "Q3-review"]),
    ("Schema drift in the événements feed: naïve timestamps", "Timestamps", []),
    ("HTTPServer logs show retries at 5pm every day", None, ["ops"]),
    ("Customer churn label leaks through the cancellation date", "Leakage", ["churn"]),
    ("Use the median per cohort_ltv instead of the mean", None, []),
    # two 3-grams whose 64-bit hashes share their low half: one 32-bit id (text.gram_hash)
    ("鞉憮愘 携炜揚 report", None, []),
]


def _grams_of(content, title, tags):
    """A memory's 3-gram weights as version 5 stored them: worked out from the definition, each
    gram as its 64-bit hash."""
    from slm_magic.core import text

    out = Counter()
    for value, weight in ((content, 1), (title, 2), (" ".join(tags), 2)):
        for term in text.analyse(value or ""):
            w = f" {term} "
            for i in range(len(w) - 2):
                out[text.term_hash(text._GRAM_MARK + w[i:i + 3])] += weight
    return out


@pytest.fixture
def fifth_version():
    """Memories with identifiers, accents and tags, and the 3-gram weights a version-5 store
    held for each (64-bit hashes; version 6 keeps none)."""
    import types

    return types.SimpleNamespace(memories=FIFTH_VERSION_MEMORIES, grams_of=_grams_of)
