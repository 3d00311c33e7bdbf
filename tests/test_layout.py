"""The code's layout rules (issue 16's "done when"), read from the source with ``ast``; nothing is imported or run.

- no labkit file over 500 lines (the lessons' sources aside);
- no labkit module uses another module's ``_private`` name;
- no import cycles between labkit modules (imports under ``if TYPE_CHECKING:`` aside);
- no ``sys.path`` edits in tests/.

    .venv/bin/python -m pytest tests/test_layout.py -q
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABKIT = ROOT / "labkit"
MAX_LINES = 500
LONG_FILES_ALLOWED = (LABKIT / "course" / "lessons",)  # a lesson's source is its notebook, read top to bottom


@cache
def modules() -> dict[str, Path]:
    """Every labkit module by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(LABKIT.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def type_checking_nodes(module: ast.Module) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:``: imports made for type hints only."""
    ids: set[int] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return ids


def absolute(name: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The module ``from ... import`` names, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    base = name.split(".") if is_package else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


# Modules whose module names are a lookup, not a dependency: i18n.t imports a package's catalog
# (labkit/<package>/messages.py, data that imports nothing) the first time one of its keys is used, and
# names the top-level one, labkit.messages. i18n's own code uses nothing from the catalogs. (A plugin
# loader such as grading.registry's COURSE_MODULES is a real dependency: the grader cannot grade without
# the questions it imports, so it counts.)
LOOKUP_TABLES = {"labkit.i18n"}


@cache
def imports() -> dict[str, dict[str, int]]:
    """module -> {labkit module it imports: first line}. Function-level imports count (a cycle through a
    lazy import is still a cycle), and so does a module's name given to ``importlib`` as a string;
    a module importing its own parent package does not (Python imports the package first anyway)."""
    mods = modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        module = tree(path)
        skip = type_checking_nodes(module)
        edges = graph.setdefault(name, {})
        for node in ast.walk(module):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = absolute(name, node, path.name == "__init__.py")
                subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [base, *subs]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in mods:
                if name in LOOKUP_TABLES:
                    continue
                targets = [node.value]  # importlib.import_module("labkit.x"), or a table of such names
            for target in targets:
                if target in mods and target != name and not name.startswith(target + "."):
                    edges.setdefault(target, getattr(node, "lineno", 0))
    return graph


def cycles() -> list[list[str]]:
    """The strongly connected groups of the import graph with more than one module (Tarjan)."""
    graph, index, low, stack, on_stack, found = imports(), {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def cycle_edges() -> list[str]:
    graph = imports()
    out = []
    for group in cycles():
        for a in group:
            out += [f"{a} -> {b} (line {line})" for b, line in sorted(graph[a].items()) if b in group]
    return out


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@cache
def private_definitions() -> dict[str, set[str]]:
    """module -> the private names it defines: its functions, classes, globals, and the methods and
    attributes (``self._x = ...``) of its classes."""
    out: dict[str, set[str]] = {}
    for name, path in modules().items():
        names = out.setdefault(name, set())
        for node in ast.walk(tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                names.add(node.attr)
        out[name] = {n for n in names if is_private(n)}
    return out


def private_uses() -> list[str]:
    """``from labkit.x import _y``, ``x._y`` on an imported labkit module, and ``obj._y`` where ``_y`` is
    defined by another labkit module and not by this one (a method of another module's class)."""
    mods, defined = modules(), private_definitions()
    definers: dict[str, list[str]] = {}  # private name -> the modules that define it
    for module_name, names in sorted(defined.items()):
        for n in names:
            definers.setdefault(n, []).append(module_name)
    found = []
    for name, path in mods.items():
        module = tree(path)
        own = defined[name]
        aliases: dict[str, str] = {}  # local name -> the labkit module it is bound to
        for node in ast.walk(module):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in mods and alias.asname:
                        aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                base = absolute(name, node, path.name == "__init__.py")
                for alias in node.names:
                    if f"{base}.{alias.name}" in mods:
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif base in mods and base != name and is_private(alias.name):
                        found.append(f"{name}:{node.lineno} imports {base}.{alias.name}")
        for node in ast.walk(module):
            if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
                continue
            target = ast.unparse(node.value)
            owner = aliases.get(target) or (target if target in mods else None)
            if owner is not None and owner != name:
                found.append(f"{name}:{node.lineno} uses {owner}.{node.attr}")
            elif owner is None and target not in ("self", "cls") and node.attr not in own and node.attr in definers:
                found.append(f"{name}:{node.lineno} uses {target}.{node.attr} ({', '.join(definers[node.attr])})")
    return sorted(set(found))


def long_files() -> list[str]:
    out = []
    for path in sorted(LABKIT.rglob("*.py")):
        if any(path.is_relative_to(folder) for folder in LONG_FILES_ALLOWED):
            continue
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            out.append(f"{path.relative_to(ROOT)} ({n} lines)")
    return out


def sys_path_edits() -> list[str]:
    out = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Attribute) and ast.unparse(node).startswith("sys.path."):
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
            elif isinstance(node, (ast.Assign, ast.AugAssign)) and "sys.path" in ast.unparse(node).split("=")[0]:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    return out


def test_the_checks_see_the_code():
    # the rules below pass on an empty world too: make sure they read the real one
    graph = imports()
    assert "labkit.launch.cold" in graph and "labkit.launch.options" in graph["labkit.launch.cold"]
    assert "labkit.i18n" in private_definitions() and "_CATALOG" in private_definitions()["labkit.i18n"]


def test_no_labkit_file_is_over_500_lines():
    assert not long_files(), "split these by role: " + "; ".join(long_files())


def test_no_module_uses_another_modules_private_names():
    uses = private_uses()
    assert not uses, "make these public (or move the code to its owner):\n" + "\n".join(uses)


def test_no_import_cycles():
    edges = cycle_edges()
    assert not edges, "import cycles (edges inside each cycle):\n" + "\n".join(edges)


def test_tests_do_not_edit_sys_path():
    assert not sys_path_edits(), "import from labkit.testing instead: " + "; ".join(sys_path_edits())
