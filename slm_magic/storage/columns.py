"""Which columns of a memory each statement writes and reads: a new memory's, its vector's,
a result row's and the in-process index's."""

from __future__ import annotations

import numpy as np


# What a caller provides for a new memory (doc_id and changed come from the sequences).
INSERT_COLUMNS = (
    "fact_id", "user_id", "session_id", "project", "type", "title", "topic_key", "content",
    "content_hash", "tags", "is_core", "source", "notebook", "cell", "cell_id", "code", "created_at",
    "updated_at", "revision_count", "kind", "shared", "doc_len", "terms", "tfs",
)


#: The meaning channel's columns, written with a memory when the channel runs (else NULL).
VECTOR_COLUMNS = ("vec", "vec_model")


FACT_COLUMNS = (
    "fact_id", "content", "user_id", "session_id", "project", "type", "title", "topic_key",
    "tags", "is_core", "source", "notebook", "cell", "created_at", "updated_at",
    "revision_count", "kind", "shared",
)


# What the in-process index needs of each memory.
INDEX_COLUMNS = (
    "doc_id", "user_id", "project", "type", "is_core", "shared", "kind", "{epoch} AS updated",
    "revision_count", "doc_len", "session_id", "coalesce(seq, doc_id) AS seq", "changed",
)


def insert_columns(given) -> tuple[str, ...]:
    """The columns a write of `given` (a row or columns by name) inserts: INSERT_COLUMNS, and
    the vectors' when it brings them."""
    return (*INSERT_COLUMNS, *VECTOR_COLUMNS) if "vec" in given else INSERT_COLUMNS


#: Vectors worked out after their memories were stored (index/fill.py), set where a row still
#: has none of that model: a revision since has a new doc_id, so it never takes an old text's.
#: ({stamp}: nothing on a file, where other kernels read them when they fill their own; the
#: server wants a stamp for every change of a row.)
FILL_VECTORS = ("UPDATE memories SET vec = v.vec, vec_model = v.vec_model{stamp} FROM _vectors_in AS v "
                "WHERE memories.doc_id = v.doc_id AND (memories.vec IS NULL OR memories.vec_model IS DISTINCT FROM "
                "v.vec_model) RETURNING memories.doc_id")


def vector_columns(vecs: np.ndarray, model: str) -> dict:
    """New memories' vectors (one row each) as the columns `insert_many` writes."""
    import pyarrow as pa

    vecs = np.ascontiguousarray(vecs, dtype=np.float32)
    n, dims = vecs.shape
    offsets = pa.array(np.arange(0, (n + 1) * dims, dims, dtype=np.int32))
    return {"vec": pa.ListArray.from_arrays(offsets, pa.array(vecs.reshape(-1))),
            "vec_model": pa.array([model] * n, pa.string())}
