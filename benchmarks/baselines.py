"""Lexical retrieval baselines behind one small interface.

Shared by the LoCoMo quality benchmark and the speed benchmark, so the
interface (``name``, ``index(texts)``, ``search(query, k)``) must stay stable.
Each baseline is a thin wrapper over its library's normal usage: the point is
to measure the library as people would actually use it, not a tuned variant.
"""

from __future__ import annotations

import re
import sqlite3

import numpy as np

_WORD = re.compile(r"\w+")


def _top_k(scores: np.ndarray, k: int) -> list[int]:
    """Best-first indices of the k highest positive scores, without a full sort.

    Zero-score documents share no term with the query; listing them would pad
    results with arbitrary documents, so they are left out.
    """
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return []
    part = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    part = part[scores[part] > 0]
    # Stable sort on the small slice keeps ties in corpus order, deterministically.
    order = part[np.argsort(-scores[part], kind="stable")]
    return order.tolist()


class Baseline:
    """Uniform interface: build over a corpus, then return corpus indices best first."""

    name: str = "baseline"

    def index(self, texts: list[str]) -> None:
        raise NotImplementedError

    def search(self, query: str, k: int) -> list[int]:
        raise NotImplementedError


class RankBM25(Baseline):
    """rank_bm25's BM25Okapi: the most common 'just pip install BM25' choice.

    Note: rank_bm25 scores every document with Python-level loops inside
    ``get_scores``; that cost is the library's, and is what the speed
    benchmark should see.
    """

    name = "rank_bm25"

    def __init__(self) -> None:
        self._bm25 = None
        self._n = 0

    @staticmethod
    def _tokens(text: str) -> list[str]:
        return _WORD.findall(text.lower())

    def index(self, texts: list[str]) -> None:
        from rank_bm25 import BM25Okapi

        self._n = len(texts)
        # BM25Okapi divides by the corpus size, so an empty corpus can't be indexed.
        self._bm25 = BM25Okapi([self._tokens(t) for t in texts]) if texts else None

    def search(self, query: str, k: int) -> list[int]:
        tokens = self._tokens(query)
        if self._bm25 is None or not tokens:
            return []
        return _top_k(np.asarray(self._bm25.get_scores(tokens)), k)


class BM25sStemmed(Baseline):
    """bm25s with Snowball stemming and English stop words, as its README shows."""

    name = "bm25s"
    backend = "numpy"        # how bm25s scores (its default)
    selection = "auto"       # how it picks the top k (its default)

    def __init__(self) -> None:
        import Stemmer

        self._stemmer = Stemmer.Stemmer("english")
        self._retriever = None
        self._n = 0

    def _tokenize(self, texts: list[str]):
        import bm25s

        return bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer, show_progress=False)

    def index(self, texts: list[str]) -> None:
        import bm25s

        self._n = len(texts)
        self._retriever = None
        if texts:
            self._retriever = bm25s.BM25(backend=self.backend)
            self._retriever.index(self._tokenize(texts), show_progress=False)

    def search(self, query: str, k: int) -> list[int]:
        if self._retriever is None or k <= 0:
            return []
        tokens = self._tokenize([query])
        if not any(tokens.ids):
            return []
        docs, scores = self._retriever.retrieve(tokens, k=min(k, self._n), show_progress=False,
                                                backend_selection=self.selection)
        return docs[0][scores[0] > 0].tolist()


class BM25sNumba(BM25sStemmed):
    """bm25s on its numba backend, scoring and top k compiled: the fastest bm25s a user can pick
    (numba comes with the `bench` extra)."""

    name = "bm25s_numba"
    backend = "numba"
    selection = "numba"


class SQLiteFTS5(Baseline):
    """SQLite FTS5 with the porter stemmer, ranked by its built-in bm25().

    The query is an OR of quoted tokens: FTS5's default is AND (too strict for
    natural-language questions) and quoting stops punctuation or words like
    NOT/NEAR from being parsed as query syntax.
    """

    name = "fts5"

    def __init__(self) -> None:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        self._stop = frozenset(ENGLISH_STOP_WORDS)
        self._db: sqlite3.Connection | None = None

    def index(self, texts: list[str]) -> None:
        if self._db is not None:
            self._db.close()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute("CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='porter unicode61')")
        # rowid = corpus index, so results map straight back.
        self._db.executemany("INSERT INTO docs(rowid, body) VALUES (?, ?)", enumerate(texts))
        self._db.commit()

    def _match_expr(self, query: str) -> str:
        tokens = [t for t in _WORD.findall(query.lower()) if t not in self._stop]
        return " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)

    def search(self, query: str, k: int) -> list[int]:
        expr = self._match_expr(query)
        if self._db is None or not expr or k <= 0:
            return []
        rows = self._db.execute(
            "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?", (expr, k)
        ).fetchall()
        return [r[0] for r in rows]


class SklearnTfidf(Baseline):
    """scikit-learn TF-IDF over unigrams+bigrams; cosine = dot of l2-normalised rows."""

    name = "tfidf"

    def __init__(self) -> None:
        self._vec = None
        self._Xt = None

    def index(self, texts: list[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self._vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
        try:
            # Rows are l2-normalised by default, so a dot product is cosine similarity.
            # Stored term-major: a query then touches only its own terms' postings
            # (~500x faster at 200k docs than X @ q.T, which walks all of X).
            self._Xt = self._vec.fit_transform(texts).T.tocsr()
        except ValueError:  # empty corpus / empty vocabulary
            self._vec, self._Xt = None, None

    def search(self, query: str, k: int) -> list[int]:
        if self._vec is None:
            return []
        q = self._vec.transform([query])
        if q.nnz == 0:
            return []
        scores = (q @ self._Xt).toarray().ravel()
        return _top_k(scores, k)


class RRFBm25sTfidf(Baseline):
    """Reciprocal rank fusion of stemmed BM25 and TF-IDF: the usual cheap hybrid."""

    name = "rrf"

    def __init__(self, rrf_k: int = 60, depth: int = 100) -> None:
        self.rrf_k = rrf_k
        self.depth = depth
        self._parts: list[Baseline] = [BM25sStemmed(), SklearnTfidf()]

    def index(self, texts: list[str]) -> None:
        for part in self._parts:
            part.index(texts)

    def search(self, query: str, k: int) -> list[int]:
        fused: dict[int, float] = {}
        for part in self._parts:
            for rank, doc in enumerate(part.search(query, self.depth), start=1):
                fused[doc] = fused.get(doc, 0.0) + 1.0 / (self.rrf_k + rank)
        # sorted() is stable: equal fused scores keep BM25's order first.
        return sorted(fused, key=fused.__getitem__, reverse=True)[:k]


BASELINES: dict[str, type[Baseline]] = {
    cls.name: cls for cls in (RankBM25, BM25sStemmed, BM25sNumba, SQLiteFTS5, SklearnTfidf, RRFBm25sTfidf)
}
