"""Export and import of memories as JSON Lines or Parquet, through DuckDB's own readers and
writers. Lossless: ids, timestamps, revision counts, core flags and provenance all travel;
importing a file twice adds nothing the second time (rows are matched by fact_id).

A file of plain notes, written by hand (only `content`, perhaps `tags` as a list or "a,b",
`type`, `title`, `project`, `created_at`), imports too: what can be computed is (the id from
the note itself, so a second import adds nothing; the content hash; the timestamps; `<private>`
redaction), and a line that cannot be read is named.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..index import bulk
from ..errors import InvalidImport, InvalidInput
from ..results.models import MEMORY_TYPES, ExportReport, ImportReport, Skipped
from .validate import MAX_CONTENT_CHARS, code_kept, normalise_tags, redact
from ..index.analysis import Postings
from ..core.ids import content_hash
from ..core.clock import to_utc_naive

EXPORT_COLUMNS = ("fact_id", "user_id", "session_id", "project", "type", "title", "topic_key", "content",
                  "content_hash", "tags", "is_core", "source", "notebook", "cell", "cell_id", "code", "created_at",
                  "updated_at", "revision_count", "kind", "shared")
_TYPES = {"fact_id": "VARCHAR", "user_id": "VARCHAR", "session_id": "VARCHAR", "project": "VARCHAR",
          "type": "VARCHAR", "title": "VARCHAR", "topic_key": "VARCHAR", "content": "VARCHAR",
          "content_hash": "VARCHAR", "tags": "VARCHAR[]", "is_core": "BOOLEAN", "source": "VARCHAR",
          "notebook": "VARCHAR", "cell": "INTEGER", "cell_id": "VARCHAR", "code": "VARCHAR",
          "created_at": "TIMESTAMP", "updated_at": "TIMESTAMP",
          "revision_count": "INTEGER", "kind": "VARCHAR", "shared": "BOOLEAN", "summary_of": "VARCHAR"}
#: Beside a memory's own fields in a file: the thing a summary written by a session's close
#: stands for (None for a memory, or a summary the user wrote), so that a forget in the file it
#: is imported into rewrites the summaries that quote what it forgets, as in the file it left.
LINK_COLUMNS = ("summary_of",)
BATCH = 20_000
#: Fields a hand-written line may spell its own way (tags as "a,b", a date with its offset):
#: a JSON file's are read as JSON and each line's checked, so a bad one is named by its line.
_HAND_WRITTEN = ("content", "tags", "created_at", "updated_at", "cell")


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "json"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise InvalidInput(f"{path.name}: use a .jsonl or .parquet file")


def _has_nul(table: pa.Table) -> bool:
    """Whether any text of the table may hold a NUL, itself or as a JSON line's escape of it
    (decoded row by row later): one look per column, so that an import looks at each row's
    values only when one may."""
    for col in table.columns:
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            col = pc.list_flatten(col)
        if (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) and (
                pc.any(pc.match_substring(col, "\x00")).as_py() or pc.any(pc.match_substring(col, "\\u0000")).as_py()):
            return True
    return False


def _unread(path: Path, exc: Exception) -> InvalidInput:
    """A file DuckDB could not read, in its first line's words (without its error's class)."""
    return InvalidInput(f"{path.name}: {str(exc).splitlines()[0].split('Error: ', 1)[-1]}; nothing was imported")


def _json_lines(path: Path) -> list[tuple[int, bytes, str | None]]:
    """Each line of a JSON Lines file that is not blank: its number (from 1), its text, and what
    keeps it from being a memory's object, in a reader's terms (None: nothing)."""
    out = []
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            line = raw.strip()
            if not line:
                continue
            try:
                value = json.loads(line)
            except UnicodeDecodeError:
                out.append((number, line, "is not UTF-8 text"))
                continue
            except json.JSONDecodeError as exc:
                out.append((number, line, f"is not valid JSON ({exc.msg.lower()} at column {exc.colno})"))
                continue
            out.append((number, line, None if isinstance(value, dict) else
                        f"is a JSON {type(value).__name__}, not an object with a memory's fields"))
    return out


class Exchange:
    """A part of `Memory` (held as `memory.exchange`): `export(path)` and `import_file(path)`,
    in the file format `EXPORT_COLUMNS` defines. It holds no state: it reads and writes through
    the store, has the writer make the vectors again, and brings the index up to date after
    each batch, letting a waiting kernel in between batches (the lease)."""

    def __init__(self, store, live, working_sets, writer, lease, clock: Callable[[], datetime], user_id: str):
        self.store = store
        self.live = live
        self.working_sets = working_sets
        self.writer = writer
        self.lease = lease
        self.now = clock
        self.user_id = user_id

    def export(self, path: str | Path, *, user_id: str | None = None) -> ExportReport:
        """Write one user's memories and session summaries (default: this Memory's user) to
        PATH; returns how many of each."""
        path = Path(os.path.realpath(Path(path).expanduser()))  # (a link: the file it points at)
        fmt = _format(path)
        user = self.user_id if user_id is None else user_id
        if not path.parent.is_dir():
            raise InvalidInput(f"{path.parent} is not a folder")
        if path.is_dir():
            raise InvalidInput(f"{path} is a folder: name the file to write")
        stats = self.store.user_stats(user)
        # Written where only we can look, at the file's own mode, then moved into place: an
        # export holds the memories' text, so it is never more readable than the file.
        try:
            with tempfile.TemporaryDirectory(dir=path.parent, prefix=".slm-export-") as private:
                part = Path(private) / path.name
                self.store.write_export(part, fmt, user, EXPORT_COLUMNS)
                os.chmod(part, self.store.index_mode())
                os.replace(part, path)
        except Exception as exc:  # noqa: BLE001 - a path we cannot write is the user's to fix
            raise InvalidInput(f"cannot write {path}: {exc}") from None
        return ExportReport(path=str(path), memories=stats["observations"], summaries=stats["summaries"])

    def import_file(self, path: str | Path, *, progress: bool | None = None,
                    on_invalid: str = "raise") -> ImportReport:
        """Add the memories of a file written by `export`, or of hand-written notes (a line an
        object with `content`, perhaps `tags`, `type`, `title`, `project`, `created_at`); ones
        already here are skipped.
        A file that does not read, or (with on_invalid="raise") has any invalid row, adds
        nothing; on_invalid="skip" adds the valid rows and reports each other one. A progress
        bar shows on large files."""
        if on_invalid not in ("raise", "skip"):
            raise InvalidInput(f"on_invalid must be 'raise' or 'skip'; got {on_invalid!r}")
        path = Path(path).expanduser()
        fmt = _format(path)
        if not path.is_file():
            raise InvalidInput(f"{path} is not a file")
        where = "line" if fmt == "json" else "row"
        with self.store.lock:
            table, unreadable = self._read(path, fmt, on_invalid)
            present = self.store.existing_fact_ids([x for x in table.column("fact_id").to_pylist() if x])
        rows = table.to_pylist()
        self._complete(rows, fmt, nuls=_has_nul(table))
        skipped = sorted(unreadable + self._check_imported(rows, path, where, on_invalid), key=lambda s: s.position)
        bad = {s.position for s in skipped}
        notes = [r["fact_id"] for r in rows if r["_note"] and r["line_number"] not in bad]
        if notes:  # (their ids are computed from the notes: a second import finds them)
            present |= self.store.existing_fact_ids(notes)
        new = [r for r in rows if r["line_number"] not in bad and r["fact_id"] not in present and not r.get("_repeat")]
        already = sum(1 for r in rows if r["line_number"] not in bad and (r["fact_id"] in present or r.get("_repeat")))
        total = len(new)
        bar = None
        if progress or (progress is None and total > 5 * BATCH):
            from tqdm.auto import tqdm

            bar = tqdm(total=total, unit="memories", desc=f"import {path.name}")
        batches = (new[start:start + BATCH] for start in range(0, total, BATCH))
        written = 0
        with self.writer.bulk_write():
            for rows, post, last in bulk.analysed(batches, _analysed_columns, len):
                self._write_imported(rows, post, words_first=written >= self.writer.VECTORS_INLINE)
                written += len(rows)
                if not last:
                    self.lease.yield_file()
                if bar is not None:
                    bar.update(len(rows))
        if bar is not None:
            bar.close()
        self.live.save_soon()
        summaries = sum(1 for r in new if r["kind"] == "summary_event")
        others = Counter(r["user_id"] for r in new if r["kind"] == "memory" and r["user_id"] != self.user_id)
        return ImportReport(path=str(path), memories=total - summaries, summaries=summaries,
                            already_present=already, skipped=tuple(skipped), others=dict(others.most_common()),
                            user_id=self.user_id)

    def _read(self, path: Path, fmt: str, on_invalid: str):
        """The file as a table with each row's `line_number`, and the lines set aside as not
        JSON objects (with on_invalid="skip": the others are read without them)."""
        # (JSON: the fields a person writes by hand are read as written and checked here)
        types = {c: "JSON" if c in _HAND_WRITTEN and fmt == "json" else _TYPES[c] for c in (*EXPORT_COLUMNS, *LINK_COLUMNS)}
        try:
            return self.store.read_export(path, fmt, types), []
        except Exception as exc:  # noqa: BLE001 - unreadable or not ours: say so, change nothing
            lines = _json_lines(path) if fmt == "json" else []
            bad = [(number, why) for number, _, why in lines if why is not None]
            if not bad:
                raise _unread(path, exc) from None
            if on_invalid == "raise":
                raise InvalidImport(f"{path.name}: line {bad[0][0]} {bad[0][1]}; nothing was imported") from None
        # (the good lines, in a file only this user can read, read again; their numbers put back)
        with tempfile.TemporaryDirectory(prefix="slm-import-") as private:
            good = Path(private) / path.name
            good.write_bytes(b"\n".join(line for _, line, why in lines if why is None) + b"\n")
            try:
                table = self.store.read_export(good, fmt, types)
            except Exception as exc:  # noqa: BLE001
                raise _unread(path, exc) from None
        numbers = [number for number, _, why in lines if why is None]
        if table.num_rows != len(numbers):
            raise InvalidInput(f"{path.name}: its lines could not be told apart; nothing was imported")
        table = table.set_column(table.column_names.index("line_number"), "line_number",
                                 pa.array(numbers, pa.int64()))
        return table, [Skipped(position=number, reason=why) for number, why in bad]

    def _complete(self, rows: list[dict], fmt: str, *, nuls: bool = True) -> None:
        """Fill in what a hand-written line leaves out and can be computed: a plain note (no
        fact_id) gets its id from its user and content, its text redacted, and every row its
        content hash, kind, type and timestamps. Tags that cannot be read are the row's `_why`."""
        now = self.now()
        for r in rows:
            r["_why"] = _read_by_hand(r, fmt)
            for name, value in r.items() if nuls else ():  # (NULs dropped, as a write drops them: PostgreSQL's text refuses them)
                if isinstance(value, str) and "\x00" in value:
                    r[name] = value.replace("\x00", "")
                elif isinstance(value, list) and any(isinstance(t, str) and "\x00" in t for t in value):
                    r[name] = [t.replace("\x00", "") if isinstance(t, str) else t for t in value]
            r["user_id"] = r["user_id"] or self.user_id
            r["_note"] = not r["fact_id"] and isinstance(r["content"], str) and r["content"].strip() != ""
            if r["_note"]:
                r["content"], r["title"] = redact(r["content"]), r["title"] and redact(r["title"])
                r["fact_id"] = note_id(r["user_id"], r["content"])
            if isinstance(r["content"], str) and not r["content_hash"]:
                r["content_hash"] = content_hash(r["content"])
            r["kind"] = r["kind"] or "memory"
            r["type"] = r["type"] or ("summary" if r["kind"] == "summary_event" else "discovery")
            r["created_at"] = r["created_at"] or r["updated_at"] or now
            r["updated_at"] = r["updated_at"] or r["created_at"]

    @staticmethod
    def _check_imported(rows: list[dict], path: Path, where: str, on_invalid: str) -> list[Skipped]:
        """Every row's problem, named by its line (or row) in the file: the first one raises,
        or with on_invalid="skip" each is set aside."""
        seen: dict[str, int] = {}
        skipped: list[Skipped] = []
        for r in rows:
            why = r["_why"]
            if why is not None:
                pass
            elif not isinstance(r["content"], str) or not r["content"].strip():
                why = "has no content"
            elif r["kind"] not in ("memory", "summary_event"):
                why = f"has an unknown kind {r['kind']!r}"
            elif r["type"] not in (*MEMORY_TYPES, "summary"):
                why = f"has an unknown type {r['type']!r}"
            elif r["created_at"] is None or r["updated_at"] is None:
                why = "has no timestamps"
            elif r["fact_id"] in seen and r["_note"]:  # the same note twice: kept once
                r["_repeat"] = True
                continue
            elif r["fact_id"] in seen:
                why = f"repeats fact_id {r['fact_id']} of {where} {seen[r['fact_id']]}"
            elif len(r["content"]) > MAX_CONTENT_CHARS:
                why = f"has {len(r['content']):,} characters of content; the limit is {MAX_CONTENT_CHARS:,}"
            if why is None:
                seen[r["fact_id"]] = r["line_number"]
                continue
            if on_invalid == "raise":
                raise InvalidImport(f"{path.name}: {where} {r['line_number']} {why}; nothing was imported")
            skipped.append(Skipped(position=int(r["line_number"]), reason=why))
        return skipped

    def _write_imported(self, rows: list[dict], post: Postings, words_first: bool = False) -> None:
        """The bulk path, keeping every field as exported."""
        columns = {c: [r[c] for r in rows] for c in EXPORT_COLUMNS}
        columns["tags"] = [list(t or []) for t in columns["tags"]]
        columns["project"] = [p or "" for p in columns["project"]]
        columns["user_id"] = [u or self.user_id for u in columns["user_id"]]
        if not self.store.sees_everything:  # on a server you import as yourself: they become yours
            columns["user_id"] = [self.user_id] * len(rows)
        columns["cell"] = pa.array(columns["cell"], type=pa.int32())
        columns["revision_count"] = np.asarray([r or 0 for r in columns["revision_count"]], dtype=np.int32)
        columns["is_core"] = [bool(x) for x in columns["is_core"]]
        columns["shared"] = [bool(x) for x in columns["shared"]]  # (NULL: exported before sharing)
        columns["code"] = code_kept(columns["code"], columns["shared"])
        columns["doc_len"] = post.doc_len
        columns["terms"], columns["tfs"] = post.list_columns()
        columns["words_first"] = words_first  # (beyond the writer's VECTORS_INLINE: they follow)
        self.writer.with_vectors(columns, self.writer.vectors_of(columns))  # (made again, never read from the file)
        self.working_sets.flush()
        self.store.insert_many(columns)
        links = [(r["session_id"], r["summary_of"], r["fact_id"], r["created_at"], user)
                 for r, user in zip(rows, columns["user_id"])
                 if r["kind"] == "summary_event" and r["session_id"] and r.get("summary_of")]
        self.store.sessions.add_summary_events(links)
        self.live.sync()


