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
