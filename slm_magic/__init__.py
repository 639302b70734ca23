"""slm_magic: a long-term memory for Jupyter notebooks, on an embedded DuckDB file or a team's PostgreSQL."""

from .errors import InvalidInput, SlmMagicError, StoreError
from .memory import Memory
from .results.models import Fact, RecallResult, ScoredMemory, SearchScore

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """`%load_ext slm_magic`: register the magics."""
    from .magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython) -> None:
    from .magics import unload_ipython_extension as unload

    unload(ipython)
__all__ = ["Memory", "Fact", "RecallResult", "ScoredMemory", "SearchScore", "SlmMagicError", "StoreError",
           "InvalidInput", "__version__"]
