"""The in-process index a kernel ranks from: postings and their segments (`sparse.py`), the
3-gram vectors (`ngrams.py`), the meaning vectors and their cells (`vectors.py`) and the model
that makes them (`meaning.py`), the rows shown (`rows.py`), the saved index beside the file
(`index_file.py`), the bulk analysis in a second process (`bulk.py`, `analysis_worker.py`),
the replica that keeps them caught up with the file (`replica.py`), and the replica kept live
or why there is none (`live.py`)."""
