"""Validation of new memories, column by column, so a bulk import pays C speed per value.

Every rule here produces one clear `InvalidInput` message naming the field (and the record's
position in a bulk import); nothing is written unless every record passes.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .core import text
from .errors import InvalidInput

#: The kinds of memory (the seed's types); "discovery" is the default.
MEMORY_TYPES: tuple[str, ...] = ("profile", "preference", "decision", "pattern", "discovery")

#: Longest content accepted, in characters. A pasted traceback, log or model report is kept
#: whole; this limit only protects the machine (benchmarks/long_memory.py: what a 1 MB memory
#: costs). Above it, store the file on disk and remember its path.
MAX_CONTENT_CHARS = 10_000_000

FIELDS = frozenset(("content", "session_id", "tags", "project", "type", "title", "topic_key", "core",
                    "created_at", "user_id", "source", "notebook", "cell", "cell_id", "code", "share"))
OPTIONAL_STR = ("session_id", "project", "title", "topic_key", "user_id", "source", "notebook", "cell_id", "code")
_NONE = type(None)


def normalise_tags(tags: str | Iterable[str] | None) -> tuple[str, ...]:
    """Tags as the seed's "auth,decision" string or a sequence; both mean the same tags."""
    if tags is None or isinstance(tags, str) and not tags:
        return ()
    if isinstance(tags, str):
        tags = tags.split(",")
    elif not isinstance(tags, (list, tuple, set, frozenset)):
        raise InvalidInput(f"tags must be a string or a list of strings, not {type(tags).__name__}")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInput(f"tags must be strings, got {type(tag).__name__}")
        tag = tag.replace("\x00", "").strip()
        if tag and tag not in out:
            out.append(tag)
    return tuple(out)


def tags_column(values: Sequence[Any]) -> list[list[str]]:
    """`normalise_tags` of each value, each distinct list of tags worked out once (a bulk
    write's tags repeat: a few lists among thousands of memories)."""
    done: dict[Any, tuple[str, ...]] = {}
    out = []
    for value in values:
        kind = type(value)
        if kind is list or kind is tuple:
            key = tuple(value)
        elif kind is str or value is None:
            key = value
        else:  # (a set, or a wrong type that normalise_tags names)
            out.append(list(normalise_tags(value)))
            continue
        try:
            tags = done[key]
        except KeyError:
            tags = done[key] = normalise_tags(value)
        except TypeError:  # (unhashable: a list inside the list, or another type, said so below)
            tags = normalise_tags(value)
        out.append(list(tags))
    return out


def new_fact_ids(n: int) -> list[str]:
    """n fresh memory ids: 16 hex digits, 64 random bits each, drawn at once."""
    digits = os.urandom(8 * n).hex()
    return [digits[i:i + 16] for i in range(0, 16 * n, 16)]


def content_hashes(contents: Sequence[str]) -> list[str]:
    return list(map(content_hash, contents))


def content_hash(content: str) -> str:
    """Hash of the content with case and whitespace normalised: equal findings, equal hash."""
    normal = " ".join(content.casefold().split())
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()[:32]


def epoch_seconds(dt: datetime) -> float:
    """Seconds since the epoch of a naive UTC datetime (how the engine keeps every time)."""
    return dt.replace(tzinfo=timezone.utc).timestamp()


def to_utc_naive(value: Any, default: datetime) -> datetime:
    """Store UTC without tzinfo; a naive datetime is taken to be UTC already."""
    if value is None:
        return default
    if not isinstance(value, datetime):
        raise InvalidInput(f"created_at must be a datetime, not {type(value).__name__}")
    if value.tzinfo is not None:
        if value.tzinfo is not timezone.utc:
            value = value.astimezone(timezone.utc)
        value = value.replace(tzinfo=None)
    return value


# <private>…</private> spans, redacted before anything is hashed or stored. An unclosed tag
# redacts to the end: a forgotten closing tag must not leak the secret.
_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)
REDACTED = "[REDACTED]"


def redact(text: str) -> str:
    return _PRIVATE.sub(REDACTED, text) if "<" in text else text


