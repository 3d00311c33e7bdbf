"""Grading: run each submission in a fresh kernel and read back every ``labkit.check``.

    labkit grade submissions/ --out reports/ --timeout 600

A notebook is executed by papermill, top to bottom, in a new kernel of the
Python that runs the grader (whatever kernelspecs the machine has), with its
own outputs cleared first so that nothing the student saved can count. A
crashing cell does not stop the cells after it (``allow_errors``); the time
limit is for the whole notebook, and a notebook stopped by it, or whose kernel
died, keeps the points of the checks that ran before.

Scores come from the check records in the executed notebook's outputs; the
questions and their points come from the registry, so a check that never ran
counts 0. The lesson is ``metadata.labkit.lesson`` (the student build keeps it),
else the lesson of the check ids found, so renamed files and added cells change
nothing.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from labkit.grading import registry
from labkit.grading.build import check_ids, lesson_from_ids
from labkit.grading.checks import MIME, judge_record
from labkit.i18n import t

PAPERMILL_MARKER_TAG = "papermill-error-cell-tag"  # the banner cells papermill adds after an error


@dataclass
class QuestionScore:
    id: str
    status: str  # correct | wrong | unanswered | missing (never ran) | extra (not a question of this lesson)
    points: float
    max_points: float
    key: str | None = None  # the feedback's message key and fields, to show it in the report's language
    fields: dict[str, Any] = field(default_factory=dict)
    feedback: str = ""  # the feedback as the student saw it
    attempts: int = 0
    cell: int | None = None


@dataclass
class NotebookScore:
    file: str
    lesson: str | None
    status: str  # ok | errors | timeout | died | failed | unreadable
    questions: list[QuestionScore] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)  # {"cell", "ename", "evalue"}
    message: str = ""  # why the run stopped, for timeout, died and failed
    seconds: float = 0.0
    lang: str | None = None  # the language the checks spoke in the kernel
    executed: str | None = None  # where the executed notebook was written

    @property
    def points(self) -> float:
        return sum(q.points for q in self.questions)

    @property
    def max_points(self) -> float:
        return sum(q.max_points for q in self.questions if q.status != "extra")


# -- running one notebook ----------------------------------------------------------


def _kernel_manager_class(env: dict[str, str], log: Any) -> type:
    """A kernel manager whose kernel is ``sys.executable`` with ``env`` added, its output to ``log``.

    The kernelspec is built here rather than looked up, so a stale ``python3`` spec in
    the user's Jupyter folders (pointing at another Python) cannot be picked up.
    """
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class GradingSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            return KernelSpec(argv=argv, env=env, display_name="Python 3 (labkit grader)", language="python")

    class GradingKernelManager(AsyncKernelManager):
        def _kernel_spec_manager_default(self) -> KernelSpecManager:
            return GradingSpecs()

        async def start_kernel(self, **kw: Any) -> None:
            kw.setdefault("stdout", log)
            kw.setdefault("stderr", log)
            await super().start_kernel(**kw)

    return GradingKernelManager


def cleared(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy with no outputs: a cell the run never reaches must not keep what the student saved."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def execute(
    nb: nbformat.NotebookNode,
    out_path: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    parameters: dict[str, Any] | None = None,
) -> tuple[nbformat.NotebookNode, str, str]:
    """Run ``nb`` with papermill into ``out_path``; (executed notebook, status, message).

    ``timeout`` (seconds) is for all the cells together, the kernel's start not included.
    """
    import papermill
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    deadline: float | None = None

    def cell_timeout(cell: Any) -> int:
        nonlocal deadline
        if deadline is None:  # the clock starts with the first cell
            deadline = time.monotonic() + timeout
        return max(1, math.ceil(deadline - time.monotonic()))

    out_path.parent.mkdir(parents=True, exist_ok=True)
    status, message = "ok", ""
    kernel_env = {"LABKIT_GRADING": "1", **(env or {})}
    with open(out_path.with_suffix(".kernel.log"), "w") as log, tempfile.TemporaryDirectory() as cwd:
        try:
            papermill.execute_notebook(
                cleared(nb),
                str(out_path),
                parameters=parameters,
                kernel_name="python3",
                kernel_manager_class=_kernel_manager_class(kernel_env, log),
                allow_errors=True,  # a crashing cell must not stop the checks after it
                timeout_func=cell_timeout,
                resources={"metadata": {"path": cwd}},  # the kernel's working folder: empty, thrown away
                progress_bar=False,
            )
        except PapermillExecutionError:
            status = "errors"
        except CellTimeoutError:
            status, message = "timeout", f"{timeout:g} s"
        except DeadKernelError as e:
            status, message = "died", str(e)
        except Exception as e:  # a kernel that does not start, a broken notebook: report it, go on
            status, message = "failed", f"{type(e).__name__}: {e}"
    try:
        executed = nbformat.read(out_path, as_version=4)
    except (OSError, ValueError):
        executed = cleared(nb)
    return executed, status, message


# -- reading the results back --------------------------------------------------------


def student_cells(nb: nbformat.NotebookNode) -> Iterator[tuple[int, Any]]:
    """(index in the student's file, cell), skipping the banner cells papermill inserts."""
    i = 0
    for cell in nb.cells:
        if PAPERMILL_MARKER_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        yield i, cell
        i += 1


def check_records(nb: nbformat.NotebookNode) -> list[tuple[int, dict[str, Any]]]:
    """Every check record in the outputs, with its cell index, in execution order."""
    found = []
    for i, cell in student_cells(nb):
        for out in cell.get("outputs", []):
            rec = out.get("data", {}).get(MIME)
            if isinstance(rec, dict) and isinstance(rec.get("id"), str):
                found.append((i, dict(rec)))
    return found


def cell_errors(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    return [
        {"cell": i, "ename": out.get("ename", ""), "evalue": out.get("evalue", "")}
        for i, cell in student_cells(nb)
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]


def lesson_of(nb: nbformat.NotebookNode, records: list[tuple[int, dict[str, Any]]]) -> str | None:
    """The metadata's lesson, else the lesson most of the checks belong to."""
    lesson = (nb.metadata.get("labkit") or {}).get("lesson")
    if lesson:
        return str(lesson)
    return lesson_from_ids([r["id"] for _, r in records]) or lesson_from_ids(check_ids(nb))


def score(lesson: str | None, records: list[tuple[int, dict[str, Any]]]) -> list[QuestionScore]:
    """One row per question of the lesson, then any other check seen.

    The last attempt counts, except for a sealed (multiple-choice) question: its first recorded
    answer counts, judged here, since the notebook never told the student whether it was right.
    """
    last: dict[str, tuple[int, dict[str, Any]]] = {}
    attempts: Counter[str] = Counter()
    for cell, rec in records:
        q = registry.find(rec["id"])
        if not (q is not None and q.sealed and rec["id"] in last):
            last[rec["id"]] = (cell, rec)
        attempts[rec["id"]] += 1
    questions = registry.lesson_questions(lesson) if lesson else []
    if not questions:  # a lesson the grader has no questions for: trust the records' points
        questions = [registry.Question(i, float(r.get("max_points") or 0)) for i, (_, r) in last.items()]
    rows = []
    for q in questions:
        if q.id not in last:
            rows.append(QuestionScore(q.id, "missing", 0, q.points))
            continue
        cell, rec = last.pop(q.id)
        if q.sealed:
            rec = _judge_sealed(q, rec)
        status = rec.get("status") if rec.get("status") in ("correct", "wrong", "unanswered") else "wrong"
        pts = q.points if status == "correct" else 0
        rows.append(_row(q.id, status, pts, q.points, rec, attempts[q.id], cell))
    for qid, (cell, rec) in last.items():  # checks of another lesson, or ids the grader does not know
        rows.append(_row(qid, "extra", 0, 0, rec, attempts[qid], cell))
    return rows


def _judge_sealed(q: registry.Question, rec: dict[str, Any]) -> dict[str, Any]:
    """A sealed question's record with the grader's verdict on its recorded value."""
    if rec.get("status") != "recorded":
        return {**rec, "status": "unanswered" if rec.get("status") == "unanswered" else "wrong"}
    status, key, fields = judge_record(q, rec.get("value"))
    feedback = t(key, rec.get("lang"), **fields) if key else ""
    return {**rec, "status": status, "key": key, "fields": fields, "feedback": feedback}


def _row(qid: str, status: str, pts: float, max_pts: float, rec: dict, attempts: int, cell: int) -> QuestionScore:
    fields = rec.get("fields") if isinstance(rec.get("fields"), dict) else {}
    return QuestionScore(
        qid, status, pts, max_pts, rec.get("key"), fields, str(rec.get("feedback", "")), attempts, cell
    )


def grade_notebook(
    path: Path,
    out_path: Path,
    timeout: float,
    name: str | None = None,
    parameters: dict[str, Any] | None = None,
) -> NotebookScore:
    """Execute one submission and score it; never raises for anything the notebook does."""
    name = name or path.name
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # not JSON, not a notebook: 0 points, and the reason in the report
        return NotebookScore(name, None, "unreadable", message=f"{type(e).__name__}: {e}")
    env = {}
    nb_lang = (nb.metadata.get("labkit") or {}).get("lang")
    if nb_lang:  # a Romanian edition speaks Romanian in the grader's kernel too
        env["LABKIT_LANG"] = str(nb_lang)
    start = time.monotonic()
    executed, status, message = execute(nb, out_path, timeout, env, parameters)
    records = check_records(executed)
    lesson = lesson_of(executed, records)
    langs = Counter(r.get("lang") for _, r in records if r.get("lang"))
    return NotebookScore(
        file=name,
        lesson=lesson,
        status=status,
        questions=score(lesson, records),
        errors=cell_errors(executed),
        message=message,
        seconds=round(time.monotonic() - start, 2),
        lang=langs.most_common(1)[0][0] if langs else nb_lang,
        executed=str(out_path),
    )


# -- a folder of submissions ------------------------------------------------------------


def find_submissions(root: Path, skip: Path | None = None) -> dict[str, list[tuple[Path, str]]]:
    """{student: [(notebook, name relative to the student)]}.

    A folder per student (searched recursively, as nbgrader's ``submitted/<student>/<assignment>/``),
    or files named ``<student>_<anything>.ipynb`` directly in ``root``.
    """
    found: dict[str, list[tuple[Path, str]]] = {}
    skip = skip.resolve() if skip else None
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or (skip and entry.resolve() == skip):
            continue
        if entry.is_dir():
            files = [f for f in sorted(entry.rglob("*.ipynb")) if ".ipynb_checkpoints" not in f.parts]
            if files:
                found.setdefault(entry.name, []).extend((f, str(f.relative_to(entry))) for f in files)
        elif entry.suffix == ".ipynb":
            student = entry.stem.split("_", 1)[0]
            found.setdefault(student, []).append((entry, entry.name))
    return found


@dataclass
class StudentReport:
    student: str
    notebooks: list[NotebookScore]
    lang: str

    def best(self) -> dict[str, NotebookScore]:
        """Per lesson, the submission with the most points (a student may hand in two copies)."""
        best: dict[str, NotebookScore] = {}
        for nb in self.notebooks:
            if nb.lesson is None:  # unreadable, or no check at all: in the report, in no lesson's column
                continue
            if nb.lesson not in best or nb.points > best[nb.lesson].points:
                best[nb.lesson] = nb
        return best


def grade_all(tasks: list[tuple[Path, Path, str]], timeout: float, jobs: int, log: Any) -> list[NotebookScore]:
    """Grade (notebook, executed path, name) tasks, ``jobs`` at a time, in the order given."""
    if jobs <= 1:
        scores = []
        for path, executed, name in tasks:
            scores.append(grade_notebook(path, executed, timeout, name))
            if log:
                log(scores[-1])
        return scores
    # processes, not threads: papermill and the zmq channels keep state per process; spawn,
    # not fork, because this process already has zmq threads
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(grade_notebook, p, e, timeout, n): i for i, (p, e, n) in enumerate(tasks)}
        results: dict[int, NotebookScore] = {}
        for f in as_completed(futures):
            results[futures[f]] = f.result()
            if log:
                log(results[futures[f]])
    return [results[i] for i in range(len(tasks))]
