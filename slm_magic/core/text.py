"""The one text analyser both retrieval channels and the SQL fallback share.

A memory and a query must be cut into the same terms, or a match is missed: so there is exactly
one analyser, and the index, the fallback and the benchmarks all call it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Container, Iterable, Sequence
from itertools import chain
from functools import lru_cache

import numpy as np
import Stemmer

# Function words that carry no topic: articles, pronouns, auxiliaries, prepositions,
# conjunctions and question words. Content words ("system", "computer", "call", "fire"...)
# are deliberately absent: in a notebook they are what a memory is about.
STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be been before being
    below between both but by can could did do does doing done down during each either else
    ever every few for from further get gets got had has have having he her here hers herself
    him himself his how i if in into is it its itself just let me more most much must my
    myself neither no nor not now of off on once only or other our ours ourselves out over own
    same shall she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up upon us very was we were what when
    where whether which while who whom whose why will with would yet you your yours yourself
    yourselves s t d ll m re ve don doesn didn isn wasn weren aren hasn haven hadn won wouldn
    shouldn couldn can't cannot
    """.split()
)

# A word is a run of letters/digits in any script; underscores join identifier parts.
_WORD = re.compile(r"\w+", re.UNICODE)
# Split identifiers such as df_churn_v2 or customerId into their parts.
_PART = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
# A code of hex digits with letters and digits mixed (a session id's "3d9f0a12", a commit): one
# term, never its fragments, whose "3" or "12" would match any question with that number.
_HEX_CODE = re.compile(r"(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{6,}")


def is_code(word: str) -> bool:
    """Whether a (case-folded) word is a hex code (`_HEX_CODE`): one term, nothing embedded."""
    return _HEX_CODE.fullmatch(word) is not None

_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=100_000)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


@lru_cache(maxsize=100_000)
def term_hash(term: str) -> int:
    """A stable signed 64-bit id for a term, the same in every process and in SQL.

    Hashing removes the need for a shared term dictionary that several writers would
    have to agree on; at 64 bits a collision among a million terms is ~3e-8 likely.
    """
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


@lru_cache(maxsize=50_000)
def _word_terms(raw: str) -> tuple[str, ...]:
    """Terms of one raw word: the stemmed word, plus its parts when it is an identifier."""
    return tuple(term for term, _ in _term_sources(raw))


@lru_cache(maxsize=50_000)
def _term_sources(raw: str) -> tuple[tuple[str, str], ...]:
    """(term, the word it stands for) of one raw word: the whole identifier for itself, each
    part for that part ("usage" of "usage_daily"), a plain word for itself."""
    word = raw.casefold()
    if is_code(word):
        return ((word, word),)
    pieces = _CAMEL.sub("_", raw).casefold()
    parts = [p for p in _PART.findall(pieces)]
    out: list[tuple[str, str]] = []
    if len(parts) > 1:
        out.append((word, word))  # the whole identifier, so an exact name search ranks it first
        if word.isalpha() and (stemmed := _stem(word)) != word:  # (a camelCase name is also a word:
            out.append((stemmed, word))                          # "bigquery" typed finds "BigQuery")
    for part in parts:
        if part in STOP_WORDS or (len(part) == 1 and not part.isdigit()):
            continue
        out.append((_stem(part) if not part.isdigit() else part, part if len(parts) > 1 else word))
    return tuple(out)


def analyse(text: str) -> list[str]:
    """Cut text into index terms: unicode words, identifiers split, stop words out, stemmed."""
    text = unicodedata.normalize("NFKC", text)
    terms: list[str] = []
    for raw in _WORD.findall(text):
        if raw.casefold() in STOP_WORDS:
            continue
        terms.extend(_word_terms(raw))
    return terms


# Raw word -> its term hashes; "" for a stop word. Bounded, cleared when full.
_HASHES: dict[str, tuple[int, ...]] = {}
_HASHES_MAX = 300_000


