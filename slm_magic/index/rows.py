"""The displayable fields of every memory, held in the process as Arrow columns.

A recall ranks in microseconds but DuckDB needs milliseconds to fetch ten rows by id, so the
rows a recall shows are kept here: compact Arrow chunks (no Python object per value), merged
geometrically as they grow, plus the few memories written one by one since the last chunk.
A page's values are read from the chunks' buffers by the compiled kernel where it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa

from ..core import kernels, merging
from ..results.models import Fact
from ..storage.columns import FACT_COLUMNS

PENDING_MAX = 2048  # single writes kept as objects before they are packed into a chunk
MAX_MERGE_ROWS = 250_000  # chunks this large are left alone (bounds a write's copy and peak RAM)


_EPOCH = datetime(1970, 1, 1)


def value_reader(column: pa.ChunkedArray) -> Callable[[int], object]:
    """Row i's value of one column, as `column[i].as_py()` gives it, read from the Arrow
    buffers: a scalar and its `as_py` cost about 1.3 us a value, a page of ten rows 0.2 ms.
    Strings, bools, integers, floats and naive microsecond timestamps are read directly; any
    other type, or a column in several pieces, as Arrow gives it."""
    if column.num_chunks != 1:
        return lambda i: column[i].as_py()
    arr = column.chunk(0)
    if arr.null_count == len(arr):
        return lambda i: None
    n, t = len(arr), arr.type
    bufs = arr.buffers()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        ends = np.frombuffer(bufs[1], dtype=np.int64 if pa.types.is_large_string(t) else np.int32)
        ends = ends[arr.offset: arr.offset + n + 1]
        data = memoryview(bufs[2] if bufs[2] is not None else b"")

        def get(i: int) -> object:
            return str(data[ends.item(i): ends.item(i + 1)], "utf-8")
    elif pa.types.is_boolean(t):
        get = arr.fill_null(False).to_numpy(zero_copy_only=False).item
    elif pa.types.is_integer(t) or pa.types.is_floating(t):
        get = np.frombuffer(bufs[1], dtype=t.to_pandas_dtype())[arr.offset: arr.offset + n].item
    elif pa.types.is_timestamp(t) and t.tz is None and t.unit == "us":
        micros = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset: arr.offset + n]

        def get(i: int) -> object:
            return _EPOCH + timedelta(microseconds=micros.item(i))
    else:
        def get(i: int) -> object:
            return arr[i].as_py()
    if not arr.null_count:
        return get
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    return lambda i: get(i) if valid.item(i) else None


# The kernel's kinds of column (core/_kernels.c, COL_*)
_NULL, _STR32, _STR64, _BOOL, _I32, _I64, _F64, _TS_US, _LIST_STR32 = range(9)


def column_spec(arr: pa.Array) -> tuple | None:
    """One column as the kernel's row reader takes it (kind, length, offset, child offset and
    its buffers as Arrow lays them out); None for a type it does not read (`value_reader` does)."""
    n, t, bufs = len(arr), arr.type, arr.buffers()
    if arr.null_count == n:
        return (_NULL, n, 0, 0, None, None, None, None, None)
    valid = bufs[0] if arr.null_count else None
    kind = (_STR32 if pa.types.is_string(t) else _STR64 if pa.types.is_large_string(t)
            else _BOOL if pa.types.is_boolean(t) else _I32 if t == pa.int32() else _I64 if t == pa.int64()
            else _F64 if t == pa.float64() else _TS_US if pa.types.is_timestamp(t) and t.tz is None and t.unit == "us"
            else _LIST_STR32 if pa.types.is_list(t) and pa.types.is_string(t.value_type) else None)
    if kind is None:
        return None
    if kind == _LIST_STR32:  # (a list's offsets, then its strings' validity, offsets and data)
        return (kind, n, arr.offset, arr.values.offset, valid, *bufs[1:5])
    return (kind, n, arr.offset, 0, valid, *bufs[1:3], *[None] * (4 - len(bufs[1:3])))


def page_reader(table: pa.Table, names: Sequence[str]) -> Callable[[list[int]], list[dict]]:
    """Rows of a one-chunk table -> a dict of each row's values by `names`: the kernel's reader
    where it runs and reads every column, else `value_reader`'s, value by value."""
    arrays = [table.column(name).chunks for name in names]
    if all(len(a) == 1 for a in arrays):
        specs = [column_spec(a[0]) for a in arrays]
        if None not in specs:
            read = kernels.row_reader(names, specs)
            if read is not None:
                return read
    columns = [(name, value_reader(table.column(name))) for name in names]
    return lambda rows: [{name: read(at) for name, read in columns} for at in rows]


def fact_of(row: Sequence) -> Fact:
    """A Fact from one row of FACT_COLUMNS, as the store returns it."""
    values = dict(zip(FACT_COLUMNS, row))
    values["tags"] = tuple(values["tags"] or ())
    return Fact(**values)


