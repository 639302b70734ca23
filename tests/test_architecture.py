"""The package's shape, checked from its source: no import circles (imports inside functions
count), views that know nothing of storage, SQL run only by the store layer, no part touching
another's private members and no function over 60 lines (the last two with the cases still to
mend listed: a ratchet, which fails when a new one appears and when a listed one is gone).
Every module counts, in subpackages too."""

from __future__ import annotations

import ast
import functools
import re
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"slm_magic": ROOT / "slm_magic", "slm_magic.widgets": ROOT / "widgets"}
VIEWS = {"slm_magic.results.display", "slm_magic.widgets"} | {
    f"slm_magic.widgets.{p.stem}" for p in (ROOT / "widgets").glob("*.py") if p.stem != "__init__"}
FRONT_ENDS = {"slm_magic.magics", "slm_magic.cli", "slm_magic.mcp_tools", "slm_magic.mcp_server", "slm_magic.demo"}
SQL_CALLS = {"execute", "executemany", "fetchall", "fetchone", "fetchdf", "fetch_arrow_table", "sql", "cursor"}


@functools.cache
def module_paths() -> dict[str, Path]:
    """Every module of the package and the widgets, subpackages included, by dotted name."""
    out = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts))
            out[name.removesuffix(".__init__")] = path
    return out


# The store layer: every module of `slm_magic/storage/` (the file, the server, their SQL).
STORE_LAYER = {name for name in module_paths() if name.startswith("slm_magic.storage")}


@functools.cache
def modules() -> dict[str, ast.Module]:
    """Each module's syntax tree, parsed once for every test (read, never changed)."""
    return {name: ast.parse(path.read_text(), filename=str(path)) for name, path in module_paths().items()}


@functools.cache
def packages() -> frozenset[str]:
    return frozenset(name for name, path in module_paths().items() if path.stem == "__init__")


def imports_of(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """Every module of ours `name` imports, wherever the import statement stands."""
    package = name if name in packages() else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)  # `from . import text`
    # a module's own packages are imported before it runs: not an edge of its making
    ancestors = {name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in known and m != name and m not in ancestors}


def graph() -> dict[str, set[str]]:
    trees = modules()
    return {name: imports_of(name, tree, set(trees)) for name, tree in trees.items()}


