"""Grading a folder of submissions, and its reports: per student a JSON file and a readable table, and a CSV gradebook for the class.

reports/<student>/report.json    everything, for scripts
reports/<student>/report.md      the table a student reads, in their language
reports/gradebook.csv            one row per student, one column per lesson
reports/gradebook.md             the same, readable
"""

from __future__ import annotations

import csv
import json
import os
import re
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from labkit.grading import registry
from labkit.grading.checks import fmt_points
from labkit.grading.collect import collect
from labkit.grading.grade import NotebookScore, QuestionScore, StudentReport, grade_all
from labkit.i18n import get_lang, known, t
from labkit.wire.grading import NotebookStatus


def _percent(points: float, max_points: float) -> str:
    return f"{100 * points / max_points:.0f}%" if max_points else "-"


def feedback(q: QuestionScore, lang: str) -> str:
    """The row's feedback in ``lang`` when labkit knows the message, else as the student saw it."""
    if q.status == "missing":
        return t("grading.grade.feedback.missing", lang)
    if q.status == "extra":
        return t("grading.grade.feedback.extra", lang)
    text = "" if q.status == "correct" else q.feedback
    if q.key and known(q.key):
        try:
            text = t(q.key, lang, **q.fields)
        except (KeyError, IndexError, ValueError, TypeError):
            pass  # fields from another labkit version: keep the recorded text
    if q.hint and known(q.hint):
        text = f"{text}. {t(q.hint, lang)}" if text else t(q.hint, lang)
    if q.attempts > 1:
        question = registry.find(q.id)
        key = "grading.report.attempts_first" if question is not None and question.sealed else "grading.report.attempts"
        text = f"{text} ({t(key, lang, n=q.attempts)})".strip()
    return text


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _cell(text: Any) -> str:
    """Safe in a Markdown table: no '|' or newline, and no HTML from a student's error message."""
    text = _ANSI.sub("", str(text)).replace("\n", " ").replace("|", "\\|")
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def run_status(nb: NotebookScore, lang: str) -> str:
    return t(f"grading.grade.run.{nb.status}", lang, message=nb.message)


def _notebook_section(nb: NotebookScore, lang: str, counted: bool) -> list[str]:
    score = f"{fmt_points(nb.points, lang)}/{fmt_points(nb.max_points, lang)}"
    head = (
        t("grading.report.lesson", lang, lesson=nb.lesson or "?") + f": {score} ({_percent(nb.points, nb.max_points)})"
    )
    status = t("grading.report.file", lang, file=_cell(nb.file), status=_cell(run_status(nb, lang)), seconds=nb.seconds)
    lines = [f"## {_cell(head)}", "", status]
    if not counted:
        lines += ["", f"*{t('grading.report.not_counted', lang)}*"]
    cols = ["question", "result", "points", "feedback"]
    rows = [
        [
            q.id,
            t(f"grading.grade.status.{q.status}", lang),
            f"{fmt_points(q.points, lang)}/{fmt_points(q.max_points, lang)}",
            feedback(q, lang),
        ]
        for q in nb.questions
    ]
    lines += ["", *_table([t(f"grading.report.col.{c}", lang) for c in cols], rows)]
    if nb.errors:
        lines += ["", t("grading.report.errors", lang)]
        for e in nb.errors:
            what = f"{e['ename']}: {_cell(e['evalue'])[:200]}" if e["evalue"] else e["ename"]
            lines.append(f"- {t('grading.report.cell', lang, cell=e['cell'])}: {what}")
    return lines + [""]


def student_totals(
    rep: StudentReport, lessons: dict[str, float] | None = None
) -> tuple[dict[str, float], float, float]:
    """(points per lesson, total, max total); ``lessons`` (lesson -> max) adds the ones not handed in."""
    best = rep.best()
    points = {lesson: nb.points for lesson, nb in best.items()}
    maxima = dict(lessons) if lessons is not None else {lesson: nb.max_points for lesson, nb in best.items()}
    return points, sum(points.get(k, 0) for k in maxima), sum(maxima.values())


def student_markdown(rep: StudentReport) -> str:
    lang = rep.lang
    _, total, max_total = student_totals(rep)
    lines = [f"# {t('grading.report.title', lang, student=_cell(rep.student))}", ""]
    score = f"{fmt_points(total, lang)}/{fmt_points(max_total, lang)}"
    lines += [t("grading.report.total", lang, score=score, percent=_percent(total, max_total)), ""]
    if not rep.notebooks:
        lines += [t("grading.report.no_submissions", lang), ""]
    best = rep.best()
    for nb in rep.notebooks:
        lines += _notebook_section(nb, lang, best.get(nb.lesson or "") is nb)
    return "\n".join(lines)