def facts_table(items: Sequence[tuple[int, Fact]]) -> pa.Table:
    """(doc id, Fact) pairs as a table with a doc_id column and FACT_COLUMNS."""
    cols = {"doc_id": [d for d, _ in items]}
    for name in FACT_COLUMNS:
        cols[name] = [getattr(f, name) for _, f in items]
    cols["tags"] = [list(t) for t in cols["tags"]]
    return pa.table(cols)


class FactRows:
    def __init__(self) -> None:
        self.chunks: list[pa.Table] = []
        self.chunk_of = np.full(1024, -1, dtype=np.int32)   # doc_id -> chunk, -1 if none
        self.offset_of = np.zeros(1024, dtype=np.int32)     # doc_id -> row in that chunk
        self.pending: dict[int, Fact] = {}
        self.frozen = 0  # leading chunks never merged (a saved index's mapped rows)
        self.deferring = False  # a bulk write: chunks merged once, at its end
        # Per chunk, a reader of its rows (`page_reader`), made once; emptied whenever a chunk is
        # placed, so it never holds one merged away.
        self._readers: dict[int, Callable[[list[int]], list[dict]]] = {}

    def _ensure(self, n: int) -> None:
        if n > self.chunk_of.size:
            cap = max(n, 2 * self.chunk_of.size)
            c = np.full(cap, -1, dtype=np.int32)
            c[: self.chunk_of.size] = self.chunk_of
            o = np.zeros(cap, dtype=np.int32)
            o[: self.offset_of.size] = self.offset_of
            self.chunk_of, self.offset_of = c, o

    def add_table(self, table: pa.Table) -> None:
        """Add rows given as a table with a doc_id column and FACT_COLUMNS."""
        if table.num_rows == 0:
            return
        table = table.select(["doc_id", *FACT_COLUMNS]).combine_chunks()
        doc_ids = table.column("doc_id").to_numpy().astype(np.int64)
        self._ensure(int(doc_ids.max()) + 1)
        self.chunks.append(table)
        self._place(len(self.chunks) - 1)
        if self.pending:
            for d in doc_ids.tolist():
                self.pending.pop(d, None)
        if not self.deferring:
            self._merge()

    def add_fact(self, doc_id: int, fact: Fact) -> None:
        self.pending[doc_id] = fact
        if len(self.pending) >= PENDING_MAX:
            self.add_table(facts_table(sorted(self.pending.items())))

    def merged_at_end(self):
        """A bulk write's chunks merged once, at its end (`merging`)."""
        return merging.deferred(self, self._merge_tail)

    def _merge_tail(self) -> None:
        first, runs = merging.tail_runs([c.num_rows for c in self.chunks], self.frozen, MAX_MERGE_ROWS)
        chunks = self.chunks
        self.chunks[first:] = [pa.concat_tables([chunks[i] for i in run], promote_options="permissive")
                               .combine_chunks() if len(run) > 1 else chunks[run[0]] for run in runs]
        for c in range(first, len(self.chunks)):
            self._place(c)

    def _merge(self) -> None:
        """Merge the newest chunks while they are of a similar size (amortised O(log n) copies)."""
        while (len(self.chunks) - self.frozen >= 2 and self.chunks[-2].num_rows <= 4 * self.chunks[-1].num_rows
               and self.chunks[-2].num_rows + self.chunks[-1].num_rows <= MAX_MERGE_ROWS):
            merged = pa.concat_tables(self.chunks[-2:], promote_options="permissive").combine_chunks()
            self.chunks[-2:] = [merged]
            self._place(len(self.chunks) - 1)

    def _place(self, c: int) -> None:
        """Point the memories of chunk `c` at their rows in it."""
        self._readers.clear()
        doc_ids = self.chunks[c].column("doc_id").to_numpy().astype(np.int64)
        self.chunk_of[doc_ids] = c
        self.offset_of[doc_ids] = np.arange(doc_ids.size, dtype=np.int32)

    def get(self, doc_ids: Sequence[int]) -> dict[int, Fact]:
        out: dict[int, Fact] = {}
        by_chunk: dict[int, list[int]] = {}
        for d in doc_ids:
            if d in self.pending:
                out[d] = self.pending[d]
            elif d < self.chunk_of.size and self.chunk_of[d] >= 0:
                by_chunk.setdefault(int(self.chunk_of[d]), []).append(d)
        for c, ds in by_chunk.items():
            # (row by row: a take of the page and its to_pylist cost about 85 us a chunk
            # whatever the rows, and a page of ten spans every chunk of a big store)
            read = self._readers.get(c)
            if read is None:
                read = self._readers[c] = page_reader(self.chunks[c], FACT_COLUMNS)
            for d, row in zip(ds, read(self.offset_of[ds].tolist())):
                row["tags"] = tuple(row["tags"] or ())
                out[d] = Fact(**row)
        return out