def _fill(raws: Iterable[str]) -> None:
    """Cache the words not cached yet; a full cache is emptied first (so what was missing is
    worked out after the clear, never before it)."""
    cache = _HASHES
    if len(cache) >= _HASHES_MAX:
        cache.clear()
    for raw in set(raws).difference(cache):
        cache[raw] = () if raw.casefold() in STOP_WORDS else tuple(term_hash(t) for t in _word_terms(raw))


def term_ids(text: str) -> list[int]:
    """`analyse` fused with `term_hash`: the write and query hot path, cached per raw word.

    The per-word work runs in C (set difference, map, chain); Python only sees new words.
    """
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    words = _WORD.findall(text)
    try:
        return list(chain.from_iterable(map(_HASHES.__getitem__, words)))
    except KeyError:
        _fill(words)
        return list(chain.from_iterable(map(_HASHES.__getitem__, words)))


GRAM_N = 3
_GRAM_MARK = "\x1f"  # keeps gram hashes apart from word-term hashes


def gram_hash(gram: str) -> int:
    """A stable signed 32-bit id for a 3-gram. Three code points below 1,024 (ASCII, Latin up
    to Extended-B, IPA, Greek) are packed, 10 bits each, into a non-negative id: exact, and at
    a third of a hash's cost (a new kernel's catch-up works out the grams of every word it has
    not seen). Any other gram takes the low 31 bits of its `term_hash`, negated, so it never
    meets a packed one; two of those sharing an id is rare and costs a slightly wrong cosine."""
    a, b, c = map(ord, gram)
    if a | b | c < 1024:
        return a << 20 | b << 10 | c
    return ~(term_hash(_GRAM_MARK + gram) & 0x7FFFFFFF)


@lru_cache(maxsize=200_000)
def term_grams(term: str) -> tuple[int, ...]:
    """Ids of the character 3-grams of one index term, a space padding each side: what
    the n-gram channel sees ("dedup" and "deduplic" share " de", "ded", "edu", "dup"). A hex
    code has none: its grams are chance, as its fragments are."""
    if is_code(term):
        return ()
    w = f" {term} "
    return tuple(gram_hash(w[i:i + GRAM_N]) for i in range(len(w) - GRAM_N + 1))


# Raw word -> the gram hashes of its terms. Bounded, cleared when full (as _HASHES).
_GRAMS: dict[str, tuple[int, ...]] = {}


def _fill_grams(raws: Iterable[str]) -> None:
    """As `_fill`: a full cache is emptied before what is missing is worked out."""
    if len(_GRAMS) >= _HASHES_MAX:
        _GRAMS.clear()
    for raw in set(raws).difference(_GRAMS):
        _GRAMS[raw] = () if raw.casefold() in STOP_WORDS else tuple(
            chain.from_iterable(term_grams(t) for t in _word_terms(raw)))


