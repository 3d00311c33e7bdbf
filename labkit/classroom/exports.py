"""Grades an LMS takes: the graded class (``labkit grade``'s reports) with the course file's roster and points.

    labkit export reports/ --course course.toml --moodle moodle.csv     # Moodle's grade import (CSV)
    labkit export reports/ --course course.toml --canvas canvas.csv     # Canvas' gradebook import
    labkit export reports/ --course course.toml --csv grades.csv        # the instructor's locale (ro: ; and ,)

A lesson's grade is the share of its questions' points the submission got, times the lesson's points in
the course file (its questions' own points when it gives none), times the late policy's factor for the
submission ``labkit collect`` chose (its receipt, kept by ``labkit grade`` in ``receipts.json``).

- **Moodle** (docs.moodle.org, "Grade import", CSV): one row per student; the first column is the field
  Moodle matches users on (``moodle_id``: "Email address", "ID number" or "Username"), mapped at import
  ("Map from" that column, "Map to" useremail / useridnumber / username); then a column per grade item
  and, beside each, its feedback column, which holds the late mark.
- **Canvas** (Canvas guides, "How do I import grades in the Gradebook?"): ``Student, ID, SIS User ID,
  SIS Login ID, Section``, then one column per assignment named ``Name (id)`` with Canvas' assignment id
  (``canvas_id`` in the course file; a name alone makes a new assignment), a "Points Possible" row first,
  and the late marks in ``Notes``.
- **The locale's CSV**: the separator and decimal mark of the instructor's locale (``locale`` in the
  course file: Romanian Excel reads ``;`` and ``,``), one late column per lesson.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.classroom.course import Course, Student
from labkit.classroom.exchange import Receipt
from labkit.i18n import t

RECEIPTS = "receipts.json"  # beside gradebook.csv: the collected submissions' receipts (late marks)
MOODLE_ID = {"email": "Email address", "idnumber": "ID number", "username": "Username"}
SEPARATORS = {"en": (",", "."), "ro": (";", ",")}  # the list separator and decimal mark of each locale


@dataclass
class LessonGrade:
    lesson: str
    raw: float  # the questions' points the submission got
    raw_max: float
    points: float  # in the course: scaled to the lesson's points, the late factor applied
    max_points: float
    late_days: int = 0
    submitted: bool = True


@dataclass
class StudentGrade:
    student: Student
    lessons: dict[str, LessonGrade] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(g.points for g in self.lessons.values())

    @property
    def max_total(self) -> float:
        return sum(g.max_points for g in self.lessons.values())


def _reports(out: Path) -> dict[str, dict[str, Any]]:
    reports = {}
    for path in sorted(out.glob("*/report.json")):
        try:
            rep = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        reports[rep.get("student", path.parent.name)] = rep
    return reports


def load_receipts(out: Path) -> dict[tuple[str, str], Receipt]:
    try:
        rows = json.loads((out / RECEIPTS).read_text())
    except (OSError, ValueError):
        return {}
    return {(r["student"], r["lesson"]): Receipt(**r) for r in rows if isinstance(r, dict)}


def grades(out: str | Path, course: Course) -> list[StudentGrade]:
    """Every student of the roster (then anyone else graded), every lesson of the course file."""
    out = Path(out)
    reports, receipts = _reports(out), load_receipts(out)
    roster = list(course.students) + [Student(s) for s in reports if course.student(s) is None]
    rows = []
    for student in roster:
        rep = reports.get(student.id, {})
        got = rep.get("lessons", {})
        row = StudentGrade(student)
        for lesson in course.lessons:
            mine = got.get(lesson.id)
            receipt = receipts.get((student.id, lesson.id))
            factor = receipt.factor if receipt is not None else 1.0
            raw, raw_max = (float(mine["points"]), float(mine["max_points"])) if mine else (0.0, 0.0)
            worth = lesson.points or raw_max
            scaled = (raw / raw_max * worth if raw_max else 0.0) * factor
            row.lessons[lesson.id] = LessonGrade(lesson.id, raw, raw_max, round(scaled, 4), worth,
                                                 receipt.late_days if receipt else 0, mine is not None)  # fmt: skip
        rows.append(row)
    return rows


def _number(x: float, mark: str = ".") -> str:
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return text.replace(".", mark)


def late_mark(g: LessonGrade, lang: str) -> str:
    if not g.submitted:
        return t("classroom.export.missing", lang)
    return t("classroom.export.late", lang, days=g.late_days) if g.late_days else ""


def _write(rows: list[list[str]], delimiter: str = ",") -> str:
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    return buf.getvalue()


def moodle(out: str | Path, course: Course) -> str:
    ident = course.course.moodle_id
    head = [MOODLE_ID[ident]]
    for lesson in course.lessons:
        name = lesson.title or lesson.id
        head += [name, f"Feedback: {name}"]
    rows = [head]
    for g in grades(out, course):
        s = g.student
        row = [{"email": s.email, "idnumber": s.sis_id, "username": s.id}[ident]]
        for lesson in course.lessons:
            lg = g.lessons[lesson.id]
            row += [_number(lg.points), late_mark(lg, s.language)]
        rows.append(row)
    return _write(rows)


def canvas(out: str | Path, course: Course) -> str:
    head = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    for lesson in course.lessons:
        name = lesson.title or lesson.id
        head.append(f"{name} ({lesson.canvas_id})" if lesson.canvas_id else name)
    rows = [head + ["Notes"], ["    Points Possible", "", "", "", ""] + [_number(x.points) for x in course.lessons]]
    rows[1].append("")
    for g in grades(out, course):
        s = g.student
        notes = "; ".join(f"{k}: {late_mark(v, 'en')}" for k, v in g.lessons.items() if late_mark(v, "en"))
        row = [s.name or s.id, "", s.sis_id, s.id, s.section]
        rows.append(row + [_number(g.lessons[x.id].points) for x in course.lessons] + [notes])
    return _write(rows)


def local_csv(out: str | Path, course: Course, lang: str | None = None) -> str:
    """The gradebook with the roster's ids, in ``lang``'s (the course's locale's) separator and decimal mark."""
    lang = lang or course.course.locale
    sep, mark = SEPARATORS.get(lang, SEPARATORS["en"])
    cols = ("classroom.export.col.student", "classroom.export.col.name", "classroom.export.col.email",
            "classroom.export.col.sis_id")  # fmt: skip
    head = [t(key, lang) for key in cols]
    for lesson in course.lessons:
        head += [lesson.id, t("classroom.export.col.late", lang, lesson=lesson.id)]
    head += [t("classroom.export.col.total", lang), t("classroom.export.col.max", lang)]
    rows = [head]
    for g in grades(out, course):
        s = g.student
        row = [s.id, s.name, s.email, s.sis_id]
        for lesson in course.lessons:
            lg = g.lessons[lesson.id]
            row += [_number(lg.points, mark), late_mark(lg, lang)]
        rows.append(row + [_number(g.total, mark), _number(g.max_total, mark)])
    return _write(rows, sep)


def write_receipts(out: str | Path, receipts: dict[tuple[str, str], Receipt]) -> None:
    """The receipts of what was graded, beside the gradebook (``labkit grade`` keeps them there)."""
    from dataclasses import asdict

    rows = [asdict(r) for _, r in sorted(receipts.items())]
    (Path(out) / RECEIPTS).write_text(json.dumps(rows, indent=1) + "\n")