def student_json(rep: StudentReport) -> dict[str, Any]:
    points, total, max_total = student_totals(rep)
    return {
        "student": rep.student,
        "lang": rep.lang,
        "lessons": {k: {"points": v, "max_points": rep.best()[k].max_points} for k, v in points.items()},
        "points": total,
        "max_points": max_total,
        "notebooks": [
            {**asdict(nb), "points": nb.points, "max_points": nb.max_points, "status_text": run_status(nb, rep.lang)}
            for nb in rep.notebooks
        ],
    }


def write_student(rep: StudentReport, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(student_json(rep), indent=2, ensure_ascii=False) + "\n")
    (folder / "report.md").write_text(student_markdown(rep))


def lesson_maxima(students: list[StudentReport]) -> dict[str, float]:
    """Every lesson anyone handed in, with its points: from the registry when it knows the lesson."""
    maxima: dict[str, float] = {}
    for rep in students:
        for lesson, nb in rep.best().items():
            registered = sum(q.points for q in registry.lesson_questions(lesson))
            maxima[lesson] = max(maxima.get(lesson, 0), registered or nb.max_points)
    return dict(sorted(maxima.items()))


def write_gradebook(students: list[StudentReport], out: Path, lang: str | None = None) -> None:
    """gradebook.csv (stable, language-independent column names, for spreadsheets) and gradebook.md."""
    lang = lang or get_lang()
    maxima = lesson_maxima(students)
    csv_rows, md_rows = [], []
    for rep in students:
        points, total, max_total = student_totals(rep, maxima)
        per_lesson = [fmt_points(points.get(k, 0), "en") for k in maxima]  # the CSV: 0.5, read by spreadsheets
        percent = _percent(total, max_total)
        csv_rows.append([rep.student, *per_lesson, fmt_points(total, "en"), fmt_points(max_total, "en"), percent])
        md_rows.append(
            [
                rep.student,
                *[fmt_points(points.get(k, 0), lang) for k in maxima],
                f"{fmt_points(total, lang)}/{fmt_points(max_total, lang)}",
                percent,
            ]
        )
    with open(out / "gradebook.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", *maxima, "total", "max_points", "percent"])
        w.writerows(csv_rows)
    head = [t("grading.report.col.student", lang), *(f"{k} (/{fmt_points(m, lang)})" for k, m in maxima.items())]
    head += [t("grading.report.col.total", lang), "%"]
    (out / "gradebook.md").write_text("\n".join(_table(head, md_rows)) + "\n")


# -- a folder of submissions: grade it, write its reports ------------------------------------


def report_lang(notebooks: list[NotebookScore], forced: str | None) -> str:
    """The report speaks the student's language: the one their checks spoke, unless forced."""
    if forced:
        return forced
    langs = Counter(nb.lang for nb in notebooks if nb.lang)
    return langs.most_common(1)[0][0] if langs else get_lang()


def grade_folder(
    submissions: str | Path,
    out_dir: str | Path,
    timeout: float = 600,
    lang: str | None = None,
    jobs: int = 1,
    log: Any = None,
    box: Any = None,
    env: dict[str, str] | None = None,
    seed: int | None = None,
    grade: Any = grade_all,
) -> list[StudentReport]:
    """Grade every student in ``submissions``; write their reports and the gradebook under ``out_dir``.

    ``jobs`` notebooks run at once (each in its own sandbox: ``box``, ``sandbox.find()``'s by default);
    ``log`` is called with each NotebookScore; ``env`` goes to every sandbox (see ``grade_notebook``).
    ``grade``: ``grade_all`` or a wrapper of it (``labkit.classroom.cache``: kept scores, filters), whose
    None for a notebook leaves it out, and a student none of whose notebooks was graded out of this grading.
    """
    root, out = Path(submissions), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    found = collect(root, skip=out)
    names = sorted({*found.notebooks, *found.refused})
    tasks, groups = [], []
    for student in names:  # a student's notebooks go to one judge together (grade_all)
        for path, name in found.notebooks.get(student, []):
            tasks.append((path, out / student_folder(student) / (os.path.splitext(name)[0] + ".executed.ipynb"), name))
            groups.append(student)
    scores = iter(grade(tasks, timeout, jobs, log, box, env, seed, groups))
    students = []
    for student in names:
        handed = found.notebooks.get(student, [])
        mine = [score for score in [next(scores) for _ in handed] if score is not None]
        if handed and not mine:  # filtered out (labkit grade --student, --lesson), and never graded before
            continue
        mine += [
            NotebookScore(name, None, NotebookStatus.REFUSED, message=why)
            for name, why in found.refused.get(student, [])
        ]
        rep = StudentReport(student, mine, report_lang(mine, lang))
        try:
            write_student(rep, out / student_folder(student))
        except OSError as e:  # one student's report folder: said, and the class's gradebook still written
            print(f"labkit grade: the report of {student!r} could not be written ({type(e).__name__})", file=sys.stderr)
        students.append(rep)
    write_gradebook(students, out, lang)
    return students


def student_folder(student: str) -> str:
    """A student's report folder: their name, made safe as one path component."""
    safe = re.sub(r"[^\w.@+-]", "_", student).strip(".") or "_"
    return safe[:100]