def validate(records: Sequence[Mapping[str, Any]], *, now: datetime, default_user: str,
             offset: int | None = None) -> dict[str, list]:
    """Check new memories and return them as complete columns; raise on the first problem.
    `offset`: the position of the first record in a bulk write, so a message names the
    record's place in the whole input (None: a single memory, no position named)."""
    n = len(records)

    def _where(_n: int, i: int) -> str:
        return "" if offset is None else f" (record {offset + i})"

    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise InvalidInput(f"a memory record must be a mapping, not {type(rec).__name__}{_where(n, i)}")
        if not rec.keys() <= FIELDS:
            unknown = ", ".join(sorted(map(str, set(rec) - FIELDS)))
            raise InvalidInput(f"unknown memory field(s): {unknown}{_where(n, i)}")

    content = [r.get("content") for r in records]
    if not set(map(type, content)) <= {str}:
        i = next(i for i, c in enumerate(content) if not isinstance(c, str))
        raise InvalidInput(f"content must be a string, not {type(content[i]).__name__}{_where(n, i)}")
    if "\x00" in "".join(content):
        content = [c.replace("\x00", "") for c in content]
    content = [redact(c) for c in content]
    for i, c in enumerate(content):
        if not c or c.isspace():
            raise InvalidInput(f"content is empty{_where(n, i)}")
    if max(map(len, content)) > MAX_CONTENT_CHARS:
        i = next(i for i, c in enumerate(content) if len(c) > MAX_CONTENT_CHARS)
        raise InvalidInput(f"content is {len(content[i]):,} characters; the limit is {MAX_CONTENT_CHARS:,}, "
                           f"which protects this machine: save the text to a file and remember its path"
                           f"{_where(n, i)}")

    cols: dict[str, list] = {"content": content}
    for name in OPTIONAL_STR:
        values = [r.get(name) for r in records]
        kinds = set(map(type, values))
        if not kinds <= {str, _NONE}:
            i = next(i for i, v in enumerate(values) if v is not None and not isinstance(v, str))
            raise InvalidInput(f"{name} must be a string, not {type(values[i]).__name__}{_where(n, i)}")
        if str in kinds and "\x00" in "".join(v for v in values if v):
            values = [v.replace("\x00", "") if v else v for v in values]
        cols[name] = values
    cols["title"] = [redact(t) if t else t for t in cols["title"]]
    cols["user_id"] = [default_user if u is None else u for u in cols["user_id"]]
    cols["project"] = [p or "" for p in cols["project"]]
    cols["session_id"] = [s or None for s in cols["session_id"]]

    types = [r.get("type") or "discovery" for r in records]
    if not all(isinstance(t, str) and t in MEMORY_TYPES for t in types):
        i = next(i for i, t in enumerate(types) if not isinstance(t, str) or t not in MEMORY_TYPES)
        raise InvalidInput(f"type must be one of {', '.join(MEMORY_TYPES)}; got {types[i]!r}{_where(n, i)}")
    cols["type"] = types

    cells = [r.get("cell") for r in records]
    if not set(map(type, cells)) <= {int, _NONE}:
        i = next(i for i, c in enumerate(cells) if c is not None and (isinstance(c, bool) or not isinstance(c, int)))
        raise InvalidInput(f"cell must be an integer, not {type(cells[i]).__name__}{_where(n, i)}")
    cols["cell"] = cells

    created = [r.get("created_at") for r in records]
    if set(map(type, created)) <= {_NONE}:
        created = [now] * n
    else:
        created = [to_utc_naive(c, now) for c in created]
    cols["created_at"] = created
    cols["updated_at"] = list(created)
    cols["tags"] = tags_column([r.get("tags") for r in records])
    cores = [r.get("core") for r in records]
    if not set(map(type, cores)) <= {bool, _NONE}:
        i = next(i for i, c in enumerate(cores) if not isinstance(c, (bool, _NONE)))
        raise InvalidInput(f"core must be True or False, not {type(cores[i]).__name__}{_where(n, i)}")
    cols["is_core"] = [bool(c) for c in cores]
    shares = [r.get("share") for r in records]
    if not set(map(type, shares)) <= {bool, _NONE}:
        i = next(i for i, c in enumerate(shares) if not isinstance(c, (bool, _NONE)))
        raise InvalidInput(f"share must be True or False, not {type(shares[i]).__name__}{_where(n, i)}")
    cols["shared"] = [bool(c) for c in shares]
    cols["code"] = code_kept(cols["code"], cols["shared"])
    return cols


def code_kept(codes: Sequence, shared: Sequence[bool]) -> list:
    """The code kept with each memory. What is shared is the finding, not the code run before
    it, which may hold what its author never meant to share (a connection string, a path)."""
    return [None if sh else c for c, sh in zip(codes, shared)]


