"""A static sentence-embedding model that needs only numpy.

The model file is a numpy ``.npz`` archive with four arrays:

- ``vocab``: unicode array of WordPiece tokens (BERT uncased); index = token id,
- ``table``: int8 array (V, dims), one row per token, token weights already baked in,
- ``scale``: float32 array (V,), the dequantisation factor of each row,
- ``meta``: 0-d unicode array holding a JSON object (name, version, dims, teacher, ...).

A text's vector is the sum of its tokens' rows, L2-normalised (a text without any token gives the
zero vector). Tokenisation re-implements the ``tokenizers`` library's BERT pipeline in pure Python:
BertNormalizer (drop control characters, CJK characters apart, NFD and strip non-spacing marks,
lowercase per character), BertPreTokenizer (split on whitespace and on each punctuation
character), WordPiece (greedy longest match, ``##`` continuations, ``[UNK]`` for a word with no
split or over 100 characters). As in ``tokenizers``, a literal special token of the vocabulary
(``[UNK]``, ``[PAD]``, ...) written in the text is that token. Texts are never truncated.

Example::

    model = StaticModel.from_file("static-minilm-256.npz")
    vecs = model.encode(["the join double-counts customers", "duplicated rows after merge"])
    similarity = float(vecs[0] @ vecs[1])
"""
from __future__ import annotations

import json
import re
import unicodedata

import numpy as np

__all__ = ["StaticModel", "WordPieceTokenizer"]

_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_ASCII_WORDS = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")           # after lowercasing: words, punctuation
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")     # dropped by BERT's clean_text


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK)


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


class WordPieceTokenizer:
    """Pure-Python BERT-uncased WordPiece. ``ids(text)`` returns token ids without special tokens.

    Words are cached (up to ``cache_size`` entries; the cache is emptied when full), so a text of
    known words costs one regex pass and a few dict lookups.
    """

    def __init__(self, vocab: list[str], unk: str = "[UNK]", max_word_chars: int = 100, cache_size: int = 100_000):
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.unk = self.vocab[unk]
        self.max_word_chars = max_word_chars
        self.cache_size = cache_size
        self.cache: dict[str, list[int]] = {}
        specials = [t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if t in self.vocab]
        self._special = re.compile("(" + "|".join(re.escape(t) for t in specials) + ")") if specials else None

    # -- normaliser + pre-tokeniser ---------------------------------------------------------
    @staticmethod
    def _normalize(text: str) -> str:
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD:
                continue
            cat = unicodedata.category(ch)
            if ch in "\t\n\r" or cat in ("Zs", "Zl", "Zp"):          # whitespace -> one space
                out.append(" ")
            elif cat[0] == "C":                     # Cc, Cf, Cs, Co, Cn: dropped
                continue
            elif _is_cjk(cp):
                out.append(f" {ch} ")
            else:
                out.append(ch)
        text = unicodedata.normalize("NFD", "".join(out))
        # strip accents (non-spacing marks), then lowercase character by character (as tokenizers does)
        return "".join(c.lower() for c in text if unicodedata.category(c) != "Mn")

    def words(self, text: str) -> list[str]:
        """The pre-tokenised words (lowercased) of ``text``."""
        if text.isascii():
            if _ASCII_CONTROL.search(text):
                text = _ASCII_CONTROL.sub("", text)
            return _ASCII_WORDS.findall(text.lower())
        words = []
        for w in self._normalize(text).split():
            cur = []
            for ch in w:
                if _is_punct(ch):
                    if cur:
                        words.append("".join(cur)); cur = []
                    words.append(ch)
                else:
                    cur.append(ch)
            if cur:
                words.append("".join(cur))
        return words

    # -- WordPiece ----------------------------------------------------------------------------
    def _pieces(self, word: str) -> list[int]:
        if len(word) > self.max_word_chars:
            return [self.unk]
        vocab = self.vocab
        ids, start, n = [], 0, len(word)
        while start < n:
            end = n; cur = None
            while start < end:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                cur = vocab.get(sub)
                if cur is not None:
                    break
                end -= 1
            if cur is None:
                return [self.unk]
            ids.append(cur); start = end
        return ids

    def ids(self, text: str) -> list[int]:
        if self._special is not None and "[" in text and self._special.search(text):
            out: list[int] = []
            for k, part in enumerate(self._special.split(text)):
                out.extend([self.vocab[part]] if k % 2 else self.ids_plain(part))
            return out
        return self.ids_plain(text)

    def ids_plain(self, text: str) -> list[int]:
        cache = self.cache; out: list[int] = []
        for w in self.words(text):
            p = cache.get(w)
            if p is None:
                p = self._pieces(w)
                if len(cache) >= self.cache_size:
                    cache.clear()
                cache[w] = p
            out.extend(p)
        return out


