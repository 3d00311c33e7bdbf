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

import dataclasses
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
    TaskKind,
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
        try:  # a judge that died (or was killed) before reading everything: closing flushes into nothing too
            with os.fdopen(tasks_w, "wb") as pipe:
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
    box = box if box is not None else sandbox.find()
    env = _with_install(dict(env or {}))
    ran = run_notebook(path, out_path, timeout, name, parameters, box, env, seed)
    return ran if isinstance(ran, NotebookScore) else judge_together(box, [ran], env)[0]


@dataclass
class Ran:
    """A notebook whose sandbox has ended: what is left to do is the judge's (``judge_together``)."""

    name: str
    out_path: Path
    lesson: str | None
    status: NotebookStatus
    message: str
    records: list[tuple[int, dict[str, Any]]]
    errors: list[dict[str, Any]]
    lang: str | None
    seed: int
    tasks: list[JudgeTask]
    started: float


def _with_install(env: dict[str, str]) -> dict[str, str]:
    if "LABKIT_HOME" not in env:  # the student's install: nothing in it holds an answer
        from labkit.grading.student import cached_install

        env["LABKIT_HOME"] = str(cached_install())
    return env


def run_notebook(
    path: Path,
    out_path: Path,
    timeout: float,
    name: str | None,
    parameters: dict[str, Any] | None,
    box: Any,
    env: dict[str, str],
    seed: int | None,
) -> NotebookScore | Ran:
    """The notebook's sandbox, and what came out of it read back; a ``NotebookScore`` already when there
    is nothing to judge (refused, unreadable, or the grader's own failure)."""
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
        return _run(nb, out_path, timeout, name, parameters, box, dict(env), seed, started)
    except Exception as e:  # the grader's own failure on this notebook: reported, never the class's
        return _grader_error(name, e, seed)


def _grader_error(name: str, e: BaseException, seed: int | None = None) -> NotebookScore:
    import traceback

    traceback.print_exception(e, file=sys.stderr)
    return NotebookScore(
        name, None, NotebookStatus.GRADER_ERROR, message=f"grader error: {type(e).__name__}", seed=seed
    )


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


def _run(
    nb: nbformat.NotebookNode,
    out_path: Path,
    timeout: float,
    name: str,
    parameters: dict[str, Any] | None,
    box: Any,
    env: dict[str, str],
    seed: int,
    started: float,
) -> Ran:
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
        executed = executed if executed is not None else cleared(nb)
        nbformat.write(executed, out_path)
        sandbox_log = (work / "sandbox.log").read_bytes()[-(8 << 20) :] if (work / "sandbox.log").exists() else b""
        out_path.with_suffix(".kernel.log").write_bytes(got.kernel_log + sandbox_log)
    deadline = time.monotonic() + AFTER_SECONDS
    records = check_records(executed)
    lesson = lesson_of(nb, records)
    questions = registry.lesson_questions(lesson) if lesson else []
    tasks = judge.tasks(questions, judge.choose(records), executed, seed)
    if time.monotonic() > deadline:
        raise TimeoutError(f"reading it back took more than {AFTER_SECONDS} s")
    langs = Counter(r.get("lang") for _, r in records if r.get("lang") in ("en", "ro"))
    lang = langs.most_common(1)[0][0] if langs else meta.lang
    return Ran(name, out_path, lesson, status, message, records, cell_errors(executed), lang, seed, tasks, started)


RANKS_KEY = "ranks"  # the one task that re-runs every exercise on the ranks of the notebooks judged together


def judge_together(box: Any, rans: list[Ran], env: dict[str, str]) -> list[NotebookScore]:
    """One judge for these notebooks (a student's): their tasks in one sandbox, the exercises on the ranks
    re-run by one child from one prefork server (torch imported once, not once a notebook); then each
    notebook scored from its own results. Never raises: a failure here is each notebook's grader error."""
    if not rans:
        return []
    tasks: list[JudgeTask] = []
    ranks: list[JudgeTask] = []
    for i, ran in enumerate(rans):
        for task in ran.tasks:
            state = task.state and task.state.replace(".pt", f"-{i}.pt")  # a loader's weights: one file a notebook
            keyed = dataclasses.replace(task, key=f"{i}|{task.key}", state=state)
            (ranks if task.does is TaskKind.RANKS else tasks).append(keyed)
    if ranks:  # in one child: the launcher's, whose ranks alone run student code
        batch = {"tasks": [t.ranks for t in ranks], "keys": [t.key for t in ranks]}
        tasks.append(JudgeTask(RANKS_KEY, TaskKind.RANKS, ranks=batch, seconds=sum(t.seconds for t in ranks)))
    try:
        with tempfile.TemporaryDirectory(prefix="labkit-judge-") as tmp:
            work = Path(tmp)
            os.chmod(work, 0o755)
            results, failure = evaluate(box, work, tasks, dict(env))
            log = (work / "judge.log").read_bytes()[-(8 << 20) :] if (work / "judge.log").exists() else b""
    except Exception as e:
        return [_grader_error(ran.name, e, ran.seed) for ran in rans]
    batch_result = results.pop(RANKS_KEY, None)
    if batch_result is not None:
        for task, value in zip(ranks, batch_result.values):
            results[task.key] = JudgeResult(task.key, [value], how=batch_result.how)
        if batch_result.how or len(batch_result.values) != len(ranks):
            for task in ranks[len(batch_result.values) :]:
                results[task.key] = JudgeResult(task.key, [], how=batch_result.how or "exit ?")
    out = []
    for i, ran in enumerate(rans):
        mine = {k.split("|", 1)[1]: r for k, r in results.items() if k.split("|", 1)[0] == str(i)}
        try:
            if log:  # after the kernel's: what the judge process printed, for the instructor only
                with ran.out_path.with_suffix(".kernel.log").open("ab") as f:
                    f.write(b"\n--- the judge ---\n" + log)
            out.append(judged(ran, mine, failure, box.name))
        except Exception as e:
            out.append(_grader_error(ran.name, e, ran.seed))
    return out