#: How much a term counts in each field of a memory, as a multiple of one occurrence in its
#: content (BM25F with one posting list per memory: the weighted counts are its term
#: frequencies). Measured on the notebook, LoCoMo and LongMemEval benchmarks (RESULTS.md,
#: section 9): a title or a tag names what a memory is about, so one occurrence there says
#: more than one in the running text.
FIELD_WEIGHTS = {"content": 1, "title": 2, "tags": 2, "project": 1, "type": 1}
#: Labels, not text: they match, but add nothing to a memory's length (every memory has one,
#: of about the same size, so BM25's length normalisation has nothing to learn from them).
LABEL_FIELDS = frozenset(("project", "type"))


def field_counts(content: str, title: str | None = None, tags: Iterable[str] = (), project: str | None = "",
                 type: str | None = "", weights: Mapping[str, int] = FIELD_WEIGHTS) -> tuple[Counter[int], int]:
    """(term hash -> weighted frequency over every searchable field, weighted length of the
    text fields) of one memory."""
    counts = text.term_counts(content)
    length = sum(counts.values())
    for name, value in (("title", title), ("tags", " ".join(tags or ())), ("project", project), ("type", type)):
        w = weights.get(name, 0)
        if value and w:
            for term, f in text.term_counts(value).items():
                counts[term] += w * f
                if name not in LABEL_FIELDS:
                    length += w * f
    return counts, length


def field_grams(content: str, title: str | None = None, tags: Iterable[str] = (),
                weights: Mapping[str, int] = FIELD_WEIGHTS) -> Counter[int]:
    """Gram hash -> weighted frequency over the text fields of one memory (the n-gram channel
    reads text; labels are matched by BM25 only), by hash as a batch gives them: the vector's
    sums run in one order however it was worked out."""
    counts = text.gram_counts(content)
    for name, value in (("title", title), ("tags", " ".join(tags or ()))):
        if value and weights.get(name, 0):
            text.gram_counts(value, weights[name], counts)
    return Counter(dict(sorted(counts.items())))


def matched_fields(terms: Mapping[int, str], content: str, title: str | None, tags: Iterable[str],
                   project: str | None, type: str | None) -> dict[str, tuple[str, ...]]:
    """Which of the query's terms (hash -> the query word) a memory contains, field by field:
    the engine's account of why it matched."""
    out: dict[str, tuple[str, ...]] = {}
    for name, value in (("content", content), ("title", title), ("tags", " ".join(tags or ())),
                        ("project", project), ("type", type)):
        if value:
            have = set(text.term_ids(value)) if name == "content" else _short_terms(value)
            hit = tuple(dict.fromkeys(w for h, w in terms.items() if h in have))
            if hit:
                out[name] = hit
    return out


@lru_cache(maxsize=4096)
def _short_terms(value: str) -> frozenset[int]:
    """The terms of a title, tags, a project or a type: few values, seen again and again."""
    return frozenset(text.term_ids(value))


