"""The ``labkit grade`` and ``labkit build-student`` subcommands.

    labkit build-student notebooks/en --out dist/student/en
    labkit grade submissions/ --out reports/ --timeout 600

``register(subparsers)`` adds both to the ``labkit`` command; each sets ``func``,
which takes the parsed arguments and returns the exit code. ``python -m
labkit.grading`` runs them without the rest of the command.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from labkit.i18n import LANGS, t
from labkit.wire import env as envvars
from labkit.wire.errors import OptionError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``grade`` and ``build-student`` to a parser's subcommands."""
    g = subparsers.add_parser("grade", help=t("grading.cli.grade.help"), description=t("grading.cli.grade.description"))
    g.add_argument("submissions", nargs="?", help=t("grading.cli.grade.submissions"))
    g.add_argument("--out", help=t("grading.cli.grade.out"))
    g.add_argument("--self", dest="self_study", action="store_true", help=t("grading.cli.grade.self"))
    g.add_argument("--timeout", type=float, default=600, help=t("grading.cli.grade.timeout"))
    # own dest names: `labkit --lang` (the messages' language) must not be overwritten by these
    g.add_argument("--lang", dest="report_lang", choices=LANGS, help=t("grading.cli.grade.lang"))
    g.add_argument("--jobs", type=int, default=1, help=t("grading.cli.grade.jobs"))
    g.add_argument("--questions", action="append", default=[], help=t("grading.cli.grade.questions"))
    g.add_argument("--no-sandbox", action="store_true", help=t("grading.cli.grade.no_sandbox"))
    g.add_argument("--seed", type=int, default=None, help=t("grading.cli.grade.seed"))
    g.add_argument("--slurm", action="store_true", help=t("grading.cli.grade.slurm"))
    g.add_argument("--slurm-args", default="", metavar="ARGS", help=t("grading.cli.grade.slurm_args"))
    from labkit.classroom.cli import grade_options

    grade_options(g)  # a class's: --student, --lesson, --no-cache, --feedback, --course
    g.set_defaults(func=run_grade)

    b = subparsers.add_parser(
        "build-student", help=t("grading.cli.build.help"), description=t("grading.cli.build.description")
    )
    b.add_argument("paths", nargs="+", help=t("grading.cli.build.paths"))
    b.add_argument("--out", required=True, help=t("grading.cli.build.out"))
    b.add_argument("--lang", dest="stub_lang", choices=LANGS, help=t("grading.cli.build.lang"))
    b.add_argument("--no-install", action="store_true", help=t("grading.cli.build.no_install"))
    b.add_argument("--nbgrader-source", metavar="DIR", help=t("grading.cli.build.nbgrader_source"))
    b.add_argument("--self-study", action="store_true", help=t("grading.cli.build.self_study"))
    b.set_defaults(func=run_build)


def run_grade(args: argparse.Namespace) -> int:
    from labkit.classroom import cli as classroom
    from labkit.grading import registry, sandbox
    from labkit.grading.checks import fmt_points
    from labkit.grading.grade import NotebookScore, grade_all
    from labkit.grading.report import grade_folder

    if args.self_study:
        return _grade_self(args)
    if args.submissions is None or args.out is None:
        print(t("grading.cli.grade.needs"), file=sys.stderr)
        return 2
    if not Path(args.submissions).is_dir():
        print(t("grading.cli.grade.no_folder", path=args.submissions), file=sys.stderr)
        return 2
    # the kernels inherit the variable, so the notebooks see the same questions; they run in
    # a folder of their own, so a relative path would not be found there
    names = [p for p in (envvars.get("LABKIT_QUESTIONS") or "").split(os.pathsep) if p] + args.questions
    os.environ["LABKIT_QUESTIONS"] = os.pathsep.join(os.path.abspath(n) if n.endswith(".py") else n for n in names)
    try:
        registry.load_questions()  # a broken questions module fails here, not in every notebook
    except OptionError as e:
        print(e, file=sys.stderr)
        return 2

    def progress(nb: NotebookScore) -> None:
        score = f"{fmt_points(nb.points)}/{fmt_points(nb.max_points)}"
        print(
            t("grading.cli.grade.progress", file=nb.executed or nb.file, score=score, status=nb.status),
            file=sys.stderr,
            flush=True,
        )

    if getattr(args, "slurm", False):  # each task finds its sandbox on its node, not here
        from labkit.grading.student import cached_install

        home = cached_install()
        print(t("grading.cli.grade.install", folder=home), file=sys.stderr)
        return _grade_slurm(args, str(home), progress)
    try:
        box = sandbox.find(args.no_sandbox)
    except sandbox.SandboxUnavailable as e:
        if not getattr(args, "own", False):
            print(e, file=sys.stderr)
            return 2
        # the learner's own notebooks on their own machine: a plain run, said out loud
        print(t("grading.cli.grade.self_plain", why=e), file=sys.stderr)
        box = sandbox.find(True)
    from labkit.grading.student import cached_install

    home = cached_install()  # made once per version of labkit and its questions
    print(t("grading.cli.grade.install", folder=home), file=sys.stderr)
    students = grade_folder(
        args.submissions, args.out, args.timeout, args.report_lang, args.jobs, log=progress, box=box,
        env={"LABKIT_HOME": str(home)}, seed=args.seed, grade=classroom.grader(args, grade_all),
    )  # fmt: skip
    out = Path(args.out)
    print((out / "gradebook.md").read_text(), end="")
    print(t("grading.cli.grade.done", n=len(students), out=out, csv=out / "gradebook.csv"))
    return classroom.after_grade(args)


