"""`slm-magic`: the same memory from a terminal or a script, on the same file."""

from __future__ import annotations

import argparse
import json
import sys

from .errors import SlmMagicError
from .memory import Memory
from .models import MEMORY_TYPES, FeedbackRecorded, MemoryChange


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="slm-magic", description="Long-term memory for notebooks, from the shell.")
    ap.add_argument("--db", default=None, help="memory file or postgresql:// URL (default: $SLM_MAGIC_DB or "
                                               "~/.slm_magic/memory.duckdb)")
    ap.add_argument("--user", default="", help="whose memories")
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("remember", help="store a memory (the text, or - to read it from stdin)")
    r.add_argument("text")
    r.add_argument("--tags", help="comma-separated tags")
    r.add_argument("--project")
    r.add_argument("--type", choices=MEMORY_TYPES, help="default: discovery")
    r.add_argument("--title")
    r.add_argument("--topic", help="a topic key: remembering again under it revises that memory, "
                                   "keeping every field not given")
    r.add_argument("--session")
    r.add_argument("--core", action="store_true", default=None)
    q = sub.add_parser("recall", help="the memories that answer a query")
    q.add_argument("query", nargs="+")
    q.add_argument("--limit", "-n", type=int, default=10)
    q.add_argument("--project")
    q.add_argument("--json", action="store_true", help="one JSON object per memory")
    q.add_argument("--related", action="store_true", help="also each match's session neighbours, after the matches")
    sub.add_parser("stats", help="what is stored")
    e = sub.add_parser("export", help="write the memories to a .jsonl or .parquet file")
    e.add_argument("path")
    i = sub.add_parser("import", help="add the memories of an exported file")
    i.add_argument("path")
    i.add_argument("--skip-invalid", action="store_true", help="import the valid rows and list the others")
    c = sub.add_parser("close", help="close a session (default: the most recent) and summarise it")
    c.add_argument("session_id", nargs="?", default="")
    for name, what in (("pin", "make a memory core (always in a session's context)"),
                       ("unpin", "a core memory becomes an ordinary one"), ("forget", "delete a memory for good")):
        sub.add_parser(name, help=f"{what}; ID may be its first 6 characters or more").add_argument("id")
    f = sub.add_parser("feedback", help="tell the ranking a memory was useful (up) or not (down)")
    f.add_argument("id")
    f.add_argument("signal", choices=("up", "down"))
    g = sub.add_parser("pg-setup", help="for an administrator: create or upgrade a team's memory on PostgreSQL "
                                        "(schema, roles, grants, row-level security); run again after an upgrade")
    g.add_argument("url", nargs="?", help="postgresql://admin@host/db, as a superuser (default: --db)")
    g.add_argument("--member", action="append", default=[], metavar="ROLE",
                   help="a person of the team: their login role (created if missing) joins slm_team; repeatable")
    sub.add_parser("mcp", help="serve this memory to an AI assistant: an MCP server on stdin/stdout "
                               "(needs: pip install 'slm-magic[mcp]')")
    return ap


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
        return serve(args.db, user_id=args.user)
    except SlmMagicError as exc:
        print(f"slm-magic: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
    try:
        with Memory(args.db, user_id=args.user) as mem:
            if args.command == "remember":
                content = sys.stdin.read() if args.text == "-" else args.text
                fact = mem.remember(content, tags=args.tags, project=args.project, type=args.type,
                                    title=args.title, topic_key=args.topic,
                                    session_id=args.session or "cli:remember", core=args.core)
                print(fact.fact_id)
            elif args.command == "recall":
                if args.limit < 1:
                    raise SlmMagicError("--limit must be at least 1")
                res = mem.recall(" ".join(args.query), limit=args.limit, project=args.project, related=args.related)
                if args.json:
                    for m in res:
                        print(json.dumps({"fact_id": m.fact_id, "content": m.content, **m.score.model_dump(),
                                          "matched": m.matched, "reason": m.reason}))
                else:
                    print(res)
            elif args.command == "stats":
                print(mem.status())
            elif args.command == "export":
                print(mem.export(args.path))
            elif args.command == "import":
                print(mem.import_file(args.path, on_invalid="skip" if args.skip_invalid else "raise"))
            elif args.command == "close":
                print(mem.close_session(args.session_id))
            elif args.command in ("pin", "unpin", "forget"):
                fact_id = mem.resolve_id(args.id)
                fact = mem.forget(fact_id) if args.command == "forget" else mem.pin(fact_id, args.command == "pin")
                print(MemoryChange(action={"pin": "pinned", "unpin": "unpinned"}.get(args.command, "forgotten"),
                                   fact=fact))
            elif args.command == "feedback":
                fact_id = mem.resolve_id(args.id)
                mem.feedback(fact_id, args.signal)
                print(FeedbackRecorded(fact_id=fact_id, signal=args.signal))
    except SlmMagicError as exc:
        print(f"slm-magic: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