@dataclass
class Postings:
    """The index terms of a batch of memories, flat: what the file stores per memory as two
    list columns and what the in-process index takes as (doc, term, tf) triples."""

    lengths: np.ndarray   # distinct terms per memory
    terms: np.ndarray     # int64 term hashes, memory after memory
    tfs: np.ndarray       # int32 frequencies, aligned with terms
    doc_len: np.ndarray   # int32 weighted number of terms of its text fields (labels left out)
    glengths: np.ndarray  # distinct character 3-grams per memory (the n-gram channel) ...
    grams: np.ndarray     # ... their int32 ids (text.gram_hash) ...
    gtfs: np.ndarray      # ... and int32 weighted frequencies
    # A batch analysed at once also gives each hash as an int32 index into the batch's sorted
    # distinct hashes: the in-process index then looks up each distinct hash once.
    term_keys: np.ndarray | None = None
    term_of: np.ndarray | None = None
    gram_keys: np.ndarray | None = None
    gram_of: np.ndarray | None = None
    gram_holders: np.ndarray | None = None  # how many of the batch's memories hold each gram key
    # (and the contents' hashes: the worker that reads the texts for the postings hashes them too)
    content_hashes: list[str] | None = None
    # (and, when the batch names a static embedding table, "embed_model", each memory's vector:
    # cutting texts into word pieces is the same kind of work, done in the same second process)
    vectors: np.ndarray | None = None

    @classmethod
    def of(cls, contents: Sequence[str], titles: Sequence[str | None] | None = None,
           tags: Sequence[Iterable[str]] | None = None, projects: Sequence[str | None] | None = None,
           types: Sequence[str | None] | None = None) -> "Postings":
        n = len(contents)
        none = [None] * n
        if n >= BATCH_MIN:
            return cls._of_batch(contents, titles or none, tags or none, projects or none, types or none)
        pairs = [field_counts(c, t, g or (), p, y) for c, t, g, p, y in
                 zip(contents, titles or none, tags or none, projects or none, types or none)]
        counts = [c for c, _ in pairs]
        grams = [field_grams(c, t, g or ()) for c, t, g in zip(contents, titles or none, tags or none)]
        return cls(*_flat(counts), np.fromiter((length for _, length in pairs), dtype=np.int32, count=n),
                   *_flat(grams, np.int32))

    @classmethod
    def _of_batch(cls, contents, titles, tags, projects, types, with_terms: bool = True) -> "Postings":
        """The same postings as `field_counts` and `field_grams` memory by memory, worked out
        for the whole batch at once as sparse products: each distinct value of each field is
        cut into words once, each distinct word is analysed once, and (memories x values) @
        (values x words) @ (words x hashes) counts what every memory holds (a bulk import's
        largest cost). Without `with_terms`, the 3-grams only (the term arrays left empty)."""
        import scipy.sparse as sp

        n = len(contents)
        fields = {"content": contents, "title": titles, "tags": [" ".join(g) if g else None for g in tags],
                  "project": projects, "type": types}
        if not with_terms:
            fields = {f: v for f, v in fields.items() if f in GRAM_FIELDS}
        distinct: dict[str, int] = {}
        picks = []  # per field: (weight, memories with a value, which distinct value each has)
        for name, values in fields.items():
            weight = FIELD_WEIGHTS.get(name, 0)
            at = [i for i, v in enumerate(values) if v] if weight else []
            which = [distinct.setdefault(values[i], len(distinct)) for i in at]
            picks.append((name, weight, np.asarray(at, dtype=np.int64), np.asarray(which, dtype=np.int64)))
        words, word, value = text.batch_words(list(distinct))
        # values x words, how often each value says each word
        said = sp.csr_matrix((np.ones(word.size, dtype=np.int64), (value, word)), shape=(len(distinct), len(words)))

        def chosen(names) -> "sp.csr_matrix":  # memories x values, each field's weight
            mine = [(at, which, np.full(at.size, w, dtype=np.int64)) for f, w, at, which in picks if f in names]
            rows, cols, weights = (np.concatenate([m[k] for m in mine]) for k in range(3))
            return sp.csr_matrix((weights, (rows, cols)), shape=(n, len(distinct)))

        if with_terms:
            term_keys, per_value = _hashes_of(words, text.word_terms, said)
            counts = chosen(fields) @ per_value
            counts.sort_indices()  # (each memory's terms by hash, as one by one: sums in one order everywhere)
            value_len = np.asarray(per_value.sum(axis=1)).ravel()
            doc_len = np.zeros(n, dtype=np.int64)
            for f, w, at, which in picks:
                if f not in LABEL_FIELDS and at.size:
                    doc_len[at] += w * value_len[which]
            terms = (np.diff(counts.indptr), term_keys[counts.indices], counts.data.astype(np.int32),
                     doc_len.astype(np.int32))
            term_index = (term_keys, counts.indices.astype(np.int32))
        else:
            terms, term_index = _no_terms(n), (None, None)
        gram_keys, per_value = _hashes_of(words, text.word_grams, said, np.int32)
        gcounts = chosen(GRAM_FIELDS) @ per_value
        gcounts.sort_indices()
        holders = np.bincount(gcounts.indices, minlength=gram_keys.size)
        held = holders > 0  # (not the grams of words only labels have)
        gram_keys, gcounts.indices = gram_keys[held], (np.cumsum(held) - 1)[gcounts.indices]
        return cls(*terms, np.diff(gcounts.indptr), gram_keys[gcounts.indices], gcounts.data.astype(np.int32),
                   term_index[0], term_index[1], gram_keys, gcounts.indices.astype(np.int32), holders[held],
                   content_hashes(contents) if with_terms else None)

    @classmethod
    def grams_of(cls, contents: Sequence[str], titles: Sequence[str | None], tags: Sequence[Iterable[str]]) -> "Postings":
        """The 3-gram vectors alone (the term arrays empty): what the file does not keep, worked
        out again from the text when an index is loaded or catches up."""
        n = len(contents)
        if n >= GRAMS_BATCH_MIN:
            return cls._of_batch(contents, titles, tags, [None] * n, [None] * n, with_terms=False)
        return cls(*_no_terms(n), *_flat([field_grams(c, t, g or ()) for c, t, g in zip(contents, titles, tags)],
                                         np.int32))

    @classmethod
    def of_columns(cls, cols: Mapping[str, Sequence]) -> "Postings":
        """Postings of validated columns (content, title, tags, project, type); with a true
        "grams_only", the 3-grams of content, title and tags alone (`grams_of`)."""
        if cols.get("grams_only"):
            post = cls.grams_of(cols["content"], cols["title"], cols["tags"])
        else:
            post = cls.of(cols["content"], cols.get("title"), cols.get("tags"), cols.get("project"), cols.get("type"))
        if cols.get("embed_model"):
            from .index.meaning import load_model, memory_texts

            post.vectors = load_model(cols["embed_model"]).encode(
                memory_texts(cols["content"], cols.get("title"), cols.get("tags")))
        return post

    def packed(self) -> "Postings":
        """The same postings without the hash arrays its keys give back (`unpacked`): what the
        analysis worker sends, at half the bytes."""
        if self.term_keys is None:
            return self
        return dataclasses.replace(self, terms=None, grams=None)

    def unpacked(self) -> "Postings":
        if self.terms is not None:
            return self
        return dataclasses.replace(self, terms=self.term_keys[self.term_of], grams=self.gram_keys[self.gram_of])

    def list_columns(self):
        """(terms, tfs) as Arrow list columns, one list per memory: what the file keeps (the
        3-grams it does not: they are the text's, worked out again by `grams_of`)."""
        return _lists(self.lengths, self.terms, self.tfs)

    def gram_lists(self):
        """(grams, gtfs) as Arrow list columns: what the file kept in versions 4 and 5 (the v4
        migration only)."""
        return _lists(self.glengths, self.grams, self.gtfs)


