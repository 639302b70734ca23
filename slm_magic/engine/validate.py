"""Validation of new memories, column by column, so a bulk import pays C speed per value.

Every rule here produces one clear `InvalidInput` message naming the field (and the record's
position in a bulk import); nothing is written unless every record passes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..core.clock import to_utc_naive
from ..core.fields import MEMORY_TYPES
from ..errors import InvalidInput


#: Longest content accepted, in characters. A pasted traceback, log or model report is kept
#: whole; this limit only protects the machine (benchmarks/long_memory.py: what a 1 MB memory
#: costs). Above it, store the file on disk and remember its path.
MAX_CONTENT_CHARS = 10_000_000


#: A tag is a label and a title a line: past these a memory's labels are a text of their own
#: (an assistant sent 100,000 tags, and the file was held for a minute while they were indexed).
MAX_TAGS = 100
MAX_TAG_CHARS = 200
MAX_TITLE_CHARS = 1_000
MAX_PROJECT_CHARS = 200


FIELDS = frozenset(("content", "session_id", "tags", "project", "type", "title", "topic_key", "core",
                    "created_at", "user_id", "source", "notebook", "cell", "cell_id", "code", "share"))


OPTIONAL_STR = ("session_id", "project", "title", "topic_key", "user_id", "source", "notebook", "cell_id", "code")


_NONE = type(None)


def check_text(name: str, value: str, where: str = "") -> None:
    """A text that cannot be stored as UTF-8 (a stray byte a terminal or file in another
    encoding handed Python as a lone surrogate) is a clear refusal, not DuckDB's error."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"{name} is not UTF-8 text: character {exc.start + 1} is a stray byte "
                               f"(typed or read in another encoding?){where}") from None


def check_arguments(arguments: dict, *, bare: Container[str] = (), skip: Container[str] = ()) -> None:
    """`check_text` of every text a command line gave (parsed arguments by name; a list's
    items each), named as typed: `--name`, or the name alone for those given without a flag
    (`bare`); `skip`: those the engine checks itself, with their own words."""
    for name, value in arguments.items():
        if name in skip:
            continue
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str):
                check_text(name if name in bare else f"--{name.replace('_', '-')}", text)


def normalise_tags(tags: str | Iterable[str] | None) -> tuple[str, ...]:
    """Tags as the seed's "auth,decision" string or a sequence; both mean the same tags."""
    if tags is None or isinstance(tags, str) and not tags:
        return ()
    if isinstance(tags, str):
        tags = tags.split(",")
    elif not isinstance(tags, (list, tuple, set, frozenset)):
        raise InvalidInput(f"tags must be a string or a list of strings, not {type(tags).__name__}")
    out: dict[str, None] = {}  # (in order, each once)
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInput(f"tags must be strings, got {type(tag).__name__}")
        tag = tag.replace("\x00", "").strip()
        check_text("a tag", tag)
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(f"a tag has {len(tag):,} characters; the limit is {MAX_TAG_CHARS} (a tag is a label)")
        if tag:
            out[tag] = None
            if len(out) > MAX_TAGS:
                raise InvalidInput(f"more than {MAX_TAGS} tags; a memory takes at most {MAX_TAGS}")
    return tuple(out)


def tags_column(values: Sequence[Any]) -> list[list[str]]:
    """`normalise_tags` of each value, each distinct list of tags worked out once (a bulk
    write's tags repeat: a few lists among thousands of memories)."""
    done: dict[Any, tuple[str, ...]] = {}
    out = []
    for value in values:
        kind = type(value)
        if kind is list or kind is tuple:
            key = tuple(value)
        elif kind is str or value is None:
            key = value
        else:  # (a set, or a wrong type that normalise_tags names)
            out.append(list(normalise_tags(value)))
            continue
        try:
            tags = done[key]
        except KeyError:
            tags = done[key] = normalise_tags(value)
        except TypeError:  # (unhashable: a list inside the list, or another type, said so below)
            tags = normalise_tags(value)
        out.append(list(tags))
    return out


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

    def where(i: int) -> str:
        return "" if offset is None else f" (record {offset + i})"

    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise InvalidInput(f"a memory record must be a mapping, not {type(rec).__name__}{where(i)}")
        if not rec.keys() <= FIELDS:
            unknown = ", ".join(sorted(map(str, set(rec) - FIELDS)))
            raise InvalidInput(f"unknown memory field(s): {unknown}{where(i)}")
    cols: dict[str, list] = {"content": _content(records, where), **_strings(records, where, default_user)}

    types = [r.get("type") or "discovery" for r in records]
    if not all(isinstance(t, str) and t in MEMORY_TYPES for t in types):
        i = next(i for i, t in enumerate(types) if not isinstance(t, str) or t not in MEMORY_TYPES)
        raise InvalidInput(f"type must be one of {', '.join(MEMORY_TYPES)}; got {types[i]!r}{where(i)}")
    cols["type"] = types

    cells = [r.get("cell") for r in records]
    if not set(map(type, cells)) <= {int, _NONE}:
        i = next(i for i, c in enumerate(cells) if c is not None and (isinstance(c, bool) or not isinstance(c, int)))
        raise InvalidInput(f"cell must be an integer, not {type(cells[i]).__name__}{where(i)}")
    cols["cell"] = cells

    created = [r.get("created_at") for r in records]
    if set(map(type, created)) <= {_NONE}:
        created = [now] * n
    else:
        created = [to_utc_naive(c, now) for c in created]
    cols["created_at"] = created
    cols["updated_at"] = list(created)
    cols["tags"] = tags_column([r.get("tags") for r in records])
    cols["is_core"] = _flags(records, "core", where)
    cols["shared"] = _flags(records, "share", where)
    cols["code"] = code_kept(cols["code"], cols["shared"])
    return cols


