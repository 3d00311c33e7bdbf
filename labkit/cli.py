"""The ``labkit`` command (also ``python -m labkit``).

Each role of the kit adds its own subcommand:

    labkit run train.py -n 2        # a script on 2 torchrun ranks, with labkit's reporting
    labkit cleanup                  # kill rank processes left by any earlier run
    labkit grade / build-student / export / estimate / build-course  (see --help)
    labkit sweep / regress compare / doctor   regression runs and the environment check

Only the module of the command given is imported: on a base install (no extras) ``labkit --help`` and
every command's ``--help`` work, and a command that needs a missing extra says which, without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from labkit.i18n import LANGS, t

# subcommands contributed by other modules, each module's with its help message (what `labkit --help`
# lists without importing the module); the module's register(subparsers) adds them for real
CONTRIBUTED: dict[str, tuple[tuple[str, str], ...]] = {
    "labkit.grading.cli": (("grade", "grading.cli.grade.help"), ("build-student", "grading.cli.build.help")),
    "labkit.export": (("export", "export.help"),),
    "labkit.classroom.cli": (
        ("submit", "classroom.cli.submit.help"),
        ("collect", "classroom.cli.collect.help"),
        ("feedback", "classroom.cli.feedback.help"),
    ),
    "labkit.memory.estimate": (("estimate", "memory.est.help"),),
    "labkit.course.build": (("build-course", "course.help"),),
    "labkit.regress.cli": (
        ("sweep", "regress.sweep.help"),
        ("regress", "regress.help"),
        ("doctor", "regress.doctor.help"),
    ),
}
# the modules the optional extras of pyproject.toml bring, by the name they are imported as
EXTRAS = {
    "jupyterlab": "lab",
    "ipykernel": "lab",
    "ipywidgets": "lab",
    "matplotlib": "lab",
    "nbformat": "lab",
    "jupyter_ui_poll": "lab",
    "jupytext": "lab",
    "jupyterlab_language_pack_ro_RO": "lab",  # JupyterLab reads it; labkit never imports it
    "papermill": "grade",
    "nbclient": "grade",
    "playwright": "browser",
    "jupyterhub": "hub",
}


def cmd_run(args: argparse.Namespace) -> int:
    from labkit.launch import options
    from labkit.launch.cold import torchrun
    from labkit.launch.parsers import given
    from labkit.wire.errors import LabkitError

    try:
        with stdout_to_stderr(args.json):  # --json: stdout is the JSON alone
            run = torchrun(args.file, display="text", **given(args, options.RUN))
    except LabkitError as err:  # an OptionError or a RunError: its message says it all
        print(err, file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({str(r): v for r, v in run.values.items()}))
    return 0


@contextmanager
def stdout_to_stderr(on: bool) -> Iterator[None]:
    """Everything written to stdout in the block, ours and the processes' we start, goes to stderr."""
    if not on:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def cmd_cleanup(args: argparse.Namespace) -> int:
    from labkit.launch.group import cleanup

    print(t("cli.cleanup.done", n=len(cleanup())))
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``labkit`` parser. ``command``: only that command's module is imported, the others are listed by
    name and help; None: every module (a missing extra leaves its commands saying so)."""
    from labkit import __version__
    from labkit.launch import options
    from labkit.launch.parsers import LocalParser, add_options

    parser = LocalParser(prog="labkit", description=t("cli.description"))
    parser.add_argument("--version", action="version", version=f"fsdp-labkit {__version__}", help=t("cli.version.help"))
    parser.add_argument("--lang", default=None, help=t("cli.lang.help"))
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help=t("cli.run.help"), description=t("cli.run.help"))
    p.add_argument("file", help=t("cli.run.file"))
    add_options(p, options.RUN)
    p.add_argument("--json", action="store_true", help=t("cli.run.json"))
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("cleanup", help=t("cli.cleanup.help"), description=t("cli.cleanup.help"))
    p.set_defaults(func=cmd_cleanup)
    for module, commands in CONTRIBUTED.items():
        if command is not None and command not in (name for name, _ in commands):
            for name, key in commands:
                sub.add_parser(name, help=t(key).replace("%", "%%"))  # listed; never parsed: the command is another
            continue
        try:
            importlib.import_module(module).register(sub)
        except ModuleNotFoundError as exc:
            if extra_of(exc) is None:
                raise
            for name, key in commands:
                needs_extra(sub, name, key, exc)
    return parser


def extra_of(exc: ModuleNotFoundError) -> str | None:
    """The extra of pyproject.toml that brings the missing module; None for anything else missing."""
    return EXTRAS.get((exc.name or "").split(".")[0])


def missing_extra(command: str, exc: ModuleNotFoundError) -> str:
    return t("cli.extra.missing", command=command, module=exc.name, extra=extra_of(exc))


def needs_extra(sub: argparse._SubParsersAction, name: str, key: str, exc: ModuleNotFoundError) -> None:
    """``name``, whose module cannot be imported here: its ``--help`` and any use of it say what to install."""
    why = missing_extra(name, exc)
    p = sub.add_parser(name, help=t(key).replace("%", "%%"), description=t(key), epilog=why)
    p.set_defaults(takes_any=True)  # whatever follows, the answer is the extra

    def refuse(args: argparse.Namespace) -> int:
        print(why, file=sys.stderr)
        return 2

    p.set_defaults(func=refuse)


def chosen(argv: list[str]) -> str | None:
    """The command named on the line (the first word that is not an option of ``labkit`` itself)."""
    words = iter(argv)
    for word in words:
        if word == "--lang":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--lang" in argv:  # set before the parser is built, so --help is in that language too
        from labkit.i18n import set_lang

        i = argv.index("--lang")
        if i + 1 < len(argv):
            try:
                set_lang(argv[i + 1])
            except ValueError:
                print(t("cli.lang.unknown", value=argv[i + 1], langs=", ".join(LANGS)), file=sys.stderr)
                return 2
    command = chosen(argv)
    parser = build_parser(command or "")
    args, rest = parser.parse_known_args(argv)
    if rest and not getattr(args, "takes_any", False):
        parser.error(t("launch.args.unrecognized", words=" ".join(rest)))
    try:
        return int(args.func(args) or 0)
    except ModuleNotFoundError as exc:  # a command reached for an extra this install has not
        if extra_of(exc) is None:
            raise
        print(missing_extra(args.command, exc), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