#: From this many memories a batch is analysed with arrays (`Postings._of_batch`); fewer are
#: quicker one by one.
BATCH_MIN = 64


#: From this many memories their 3-grams alone are worked out with arrays (`grams_of`): fewer
#: (a new kernel catching up with what was written after the index it mapped, a small file's
#: rebuild) are quicker one by one than importing scipy for the batch path (about 70 ms).
GRAMS_BATCH_MIN = 2_000


#: The fields the n-gram channel reads (labels are matched by BM25 only).
GRAM_FIELDS = ("content", "title", "tags")


def _hashes_of(words: list[str], lookup, said, dtype=np.int64):
    """(the distinct hashes `lookup` gives these words, sorted; values x hashes, how often each
    value holds each one)."""
    import scipy.sparse as sp

    table = lookup(words)
    size = np.fromiter(map(len, table), dtype=np.int64, count=len(words))
    flat = np.fromiter(chain.from_iterable(table), dtype=dtype, count=int(size.sum()))
    keys, compact = np.unique(flat, return_inverse=True)
    indptr = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(size, out=indptr[1:])
    has = sp.csr_matrix((np.ones(flat.size, dtype=np.int64), compact.ravel(), indptr), shape=(len(words), keys.size))
    return keys, said @ has


def _flat(counts: Sequence[Counter[int]], key_type=np.int64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lengths, keys, values) of a batch of counters, flat, memory after memory."""
    n = len(counts)
    lengths = np.fromiter((len(c) for c in counts), dtype=np.int64, count=n)
    total = int(lengths.sum())
    return (lengths, np.fromiter(chain.from_iterable(map(Counter.keys, counts)), dtype=key_type, count=total),
            np.fromiter(chain.from_iterable(map(Counter.values, counts)), dtype=np.int32, count=total))


def _no_terms(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lengths, terms, tfs, doc_len) of `n` memories' postings without their terms (`grams_of`)."""
    return (np.zeros(n, dtype=np.int32), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32),
            np.zeros(n, dtype=np.int32))


def _lists(lengths: np.ndarray, keys: np.ndarray, values: np.ndarray):
    import pyarrow as pa

    offsets = np.zeros(lengths.size + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return (pa.ListArray.from_arrays(pa.array(offsets), pa.array(keys)),
            pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)))
