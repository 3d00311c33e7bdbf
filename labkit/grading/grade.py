"""Grading: run each submission in a sandbox of its own, and judge what it handed in.

    labkit grade submissions/ --out reports/ --timeout 600

A notebook is copied into a fresh sandbox (``labkit.grading.sandbox``) and executed there by
papermill (``labkit.grading.runner``), top to bottom, in a new kernel of the Python that runs
the grader, with its own outputs cleared first so that nothing the student saved can count.
A crashing cell does not stop the cells after it; the time limit is for the whole notebook,
and a notebook stopped by it, or whose kernel died, keeps the points of the checks that ran
before.

What comes out of a sandbox is hostile: it comes back over a pipe the grader owns, as frames of a
capped size (``labkit.wire.grading.Frame``), never as a file the grader opens; the sandbox writes
only to its own small folders, gone with it. Scoring runs outside the sandbox, on what came out: the
check records in the executed notebook are the student's claims, judged by ``labkit.grading.judge``
(formulas and functions run again by the judge process, in a second sandbox, one forked child a task,
at points of the grader's own; exercises on the ranks re-run there on the grader's own ranks, with
inputs made from this grading's seed, ``labkit.grading.rerun``). Nothing the student's kernel wrote
about ranks counts. The questions and their points come from the registry, so a check that never ran
counts 0.

Everything after the sandbox is per notebook: whatever goes wrong there scores that notebook 0 with
"grader error: ..." in its report, and the class's run goes on; the gradebook is always written.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from labkit.grading import devices, judge, registry, sandbox
from labkit.grading.readback import Drain, Returned, cell_errors, check_records, lesson_of, metadata, read_frames
from labkit.grading.runner import cleared
from labkit.wire.grading import (
    JudgeResult,
    JudgeTask,
    NotebookStatus,
    QuestionStatus,
    RecordError,
)

__all__ = ["NotebookScore", "QuestionScore", "cleared", "grade_notebook", "score"]

STARTUP = 180  # seconds a sandbox may take beyond the notebook's cells (the kernel's start, papermill)
JUDGE_SECONDS = 300  # the judge's sandbox, all of a notebook's tasks
AFTER_SECONDS = 120  # reading and scoring one notebook after its sandboxes ended (the grader's own work)
MAX_STREAM = 768 << 20  # bytes the grader takes from one sandbox's pipe
OUT_SIZE = 256 << 20  # the sandbox's folder for the executed notebook and the kernel's log (tmpfs: gone with it)
MAX_SUBMISSION = 64 << 20  # bytes of one submitted notebook


@dataclass
class QuestionScore:
    id: str
    status: QuestionStatus
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
    status: NotebookStatus
    questions: list[QuestionScore] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)  # {"cell", "ename", "evalue"}
    message: str = ""  # why the run stopped, for timeout, died, failed, refused and grader errors
    seconds: float = 0.0
    lang: str | None = None  # the language the checks spoke in the kernel
    executed: str | None = None  # where the executed notebook was written
    sandbox: str = ""  # the sandbox it ran in (bubblewrap, none)
    seed: int | None = None  # the inputs of this grading's re-runs on the ranks (``--seed`` to repeat them)

    @property
    def points(self) -> float:
        return sum(q.points for q in self.questions)

    @property
    def max_points(self) -> float:
        return sum(q.max_points for q in self.questions if q.status != QuestionStatus.EXTRA)


# -- what comes back from a sandbox ---------------------------------------------------------


def labkit_home() -> str:
    """The folder that holds the ``labkit`` package the sandbox imports (it sees that package alone)."""
    import labkit

    return os.path.dirname(os.path.dirname(os.path.abspath(labkit.__file__)))


def _instructors_labkit(home: str) -> list[str]:
    """The grader's own labkit, when it is not the one the sandbox imports: hidden there, for where it
    was installed into the Python environment the sandbox uses (pip install, not -e), every answer is."""
    mine = os.path.join(labkit_home(), "labkit")
    return [] if os.path.realpath(mine) == os.path.realpath(os.path.join(home, "labkit")) else [mine]


def _environment(home: str, extra: dict[str, str]) -> dict[str, str]:
    return {
        "PYTHONPATH": home,
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "JUPYTER_PLATFORM_DIRS": "1",
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
) -> tuple[nbformat.NotebookNode | None, NotebookStatus, str, Returned]:
    """Run one notebook in ``box``; (executed notebook, status, message, what came back)."""
    home = env.pop("LABKIT_HOME", labkit_home())
    out = f"{sandbox.WORK}/out"
    mounts = sandbox.Mounts(
        ro=[os.path.join(home, "labkit")],
        files={f"{sandbox.WORK}/submission.ipynb": str(nb_path)},
        hide=_instructors_labkit(home),
        tmpfs={out: OUT_SIZE},
    )
    reader, writer = os.pipe()
    drain = Drain(reader, MAX_STREAM)
    argv = [sys.executable, "-m", "labkit.grading.runner", f"{sandbox.WORK}/submission.ipynb", out]
    argv += ["--results-fd", str(writer), "--timeout", str(timeout)]
    if parameters:
        argv += ["--parameters", json.dumps(parameters)]
    if name:
        argv += ["--name", Path(name).name]
    env = _environment(home, env)
    outcome = box.run(argv, env, mounts, timeout + STARTUP, work / "sandbox.log", sandbox.Pipes(keep=(writer,)))
    got = read_frames(drain.result())
    if got.status is not None:
        status, message = got.status.status, got.status.message
    elif outcome.timed_out:
        status, message = NotebookStatus.TIMEOUT, f"{timeout:g} s"
    else:
        status, message = NotebookStatus.DIED, f"the sandbox ended with {outcome.returncode}"
    executed = None
    if got.notebook:
        try:
            executed = nbformat.reads(got.notebook.decode(errors="replace"), as_version=4)
        except Exception:  # whatever the sandbox sent, it is only data: unreadable counts as nothing
            executed = None
    return executed, status, message, got


def evaluate(
    box: Any, work: Path, tasks: list[JudgeTask], env: dict[str, str]
) -> tuple[dict[str, JudgeResult], dict[str, Any]]:
    """Run the judge (``labkit.grading.evaluate``) on ``tasks`` in a sandbox of its own: its results by
    task, and why there are none (empty when it answered). Its tasks go over a pipe, its results come
    back over another; it sees nothing of the machine but the system, Python and the students' labkit. A judge that ended without
    answering every task, before its time was out, runs once more for the rest (the machine can kill
    it); both runs' output is in ``work / "judge.log"``, which only the instructor reads."""
    if not tasks:
        return {}, {}
    home = env.get("LABKIT_HOME", labkit_home())
    mounts = sandbox.Mounts(ro=[os.path.join(home, "labkit")], hide=_instructors_labkit(home))
    results: dict[str, JudgeResult] = {}
    outcome = None
    for _ in range(2):
        todo = [task for task in tasks if task.key not in results]
        outcome = _judge_once(box, work, todo, home, mounts, results)
        if len(results) == len(tasks) or outcome.timed_out:
            break
    if results:
        return results, {}
    return {}, _judge_failure(outcome)