def gram_counts(text: str, weight: int = 1, into: Counter[int] | None = None) -> Counter[int]:
    """Gram hash -> frequency over the index terms of `text` (each occurrence counts `weight`);
    cached per raw word like `term_ids`, so a write pays C speed for words seen before."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    words = _WORD.findall(text)
    try:
        grams = list(chain.from_iterable(map(_GRAMS.__getitem__, words)))
    except KeyError:
        _fill_grams(words)
        grams = list(chain.from_iterable(map(_GRAMS.__getitem__, words)))
    out = Counter() if into is None else into
    if weight == 1:
        out.update(grams)
    else:
        for g, c in Counter(grams).items():
            out[g] += weight * c
    return out


# Every ASCII byte `_WORD` counts as a word character maps to itself, any other to a space,
# except _SEP, kept to mark where one text ends (`batch_words`).
_SEP = "\x01"
_ASCII_WORD_BYTES = bytes(b if chr(b).isalnum() or chr(b) in "_" + _SEP else 0x20 for b in range(128)) + b" " * 128


def batch_words(texts: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The raw words of many texts, as `_WORD` cuts each: (the distinct words, each word
    occurrence as the index of its word, the text it occurs in). A bulk write's first step:
    ASCII texts are cut all at once by a byte translation and a split, in C (the regex costs
    a few microseconds per text); the others go through NFKC and the regex one by one."""
    n = len(texts)
    fast = [i for i, t in enumerate(texts) if t.isascii()]
    joined = f" {_SEP} ".join([texts[i] for i in fast])
    if fast and joined.count(_SEP) != len(fast) - 1:  # (a text holds the mark itself)
        fast = []
    fast_tokens = joined.encode("ascii").translate(_ASCII_WORD_BYTES).split() if fast else []
    slow = sorted(set(range(n)).difference(fast)) if len(fast) < n else []
    slow_words = [_WORD.findall(unicodedata.normalize("NFKC", texts[i])) for i in slow]
    slow_tokens = [w.encode("utf-8") for w in chain.from_iterable(slow_words)]
    mark = _SEP.encode()
    where = dict.fromkeys(chain((mark,), fast_tokens, slow_tokens))  # (the mark is word 0)
    where = dict(zip(where, range(len(where))))
    word = np.fromiter(map(where.__getitem__, chain(fast_tokens, slow_tokens)), dtype=np.int64,
                       count=len(fast_tokens) + len(slow_tokens))
    doc = np.empty(word.size, dtype=np.int64)
    head = word[: len(fast_tokens)]
    if fast:
        doc[: head.size] = np.asarray(fast, dtype=np.int64)[np.cumsum(head == 0)]
    doc[head.size:] = np.repeat(np.asarray(slow, dtype=np.int64), list(map(len, slow_words)))
    keep = word != 0
    del where[mark]
    uniq = [w.decode("utf-8") for w in where]
    return uniq, word[keep] - 1, doc[keep]


def word_terms(words: Sequence[str]) -> list[tuple[int, ...]]:
    """Each raw word's term hashes (as `term_ids` cuts it)."""
    return _cached(_HASHES, _fill, words)


def word_grams(words: Sequence[str]) -> list[tuple[int, ...]]:
    """Each raw word's gram hashes (as `gram_counts` cuts it)."""
    return _cached(_GRAMS, _fill_grams, words)


def _cached(cache: dict, fill: Callable[[Iterable[str]], None], words: Sequence[str]) -> list[tuple[int, ...]]:
    try:
        return list(map(cache.__getitem__, words))
    except KeyError:
        fill(words)  # (a full cache is emptied first: what is looked up next is all there)
        return list(map(cache.__getitem__, words))


def query_grams(text: str) -> list[tuple[int, tuple[int, ...]]]:
    """(term hash, its gram hashes) for each index term of a query, in order."""
    return [(term_hash(t), term_grams(t)) for t in analyse(text)]


@lru_cache(maxsize=10_000)
def identifier_parts(word: str) -> frozenset[str]:
    """The parts of an identifier as `term_words` names them ("usage_daily": usage, daily);
    nothing for a plain word."""
    parts = _PART.findall(word)
    return frozenset(parts) if len(parts) > 1 else frozenset()


def term_words(text: str, asked: Container[int] = ()) -> dict[int, str]:
    """Term hash -> the word of `text` it came from (casefolded; a part of an identifier for
    that part's term; a word's other spelling, `other_spelling`, for that word where `asked`, a
    question's terms, has it): what a match is shown as."""
    out: dict[int, str] = {}
    for raw in _WORD.findall(unicodedata.normalize("NFKC", text)):
        if raw.casefold() not in STOP_WORDS:
            for term, word in _term_sources(raw):
                out.setdefault(term_hash(term), word)
            if asked and (other := other_spelling(raw)) is not None and other[0] in asked:
                out.setdefault(other[0], raw.casefold())
    return out


