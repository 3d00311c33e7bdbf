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
import sys
from pathlib import Path

from labkit.i18n import LANGS, catalog, t
from labkit.wire.errors import OptionError

catalog(
    {
        "cli.grade.help": {
            "en": "grade a folder of submitted notebooks",
            "ro": "notează un dosar de notebook-uri predate",
        },
        "cli.grade.description": {
            "en": "Run every notebook in SUBMISSIONS in a sandbox of its own (bubblewrap), judge what its "
            "labkit.check calls handed in, and write a report per student (JSON and Markdown) and a CSV "
            "gradebook. SUBMISSIONS holds one folder per student, or files named <student>_<anything>.ipynb.",
            "ro": "Rulează fiecare notebook din SUBMISSIONS într-un sandbox propriu (bubblewrap), judecă ce au "
            "predat apelurile labkit.check și scrie un raport pentru fiecare student (JSON și Markdown) și un "
            "catalog CSV. SUBMISSIONS conține câte un dosar pentru fiecare student, sau fișiere numite "
            "<student>_<orice>.ipynb.",
        },
        "cli.grade.submissions": {"en": "the folder of submissions", "ro": "dosarul cu predări"},
        "cli.grade.out": {"en": "where to write the reports", "ro": "unde se scriu rapoartele"},
        "cli.grade.timeout": {
            "en": "seconds each notebook may run, all its cells together (default: %(default)s)",
            "ro": "câte secunde poate rula fiecare notebook, toate celulele la un loc (implicit: %(default)s)",
        },
        "cli.grade.lang": {
            "en": "the language of every report (default: each student's own)",
            "ro": "limba tuturor rapoartelor (implicit: limba fiecărui student)",
        },
        "cli.grade.questions": {
            "en": "a module or .py file of extra questions (repeatable; added to LABKIT_QUESTIONS)",
            "ro": "un modul sau fișier .py cu întrebări în plus (se poate repeta; adăugat la LABKIT_QUESTIONS)",
        },
        "cli.grade.progress": {"en": "graded {file}: {score} ({status})", "ro": "notat {file}: {score} ({status})"},
        "cli.grade.jobs": {
            "en": "how many notebooks to run at once, each in its own kernel (default: %(default)s)",
            "ro": "câte notebook-uri rulează deodată, fiecare în kernelul lui (implicit: %(default)s)",
        },
        "cli.grade.no_sandbox": {
            "en": "run the submissions as plain processes of yours, without a sandbox (only for notebooks you trust)",
            "ro": "rulează predările ca procese obișnuite ale voastre, fără sandbox (doar pentru notebook-uri în care "
            "aveți încredere)",
        },
        "cli.grade.done": {
            "en": "{n} students graded; reports in {out}, gradebook in {csv}",
            "ro": "{n} studenți notați; rapoartele în {out}, catalogul în {csv}",
        },
        "cli.grade.no_folder": {"en": "no such folder: {path}", "ro": "dosarul nu există: {path}"},
        "cli.build.help": {
            "en": "build the student edition of solution notebooks",
            "ro": "construiește ediția pentru studenți a notebook-urilor cu soluții",
        },
        "cli.build.description": {
            "en": "Replace the code between '### BEGIN SOLUTION' and '### END SOLUTION' with "
            "'raise NotImplementedError()', remove hidden tests, clear outputs. Folders keep their layout.",
            "ro": "Înlocuiește codul dintre '### BEGIN SOLUTION' și '### END SOLUTION' cu "
            "'raise NotImplementedError()', elimină testele ascunse, golește ieșirile. Dosarele își păstrează structura.",
        },
        "cli.build.paths": {"en": "notebooks or folders of notebooks", "ro": "notebook-uri sau dosare cu notebook-uri"},
        "cli.build.out": {"en": "where to write the student edition", "ro": "unde se scrie ediția pentru studenți"},
        "cli.build.lang": {
            "en": "the language of the stubs (default: the notebook's metadata.labkit.lang)",
            "ro": "limba textelor înlocuitoare (implicit: metadata.labkit.lang a notebook-ului)",
        },
        "cli.build.done": {"en": "{n} notebooks written to {out}", "ro": "{n} notebook-uri scrise în {out}"},
        "cli.build.install": {
            "en": "the student's install (labkit without answers): {folder}, and to pip install: {wheel}",
            "ro": "instalarea pentru studenți (labkit fără răspunsuri): {folder}, iar pentru pip install: {wheel}",
        },
        "cli.build.nbgrader_source": {
            "en": "also write the solution notebooks with nbgrader's cell metadata here, for nbgrader's source/ "
            "folder (they hold the solutions: keep them away from students)",
            "ro": "scrie aici și notebook-urile cu soluții, cu metadatele de celulă nbgrader, pentru dosarul source/ "
            "al nbgrader (conțin soluțiile: țineți-le departe de studenți)",
        },
        "cli.build.no_install": {
            "en": "write the student notebooks only, not the student's install of labkit",
            "ro": "scrie doar notebook-urile pentru studenți, fără instalarea labkit pentru studenți",
        },
        "cli.grade.install": {
            "en": "submissions run with the student's install of labkit in {folder}",
            "ro": "predările rulează cu instalarea labkit pentru studenți din {folder}",
        },
    }
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``grade`` and ``build-student`` to a parser's subcommands."""
    g = subparsers.add_parser("grade", help=t("cli.grade.help"), description=t("cli.grade.description"))
    g.add_argument("submissions", help=t("cli.grade.submissions"))
    g.add_argument("--out", required=True, help=t("cli.grade.out"))
    g.add_argument("--timeout", type=float, default=600, help=t("cli.grade.timeout"))
    # own dest names: `labkit --lang` (the messages' language) must not be overwritten by these
    g.add_argument("--lang", dest="report_lang", choices=LANGS, help=t("cli.grade.lang"))
    g.add_argument("--jobs", type=int, default=1, help=t("cli.grade.jobs"))
    g.add_argument("--questions", action="append", default=[], help=t("cli.grade.questions"))
    g.add_argument("--no-sandbox", action="store_true", help=t("cli.grade.no_sandbox"))
    g.set_defaults(func=run_grade)

    b = subparsers.add_parser("build-student", help=t("cli.build.help"), description=t("cli.build.description"))
    b.add_argument("paths", nargs="+", help=t("cli.build.paths"))
    b.add_argument("--out", required=True, help=t("cli.build.out"))
    b.add_argument("--lang", dest="stub_lang", choices=LANGS, help=t("cli.build.lang"))
    b.add_argument("--no-install", action="store_true", help=t("cli.build.no_install"))
    b.add_argument("--nbgrader-source", metavar="DIR", help=t("cli.build.nbgrader_source"))
    b.set_defaults(func=run_build)


def run_grade(args: argparse.Namespace) -> int:
    from labkit.grading import registry, sandbox
    from labkit.grading.checks import fmt_points
    from labkit.grading.grade import NotebookScore
    from labkit.grading.report import grade_folder

    if not Path(args.submissions).is_dir():
        print(t("cli.grade.no_folder", path=args.submissions), file=sys.stderr)
        return 2
    # the kernels inherit the variable, so the notebooks see the same questions; they run in
    # a folder of their own, so a relative path would not be found there
    names = [p for p in os.environ.get("LABKIT_QUESTIONS", "").split(os.pathsep) if p] + args.questions
    os.environ["LABKIT_QUESTIONS"] = os.pathsep.join(os.path.abspath(n) if n.endswith(".py") else n for n in names)
    try:
        registry.load_questions()  # a broken questions module fails here, not in every notebook
    except OptionError as e:
        print(e, file=sys.stderr)
        return 2

    def progress(nb: NotebookScore) -> None:
        score = f"{fmt_points(nb.points)}/{fmt_points(nb.max_points)}"
        print(
            t("cli.grade.progress", file=nb.executed or nb.file, score=score, status=nb.status),
            file=sys.stderr,
            flush=True,
        )

    try:
        box = sandbox.find(args.no_sandbox)
    except sandbox.SandboxUnavailable as e:
        print(e, file=sys.stderr)
        return 2
    from labkit.grading.student import cached_install

    home = cached_install()  # made once per version of labkit and its questions
    print(t("cli.grade.install", folder=home), file=sys.stderr)
    students = grade_folder(
        args.submissions, args.out, args.timeout, args.report_lang, args.jobs, log=progress, box=box,
        env={"LABKIT_HOME": str(home)},
    )  # fmt: skip
    out = Path(args.out)
    print((out / "gradebook.md").read_text(), end="")
    print(t("cli.grade.done", n=len(students), out=out, csv=out / "gradebook.csv"))
    return 0


def run_build(args: argparse.Namespace) -> int:
    from labkit.grading.build import BuildError, build_student

    try:
        written = build_student(args.paths, args.out, args.stub_lang, args.nbgrader_source)
    except BuildError as e:
        print(e, file=sys.stderr)
        return 1
    print(t("cli.build.done", n=len(written), out=args.out))
    if not args.no_install:
        from labkit.grading.student import build_wheel, write_install

        folder = write_install(Path(args.out) / "install")
        print(t("cli.build.install", folder=folder, wheel=build_wheel(folder, args.out)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.grading")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)