def _judge_once(
    box: Any, work: Path, tasks: list[JudgeTask], home: str, mounts: Any, results: dict[str, JudgeResult]
) -> Any:
    tasks_r, tasks_w = os.pipe()
    results_r, results_w = os.pipe()
    drain = Drain(results_r, 64 << 20)
    lines = [f"{len(tasks)}\n".encode(), *(task.to_json().encode() + b"\n" for task in tasks)]

    def feed() -> None:
        with os.fdopen(tasks_w, "wb") as pipe:
            try:
                pipe.writelines(lines)
            except BrokenPipeError:
                pass

    feeder = threading.Thread(target=feed, name="labkit-grade-feed", daemon=True)
    feeder.start()
    argv = [sys.executable, "-m", "labkit.grading.evaluate", "--results-fd", str(results_w)]
    pipes = sandbox.Pipes(stdin=tasks_r, keep=(results_w,))
    seconds = min(JUDGE_SECONDS, 30 + sum(task.seconds for task in tasks))
    outcome = box.run(argv, _environment(home, {}), mounts, seconds, work / "judge.log", pipes)
    wanted = {task.key for task in tasks}
    for line in drain.result().splitlines():
        try:
            got = JudgeResult.from_json(line)
        except RecordError:
            continue
        if got.key in wanted and got.key not in results:
            results[got.key] = got
    feeder.join(5)
    return outcome


def _judge_failure(outcome: Any) -> dict[str, Any]:
    """Why the judge answered nothing, as the feedback's fields (``judge.verdict``): its time, or how it ended."""
    if outcome is not None and outcome.timed_out:
        return {"seconds": JUDGE_SECONDS}
    return {"how": f"exit {outcome.returncode}" if outcome is not None else "-"}


