"""The class's commands: ``labkit submit``, ``labkit collect``, ``labkit feedback``, and what the class adds to
``labkit grade`` (``--student``, ``--lesson``, the cache, ``--feedback``) and ``labkit export`` (``--moodle``,
``--canvas``, ``--csv``).

    labkit submit lesson1.ipynb                                    # a student, from a terminal
    labkit collect --exchange /srv/labkit-hub/exchange --course course.toml --out submissions/
    labkit grade submissions/ --out reports/ [--student ana] [--lesson lesson1] [--no-cache]
    labkit feedback reports/ --exchange /srv/labkit-hub/exchange --course course.toml
    labkit export reports/ --course course.toml --moodle moodle.csv --canvas canvas.csv --csv grades.csv
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.i18n import LANGS, t
from labkit.wire import env as envvars
from labkit.wire.errors import OptionError


def _course_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--course", default=None, help=t("classroom.cli.course"))


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``submit``, ``collect`` and ``feedback`` to the ``labkit`` command."""
    s = subparsers.add_parser("submit", help=t("classroom.cli.submit.help"), description=t("classroom.cli.submit.help"))
    s.add_argument("notebook", help=t("classroom.cli.submit.notebook"))
    s.add_argument("--lesson", default=None, help=t("classroom.cli.submit.lesson"))
    s.set_defaults(func=run_submit)

    c = subparsers.add_parser(
        "collect", help=t("classroom.cli.collect.help"), description=t("classroom.cli.collect.help")
    )
    c.add_argument("--exchange", default=None, help=t("classroom.cli.exchange"))
    c.add_argument("--out", required=True, help=t("classroom.cli.collect.out"))
    _course_arg(c)
    _filters(c)
    c.set_defaults(func=run_collect)

    f = subparsers.add_parser(
        "feedback", help=t("classroom.cli.feedback.help"), description=t("classroom.cli.feedback.help")
    )
    f.add_argument("reports", help=t("classroom.cli.feedback.reports"))
    f.add_argument("--exchange", default=None, help=t("classroom.cli.exchange"))
    _course_arg(f)
    f.add_argument("--student", action="append", default=[], help=t("classroom.cli.student"))
    f.set_defaults(func=run_feedback)


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--student", action="append", default=[], help=t("classroom.cli.student"))
    p.add_argument(
        "--lesson", dest="lessons", metavar="LESSON", action="append", default=[], help=t("classroom.cli.lesson")
    )


def grade_options(g: argparse.ArgumentParser) -> None:
    """What ``labkit grade`` takes for a class: the filters, the cache, the feedback's release."""
    _filters(g)
    g.add_argument("--no-cache", action="store_true", help=t("classroom.cli.no_cache"))
    g.add_argument("--feedback", metavar="EXCHANGE", default=None, help=t("classroom.cli.grade_feedback"))
    _course_arg(g)


def export_options(p: argparse.ArgumentParser) -> None:
    """What ``labkit export`` takes for grades (its positional is then ``labkit grade``'s output folder)."""
    p.add_argument("--moodle", metavar="CSV", default=None, help=t("classroom.cli.export.moodle"))
    p.add_argument("--canvas", metavar="CSV", default=None, help=t("classroom.cli.export.canvas"))
    p.add_argument("--csv", metavar="CSV", default=None, help=t("classroom.cli.export.csv"))
    p.add_argument("--locale", choices=LANGS, default=None, help=t("classroom.cli.export.locale"))
    _course_arg(p)


def wants_export(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "moodle", None) or getattr(args, "canvas", None) or getattr(args, "csv", None))


def _course(args: argparse.Namespace, required: bool = False) -> Any:
    from labkit.classroom.course import load

    path = getattr(args, "course", None) or envvars.get("LABKIT_COURSE")
    if not path:
        if required:
            raise OptionError(t("classroom.cli.needs_course"))
        return None
    return load(path)


def _exchange(args: argparse.Namespace, course: Any) -> Any:
    from labkit.classroom.exchange import Exchange

    folder = args.exchange or envvars.get("LABKIT_EXCHANGE")
    if not folder:
        raise OptionError(t("classroom.cli.needs_exchange"))
    return Exchange(folder, course)


def _fails(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command whose errors (an OptionError: a course file, an exchange, a refusal) are one line, exit 2."""

    def wrapped(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except OptionError as e:
            print(e, file=sys.stderr)
            return 2

    return wrapped


@_fails
def run_submit(args: argparse.Namespace) -> int:
    from labkit.classroom.client import send
    from labkit.classroom.exchange import receipt_text

    print(receipt_text(send(args.notebook, args.lesson)))
    return 0


@_fails
def run_collect(args: argparse.Namespace) -> int:
    from labkit.classroom.exchange import collect

    course = _course(args)
    got = collect(_exchange(args, course), args.out, args.student, args.lessons)
    for r in got.chosen:
        key = "classroom.collect.late" if r.late else "classroom.collect.took"
        print(t(key, student=r.student, lesson=r.lesson, when=r.received, days=r.late_days))
    for what, why in got.refused:
        print(t("classroom.collect.refused", what=what, why=why), file=sys.stderr)
    print(t("classroom.collect.done", n=len(got.chosen), out=args.out))
    return 0


@_fails
def run_feedback(args: argparse.Namespace) -> int:
    from labkit.classroom.feedback import release

    course = _course(args)
    done = release(args.reports, _exchange(args, course), course, args.student or None)
    print(t("classroom.feedback.done", n=len(done)))
    return 0


def grader(args: argparse.Namespace, grade_all: Any, ran: list[int] | None = None) -> Any:
    """``labkit grade``'s ``grade_all``: behind the cache (unless ``--no-cache``) and the filters."""
    from labkit.classroom.cache import Cache, Filters, cached, grader_version

    cache = None if getattr(args, "no_cache", False) else Cache(args.out, grader_version(), args.seed, args.timeout)
    return cached(grade_all, cache, Filters(getattr(args, "student", []), getattr(args, "lessons", [])), ran)


def after_grade(args: argparse.Namespace) -> int:
    """Once graded: the collected receipts beside the gradebook (the exports' late marks), and with
    ``--feedback`` the reports released."""
    from labkit.classroom.exchange import receipts_in
    from labkit.classroom.exports import load_receipts, write_receipts

    receipts = {**load_receipts(Path(args.out)), **receipts_in(args.submissions)}
    if receipts:
        write_receipts(args.out, receipts)
    if getattr(args, "feedback", None):
        return run_feedback(argparse.Namespace(reports=args.out, exchange=args.feedback,
                                               course=getattr(args, "course", None), student=args.student))  # fmt: skip
    return 0


@_fails
def run_export(args: argparse.Namespace) -> int:
    from labkit.classroom import exports

    course = _course(args, required=True)
    out = Path(args.notebook)
    if not (out / "gradebook.csv").is_file():
        raise OptionError(t("classroom.export.no_gradebook", path=out))
    made = {"moodle": lambda: exports.moodle(out, course), "canvas": lambda: exports.canvas(out, course),
            "csv": lambda: exports.local_csv(out, course, args.locale)}  # fmt: skip
    for kind, make in made.items():
        target = getattr(args, kind)
        if target:
            Path(target).write_text(make(), encoding="utf-8", newline="")
            print(t("classroom.export.wrote", kind=kind, path=target))
    return 0
