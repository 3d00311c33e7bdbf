"""Feedback returned: each student's report, in their language, released into the exchange.

    labkit feedback reports/ --exchange /srv/labkit-hub/exchange --course course.toml

writes, per student graded, ``<exchange>/feedback/<student>/``:

    report.md      the table they read, in the roster's language for them (else the one their checks spoke)
    report.json    everything the grader said
    grades.json    the released grades per lesson (what ``labkit.progress()`` shows)

The student sees them as ``~/feedback`` in JupyterLab: on the one-server hub a link to that folder, which
they can read and not write; on any other spawner, copied from the exchange service when they ask
(``labkit.progress()``, or ``fetch_feedback``).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from labkit.classroom.client import GRADES
from labkit.classroom.course import Course
from labkit.classroom.exchange import Exchange
from labkit.classroom.exports import grades


def load_report(path: Path) -> Any:
    """A ``report.json`` back as the grader's ``StudentReport`` (to write it again in another language)."""
    from labkit.grading.grade import NotebookScore, QuestionScore, StudentReport

    data = json.loads(path.read_text())
    nb_fields = {f.name for f in dataclasses.fields(NotebookScore)}
    q_fields = {f.name for f in dataclasses.fields(QuestionScore)}
    notebooks = []
    for nb in data.get("notebooks", []):
        kept = {k: v for k, v in nb.items() if k in nb_fields}
        kept["questions"] = [QuestionScore(**{k: v for k, v in q.items() if k in q_fields}) for q in nb["questions"]]
        notebooks.append(NotebookScore(**kept))
    return StudentReport(data["student"], notebooks, data.get("lang") or "en")


def _grades_json(student: str, report: dict[str, Any], course: Course | None, out: Path) -> dict[str, Any]:
    released = datetime.now(UTC).isoformat()
    if course is None:  # the questions' own points
        return {"student": student, "released": released, "lessons": report.get("lessons", {})}
    mine = next((g for g in grades(out, course) if g.student.id == student), None)
    lessons = {}
    for lesson, g in mine.lessons.items() if mine else ():
        if g.submitted:
            lessons[lesson] = {"points": g.points, "max_points": g.max_points, "late_days": g.late_days}
    return {"student": student, "released": released, "lessons": lessons}


def release(out: str | Path, exchange: Exchange, course: Course | None = None,
            students: list[str] | None = None) -> list[str]:  # fmt: skip
    """Release the reports under ``out`` (``labkit grade --out``) to their students; the students released."""
    from labkit.grading.report import student_markdown

    out = Path(out)
    done = []
    for path in sorted(out.glob("*/report.json")):
        if path.is_symlink():
            continue
        rep = load_report(path)
        if students is not None and rep.student not in students:
            continue
        member = course.student(rep.student) if course is not None else None
        if member is not None:
            rep.lang = member.language  # the roster says which language the student reads
        folder = exchange.feedback_folder(rep.student)
        raw = json.loads(path.read_text())
        _replace(folder / "report.md", student_markdown(rep))
        _replace(folder / "report.json", json.dumps(raw, indent=2, ensure_ascii=False) + "\n")
        _replace(folder / GRADES, json.dumps(_grades_json(rep.student, raw, course, out), indent=1) + "\n")
        done.append(rep.student)
    return done


def _replace(path: Path, text: str) -> None:
    """Written beside and renamed over: a link put there is replaced, never written through."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o644)
    tmp.replace(path)
