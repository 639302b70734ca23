"""Validation of new memories, column by column, so a bulk import pays C speed per value.

Every rule here produces one clear `InvalidInput` message naming the field (and the record's
position in a bulk import); nothing is written unless every record passes.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from datetime import datetime, timezone
from typing import Any

import numpy as np

from . import text
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
    cols["tags"] = [list(normalise_tags(r.get("tags"))) for r in records]
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
    reads text; labels are matched by BM25 only)."""
    counts = text.gram_counts(content)
    for name, value in (("title", title), ("tags", " ".join(tags or ()))):
        if value and weights.get(name, 0):
            text.gram_counts(value, weights[name], counts)
    return counts


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
    grams: np.ndarray     # ... their int64 hashes ...
    gtfs: np.ndarray      # ... and int32 weighted frequencies

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
                   *_flat(grams))

    @classmethod
    def _of_batch(cls, contents, titles, tags, projects, types) -> "Postings":
        """The same postings as `field_counts` and `field_grams` memory by memory, worked out
        for the whole batch at once: each text is cut into words once, each distinct word is
        analysed once, and the counting is array arithmetic (a bulk import's largest cost)."""
        n = len(contents)
        w = FIELD_WEIGHTS
        values = {"content": contents, "title": titles, "tags": [" ".join(g) if g else None for g in tags],
                  "project": projects, "type": types}
        words = {f: _FieldWords.of(v, w.get(f, 0)) for f, v in values.items()}
        terms, tfs, lengths, by_field = _batch_counts(list(words.values()), n, text.word_terms)
        doc_len = sum(c for f, c in zip(words, by_field) if f not in LABEL_FIELDS)
        grams, gtfs, glengths, _ = _batch_counts([words["content"], words["title"], words["tags"]], n, text.word_grams)
        return cls(lengths, terms, tfs, doc_len.astype(np.int32), glengths, grams, gtfs)

    @classmethod
    def of_columns(cls, cols: Mapping[str, Sequence]) -> "Postings":
        """Postings of validated columns (content, title, tags, project, type)."""
        return cls.of(cols["content"], cols.get("title"), cols.get("tags"), cols.get("project"), cols.get("type"))

    def list_columns(self):
        """(terms, tfs, grams, gtfs) as Arrow list columns, one list per memory."""
        return (*_lists(self.lengths, self.terms, self.tfs), *_lists(self.glengths, self.grams, self.gtfs))


#: From this many memories a batch is analysed with arrays (`Postings._of_batch`); fewer are
#: quicker one by one.
BATCH_MIN = 64


@dataclass
class _FieldWords:
    """One field of a batch cut into raw words: its distinct words, each token as the index of
    its word, and the memory each token belongs to."""

    weight: int
    uniq: list
    word: np.ndarray
    doc: np.ndarray

    @classmethod
    def of(cls, values: Sequence[str | None], weight: int) -> "_FieldWords":
        at = [i for i, v in enumerate(values) if v] if weight else []
        words, counts = text.words_of([values[i] for i in at])
        where = dict.fromkeys(words)
        uniq = list(where)
        for i, word in enumerate(uniq):
            where[word] = i
        return cls(weight, uniq, np.fromiter(map(where.__getitem__, words), dtype=np.int64, count=len(words)),
                   np.repeat(np.asarray(at, dtype=np.int64), counts))


def _batch_counts(fields: Sequence[_FieldWords], n: int, lookup) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                          list[np.ndarray]]:
    """Weighted counts of the hashes `lookup` gives each raw word, per memory, over several
    fields. Returns (hashes, counts, distinct hashes per memory), grouped by memory and sorted
    by hash within it, and per field each memory's weighted number of occurrences."""
    docs, occurrences, weights, per_field, flats = [], [], [], [], []
    base = 0
    for f in fields:
        if not f.word.size:
            per_field.append(np.zeros(n, dtype=np.int64))
            continue
        table = lookup(f.uniq)
        size = np.fromiter(map(len, table), dtype=np.int64, count=len(f.uniq))
        flats.append(np.fromiter(chain.from_iterable(table), dtype=np.int64, count=int(size.sum())))
        rep = size[f.word]
        total = int(rep.sum())
        start = np.concatenate(([0], np.cumsum(size)[:-1]))
        occurrences.append(base + np.repeat(start[f.word] - (np.cumsum(rep) - rep), rep) + np.arange(total))
        base += flats[-1].size
        doc = np.repeat(f.doc, rep)
        docs.append(doc)
        weights.append(np.full(total, f.weight, dtype=np.int64))
        per_field.append(np.bincount(doc, minlength=n) * f.weight)
    if not docs:
        return np.empty(0, np.int64), np.empty(0, np.int32), np.zeros(n, np.int64), per_field
    # compact ids over the distinct words' hashes (small), then one sort of (memory, id) pairs
    keys, compact = np.unique(np.concatenate(flats), return_inverse=True)
    doc, compact = np.concatenate(docs), compact[np.concatenate(occurrences)]
    pair, which = np.unique(doc * keys.size + compact, return_inverse=True)
    tf = np.bincount(which, weights=np.concatenate(weights)).astype(np.int32)
    lengths = np.bincount(pair // keys.size, minlength=n)
    return keys[pair % keys.size], tf, lengths, per_field


def _flat(counts: Sequence[Counter[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lengths, keys, values) of a batch of counters, flat, memory after memory."""
    n = len(counts)
    lengths = np.fromiter((len(c) for c in counts), dtype=np.int64, count=n)
    total = int(lengths.sum())
    return (lengths, np.fromiter(chain.from_iterable(map(Counter.keys, counts)), dtype=np.int64, count=total),
            np.fromiter(chain.from_iterable(map(Counter.values, counts)), dtype=np.int32, count=total))


def _lists(lengths: np.ndarray, keys: np.ndarray, values: np.ndarray):
    import pyarrow as pa

    offsets = np.zeros(lengths.size + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return (pa.ListArray.from_arrays(pa.array(offsets), pa.array(keys)),
            pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)))
