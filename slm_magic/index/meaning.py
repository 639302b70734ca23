"""The meaning channel's model: a memory's text as one unit vector, so that a question asked in
other words finds it by cosine.

The default is a static embedding table shipped in the package (`data/static-minilm-256.npz`,
built by tools/meaning_model from all-MiniLM-L6-v2): a text's vector is the normalised sum of
its WordPiece tokens' rows, token weights baked into the rows. No neural network runs at all:
a memory costs tens of microseconds on one core, numpy only, nothing downloaded (RESULTS.md
says why this model and what it gives up against MiniLM itself).

A user may name another model: a path to a table in the same format, or (with
sentence-transformers installed) a folder or name that `SentenceTransformer` can load on their
machine. Every vector is tagged with `model.name`; two models' vectors are never compared.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import xxhash

from ..core.text import is_code

DEFAULT_MODEL = "default"
#: A catch-up with another kernel's writes, or a change of model, that finds this many memories
#: without vectors leaves them to the background (index/fill.py) instead of working them out
#: before the recall that asked for the catch-up.
FILL_FROM = 10_000
PACKAGED = Path(__file__).resolve().parent.parent / "data" / "static-minilm-256.npz"


class EmbeddingModel(Protocol):
    name: str   # what each vector records: the model and a fingerprint of its weights
    dims: int
    path: str | None  # a table another process can load (None: only here)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dims) float32, each row of norm 1 (or 0 for a text without a token)."""

    def knows(self, words: Iterable[str]) -> bool:
        """Whether the model has a meaning for one of a question's content words."""


def memory_text(content: str, title: str | None = None, tags: Iterable[str] | None = None) -> str:
    """What a memory's vector is made of: its title, content and tags (as the user wrote them)."""
    parts = [title or "", content or "", " ".join(tags or ())]
    return "\n".join(p for p in parts if p)


def memory_texts(contents: Sequence[str], titles: Sequence[str | None] | None = None,
                 tags: Sequence[Iterable[str] | None] | None = None) -> list[str]:
    """`memory_text` of each memory, from columns (titles and tags may be left out)."""
    none = [None] * len(contents)
    return [memory_text(c, t, g) for c, t, g in zip(contents, titles or none, tags or none)]


def fact_texts(facts: Iterable) -> list[str]:
    """`memory_text` of stored memories (anything with content, title and tags)."""
    return [memory_text(f.content, f.title, f.tags) for f in facts]


# --------------------------------------------------------------------------- the tokenizer

# The CJK blocks BERT cuts one character at a time (as the `tokenizers` library lists them).
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_ASCII_WORDS = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")  # (after lowercasing) words, punctuation marks
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 \
        or unicodedata.category(ch).startswith("P")


