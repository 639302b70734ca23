"""Both session APIs' lifecycles: API A's start, close, summaries and context (`api_a.py`) and
API B's observations and context for an assistant (`api_b.py`)."""
