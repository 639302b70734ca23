"""A replica's index saved beside its memory file (`memory.duckdb.idx`), so that a new kernel
maps it instead of rebuilding it from DuckDB, and kernels on one file share its pages.

One file, published by an atomic rename: a reader finds the old file or the new one, never a
half-written one, and a kernel that mapped the old one keeps reading it. The header names the
memory file and the change stamp the arrays reflect, and holds an XXH3 checksum of every array
(64 bits, at memory speed: a CRC-32 took most of a new kernel's open at 1M). Anything
that does not check out (another file's index, one newer than the file, a damaged or truncated
one, another format) is `Stale`: the caller rebuilds, and nothing saved is trusted blindly.
The large blobs are checked just after the open, in the background (`Loaded.check_rest`); one
that is damaged then is dropped and the index rebuilt at the next call.
The map is copy-on-write, so the replica's in-place writes stay private to its process.

Layout: b"SLMIDX01", the header's length (8 bytes, little-endian), the header (JSON), its
CRC-32 (4 bytes); then every array at a 4,096-byte boundary from `data_start`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import json
import mmap
import os
import struct
import threading
import zlib
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import xxhash

from .sparse import DocTable, Segment, SparseIndex, merge, tfidf_norms
from ..core.scoring import smooth_idf
from .ngrams import GramStore
from .rows import FactRows, facts_table
from .vectors import VectorStore

MAGIC = b"SLMIDX01"
FORMAT = 9  # 4: a shared flag per memory; 5: session chains per author; 6: 32-bit gram ids; 7: XXH3 sums, packed gram ids;
# 8: the meaning channel's vectors; 9: its vectors in slots grouped by cell
ALIGN = 4096


class Stale(Exception):
    """The saved index cannot stand for the file now (the message says why). `keep`: it may
    still be good for someone else (a newer version's format, another user's permissions), so
    it is not removed."""

    def __init__(self, why: str, *, keep: bool = False):
        super().__init__(why)
        self.keep = keep


def path_for(db_path: str) -> str:
    return db_path + ".idx"


@dataclass
class Snapshot:
    """What a save needs, taken under the store's lock in a few copies: arrays the replica
    changes in place are copied, the ones it only appends to or replaces are shared."""

    stamp: int
    schema: int
    identity: str
    last: list        # [doc id, fact id] of the newest memory at the save: the history it saw
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
    vectors: dict  # VectorStore.frozen


def snapshot(index: SparseIndex, rows: FactRows, session_last: dict, *, stamp: int, schema: int,
             identity: str, last: tuple | None) -> Snapshot:
    """Call with the store's lock held; cheap next to a save (copies of per-document arrays)."""
    n = index.docs.size
    ncols = len(index.cols)
    g = index.grams
    tail = [(c, np.asarray(ds, np.int32), np.asarray(fs, np.float32)) for c, (ds, fs) in index.tail.items()]
    return Snapshot(
        stamp=int(stamp), schema=int(schema), identity=identity, last=list(last) if last else [],
        k1=index.k1, b=index.b,
        segments=list(index.segments), tail=tail,
        terms=np.fromiter(index.cols.keys(), np.int64, ncols),
        df=index.df[:ncols].copy(),
        docs={name: getattr(index.docs, name)[:n].copy() for name in DocTable.FIELDS},
        size=n, n_live=index.n_live, total_len=index.total_len, codes=copy.deepcopy(index.codes),
        gram_start=g.start[:n].copy(), gram_stop=g.stop[:n].copy(), gram_norm=g.norm[:n].copy(),
        gram_entries=g.reader(),
        gram_df=(np.fromiter(g.df.keys(), np.int64, len(g.df)), np.fromiter(g.df.values(), np.int64, len(g.df))),
        row_chunks=list(rows.chunks), row_pending=sorted(rows.pending.items()),
        chunk_of=rows.chunk_of.copy(), offset_of=rows.offset_of.copy(),
        session_last=dict(session_last),
        vectors=index.vectors.frozen(n),
    )


def _pad(a: np.ndarray, size: int, fill=0) -> np.ndarray:
    out = np.full(size, fill, dtype=a.dtype)
    out[: a.size] = a
    return out


DOC_STEP = 65_536  # memories per step when the gram vectors are written (bounds the save's RAM)


