"""`slm-magic`: the same memory from a terminal or a script, on the same file."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .engine.validate import check_arguments
from .errors import InvalidImport, InvalidInput, SlmMagicError
from .memory import Memory
from .results.models import MEMORY_TYPES, FeedbackRecorded, MemoryChange


def _memory_options(args: argparse.Namespace) -> dict:
    """Who and how, from the global options: the same for every command and the MCP server."""
    return {"user_id": args.user, "semantic": args.semantic, "embedding_model": args.embedding_model}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="slm-magic", description="Long-term memory for notebooks, from the shell.")
    _memory_arguments(ap)
    sub = ap.add_subparsers(dest="command", required=True)
    _reading_commands(sub)
    _changing_commands(sub)
    for command in sub.choices.values():  # (after the command too: `slm-magic mcp --db FILE`)
        _memory_arguments(command, after_command=True)
    return ap


def _memory_arguments(parser: argparse.ArgumentParser, after_command: bool = False) -> None:
    """Which memory a command opens, and how it ranks. After the command they are set only when
    given, so they never undo the same option given before it."""
    unset = {"default": argparse.SUPPRESS} if after_command else {}
    parser.add_argument("--db", **({"default": None} | unset), help="memory file or postgresql:// URL (default: "
                                                                     "$SLM_MAGIC_DB or ~/.slm_magic/memory.duckdb)")
    parser.add_argument("--user", **({"default": None} | unset), help="whose memories (default: $SLM_MAGIC_USER, "
                                                                       "else your login name, as in the notebooks)")
    parser.add_argument("--no-semantic", dest="semantic", action="store_false", **unset,
                        help="find memories by their words alone (no meaning channel)")
    parser.add_argument("--embedding-model", **({"default": None} | unset),
                        help="the meaning channel's model: a .npz table or a sentence-transformers model "
                             "(default: the shipped one)")


def _reading_commands(sub) -> None:
    """The commands that store or read memories: remember, recall, stats, list, export, import."""
    r = sub.add_parser("remember", help="store a memory (the text, or - to read it from stdin)")
    r.add_argument("text", help="what to remember; - reads it from stdin")
    r.add_argument("--tags", help="comma-separated tags")
    r.add_argument("--project", help="the project it belongs to (default: none)")
    r.add_argument("--type", choices=MEMORY_TYPES, help="default: discovery")
    r.add_argument("--title", help="a short title, shown before the text")
    r.add_argument("--topic", help="a topic key: remembering again under it revises that memory, "
                                   "keeping every field not given")
    r.add_argument("--session", help="the id of the session it was learned in")
    r.add_argument("--core", action="store_true", default=None, help="pin it: always in a session's context")
    r.add_argument("--share", action="store_true", default=None,
                   help="share it with the team: everyone on this memory finds it, with you as its author")
    q = sub.add_parser("recall", help="the memories that answer a query")
    q.add_argument("query", nargs="+", help="what to look for")
    q.add_argument("--limit", "-n", type=int, default=10, help="how many memories (default: 10)")
    q.add_argument("--project", help="only memories of this project")
    q.add_argument("--type", choices=MEMORY_TYPES, help="only memories of this type")
    out = q.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON document: the query, how it was ranked, the memories")
    out.add_argument("--jsonl", action="store_true", help="JSON Lines: one object per memory, the same fields")
    q.add_argument("--related", action="store_true", help="also each match's session neighbours, after the matches")
    sub.add_parser("stats", help="what is stored")
    li = sub.add_parser("list", help="every memory, newest first, a page at a time (no query needed)")
    li.add_argument("--project", help="only memories of this project")
    li.add_argument("--type", choices=MEMORY_TYPES, help="only memories of this type")
    li.add_argument("--limit", "-n", type=int, default=20, help="how many a page")
    li.add_argument("--page", type=int, default=1, help="which page, from 1")
    li.add_argument("--json", action="store_true", help="one JSON document")
    e = sub.add_parser("export", help="write the memories to a .jsonl or .parquet file")
    e.add_argument("path", help="a .jsonl or .parquet file")
    i = sub.add_parser("import", help="add the memories of an exported file")
    i.add_argument("path", help="a .jsonl or .parquet file written by export, or a .jsonl of your own notes")
    i.add_argument("--skip-invalid", action="store_true", help="import the valid rows and list the others")


def _changing_commands(sub) -> None:
    """The commands that change what is stored, and the team's and the assistant's."""
    c = sub.add_parser("close", help="close a session (default: the most recent) and summarise it")
    c.add_argument("session_id", nargs="?", default="", help="which session (default: the most recent)")
    c.add_argument("--summary", "-s", nargs="+", default=None,
                   help="the session in your words (quotes not needed): shown when later sessions open")
    for name, what in (("pin", "make a memory core (always in a session's context)"),
                       ("unpin", "a core memory becomes an ordinary one")):
        sub.add_parser(name, help=f"{what}; ID may be its first 6 characters or more").add_argument("id")
    fg = sub.add_parser("forget", help="delete a memory for good (ID: its first 6 characters or more), or all of a "
                                       "project's, or all of yours")
    fg.add_argument("id", nargs="?")
    fg.add_argument("--project", help="every memory of this project")
    fg.add_argument("--all", action="store_true", help="every memory you have")
    fg.add_argument("--yes", "-y", action="store_true", help="no question asked (needed when not at a terminal)")
    f = sub.add_parser("feedback", help="tell the ranking a memory was useful (up) or not (down)")
    f.add_argument("id")
    f.add_argument("signal", choices=("up", "down"), type=str.lower)
    g = sub.add_parser("pg-setup", help="for an administrator: create or upgrade a team's memory on PostgreSQL "
                                        "(schema, roles, grants, row-level security); run again after an upgrade")
    g.add_argument("url", nargs="?", help="postgresql://admin@host/db, as a superuser (default: --db)")
    g.add_argument("--member", action="append", default=[], metavar="ROLE",
                   help="a person of the team: their login role (created if missing) joins slm_team; repeatable")
    sub.add_parser("mcp", help="serve this memory to an AI assistant: an MCP server on stdin/stdout "
                               "(needs: pip install 'slm-magic[mcp]')")


def _mcp(args: argparse.Namespace) -> int:
    """`slm-magic mcp`: the SDK is an optional extra, so its absence is one line, not a traceback."""
    try:
        from .mcp_server import serve
    except ImportError as exc:
        if not (exc.name or "").startswith("mcp"):
            raise
        print("slm-magic: the mcp command needs the MCP SDK, version 2: pip install 'slm-magic[mcp]'",
              file=sys.stderr)
        return 2
    try:
        return serve(args.db, **_memory_options(args))
    except SlmMagicError as exc:
        print(f"slm-magic: {exc}", file=sys.stderr)
        return 2


#: Commands that only read or change what is there: on a missing file they say so and create nothing.
NEEDS_A_FILE = ("recall", "stats", "list", "export", "close", "pin", "unpin", "feedback", "forget")


def _scored_json(m) -> dict:
    """Every field a script reads of a recalled memory: the memory, its score's parts, why."""
    fact = m.fact.model_dump(mode="json")
    return {**fact, "score": m.score.model_dump(mode="json"), "strength": m.strength, "matched": m.matched,
            "reason": m.reason, "related_to": m.related_to}


