"""The engine's parts behind the `Memory` facade: the write path (`writer.py`, its checks in
`validate.py`), recall (`recall.py`, and from the file `recall_sql.py`, both ending in
`answers.py`), the working sets, how the file is held (`lease.py`), the settings every part
reads, the learning loop (`learning.py`), and export and import (`exchange.py`)."""
