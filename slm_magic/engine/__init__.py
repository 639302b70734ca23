"""The engine's parts behind the `Memory` facade that are neither storage, index nor ranking:
the learning loop (`learning.py`) and export and import (`exchange.py`)."""
