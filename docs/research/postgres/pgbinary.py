"""Vectorised Arrow -> PostgreSQL binary COPY encoder (numpy only), for psycopg's copy.write().

Every column becomes a list of "segments" (bytes, per-row offsets); a table's tuples are all
segments concatenated row by row in a single gather, so each byte is moved once.
"""
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PG_EPOCH_US = 946_684_800 * 1_000_000
HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
TRAILER = b"\xff\xff"
OID = {"int8": 20, "int4": 23, "text": 25}


def concat(segs, n):
    """Row-wise concatenation of segments [(bytes uint8[], offsets int64[n+1])] -> one segment."""
    lens = [np.diff(o) for _, o in segs]
    total = np.sum(lens, axis=0) if lens else np.zeros(n, np.int64)
    out_offs = np.zeros(n + 1, np.int64)
    np.cumsum(total, out=out_offs[1:])
    size = int(out_offs[-1])
    out = np.empty(size, np.uint8)
    it = np.int32 if size < 2**31 - 1 and max((d.size for d, _ in segs), default=0) < 2**31 - 1 else np.int64
    start = out_offs[:-1].copy()
    for (data, offs), ln in zip(segs, lens):
        w0 = int(ln[0]) if n else 0
        if n and np.all(ln == w0):          # fixed width: a strided 2-D copy
            if w0:
                if np.all(np.diff(start) == start[1] - start[0]) if n > 1 else True:
                    step = int(start[1] - start[0]) if n > 1 else 0
                    view = np.lib.stride_tricks.as_strided(out[int(start[0]):], shape=(n, w0), strides=(step, 1))
                    view[...] = data[offs[0]:offs[0] + n * w0].reshape(n, w0)
                else:
                    out[(start[:, None] + np.arange(w0)[None, :]).astype(it).ravel()] = \
                        data[offs[0]:offs[0] + n * w0]
        elif data.size:
            shift = np.repeat((start - offs[:-1]).astype(it), ln)
            shift += np.arange(offs[0], offs[-1], dtype=it)
            out[shift] = data[offs[0]:offs[-1]]
        start += ln
    return out, out_offs


def fixed(values_u8, width, n):
    return values_u8, np.arange(n + 1, dtype=np.int64) * width


def _len_seg(payload_lens, valid, n):
    return fixed(np.where(valid, payload_lens, -1).astype(">i4").view(np.uint8), 4, n)


def _valid(arr):
    return np.ones(len(arr), bool) if arr.null_count == 0 else pc.is_valid(arr).to_numpy(zero_copy_only=False)


def _text(arr):
    if arr.null_count:
        arr = pc.fill_null(arr, "")
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], np.int64, len(arr) + 1, arr.offset * 8)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    return data, offs


def encode_column(arr, pgtype):
    """One column as binary COPY fields: a list of segments (length field first)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    valid = _valid(arr)
    if pgtype == "text":
        data, offs = _text(arr)
        return [_len_seg(np.diff(offs), valid, n), (data, offs)]
    if pgtype in ("int8", "int4", "bool", "float8", "timestamp"):
        np_t = {"int8": ">i8", "int4": ">i4", "bool": "u1", "float8": ">f8", "timestamp": ">i8"}[pgtype]
        if pgtype == "timestamp":
            v = pc.fill_null(arr.cast(pa.timestamp("us")), 0).cast(pa.int64()).to_numpy() - PG_EPOCH_US
        else:
            v = pc.fill_null(arr, False if pgtype == "bool" else 0).to_numpy(zero_copy_only=False)
        w = np.dtype(np_t).itemsize
        if valid.all():   # length and value together: one fixed-width segment
            st = np.empty(n, dtype=[("l", ">i4"), ("v", np_t)])
            st["l"], st["v"] = w, v
            return [fixed(st.view(np.uint8), 4 + w, n)]
        u8 = np.ascontiguousarray(v.astype(np_t)).view(np.uint8)[np.repeat(valid, w)]
        offs = np.zeros(n + 1, np.int64)
        np.cumsum(np.where(valid, w, 0), out=offs[1:])
        return [_len_seg(np.where(valid, w, 0), valid, n), (u8, offs)]
    if pgtype in ("int8[]", "int4[]", "text[]"):
        assert arr.null_count == 0, "NULL arrays are not encoded"
        elem = pgtype[:-2]
        loffs = arr.offsets.to_numpy().astype(np.int64)
        counts = np.diff(loffs)
        values = arr.values if arr.offset == 0 else arr.flatten()
        m = len(values)
        if elem == "text":
            e_data, e_offs = concat(encode_column(values, "text"), m)
        else:
            w = 8 if elem == "int8" else 4
            st = np.empty(m, dtype=[("l", ">i4"), ("v", ">i8" if w == 8 else ">i4")])
            st["l"] = w
            st["v"] = values.to_numpy(zero_copy_only=False)
            e_data, e_offs = st.view(np.uint8), np.arange(m + 1, dtype=np.int64) * (4 + w)
        elems = (e_data, e_offs[loffs])
        hdr = np.empty(n, dtype=[("ndim", ">i4"), ("nulls", ">i4"), ("oid", ">i4"), ("dim", ">i4"), ("lb", ">i4")])
        hdr["ndim"], hdr["nulls"], hdr["oid"], hdr["dim"], hdr["lb"] = (counts > 0), 0, OID[elem], counts, 1
        hlen = np.where(counts > 0, 20, 12)                  # an empty array: ndim 0, no dimension
        if (counts > 0).all():
            hseg = fixed(hdr.view(np.uint8), 20, n)
        else:
            keep = (np.arange(20)[None, :] < hlen[:, None]).ravel()
            h_offs = np.zeros(n + 1, np.int64)
            np.cumsum(hlen, out=h_offs[1:])
            hseg = (hdr.view(np.uint8)[keep], h_offs)
        plen = hlen + np.diff(elems[1])
        return [_len_seg(plen, valid, n), hseg, elems]
    raise ValueError(pgtype)


def encode_table(table, pgtypes):
    """The tuples of a binary COPY (no header/trailer) for an Arrow table, as a uint8 array."""
    n = table.num_rows
    nf = np.full(n, len(pgtypes), ">i2").view(np.uint8)
    segs = [fixed(nf, 2, n)]
    for c, t in pgtypes.items():
        segs += encode_column(table.column(c), t)
    out, _ = concat(segs, n)
    return out
