"""The code's layout rules (issues 16 and 21), read from the source with ``ast``; only the torch and
facade checks import labkit's modules (in a subprocess).

- the packages import each other only along the layers of ``ALLOWED`` (docs/architecture.md draws them);
- no import cycle of any kind among labkit modules: function-level imports and imports under
  ``if TYPE_CHECKING:`` count (a cycle a type hint needs is still a cycle);
- nothing a rank runs (``labkit.ranks``, and all it imports) imports matplotlib, ipywidgets or IPython;
- ``import labkit.memory`` and ``import labkit.timing`` (each of their modules) import no torch;
- at most 10 modules directly in labkit/ besides the facades (``FACADES``), the rest in packages named by
  the side they run on; a facade (``labkit.timeline``, ...) re-exports names a notebook types from the
  packages it lists, and nothing in labkit imports one;
- a facade that spans layers is lazy: a rank's ``timeline.Recorder`` loads no plotting, the kernel's
  ``comm.theory_bytes`` no torch; the formulas' facades import no torch;
- no labkit module uses another module's ``_private`` name;
- no ``sys.path`` edits in tests/;
- a labkit file over 500 lines is a warning to look at it, not a failure.

    .venv/bin/python -m pytest tests/test_layout.py -q
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import warnings
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABKIT = ROOT / "labkit"
MAX_LINES = 500
MAX_TOP_MODULES = 10
LONG_FILES_ALLOWED = (LABKIT / "course" / "lessons",)  # a lesson's source is its notebook, read top to bottom

# The layers, lowest first. A package may import its own modules, the base, and the packages of the
# layers below it; the few edges inside a layer are listed. ``testing`` (test jobs, cluster fixtures)
# may import anything, and nothing of labkit imports it.
BASE = "base"  # labkit/__init__.py (the public names), i18n, fmt, log (the labkit logger), lazy (facades)
LAYERS: tuple[tuple[str, ...], ...] = (
    (BASE,),
    ("wire",),  # the kernel<->rank contract: both sides import it, it imports neither
    ("models", "memory", "timing", "ranks"),  # formulas and the rank side; no views, no launch
    ("views",),  # what the notebook shows: takes a RunRecord, never a launch.Run
    ("launch",),  # the kernel side of a run: starts ranks, fills a Run, shows it
    ("export", "course", "grading", "regress", "cli", "__main__", "hub", "classroom"),  # what is built on runs
)
# hub: the class JupyterHub's side (launch/hub.sh); it runs in the hub's process, as root, and never in a
# kernel or a rank: it sits with launch's consumers, and only reads the base (messages) and wire (env)
WITHIN_LAYER = {
    "memory": {"models"},  # the formulas read the models' configs
    "ranks": {"models", "timing"},  # FSDP units are labkit's blocks; a recorded span's interval arithmetic
    "course": {"grading"},  # the lessons' questions register with the grader
    "classroom": {"grading"},  # a class around the grader: its cache wraps grade_all, feedback rewrites its reports
    "grading": {"classroom"},  # labkit grade's class options (filters, cache), progress()'s released grades
    "export": {"classroom"},  # labkit export --moodle/--canvas/--csv
    "hub": {"classroom"},  # the hub starts the exchange service (python -m labkit.classroom.service)
    "cli": {"export", "course", "grading", "regress", "classroom"},
    "__main__": {"cli"},  # python -m labkit: the labkit command
    "regress": {
        "grading"
    },  # a sweep executes notebooks the way the grader does (grading.runner.execute)  # the labkit command: each package's subcommand
}
EVERYWHERE = {"testing"}
# The notebook's short names (labkit/<name>.py): each re-exports from the packages listed, and sits above
# every layer (nothing in labkit imports it). Those over several layers import each name on first use.
FACADES: dict[str, set[str]] = {
    "rank": {"ranks"},
    "memtrack": {"ranks"},
    "comm": {"ranks", "timing"},  # counted in a rank, theory in the kernel
    "timeline": {"ranks", "timing", "views"},  # recorded in a rank, cut and drawn in the kernel
    "simulate": {"timing"},
    "memory_model": {"memory"},
    "estimate": {"memory"},
    "memory_view": {"views"},
    "units": set(),  # labkit.fmt, the base
}
# Module edges that the package table does not allow, each with its reason.
MODULE_EXCEPTIONS = {
    ("labkit", "labkit.launch.magic"): "IPython calls labkit.load_ipython_extension for %load_ext labkit",
    ("labkit", "labkit.regress.record"): "%load_ext labkit also subscribes the run record to every finished run",
    ("labkit", "labkit.grading.selfstudy"): "%load_ext labkit also notes the checks this kernel shows, "
    "for labkit.solution (a try counts before the notebook is saved)",
    ("labkit.memory.faketrace", "labkit.ranks.memtrack"): "estimate's subprocess runs the in-rank tracker on a "
    "fake FSDP step (inside its function: import labkit.memory never imports it)",
}
RANK_SIDE = "labkit.ranks"
NOT_IN_A_RANK = ("matplotlib", "ipywidgets", "IPython")
NO_TORCH = ("labkit.memory", "labkit.timing", "labkit.simulate", "labkit.memory_model", "labkit.estimate")


def package(module: str) -> str:
    """``labkit.launch.group`` -> ``launch``; labkit itself, ``labkit.i18n``, ``labkit.fmt``, ``labkit.log`` and
    ``labkit.messages``, ``labkit.lazy`` -> base."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("i18n", "fmt", "log", "messages", "lazy"):
        return BASE
    return parts[1]


