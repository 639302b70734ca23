"""A memory's searchable fields: the types a memory may have, how much a term counts in each
field (BM25F through weighted counts), the terms and 3-grams of one memory, and which fields
hold a matched term (what a result row shows)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache

from . import text


#: The kinds of memory (the seed's types); "discovery" is the default.
MEMORY_TYPES: tuple[str, ...] = ("profile", "preference", "decision", "pattern", "discovery")
#: The codes the index keeps for a row's kind and type (a summary is a type of its own there).
KINDS = {"memory": 0, "summary_event": 1}
TYPE_CODE = {t: i for i, t in enumerate(MEMORY_TYPES)} | {"summary": len(MEMORY_TYPES)}


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
            # (a part of an identifier that matched whole says nothing more: "usage_daily", not
            # "usage_daily, usage, daily")
            hit = tuple(w for w in hit if not any(w != v and w in text.identifier_parts(v) for v in hit))
            if hit:
                out[name] = hit
    return out


@lru_cache(maxsize=4096)
def _short_terms(value: str) -> frozenset[int]:
    """The terms of a title, tags, a project or a type: few values, seen again and again."""
    return frozenset(text.term_ids(value))
