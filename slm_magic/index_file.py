"""A replica's index saved beside its memory file (`memory.duckdb.idx`), so that a new kernel
maps it instead of rebuilding it from DuckDB, and kernels on one file share its pages.

One file, published by an atomic rename: a reader finds the old file or the new one, never a
half-written one, and a kernel that mapped the old one keeps reading it. The header names the
memory file and the change stamp the arrays reflect, and holds a CRC-32 of every array. Anything
that does not check out (another file's index, one newer than the file, a damaged or truncated
one, another format) is `Stale`: the caller rebuilds, and nothing saved is trusted blindly.
The map is copy-on-write, so the replica's in-place writes stay private to its process.

Layout: b"SLMIDX01", the header's length (8 bytes, little-endian), the header (JSON), its
CRC-32 (4 bytes); then every array at a 4,096-byte boundary from `data_start`.
"""

from __future__ import annotations

import copy
import json
import mmap
import os
import struct
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from .index import DocTable, Segment, SparseIndex, _radix_order
from .ngrams import GramStore
from .rows import FactRows
from .store import FACT_COLUMNS

MAGIC = b"SLMIDX01"
FORMAT = 1
ALIGN = 4096


class Stale(Exception):
    """The saved index cannot stand for the file now (the message says why)."""


def path_for(db_path: str) -> str:
    return db_path + ".idx"


@dataclass
class Snapshot:
    """What a save needs, taken under the store's lock in a few copies: arrays the replica
    changes in place are copied, the ones it only appends to or replaces are shared."""

    stamp: int
    schema: int
    identity: str
    k1: float
    b: float
    segments: list
    tail: list
    terms: np.ndarray
    df: np.ndarray
    docs: dict
    size: int
    n_live: int
    total_len: float
    codes: dict
    gram_start: np.ndarray
    gram_stop: np.ndarray
    gram_norm: np.ndarray
    gram_entries: GramStore
    gram_df: tuple
    row_chunks: list
    row_pending: list
    chunk_of: np.ndarray
    offset_of: np.ndarray
    session_last: dict
    sizes: dict = field(default_factory=dict)


def snapshot(index: SparseIndex, rows: FactRows, session_last: dict, *, stamp: int, schema: int,
             identity: str) -> Snapshot:
    """Call with the store's lock held; cheap next to a save (copies of per-document arrays)."""
    n = index.docs.size
    ncols = len(index.cols)
    g = index.grams
    entries = GramStore.__new__(GramStore)  # a reader of the buffers as they are now
    entries.base_gram, entries.base_w, entries.base_used = g.base_gram, g.base_w, g.base_used
    entries.gram_buf, entries.w_buf = g.gram_buf, g.w_buf  # appended to only, past `used`
    tail = [(c, np.asarray(ds, np.int32), np.asarray(fs, np.float32)) for c, (ds, fs) in index.tail.items()]
    return Snapshot(
        stamp=int(stamp), schema=int(schema), identity=identity, k1=index.k1, b=index.b,
        segments=list(index.segments), tail=tail,
        terms=np.fromiter(index.cols.keys(), np.int64, ncols),
        df=index.df[:ncols].copy(),
        docs={name: getattr(index.docs, name)[:n].copy() for name in DocTable.FIELDS},
        size=n, n_live=index.n_live, total_len=index.total_len, codes=copy.deepcopy(index.codes),
        gram_start=g.start[:n].copy(), gram_stop=g.stop[:n].copy(), gram_norm=g.norm[:n].copy(),
        gram_entries=entries,
        gram_df=(np.fromiter(g.df.keys(), np.int64, len(g.df)), np.fromiter(g.df.values(), np.int64, len(g.df))),
        row_chunks=list(rows.chunks), row_pending=sorted(rows.pending.items()),
        chunk_of=rows.chunk_of.copy(), offset_of=rows.offset_of.copy(),
        session_last=dict(session_last),
    )


def _pad(a: np.ndarray, size: int, fill=0) -> np.ndarray:
    out = np.full(size, fill, dtype=a.dtype)
    out[: a.size] = a
    return out