def allowed(pkg: str) -> set[str]:
    """The packages ``pkg`` may import."""
    if pkg in EVERYWHERE:
        return {p for layer in LAYERS for p in layer} | EVERYWHERE
    if pkg in FACADES:
        return {BASE, pkg} | FACADES[pkg]
    level = next(i for i, layer in enumerate(LAYERS) if pkg in layer)
    return {p for layer in LAYERS[:level] for p in layer} | {pkg} | WITHIN_LAYER.get(pkg, set())


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


# Modules whose tables of module names are lookups, not dependencies. i18n: which module registers each
# message prefix, imported the first time one of its keys is used; i18n works with none of them
# imported and every one of them imports i18n. labkit (the package): the public names (_LAZY,
# QUESTION_SOURCES), each module loaded on first use. (A plugin loader such as
# grading.registry's is a real dependency: the grader cannot grade without the questions it imports.)
# wire.env: the modules that read each variable, as documentation. Their ``import`` statements still count.
LOOKUP_TABLES = {"labkit.i18n", "labkit", "labkit.wire.env"}


@cache
def imports() -> dict[str, dict[str, int]]:
    """module -> {labkit module it imports: first line}. Function-level imports count (a cycle through a
    lazy import is still a cycle), so do imports under ``if TYPE_CHECKING:``, and so does a module's
    name given to ``importlib`` as a string; a module importing its own parent package does not
    (Python imports the package first anyway)."""
    mods = modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        module = tree(path)
        edges = graph.setdefault(name, {})
        for node in ast.walk(module):
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


@cache
def external_imports() -> dict[str, dict[str, int]]:
    """module -> {top-level name of each non-labkit module it imports: first line}, function-level too."""
    out: dict[str, dict[str, int]] = {}
    for name, path in modules().items():
        found = out.setdefault(name, {})
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top != "labkit":
                    found.setdefault(top, node.lineno)
    return out


def reached(start: str) -> dict[str, list[str]]:
    """Every labkit module ``start`` imports, directly or not, with the chain that gets there."""
    graph, paths, todo = imports(), {start: [start]}, [start]
    while todo:
        here = todo.pop()
        for nxt in sorted(graph.get(here, {})):
            if nxt not in paths:
                paths[nxt] = paths[here] + [nxt]
                todo.append(nxt)
    return paths


def layer_violations() -> list[str]:
    out = []
    for a, targets in sorted(imports().items()):
        for b, line in sorted(targets.items()):
            pa, pb = package(a), package(b)
            if pb not in allowed(pa) and (a, b) not in MODULE_EXCEPTIONS:
                out.append(f"{a}:{line} imports {b} ({pa} -> {pb})")
    return out


def rank_side_plotting() -> list[str]:
    """A plotting or notebook import anywhere a rank-side module reaches (function-level imports count)."""
    out = []
    for start in sorted(m for m in modules() if m == RANK_SIDE or m.startswith(RANK_SIDE + ".")):
        for mod, chain in sorted(reached(start).items()):
            for top, line in sorted(external_imports()[mod].items()):
                if top in NOT_IN_A_RANK:
                    out.append(f"{' -> '.join(chain)}:{line} imports {top}")
    return sorted(set(out))


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


