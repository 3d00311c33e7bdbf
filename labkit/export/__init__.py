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

Three files: ``export_cells`` reads the notebook (its cells, and what gives each ``--vars`` name
its value), ``export_runtime`` is the code the script runs around the cells, and this one writes
the script and is the ``labkit export`` command.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from labkit.export.cells import MAGIC, Bindings, Position, TorchrunCell, read_cells, torchrun_cells
from labkit.export.runtime import standin_sources
from labkit.i18n import t
from labkit.wire.errors import OptionError
from labkit.wire.protocol import TIME, TYPE, Msg

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
    from labkit.launch.options import parse_env

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
        raise OptionError(t("launch.opt.nproc.type", value=nproc))  # the magic's own message: the cell would fail too
    return (int(nproc) if nproc is not None else None), env


def torchrun_command(nproc: int | None, script: str) -> str:
    from labkit.wire.devices import CPU_NPROC

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
    from labkit.ranks.bootstrap import calls_init_process_group

    own = calls_init_process_group(cell.code)
    out.append(f"_labkit_begin_cell(_LABKIT, {cell.index}, backend={cell.opts.backend!r}, own_init={own})")
    out.append(cell.code.strip("\n"))
    out.append(f"_labkit_end_cell(_LABKIT, {cell.index})")
    return "\n".join(out)


def header(path: str, chosen: list[TorchrunCell], nproc: int | None, script: str) -> str:
    """The script's docstring, in the language of the kernel (or shell) that exports it: a student reads it."""
    which = t("export.header.cell" if len(chosen) == 1 else "export.header.cells")
    lines = [
        '"""' + t("export.header.title", file=os.path.basename(path), which=which,
                  cells=", ".join(str(c.index) for c in chosen)),
        "",
        f"    {torchrun_command(nproc, script)}",
        "    bash launch/torchrun-multinode.sh --nnodes 2 --node-rank R --rdzv-endpoint HOST:29400 " + script,
        "",
        t("export.header.in_notebook"),
        *[f"    {t('export.header.cell_line', index=c.index)} {MAGIC} {c.line}".rstrip() for c in chosen],
        "",
        *t("export.header.body").splitlines(),
    ]  # fmt: skip
    if any(c.opts.timeout is not None for c in chosen):
        lines.append(t("export.header.timeout"))
    return "\n".join(lines) + '\n"""'


# the message keys and the types the stand-in of labkit.rank sends (Msg's values: the script has no labkit)
WIRE = {
    "type": TYPE,
    "time": TIME,
    "kinds": {m.value: m.value for m in (Msg.REPORT, Msg.STEP_START, Msg.STEP, Msg.LOG, Msg.PHASE, Msg.CELL)},
}


def build_script(
    path: str, cells: list[int] | None = None, script_name: str = "script.py"
) -> tuple[str, list[int], int | None]:
    """The script's text, the indices of the cells in it, and their nproc (None: labkit's default)."""
    from labkit.launch.options import RunConfig

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
        *standin_sources(),
        f"_LABKIT = _labkit_setup(nproc={nproc!r}, pg_timeout={RunConfig().pg_timeout!r}, messages={messages!r}, "
        f"wire={WIRE!r})\n",
        *[s + "\n" for s in sections],
        "_labkit_exit()  # as a labkit rank ends: no interpreter teardown (see the function)\n",
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
    from labkit.classroom.cli import export_options

    export_options(p)  # grades for an LMS: NOTEBOOK is then labkit grade's output folder
    p.set_defaults(func=run_cli)
    return p


def run_cli(args: argparse.Namespace) -> int:
    """``labkit export``: 0 when the script was written, 2 with the reason on stderr otherwise."""
    from labkit.classroom.cli import run_export, wants_export

    if wants_export(args):
        return run_export(args)
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
