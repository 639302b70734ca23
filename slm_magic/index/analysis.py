"""A batch of memories analysed for the index: the weighted term counts of every field, the
lengths, the 3-grams and the content hashes, one by one for a few and with arrays for many
(`Postings`); what the analysis worker makes in a second process."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from ..core import text
from ..core.fields import FIELD_WEIGHTS, LABEL_FIELDS, field_counts, field_grams
from ..core.ids import content_hashes


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
        "grams_only", the 3-grams of content, title and tags alone (`grams_of`); with a true
        "vectors_only", nothing but the vectors of "embed_model"."""
        if cols.get("vectors_only"):  # (the vectors that follow a bulk write: index/fill.py)
            post = cls(*_no_terms(len(cols["content"])), *_no_terms(len(cols["content"]))[:3])
        elif cols.get("grams_only"):
            post = cls.grams_of(cols["content"], cols["title"], cols["tags"])
        else:
            post = cls.of(cols["content"], cols.get("title"), cols.get("tags"), cols.get("project"), cols.get("type"))
        if cols.get("embed_model"):
            from .meaning import load_model, memory_texts

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
