"""Prototype: a persisted, memory-mapped index beside the DuckDB file (memory.duckdb.idx).

One file, so publishing is one os.replace (atomic) and a reader maps one inode: a kernel that
has the old file mapped keeps reading the old inode after a writer replaces it.

Layout:  [8 bytes magic "SLMIDX01"][8 bytes little-endian header length][header JSON]
         [arrays, each at a 4096-aligned offset][Arrow IPC file of the displayable rows]
The header holds the DuckDB file's change stamp (max(changed) over memories and tombstones), the
schema version, a file identity check (fact_id of the lowest and highest doc id), and for every
blob its offset, length, dtype, shape and crc32. The header itself has a crc32 too.

Load = mmap the file copy-on-write (MAP_PRIVATE, np.memmap mode "c"): in-place writes of the
per-document arrays (alive, links, updated, df ...) dirty private pages only; the base postings
are never written (the LSM merge leaves segments > 4x the new one alone).
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import sys
import time
import zlib

import numpy as np
import pyarrow as pa

sys.path.insert(0, "/work/idx-research/base")

from slm_magic import ngrams  # noqa: E402
from slm_magic.index import DocTable, Segment, SparseIndex, _radix_order  # noqa: E402
from slm_magic.memory import Memory, INDEX_FAILURES  # noqa: E402
from slm_magic.rows import FactRows  # noqa: E402

MAGIC = b"SLMIDX01"
ALIGN = 4096
FORMAT = 1
MADVISE = None  # e.g. mmap.MADV_RANDOM: no readahead around a fault


class Vocab:
    """term hash -> column: a sorted (mapped) array searched by binary search, plus a small
    dict for the terms this process added since. Drop-in for the dict SparseIndex.cols was."""

    def __init__(self, sorted_terms: np.ndarray):
        self.base = sorted_terms
        self.n0 = int(sorted_terms.size)
        self.extra: dict[int, int] = {}

    def get(self, term, default=None):
        b = self.base
        i = int(np.searchsorted(b, term))
        if i < self.n0 and b[i] == term:
            return i
        return self.extra.get(term, default)

    def __contains__(self, term):
        return self.get(term) is not None

    def __getitem__(self, term):
        c = self.get(term)
        if c is None:
            raise KeyError(term)
        return c

    def __setitem__(self, term, col):
        self.extra[term] = col

    def __len__(self):
        return self.n0 + len(self.extra)


class GramDF:
    """gram hash -> df over sorted arrays plus a dict of changes (GramStore.df's interface)."""

    def __init__(self, grams: np.ndarray, df: np.ndarray):
        self.g, self.df0 = grams, df
        self.extra: dict[int, int] = {}

    def get(self, g, default=0):
        if g in self.extra:
            return self.extra[g]
        i = int(np.searchsorted(self.g, g))
        if i < self.g.size and self.g[i] == g:
            return int(self.df0[i])
        return default

    def __getitem__(self, g):
        return self.get(g)

    def __setitem__(self, g, v):
        self.extra[g] = v

    def __len__(self):
        return int(self.g.size) + len(self.extra)


# --------------------------------------------------------------------------------------- save
def _one_segment(index: SparseIndex) -> Segment:
    """All segments and the tail as one CSC segment (done at save time only)."""
    index._seal_tail()
    segs = index.segments
    if len(segs) == 1:
        return segs[0]
    ncols = len(index.cols)
    parts = [s.to_coo() for s in segs]
    cols = np.concatenate([p[0] for p in parts])
    docs = np.concatenate([p[1] for p in parts])
    tfs = np.concatenate([p[2] for p in parts])
    keep = index.docs.alive[docs]
    cols, docs, tfs = cols[keep], docs[keep], tfs[keep]
    order = _radix_order(cols)   # stable: within a column, docs stay ascending
    return Segment.from_coo(cols[order], docs[order], tfs[order], ncols)


def save(mem: Memory, path: str | None = None, stamp: int | None = None, fsync: bool = True,
         _die_after_bytes: int | None = None) -> dict:
    """Write mem's index + rows to `path` (default: DB path + '.idx') atomically."""
    index, rows, store = mem.index, mem.rows, mem.store
    path = path or store.path + ".idx"
    t0 = time.perf_counter()
    with store.lock:
        stamp = mem._seen if stamp is None else stamp
        schema = store.schema_version()
        ident = _identity(store)
    index.recompute_norms()  # the saved index = a rebuild at its stamp (idf of now)
    seg = _one_segment(index)
    index.segments = [seg]
    t = index.docs
    n = t.size
    cap = n + max(4096, n // 8)   # headroom: new memories fill it in place (copy-on-write pages)
    # vocabulary in hash order (columns are creation order after writes; whole loads are sorted)
    terms = np.fromiter(index.cols.keys(), np.int64, len(index.cols)) if isinstance(index.cols, dict) \
        else np.concatenate([index.cols.base, np.fromiter(index.cols.extra.keys(), np.int64)])
    colof = np.fromiter(index.cols.values(), np.int64, len(index.cols)) if isinstance(index.cols, dict) \
        else np.concatenate([np.arange(index.cols.n0), np.fromiter(index.cols.extra.values(), np.int64)])
    if not (terms[1:] > terms[:-1]).all() or not (colof == np.arange(colof.size)).all():
        # renumber columns so that column == rank of the term hash
        order = np.argsort(terms)
        rank = np.empty_like(order)
        rank[colof[order]] = np.arange(order.size)
        c, d, f = seg.to_coo()
        newc = rank[c]
        o = _radix_order(newc)
        seg = Segment.from_coo(newc[o], d[o], f[o], terms.size)
        df = np.zeros(terms.size, np.int64)
        df[rank] = index.df[: terms.size]
        terms = terms[order]
    else:
        df = index.df[: terms.size]
    g = index.grams
    gd = g.df if isinstance(g.df, dict) else {**{int(k): int(v) for k, v in zip(g.df.g, g.df.df0)}, **g.df.extra}
    gkeys = np.fromiter(gd.keys(), np.int64, len(gd))
    gvals = np.fromiter(gd.values(), np.int64, len(gd))
    go = np.argsort(gkeys)
    # gram forward vectors compacted in doc order (drops dead docs' slices)
    lens = (g.stop[:n] - g.start[:n]).astype(np.int64)
    total = int(lens.sum())
    idx = np.repeat(g.start[:n], lens) + (np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens))
    gstart = np.concatenate(([0], np.cumsum(lens)[:-1]))
    arrays = {
        "seg.indptr": seg.indptr, "seg.docs": seg.docs, "seg.tfs": seg.tfs,
        "vocab.terms": terms, "vocab.df": _pad(df, terms.size + max(4096, terms.size // 8)),
        **{f"doc.{name}": _pad(getattr(t, name)[:n], cap + 1, -1 if name in ("prev", "next") else 0)
           for name in DocTable.FIELDS},
        "gram.keys": gkeys[go], "gram.df": gvals[go],
        "gram.start": _pad(gstart, cap + 1), "gram.stop": _pad(gstart + lens, cap + 1),
        "gram.norm": _pad(g.norm[:n], cap + 1), "gram.buf": g.gram_buf[idx], "gram.w": g.w_buf[idx],
    }
    # rows: one Arrow table sorted by doc_id, so offset_of is a searchsorted (saved as an array)
    table = _rows_table(rows)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table.combine_chunks())  # one batch: a take on several chunks concatenates them
    rows_buf = sink.getvalue()
    doc_of_row = table.column("doc_id").to_numpy()
    row_of = np.full(cap + 1, -1, np.int32)
    row_of[doc_of_row] = np.arange(doc_of_row.size, dtype=np.int32)
    arrays["rows.row_of"] = row_of
    sess_ids = pa.array(list(mem._session_last.keys()), pa.string())
    arrays["sess.doc"] = np.fromiter(mem._session_last.values(), np.int64, len(mem._session_last))
    meta = {"format": FORMAT, "schema": schema, "stamp": int(stamp), "identity": ident,
            "n_live": index.n_live, "total_len": index.total_len, "size": t.size, "capacity": cap,
            "k1": index.k1, "b": index.b, "codes": index.codes, "gram_used": total,
            "blobs": {}}
    # lay out
    blobs = []
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        blobs.append((name, memoryview(a).cast("B"), {"dtype": a.dtype.str, "shape": list(a.shape)}))
    sess_sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sess_sink, pa.schema([("s", pa.string())])) as w:
        w.write_table(pa.table({"s": sess_ids}))
    blobs.append(("sess.ids", memoryview(sess_sink.getvalue()), {"arrow": True}))
    blobs.append(("rows", memoryview(rows_buf), {"arrow": True}))
    off = 0
    for name, mv, info in blobs:
        info.update(offset=off, nbytes=mv.nbytes, crc=zlib.crc32(mv))
        meta["blobs"][name] = info
        off += -(-mv.nbytes // ALIGN) * ALIGN if mv.nbytes else 0
    meta["data_bytes"] = off
    head = json.dumps(meta).encode()
    head_len = -(-(16 + len(head) + 4) // ALIGN) * ALIGN
    meta["data_start"] = head_len
    head = json.dumps(meta).encode()
    assert 16 + len(head) + 4 <= head_len
    tmp = f"{path}.tmp-{os.getpid()}"
    written = 0
    with open(tmp, "wb") as fh:
        fh.write(MAGIC + struct.pack("<Q", len(head)) + head + struct.pack("<I", zlib.crc32(head)))
        fh.seek(head_len)
        for name, mv, info in blobs:
            fh.seek(head_len + info["offset"])
            fh.write(mv)
            written += mv.nbytes
            if _die_after_bytes is not None and written >= _die_after_bytes:
                fh.flush()
                os._exit(9)  # the kill test: leave a half-written temp file behind
        fh.truncate(head_len + off)
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
    os.replace(tmp, path)
    if fsync:
        dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
    return {"bytes": head_len + off, "s": time.perf_counter() - t0,
            "sizes": {k: v["nbytes"] for k, v in meta["blobs"].items()}}


def _pad(a, size, fill=0):
    out = np.full(size, fill, dtype=a.dtype)
    out[: a.size] = a
    return out


def _identity(store) -> list:
    """Which file this is: the fact_ids at the lowest and highest doc id (a copy of another
    store with a higher stamp must not pass for this one)."""
    r = store.con.execute("SELECT min(doc_id), max(doc_id) FROM memories").fetchall()[0]
    if r[0] is None:
        return []
    got = store.con.execute("SELECT doc_id, fact_id FROM memories WHERE doc_id IN (?, ?) ORDER BY doc_id",
                            [r[0], r[1]]).fetchall()
    return [[int(d), f] for d, f in got]


def _rows_table(rows: FactRows) -> pa.Table:
    tables = list(rows.chunks)
    if rows.pending:
        items = sorted(rows.pending.items())
        from slm_magic.store import FACT_COLUMNS
        cols = {"doc_id": [d for d, _ in items]}
        for name in FACT_COLUMNS:
            cols[name] = [getattr(f, name) for _, f in items]
        cols["tags"] = [list(x) for x in cols["tags"]]
        tables.append(pa.table(cols))
    table = pa.concat_tables(tables, promote_options="permissive")
    # keep only each doc's current row (a doc id shown by the row map)
    doc = table.column("doc_id").to_numpy()
    live = (rows.chunk_of[doc] >= 0) if not rows.pending else np.ones(doc.size, bool)
    table = table.filter(pa.array(live))
    return table.sort_by("doc_id")


# --------------------------------------------------------------------------------------- load
class Stale(Exception):
    pass


def open_index(path: str, verify: bool = True):
    """Map the file; return (header, {name: array view}, rows table, session ids). Raises Stale
    on any inconsistency (the caller rebuilds)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size < 16:
            raise Stale("short file")
        mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    if MADVISE is not None:
        mm.madvise(MADVISE)
    if mm[:8] != MAGIC:
        raise Stale("bad magic")
    (hl,) = struct.unpack("<Q", mm[8:16])
    head = mm[16:16 + hl]
    (crc,) = struct.unpack("<I", mm[16 + hl:20 + hl])
    if zlib.crc32(head) != crc:
        raise Stale("header checksum")
    meta = json.loads(head)
    base = meta["data_start"]
    if size != base + meta["data_bytes"]:
        raise Stale("truncated")
    buf = memoryview(mm)
    out = {}
    for name, info in meta["blobs"].items():
        mv = buf[base + info["offset"]: base + info["offset"] + info["nbytes"]]
        if verify and zlib.crc32(mv) != info["crc"]:
            raise Stale(f"checksum of {name}")
        if info.get("arrow"):
            out[name] = mv
        else:
            out[name] = np.frombuffer(mv, dtype=np.dtype(info["dtype"])).reshape(info["shape"])
    pabuf = pa.py_buffer(out.pop("rows"))
    rows = pa.ipc.open_file(pa.BufferReader(pabuf)).read_all()
    sess = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(out.pop("sess.ids")))).read_all().column("s")
    return meta, out, rows, sess, mm


class MappedRows(FactRows):
    """FactRows over the mapped table (one chunk, row_of per doc) plus the usual in-RAM chunks."""

    def __init__(self, table: pa.Table, row_of: np.ndarray):
        super().__init__()
        self.chunks = [table]
        self.chunk_of = np.where(row_of >= 0, 0, -1).astype(np.int32)  # 4 B/doc private; could be lazy
        self.offset_of = row_of

    def _merge(self):  # never merge into the mapped base chunk
        while (len(self.chunks) >= 3 and self.chunks[-2].num_rows <= 4 * self.chunks[-1].num_rows
               and self.chunks[-2].num_rows + self.chunks[-1].num_rows <= 250_000):
            merged = pa.concat_tables(self.chunks[-2:], promote_options="permissive").combine_chunks()
            self.chunks[-2:] = [merged]
            doc_ids = merged.column("doc_id").to_numpy().astype(np.int64)
            self.chunk_of[doc_ids] = len(self.chunks) - 1
            self.offset_of[doc_ids] = np.arange(doc_ids.size, dtype=np.int32)


class LazySessions(dict):
    """_session_last built on first use (only writes and retirements read it)."""

    def __init__(self, ids, docs):
        super().__init__()
        self._src = (ids, docs)

    def _fill(self):
        if self._src is not None:
            ids, docs = self._src
            self._src = None
            super().update(zip(ids.to_pylist(), docs.tolist()))

    for _m in ("__getitem__", "__setitem__", "__contains__", "__iter__", "__len__", "get", "items", "keys",
               "values", "pop", "update"):
        def _make(name):
            meth = getattr(dict, name)

            def f(self, *a, **k):
                self._fill()
                return meth(self, *a, **k)
            return f
        locals()[_m] = _make(_m)
    del _m, _make


def index_from(meta, arr, rows_table, sess) -> tuple[SparseIndex, FactRows, dict]:
    ix = SparseIndex(meta["k1"], meta["b"])
    ix.segments = [Segment(arr["seg.indptr"], arr["seg.docs"], arr["seg.tfs"])]
    ix.vocab_sorted = arr["vocab.terms"]
    ix.cols = Vocab(arr["vocab.terms"])
    df = arr["vocab.df"]
    ix.df = df  # copy-on-write pages; grows by concatenate (a private copy) when new terms exceed it
    t = DocTable.__new__(DocTable)
    t.capacity, t.size = meta["capacity"], meta["size"]
    for name in DocTable.FIELDS:
        setattr(t, name, arr[f"doc.{name}"])
    ix.docs = t
    ix.n_live, ix.total_len = meta["n_live"], meta["total_len"]
    ix.codes = meta["codes"]
    g = ix.grams
    g.df = GramDF(arr["gram.keys"], arr["gram.df"])
    g.start, g.stop, g.norm = arr["gram.start"], arr["gram.stop"], arr["gram.norm"]
    g.gram_buf, g.w_buf = arr["gram.buf"], arr["gram.w"]
    g.used = meta["gram_used"]
    rows = MappedRows(rows_table, arr["rows.row_of"])
    return ix, rows, LazySessions(sess, arr["sess.doc"])


class MappedMemory(Memory):
    """Memory whose open tries the persisted index first; stale or damaged means rebuilt."""

    verify = True
    load_info: dict = {}

    def _load_index(self) -> None:
        path = self.store.path + ".idx"
        t0 = time.perf_counter()
        try:
            with self.store.lock:
                meta, arr, rows_table, sess, self._mm = open_index(path, verify=self.verify)
                now = self.store.max_change()
                if meta["format"] != FORMAT or meta["schema"] != self.store.schema_version():
                    raise Stale("format/schema")
                if now < meta["stamp"]:
                    raise Stale("file older than index")
                ident = meta["identity"]
                if ident and sorted(self.store.con.execute(
                        "SELECT doc_id, fact_id FROM memories WHERE doc_id IN (?, ?)",
                        [ident[0][0], ident[-1][0]]).fetchall()) != sorted(map(tuple, ident)):
                    raise Stale("identity")
                self.index, self.rows, self._session_last = index_from(meta, arr, rows_table, sess)
                self._seen = meta["stamp"]
                t1 = time.perf_counter()
                if now > self._seen:  # catch up with what was written after the save
                    self._seen = max(self._seen, self._apply_changes(self._seen))
                self.store.known_stamp = self.store.file_stamp()
            self.index_error = None
            self.load_info = {"mode": "mapped", "map_ms": (t1 - t0) * 1000,
                              "catchup_ms": (time.perf_counter() - t1) * 1000}
        except (Stale, FileNotFoundError, ValueError, KeyError) as exc:
            t1 = time.perf_counter()
            super()._load_index()
            self.load_info = {"mode": "rebuilt", "why": f"{type(exc).__name__}: {exc}",
                              "rebuild_ms": (time.perf_counter() - t1) * 1000}
