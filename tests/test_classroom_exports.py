"""Grades an LMS takes, and feedback returned (issue 48): Moodle's grade import CSV, Canvas' gradebook import
CSV and the locale's CSV from a graded class and the roster, with the ids, the points and the late marks;
each student's report released in their language, and ``labkit.progress()`` showing the released grades.

The graded class is written as ``labkit grade`` writes it (report.json per student, gradebook.csv, and the
collected receipts in receipts.json); no kernel runs here.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from labkit.classroom import exports
from labkit.classroom.course import parse
from labkit.classroom.exchange import Exchange, Receipt
from labkit.classroom.feedback import release
from labkit.i18n import language

COURSE = """
[course]
name = "test"
locale = "ro"
moodle_id = "idnumber"
[late]
per_day = 0.1
cutoff_days = 3

[[students]]
id = "ana"
name = "Ana Popescu"
email = "ana@example.ro"
sis_id = "S1"
language = "ro"
section = "A"

[[students]]
id = "ben"
name = "Ben Ionescu"
email = "ben@example.ro"
sis_id = "S2"
section = "B"

[[students]]
id = "cid"
name = "Cid"
sis_id = "S3"

[[lessons]]
id = "fixture"
title = "Memory"
deadline = 2026-10-19T23:59:00+03:00
points = 10
canvas_id = 4321

