"""slm_magic: a long-term memory for Jupyter notebooks, on an embedded DuckDB file."""

from .errors import InvalidInput, SlmMagicError, StoreError
from .memory import Memory
from .models import Fact, RecallResult, ScoredMemory, SearchScore

__version__ = "0.1.0"
__all__ = ["Memory", "Fact", "RecallResult", "ScoredMemory", "SearchScore", "SlmMagicError", "StoreError",
           "InvalidInput", "__version__"]
