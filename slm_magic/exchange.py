"""Export and import of memories as JSON Lines or Parquet, through DuckDB's own readers and
writers. Lossless: ids, timestamps, revision counts, core flags and provenance all travel;
importing a file twice adds nothing the second time (rows are matched by fact_id).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import InvalidInput
from .models import MEMORY_TYPES
from .records import Postings

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory

EXPORT_COLUMNS = ("fact_id", "user_id", "session_id", "project", "type", "title", "topic_key", "content",
                  "content_hash", "tags", "is_core", "source", "notebook", "cell", "created_at", "updated_at",
                  "revision_count", "kind")
_TYPES = {"fact_id": "VARCHAR", "user_id": "VARCHAR", "session_id": "VARCHAR", "project": "VARCHAR",
          "type": "VARCHAR", "title": "VARCHAR", "topic_key": "VARCHAR", "content": "VARCHAR",
          "content_hash": "VARCHAR", "tags": "VARCHAR[]", "is_core": "BOOLEAN", "source": "VARCHAR",
          "notebook": "VARCHAR", "cell": "INTEGER", "created_at": "TIMESTAMP", "updated_at": "TIMESTAMP",
          "revision_count": "INTEGER", "kind": "VARCHAR"}
BATCH = 20_000


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "json"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise InvalidInput(f"{path.name}: use a .jsonl or .parquet file")


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


class Exchange:
    """A mixin of `Memory`: `export(path)` and `import_file(path)`."""

    def export(self: "Memory", path: str | Path, *, user_id: str | None = None) -> int:
        """Write one user's memories (default: this Memory's user) to PATH; returns how many."""
        path = Path(path).expanduser()
        fmt = _format(path)
        user = self.user_id if user_id is None else user_id
        if not path.parent.is_dir():
            raise InvalidInput(f"{path.parent} is not a folder")
        with self.store.lock:
            n = self.store.con.execute("SELECT count(*) FROM memories WHERE user_id = ?", [user]).fetchall()[0][0]
            options = "FORMAT JSON" if fmt == "json" else "FORMAT PARQUET"
            try:
                self.store.con.execute(
                    f"COPY (SELECT {', '.join(EXPORT_COLUMNS)} FROM memories WHERE user_id = ? "
                    f"ORDER BY coalesce(seq, doc_id)) TO {_literal(path)} ({options})", [user])
            except Exception as exc:  # noqa: BLE001 - a path we cannot write is the user's to fix
                raise InvalidInput(f"cannot write {path}: {exc}") from None
        return int(n)

    def import_file(self: "Memory", path: str | Path, *, progress: bool | None = None) -> int:
        """Add the memories of a file written by `export`; ones already here are skipped.
        Returns how many were added. A progress bar shows on large files."""
        path = Path(path).expanduser()
        fmt = _format(path)
        if not path.is_file():
            raise InvalidInput(f"{path} is not a file")
        columns = ", ".join(f"{k}: '{v}'" for k, v in _TYPES.items())
        reader = (f"read_json({_literal(path)}, format = 'newline_delimited', columns = {{{columns}}})"
                  if fmt == "json" else f"read_parquet({_literal(path)})")
        with self.store.lock:
            try:
                total_rows, with_ids = self.store.con.execute(
                    f"SELECT count(*), count(CAST(fact_id AS VARCHAR)) FROM {reader}").fetchall()[0]
                if total_rows != with_ids:
                    raise InvalidInput(f"{path.name}: {total_rows - with_ids} row(s) have no fact_id: "
                                       "not a file written by export")
                table = self.store.con.sql(
                    f"SELECT {', '.join(f'CAST({c} AS {_TYPES[c]}) AS {c}' for c in EXPORT_COLUMNS)} FROM {reader} "
                    f"WHERE fact_id NOT IN (SELECT fact_id FROM memories)").to_arrow_table()
            except InvalidInput:
                raise
            except Exception as exc:  # noqa: BLE001 - unreadable or not ours: say so, change nothing
                raise InvalidInput(f"cannot read {path} as exported memories: {str(exc).splitlines()[0]}") from None
        rows = table.to_pylist()
        self._check_imported(rows, path)
        total = len(rows)
        bar = None
        if progress or (progress is None and total > 5 * BATCH):
            from tqdm.auto import tqdm

            bar = tqdm(total=total, unit="memories", desc=f"import {path.name}")
        for start in range(0, total, BATCH):
            self._write_imported(rows[start:start + BATCH])
            if start + BATCH < total:
                self._yield_file()
            if bar is not None:
                bar.update(min(BATCH, total - start))
        if bar is not None:
            bar.close()
        return total

    @staticmethod
    def _check_imported(rows: list[dict], path: Path) -> None:
        seen: set[str] = set()
        for i, r in enumerate(rows):
            if not r["fact_id"] or not isinstance(r["content"], str) or not r["content"].strip():
                raise InvalidInput(f"{path.name}: row {i + 1} has no fact_id or no content")
            if r["kind"] not in ("memory", "summary_event") or r["type"] not in (*MEMORY_TYPES, "summary"):
                raise InvalidInput(f"{path.name}: row {i + 1} has an unknown kind or type")
            if r["created_at"] is None or r["updated_at"] is None:
                raise InvalidInput(f"{path.name}: row {i + 1} has no timestamps")
            if r["fact_id"] in seen:
                raise InvalidInput(f"{path.name}: fact_id {r['fact_id']} appears twice")
            seen.add(r["fact_id"])

    def _write_imported(self: "Memory", rows: list[dict]) -> None:
        """The bulk path, keeping every field as exported."""
        import pyarrow as pa

        post = Postings.of([r["content"] for r in rows], [r["title"] for r in rows], [r["tags"] for r in rows],
                          [r["project"] for r in rows], [r["type"] for r in rows])
        columns = {c: [r[c] for r in rows] for c in EXPORT_COLUMNS}
        columns["tags"] = [list(t or []) for t in columns["tags"]]
        columns["project"] = [p or "" for p in columns["project"]]
        columns["user_id"] = [u or "" for u in columns["user_id"]]
        columns["cell"] = pa.array(columns["cell"], type=pa.int32())
        columns["revision_count"] = np.asarray([r or 0 for r in columns["revision_count"]], dtype=np.int32)
        columns["is_core"] = [bool(x) for x in columns["is_core"]]
        columns["doc_len"] = post.doc_len
        columns["terms"], columns["tfs"], columns["grams"], columns["gtfs"] = post.list_columns()
        self._flush_events()
        self.store.insert_many(columns)
        self._sync()