def judged(ran: Ran, results: dict[str, JudgeResult], failure: dict[str, Any], sandbox_name: str) -> NotebookScore:
    return NotebookScore(
        file=ran.name,
        lesson=ran.lesson,
        status=ran.status,
        questions=score(ran.lesson, ran.records, results, failure, ran.seed),
        errors=ran.errors,
        message=ran.message,
        seconds=round(time.monotonic() - ran.started, 2),
        lang=ran.lang,
        executed=str(ran.out_path),
        sandbox=sandbox_name,
        seed=ran.seed,
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
    groups: list[str] | None = None,
) -> list[NotebookScore]:
    """Grade (notebook, executed path, name) tasks, ``jobs`` at a time; the scores in the order given.

    ``groups`` (a student's name per task) puts the notebooks of one student before one judge, once they
    have all run (``judge_together``); without it, each notebook has a judge of its own. Threads are
    enough: each notebook runs in processes of its own (the sandbox's), and a thread here only waits for
    them. A notebook whose grading does not end in its time (its sandboxes' limits plus the scoring's)
    is scored 0 with a grader error, and the others go on.
    """
    from collections import defaultdict
    from concurrent.futures import ThreadPoolExecutor

    box = box if box is not None else sandbox.find()
    env = _with_install(dict(env or {}))
    gpus = devices.slots(jobs)  # each job its own GPUs; no more jobs at once than groups of them
    jobs = gpus.jobs(jobs)
    groups = groups if groups is not None else [str(i) for i in range(len(tasks))]
    members: dict[str, list[int]] = defaultdict(list)
    for i, group in enumerate(groups):
        members[group].append(i)
    ran: dict[int, NotebookScore | Ran] = {}
    scores: dict[int, NotebookScore] = {}
    left = {group: len(idx) for group, idx in members.items()}
    lock, finished = threading.Lock(), threading.Event()
    pool = ThreadPoolExecutor(max(1, jobs))

    def run_one(i: int) -> None:
        path, executed, name = tasks[i]
        try:
            with gpus.lease() as mine:
                got = run_notebook(path, executed, timeout, name, None, box, {**env, **mine}, seed)
        except Exception as e:  # run_notebook never raises; if it did, this notebook alone pays
            got = _grader_error(name, e)
        with lock:
            ran[i] = got
            left[groups[i]] -= 1
            ready = left[groups[i]] == 0
        if ready:
            pool.submit(judge_group, groups[i])

    def judge_group(group: str) -> None:
        idx = members[group]
        todo = [i for i in idx if isinstance(ran[i], Ran)]
        try:
            judged_ = judge_together(box, [ran[i] for i in todo], env)  # type: ignore[misc]
        except Exception as e:
            judged_ = [_grader_error(tasks[i][2], e) for i in todo]
        with lock:
            for i, got in zip(todo, judged_):
                scores[i] = got
            for i in idx:
                scores.setdefault(i, ran[i])  # type: ignore[arg-type]
            if len(scores) == len(tasks):
                finished.set()
        if log:
            for i in idx:
                log(scores[i])

    if not tasks:
        return []
    for i in range(len(tasks)):
        pool.submit(run_one, i)
    limit = timeout + STARTUP + JUDGE_SECONDS * 2 + AFTER_SECONDS + 60
    finished.wait(limit * (1 + len(tasks) // max(1, jobs)))
    pool.shutdown(wait=False, cancel_futures=True)
    with lock:
        return [
            scores.get(i) or NotebookScore(tasks[i][2], None, NotebookStatus.GRADER_ERROR, message="grader error: time")
            for i in range(len(tasks))
        ]