def score(
    lesson: str | None,
    records: list[tuple[int, dict[str, Any]]],
    results: dict[str, JudgeResult] | None = None,
    judge_failure: dict[str, Any] | None = None,
    seed: int = 0,
) -> list[QuestionScore]:
    """One row per question of the lesson, then any other check seen, each judged by the grader
    (``labkit.grading.judge``) from the record that counts: the last, or for a sealed
    (multiple-choice) question the first, since the notebook never said whether it was right.

    ``results`` are the judge process's (the students' functions run again, the exercises re-run on the
    grader's ranks with inputs from ``seed``); ``judge_failure`` why the judge has none.
    """
    chosen = judge.choose(records)
    questions = registry.lesson_questions(lesson) if lesson else []
    rows = []
    for q in questions:
        c = chosen.pop(q.id, None)
        if c is None:
            rows.append(QuestionScore(q.id, QuestionStatus.MISSING, 0, q.points))
            continue
        try:
            verdict = judge.verdict(q, c.record, results or {}, judge_failure, seed)
        except Exception as e:  # whatever the record held: this question scores 0, and says so
            print(f"labkit grade: {q.id}: {type(e).__name__}: {e}"[:500], file=sys.stderr)
            verdict = registry.Verdict(False, "grading.judge.unreadable", {"error": type(e).__name__})
        status, key, hint = q.feedback(verdict, c.attempts)
        row = QuestionScore(q.id, status, q.points if verdict.correct else 0, q.points, key, dict(verdict.fields))
        row.attempts, row.cell, row.hint = c.attempts, c.cell, hint
        row.feedback = _verdict_text(row, c.record.get("lang")) if key else ""
        rows.append(row)
    for qid, c in chosen.items():  # checks of another lesson, or ids the grader does not know: never scored
        rows.append(QuestionScore(qid, QuestionStatus.EXTRA, 0, 0, None, {}, _shown(c.record), c.attempts, c.cell))
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
    seed: int | None = None,
) -> NotebookScore:
    """Run one submission in a sandbox (``box``: ``sandbox.find()``'s) and score it; never raises: a
    failure of the grader's own scores this notebook 0 with "grader error: ..." in its report. ``env``:
    more variables for the sandbox (``LABKIT_HOME``: the folder whose ``labkit`` the sandbox imports,
    the student's install). ``seed``: the re-runs' inputs (a fresh one when None)."""
    name = name or path.name
    seed = secrets.randbelow(2**31) if seed is None else seed
    started = time.monotonic()
    try:
        nb = _read_submission(path)
    except Refused as e:
        return NotebookScore(name, None, NotebookStatus.REFUSED, message=str(e), seed=seed)
    except Exception as e:  # not JSON, not a notebook: 0 points, and the reason in the report (no content)
        return NotebookScore(name, None, NotebookStatus.UNREADABLE, message=type(e).__name__, seed=seed)
    try:
        score_ = _grade(nb, path, out_path, timeout, name, parameters, box, dict(env or {}), seed)
    except Exception as e:  # the grader's own failure on this notebook: reported, never the class's
        import traceback

        traceback.print_exc(file=sys.stderr)
        return NotebookScore(
            name, None, NotebookStatus.GRADER_ERROR, message=f"grader error: {type(e).__name__}", seed=seed
        )
    score_.seconds = round(time.monotonic() - started, 2)
    return score_


class Refused(Exception):
    """A submission that is not a regular file of its own (a link, a FIFO, a device, a folder), or too big."""