class WordPiece:
    """BERT's uncased WordPiece, as all-MiniLM-L6-v2 cuts text (the same ids as the `tokenizers`
    library, without special tokens): control characters dropped, CJK characters apart, NFD
    with the accents stripped, lowercase; words split at spaces and punctuation; each word cut
    into the longest pieces the vocabulary has ('##' inside a word), [UNK] for a word it cannot
    cut; a special token written in the text ("[UNK]") is that token. Words are cached, so a
    text of known words costs a regex and dictionary lookups."""

    CACHE_MAX = 500_000

    def __init__(self, vocab: Sequence[str]):
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.unk = self.vocab["[UNK]"]
        self.cache: dict[str, tuple[int, ...]] = {}
        specials = [t for t in _SPECIAL if t in self.vocab]
        self._special = re.compile("(" + "|".join(re.escape(t) for t in specials) + ")")

    def words(self, text: str) -> list[str]:
        if text.isascii():
            if _ASCII_CONTROL.search(text):
                text = _ASCII_CONTROL.sub("", text)
            return _ASCII_WORDS.findall(text.lower())
        out: list[str] = []
        for w in self._normalise(text).split():
            cur: list[str] = []
            for ch in w:
                if _is_punct(ch):
                    if cur:
                        out.append("".join(cur))
                        cur = []
                    out.append(ch)
                else:
                    cur.append(ch)
            if cur:
                out.append("".join(cur))
        return out

    @staticmethod
    def _normalise(text: str) -> str:
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD:
                continue
            cat = unicodedata.category(ch)
            if ch in "\t\n\r" or cat in ("Zs", "Zl", "Zp"):
                out.append(" ")
            elif cat[0] == "C":
                continue
            elif any(lo <= cp <= hi for lo, hi in _CJK):
                out.append(f" {ch} ")
            else:
                out.append(ch)
        text = unicodedata.normalize("NFD", "".join(out))
        return "".join(c.lower() for c in text if unicodedata.category(c) != "Mn")

    def pieces(self, word: str) -> tuple[int, ...]:
        got = self.cache.get(word)
        if got is None:
            got = self._cut(word)
            if len(self.cache) < self.CACHE_MAX:
                self.cache[word] = got
        return got

    def _cut(self, word: str) -> tuple[int, ...]:
        if len(word) > 100:
            return (self.unk,)
        if is_code(word):  # (a hex code's pieces mean nothing, and a session id's differ in every run)
            return ()
        ids, start, vocab = [], 0, self.vocab
        while start < len(word):
            end, cur = len(word), None
            while start < end:
                cur = vocab.get(word[start:end] if start == 0 else "##" + word[start:end])
                if cur is not None:
                    break
                end -= 1
            if cur is None:
                return (self.unk,)
            ids.append(cur)
            start = end
        return tuple(ids)

    def ids(self, text: str) -> list[int]:
        if "[" in text and self._special.search(text):  # (a literal special token is that token)
            out: list[int] = []
            for k, part in enumerate(self._special.split(text)):
                out.extend([self.vocab[part]] if k % 2 else self._plain(part))
            return out
        return self._plain(text)

    def _plain(self, text: str) -> list[int]:
        cache, out = self.cache, []
        for w in self.words(text):  # (the cache read here: a call per word was a third of a bulk write's vectors)
            got = cache.get(w)
            out += got if got is not None else self.pieces(w)
        return out


# --------------------------------------------------------------------------- the static model