@dataclass
class _Blob:
    """One array of the file: its description, its size, and its bytes in pieces (written one
    piece at a time, so a save at a million memories never holds a second copy of the index)."""

    info: dict
    nbytes: int
    pieces: object  # a callable returning an iterable of buffers


def _array(a: np.ndarray) -> _Blob:
    a = np.ascontiguousarray(a)
    return _Blob({"dtype": a.dtype.str, "shape": list(a.shape)}, a.nbytes,
                 lambda: [memoryview(a.reshape(-1)).cast("B")] if a.size else [])


def _merged_postings(snap: Snapshot, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every segment and the tail as one CSC segment without dead memories, built by placing
    each segment's live postings at their final positions (no whole-index sort), and every
    memory's |tf-idf| with the idf of now (what a rebuild computes)."""
    ncols, n = snap.terms.size, snap.size
    parts = list(snap.segments)
    if snap.tail:
        parts.append(Segment.from_coo(np.concatenate([np.full(ds.size, c, np.int64) for c, ds, _ in snap.tail]),
                                      np.concatenate([ds for _, ds, _ in snap.tail]),
                                      np.concatenate([fs for _, _, fs in snap.tail]), ncols))
    merged = merge(parts, alive, ncols)  # (without the dead, so every posting counts below)
    sq = tfidf_norms([merged], smooth_idf(snap.n_live, snap.df), n)
    indptr, docs, tfs = merged.indptr, merged.docs, merged.tfs
    return indptr, docs, tfs, np.sqrt(sq[:n]).astype(np.float32)


def _gram_pieces(snap: Snapshot, lens: np.ndarray, which: int):
    """The live memories' gram hashes (which=0) or weights (1), in doc order, a step at a time."""
    def pieces():
        for lo in range(0, snap.size, DOC_STEP):
            hi = min(snap.size, lo + DOC_STEP)
            n = lens[lo:hi]
            total = int(n.sum())
            if not total:
                continue
            ends = np.cumsum(n)
            idx = np.repeat(snap.gram_start[lo:hi], n) + (np.arange(total) - np.repeat(ends - n, n))
            yield memoryview(np.ascontiguousarray(snap.gram_entries.entries(idx)[which])).cast("B")
    return pieces


def _blobs(snap: Snapshot) -> tuple[dict[str, _Blob], dict]:
    """The blobs of the file, and the header's counts."""
    n, ncols = snap.size, snap.terms.size
    alive = np.append(snap.docs["alive"], False)  # (the sentinel: a link to no memory)
    indptr, docs, tfs, norm = _merged_postings(snap, alive)
    cap = n + max(4096, n // 8)  # headroom: new memories fill it in place (private pages)
    doc = dict(snap.docs, norm=norm)
    alive = snap.docs["alive"]
    lens = np.where(alive, snap.gram_stop - snap.gram_start, 0).astype(np.int64)
    ends = np.cumsum(lens)
    g_order = np.argsort(snap.gram_df[0])
    blobs = {
        "seg.indptr": _array(indptr), "seg.docs": _array(docs), "seg.tfs": _array(tfs),
        "vocab.terms": _array(snap.terms), "vocab.df": _array(_pad(snap.df, ncols + max(4096, ncols // 8))),
        **{f"doc.{name}": _array(_pad(a, cap + 1, -1 if name in ("prev", "next") else 0)) for name, a in doc.items()},
        "gram.keys": _array(snap.gram_df[0][g_order]), "gram.df": _array(snap.gram_df[1][g_order]),
        "gram.start": _array(_pad(ends - lens, cap + 1)), "gram.stop": _array(_pad(ends, cap + 1)),
        "gram.norm": _array(_pad(np.where(alive, snap.gram_norm, 0.0), cap + 1)),
    }
    used = int(lens.sum())
    blobs["gram.ids"] = _array(snap.gram_entries.keys)
    blobs["gram.buf"] = _Blob({"dtype": "<i4", "shape": [used]}, used * 4, _gram_pieces(snap, lens, 0))
    blobs["gram.w"] = _Blob({"dtype": "<f4", "shape": [used]}, used * 4, _gram_pieces(snap, lens, 1))
    chunks = _row_chunks(snap, alive)
    chunk_of = np.full(cap + 1, -1, np.int32)
    row_of = np.full(cap + 1, -1, np.int32)
    for i, chunk in enumerate(chunks):
        d = chunk.column("doc_id").to_numpy().astype(np.int64)
        chunk_of[d], row_of[d] = i, np.arange(d.size, dtype=np.int32)
    blobs["rows.chunk_of"], blobs["rows.row_of"] = _array(chunk_of), _array(row_of)
    sessions = list(snap.session_last.items())
    blobs["sessions.doc"] = _array(np.array([d for _, d in sessions], dtype=np.int64))
    ids = _ipc([pa.table({"id": pa.array([s for s, _ in sessions], pa.string())})])
    blobs["sessions.id"] = _Blob({"arrow": True}, ids.nbytes, lambda: [ids])
    rows = _ipc(chunks)
    blobs["rows"] = _Blob({"arrow": True}, rows.nbytes, lambda: [rows])
    vs = snap.vectors
    vec = {"vec_model": vs["model"], "vec_dims": vs["dims"]}
    if vs["dims"]:  # the rows by slot, a forgotten memory's row zeroed (headroom after them)
        used, owner = vs["used"], vs["owner"]
        room = used + max(4096, used // 8)
        blobs["vec.slot"], blobs["vec.owner"] = _array(_pad(vs["slot"], cap + 1, -1)), _array(_pad(owner, room, -1))
        centroids = VectorStore.live_centroids(vs["data"], owner, vs["starts"], vs["dims"])
        blobs["vec.centroids"], blobs["vec.starts"] = _array(centroids), _array(vs["starts"])
        blobs["vec.data"] = _Blob({"dtype": "<f4", "shape": [room, vs["dims"]]}, room * vs["dims"] * 4,
                                  _vector_pieces(vs["data"], owner, room))
        if vs["coded"] is not None:  # (the grouped rows' int8 codes, mapped as the rows are)
            for name, part in zip(("codes", "code_scale", "code_a", "code_b"), vs["coded"]):
                blobs[f"vec.{name}"] = _array(part)
        vec.update(vec_used=used, vec_packed=vs["packed"], vec_live=vs["live"], vec_trained_at=vs["trained_at"])
    counts = {"size": n, "capacity": cap, "n_live": snap.n_live, "total_len": snap.total_len,
              "codes": snap.codes, "rows_chunks": len(chunks), **vec}
    return blobs, counts


def _vector_pieces(data: np.ndarray, owner: np.ndarray, total: int):
    """The rows of `data` whose `owner` is a live memory, zeros for the others and the headroom."""
    def pieces():
        for lo in range(0, total, DOC_STEP):
            hi = min(total, lo + DOC_STEP)
            piece = np.zeros((hi - lo, data.shape[1]), np.float32)
            have = np.flatnonzero(owner[lo:hi] >= 0)
            piece[have] = data[lo + have]
            yield memoryview(piece).cast("B")
    return pieces


def _row_chunks(snap: Snapshot, alive: np.ndarray) -> list[pa.Table]:
    """Each live memory's current row, in the chunks the replica holds them in (a chunk whose
    rows are all current is kept as it is: no copy)."""
    out = []
    for c, chunk in enumerate(snap.row_chunks):
        d = chunk.column("doc_id").to_numpy().astype(np.int64)
        current = (d < alive.size) & (snap.chunk_of[np.minimum(d, snap.chunk_of.size - 1)] == c)
        current &= snap.offset_of[np.minimum(d, snap.offset_of.size - 1)] == np.arange(d.size)
        current[current] &= alive[d[current]]
        if current.all():
            out.append(chunk)
        elif current.any():
            out.append(chunk.filter(pa.array(current)))
    pending = [(d, f) for d, f in snap.row_pending if d < alive.size and alive[d]]
    if pending:
        out.append(facts_table(pending))
    return [t.combine_chunks() for t in out if t.num_rows]


def _ipc(tables: list[pa.Table]) -> memoryview:
    """An Arrow IPC file, one record batch per table (each is a chunk of the rows at load)."""
    sink = pa.BufferOutputStream()
    schema = pa.unify_schemas([t.schema for t in tables], promote_options="permissive") if tables else pa.schema([])
    with pa.ipc.new_file(sink, schema) as w:
        for t in tables:
            w.write_table(t.cast(schema), max_chunksize=max(1, t.num_rows))
    return memoryview(sink.getvalue())


def _write_blob(fh, data: memoryview) -> None:
    fh.write(data)


def write(snap: Snapshot, path: str, mode: int = 0o600,
          publish: Callable[[Callable[[], None]], bool] | None = None) -> int:
    """Save atomically: a temporary file, flushed to disk, then renamed over `path`. Returns
    its size in bytes (0 if `publish` declined). A crash leaves the old file (or none) and a
    temporary one, which the next open removes once the process that wrote it is gone
    (`remove_leftovers`). `publish(rename)` decides, at the last moment, whether to rename or
    drop the file (a memory forgotten meanwhile must not come back)."""
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:  # (opened first: a folder it cannot write fails before the work)
        os.fchmod(fd, mode)  # as readable as the memory file itself, never more
        with os.fdopen(fd, "wb") as fh:
            size = _write(snap, fh)
            fh.flush()
            os.fsync(fh.fileno())
        if publish is None:
            os.replace(tmp, path)
        elif not publish(lambda: os.replace(tmp, path)):
            os.unlink(tmp)
            return 0
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(dfd)  # the rename itself survives a power cut
        finally:
            os.close(dfd)
    return size


def _write(snap: Snapshot, fh) -> int:
    """The layout, the blobs (each with its checksum as it goes), then the header."""
    blobs, counts = _blobs(snap)
    offset, layout = 0, {}
    for name, blob in blobs.items():
        layout[name] = dict(blob.info, offset=offset, nbytes=blob.nbytes, xxh3="0" * 16)
        offset += -(-blob.nbytes // ALIGN) * ALIGN
    header = {"format": FORMAT, "schema": snap.schema, "identity": snap.identity, "stamp": snap.stamp,
              "last": snap.last, "data_bytes": offset, "blobs": layout, **counts}
    data_start = -(-(16 + len(json.dumps(header)) + 4 + 64) // ALIGN) * ALIGN
    header["data_start"] = data_start
    for name, blob in blobs.items():
        fh.seek(data_start + layout[name]["offset"])
        digest, size = xxhash.xxh3_64(), 0
        for piece in blob.pieces():
            digest.update(piece)
            size += piece.nbytes
            _write_blob(fh, piece)
        if size != blob.nbytes:
            raise ValueError(f"{name}: wrote {size} bytes, planned {blob.nbytes}")
        layout[name]["xxh3"] = digest.hexdigest()
    fh.truncate(data_start + offset)
    head = json.dumps(header).encode()  # (the checksums have their final values now)
    if 20 + len(head) > data_start:
        raise ValueError("index header larger than planned")
    fh.seek(0)
    fh.write(MAGIC + struct.pack("<Q", len(head)) + head + struct.pack("<I", zlib.crc32(head)))
    return data_start + offset


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
            with contextlib.suppress(OSError):
                p.unlink()
        except OSError:
            pass


def discard(path: str, why: Stale) -> None:
    """Remove a saved index that did not check out, so that no later open can take it (a
    restored file's stamps catch up with an old index's)."""
    if not why.keep:
        with contextlib.suppress(OSError):
            os.unlink(path)


#: Blobs this large are checked against their hashes after the open, in the background: at a
#: million memories they are nearly all of the file's 2.5 GB, and reading them whole took a
#: new kernel 3-5 s when the page cache no longer held them; a recall reads a few of their pages.
CHECK_LATER_FROM = 16 * 2**20


@dataclass
class Loaded:
    index: SparseIndex
    rows: FactRows
    session_last: dict
    stamp: int
    #: Checks the blobs CHECK_LATER_FROM or larger: the first damaged one's name, or None.
    check_rest: Callable[[], str | None] = lambda: None


def read(path: str, *, schema: int, identity: str, newest: int, k1: float, b: float,
         holds: Callable[[int, str, int], bool]) -> Loaded:
    """Map a saved index for the memory file described by `schema`, `identity` and its newest
    change stamp `newest`; `holds(doc_id, fact_id, stamp)` says whether the file still has the
    newest memory the save saw (or retired it later), so a file put back from a backup and
    written again is not taken for the history the index saw. Raises Stale when it does not
    stand for that file."""
    try:
        return _read(path, schema, identity, newest, k1, b, holds)
    except FileNotFoundError:
        raise Stale("no saved index", keep=True) from None
    except PermissionError:
        raise Stale("the saved index is not readable here", keep=True) from None
    except Stale:
        raise
    except (OSError, ValueError, KeyError, TypeError, IndexError, pa.ArrowException) as exc:
        raise Stale(f"unreadable ({type(exc).__name__}: {exc})") from None


def _read(path, schema, identity, newest, k1, b, holds) -> Loaded:
    mm, h = _checked_header(path, schema, identity, newest, holds)
    a, check_rest = _checked_blobs(mm, h)
    reader = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(a["rows"])))
    row_chunks = [pa.Table.from_batches([reader.get_batch(i)]) for i in range(reader.num_record_batches)]
    session_ids = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(a["sessions.id"]))).read_all().column("id")
    index = _index_of(a, h, k1, b)
    rows = FactRows()
    if len(row_chunks) != h["rows_chunks"]:
        raise Stale("damaged (rows)")
    if row_chunks:
        rows.chunks, rows.frozen = row_chunks, len(row_chunks)
        rows.chunk_of, rows.offset_of = a["rows.chunk_of"], a["rows.row_of"]
    session_last = dict(zip(session_ids.to_pylist(), a["sessions.doc"].tolist()))
    return Loaded(index, rows, session_last, int(h["stamp"]), check_rest)


def _checked_header(path, schema, identity, newest, holds) -> tuple[mmap.mmap, dict]:
    """The file mapped and its header, checked against the memory file it must belong to."""
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
        raise Stale(f"index format {h['format']}, this version writes {FORMAT}", keep=h["format"] > FORMAT)
    if h["schema"] != schema:
        raise Stale(f"saved for schema version {h['schema']}, the file has {schema}")
    if h["identity"] != identity:
        raise Stale("saved for another memory file")
    if h["stamp"] > newest:
        raise Stale("newer than the memory file (a restored or replaced file)")
    if size != h["data_start"] + h["data_bytes"]:
        raise Stale("truncated")
    if h["last"] and not holds(int(h["last"][0]), str(h["last"][1]), int(h["stamp"])):
        raise Stale("saved for another history of the memory file (a restored file written again)")
    return mm, h


def _checked_blobs(mm: mmap.mmap, h: dict) -> tuple[dict, Callable[[], str | None]]:
    """Every blob the header lists (arrays mapped, Arrow as bytes), those under
    CHECK_LATER_FROM checked against their hashes now; and what checks the others."""
    buf = memoryview(mm)
    a: dict = {}
    views = {name: buf[h["data_start"] + info["offset"]: h["data_start"] + info["offset"] + info["nbytes"]]
             for name, info in h["blobs"].items()}
    now = [name for name, info in h["blobs"].items() if info["nbytes"] < CHECK_LATER_FROM]
    later = [name for name in views if name not in now]
    bad = _damaged(views, h, now)
    if bad is not None:
        raise Stale(f"damaged ({bad})")
    for name, info in h["blobs"].items():
        mv = views[name]
        a[name] = mv if info.get("arrow") else np.frombuffer(mv, dtype=np.dtype(info["dtype"])).reshape(info["shape"])
    return a, lambda: _damaged(views, h, later)


def _damaged(views: dict, h: dict, names: list[str]) -> str | None:
    """The first of these blobs whose hash is not the header's, or None."""
    # (two at a time: the hash lets go of the GIL, and reading the pages in is most of the work)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        sums = pool.map(xxhash.xxh3_64_hexdigest, (views[name] for name in names))
        return next((name for name, got in zip(names, sums) if got != h["blobs"][name]["xxh3"]), None)


def _index_of(a: dict, h: dict, k1: float, b: float) -> SparseIndex:
    """The sparse index over the mapped blobs: one frozen segment, the vocabulary, the
    documents' table, the 3-grams and the vectors."""
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
    g.set_keys(a["gram.ids"])
    g.set_base(a["gram.buf"], a["gram.w"])
    if h.get("vec_dims"):
        index.vectors = VectorStore.mapped(h["vec_model"], a, {k: h[f"vec_{k}"] for k in
                                                              ("used", "packed", "live", "trained_at")})
    return index
