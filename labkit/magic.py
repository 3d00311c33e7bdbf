"""``%%torchrun``: run the cell on N torchrun ranks. ``%labkit_lang``: choose the language.

    %%torchrun -n 2 --timeout 60 --vars model_size,steps
    from labkit import rank
    rank.report(hello=rank.rank())

The options mirror ``labkit.torchrun()``; the ``Run`` ends up in ``_`` and in
``labkit.last_run``.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from labkit.errors import CellSyntaxError, OptionError
from labkit.i18n import catalog, set_lang, t

catalog(
    {
        "magic.usage": {
            "en": "%%torchrun [-n NPROC] [--backend auto|gloo|nccl] [--timeout SECONDS] [--vars a,b] [--env K=V ...] [--quiet]",
            "ro": "%%torchrun [-n NPROC] [--backend auto|gloo|nccl] [--timeout SECUNDE] [--vars a,b] [--env K=V ...] [--quiet]",
        },
        "magic.help.nproc": {"en": "number of ranks (default: the visible GPUs, else 2)", "ro": "numărul de ranguri (implicit: GPU-urile vizibile, altfel 2)"},
        "magic.help.backend": {"en": "process-group backend", "ro": "backend-ul grupului de procese"},
        "magic.help.timeout": {"en": "limit for the whole run, in seconds", "ro": "limita pentru întreaga rulare, în secunde"},
        "magic.help.vars": {"en": "notebook variables to send to every rank", "ro": "variabile din notebook trimise fiecărui rang"},
        "magic.help.env": {"en": "environment variable for the ranks (repeatable)", "ro": "variabilă de mediu pentru ranguri (repetabilă)"},
        "magic.help.quiet": {"en": "no dashboard, no summary", "ro": "fără panou și fără rezumat"},
        "magic.help.display": {"en": "widgets, text or none (default: auto)", "ro": "widgets, text sau none (implicit: auto)"},
        "magic.bad_option": {"en": "%%torchrun: {error}\nusage: {usage}", "ro": "%%torchrun: {error}\nutilizare: {usage}"},
        "magic.lang": {"en": "labkit speaks English now.", "ro": "labkit vorbește acum românește."},
    }
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would call sys.exit(); we raise instead
        raise OptionError(t("magic.bad_option", error=message, usage=t("magic.usage")))


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%torchrun", add_help=False, usage=t("magic.usage"))
    p.add_argument("-n", "--nproc", help=t("magic.help.nproc"))
    p.add_argument("--backend", default="auto", help=t("magic.help.backend"))
    p.add_argument("--timeout", type=float, default=None, help=t("magic.help.timeout"))
    p.add_argument("--vars", default="", help=t("magic.help.vars"))
    p.add_argument("--env", action="append", default=[], help=t("magic.help.env"))
    p.add_argument("--quiet", action="store_true", help=t("magic.help.quiet"))
    p.add_argument("--display", default="auto", help=t("magic.help.display"))
    return p


def parse_line(line: str) -> argparse.Namespace:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise OptionError(t("magic.bad_option", error=exc, usage=t("magic.usage"))) from None
    return parser().parse_args(words)


def pick_vars(names: str, namespace: dict[str, Any]) -> dict[str, Any]:
    picked = {}
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name not in namespace:
            raise OptionError(t("opt.vars.undefined", name=name))
        picked[name] = namespace[name]
    return picked


def run_cell(line: str, cell: str, namespace: dict[str, Any]) -> Any:
    """What ``%%torchrun`` does, without IPython (tests call this too)."""
    from labkit.launcher import torchrun
    from labkit.options import parse_env

    opts = parse_line(line)
    try:
        return torchrun(
            "\n" + cell,  # line 1 of the cell is the %%torchrun line: keep line numbers as the student sees them
            nproc=opts.nproc,
            backend=opts.backend,
            timeout=opts.timeout,
            vars=pick_vars(opts.vars, namespace),
            env=parse_env(opts.env),
            quiet=opts.quiet,
            display="none" if opts.quiet else opts.display,
        )
    except SyntaxError as exc:
        # IPython shows a SyntaxError from a magic as a trace through labkit; ours is just the cell line
        raise CellSyntaxError("\n".join(_syntax_lines(exc))) from None


def _syntax_lines(exc: SyntaxError) -> list[str]:
    lines = [f"SyntaxError: {exc.msg} (cell line {exc.lineno})"]
    if exc.text:
        lines.append("    " + exc.text.rstrip("\n"))
        if exc.offset:
            lines.append("    " + " " * (exc.offset - 1) + "^")
    return lines


def register(ipython: Any) -> None:
    from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

    @magics_class
    class LabkitMagics(Magics):
        @cell_magic
        def torchrun(self, line: str, cell: str) -> None:
            run = None
            try:
                run = run_cell(line, cell, self.shell.user_ns)
            finally:
                import labkit

                self.shell.user_ns["_"] = run if run is not None else labkit.last_run

        @line_magic
        def labkit_lang(self, line: str) -> None:
            set_lang(line.strip() or None)
            print(t("magic.lang"))

    ipython.register_magics(LabkitMagics)
    from labkit import warm

    warm.register(ipython)
