"""Grading: run each submission in a sandbox of its own, and judge what it handed in.

    labkit grade submissions/ --out reports/ --timeout 600

A notebook is copied into a fresh sandbox (``labkit.grading.sandbox``) and executed there by
papermill (``labkit.grading.runner``), top to bottom, in a new kernel of the Python that runs
the grader, with its own outputs cleared first so that nothing the student saved can count.
A crashing cell does not stop the cells after it; the time limit is for the whole notebook,
and a notebook stopped by it, or whose kernel died, keeps the points of the checks that ran
before. While it runs, labkit's instrumentation on its ranks sends what it observes to the
grader's sink (``labkit.grading.sink``), outside the sandbox.

Scoring runs outside the sandbox, on what came out of it: the check records in the executed
notebook are the student's claims, judged by ``labkit.grading.judge`` (formulas run again by
the judge process, in a second sandbox, at points of the grader's own; exercises on the ranks
judged from the sink). The questions and their points come from the registry, so a check that
never ran counts 0. The lesson is ``metadata.labkit.lesson`` (the student build keeps it), else
the lesson of the check ids found, so renamed files and added cells change nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from labkit.grading import judge, registry, sandbox
from labkit.grading.build import check_ids, lesson_from_ids
from labkit.grading.checks import MIME
from labkit.grading.runner import cleared
from labkit.grading.sink import Sink

__all__ = ["NotebookScore", "QuestionScore", "cleared", "grade_notebook", "score"]

PAPERMILL_MARKER_TAG = "papermill-error-cell-tag"  # the banner cells papermill adds after an error
STARTUP = 180  # seconds a sandbox may take beyond the notebook's cells (the kernel's start, papermill)
JUDGE_SECONDS = 300  # the judge's sandbox, all of a notebook's functions
MAX_READ = 256 << 20  # bytes of a file from the sandbox the grader reads


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
    hint: str | None = None  # with a diagnosis as ``key``: the hint for the tries the student made


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
    sandbox: str = ""  # the sandbox it ran in (bubblewrap, none)

    @property
    def points(self) -> float:
        return sum(q.points for q in self.questions)

    @property
    def max_points(self) -> float:
        return sum(q.max_points for q in self.questions if q.status != "extra")


# -- running one notebook ----------------------------------------------------------


def labkit_home() -> str:
    """The folder that holds the ``labkit`` package the sandbox imports (it sees that package alone)."""
    import labkit

    return os.path.dirname(os.path.dirname(os.path.abspath(labkit.__file__)))


def _instructors_labkit(home: str) -> list[str]:
    """The grader's own labkit, when it is not the one the sandbox imports: hidden there, for where it
    was installed into the Python environment the sandbox uses (pip install, not -e), every answer is."""
    mine = os.path.join(labkit_home(), "labkit")
    return [] if os.path.realpath(mine) == os.path.realpath(os.path.join(home, "labkit")) else [mine]


def _read(path: Path) -> bytes | None:
    try:
        if path.stat().st_size > MAX_READ:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _environment(home: str, extra: dict[str, str]) -> dict[str, str]:
    return {
        "PYTHONPATH": home,
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "JUPYTER_PLATFORM_DIRS": "1",
        "LABKIT_OBSERVE_SINK": f"{sandbox.SINK_DIR}/sink.sock",
        "LABKIT_QUESTIONS": "",  # the install's catalog has every question (also with --no-sandbox, which inherits)
        **extra,
    }


def execute(
    box: Any,
    nb_path: Path,
    work: Path,
    timeout: float,
    env: dict[str, str],
    parameters: dict[str, Any] | None,
    name: str | None = None,
) -> tuple[nbformat.NotebookNode | None, str, str, dict[str, dict[int, dict[str, Any]]]]:
    """Run one notebook in ``box``; (executed notebook, status, message, observations from the sink)."""
    out, sink_dir = work / "out", work / "sink"
    out.mkdir()
    sink_dir.mkdir()
    os.chmod(sink_dir, 0o755)
    home = env.pop("LABKIT_HOME", labkit_home())
    mounts = sandbox.Mounts(
        ro=[os.path.join(home, "labkit")],
        rw={f"{sandbox.WORK}/out": str(out), sandbox.SINK_DIR: str(sink_dir)},
        files={f"{sandbox.WORK}/submission.ipynb": str(nb_path)},
        hide=_instructors_labkit(home),
    )
    argv = [sys.executable, "-m", "labkit.grading.runner", f"{sandbox.WORK}/submission.ipynb", f"{sandbox.WORK}/out"]
    argv += ["--timeout", str(timeout)]
    if parameters:
        argv += ["--parameters", json.dumps(parameters)]
    if name:
        argv += ["--name", Path(name).name]
    env = _environment(home, {"LABKIT_GRADE_OUT": f"{sandbox.WORK}/out", **env})
    sink = Sink(sink_dir)
    try:
        outcome = box.run(argv, env, mounts, timeout + STARTUP, work / "sandbox.log")
    finally:
        observations = sink.close()
    raw = _read(out / "status.json")
    try:
        state = json.loads(raw) if raw else {}
        status, message = str(state["status"]), str(state.get("message", ""))
    except (ValueError, KeyError, TypeError):
        status = "timeout" if outcome.timed_out else "died"
        message = f"{timeout:g} s" if outcome.timed_out else f"the sandbox ended with {outcome.returncode}"
    executed = None
    raw = _read(out / "executed.ipynb")
    if raw:
        try:
            executed = nbformat.reads(raw.decode(errors="replace"), as_version=4)
        except Exception:  # whatever the sandbox wrote, it is only data: unreadable counts as nothing
            executed = None
    return executed, status, message, observations


def evaluate(
    box: Any, work: Path, tasks: list[dict[str, Any]], env: dict[str, str]
) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """Run the judge (``labkit.grading.evaluate``) on ``tasks`` in a sandbox of its own: its results,
    and why there are none (``_judge_failure``; empty when it wrote them). A judge that ended without writing its results,
    before its time was out, runs once more: a student's function can kill it (``os._exit``), but so
    can the machine, and a submission should not lose its marks to the machine. Both runs' output
    is in ``work / "judge.log"``."""
    if not tasks:
        return {}, {}
    folder = work / "judge"
    (folder / "models").mkdir(parents=True)
    inside = f"{sandbox.WORK}/judge"
    for task in tasks:
        if task.get("kind") == "model_loss":
            name = Path(task["state"]).name
            shutil.copyfile(task["state"], folder / "models" / name)
            task["state"] = f"{inside}/models/{name}"
    (folder / "tasks.json").write_text(json.dumps({"tasks": tasks}))
    home = env.get("LABKIT_HOME", labkit_home())
    mounts = sandbox.Mounts(ro=[os.path.join(home, "labkit")], rw={inside: str(folder)}, hide=_instructors_labkit(home))
    argv = [sys.executable, "-m", "labkit.grading.evaluate", f"{inside}/tasks.json", f"{inside}/results.json"]
    for _ in range(2):
        outcome = box.run(argv, _environment(home, {}), mounts, JUDGE_SECONDS, work / "judge.log")
        raw = _read(folder / "results.json")
        if raw or outcome.timed_out:
            break
    try:
        results = json.loads(raw)["results"] if raw else {}
    except (ValueError, KeyError, TypeError):
        results = {}
    if isinstance(results, dict) and results:
        return {k: v for k, v in results.items() if isinstance(v, list)}, {}
    return {}, _judge_failure(outcome, work / "judge.log")


def _judge_failure(outcome: Any, log: Path) -> dict[str, Any]:
    """Why the judge wrote no results, as the feedback's fields (``judge.verdict``): the time it ran
    past, or its exit status and the last line it printed."""
    if outcome.timed_out:
        return {"seconds": JUDGE_SECONDS}
    lines = [line.strip() for line in (_read(log) or b"").decode(errors="replace").splitlines() if line.strip()]
    return {"code": outcome.returncode, "last": lines[-1][:200] if lines else "-"}


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
                rec = dict(rec)
                rec.pop("report", None)  # only the output's metadata carries it (see checks.CheckResult.graded)
                extra = (out.get("metadata") or {}).get(MIME)
                if isinstance(extra, dict) and isinstance(extra.get("report"), dict):
                    rec["report"] = extra["report"]
                found.append((i, rec))
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


def score(
    lesson: str | None,
    records: list[tuple[int, dict[str, Any]]],
    results: dict[str, list[Any]] | None = None,
    observations: dict[str, dict[int, dict[str, Any]]] | None = None,
    judge_failure: dict[str, Any] | None = None,
) -> list[QuestionScore]:
    """One row per question of the lesson, then any other check seen, each judged by the grader
    (``labkit.grading.judge``) from the record that counts: the last, or for a sealed
    (multiple-choice) question the first, since the notebook never said whether it was right.

    ``results`` are the judge process's (the students' functions run again), ``observations``
    the sink's (what labkit saw the ranks of each run do); ``judge_failure`` why the judge has none.
    """
    chosen = judge.choose(records)
    questions = registry.lesson_questions(lesson) if lesson else []
    rows = []
    for q in questions:
        c = chosen.pop(q.id, None)
        if c is None:
            rows.append(QuestionScore(q.id, "missing", 0, q.points))
            continue
        verdict = judge.verdict(q, c.record, results or {}, observations or {}, judge_failure)
        if verdict.correct:
            status = "correct"
        else:
            status = "unanswered" if verdict.key == "grading.check.unanswered" else "wrong"
        key = verdict.key if not verdict.correct else None
        hint = None
        if status == "wrong" and key == q.hint_key:
            key = q.hint_for(c.attempts)
        elif status == "wrong" and key and key.startswith("grading.exercise."):
            hint = q.hint_for(c.attempts)
        row = QuestionScore(q.id, status, q.points if verdict.correct else 0, q.points, key, dict(verdict.fields))
        row.attempts, row.cell, row.hint = c.attempts, c.cell, hint
        row.feedback = _verdict_text(row, c.record.get("lang")) if key else ""
        rows.append(row)
    for qid, c in chosen.items():  # checks of another lesson, or ids the grader does not know: never scored
        rows.append(QuestionScore(qid, "extra", 0, 0, None, {}, _shown(c.record), c.attempts, c.cell))
    return rows


def _shown(rec: dict[str, Any]) -> str:
    return str(rec.get("feedback", ""))[:2000]


def _verdict_text(row: QuestionScore, lang: Any) -> str:
    """The grader's feedback, in the language the student's checks spoke."""
    from labkit.i18n import t

    lang = lang if lang in ("en", "ro") else None
    text = t(row.key, lang, **row.fields) if row.key else ""
    return f"{text}. {t(row.hint, lang)}" if row.hint else text


def grade_notebook(
    path: Path,
    out_path: Path,
    timeout: float,
    name: str | None = None,
    parameters: dict[str, Any] | None = None,
    box: Any = None,
    env: dict[str, str] | None = None,
) -> NotebookScore:
    """Run one submission in a sandbox (``box``: ``sandbox.find()``'s) and score it; never raises for
    anything the notebook does. ``env``: more variables for the sandbox (``LABKIT_HOME``: the folder
    whose ``labkit`` the sandbox imports, the student's install)."""
    name = name or path.name
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # not JSON, not a notebook: 0 points, and the reason in the report
        return NotebookScore(name, None, "unreadable", message=f"{type(e).__name__}: {e}")
    box = box if box is not None else sandbox.find()
    env = dict(env or {})
    if "LABKIT_HOME" not in env:  # the student's install: nothing in it holds an answer
        from labkit.grading.student import cached_install

        env["LABKIT_HOME"] = str(cached_install())
    nb_lang = (nb.metadata.get("labkit") or {}).get("lang")
    if nb_lang in ("en", "ro"):  # a Romanian edition speaks Romanian in the grader's kernel too
        env["LABKIT_LANG"] = str(nb_lang)
    start = time.monotonic()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="labkit-grade-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        submission = work / "submission.ipynb"
        nbformat.write(cleared(nb), submission)
        os.chmod(submission, 0o644)
        executed, status, message, observations = execute(box, submission, work, timeout, dict(env), parameters, name)
        executed = executed if executed is not None else cleared(nb)
        nbformat.write(executed, out_path)
        kernel_log = _read(work / "out" / "executed.kernel.log") or b""
        out_path.with_suffix(".kernel.log").write_bytes(kernel_log + (_read(work / "sandbox.log") or b""))
        records = check_records(executed)
        lesson = lesson_of(nb, records)
        questions = registry.lesson_questions(lesson) if lesson else []
        chosen = judge.choose(records)
        models = work / "out"
        results, judge_failure = evaluate(box, work, judge.tasks(questions, chosen, models), dict(env))
        judge_log = _read(work / "judge.log")
        if judge_log:  # after the kernel's: what the judge process printed, for an instructor to read
            with out_path.with_suffix(".kernel.log").open("ab") as f:
                f.write(b"\n--- the judge ---\n" + judge_log)
    langs = Counter(r.get("lang") for _, r in records if r.get("lang") in ("en", "ro"))
    return NotebookScore(
        file=name,
        lesson=lesson,
        status=status,
        questions=score(lesson, records, results, observations, judge_failure),
        errors=cell_errors(executed),
        message=message,
        seconds=round(time.monotonic() - start, 2),
        lang=langs.most_common(1)[0][0] if langs else nb_lang,
        executed=str(out_path),
        sandbox=box.name,
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


def grade_all(
    tasks: list[tuple[Path, Path, str]],
    timeout: float,
    jobs: int,
    log: Any,
    box: Any = None,
    env: dict[str, str] | None = None,
) -> list[NotebookScore]:
    """Grade (notebook, executed path, name) tasks, ``jobs`` at a time, in the order given.

    Threads are enough: each notebook runs in processes of its own (the sandbox's), and a
    thread here only waits for them and serves the sink.
    """
    from concurrent.futures import ThreadPoolExecutor

    box = box if box is not None else sandbox.find()
    results: dict[int, NotebookScore] = {}

    def one(i: int) -> None:
        path, executed, name = tasks[i]
        results[i] = grade_notebook(path, executed, timeout, name, box=box, env=env)
        if log:
            log(results[i])

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(one, range(len(tasks))))
    return [results[i] for i in range(len(tasks))]