class StaticModel:
    """A static embedding table: a text is the normalised sum of its tokens' rows."""

    def __init__(self, table: np.ndarray, vocab: Sequence[str], name: str, path: str | None = None,
                 scale: np.ndarray | None = None):
        self.path = path  # (a bulk write's second process loads the same table from it)
        # int8 rows and each row's scale (as saved), or float32 rows (scale None)
        self.rows = np.ascontiguousarray(table, dtype=np.int8 if scale is not None else np.float32)
        self.scale = None if scale is None else np.asarray(scale, dtype=np.float32)
        self._dense: np.ndarray | None = None if scale is not None else self.rows
        self.dims = int(self.rows.shape[1])
        self.tokenizer = WordPiece(vocab)
        self.name = name
        self._lock = threading.Lock()  # (the word cache is shared by the threads of a kernel)

    @property
    def table(self) -> np.ndarray:
        """The rows as float32, made on the first batch (a new kernel's first recall and a
        remember read a few rows each: a 31 MB array made at open took most of the load)."""
        if self._dense is None:
            self._dense = self.rows.astype(np.float32) * self.scale[:, None]
        return self._dense

    @classmethod
    def from_file(cls, path: str | Path) -> "StaticModel":
        """A table saved as .npz: `vocab` (token strings by id), `table` (int8 rows) and `scale`
        (each row's float32 scale), `meta` (a JSON string with its name)."""
        path = Path(path)
        with np.load(path, allow_pickle=False) as z:
            table, scale = z["table"], z["scale"]
            vocab = [str(t) for t in z["vocab"].tolist()]
            meta = json.loads(str(z["meta"])) if "meta" in z.files else {}
        digest = xxhash.xxh3_64_hexdigest(path.read_bytes())[:12]  # (sha-256 took 12 ms a kernel)
        return cls(table, vocab, f"{meta.get('name', path.stem)}@{digest}", str(path), scale)

    def knows(self, words: Iterable[str]) -> bool:
        """Whether one of these words (a question's, stop words out) is a token of the table
        whole. A word it never saw is cut into pieces ("nipyxo": ni, ##py, ##xo), and a question
        made only of such words is a sum of pieces that says nothing of what it means: what it
        is close to is chance, and a match by meaning alone would be a look-alike string."""
        tok = self.tokenizer
        with self._lock:
            return any(len(p) == 1 and p[0] != tok.unk for w in words for p in map(tok.pieces, tok.words(w)))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        n = len(texts)
        out = np.zeros((n, self.dims), dtype=np.float32)
        if not n:
            return out
        with self._lock:
            ids = [self.tokenizer.ids(t or "") for t in texts]
        if n == 1:
            if ids[0] and self._dense is not None:  # (the same numbers as below, without the scaling)
                out[0] = self._dense[ids[0]].sum(axis=0)
            elif ids[0]:
                rows = self.rows[ids[0]].astype(np.float32)
                rows *= self.scale[ids[0], None]
                out[0] = rows.sum(axis=0)
        else:
            import scipy.sparse as sp

            lens = np.fromiter(map(len, ids), np.int64, n)
            indptr = np.zeros(n + 1, np.int64)
            np.cumsum(lens, out=indptr[1:])
            cols = np.fromiter(itertools.chain.from_iterable(ids), np.int64, int(indptr[-1]))
            counts = sp.csr_matrix((np.ones(cols.size, np.float32), cols, indptr), shape=(n, self.table.shape[0]))
            out = np.asarray(counts @ self.table, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


class SentenceTransformerModel:
    """A model of the user's choosing through sentence-transformers (which the product does not
    install): a local folder, or a name their machine can fetch. Slow next to the table: a
    bulk import's vectors then take much longer to follow."""

    def __init__(self, spec: str):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ValueError(f"embedding model {spec!r} is neither a .npz table nor loadable: "
                             "sentence-transformers is not installed") from exc
        self.model = SentenceTransformer(spec, device="cpu")
        self.dims = int(self.model.get_sentence_embedding_dimension())
        self.name = f"st:{spec}"
        self.path = None  # (loaded in this process only: too slow to load again in a second one)

    def knows(self, words: Iterable[str]) -> bool:
        """A transformer reads word pieces in their context: every question means something."""
        return True

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self.dims), np.float32)
        return np.asarray(self.model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True),
                          dtype=np.float32)


_loaded: dict[str, EmbeddingModel] = {}
_loading = threading.Lock()


def load_model(spec: str | None = DEFAULT_MODEL) -> EmbeddingModel:
    """The model `spec` names, loaded once per process: "default" (or None) is the packaged
    table; a path to a .npz table; else a sentence-transformers folder or name. Raises
    ValueError with the reason when it cannot be loaded."""
    key = _key(spec)
    with _loading:
        model = _loaded.get(key)
        if model is None:
            model = _load(key)
            _loaded[key] = model
    return model


def _key(spec: str | None) -> str:
    """One name per model: a table by its resolved path, so that "default", its path and a
    model's own `path` (what a bulk write's analysis asks for) load it once."""
    if spec in (None, "", DEFAULT_MODEL):
        return str(PACKAGED)
    path = Path(spec).expanduser()
    return str(path.resolve()) if path.suffix == ".npz" else str(spec)


def _load(spec: str) -> EmbeddingModel:
    path = Path(spec)
    if path.suffix == ".npz":
        if not path.is_file():
            raise ValueError(f"embedding model {spec!r}: no file {path}")
        try:
            return StaticModel.from_file(path)
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"embedding model {spec!r} does not read ({type(exc).__name__}: {exc})") from exc
    return SentenceTransformerModel(spec)