def top_level_modules() -> list[str]:
    """The modules directly in labkit/, the facades left out."""
    return sorted(p.name for p in LABKIT.glob("*.py") if p.stem not in FACADES)


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
    assert "labkit.views.gantt" in reached("labkit.launch.run")  # a function-level import counts
    assert "matplotlib" in external_imports()["labkit.views.gantt"]  # so does a function-level plotting import
    assert "torch" in external_imports()["labkit.ranks.memtrack"]
    assert all(package(m) in allowed(package(m)) for m in modules())
    assert "wire" not in allowed(BASE) and "launch" not in allowed("views") and "views" in allowed("launch")
    assert "labkit.views.gantt" in imports()["labkit.timeline"]  # a facade's table of homes counts


def test_packages_import_along_the_layers():
    bad = layer_violations()
    assert not bad, (
        "imports against the layers (tests/test_layout.py ALLOWED; move the code, or the shared\n"
        "definition down to labkit.wire):\n" + "\n".join(bad)
    )


def test_module_exceptions_are_still_needed():
    graph = imports()
    stale = [f"{a} -> {b}" for a, b in MODULE_EXCEPTIONS if b not in graph.get(a, {})]
    assert not stale, f"MODULE_EXCEPTIONS lists edges the code no longer has: {stale}"


def test_nothing_a_rank_runs_imports_plotting_or_the_notebook():
    bad = rank_side_plotting()
    assert not bad, "rank-side code reaches a notebook-only module:\n" + "\n".join(bad)


def test_memory_and_timing_import_no_torch():
    # a fresh interpreter: import every module of the two packages, then look for torch
    names = sorted(m for m in modules() if any(m == p or m.startswith(p + ".") for p in NO_TORCH))
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "    if 'torch' in sys.modules:\n"
        "        print(json.dumps(name)); break\n"
        "else:\n"
        "    print(json.dumps(None))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    culprit = json.loads(done.stdout.strip().splitlines()[-1])
    assert culprit is None, f"importing {culprit} imports torch (import it inside the function that needs it)"
    assert len(names) > 8, names


def test_the_facades_are_the_ones_labkit_names():
    import labkit

    assert set(labkit.FACADES) == set(FACADES), "labkit.FACADES and this file's FACADES differ"
    assert all((LABKIT / f"{name}.py").is_file() for name in FACADES)
    users = [f"{a} imports {b}" for a, targets in imports().items() for b in targets if package(b) in FACADES]
    assert not users, "a facade is for notebooks; import the module it re-exports from:\n" + "\n".join(users)


def test_a_facade_over_several_layers_loads_only_what_is_used():
    # a fresh interpreter per side: what a rank's names load, then what the kernel's names load
    def loaded(code: str) -> set[str]:
        probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return set(json.loads(done.stdout.strip().splitlines()[-1]))

    rank_side = loaded("from labkit import comm, timeline\ntimeline.Recorder, timeline.cut, comm.count")
    assert "labkit.ranks.timeline" in rank_side and not {"labkit.views.gantt", "matplotlib"} & rank_side
    kernel = loaded("from labkit import comm, timeline\ncomm.theory_bytes, timeline.summary, timeline.to_chrome_trace")
    assert "labkit.timing.theory" in kernel and not {"torch", "labkit.ranks.comm", "labkit.ranks.timeline"} & kernel
    assert "labkit.rank" not in loaded("import labkit"), "import labkit loads no facade"


def test_few_modules_directly_in_labkit():
    top = top_level_modules()
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules directly in labkit/ (at most {MAX_TOP_MODULES}): {top}"


def test_long_files_are_a_warning_not_a_failure():
    long = long_files()
    if long:  # a module that grew long may still be one idea: look, do not split it into siblings by reflex
        warnings.warn(f"labkit files over {MAX_LINES} lines, worth a look: " + "; ".join(long), stacklevel=1)


def test_no_module_uses_another_modules_private_names():
    uses = private_uses()
    assert not uses, "make these public (or move the code to its owner):\n" + "\n".join(uses)


def test_no_import_cycles():
    edges = cycle_edges()
    assert not edges, "import cycles (edges inside each cycle):\n" + "\n".join(edges)


def test_tests_do_not_edit_sys_path():
    assert not sys_path_edits(), "import from labkit.testing instead: " + "; ".join(sys_path_edits())