def _content(records: Sequence[Mapping[str, Any]], where: Callable[[int], str]) -> list[str]:
    """The records' content: strings, NULs dropped, private spans redacted, never empty and
    never over the limit."""
    content = [r.get("content") for r in records]
    if not set(map(type, content)) <= {str}:
        i = next(i for i, c in enumerate(content) if not isinstance(c, str))
        raise InvalidInput(f"content must be a string, not {type(content[i]).__name__}{where(i)}")
    joined = "".join(content)
    if "\x00" in joined:
        content = [c.replace("\x00", "") for c in content]
    content = [redact(c) for c in content]
    for i, c in enumerate(content):
        if not c or c.isspace():
            raise InvalidInput(f"content is empty{where(i)}")
        if not joined.isascii():
            check_text("content", c, where(i))
    if max(map(len, content)) > MAX_CONTENT_CHARS:
        i = next(i for i, c in enumerate(content) if len(c) > MAX_CONTENT_CHARS)
        raise InvalidInput(f"content is {len(content[i]):,} characters; the limit is {MAX_CONTENT_CHARS:,}, "
                           f"which protects this machine: save the text to a file and remember its path"
                           f"{where(i)}")
    return content


def _strings(records: Sequence[Mapping[str, Any]], where: Callable[[int], str], default_user: str) -> dict[str, list]:
    """The optional text fields (OPTIONAL_STR) as columns: strings or None, NULs dropped, the
    title redacted, the user defaulted, the project "" and the session and topic None when left
    out or blank."""
    cols: dict[str, list] = {}
    for name in OPTIONAL_STR:
        values = [r.get(name) for r in records]
        kinds = set(map(type, values))
        if not kinds <= {str, _NONE}:
            i = next(i for i, v in enumerate(values) if v is not None and not isinstance(v, str))
            raise InvalidInput(f"{name} must be a string, not {type(values[i]).__name__}{where(i)}")
        joined = "".join(v for v in values if v) if str in kinds else ""
        if "\x00" in joined:
            values = [v.replace("\x00", "") if v else v for v in values]
        if not joined.isascii():  # (one look at the whole column: a bulk write's are mostly ASCII)
            for i, v in enumerate(values):
                if v:
                    check_text(name, v, where(i))
        cols[name] = values
    for name, most in (("title", MAX_TITLE_CHARS), ("project", MAX_PROJECT_CHARS)):
        i = next((i for i, v in enumerate(cols[name]) if v and len(v) > most), None)
        if i is not None:
            raise InvalidInput(f"{name} has {len(cols[name][i]):,} characters; the limit is {most:,}{where(i)}")
    cols["title"] = [redact(t) if t else t for t in cols["title"]]
    cols["user_id"] = [default_user if u is None else u for u in cols["user_id"]]
    cols["project"] = [p or "" for p in cols["project"]]
    cols["session_id"] = [s or None for s in cols["session_id"]]
    # (a blank topic is no topic: an assistant sends "" for an optional field, and as a key it
    # made every later save with "" revise the first one)
    cols["topic_key"] = [t if t and t.strip() else None for t in cols["topic_key"]]
    return cols


def _flags(records: Sequence[Mapping[str, Any]], name: str, where: Callable[[int], str]) -> list[bool]:
    """A True/False field (`core`, `share`) as a column, False when left out."""
    values = [r.get(name) for r in records]
    if not set(map(type, values)) <= {bool, _NONE}:
        i = next(i for i, c in enumerate(values) if not isinstance(c, (bool, _NONE)))
        raise InvalidInput(f"{name} must be True or False, not {type(values[i]).__name__}{where(i)}")
    return [bool(c) for c in values]


def code_kept(codes: Sequence, shared: Sequence[bool]) -> list:
    """The code kept with each memory. What is shared is the finding, not the code run before
    it, which may hold what its author never meant to share (a connection string, a path)."""
    return [None if sh else c for c, sh in zip(codes, shared)]