[[lessons]]
id = "lesson1"
deadline = 2026-10-26T23:59:00+03:00
points = 5
"""


def report(student: str, lessons: dict[str, tuple[float, float]], lang: str = "en") -> dict:
    notebooks = [
        {"file": f"{k}.ipynb", "lesson": k, "status": "ok", "questions": [
            {"id": f"{k}.q", "status": "correct" if p == m else "wrong", "points": p, "max_points": m}],
         "errors": [], "message": "", "seconds": 1.0, "lang": lang, "executed": None, "sandbox": "none", "seed": 1,
         "points": p, "max_points": m, "status_text": "ok"}
        for k, (p, m) in lessons.items()
    ]  # fmt: skip
    return {"student": student, "lang": lang, "notebooks": notebooks,
            "lessons": {k: {"points": p, "max_points": m} for k, (p, m) in lessons.items()}}  # fmt: skip


@pytest.fixture
def graded(tmp_path):
    out = tmp_path / "reports"
    for student, lessons in (("ana", {"fixture": (4, 4), "lesson1": (1, 2)}), ("ben", {"fixture": (3, 4)})):
        (out / student).mkdir(parents=True)
        (out / student / "report.json").write_text(json.dumps(report(student, lessons)))
    (out / "gradebook.csv").write_text("student,fixture,total,max_points,percent\n")
    when = datetime(2026, 10, 21, 9, 0, tzinfo=UTC).isoformat()
    late = Receipt("ben", "fixture", "b.ipynb", when, "0" * 64, 10, late_days=2, factor=0.8)
    exports.write_receipts(out, {("ben", "fixture"): late})
    return out, parse(COURSE)


def rows(text: str, delimiter: str = ",") -> list[list[str]]:
    return list(csv.reader(io.StringIO(text), delimiter=delimiter))


def test_moodle_import_has_the_identifier_then_grade_and_feedback_columns(graded):
    out, course = graded
    table = rows(exports.moodle(out, course))
    assert table[0] == ["ID number", "Memory", "Feedback: Memory", "lesson1", "Feedback: lesson1"]
    by_id = {r[0]: r for r in table[1:]}
    assert by_id["S1"][1:] == ["10", "", "2.5", ""]  # 4/4 of 10 points, 1/2 of 5
    assert by_id["S2"][1:3] == ["6", "late 2 days"]  # 3/4 of 10, times 0.8 for two days late; ben reads English
    assert by_id["S3"][1:] == ["0", "not submitted", "0", "not submitted"]  # on the roster, nothing handed in
    email = parse(COURSE.replace('moodle_id = "idnumber"', 'moodle_id = "email"'))
    assert rows(exports.moodle(out, email))[1][0] == "ana@example.ro"


def test_canvas_import_columns_ids_points_possible_and_notes(graded):
    out, course = graded
    table = rows(exports.canvas(out, course))
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Memory (4321)", "lesson1", "Notes"]
    assert table[1][:7] == ["    Points Possible", "", "", "", "", "10", "5"]
    ben = next(r for r in table[2:] if r[2] == "S2")
    assert ben[:7] == ["Ben Ionescu", "", "S2", "ben", "B", "6", "0"]
    assert "fixture: late 2 days" in ben[7]


def test_the_locale_csv_uses_its_separator_and_decimal_mark(graded):
    out, course = graded
    ro = exports.local_csv(out, course)  # the course's locale: ro
    table = rows(ro, ";")
    assert table[0][:4] == ["student", "nume", "e-mail", "număr matricol"]
    ana = next(r for r in table[1:] if r[0] == "ana")
    assert ana[4:] == ["10", "", "2,5", "", "12,5", "15"]
    ben = next(r for r in table[1:] if r[0] == "ben")
    assert ben[5] == "întârziere 2 zile"
    en = rows(exports.local_csv(out, course, "en"))
    assert next(r for r in en[1:] if r[0] == "ana")[6] == "2.5"


def test_labkit_export_writes_the_three(graded, tmp_path, capsys):
    from labkit.cli import main

    out, _ = graded
    course = tmp_path / "class.toml"
    course.write_text(COURSE)
    files = {k: tmp_path / f"{k}.csv" for k in ("moodle", "canvas", "csv")}
    args = ["export", str(out), "--course", str(course)] + [a for k, p in files.items() for a in (f"--{k}", str(p))]
    assert main(args) == 0
    assert all(p.read_text().count("\n") == 4 + (k == "canvas") for k, p in files.items())
    assert main(["export", str(tmp_path), "--moodle", str(files["moodle"]), "--course", str(course)]) == 2


def test_feedback_is_released_in_the_students_language_with_grades(graded, tmp_path, monkeypatch):
    out, course = graded
    ex = Exchange(tmp_path / "exchange", course)
    assert sorted(release(out, ex, course)) == ["ana", "ben"]
    ana = ex.feedback_files("ana")
    assert sorted(ana) == ["grades.json", "report.json", "report.md"]
    assert "Lecția" in ana["report.md"].read_text() or "lecția" in ana["report.md"].read_text()  # the roster: ro
    assert "Lesson" in ex.feedback_files("ben")["report.md"].read_text()
    grades = json.loads(ex.feedback_files("ben")["grades.json"].read_text())
    assert grades["lessons"]["fixture"] == {"points": 6.0, "max_points": 10.0, "late_days": 2}

    # the student's side: ~/feedback (on the one-server hub, the exchange's folder itself)
    from labkit.grading import selfstudy

    home = tmp_path / "home-ana"
    home.mkdir()
    (home / "feedback").symlink_to(ex.feedback_folder("ana"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("LABKIT_EXCHANGE_URL", raising=False)
    assert selfstudy.released_grades() == {"fixture": 10.0, "lesson1": 2.5}
    with language("en"):
        shown = str(selfstudy.progress(tmp_path / "no-workspace")).splitlines()
    assert shown[0].split()[-2:] == ["released", "grade"]
    lesson1 = next(line for line in shown if line.startswith("lesson1 "))
    assert lesson1.split()[-1] == "2.5" and next(x for x in shown if x.startswith("lesson2 ")).split()[-1] == "-"


def test_deadline_moved_after_submission_is_what_collect_uses(tmp_path):
    # the course file at collect time decides: an extension granted after the fact makes it on time
    course = parse(COURSE)
    ex = Exchange(tmp_path / "ex", course)
    deadline = course.lesson("fixture").deadline
    ex.receive("ana", b'{"cells": [], "metadata": {"labkit": {"lesson": "fixture"}}}', "a.ipynb",
               now=deadline + timedelta(hours=5))  # fmt: skip
    assert ex.receipts()[0].late_days == 1
    from labkit.classroom.exchange import choose

    moved = parse(COURSE.replace("2026-10-19T23:59:00+03:00", "2026-10-22T23:59:00+03:00"))
    assert not choose(ex.receipts(), moved).chosen[0].late
    assert Path(ex.root / ex.receipts()[0].file).exists()
