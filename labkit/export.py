"""A lesson's ``%%torchrun`` cells as one standalone script for plain ``torchrun``.

    labkit export lesson.ipynb -o lesson.py            # every %%torchrun cell, in order
    labkit export lesson.ipynb --cell 7 -o step7.py    # one cell (index in the notebook)
    torchrun --nproc-per-node=2 lesson.py

The script runs each cell the way labkit ran it in the notebook: the cell's ``--vars``
taken from the notebook's own assignments (the ``parameters`` cell first of all), a
process group with a timeout unless the cell makes its own, destroyed at the cell's end.
``rank.report()`` keeps working: without a notebook its values are printed by rank 0 and,
with ``LABKIT_REPORT_DIR`` set, written there as JSON lines. Without labkit installed, a
small stand-in takes ``labkit.rank``'s place.

Random numbers are left alone: torch 2.13 seeds each process differently, so a cell that
does not seed gives other numbers at every run, in the notebook as in the script.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import inspect
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from labkit.errors import OptionError
from labkit.i18n import catalog, t

MAGIC = "%%torchrun"

catalog(
    {
        "export.help": {
            "en": "turn a lesson's %%torchrun cells into a script for plain torchrun",
            "ro": "transformă celulele %%torchrun ale unei lecții într-un script pentru torchrun simplu",
        },
        "export.help.notebook": {"en": "the notebook (.ipynb)", "ro": "notebook-ul (.ipynb)"},
        "export.help.cell": {
            "en": "index of a %%torchrun cell in the notebook, from 0 (repeatable; default: all of them)",
            "ro": "indexul unei celule %%torchrun în notebook, de la 0 (repetabil; implicit: toate)",
        },
        "export.help.output": {
            "en": "where to write the script (default: standard output)",
            "ro": "unde se scrie scriptul (implicit: ieșirea standard)",
        },
        "export.help.list": {
            "en": "list the %%torchrun cells and stop",
            "ro": "listează celulele %%torchrun și se oprește",
        },
        "export.read": {"en": "cannot read {path}: {error}", "ro": "nu pot citi {path}: {error}"},
        "export.no_cells": {"en": "{path} has no %%torchrun cell", "ro": "{path} nu are nicio celulă %%torchrun"},
        "export.not_torchrun": {
            "en": "cell {index} is not a %%torchrun cell; the %%torchrun cells are: {cells}",
            "ro": "celula {index} nu este o celulă %%torchrun; celulele %%torchrun sunt: {cells}",
        },
        "export.syntax": {
            "en": "cell {index} does not compile: {error} (cell line {line})",
            "ro": "celula {index} nu se compilează: {error} (linia {line} a celulei)",
        },
        "export.nproc_differ": {
            "en": "the cells ask for different numbers of ranks ({detail}), and one script runs in one world; "
            "export them separately with --cell",
            "ro": "celulele cer numere diferite de ranguri ({detail}), iar un script rulează într-o singură lume; "
            "exportați-le separat cu --cell",
        },
        "export.env_differ": {
            "en": "cells {a} and {b} set {name} to different values; export them separately with --cell",
            "ro": "celulele {a} și {b} dau lui {name} valori diferite; exportați-le separat cu --cell",
        },
        "export.var_missing": {
            "en": "cell {index} sends {name!r} with --vars, but no code cell before it assigns {name!r}; "
            "assign it in the parameters cell (e.g. {name} = ...)",
            "ro": "celula {index} trimite {name!r} cu --vars, dar nicio celulă de cod dinaintea ei nu îi dă o valoare "
            "lui {name!r}; atribuiți-o în celula parameters (de ex. {name} = ...)",
        },
        "export.var_opaque": {
            "en": "cell {index} sends {name!r} with --vars, but cell {where} changes it inside a block "
            "(`{code}`), so its value cannot be known without running the notebook; "
            "assign it with a plain `{name} = ...` in the parameters cell",
            "ro": "celula {index} trimite {name!r} cu --vars, dar celula {where} o modifică într-un bloc "
            "(`{code}`), deci valoarea ei nu se poate ști fără a rula notebook-ul; "
            "atribuiți-o simplu, `{name} = ...`, în celula parameters",
        },
        "export.dep_missing": {
            "en": "cell {index} sends {var!r} with --vars, which is computed from {dep!r} (cell {where}: `{code}`), "
            "but no code cell before it assigns {dep!r}",
            "ro": "celula {index} trimite {var!r} cu --vars, care se calculează din {dep!r} (celula {where}: `{code}`), "
            "dar nicio celulă de cod dinaintea ei nu îi dă o valoare lui {dep!r}",
        },
        "export.line_var": {
            "en": "cell {index} uses ${name} on its %%torchrun line, but the notebook does not give {name!r} "
            "a plain value the export can read; write e.g. `{name} = 2` in the parameters cell",
            "ro": "celula {index} folosește ${name} pe linia %%torchrun, dar notebook-ul nu îi dă lui {name!r} "
            "o valoare simplă pe care exportul s-o poată citi; scrieți de ex. `{name} = 2` în celula parameters",
        },
        "export.wrote": {
            "en": "wrote {path} (cells {cells}); run it with: {command}",
            "ro": "am scris {path} (celulele {cells}); rulați-l cu: {command}",
        },
        "export.rt.world": {
            "en": "labkit export: in the notebook this ran on {nproc} ranks, here on {world}: "
            "values that depend on the number of ranks will differ",
            "ro": "labkit export: în notebook aceasta a rulat pe {nproc} ranguri, aici pe {world}: "
            "valorile care depind de numărul de ranguri vor fi altele",
        },
        "export.rt.reported": {
            "en": "cell {index}, rank 0 reported: {values}",
            "ro": "celula {index}, rangul 0 a raportat: {values}",
        },
    }
)


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
    from labkit.magic import parse_line

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
            found.append(TorchrunCell(i, line, parts[1], parse_line(line), problem))
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
        if not binds:
            if via is None:
                raise OptionError(t("export.var_missing", index=cell_index, name=name))
            var, pos = via
            raise OptionError(
                t("export.dep_missing", index=cell_index, var=var, dep=name, where=pos[0], code=self.first_line(pos))
            )
        chosen = events[binds[-1] :]
        for pos, kind in chosen:
            if kind == "opaque":
                raise OptionError(
                    t("export.var_opaque", index=cell_index, name=name, where=pos[0], code=self.first_line(pos))
                )
        out = {pos for pos, _ in chosen}
        for pos in list(out):
            stmt = self.stmts[pos]
            # a function's body runs when it is called, with the names as they are then
            at = (cell_index, -1) if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else pos
            for dep in free_names(stmt) - {name}:
                out |= self.needed(dep, at, cell_index, via or (name, pos))
        return out

    def first_line(self, pos: Position) -> str:
        return (ast.get_source_segment(self.sources[pos[0]], self.stmts[pos]) or "").split("\n")[0]

    def source(self, pos: Position) -> str:
        stmt, lines = self.stmts[pos], self.sources[pos[0]].split("\n")
        first = min([d.lineno for d in getattr(stmt, "decorator_list", [])] + [stmt.lineno])
        if first < stmt.lineno or stmt.end_lineno != stmt.lineno:
            return "\n".join(lines[first - 1 : stmt.end_lineno])
        return ast.get_source_segment(self.sources[pos[0]], stmt) or lines[first - 1]


def _root_name(node: ast.expr) -> str | None:
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
                elif (root := _root_name(node)) is not None:  # x.y = ..., x[k] = ...
                    out.append((root, "change"))
        return out
    if isinstance(stmt, ast.AugAssign):
        root = _root_name(stmt.target)
        return [(root, "change")] if root else []
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        root = _root_name(stmt.value.func)  # x.append(...), x.update(...): may change x
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


def calls_init_process_group(code: str) -> bool:
    from labkit.bootstrap import calls_init_process_group as check

    return check(code)


# -- what the exported script runs around the cells (copied into it verbatim) -----------


def _labkit_standin_rank():
    """labkit is not installed here: a stand-in for ``labkit.rank`` with the same calls and JSON lines."""
    import contextlib
    import json
    import os
    import sys
    import time
    import types

    mod = types.ModuleType("labkit.rank")
    mod.values = {}
    mod._step_count = 0
    mod.rank = lambda: int(os.environ.get("RANK", "0"))
    mod.local_rank = lambda: int(os.environ.get("LOCAL_RANK", "0"))
    mod.world_size = lambda: int(os.environ.get("WORLD_SIZE", "1"))
    mod.connected = lambda: False

    def plain(v):
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple, set)):
            return [plain(x) for x in v]
        return v.tolist() if callable(getattr(v, "tolist", None)) else v

    def send(kind, **payload):
        folder = os.environ.get("LABKIT_REPORT_DIR")
        if folder:
            with open(os.path.join(folder, f"rank{mod.rank()}.jsonl"), "a") as f:
                f.write(json.dumps({"t": kind, "time": time.time(), **plain(payload)}, default=repr) + "\n")

    def report(**named):
        mod.values.update(plain(named))
        send("report", values=plain(named))

    @contextlib.contextmanager
    def step(index=None):
        i = mod._step_count if index is None else index
        t0 = time.perf_counter()
        send("step_start", i=i)
        yield
        mod._step_count = i + 1
        send("step", i=i, dt=time.perf_counter() - t0)

    def steps(n):
        for i in range(n):
            with step(i):
                yield i

    def device():
        import torch

        nccl = os.environ.get("LABKIT_BACKEND") == "nccl" and torch.cuda.is_available()
        return torch.device("cuda", mod.local_rank()) if nccl else torch.device("cpu")

    mod.send, mod.report, mod.step, mod.steps, mod.device = send, report, step, steps, device
    mod.log = lambda text: send("log", text=str(text)[:500])
    mod.phase = lambda name: send("phase", name=name)
    mod.on_phase = lambda hook: None
    package = types.ModuleType("labkit")
    package.rank = mod
    sys.modules.update({"labkit": package, "labkit.rank": mod})
    return mod


def _labkit_setup(nproc, pg_timeout, messages):
    """Once, before the first cell: labkit.rank, or its stand-in."""
    import os
    import sys

    try:
        from labkit import rank
    except ImportError:
        rank = _labkit_standin_rank()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if nproc is not None and world != nproc and rank.rank() == 0:
        print(messages["world"].format(nproc=nproc, world=world), file=sys.stderr, flush=True)
    return {
        "rank": rank,
        "backend": os.environ.get("LABKIT_BACKEND"),  # set by hand, it wins over the cells' --backend
        "pg_timeout": float(os.environ.get("LABKIT_PG_TIMEOUT", pg_timeout)),
        "messages": messages,
    }


def _labkit_begin_cell(state, index, backend, own_init):
    """Before a cell: what labkit's bootstrap does before it runs a cell on a rank."""
    import datetime
    import os

    import torch
    import torch.distributed as dist

    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    backend = state["backend"] or backend
    os.environ["LABKIT_BACKEND"] = backend  # rank.device() reads it
    rank = state["rank"]
    rank.values.clear()
    rank._step_count = 0
    state["cell"] = index
    if "init" not in state:
        state["init"] = dist.init_process_group

        def init_process_group(*args, **kwargs):
            """The group of a cell: with the lab's timeout, and a store of the cell's own.

            Each cell makes and destroys a group, and torch 2.13 numbers a group made again in
            the same process as the one before it: on the same store it reads the last group's
            keys and fails ("Connection reset by peer") or hangs. A prefix per cell keeps them apart.
            """
            timeout = datetime.timedelta(seconds=state["pg_timeout"])
            kwargs.setdefault("timeout", timeout)
            if len(args) < 2 and "init_method" not in kwargs and "store" not in kwargs:
                r, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
                if "store" not in state:  # torchrun's own store (env://), one for the whole script
                    state["store"] = next(dist.rendezvous("env://", r, world, timeout=timeout))[0]
                kwargs.update(
                    store=dist.PrefixStore(f"labkit/cell{state['cell']}", state["store"]), rank=r, world_size=world
                )
            return state["init"](*args, **kwargs)

        dist.init_process_group = init_process_group  # a cell that makes its own group gets both too
    if not own_init and not dist.is_initialized():
        kwargs = {}
        if backend == "nccl":
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)  # LOCAL_RANK, before anything touches CUDA
            kwargs["device_id"] = torch.device("cuda", local)
        dist.init_process_group(backend, **kwargs)
    rank.send("cell", index=index)


