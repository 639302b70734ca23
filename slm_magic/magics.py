"""The IPython magics: `%slm_start`, `%%remember`, `%recall` and what a user needs around them.

Each magic opens the memory file only while it runs (`Memory.attached`), so several kernels can
share one file; user mistakes become one-line `UsageError`s, never tracebacks.
"""

from __future__ import annotations

import contextlib
import html
import os
import socket
import textwrap
from collections import OrderedDict

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split
from traitlets import Bool, Float, Integer, TraitError, Unicode, observe, validate
from traitlets.config import Configurable

from . import magic_questions as questions
from .core.scoring import AGE_GATE_RELEVANCE
from .engine.validate import check_arguments, normalise_tags, redact
from .results.display import plural, terminal_width, wrap
from .errors import InvalidImport, InvalidInput, SlmMagicError
from .memory import Memory
from .notebook_path import NotebookPath
from .results.models import (MEMORY_TYPES, ExportReport, FeedbackRecorded, ImportReport, MemoryChange, RecallResult,
                     SessionInit, StatusReport)


def _unquote(value):
    if isinstance(value, list):
        return [_unquote(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse_argstring(magic, line: str):
    """IPython's parse, except that options may stand among a query's words (`%recall churn
    --limit 2 model`, as a person adds one to what they typed) and that one layer of matching
    quotes is taken off each value (IPython's keeps them: `--title "a b"` gave '"a b"')."""
    try:
        args = magic.parser.parse_intermixed_args(arg_split(line, strict=True))
    except ValueError as exc:  # shlex: an unmatched quote
        raise UsageError(f"cannot read the options: {exc}") from None
    for name, value in vars(args).items():
        setattr(args, name, _unquote(value))
    try:  # (a query is searched as it is: nothing of it is stored)
        check_arguments(vars(args), bare=("path", "id", "project_path"), skip=("query",))
    except InvalidInput as exc:
        raise UsageError(str(exc)) from None
    return args


def readable_help(func):
    """`magic_arguments` writes the help as reST (a `::` line, then the usage indented): show
    it as plain text in `%recall?`. Goes above `@magic_arguments()`."""
    doc = func.__doc__ or ""
    if doc.startswith("::"):
        usage, _, rest = doc[2:].lstrip("\n").partition("\n\n")
        func.__doc__ = textwrap.dedent(usage) + "\n\n" + rest
    return func


def _relabelled(fact, args, text: str) -> dict:
    """What a %%remember cell run again asks that its memory does not have yet: its text as
    stored (an edit of case or spacing), the labels its options give (tags, type, title,
    project), being pinned."""
    asked = {"content": redact(text), "title": None if args.title is None else redact(args.title),
             "type": args.type, "project": args.project, "tags": None if args.tags is None else normalise_tags(args.tags)}
    out = {k: v for k, v in asked.items() if v is not None and v != getattr(fact, k)}
    if args.core and not fact.is_core:
        out["core"] = True
    return out


def _usage(exc: Exception) -> UsageError:
    """An engine error as one line; an import's names this magic's option, not the API's."""
    return UsageError(exc.naming("--skip-invalid") if isinstance(exc, InvalidImport) else str(exc))


@magics_class
class SLMMagic(Magics, Configurable):
    """Long-term memory for this notebook; configure with `%config SLMMagic.<name> = value`."""

    db_path = Unicode("", help="The memory file, or a team memory's postgresql:// URL. Empty: $SLM_MAGIC_DB, else "
                      "~/.slm_magic/memory.duckdb.").tag(config=True)
    user = Unicode("", help="Whose memories these are (empty: $SLM_MAGIC_USER, else your login name, as the "
                   "command line and the MCP server use); users never see each other's.").tag(config=True)
    session_timeout_hours = Float(24.0, help="An idle session older than this is closed and a new one opened.").tag(
        config=True)
    limit = Integer(10, help="How many memories %recall and %slm_start show by default.").tag(config=True)
    max_age_days = Integer(30, help=f"%slm_start's age gate: older memories need relevance >= "
                           f"{AGE_GATE_RELEVANCE:.2f} (0: off).").tag(config=True)
    semantic = Bool(True, help="Find memories asked in other words too (the meaning channel); False: by their "
                    "words alone.").tag(config=True)
    embedding_model = Unicode("", help="The meaning channel's model: empty for the one shipped with slm_magic, else "
                              "a .npz table or a sentence-transformers model your machine has.").tag(config=True)
    learning = Bool(True, help="Let your feedback re-rank your recalls (the learning loop); False: the default "
                    "ranking, your signals kept.").tag(config=True)
    keep_code = Bool(True, help="%%remember also keeps the source of the cell run just before it (up to "
                                "10,000 characters): the code that produced the finding.").tag(config=True)

    CODE_KEPT = 10_000  # characters of the previous cell's source kept with a memory

    def __init__(self, shell=None, **kwargs):
        # (before the config is read: a setting it holds calls `_reopen` as it is set)
        self._memory: Memory | None = None
        self.session_id: str | None = None
        self._notebook_path: NotebookPath | None = None
        self._configuring = True  # (a profile's bad value: said, and the default kept; the extension loads)
        super().__init__(shell=shell, config=shell.config if shell is not None else None, **kwargs)
        self._configuring = False
        self._cell_number: int | None = None
        self._cell_id: str | None = None          # the front end's id of the running cell
        self._sources: tuple[str | None, str | None] = (None, None)  # (previous, running) cell source
        # Results the magics returned lately, with their session: shown as widgets that act on
        # this memory (a result made elsewhere is shown read-only).
        self._origins: OrderedDict[int, tuple[object, Memory, str | None]] = OrderedDict()
        if shell is not None:
            shell.events.register("pre_run_cell", self._note_cell)

    def _note_cell(self, info) -> None:
        """The cell about to run: its number (IPython counts it before the cell runs), the id
        JupyterLab sends with it, and its source (the next %%remember's code, if it follows)."""
        count = self.shell.execution_count
        self._cell_number = count - 1 if getattr(info, "store_history", False) else count
        self._cell_id = getattr(info, "cell_id", None) or None
        running = self._sources[1]  # becomes the previous cell, unless it was a %%remember itself
        previous = self._sources[0] if running is not None and running.lstrip().startswith("%%remember") else running
        self._sources = (previous, getattr(info, "raw_cell", None))

    @property
    def notebook(self) -> str | None:
        """The running notebook's path, where the front end says it (JupyterLab, VS Code)."""
        notebook = self._jupyter_notebook() or (self.shell.user_ns.get("__vsc_ipynb_file__")
                                                if self.shell is not None else None)
        return str(notebook) if notebook else None

    def _jupyter_notebook(self) -> str | None:
        """The notebook a Jupyter server started this kernel for, by the name it has now (it may
        have been renamed since: `notebook_path`)."""
        started = os.environ.get("JPY_SESSION_NAME") or None
        if started is None or not self.in_kernel:
            return started
        if self._notebook_path is None:
            try:
                from ipykernel.connect import get_connection_file

                connection = get_connection_file()
            except Exception:  # noqa: BLE001 - not an ipykernel kernel: the name it started with
                connection = None
            self._notebook_path = NotebookPath(connection)
        return self._notebook_path.current(started)

    @property
    def origin(self) -> str:
        """Whose session this is: the notebook where there is one, else this one kernel or
        terminal IPython process."""
        return self._origin_of(self.notebook)

    def _origin_of(self, notebook: str | None) -> str:
        """`origin`, the notebook's path already known (each asks the kernel's server)."""
        return notebook or f"{'kernel' if self.in_kernel else 'ipython'}:{socket.gethostname()}:{os.getpid()}"

    @validate("limit", "max_age_days", "session_timeout_hours")
    def _in_range(self, proposal):
        """A bad setting is refused when it is set, by its own name (not by a magic's option later)."""
        name, value = proposal["trait"].name, proposal["value"]
        ok, need = {"limit": (value >= 1, "at least 1"), "max_age_days": (value >= 0, "0 or more"),
                    "session_timeout_hours": (value > 0, "more than 0")}[name]
        if not ok:
            message = f"SLMMagic.{name} must be {need}; got {value!r}"
            if self._configuring:
                default = proposal["trait"].default_value
                print(f"slm_magic: {message}: {default!r} instead")
                return default
            raise TraitError(message)
        return value

    # --- the engine ---------------------------------------------------------------------------
    @observe("db_path", "user", "session_timeout_hours", "semantic", "embedding_model", "learning")
    def _reopen(self, change) -> None:
        # (the same file and user keep their session: only how it is ranked or timed changed)
        session = None if change.name in ("db_path", "user") else self.session_id
        self.close()
        self.session_id = session

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
            self._memory = None
            self.session_id = None

    def unhook(self) -> None:
        """Stop following the cells that run (the extension is unloaded)."""
        if self.shell is not None:
            try:
                self.shell.events.unregister("pre_run_cell", self._note_cell)
            except ValueError:
                pass

    @property
    def memory(self) -> Memory:
        if self._memory is None:
            path = self.db_path or None
            try:
                self._memory = Memory(path, user_id=self.user or None, session_timeout_hours=self.session_timeout_hours,
                                      semantic=self.semantic, embedding_model=self.embedding_model or None,
                                      learning=self.learning)
            except SlmMagicError as exc:
                raise _usage(exc) from None
            self._memory.detach()  # held only while a magic runs
        return self._memory

    @contextlib.contextmanager
    def _engine(self, *, notice_closed: bool = True):
        """The memory, attached to its file for one magic; engine errors become UsageErrors."""
        mem = self.memory
        try:
            with mem.attached():
                if notice_closed:
                    self._notice_closed(mem)
                yield mem
        except SlmMagicError as exc:
            raise _usage(exc) from None
        finally:
            for line in mem.take_notices():
                print(f"slm_magic: {line}")

    def _notice_closed(self, mem: Memory) -> None:
        """This kernel's session ended elsewhere (another kernel, `slm-magic close`, the API):
        say so in one line and go on in a new one, so nothing is written into a closed session."""
        old = self.session_id
        if old is not None and mem.session_is_closed(old):
            notebook = self.notebook
            self.session_id = mem.session_init(max_results=0, origin=self._origin_of(notebook)).session_id
            here = "this notebook" if notebook else "this session"
            print(f"slm_magic: session {old} was closed elsewhere; {here} goes on in {self.session_id}")

    def _session(self, mem: Memory) -> str:
        """The current session, opened on the fly (and said so) if %slm_start was not run:
        this notebook's session if it is still active, else a new one."""
        if self.session_id is None:
            init = mem.session_init(max_results=0, reuse=True, origin=self.origin)
            self.session_id = init.session_id
            how = "started" if init.is_new else "continued this notebook's"
            print(f"slm_magic: {how} session {self.session_id} (%slm_start shows its context)")
        return self.session_id

    def _provenance(self) -> dict:
        """Where a %%remember's text comes from: notebook, cell number, cell id, and the code
        of the cell run before it (bounded; off with `%config SLMMagic.keep_code = False`)."""
        notebook = self._jupyter_notebook()
        count = self._cell_number
        if count is None and self.shell is not None:
            count = self.shell.execution_count
        code = self._sources[0] if self.keep_code else None
        if code is not None and not code.strip():
            code = None
        if code is not None and len(code) > self.CODE_KEPT:
            code = code[: self.CODE_KEPT] + f"\n# … {len(code) - self.CODE_KEPT:,} more characters not kept"
        if code is not None and not code.isascii():  # (a stray byte in the cell before is no fault of this one)
            code = code.encode("utf-8", "replace").decode("utf-8")
        return {"notebook": notebook, "cell": count, "cell_id": self._cell_id, "code": code}

    # --- widgets, in a kernel ---------------------------------------------------------------
    ORIGINS_KEPT = 200

    @property
    def in_kernel(self) -> bool:
        """A Jupyter kernel (widgets can show) rather than a terminal IPython (text tables)."""
        return getattr(self.shell, "kernel", None) is not None

    def _mine(self, result, session_id: str | None):
        self._origins[id(result)] = (result, self._memory, session_id)
        while len(self._origins) > self.ORIGINS_KEPT:
            self._origins.popitem(last=False)
        return result

    def _origin(self, result) -> tuple[Memory | None, str | None]:
        got = self._origins.get(id(result))
        if got is None or got[0] is not result:
            return None, None
        return got[1], got[2]  # the memory (file and user) that made it, even after a switch

    def show_recall(self, result: RecallResult) -> None:
        from IPython.display import display

        from .widgets import MemoriesView

        mem, sid = self._origin(result)
        display(MemoriesView.of(result, memory=mem, session_id=sid))

    def show_session(self, init: SessionInit) -> None:
        from IPython.display import display

        from .widgets import ContextView

        mem, _ = self._origin(init)
        display(ContextView(init, memory=mem, limit=self.limit))

    # --- the magics ---------------------------------------------------------------------------
    @readable_help
    @magic_arguments()
    @argument("project_path", nargs="?", default="",
              help="the project folder; its words seed the query (default: this notebook's name and folder)")
    @argument("--query", "-q", default="",
              help="what this session is about (default: the project path's words; none: what is pinned and newest)")
    @argument("--max-results", "-n", type=int, default=None, help="how many memories to show")
    @argument("--max-age-days", type=int, default=None, help="age gate in days (0: off)")
    @argument("--user", "-u", default=None, help="open the memory of this user")
    @argument("--new", action="store_true", help="a new session even if one is still active")
    @line_magic
    def slm_start(self, line: str) -> SessionInit:
        """Open a session (or continue the one active within the timeout) and show the
        memories that matter for this project."""
        args = parse_argstring(self.slm_start, line)
        n = self.limit if args.max_results is None else args.max_results
        days = self.max_age_days if args.max_age_days is None else args.max_age_days
        for option, value in (("--max-results", n), ("--max-age-days", days)):
            if value < 0:
                raise UsageError(f"{option} must be 0 or more; got {value}")
        before = self.user
        if args.user is not None:
            self.user = args.user
        try:
            with self._engine() as mem:
                # (no path given: the notebook's own name and folder, where there is a notebook)
                notebook = self.notebook
                where = args.project_path or (notebook or "" if not args.query else "")
                init = mem.session_init(project_path=where, query=args.query, max_results=n, max_age_days=days,
                                        reuse=not args.new, origin=self._origin_of(notebook))
        except UsageError:
            if self.user != before:  # (a user this memory refuses: the one before stays, and its session)
                self.user = before
            raise
        self.session_id = init.session_id
        return self._mine(init, init.session_id)

    @readable_help
    @magic_arguments()
    @argument("--tags", "-t", default=None, help="comma-separated tags")
    @argument("--project", "-p", default=None, help="the project it belongs to")
    @argument("--type", default=None, choices=MEMORY_TYPES, help="the kind of memory (default: discovery)")
    @argument("--title", default=None, help="a short title")
    @argument("--topic", default=None,
              help="a topic key: remembering again under it revises that memory, keeping every option not given")
    @argument("--core", action="store_true", default=None, help="pin it: always in a session's context")
    @argument("--share", action="store_true", default=None,
              help="share it with the team: everyone on this memory finds it, with you as its author")
    @cell_magic
    def remember(self, line: str, cell: str) -> MemoryChange:
        """Remember the cell's text, with where it came from (notebook and cell)."""
        args = parse_argstring(self.remember, line)
        if not cell.strip():
            raise UsageError("%%remember needs a cell body: the text to remember")
        where, text = self._provenance(), cell.strip()
        with self._engine() as mem:
            sid = self._session(mem)
            # (a cell run again, Run All: the memory it wrote, its labels changed if the cell's are)
            # (--share: a shared memory is another one, which --topic revises)
            same = None if args.topic or args.share else mem.find_text(text, notebook=where["notebook"])
            if same is not None:
                changed = _relabelled(same, args, text)
                if not changed:
                    return MemoryChange(action="kept", fact=same)
                labels = {k: v for k, v in changed.items() if k not in ("content", "core")}
                revised = labels or "content" in changed
                fact = mem.revise(same.fact_id, content=text, **labels) if revised else same
                if changed.get("core"):  # (pinned alone is no revision: the score counts revisions)
                    return MemoryChange(action="revised" if revised else "pinned", fact=mem.pin(fact.fact_id))
                return MemoryChange(action="revised", fact=fact)
            fact = mem.remember(text, session_id=sid, tags=args.tags, project=args.project,
                                type=args.type, title=args.title, topic_key=args.topic, core=args.core, share=args.share, **where)
        return MemoryChange(action="revised" if fact.revision_count else "remembered", fact=fact)

    @readable_help
    @magic_arguments()
    @argument("query", nargs="*", help="what to look for")
    @argument("--limit", "-n", type=int, default=None, help="how many memories")
    @argument("--type", default=None, choices=MEMORY_TYPES, help="only memories of this type")
    @argument("--project", "-p", default=None, help="only memories of this project")
    @argument("--related", action="store_true",
              help="also the memories written next to each match in its session (after the matches, labelled)")
    @line_magic
    def recall(self, line: str) -> RecallResult:
        """The memories that answer QUERY, best first, with every score and its parts."""
        args = parse_argstring(self.recall, line)
        query = " ".join(args.query).strip().strip("'\"")
        limit = self.limit if args.limit is None else args.limit
        if limit < 1:
            raise UsageError(f"--limit must be at least 1; got {limit}")
        if not query:
            if not self.in_kernel:
                raise UsageError("%recall needs a query, e.g. %recall churn definition (%slm_list pages "
                                 "through every memory; in a notebook, %recall alone is a live search box)")
            from .widgets import LiveSearch

            with self._engine() as mem:
                sid = self._session(mem)
            return LiveSearch(mem, session_id=sid, limit=limit, type=args.type, project=args.project,
                              related=args.related)
        with self._engine() as mem:
            sid = self._session(mem)
            res = mem.recall(query, session_id=sid, project=args.project, limit=limit, type=args.type,
                             related=args.related)
            if args.project is not None and not res.memories and args.project not in (known := mem.projects()):
                shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
                print("\n".join(wrap(f"slm_magic: no memory is filed under project {args.project!r}"
                                     + (f" (projects: {shown})" if known else " (no memory you can read has a project)"),
                                     terminal_width())))
        return self._mine(res, sid)

    @readable_help
    @magic_arguments()
    @argument("--summary", "-s", nargs="+", default=None, help="the session in your words (quotes not needed): "
              "shown when later sessions open, found by questions about sessions and days")
    @line_magic
    def slm_close(self, line: str):
        """Close the session: one searchable summary per thing it touched."""
        args = parse_argstring(self.slm_close, line)
        summary = None if args.summary is None else " ".join(args.summary)
        if self.session_id is None:
            raise UsageError("no session is open in this kernel (%slm_start opens one)")
        with self._engine(notice_closed=False) as mem:
            if mem.session_is_closed(self.session_id):
                closed, self.session_id = self.session_id, None
                raise UsageError(f"session {closed} was already closed elsewhere (%slm_start opens a new one)")
            result = mem.close_session(self.session_id, summary=summary)
        self.session_id = None
        return result  # (a CloseSessionResult reads as one line)

    @line_magic
    def slm_status(self, line: str) -> StatusReport:
        """Where the memory lives, the session, how much is stored, the learning phase."""
        if line.strip():
            raise UsageError("%slm_status takes no arguments")
        with self._engine() as mem:
            return mem.status(session_id=self.session_id)

    def _by_id(self, magic: str, line: str, action):
        parts = line.split()
        if len(parts) != 1:
            raise UsageError(f"%{magic} takes one memory id (or its first 6 characters or more)")
        with self._engine() as mem:
            return action(mem, mem.resolve_id(parts[0].strip("'\"")))

    @line_magic
    def slm_pin(self, line: str) -> MemoryChange:
        """%slm_pin ID: make a memory core (always in a session's context)."""
        return self._by_id("slm_pin", line, lambda mem, fid: MemoryChange(action="pinned", fact=mem.pin(fid, True)))

    @line_magic
    def slm_unpin(self, line: str) -> MemoryChange:
        """%slm_unpin ID: a core memory becomes an ordinary one."""
        return self._by_id("slm_unpin", line,
                           lambda mem, fid: MemoryChange(action="unpinned", fact=mem.pin(fid, False)))

    @readable_help
    @magic_arguments()
    @argument("id", nargs="?", default=None, help="the memory's id (or its first 6 characters or more)")
    @argument("--project", "-p", default=None, help="every memory of this project")
    @argument("--all", action="store_true", help="every memory you have")
    @argument("--yes", action="store_true", help="do it: without it, --project and --all only say what would go")
    @line_magic
    def slm_forget(self, line: str):
        """Delete memories for good: one by its id, or all of a project or all of yours (these
        two say how many first and act only with --yes)."""
        args = parse_argstring(self.slm_forget, line)
        if sum((args.id is not None, args.project is not None, args.all)) != 1:
            raise UsageError("%slm_forget takes one of: a memory id, --project NAME, or --all "
                             "(e.g. %slm_forget 3f2a9c, %slm_forget --project churn --yes)")
        if args.id is not None:
            return self._by_id("slm_forget", args.id,
                               lambda mem, fid: MemoryChange(action="forgotten", fact=mem.forget(fid)))
        with self._engine() as mem:
            if args.yes:
                return mem.forget_all(project=args.project)
            n = mem.own_count(project=args.project)
        what = f"of project {args.project}" if args.project is not None else "of yours"
        print("\n".join(wrap(f"slm_magic: no memory {what}: nothing to forget" if n == 0 else
                             f"slm_magic: this would forget {plural(n, 'memory', 'memories')} {what}, for good; "
                             "add --yes to do it", terminal_width())))
        return None

    @readable_help
    @magic_arguments()
    @argument("--project", "-p", default=None, help="only memories of this project")
    @argument("--type", default=None, choices=MEMORY_TYPES, help="only memories of this type")
    @argument("--limit", "-n", type=int, default=None, help="how many a page (default: SLMMagic.limit)")
    @argument("--page", type=int, default=1, help="which page, from 1")
    @line_magic
    def slm_list(self, line: str):
        """Every memory, newest first, a page at a time (no query needed)."""
        args = parse_argstring(self.slm_list, line)
        limit = self.limit if args.limit is None else args.limit
        for name, value in (("--limit", limit), ("--page", args.page)):
            if value < 1:
                raise UsageError(f"{name} must be at least 1; got {value}")
        with self._engine() as mem:
            return mem.browse(project=args.project, type=args.type, limit=limit, offset=(args.page - 1) * limit)

    @line_magic
    def slm_help(self, line: str) -> MagicsHelp:
        """Every slm_magic magic, one line each (`%recall?` shows one magic's options)."""
        return MagicsHelp()

    @line_magic("slm")
    def slm_alias(self, line: str) -> MagicsHelp:
        """%slm: the same as %slm_help."""
        return self.slm_help(line)

    @line_magic
    def slm_feedback(self, line: str) -> FeedbackRecorded:
        """%slm_feedback ID up|down: tell the ranking a memory was useful or not."""
        parts = line.split()
        signal = parts[1].lower() if len(parts) == 2 else ""
        if signal not in ("up", "down"):
            raise UsageError("usage: %slm_feedback ID up|down")
        with self._engine() as mem:
            fact_id = mem.resolve_id(parts[0])
            mem.feedback(fact_id, signal, session_id=self.session_id)
        return FeedbackRecorded(fact_id=fact_id, signal=signal)

    @readable_help
    @magic_arguments()
    @argument("path", nargs="?", default="", help="a .jsonl or .parquet file")
    @line_magic
    def slm_export(self, line: str) -> ExportReport:
        """Write your memories and session summaries to PATH, every field of each memory kept."""
        args = parse_argstring(self.slm_export, line)
        if not args.path:
            raise UsageError("usage: %slm_export PATH.jsonl|PATH.parquet")
        with self._engine() as mem:
            return mem.export(args.path)

    @readable_help
    @magic_arguments()
    @argument("path", nargs="?", default="", help="a file written by %%slm_export")
    @argument("--skip-invalid", action="store_true", help="import the valid rows and list the others")
    @line_magic
    def slm_import(self, line: str) -> ImportReport:
        """Add the memories of an exported file (ones already here are skipped); a file with an
        invalid row adds nothing unless --skip-invalid."""
        args = parse_argstring(self.slm_import, line)
        if not args.path:
            raise UsageError("usage: %slm_import PATH.jsonl|PATH.parquet [--skip-invalid]")
        with self._engine() as mem:
            return mem.import_file(args.path, on_invalid="skip" if args.skip_invalid else "raise")


class MagicsHelp:
    """What `%slm_help` returns: every magic of the extension, one line each."""

    ROWS = (
        ("%slm_start [PATH] [--query Q]", "open (or continue) this notebook's session and show what matters"),
        ("%%remember [--tags a,b] [--type T]", "keep the cell's text, with its notebook and cell"),
        ("%recall QUERY", "the memories that answer QUERY, best first (no query: a search box)"),
        ("%slm_list [--project P] [--page N]", "every memory, newest first, a page at a time"),
        ("%slm_close [--summary S]", "close the session into searchable summaries"),
        ("%slm_status", "the file, the user, the session, counts, the learning phase"),
        ("%slm_pin ID, %slm_unpin ID", "keep a memory in every session's context, or stop"),
        ("%slm_forget ID|--project P|--all", "delete for good (--project and --all ask for --yes)"),
        ("%slm_feedback ID up|down", "tell the ranking whether a memory helped"),
        ("%slm_export PATH, %slm_import PATH", ".jsonl or .parquet, every field of each memory kept"),
        ("%config SLMMagic.db_path = 'PATH'", "which memory file (default: $SLM_MAGIC_DB, else "
                                              "~/.slm_magic/memory.duckdb); %slm_status shows the one in use"),
        ("%slm_help, %slm", "this list; %NAME? shows one magic's options"),
    )

    def __str__(self) -> str:
        width = terminal_width()
        lines = ["slm_magic magics:"]
        for name, what in self.ROWS:
            lines += [name] + wrap(what, width, 4)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td style='text-align:left'><code>{html.escape(n)}</code></td>"
                       f"<td style='text-align:left'>{html.escape(w)}</td></tr>" for n, w in self.ROWS)
        return f"<div>slm_magic magics:</div><table style='font-size:12px'>{rows}</table>"


def load_ipython_extension(ipython) -> None:
    magics = SLMMagic(shell=ipython)
    ipython.register_magics(magics)
    questions.install(ipython)
    if magics.in_kernel:  # results show as widgets; a terminal keeps the text tables
        shown = ipython.display_formatter.ipython_display_formatter
        shown.for_type(RecallResult, magics.show_recall)
        shown.for_type(SessionInit, magics.show_session)


def unload_ipython_extension(ipython) -> None:
    magics = ipython.magics_manager.registry.get("SLMMagic")
    shown = ipython.display_formatter.ipython_display_formatter
    for kind in (RecallResult, SessionInit):
        shown.type_printers.pop(kind, None)
    questions.uninstall(ipython)
    if magics is not None:
        magics.close()
        magics.unhook()
