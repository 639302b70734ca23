import sys
from datetime import datetime
from pathlib import Path

import pytest

from slm_magic import Memory

ROOT = Path(__file__).resolve().parent.parent


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