@lru_cache(maxsize=50_000)
def other_spelling(raw: str) -> tuple[int, int | None] | None:
    """The term a memory holds for the same name written the other way, as one word or in
    camelCase, and the term that must be held by no memory for it to be asked: "BigQuery" asks
    for "bigquery" as a plain word (its stem; always), "bigquery" asks for "BigQuery" (held
    whole, unstemmed) only when no memory holds "bigquery" itself, for an unstemmed word is also
    another word's stem ("rational" of "rationale"). None when both ways give the same term, or
    for a code or an identifier with underscores (always cut the same)."""
    word = raw.casefold()
    if is_code(word) or "_" in raw:
        return None
    plain = len(_PART.findall(_CAMEL.sub("_", raw).casefold())) == 1
    stemmed = _stem(word)
    if word == stemmed or (plain and not word.isalpha()):
        return None
    return (term_hash(word), term_hash(stemmed)) if plain else (term_hash(stemmed), None)


def marked(text: str, terms: set[int] | frozenset[int]) -> list[tuple[str, bool]]:
    """`text` cut into (piece, matched) pieces: a word whose terms meet `terms` (a question's
    term hashes) is matched, as the index matched it ("dropped" for "drop", "df_churn_v2" for
    "churn"). What a view highlights: the same analyser, so it never marks what did not count."""
    out: list[tuple[str, bool]] = []
    at = 0
    for m in _WORD.finditer(text):
        raw = m.group()
        hashes = _HASHES.get(raw)
        if hashes is None:
            _fill([raw])
            hashes = _HASHES[raw]
        if terms.isdisjoint(hashes):
            continue
        if m.start() > at:
            out.append((text[at:m.start()], False))
        out.append((raw, True))
        at = m.end()
    if at < len(text):
        out.append((text[at:], False))
    return out


def term_counts(text: str) -> Counter[int]:
    """Term hash -> frequency for one text."""
    return Counter(term_ids(text))


def terms_to_look_up(text: str) -> list[int]:
    """The terms whose presence in the store decides how a question is asked (`query_counts`,
    `names_identifiers`): its identifiers' whole terms, its words' other spellings and the
    terms those depend on."""
    words, idents = _question_words(text)
    others = [t for o in map(other_spelling, words) if o is not None for t in o if t is not None]
    return list({*idents.values(), *others})


def query_counts(text: str, held: set[int] | frozenset[int]) -> Counter[int]:
    """A question's terms, as `term_counts` cuts them, except that an identifier some memory
    holds whole ("store_master"; `held`: which of `terms_to_look_up` some memory holds) is
    asked for whole: its parts alone ("store", "master") would match every memory that merely
    says "store"; and a name some memory writes the other way (`other_spelling`) is asked for
    that way too."""
    words, idents = _question_words(text)
    counts: Counter[int] = Counter()
    for w in words:
        whole = idents.get(w)
        if whole is not None and whole in held:
            counts[whole] += 1
        else:
            counts.update(term_hash(t) for t in _word_terms(w))
    # (a name asked the other way from how a memory wrote it: "bigquery" for "BigQuery")
    for other in map(other_spelling, words):
        if other is not None and other[0] in held and other[1] not in held and other[0] not in counts:
            counts[other[0]] += 1
    return counts


def names_identifiers(text: str, held: set[int] | frozenset[int]) -> bool:
    """Whether every word of a question is an identifier some memory holds whole (`held`, as
    `query_counts` takes it): it asks for those memories by name, not for anything that means
    something alike."""
    words, idents = _question_words(text)
    return bool(words) and all(idents.get(w) in held for w in words)


@lru_cache(maxsize=256)
def _question_words(text: str) -> tuple[tuple[str, ...], dict[str, int]]:
    """A question's words (stop words out) and its identifiers' whole-term hashes (a recall
    asks for them three times: what to look up, its terms, whether it names identifiers)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    words = tuple(w for w in _WORD.findall(text) if w.casefold() not in STOP_WORDS)
    return words, {w: term_hash(w.casefold()) for w in words if len(_word_terms(w)) > 1 and _is_identifier(w)}


def _is_identifier(raw: str) -> bool:
    """A name of code: parts joined by underscores or camelCase (not "5pm" or "2nd", whose
    parts are just how a person writes them)."""
    joined = _CAMEL.sub("_", raw).strip("_")
    return "_" in joined and len(_PART.findall(joined.casefold())) > 1