def _arrays(snap: Snapshot) -> tuple[dict, dict]:
    """The arrays to save, and the header's counts. The postings become one segment without
    dead memories, and every norm is computed with the idf of now: what a rebuild would hold."""
    n, ncols = snap.size, snap.terms.size
    alive = snap.docs["alive"]
    parts = [s.to_coo() for s in snap.segments] + [
        (np.full(ds.size, c, np.int64), ds, fs) for c, ds, fs in snap.tail]
    if parts:
        cols = np.concatenate([p[0] for p in parts])
        docs = np.concatenate([p[1] for p in parts]).astype(np.int32, copy=False)
        tfs = np.concatenate([p[2] for p in parts]).astype(np.float32, copy=False)
    else:
        cols, docs, tfs = np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.float32)
    keep = alive[docs] if docs.size else np.zeros(0, bool)
    cols, docs, tfs = cols[keep], docs[keep], tfs[keep]
    order = _radix_order(cols)
    seg = Segment.from_coo(cols[order], docs[order], tfs[order], ncols)
    cap = n + max(4096, n // 8)  # headroom: new memories fill it in place (private pages)
    idf = np.log((1.0 + snap.n_live) / (1.0 + snap.df)) + 1.0
    w = (1.0 + np.log(seg.tfs.astype(np.float64))) * idf[np.repeat(np.arange(ncols), np.diff(seg.indptr))]
    norm = np.sqrt(np.bincount(seg.docs, weights=w * w, minlength=n)[:n]).astype(np.float32)
    doc = dict(snap.docs, norm=norm)
    # gram vectors in doc order, without the dead memories' slices
    lens = np.where(alive, snap.gram_stop - snap.gram_start, 0).astype(np.int64)
    total = int(lens.sum())
    ends = np.cumsum(lens)
    idx = np.repeat(snap.gram_start, lens) + (np.arange(total) - np.repeat(ends - lens, lens))
    g_buf, g_w = snap.gram_entries.entries(idx)
    g_order = np.argsort(snap.gram_df[0])
    arrays = {
        "seg.indptr": seg.indptr, "seg.docs": seg.docs, "seg.tfs": seg.tfs,
        "vocab.terms": snap.terms, "vocab.df": _pad(snap.df, ncols + max(4096, ncols // 8)),
        **{f"doc.{name}": _pad(a, cap + 1, -1 if name in ("prev", "next") else 0) for name, a in doc.items()},
        "gram.keys": snap.gram_df[0][g_order], "gram.df": snap.gram_df[1][g_order],
        "gram.start": _pad(ends - lens, cap + 1), "gram.stop": _pad(ends, cap + 1),
        "gram.norm": _pad(np.where(alive, snap.gram_norm, 0.0), cap + 1),
        "gram.buf": g_buf, "gram.w": g_w,
    }
    table = _rows_table(snap, alive)
    doc_of_row = table.column("doc_id").to_numpy().astype(np.int64)
    row_of = np.full(cap + 1, -1, np.int32)
    row_of[doc_of_row] = np.arange(doc_of_row.size, dtype=np.int32)
    arrays["rows.row_of"] = row_of
    sessions = list(snap.session_last.items())
    arrays["sessions.doc"] = np.array([d for _, d in sessions], dtype=np.int64)
    arrays["rows"] = _ipc(table)
    arrays["sessions.id"] = _ipc(pa.table({"id": pa.array([s for s, _ in sessions], pa.string())}))
    counts = {"size": n, "capacity": cap, "n_live": snap.n_live, "total_len": snap.total_len,
              "codes": snap.codes, "gram_used": total}
    return arrays, counts


def _rows_table(snap: Snapshot, alive: np.ndarray) -> pa.Table:
    """Each live memory's current row, one table sorted by doc id."""
    tables = []
    for c, chunk in enumerate(snap.row_chunks):
        d = chunk.column("doc_id").to_numpy().astype(np.int64)
        current = (snap.chunk_of[d] == c) & (snap.offset_of[d] == np.arange(d.size)) & (d < alive.size)
        current[current] &= alive[d[current]]
        tables.append(chunk.filter(pa.array(current)))
    pending = [(d, f) for d, f in snap.row_pending if d < alive.size and alive[d]]
    if pending:
        cols = {"doc_id": [d for d, _ in pending]}
        for name in FACT_COLUMNS:
            cols[name] = [getattr(f, name) for _, f in pending]
        cols["tags"] = [list(t) for t in cols["tags"]]
        extra = pa.table(cols)
        tables.append(extra.cast(tables[0].schema) if tables else extra)
    if not tables:
        return pa.table({"doc_id": pa.array([], pa.int64())})
    table = pa.concat_tables(tables, promote_options="permissive")
    return table.sort_by("doc_id").combine_chunks()


def _ipc(table: pa.Table) -> memoryview:
    """An Arrow IPC file of one record batch (a take on several batches would concatenate them)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table, max_chunksize=max(1, table.num_rows))
    return memoryview(sink.getvalue())


def _write_blob(fh, data: memoryview) -> None:
    fh.write(data)


def write(snap: Snapshot, path: str) -> int:
    """Save atomically: a temporary file, flushed to disk, then renamed over `path`. Returns
    its size in bytes. A crash leaves the old file (or none) and a temporary one, removed by
    the next `read`."""
    arrays, counts = _arrays(snap)
    blobs, offset = {}, 0
    views = {}
    for name, a in arrays.items():
        if isinstance(a, memoryview):
            mv, info = a, {"arrow": True}
        else:
            a = np.ascontiguousarray(a)
            mv, info = memoryview(a).cast("B"), {"dtype": a.dtype.str, "shape": list(a.shape)}
        info.update(offset=offset, nbytes=mv.nbytes, crc=zlib.crc32(mv))
        blobs[name], views[name] = info, mv
        offset += -(-mv.nbytes // ALIGN) * ALIGN
    header = {"format": FORMAT, "schema": snap.schema, "identity": snap.identity, "stamp": snap.stamp,
              "data_bytes": offset, "blobs": blobs, **counts}
    head = json.dumps(header).encode()
    data_start = -(-(16 + len(head) + 4 + 32) // ALIGN) * ALIGN
    header["data_start"] = data_start
    head = json.dumps(header).encode()
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # as private as the memories
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC + struct.pack("<Q", len(head)) + head + struct.pack("<I", zlib.crc32(head)))
            for name, info in blobs.items():
                fh.seek(data_start + info["offset"])
                _write_blob(fh, views[name])
            fh.truncate(data_start + offset)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with _suppress():
            os.unlink(tmp)
        raise
    with _suppress():
        dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(dfd)  # the rename itself survives a power cut
        finally:
            os.close(dfd)
    return data_start + offset


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        return kind is not None and issubclass(kind, OSError)


def remove_leftovers(path: str) -> None:
    """Temporary files of savers that died (their process is gone)."""
    folder, base = Path(path).parent, Path(path).name + ".tmp-"
    try:
        names = [p for p in folder.iterdir() if p.name.startswith(base)]
    except OSError:
        return
    for p in names:
        pid = p.name[len(base):].split("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with _suppress():
                p.unlink()
        except OSError:
            pass


@dataclass
class Loaded:
    index: SparseIndex
    rows: FactRows
    session_last: dict
    stamp: int


def read(path: str, *, schema: int, identity: str, newest: int, k1: float, b: float) -> Loaded:
    """Map a saved index for the memory file described by `schema`, `identity` and its newest
    change stamp `newest`. Raises Stale when it does not stand for that file."""
    try:
        return _read(path, schema, identity, newest, k1, b)
    except FileNotFoundError:
        raise Stale("no saved index") from None
    except Stale:
        raise
    except (OSError, ValueError, KeyError, TypeError, IndexError, pa.ArrowException) as exc:
        raise Stale(f"unreadable ({type(exc).__name__}: {exc})") from None


def _read(path, schema, identity, newest, k1, b) -> Loaded:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < 20:
            raise Stale("truncated")
        mm = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_COPY)
    if mm[:8] != MAGIC:
        raise Stale("not an index file")
    (n,) = struct.unpack("<Q", mm[8:16])
    if 20 + n > size:
        raise Stale("truncated")
    head = mm[16:16 + n]
    if zlib.crc32(head) != struct.unpack("<I", mm[16 + n:20 + n])[0]:
        raise Stale("damaged header")
    h = json.loads(head)
    if h["format"] != FORMAT:
        raise Stale(f"index format {h['format']}, this version writes {FORMAT}")
    if h["schema"] != schema:
        raise Stale(f"saved for schema version {h['schema']}, the file has {schema}")
    if h["identity"] != identity:
        raise Stale("saved for another memory file")
    if h["stamp"] > newest:
        raise Stale("newer than the memory file (a restored or replaced file)")
    if size != h["data_start"] + h["data_bytes"]:
        raise Stale("truncated")
    buf = memoryview(mm)
    a: dict = {}
    for name, info in h["blobs"].items():
        lo = h["data_start"] + info["offset"]
        mv = buf[lo: lo + info["nbytes"]]
        if zlib.crc32(mv) != info["crc"]:
            raise Stale(f"damaged ({name})")
        a[name] = mv if info.get("arrow") else np.frombuffer(mv, dtype=np.dtype(info["dtype"])).reshape(info["shape"])
    rows_table = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(a["rows"]))).read_all()
    session_ids = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(a["sessions.id"]))).read_all().column("id")

    index = SparseIndex(k1, b)
    index.segments, index.frozen = [Segment(a["seg.indptr"], a["seg.docs"], a["seg.tfs"])], 1
    terms = a["vocab.terms"]
    index.cols = dict(zip(terms.tolist(), range(terms.size)))
    index.df = a["vocab.df"]
    t = DocTable.__new__(DocTable)
    t.capacity, t.size = h["capacity"], h["size"]
    for name in DocTable.FIELDS:
        setattr(t, name, a[f"doc.{name}"])
    index.docs, index.n_live, index.total_len, index.codes = t, h["n_live"], h["total_len"], h["codes"]
    g = index.grams
    g.df = dict(zip(a["gram.keys"].tolist(), a["gram.df"].tolist()))
    g.start, g.stop, g.norm = a["gram.start"], a["gram.stop"], a["gram.norm"]
    g.set_base(a["gram.buf"], a["gram.w"])

    rows = FactRows()
    if rows_table.num_rows:
        rows.chunks, rows.frozen = [rows_table], 1
        rows.offset_of = a["rows.row_of"]
        rows.chunk_of = np.where(rows.offset_of >= 0, 0, -1).astype(np.int32)
    session_last = dict(zip(session_ids.to_pylist(), a["sessions.doc"].tolist()))
    return Loaded(index, rows, session_last, int(h["stamp"]))
