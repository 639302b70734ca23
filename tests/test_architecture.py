"""The package's shape, checked from its source: no import circles (imports inside functions
count), views that know nothing of storage, and SQL run only by the store layer."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"slm_magic": ROOT / "slm_magic", "slm_magic.widgets": ROOT / "widgets"}
STORE_LAYER = {"slm_magic.store", "slm_magic.session_store", "slm_magic.signal_store", "slm_magic.attachments",
               "slm_magic.pg_store", "slm_magic.pg_schema", "slm_magic.backends"}
VIEWS = {"slm_magic.display", "slm_magic.widgets"} | {
    f"slm_magic.widgets.{p.stem}" for p in (ROOT / "widgets").glob("*.py") if p.stem != "__init__"}
FRONT_ENDS = {"slm_magic.magics", "slm_magic.cli", "slm_magic.mcp_tools", "slm_magic.mcp_server", "slm_magic.demo"}
SQL_CALLS = {"execute", "executemany", "fetchall", "fetchone", "fetchdf", "fetch_arrow_table", "sql", "cursor"}


def modules() -> dict[str, ast.Module]:
    out = {}
    for package, folder in PACKAGES.items():
        for path in folder.glob("*.py"):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            out[name] = ast.parse(path.read_text(), filename=str(path))
    return out


def imports_of(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """Every module of ours `name` imports, wherever the import statement stands."""
    package = name if name in PACKAGES else name.rsplit(".", 1)[0]
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