def _labkit_end_cell(state, index):
    """After a cell: rank 0 shows what was reported, and the group goes, as at the end of a labkit run."""
    import json

    import torch.distributed as dist

    rank = state["rank"]
    if rank.values and rank.rank() == 0:
        print(state["messages"]["reported"].format(index=index, values=json.dumps(rank.values)), flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


RUNTIME = (_labkit_standin_rank, _labkit_setup, _labkit_begin_cell, _labkit_end_cell)


# -- writing the script ------------------------------------------------------------------


def choose(found: list[TorchrunCell], cells: list[int] | None, path: str) -> list[TorchrunCell]:
    if not found:
        raise OptionError(t("export.no_cells", path=path))
    by_index = {c.index: c for c in found}
    for i in cells or []:
        if i not in by_index:
            raise OptionError(t("export.not_torchrun", index=i, cells=", ".join(str(c.index) for c in found)))
    chosen = found if cells is None else [by_index[i] for i in dict.fromkeys(cells)]
    for c in chosen:
        if c.problem is not None:
            raise c.problem
    return chosen


def check_together(chosen: list[TorchrunCell]) -> tuple[int | None, dict[str, str]]:
    """The one nproc and the one environment the chosen cells can share."""
    from labkit.options import parse_env

    nprocs = {c.opts.nproc for c in chosen}
    if len(nprocs) > 1:
        detail = ", ".join(f"{c.index}: -n {c.opts.nproc or 'default'}" for c in chosen)
        raise OptionError(t("export.nproc_differ", detail=detail))
    env: dict[str, str] = {}
    setter: dict[str, int] = {}
    for c in chosen:
        for key, value in parse_env(c.opts.env).items():
            if key in env and env[key] != value:
                raise OptionError(t("export.env_differ", a=setter[key], b=c.index, name=key))
            env[key], setter[key] = value, c.index
    nproc = nprocs.pop()
    if nproc is not None and not str(nproc).strip().isdigit():
        raise OptionError(t("opt.nproc.type", value=nproc))  # the magic's own message: the cell would fail too
    return (int(nproc) if nproc is not None else None), env


def torchrun_command(nproc: int | None, script: str) -> str:
    from labkit.gpus import CPU_NPROC

    return f"torchrun --nproc-per-node={nproc or CPU_NPROC} {script}"


def cell_section(cell: TorchrunCell, bindings: Bindings) -> str:
    try:
        compile(cell.code, f"<cell {cell.index}>", "exec")
    except SyntaxError as exc:
        raise OptionError(t("export.syntax", index=cell.index, error=exc.msg, line=(exc.lineno or 1) - 1)) from None
    names = [n.strip() for n in cell.opts.vars.split(",") if n.strip()]
    needed: set[Position] = set()
    for name in names:
        needed |= bindings.needed(name, (cell.index, -1), cell.index)
    rule = f"# ---- cell {cell.index}: {MAGIC} {cell.line}".rstrip() + " "
    out = [rule + "-" * max(4, 100 - len(rule))]
    if names:
        out.append(f"# --vars {', '.join(names)}: as the notebook sets them before this cell")
    last_cell = None
    for pos in sorted(needed):
        if pos[0] != last_cell:
            tags = bindings.tags.get(pos[0], [])
            role = (
                " (parameters)"
                if "parameters" in tags
                else " (injected-parameters)"
                if "injected-parameters" in tags
                else ""
            )
            out.append(f"# from cell {pos[0]}{role}")
            last_cell = pos[0]
        out.append(bindings.source(pos))
    own = calls_init_process_group(cell.code)
    out.append(f"_labkit_begin_cell(_LABKIT, {cell.index}, backend={cell.opts.backend!r}, own_init={own})")
    out.append(cell.code.strip("\n"))
    out.append(f"_labkit_end_cell(_LABKIT, {cell.index})")
    return "\n".join(out)


def header(path: str, chosen: list[TorchrunCell], nproc: int | None, script: str) -> str:
    lines = [
        f'"""{os.path.basename(path)}, exported by `labkit export`: {"cell" if len(chosen) == 1 else "cells"} '
        + ", ".join(str(c.index) for c in chosen)
        + ".",
        "",
        f"    {torchrun_command(nproc, script)}",
        "    bash launch/torchrun-multinode.sh --nnodes 2 --node-rank R --rdzv-endpoint HOST:29400 " + script,
        "",
        "In the notebook:",
        *[f"    cell {c.index}: {MAGIC} {c.line}".rstrip() for c in chosen],
        "",
        "Each cell runs as labkit ran it: in a process group of its own (timeout LABKIT_PG_TIMEOUT)",
        "unless the cell makes one, destroyed at the cell's end.",
        "LABKIT_BACKEND=gloo|nccl overrides the cells' backend. rank.report() values are printed by",
        "rank 0 and, with LABKIT_REPORT_DIR set, written there as JSON lines (rank{R}.jsonl).",
    ]
    if any(c.opts.timeout is not None for c in chosen):
        lines.append("The cells' --timeout limits the run in the notebook only; use the scheduler's time limit here.")
    return "\n".join(lines) + '\n"""'


def build_script(
    path: str, cells: list[int] | None = None, script_name: str = "script.py"
) -> tuple[str, list[int], int | None]:
    """The script's text, the indices of the cells in it, and their nproc (None: labkit's default)."""
    from labkit.options import RunConfig

    all_cells = read_cells(path)
    chosen = choose(torchrun_cells(all_cells), cells, path)
    nproc, env = check_together(chosen)
    bindings = Bindings(all_cells)
    sections = [cell_section(c, bindings) for c in chosen]  # resolves --vars first: errors before any output
    messages = {
        "world": t("export.rt.world", nproc="{nproc}", world="{world}"),
        "reported": t("export.rt.reported", index="{index}", values="{values}"),
    }
    env_line = f"import os\n\nos.environ.update({env!r})  # the cells' --env, before torch reads any of it\n"
    parts = [
        "#!/usr/bin/env python3\n" + header(path, chosen, nproc, script_name) + "\n",
        env_line if env else None,
        *[inspect.getsource(fn) for fn in RUNTIME],
        f"_LABKIT = _labkit_setup(nproc={nproc!r}, pg_timeout={RunConfig().pg_timeout!r}, messages={messages!r})\n",
        *[s + "\n" for s in sections],
    ]
    return "\n\n".join(p for p in parts if p is not None).rstrip() + "\n", [c.index for c in chosen], nproc


def export_notebook(path: str, cells: list[int] | None = None, out: str | None = None) -> str:
    """The ``%%torchrun`` cells of ``path`` (all, or the indices in ``cells``) as one torchrun script.

    Returns the script's text and writes it to ``out`` when given. Raises ``OptionError``
    when a cell does not compile, when a ``--vars`` name has no value the export can read
    from the notebook, or when the cells cannot share one world (different ``-n``).
    """
    text, _, _ = build_script(path, cells, os.path.basename(out) if out else "script.py")
    if out:
        with open(out, "w") as f:
            f.write(text)
        os.chmod(out, 0o755)
    return text


# -- the `labkit export` subcommand ------------------------------------------------------------


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``export`` to the ``labkit`` command's subparsers; it calls ``run_cli(args)``."""

    def helps(key: str) -> str:
        return t(key).replace("%", "%%")  # argparse %-formats help texts: %%torchrun must stay whole

    p = subparsers.add_parser("export", help=helps("export.help"), description=t("export.help"))
    p.add_argument("notebook", help=helps("export.help.notebook"))
    p.add_argument("--cell", dest="cells", type=int, action="append", metavar="N", help=helps("export.help.cell"))
    p.add_argument("-o", "--output", metavar="SCRIPT", help=helps("export.help.output"))
    p.add_argument("--list", action="store_true", help=helps("export.help.list"))
    p.set_defaults(func=run_cli)
    return p


def run_cli(args: argparse.Namespace) -> int:
    """``labkit export``: 0 when the script was written, 2 with the reason on stderr otherwise."""
    try:
        return _run_cli(args)
    except OptionError as exc:
        print(f"labkit export: {exc}", file=sys.stderr)
        return 2


def _run_cli(args: argparse.Namespace) -> int:
    if args.list:
        for c in torchrun_cells(read_cells(args.notebook)):
            first = next((ln.strip() for ln in c.code.split("\n") if ln.strip()), "")
            print(f"{c.index:4d}  {MAGIC} {c.line}".rstrip() + f"    {first[:60]}")
        return 0
    if not args.output:
        sys.stdout.write(export_notebook(args.notebook, args.cells))
        return 0
    text, indices, nproc = build_script(args.notebook, args.cells, os.path.basename(args.output))
    with open(args.output, "w") as f:
        f.write(text)
    os.chmod(args.output, 0o755)
    print(
        t(
            "export.wrote",
            path=args.output,
            cells=", ".join(map(str, indices)),
            command=torchrun_command(nproc, args.output),
        ),
        file=sys.stderr,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.export NOTEBOOK ...``: the subcommand on its own."""
    parser = argparse.ArgumentParser(prog="labkit")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["export", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