def _read_submission(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path``, opened without following a link and without blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise Refused(f"not a regular file ({os.strerror(e.errno or 0) or 'refused'})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused("not a regular file")
        if info.st_size > MAX_SUBMISSION:
            raise Refused(f"larger than {MAX_SUBMISSION >> 20} MiB")
        data = f.read(MAX_SUBMISSION + 1)
    return nbformat.reads(data.decode("utf-8"), as_version=4)


def _grade(
    nb: nbformat.NotebookNode,
    path: Path,
    out_path: Path,
    timeout: float,
    name: str,
    parameters: dict[str, Any] | None,
    box: Any,
    env: dict[str, str],
    seed: int,
) -> NotebookScore:
    box = box if box is not None else sandbox.find()
    if "LABKIT_HOME" not in env:  # the student's install: nothing in it holds an answer
        from labkit.grading.student import cached_install

        env["LABKIT_HOME"] = str(cached_install())
    meta = metadata(nb)
    if meta.lang:  # a Romanian edition speaks Romanian in the grader's kernel too
        env["LABKIT_LANG"] = meta.lang
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="labkit-grade-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        submission = work / "submission.ipynb"
        nbformat.write(cleared(nb), submission)
        os.chmod(submission, 0o644)
        executed, status, message, got = execute(box, submission, work, timeout, dict(env), parameters, name)
        deadline = time.monotonic() + AFTER_SECONDS
        executed = executed if executed is not None else cleared(nb)
        nbformat.write(executed, out_path)
        sandbox_log = (work / "sandbox.log").read_bytes()[-(8 << 20) :] if (work / "sandbox.log").exists() else b""
        out_path.with_suffix(".kernel.log").write_bytes(got.kernel_log + sandbox_log)
        records = check_records(executed)
        lesson = lesson_of(nb, records)
        questions = registry.lesson_questions(lesson) if lesson else []
        chosen = judge.choose(records)
        tasks = judge.tasks(questions, chosen, executed, seed)
        results, judge_failure = evaluate(box, work, tasks, dict(env))
        judge_log = work / "judge.log"
        if judge_log.exists():  # after the kernel's: what the judge process printed, for the instructor only
            with out_path.with_suffix(".kernel.log").open("ab") as f:
                f.write(b"\n--- the judge ---\n" + judge_log.read_bytes()[-(8 << 20) :])
        if time.monotonic() > deadline:
            raise TimeoutError(f"scoring took more than {AFTER_SECONDS} s")
    langs = Counter(r.get("lang") for _, r in records if r.get("lang") in ("en", "ro"))
    return NotebookScore(
        file=name,
        lesson=lesson,
        status=status,
        questions=score(lesson, records, results, judge_failure, seed),
        errors=cell_errors(executed),
        message=message,
        lang=langs.most_common(1)[0][0] if langs else meta.lang,
        executed=str(out_path),
        sandbox=box.name,
        seed=seed,
    )


# -- a folder of submissions ------------------------------------------------------------


@dataclass
class StudentReport:
    student: str
    notebooks: list[NotebookScore]
    lang: str

    def best(self) -> dict[str, NotebookScore]:
        """Per lesson, the submission with the most points (a student may hand in two copies)."""
        best: dict[str, NotebookScore] = {}
        for nb in self.notebooks:
            if nb.lesson is None:  # unreadable, refused, or no check at all: in the report, in no lesson's column
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
    seed: int | None = None,
) -> list[NotebookScore]:
    """Grade (notebook, executed path, name) tasks, ``jobs`` at a time, in the order given.

    Threads are enough: each notebook runs in processes of its own (the sandbox's), and a
    thread here only waits for them. A notebook whose grading does not end in its time (its
    sandboxes' limits plus the scoring's) is scored 0 with a grader error, and the others go on.
    """
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as Late

    box = box if box is not None else sandbox.find()
    limit = timeout + STARTUP + JUDGE_SECONDS * 2 + AFTER_SECONDS + 60
    gpus = devices.slots(jobs)  # each job its own GPUs; no more jobs at once than groups of them
    jobs = gpus.jobs(jobs)

    def one(i: int) -> NotebookScore:
        path, executed, name = tasks[i]
        with gpus.lease() as mine:
            return grade_notebook(path, executed, timeout, name, box=box, env={**(env or {}), **mine}, seed=seed)

    pool = ThreadPoolExecutor(max(1, jobs))
    futures = [pool.submit(one, i) for i in range(len(tasks))]
    results = []
    started = time.monotonic()
    for i, future in enumerate(futures):
        try:  # each notebook's limit counts from when its turn can have begun at the latest
            got = future.result(timeout=max(1.0, limit * (1 + i // max(1, jobs)) - (time.monotonic() - started)))
        except Late:
            got = NotebookScore(tasks[i][2], None, NotebookStatus.GRADER_ERROR, message="grader error: time")
        except Exception as e:  # grade_notebook never raises; if it did, this notebook alone pays
            got = NotebookScore(
                tasks[i][2], None, NotebookStatus.GRADER_ERROR, message=f"grader error: {type(e).__name__}"
            )
        results.append(got)
        if log:
            log(got)
    pool.shutdown(wait=False, cancel_futures=True)
    return results