class StaticModel:
    """Sentence vectors = L2-normalised sum of int8-dequantised token rows (numpy only).

    ``dequantize=True`` (default) expands the table to float32 once at load (V x dims x 4 bytes,
    31 MB for 30k x 256) for the fastest encoding; ``False`` keeps the int8 table (8 MB) and
    dequantises only the rows a batch uses.
    """

    def __init__(self, vocab: list[str], table: np.ndarray, scale: np.ndarray, meta: dict | None = None,
                 dequantize: bool = True):
        if table.shape[0] != len(vocab) or scale.shape[0] != len(vocab):
            raise ValueError("vocab, table and scale disagree in length")
        self.meta = dict(meta or {})
        self.dims = int(table.shape[1])
        self.tokenizer = WordPieceTokenizer(list(vocab))
        self._scale = np.ascontiguousarray(scale, dtype=np.float32)
        if dequantize:
            self._f32 = table.astype(np.float32) * self._scale[:, None]
            self._i8 = None
        else:
            self._f32 = None
            self._i8 = np.ascontiguousarray(table, dtype=np.int8)

    @classmethod
    def from_file(cls, path, dequantize: bool = True) -> "StaticModel":
        with np.load(path, allow_pickle=False) as z:
            vocab = z["vocab"].tolist()
            table, scale = z["table"], z["scale"]
            meta = json.loads(str(z["meta"])) if "meta" in z.files else {}
        return cls(vocab, table, scale, meta, dequantize=dequantize)

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        if self._f32 is not None:
            return self._f32[ids]
        return self._i8[ids].astype(np.float32) * self._scale[ids, None]

    def tokenize(self, text: str) -> list[int]:
        """WordPiece ids of ``text`` (no special tokens)."""
        return self.tokenizer.ids(text)

    def encode(self, texts: list[str]) -> np.ndarray:
        """float32 array (len(texts), dims); each row L2-normalised (zero for a text with no token)."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts")
        n = len(texts)
        out = np.zeros((n, self.dims), np.float32)
        if n == 0:
            return out
        tok = self.tokenizer.ids
        if n == 1:
            ids = tok(texts[0])
            if ids:
                v = self._rows(np.asarray(ids, dtype=np.intp)).sum(0)
                nv = float(np.sqrt(v @ v))
                if nv > 0:
                    out[0] = v / nv
            return out
        all_ids = [tok(t) for t in texts]
        lens = np.fromiter(map(len, all_ids), np.intp, n)
        total = int(lens.sum())
        if total == 0:
            return out
        flat = np.fromiter((i for ids in all_ids for i in ids), np.intp, total)
        nz = lens > 0
        starts = np.zeros(n, np.intp); np.cumsum(lens[:-1], out=starts[1:])
        out[nz] = np.add.reduceat(self._rows(flat), starts[nz], axis=0)
        norms = np.sqrt(np.einsum("ij,ij->i", out, out))
        out /= np.maximum(norms, 1e-12)[:, None]
        return out
