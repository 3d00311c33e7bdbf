"""The ``labkit`` command.

Each role of the kit adds its own subcommand:

    labkit run train.py -n 2        # a script on 2 torchrun ranks, with labkit's reporting
    labkit cleanup                  # kill rank processes left by any earlier run
    labkit grade / build-student / export / estimate / build-course  (see --help)
    labkit sweep / regress compare / doctor   regression runs and the environment check
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from labkit.i18n import t

# subcommands contributed by other modules: each has register(subparsers)
CONTRIBUTED = [
    "labkit.grading.cli",
    "labkit.export",
    "labkit.memory.estimate",
    "labkit.course.build",
    "labkit.regress.cli",
]


def cmd_run(args: argparse.Namespace) -> int:
    from labkit.launch.cold import torchrun
    from labkit.wire.errors import RunError

    try:
        run = torchrun(args.file, nproc=args.nproc, backend=args.backend, timeout=args.timeout, display="text")
    except RunError as err:
        print(err, file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({str(r): v for r, v in run.values.items()}))
    return 0


def cmd_cleanup(args: argparse.Namespace) -> int:
    from labkit.launch.group import cleanup

    print(t("cli.cleanup.done", n=len(cleanup())))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from labkit import __version__

    parser = argparse.ArgumentParser(prog="labkit", description=t("cli.description"))
    parser.add_argument("--version", action="version", version=f"fsdp-labkit {__version__}", help=t("cli.version.help"))
    parser.add_argument("--lang", default=None, help=t("cli.lang.help"))
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help=t("cli.run.help"))
    p.add_argument("file")
    p.add_argument("-n", "--nproc", type=int, default=None, help=t("launch.magic.help.nproc"))
    p.add_argument("--backend", default="auto", help=t("launch.magic.help.backend"))
    p.add_argument("--timeout", type=float, default=None, help=t("launch.magic.help.timeout"))
    p.add_argument("--json", action="store_true", help=t("cli.run.json"))
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("cleanup", help=t("cli.cleanup.help"))
    p.set_defaults(func=cmd_cleanup)
    for name in CONTRIBUTED:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--lang" in argv:  # set before the parser is built, so --help is in that language too
        from labkit.i18n import set_lang

        i = argv.index("--lang")
        if i + 1 < len(argv):
            set_lang(argv[i + 1])
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
