"""`Memory`: the engine's public facade. Thin: it validates, then hands work to the parts."""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from . import text
from .errors import InvalidInput, SlmMagicError
from .index import SparseIndex
from .models import MEMORY_TYPES, Fact, RecallResult, ScoredMemory, SearchScore
from .ranking import Ranked, RankingConfig, fuse, rank_index, recency, revision, search_score
from .store import FACT_COLUMNS, Store, utcnow

SYNTHETIC_SESSION_PREFIXES = ("http:", "mcp:", "cli:", "probe:")
MAX_CONTENT_CHARS = 100_000
_KINDS = {"memory": 0, "summary_event": 1}


def is_synthetic_session(session_id: str | None) -> bool:
    return bool(session_id) and session_id.startswith(SYNTHETIC_SESSION_PREFIXES)


def _to_utc_naive(value: datetime | None, default: datetime) -> datetime:
    """Store UTC without tzinfo; a naive datetime is taken to be UTC already."""
    if value is None:
        return default
    if not isinstance(value, datetime):
        raise InvalidInput(f"created_at must be a datetime, not {type(value).__name__}")
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


def _epoch(dt: datetime) -> float:
    return dt.replace(tzinfo=timezone.utc).timestamp()


def normalise_tags(tags: str | Iterable[str] | None) -> tuple[str, ...]:
    """Tags as the seed's "auth,decision" string or a sequence; both mean the same tags."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = tags.split(",")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInput(f"tags must be strings, got {type(tag).__name__}")
        tag = tag.strip()
        if tag and tag not in out:
            out.append(tag)
    return tuple(out)


def content_hash(content: str) -> str:
    normal = " ".join(content.casefold().split())
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()[:32]


class Memory:
    """Long-term memory on one DuckDB file.

    `Memory(path)` opens (or creates) the file; ``":memory:"`` keeps everything in RAM;
    ``None`` uses $SLM_MAGIC_DB or ~/.slm_magic/memory.duckdb.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, user_id: str = "",
                 clock: Callable[[], datetime] | None = None, **ranking: Any):
        self.config = RankingConfig(**ranking)
        self.user_id = user_id
        self._clock = clock or utcnow
        self.store = Store(path)
        self.index: SparseIndex | None = None
        self.index_error: str | None = None
        self._generation = -1
        self._session_last: dict[str, int] = {}
        self._load_index()

    # --- lifecycle --------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self.store.path

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        return _to_utc_naive(self._clock(), utcnow())

    # --- the in-process index ---------------------------------------------------------------
    def _load_index(self) -> None:
        """Build the index from the file. On failure recall falls back to SQL, and says so."""
        try:
            self.index = self._build_index()
            self.index_error = None
        except Exception as exc:  # noqa: BLE001 - any failure means: answer from SQL instead
            self.index = None
            self.index_error = f"in-process index unavailable ({type(exc).__name__}: {exc})"

    def _build_index(self) -> SparseIndex:
        con = self.store.con
        with self.store.lock:
            gen = self.store.generation()
            index = SparseIndex(self.config.k1, self.config.b)
            meta = con.execute(
                "SELECT doc_id, user_id, project, type, is_core, kind, "
                "epoch(updated_at) AS updated, revision_count, doc_len, session_id, "
                "lag(doc_id) OVER (PARTITION BY session_id ORDER BY seq) AS prev_doc "
                "FROM memories ORDER BY seq"
            ).fetchnumpy()
            vocab = con.execute(
                "SELECT term, count(*) AS df FROM postings GROUP BY term ORDER BY term"
            ).fetchnumpy()
            post = con.execute(
                "SELECT p.doc_id, p.term, p.tf FROM postings p ORDER BY p.term"
            ).fetchnumpy()
        terms = vocab["term"].astype(np.int64)
        index.cols = dict(zip(terms.tolist(), range(terms.size)))
        index.df = np.zeros(max(1024, terms.size), dtype=np.int64)
        doc_ids = meta["doc_id"].astype(np.int64)
        if doc_ids.size:
            cols = np.searchsorted(terms, post["term"].astype(np.int64))
            kinds = np.array([_KINDS.get(k, 0) for k in meta["kind"]], dtype=np.int8)
            types = np.array([MEMORY_TYPES.index(t) if t in MEMORY_TYPES else 0 for t in meta["type"]], dtype=np.int8)
            users = np.array([index.code("user", u) for u in meta["user_id"]], dtype=np.int32)
            projects = np.array([index.code("project", p) for p in meta["project"]], dtype=np.int32)
            index.add_documents(
                doc_ids, cols, post["doc_id"].astype(np.int32), post["tf"].astype(np.float32),
                {"dl": meta["doc_len"].astype(np.float32), "updated": meta["updated"].astype(np.float64),
                 "revision": meta["revision_count"].astype(np.int32), "user": users, "project": projects,
                 "core": meta["is_core"].astype(bool), "kind": kinds, "type": types},
            )
            sessions = meta["session_id"]
            prev = meta["prev_doc"]
            for d, s, p, k in zip(doc_ids.tolist(), sessions.tolist(), prev.tolist(), kinds.tolist()):
                if s is None or k != 0 or is_synthetic_session(s):
                    continue
                last = self._session_last.get(s)
                if last is not None:
                    index.link_after(last, d)
                self._session_last[s] = d
        self._generation = gen
        return index

    def _refresh(self) -> None:
        """Catch up with writes another process made to the file since we last looked."""
        if self.index is None:
            return
        gen = self.store.generation()
        if gen != self._generation:
            self._catch_up(self._generation)
            self._generation = gen

    def _catch_up(self, since: int) -> None:
        con = self.store.con
        index = self.index
        with self.store.lock:
            tomb = con.execute(
                "SELECT doc_id, new_doc_id FROM tombstones WHERE generation > ? ORDER BY generation", [since]
            ).fetchall()
            rows = con.execute(
                "SELECT doc_id, user_id, project, type, is_core, kind, epoch(updated_at), revision_count, "
                "doc_len, session_id FROM memories WHERE changed_gen > ? ORDER BY seq", [since]
            ).fetchall()
            new = [r for r in rows if not (r[0] < index.docs.size and index.docs.alive[r[0]])]
            post = con.execute(
                "SELECT doc_id, term, tf FROM postings WHERE doc_id IN (SELECT unnest(?::BIGINT[]))",
                [[r[0] for r in new]],
            ).fetchnumpy() if new else None
        for old, _ in tomb:
            index.remove_documents([int(old)])
        for r in rows:  # metadata may change without new content (pin, touch)
            d = r[0]
            if d < index.docs.size and index.docs.alive[d]:
                index.docs.updated[d] = r[6]
                index.docs.revision[d] = r[7]
                index.docs.core[d] = r[4]
        if new:
            self._index_new(
                [r[0] for r in new],
                {"user_id": [r[1] for r in new], "project": [r[2] for r in new], "type": [r[3] for r in new],
                 "is_core": [r[4] for r in new], "kind": [r[5] for r in new], "updated": [r[6] for r in new],
                 "revision_count": [r[7] for r in new], "doc_len": [r[8] for r in new],
                 "session_id": [r[9] for r in new]},
                post["doc_id"], post["term"], post["tf"],
            )

    def _index_new(self, doc_ids: Sequence[int], meta: Mapping[str, Sequence], p_doc: np.ndarray,
                   p_term: np.ndarray, p_tf: np.ndarray) -> None:
        index = self.index
        col_of = index.column
        cols = np.fromiter((col_of(int(t)) for t in p_term), dtype=np.int64, count=len(p_term))
        index.add_documents(
            np.asarray(doc_ids, dtype=np.int64), cols, np.asarray(p_doc, dtype=np.int32),
            np.asarray(p_tf, dtype=np.float32),
            {"dl": np.asarray(meta["doc_len"], dtype=np.float32),
             "updated": np.asarray(meta["updated"], dtype=np.float64),
             "revision": np.asarray(meta["revision_count"], dtype=np.int32),
             "user": np.array([index.code("user", u) for u in meta["user_id"]], dtype=np.int32),
             "project": np.array([index.code("project", p) for p in meta["project"]], dtype=np.int32),
             "core": np.asarray(meta["is_core"], dtype=bool),
             "kind": np.array([_KINDS.get(k, 0) for k in meta["kind"]], dtype=np.int8),
             "type": np.array([MEMORY_TYPES.index(t) if t in MEMORY_TYPES else 0 for t in meta["type"]], dtype=np.int8)},
        )
        for d, s, k in zip(doc_ids, meta["session_id"], meta["kind"]):
            if s is None or k != "memory" or is_synthetic_session(s):
                continue
            last = self._session_last.get(s)
            if last is not None:
                index.link_after(last, d)
            self._session_last[s] = d

    # --- writes -----------------------------------------------------------------------------
    def remember(self, content: str, *, session_id: str | None = None, tags: str | Iterable[str] = (),
                 project: str = "", type: str = "discovery", title: str | None = None,
                 topic_key: str | None = None, core: bool = False, created_at: datetime | None = None,
                 user_id: str | None = None, source: str | None = None, notebook: str | None = None,
                 cell: int | None = None) -> Fact:
        """Store one memory and make it recallable at once; returns the stored fact."""
        record = dict(content=content, session_id=session_id, tags=tags, project=project, type=type,
                      title=title, topic_key=topic_key, core=core, created_at=created_at,
                      user_id=user_id, source=source, notebook=notebook, cell=cell)
        return self._write([record])[0]

    def remember_many(self, records: Iterable[Mapping[str, Any]], *, batch_size: int = 50_000) -> list[str]:
        """Bulk path: one transaction per batch; returns the fact_ids in input order."""
        ids: list[str] = []
        batch: list[Mapping[str, Any]] = []
        for rec in records:
            batch.append(rec)
            if len(batch) >= batch_size:
                ids.extend(f.fact_id for f in self._write(batch))
                batch = []
        if batch:
            ids.extend(f.fact_id for f in self._write(batch))
        return ids

    _FIELDS = frozenset(("content", "session_id", "tags", "project", "type", "title", "topic_key", "core",
                         "created_at", "user_id", "source", "notebook", "cell"))

    def _validate(self, rec: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        unknown = set(rec) - self._FIELDS
        if unknown:
            raise InvalidInput(f"unknown memory field(s): {', '.join(sorted(unknown))}")
        content = rec.get("content")
        if not isinstance(content, str):
            raise InvalidInput(f"content must be a string, not {type(content).__name__}")
        content = content.replace("\x00", "")
        if not content.strip():
            raise InvalidInput("content is empty")
        if len(content) > MAX_CONTENT_CHARS:
            raise InvalidInput(f"content is {len(content):,} characters; the limit is {MAX_CONTENT_CHARS:,}")
        mtype = rec.get("type") or "discovery"
        if mtype not in MEMORY_TYPES:
            raise InvalidInput(f"type must be one of {', '.join(MEMORY_TYPES)}; got {mtype!r}")
        created = _to_utc_naive(rec.get("created_at"), now)
        user = rec.get("user_id")
        user = self.user_id if user is None else str(user)
        return {
            "content": content, "session_id": rec.get("session_id") or None,
            "tags": list(normalise_tags(rec.get("tags"))), "project": str(rec.get("project") or ""),
            "type": mtype, "title": rec.get("title"), "topic_key": rec.get("topic_key"),
            "is_core": bool(rec.get("core", False)), "created_at": created, "updated_at": created,
            "user_id": user, "source": rec.get("source"), "notebook": rec.get("notebook"),
            "cell": rec.get("cell"),
        }

    def _write(self, records: Sequence[Mapping[str, Any]]) -> list[Fact]:
        now = self.now()
        rows = [self._validate(r, now) for r in records]
        counts = [Counter(text.analyse(r["content"])) for r in rows]
        n = len(rows)
        p_doc: list[int] = []
        p_term: list[int] = []
        p_tf: list[int] = []
        th = text.term_hash
        for i, c in enumerate(counts):
            p_doc.extend([i] * len(c))
            p_term.extend(th(t) for t in c)
            p_tf.extend(c.values())
        fact_ids = [uuid.uuid4().hex[:16] for _ in range(n)]
        if self.index is not None:
            self._refresh()
        store = self.store
        with store.lock:
            store.con.execute("BEGIN TRANSACTION")
            try:
                gen, doc0, seq0 = store.reserve(n, n)
                doc_ids = np.arange(doc0, doc0 + n, dtype=np.int64)
                columns = {
                    "fact_id": fact_ids, "doc_id": doc_ids, "seq": np.arange(seq0, seq0 + n, dtype=np.int64),
                    "user_id": [r["user_id"] for r in rows], "session_id": [r["session_id"] for r in rows],
                    "project": [r["project"] for r in rows], "type": [r["type"] for r in rows],
                    "title": [r["title"] for r in rows], "topic_key": [r["topic_key"] for r in rows],
                    "content": [r["content"] for r in rows],
                    "content_hash": [content_hash(r["content"]) for r in rows],
                    "tags": [r["tags"] for r in rows], "is_core": [r["is_core"] for r in rows],
                    "source": [r["source"] for r in rows], "notebook": [r["notebook"] for r in rows],
                    "cell": [r["cell"] for r in rows], "created_at": [r["created_at"] for r in rows],
                    "updated_at": [r["updated_at"] for r in rows], "revision_count": [0] * n,
                    "kind": ["memory"] * n, "doc_len": [sum(c.values()) for c in counts],
                    "changed_gen": [gen] * n,
                }
                pd_arr = doc_ids[np.asarray(p_doc, dtype=np.int64)] if p_doc else np.empty(0, np.int64)
                store.insert_memories(columns, {
                    "doc_id": pd_arr, "term": np.asarray(p_term, dtype=np.int64),
                    "tf": np.asarray(p_tf, dtype=np.int32)})
                store.con.execute("COMMIT")
            except Exception:
                store.con.execute("ROLLBACK")
                raise
        if self.index is not None:
            try:
                since = self._generation
                self._index_new(
                    doc_ids.tolist(),
                    {"user_id": columns["user_id"], "project": columns["project"], "type": columns["type"],
                     "is_core": columns["is_core"], "kind": columns["kind"],
                     "updated": [_epoch(r["updated_at"]) for r in rows], "revision_count": columns["revision_count"],
                     "doc_len": columns["doc_len"], "session_id": columns["session_id"]},
                    pd_arr, np.asarray(p_term, dtype=np.int64), np.asarray(p_tf, dtype=np.int32),
                )
                if gen != since + 1:  # another process wrote in between: pick its rows up too
                    self._catch_up(since)
                self._generation = gen
            except Exception as exc:  # noqa: BLE001 - the write is safe in the file; the index is not
                self.index = None
                self.index_error = f"in-process index failed while adding ({type(exc).__name__}: {exc})"
        return [
            Fact(fact_id=fid, content=r["content"], user_id=r["user_id"], session_id=r["session_id"],
                 project=r["project"], type=r["type"], title=r["title"], topic_key=r["topic_key"],
                 tags=tuple(r["tags"]), is_core=r["is_core"], source=r["source"], notebook=r["notebook"],
                 cell=r["cell"], created_at=r["created_at"], updated_at=r["updated_at"], revision_count=0)
            for fid, r in zip(fact_ids, rows)
        ]

    # --- reads ------------------------------------------------------------------------------
    def recall(self, query: str, *, session_id: str | None = None, limit: int = 10,
               project: str | None = None, user_id: str | None = None) -> RecallResult:
        """The memories that best answer `query`, best first, each with its score's parts."""
        started = time.perf_counter()
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a string, not {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInput(f"limit must be a non-negative integer; got {limit!r}")
        user = self.user_id if user_id is None else str(user_id)
        counts = Counter(text.analyse(query.replace("\x00", "")))
        terms = [text.term_hash(t) for t in counts]
        qtf = list(counts.values())
        qlen = sum(qtf)
        now = _epoch(self.now())
        mode, degraded, reason = "full_bm25_tfidf", False, None
        ranked: Ranked | None = None
        if self.index is not None:
            try:
                self._refresh()
                index = self.index
                ranked = Ranked.empty()
                user_code = index.lookup_code("user", user)
                project_code = None if project is None else index.lookup_code("project", project)
                if terms and user_code >= 0 and (project_code is None or project_code >= 0):
                    cs = index.channel_scores(terms, qtf, qlen)
                    ranked = rank_index(index, cs, self.config, now=now, user=user_code,
                                        project=project_code, limit=limit)
            except Exception as exc:  # noqa: BLE001 - degrade to SQL rather than fail the user
                self.index = None
                self.index_error = f"in-process index failed ({type(exc).__name__}: {exc})"
                ranked = None
        if ranked is None:
            mode, degraded, reason = "bm25_sql_fallback", True, self.index_error
            ranked = self._rank_sql(terms, qtf, qlen, now=now, user=user, project=project, limit=limit)
        memories = self._materialise(ranked)
        return RecallResult(query=query, memories=memories, retrieval_mode=mode, degraded_mode=degraded,
                            degraded_reason=reason, elapsed_ms=(time.perf_counter() - started) * 1000)

    def _rank_sql(self, terms, qtf, qlen, *, now, user, project, limit) -> Ranked:
        """BM25 only, computed by DuckDB from the stored postings."""
        if not terms or limit <= 0:
            return Ranked.empty()
        cfg = self.config
        pool = max(limit * 5, 50)
        hits, idf, avgdl = self.store.bm25_sql(terms, qtf, cfg.k1, cfg.b, pool, user, project)
        if not hits:
            return Ranked.empty()
        q = np.asarray(qtf, dtype=np.float64)
        idf_a = np.array([idf[t] for t in terms])
        ideal = float(np.sum(q * idf_a * q * (cfg.k1 + 1) / (q + cfg.k1 * (1 - cfg.b + cfg.b * qlen / avgdl))))
        docs = np.array([d for d, _ in hits], dtype=np.int64)
        with self.store.lock:
            meta = dict(
                (int(d), (u, r)) for d, u, r in self.store.con.execute(
                    "SELECT doc_id, epoch(updated_at), revision_count FROM memories "
                    "WHERE doc_id IN (SELECT unnest(?::BIGINT[]))", [docs.tolist()]).fetchall())
        bm25 = np.minimum(1.0, np.array([s for _, s in hits]) / ideal) if ideal > 0 else np.zeros(docs.size)
        ctx = np.zeros(docs.size)
        rel = fuse(bm25, ctx, cfg)
        rec = recency(np.array([meta[d][0] for d in docs.tolist()], dtype=np.float64), now, cfg.recency_half_life_days)
        rev = revision(np.array([meta[d][1] for d in docs.tolist()], dtype=np.float64), cfg.revision_cap)
        score = search_score(rel, rec, rev, cfg)
        order = np.lexsort((docs, -score))[:limit]
        return Ranked(docs[order], score[order], rel[order], bm25[order], ctx[order], rec[order], rev[order])

    def _materialise(self, ranked: Ranked) -> list[ScoredMemory]:
        if not ranked.doc_ids.size:
            return []
        rows = self.store.facts_by_doc(ranked.doc_ids.tolist())
        out = []
        for i, d in enumerate(ranked.doc_ids.tolist()):
            row = rows.get(d)
            if row is None:  # removed by another process since we ranked it
                continue
            fact = _fact(row)
            out.append(ScoredMemory(fact=fact, score=SearchScore(
                value=float(ranked.score[i]), relevance=float(ranked.relevance[i]), bm25=float(ranked.bm25[i]),
                tfidf=float(ranked.tfidf[i]), recency=float(ranked.recency[i]), revision=float(ranked.revision[i]))))
        return out

    def get(self, fact_id: str) -> Fact | None:
        with self.store.lock:
            row = self.store.con.execute(
                f"SELECT {', '.join(FACT_COLUMNS)} FROM memories WHERE fact_id = ?", [fact_id]).fetchone()
        return _fact(row) if row else None

    def count(self, user_id: str | None = None) -> int:
        user = self.user_id if user_id is None else user_id
        with self.store.lock:
            return self.store.con.execute("SELECT count(*) FROM memories WHERE user_id = ?", [user]).fetchone()[0]


def _fact(row: Sequence[Any]) -> Fact:
    values = dict(zip(FACT_COLUMNS, row))
    values["tags"] = tuple(values["tags"] or ())
    return Fact(**values)