def _grade_slurm(args: argparse.Namespace, home: str, progress: Any) -> int:
    """``labkit grade --slurm``: one array job, one task a submission (``labkit.grading.slurm``)."""
    import shlex

    from labkit.classroom import cli as classroom
    from labkit.grading import slurm

    out = Path(args.out)
    try:
        students = slurm.grade_on_slurm(
            Path(args.submissions), out, args.timeout, args.report_lang, home, args.no_sandbox, args.seed,
            shlex.split(args.slurm_args), log=progress, wrap=lambda grade: classroom.grader(args, grade),
        )  # fmt: skip
    except slurm.SlurmError as e:
        print(e, file=sys.stderr)
        return 2
    print((out / "gradebook.md").read_text(), end="")
    print(t("grading.cli.grade.done", n=len(students), out=out, csv=out / "gradebook.csv"))
    return classroom.after_grade(args)


def _grade_self(args: argparse.Namespace) -> int:
    """``labkit grade --self``: the learner's workspace, graded as a class's submission would be."""
    import tempfile

    from labkit.grading import selfstudy

    ws = selfstudy.workspace()
    with tempfile.TemporaryDirectory(prefix="labkit-self-") as tmp:
        if not selfstudy.submission(ws, Path(tmp)):
            print(t("grading.cli.grade.self_none", folder=ws), file=sys.stderr)
            return 2
        out = args.out or str(ws / selfstudy.STATE / "grade")
        return run_grade(argparse.Namespace(**{**vars(args), "self_study": False, "own": True,
                                              "submissions": tmp, "out": out}))  # fmt: skip


def run_build(args: argparse.Namespace) -> int:
    from labkit.grading.build import BuildError, build_student

    try:
        if args.self_study:  # the student edition and, beside it, the solutions (labkit.grading.selfstudy)
            from labkit.grading.selfstudy import build_self_study

            written = build_self_study(args.paths, args.out, args.stub_lang)
        else:
            written = build_student(args.paths, args.out, args.stub_lang, args.nbgrader_source)
    except BuildError as e:
        print(e, file=sys.stderr)
        return 1
    print(t("grading.cli.build.done", n=len(written), out=args.out))
    if not args.no_install:
        from labkit.grading.student import build_wheel, write_install

        folder = write_install(Path(args.out) / "install")
        if args.self_study:  # beside the catalog: labkit.solution finds it in the install (never in a class's)
            shutil.copyfile(Path(args.out) / "solutions.json", folder / "labkit" / "grading" / "solutions.json")
        print(t("grading.cli.build.install", folder=folder, wheel=build_wheel(folder, args.out)))
    return 0


def main(argv: list[str] | None = None) -> int:
    from labkit.launch.parsers import LocalParser  # argparse's own words in the user's language

    parser = LocalParser(prog="python -m labkit.grading")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)
