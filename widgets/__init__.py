"""ipywidgets views of slm_magic's results, installed as `slm_magic.widgets`.

The views read the engine's pydantic models and act through `Memory`'s public methods; they
never touch storage. The magics show them in a Jupyter kernel; a terminal gets text tables.
"""

from .context_view import ContextView
from .memories_view import MemoriesView, MemoryRow
from .score_bars import breakdown, segments, stacked_bar
from .search_view import LiveSearch

__all__ = ["ContextView", "LiveSearch", "MemoriesView", "MemoryRow", "breakdown", "segments", "stacked_bar"]