def test_no_import_circle():
    g = graph()
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(g[node]):
            if state.get(nxt) == 1:
                circles.append(path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for name in sorted(g):
        if name not in state:
            visit(name, [name])
    assert "slm_magic.memory" in g and g["slm_magic.memory"], "the graph was not read"
    assert len(g) >= 40, f"only {len(g)} modules were read"
    assert not circles, f"import circles: {circles}"


def test_views_and_front_ends_import_nothing_of_storage():
    g = graph()
    for name in VIEWS | FRONT_ENDS:
        assert name in g, name
        assert not g[name] & STORE_LAYER, f"{name} imports {sorted(g[name] & STORE_LAYER)}"
    for name in VIEWS:  # views may hold the engine's facade (to ask it), nothing underneath
        reach, todo = set(), [name]
        while todo:
            for nxt in g[todo.pop()] - reach - {"slm_magic.memory"}:
                reach.add(nxt)
                todo.append(nxt)
        assert not reach & STORE_LAYER, f"{name} reaches {sorted(reach & STORE_LAYER)}"


def test_only_the_store_layer_runs_sql():
    offenders = []
    for name, tree in modules().items():
        if name in STORE_LAYER:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                if any((n or "").split(".")[0] == "duckdb" for n in names):
                    offenders.append(f"{name}:{node.lineno} imports duckdb")
            elif isinstance(node, ast.Attribute):
                if node.attr == "con" or node.attr in SQL_CALLS:
                    offenders.append(f"{name}:{node.lineno} .{node.attr}")
    assert not offenders, offenders


# Names of Python's and IPython's own protocols, private by spelling only.
PROTOCOL_NAMES = {"_replace", "_asdict", "_fields", "_make", "_exit", "_repr_html_", "_repr_mimebundle_",
                  "_ipython_display_", "_repr_pretty_"}
# Parts that reach into another's private members: none any more (issue 27 mended the last);
# the ratchet stays, so that a new one fails.
PRIVATE_REACHES: set[str] = set()
# Functions over 60 lines: none any more (the same ratchet).
LONG_FUNCTIONS: set[str] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PROTOCOL_NAMES


def private_reaches(name: str, tree: ast.Module) -> set[str]:
    """`obj._member` where obj is not self, cls or super() and the member is not the enclosing
    class's own; `from m import _name`."""
    found: set[str] = set()

    def walk(node: ast.AST, own: frozenset[str]) -> None:
        if isinstance(node, ast.ClassDef):
            own = own | {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))} | {
                t.attr for n in ast.walk(node) if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            v = node.value
            mine = isinstance(v, ast.Name) and v.id in ("self", "cls")
            parent = isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super"
            if not (mine or parent):
                found.add(f"{name}: {ast.unparse(node)}")
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("slm_magic"):
            found.update(f"{name}: from {node.module} import {a.name}" for a in node.names if _private(a.name))
        for child in ast.iter_child_nodes(node):
            walk(child, own)

    walk(tree, frozenset())
    return found


def test_no_part_touches_another_s_private_members():
    found = set().union(*(private_reaches(n, t) for n, t in modules().items() if not n.startswith("slm_magic.widgets")))
    assert not found - PRIVATE_REACHES, f"new reaches into private members: {sorted(found - PRIVATE_REACHES)}"
    assert not PRIVATE_REACHES - found, f"mended, take off the list: {sorted(PRIVATE_REACHES - found)}"


def test_no_function_over_60_lines():
    long = set()
    for name, tree in modules().items():
        if name.startswith("slm_magic.widgets"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.add(f"{name}.{node.name}")
    assert not long - LONG_FUNCTIONS, f"new functions over 60 lines: {sorted(long - LONG_FUNCTIONS)}"
    assert not LONG_FUNCTIONS - long, f"now under 60 lines, take off the list: {sorted(LONG_FUNCTIONS - long)}"


SCORING = "slm_magic.core.scoring"
# The shapes of BM25's formulas (its term weight, its length norm, its idf): written only in
# the scoring module, whose functions every path calls (the index, the SQL fallback, PostgreSQL).
BM25_SHAPES = (re.compile(r"k1\s*\+\s*1\b"), re.compile(r"1\s*-\s*[\w.]*\bb\s*\+\s*[\w.]*\bb\s*\*"),
               re.compile(r"log1?p?\(\s*1?\.?0?\s*\+?\s*\(\s*n\s*-\s*"))


def test_every_score_is_defined_in_the_scoring_module():
    """BM25's formulas, the age gate's and the match strengths' thresholds appear nowhere else
    (in code or in the SQL a module holds), and every face names the same retrieval modes."""
    from slm_magic.core import scoring
    from slm_magic.results import display, models

    gates = {scoring.AGE_GATE_RELEVANCE, scoring.WEAK_RELEVANCE}
    found = []
    for name, tree in modules().items():
        if name == SCORING:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, float) and node.value in gates:
                found.append(f"{name}:{node.lineno}: {node.value}")
        code = "\n".join(line.split("#")[0] for line in module_paths()[name].read_text().splitlines())
        found += [f"{name}: {shape.pattern}" for shape in BM25_SHAPES if shape.search(code)]
    assert not found, f"scores written outside {SCORING}: {found}"
    assert set(display.MODE_WORDS) == set(scoring.RETRIEVAL_MODES)
    assert set(typing.get_args(models.RetrievalMode)) == set(scoring.RETRIEVAL_MODES)
    assert {scoring.retrieval_mode(sql=s, tfidf=t, meaning=m) for s in (0, 1) for t in (0, 1) for m in (0, 1)} == set(
        scoring.RETRIEVAL_MODES)


# The layers, bottom up: a module imports only from its own layer or below (no arrow runs back
# up). Faces are what people run; the widgets are views over the facade.
LAYERS = {"slm_magic.errors": 0, "slm_magic.magic_questions": 0, "slm_magic.notebook_path": 0, "slm_magic.core": 1,
          "slm_magic.results": 2, "slm_magic.storage": 2, "slm_magic.index": 3, "slm_magic.ranking": 4, "slm_magic.engine": 5,
          "slm_magic.sessions": 6, "slm_magic.memory": 7, "slm_magic.widgets": 8, "slm_magic.lab": 9,
          "slm_magic.magics": 9, "slm_magic.cli": 10, "slm_magic.mcp_tools": 9, "slm_magic.mcp_server": 9,
          "slm_magic.demo": 9, "slm_magic": 9}


def layer(name: str) -> int:
    """The layer of a module: its own entry, else its package's."""
    while name not in LAYERS:
        assert "." in name, f"{name} is in no layer: add it to LAYERS"
        name = name.rsplit(".", 1)[0]
    return LAYERS[name]


def test_no_import_runs_back_up_a_layer():
    g = graph()
    up = sorted(f"{a} -> {b}" for a, deps in g.items() for b in deps if layer(b) > layer(a))
    assert not up, f"imports running back up: {up}"


# A store may run its caller's read again after a lost connection (`Store.consistent`): the one
# place a lower layer runs code of a higher one, handed to it as an argument.
UNITS_OF_WORK = {("slm_magic.storage.store", "consistent"), ("slm_magic.storage.pg_store", "in_snapshot"),
                 ("slm_magic.storage.pg_store", "in_arrow_snapshot")}


def test_no_call_runs_back_up_a_layer_in_a_notebook_session(ip):
    """What the imports cannot show: a part handed a bound method of a higher layer (the facade's
    clock, say) calls back up. A real notebook session, traced call by call."""
    import sys
    import threading

    module_of = {str(path): name for name, path in module_paths().items()}  # (a code object's file -> module)
    up: dict[tuple[str, str], set[str]] = {}

    def trace(frame, event, _arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = module_of.get(frame.f_code.co_filename), module_of.get(frame.f_back.f_code.co_filename)
        if callee and caller and callee != caller and layer(callee) > layer(caller) \
                and (caller, frame.f_back.f_code.co_name) not in UNITS_OF_WORK:
            up.setdefault((caller, callee), set()).add(f"{frame.f_back.f_code.co_name} -> {frame.f_code.co_name}")

    sys.setprofile(trace)
    threading.setprofile(trace)
    try:
        ip.run_line_magic("slm_start", "")
        for i in range(12):
            ip.run_cell_magic("remember", f"--title 'join {i}' --tags churn",
                              f"the churn join on customer_id {i} doubled rows: deduplicate first")
        shown = ip.run_line_magic("recall", "why did the churn join double rows")
        fact_id = shown.memories[0].fact.fact_id
        ip.run_line_magic("slm_feedback", f"{fact_id} up")
        ip.run_line_magic("slm_pin", fact_id)
        ip.run_line_magic("recall", "customer deduplication --related")
        ip.run_line_magic("slm_status", "")
        ip.run_line_magic("slm_close", "--summary 'deduplicate before the churn join'")
        ip.run_line_magic("slm_start", "")
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert shown.memories, "the session recalled nothing: the trace followed no recall"
    assert not up, f"calls running back up a layer: {up}"
