"""A notebook's ``%%torchrun`` cells, and the kernel-side code that gives their ``--vars`` a value.

``labkit export`` reads the notebook, it does not run it: ``Bindings`` follows every top-level
statement of the kernel's code cells by what it does to each name, so that a ``--vars`` name gets
exactly the statements that set it, or a clear error when its value cannot be known without a run.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import re
from dataclasses import dataclass
from typing import Any

from labkit.i18n import t
from labkit.wire.errors import OptionError

MAGIC = "%%torchrun"


@dataclass
class TorchrunCell:
    index: int  # position in the notebook's list of cells, from 0
    line: str  # the options after %%torchrun
    code: str  # the cell body: what each rank executes
    opts: argparse.Namespace  # the options, parsed exactly as the magic parses them
    problem: OptionError | None = None  # a $name on the line the export cannot read: raised if the cell is chosen


# -- reading the notebook -------------------------------------------------------


def read_cells(path: str) -> list[dict[str, Any]]:
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError) as exc:
        raise OptionError(t("export.read", path=path, error=exc)) from None
    return [dict(cell) for cell in nb.cells]


def split_magic(source: str) -> tuple[str, str] | None:
    """(options, body) of a ``%%torchrun`` cell, else None."""
    lines = source.lstrip("\n").split("\n")
    first = lines[0].rstrip()
    if first != MAGIC and not first.startswith(MAGIC + " "):
        return None
    return first[len(MAGIC) :].strip(), "\n".join(lines[1:])


def torchrun_cells(cells: list[dict[str, Any]]) -> list[TorchrunCell]:
    from labkit.launch.magic import parse_line

    bindings = Bindings(cells)
    found = []
    for i, cell in enumerate(cells):
        parts = split_magic(cell["source"]) if cell["cell_type"] == "code" else None
        if parts is not None:
            line, problem = parts[0], None
            try:
                line = expand_line(line, i, bindings)
            except OptionError as exc:
                problem = exc
            opts = parse_line(line)
            if opts is not None:  # `%%torchrun --help` runs nothing in the notebook: nothing to export
                found.append(TorchrunCell(i, line, parts[1], opts, problem))
    return found


LINE_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}|\{(\w+)\}")


def expand_line(line: str, index: int, bindings: Bindings) -> str:
    """``-n $nproc``: the value the notebook gives the name, as IPython expands it in the kernel.

    Only plain values are read (``nproc = 4`` in the parameters cell, or papermill's injected
    cell): the export reads the notebook, it does not run it.
    """

    def value(match: re.Match) -> str:
        name = next(g for g in match.groups() if g)
        positions = bindings.needed(name, (index, -1), index)
        stmts = [bindings.stmts[p] for p in sorted(positions)]
        last = stmts[-1] if stmts else None
        if len(stmts) == 1 and isinstance(last, ast.Assign) and isinstance(last.targets[0], ast.Name):
            try:
                return str(ast.literal_eval(last.value))
            except ValueError:
                pass
        raise OptionError(t("export.line_var", index=index, name=name))

    return LINE_VAR.sub(value, line)


# -- resolving --vars from the notebook's own code ---------------------------------

Position = tuple[int, int]  # (cell index, statement index in that cell)


class Bindings:
    """Every top-level statement of the kernel-side code cells, by what it does to each name.

    The export reads the notebook, it does not run it: a value is known when a plain
    statement gives it (``x = ...``, ``import x``, ``def x``), possibly followed by plain
    changes (``x += 1``, ``x.y = ...``, ``x.append(...)``). A name set inside a ``for`` or
    ``if`` cannot be known, and the export says so instead of guessing.
    """

    def __init__(self, cells: list[dict[str, Any]]) -> None:
        self.sources: dict[int, str] = {}
        self.stmts: dict[Position, ast.stmt] = {}
        self.events: dict[str, list[tuple[Position, str]]] = {}  # name -> [(pos, "bind"|"change"|"opaque")]
        self.tags: dict[int, list[str]] = {}
        for i, cell in enumerate(cells):
            source = cell["source"]
            if cell["cell_type"] != "code" or source.lstrip().startswith("%%"):
                continue  # markdown, and cell magics: %%torchrun bodies run on the ranks, not in the kernel
            # line magics and shell escapes (%pip, !ls) are not Python; keep the line numbers
            source = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.split("\n"))
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            self.sources[i] = source
            self.tags[i] = list(cell.get("metadata", {}).get("tags", []))
            for j, stmt in enumerate(tree.body):
                self.stmts[(i, j)] = stmt
                for name, kind in effects(stmt):
                    self.events.setdefault(name, []).append(((i, j), kind))

    def needed(
        self, name: str, before: Position, cell_index: int, via: tuple[str, Position] | None = None
    ) -> set[Position]:
        """The statements that give ``name`` its value at ``before``, with what they depend on.

        ``via``: the --vars name and the statement that needs ``name``, for the error message.
        """
        events = [(pos, kind) for pos, kind in self.events.get(name, []) if pos < before]
        binds = [k for k, (_, kind) in enumerate(events) if kind == "bind"]
        chosen = events[binds[-1] :] if binds else events
        opaque = [pos for pos, kind in chosen if kind == "opaque"]
        if opaque:  # set (or changed) inside a block: after the last plain assignment, or with none at all
            self.unknowable(name, opaque[0] if binds else opaque[-1], cell_index, via)
        if not binds:
            if via is None:
                raise OptionError(t("export.var_missing", index=cell_index, name=name))
            var, pos = via
            raise OptionError(
                t("export.dep_missing", index=cell_index, var=var, dep=name, where=pos[0], code=self.first_line(pos))
            )
        out = {pos for pos, _ in chosen}
        for pos in list(out):
            stmt = self.stmts[pos]
            # a function's body runs when it is called, with the names as they are then
            at = (cell_index, -1) if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else pos
            for dep in free_names(stmt) - {name}:
                out |= self.needed(dep, at, cell_index, via or (name, pos))
        return out

    def unknowable(self, name: str, pos: Position, cell_index: int, via: tuple[str, Position] | None) -> None:
        """Raise: ``name`` gets its value inside a block (``for``, ``with``, ``if`` ...) at ``pos``."""
        code = self.first_line(pos)
        if via is None:
            raise OptionError(t("export.var_opaque", index=cell_index, name=name, where=pos[0], code=code))
        raise OptionError(t("export.dep_opaque", index=cell_index, var=via[0], dep=name, where=pos[0], code=code))

    def first_line(self, pos: Position) -> str:
        return (ast.get_source_segment(self.sources[pos[0]], self.stmts[pos]) or "").split("\n")[0]

    def source(self, pos: Position) -> str:
        stmt, lines = self.stmts[pos], self.sources[pos[0]].split("\n")
        first = min([d.lineno for d in getattr(stmt, "decorator_list", [])] + [stmt.lineno])
        if first < stmt.lineno or stmt.end_lineno != stmt.lineno:
            return "\n".join(lines[first - 1 : stmt.end_lineno])
        return ast.get_source_segment(self.sources[pos[0]], stmt) or lines[first - 1]


def root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def effects(stmt: ast.stmt) -> list[tuple[str, str]]:
    """What a top-level statement does to names: ("x", "bind" | "change" | "opaque")."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [((a.asname or a.name).split(".")[0], "bind") for a in stmt.names if a.name != "*"]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(stmt.name, "bind")]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
            return []
        out = []
        for target in targets:
            for node in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                if isinstance(node, ast.Name):
                    out.append((node.id, "bind"))
                elif isinstance(node, ast.Starred) and isinstance(node.value, ast.Name):
                    out.append((node.value.id, "bind"))
                elif (root := root_name(node)) is not None:  # x.y = ..., x[k] = ...
                    out.append((root, "change"))
        return out
    if isinstance(stmt, ast.AugAssign):
        root = root_name(stmt.target)
        return [(root, "change")] if root else []
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        root = root_name(stmt.value.func)  # x.append(...), x.update(...): may change x
        return [(root, "change")] if root else []
    # anything else that stores a name (for, with, if, try, del, :=) leaves its value unknown
    stored = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    return [(name, "opaque") for name in sorted(stored)]


def free_names(stmt: ast.stmt) -> set[str]:
    """Names a statement reads that it does not bind itself, builtins left out."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return set()
    loaded, bound = set(), set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not stmt:
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound - set(dir(builtins))