def _recall(mem: Memory, args: argparse.Namespace) -> None:
    if args.limit < 1:
        raise SlmMagicError("--limit must be at least 1")
    res = mem.recall(" ".join(args.query), limit=args.limit, project=args.project, type=args.type,
                     related=args.related)
    if args.jsonl:
        for m in res.memories:
            print(json.dumps(_scored_json(m), ensure_ascii=False))
    elif args.json:
        head = res.model_dump(mode="json", exclude={"memories"})
        print(json.dumps({**head, "memories": [_scored_json(m) for m in res.memories]}, ensure_ascii=False, indent=2))
    else:
        print(res)


def _list(mem: Memory, args: argparse.Namespace) -> None:
    if args.limit < 1 or args.page < 1:
        raise SlmMagicError("--limit and --page must be at least 1")
    page = mem.browse(project=args.project, type=args.type, limit=args.limit, offset=(args.page - 1) * args.limit)
    if args.json:  # (the memories under the name the MCP tool gives them)
        doc = page.model_dump(mode="json", exclude={"facts"}) | {"memories": [f.model_dump(mode="json") for f in page]}
        print(json.dumps(doc, ensure_ascii=False, indent=2))
    else:
        print(page)


def _forget(mem: Memory, args: argparse.Namespace) -> None:
    if args.id is not None:
        print(MemoryChange(action="forgotten", fact=mem.forget(mem.resolve_id(args.id))))
    else:
        print(mem.forget_all(project=args.project))