def _read_by_hand(r: dict, fmt: str) -> str | None:
    """Decode a row's hand-written fields in place (a .jsonl's are JSON text; Parquet's are
    typed already); what is wrong with them, in words, or None."""
    if fmt == "json":
        for name in _HAND_WRITTEN:
            if r[name] is not None:
                r[name] = json.loads(r[name])  # (DuckDB read them as JSON: they parse)
    if r["content"] is not None and not isinstance(r["content"], str):
        return f"has content that is not text ({json.dumps(r['content'])[:40]})"
    try:
        r["tags"] = list(normalise_tags(r["tags"]))
    except InvalidInput as exc:
        return f"has tags that are not a list of strings or \"a,b\" ({exc})"
    for name in ("created_at", "updated_at"):
        value = r[name]
        if isinstance(value, str):
            try:
                value = to_utc_naive(datetime.fromisoformat(value), None)
            except ValueError:
                return f"has a {name} that is not a date and time like 2026-11-02T10:00:00: {value[:40]!r}"
            r[name] = value
        elif value is not None and not isinstance(value, datetime):
            return f"has a {name} that is not a date and time like 2026-11-02T10:00:00: {value!r}"
    if r["cell"] is not None and (isinstance(r["cell"], bool) or not isinstance(r["cell"], int)):
        return f"has a cell that is not a number: {r['cell']!r}"
    return None


def note_id(user_id: str, content: str) -> str:
    """A hand-written note's id, from whose it is and what it says: importing the same notes
    again finds them (16 hex digits, as every memory id)."""
    return hashlib.sha256(f"{user_id}\x00{content_hash(content)}".encode()).hexdigest()[:16]


def _analysed_columns(rows: list[dict]) -> dict[str, list]:
    """What the analyser reads of exported rows."""
    return {name: [r[name] for r in rows] for name in bulk.ANALYSED}