def _confirmed(args: argparse.Namespace) -> bool:
    """`forget --project P` or `--all` without --yes: how many would go, asked at a terminal
    with the file let go meanwhile (a kernel or the assistant may use it while you read)."""
    with Memory(args.db, **_memory_options(args)) as mem:
        n = mem.own_count(project=args.project)
    what = f"of project {args.project}" if args.project is not None else "of yours"
    if n == 0:  # (nothing to ask about)
        print(f"slm-magic: no memory {what}: nothing to forget")
        return False
    question = f"forget {n:,} {'memory' if n == 1 else 'memories'} {what}, for good?"
    if not sys.stdin.isatty():
        raise SlmMagicError(f"this would {question[:-1]}; add --yes to do it")
    try:
        answer = input(f"slm-magic: {question} [y/N] ")
    except (EOFError, KeyboardInterrupt):
        answer = ""
        print()
    if answer.strip().lower() in ("y", "yes"):
        return True
    print("slm-magic: nothing forgotten")
    return False


def _run(mem: Memory, args: argparse.Namespace) -> None:
    """One command on the open memory; prints what a person reads."""
    if args.command == "remember":
        content = sys.stdin.read().strip() if args.text == "-" else args.text  # (as %%remember takes a cell)
        fact = mem.remember(content, tags=args.tags, project=args.project, type=args.type,
                            title=args.title, topic_key=args.topic,
                            session_id=args.session or "cli:remember", core=args.core, share=args.share,
                            source=SOURCE)
        print(fact.fact_id)
    elif args.command == "recall":
        _recall(mem, args)
    elif args.command == "list":
        _list(mem, args)
    elif args.command == "stats":
        print(mem.status())
    elif args.command == "export":
        print(mem.export(args.path))
    elif args.command == "import":
        try:
            print(mem.import_file(args.path, on_invalid="skip" if args.skip_invalid else "raise"))
        except InvalidImport as exc:
            raise SlmMagicError(exc.naming("--skip-invalid")) from None
    elif args.command == "close":
        print(mem.close_session(args.session_id, summary=None if args.summary is None else " ".join(args.summary)))
    elif args.command in ("pin", "unpin"):
        fact = mem.pin(mem.resolve_id(args.id), args.command == "pin")
        print(MemoryChange(action="pinned" if args.command == "pin" else "unpinned", fact=fact))
    elif args.command == "forget":
        _forget(mem, args)
    elif args.command == "feedback":
        fact_id = mem.resolve_id(args.id)
        mem.feedback(fact_id, args.signal)
        print(FeedbackRecorded(fact_id=fact_id, signal=args.signal))


#: What the console writes is marked as its own (Fact.source): a topic it revises says so.
SOURCE = "console"

#: The arguments given without a flag (their name is said bare).
POSITIONAL = ("command", "path", "id", "session_id", "signal", "url")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:  # (an option typed in another encoding; the text and the query say it in their own words)
        check_arguments(vars(args), bare=POSITIONAL, skip=("text", "query"))
    except InvalidInput as exc:
        print(f"slm-magic: {exc}", file=sys.stderr)
        return 2
    if args.command == "mcp":
        return _mcp(args)
    if args.command == "pg-setup":
        try:
            before, after = Memory.setup_team(args.url or args.db or "", args.member)
        except SlmMagicError as exc:
            print(f"slm-magic: {exc}", file=sys.stderr)
            return 2
        done = f"schema version {before} -> {after}" if before != after else f"schema version {after}, up to date"
        members = f"; members: {', '.join(args.member)}" if args.member else ""
        print(f"slm-magic: team memory ready ({done}; grants and row-level security set{members})")
        return 0
    missing = Memory.missing_file(args.db) if args.command in NEEDS_A_FILE else None
    if missing is not None:
        print(f"slm-magic: no memory at {missing} (nothing was created; `slm-magic remember` or "
              "%%remember in a notebook starts one)", file=sys.stderr)
        return 2
    try:
        if args.command == "import" and not Path(args.path).expanduser().is_file():  # (before a file is made)
            raise SlmMagicError(f"{args.path} is not a file")
        if args.command == "forget":
            if sum((args.id is not None, args.project is not None, args.all)) != 1:
                raise SlmMagicError("forget takes one of: a memory ID, --project NAME, or --all")
            if args.id is None and not args.yes and not _confirmed(args):
                return 0
        with Memory(args.db, **_memory_options(args)) as mem:
            try:
                _run(mem, args)
            finally:  # (a new folder made for the file: a mistyped --db shows, whatever the command did)
                for line in mem.take_notices():
                    print(f"slm-magic: {line}", file=sys.stderr)
    except SlmMagicError as exc:
        print(f"slm-magic: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # (`slm-magic recall … | head`: the reader has what it wanted)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (so the exit's flush is quiet too)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
