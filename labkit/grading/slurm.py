"""``labkit grade --slurm``: a class's grading as one Slurm job array, one task a submission.

    labkit grade submissions/ --out reports/ --slurm                       # the cluster's defaults
    labkit grade submissions/ --out reports/ --slurm --slurm-args "-p class --qos grading"

The grader collects the submissions as local grading does (``labkit.grading.collect``: with ``lstat``,
a link refused and reported, never followed), writes the task list (``OUT/.slurm/tasks.json``) and
submits one array job, ``sbatch --array=0-(n-1)``. Task ``i`` runs ``python -m labkit.grading.slurm
task OUT/.slurm/tasks.json i``: ``grade.grade_notebook`` on submission ``i``, the same sandbox and the same
judge as on one machine, and writes its score to ``OUT/.slurm/result-i.json`` (written aside, then renamed:
a result is whole or absent). The grader waits for the array to leave the queue (``squeue``), reads every
result and writes the students' reports and the one gradebook with ``labkit.grading.report``'s own
functions. A task that left no result (killed, its node lost, over its time) is that submission's grader
error, with Slurm's word on it, and the gradebook is still written.

Each task judges its own notebook (local grading puts one student's notebooks before one judge): one
task a submission is what lets a semester spread over the cluster. OUT and the submissions must be on a
filesystem every node sees (as a class's home folders are), and the grader's Python and labkit too.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.grading.grade import AFTER_SECONDS, JUDGE_SECONDS, STARTUP, NotebookScore, QuestionScore
from labkit.i18n import t
from labkit.wire.grading import NotebookStatus, QuestionStatus

FOLDER = ".slurm"  # under OUT: the task list, each task's result and log
ACTIVE = "PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING,REQUEUED,RESIZING"


class SlurmError(RuntimeError):
    """The array could not be submitted (no sbatch, a refusal): said to the instructor, nothing graded."""


@dataclass
class Task:
    """One submission: where it is, where its executed copy goes, its name in the report, its student."""

    path: str
    executed: str
    name: str
    student: str


def task_minutes(timeout: float) -> int:
    """A task's ``--time``: the notebook's limit plus what the sandbox, the judge and the scoring may take."""
    return math.ceil((timeout + STARTUP + JUDGE_SECONDS + AFTER_SECONDS + 60) / 60)


def write_tasks(folder: Path, tasks: list[Task], settings: dict[str, Any]) -> Path:
    """The list every task reads (its own entry by index), with the grading's settings."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("result-*.json"):  # an earlier grading's results must not be read as this one's
        old.unlink()
    path = folder / "tasks.json"
    path.write_text(json.dumps({"settings": settings, "tasks": [dataclasses.asdict(x) for x in tasks]}, indent=1))
    return path


def batch_script(folder: Path, n: int, python: str) -> str:
    """The array's script: task ``$SLURM_ARRAY_TASK_ID`` grades that submission (``run_task``)."""
    return "\n".join(
        [
            "#!/bin/bash",
            "#SBATCH --job-name=labkit-grade",
            f"#SBATCH --array=0-{n - 1}",
            f"#SBATCH --output={folder}/task-%a.log",
            f"exec {shlex.quote(python)} -m labkit.grading.slurm task {shlex.quote(str(folder / 'tasks.json'))} "
            '"$SLURM_ARRAY_TASK_ID"',
            "",
        ]
    )


def submit(folder: Path, n: int, timeout: float, extra: list[str], env: dict[str, str]) -> str:
    """``sbatch`` the array; its job id. ``extra`` (``--slurm-args``) comes last: the instructor's word wins."""
    script = folder / "grade.sbatch"
    script.write_text(batch_script(folder, n, sys.executable))
    cmd = ["sbatch", "--parsable", f"--time={task_minutes(timeout)}", "--cpus-per-task=1", *extra, str(script)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    except FileNotFoundError:
        raise SlurmError(t("grading.slurm.no_sbatch")) from None
    except subprocess.TimeoutExpired:
        raise SlurmError(t("grading.slurm.refused", why="sbatch did not answer in 120 s")) from None
    if done.returncode != 0:
        raise SlurmError(t("grading.slurm.refused", why=(done.stderr or done.stdout).strip()[-400:]))
    return done.stdout.strip().split(";")[0]  # --parsable: "jobid" or "jobid;cluster"


def active(job: str, env: dict[str, str]) -> bool | None:
    """Whether any task of the array is still queued or running; None when squeue did not answer."""
    try:
        done = subprocess.run(
            ["squeue", "-h", "-j", job, "-t", ACTIVE, "-o", "%i"], capture_output=True, text=True, env=env, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:  # a job Slurm already forgot is an error to squeue -j: nothing is active
        return False if "Invalid job id" in done.stderr else None
    return bool(done.stdout.strip())


def wait(job: str, env: dict[str, str], seen: Callable[[], None], poll: float = 0.2) -> None:
    """Until the array has left the queue. ``seen`` is called at each look (it reports new results); the
    polls start fast (a small class on an idle cluster is done in seconds) and back off to 5 s."""
    misses = 0
    while True:
        seen()
        state = active(job, env)
        if state is False:
            return
        misses = misses + 1 if state is None else 0
        if misses > 20:  # squeue has failed for minutes: the results that are there are graded
            print(t("grading.slurm.no_squeue", job=job), file=sys.stderr)
            return
        time.sleep(poll)
        poll = min(5.0, poll * 1.5)


def task_states(job: str, env: dict[str, str]) -> dict[int, str]:
    """Each array task's end as Slurm tells it (``scontrol``: kept for MinJobAge after the end), by index."""
    try:
        done = subprocess.run(
            ["scontrol", "show", "job", "-o", job], capture_output=True, text=True, env=env, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    states = {}
    for line in done.stdout.splitlines():
        fields = dict(item.partition("=")[::2] for item in line.split())
        index = fields.get("ArrayTaskId", "")
        if index.isdigit():
            states[int(index)] = f"{fields.get('JobState', '?')} (exit {fields.get('ExitCode', '?')})"
    return states


# -- a score as a file: what a task writes and the grader reads -----------------------------------------


def score_to_json(score: NotebookScore) -> dict[str, Any]:
    return dataclasses.asdict(score)


def score_from_json(data: dict[str, Any]) -> NotebookScore:
    questions = [QuestionScore(**{**q, "status": QuestionStatus(q["status"])}) for q in data.get("questions", [])]
    return NotebookScore(**{**data, "status": NotebookStatus(data["status"]), "questions": questions})


def read_result(folder: Path, i: int) -> NotebookScore | None:
    path = folder / f"result-{i}.json"
    try:
        return score_from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError) as e:  # a result the grader cannot read: this submission's error
        return NotebookScore(path.name, None, NotebookStatus.GRADER_ERROR, message=f"grader error: {type(e).__name__}")


def missing(task: Task, i: int, state: str | None, folder: Path) -> NotebookScore:
    """A task that left no result: 0 points, and why, in the instructor's report and the student's."""
    why = t("grading.slurm.no_result", i=i, state=state or "?", log=folder / f"task-{i}.log")
    return NotebookScore(task.name, None, NotebookStatus.GRADER_ERROR, message=f"grader error: {why}")


# -- the two sides: a task on a node, and the grader that submits and collects ---------------------------


def run_task(tasks_file: Path, i: int) -> int:
    """Task ``i`` of the array: grade that submission as ``labkit grade`` does, write its result."""
    from labkit.grading import sandbox
    from labkit.grading.grade import grade_notebook

    listed = json.loads(tasks_file.read_text())
    settings, task = listed["settings"], Task(**listed["tasks"][i])
    os.environ.update(settings["env"])  # the questions the grader loaded; the kernels inherit them
    box = sandbox.find(settings["no_sandbox"])
    score = grade_notebook(
        Path(task.path), Path(task.executed), settings["timeout"], task.name, box=box,
        env={"LABKIT_HOME": settings["home"]}, seed=settings["seed"],
    )  # fmt: skip
    out = tasks_file.parent / f"result-{i}.json"
    aside = out.with_suffix(".tmp")
    aside.write_text(json.dumps(score_to_json(score), ensure_ascii=False))
    os.replace(aside, out)
    return 0


def grade_on_slurm(
    submissions: Path,
    out: Path,
    timeout: float,
    lang: str | None,
    home: str,
    no_sandbox: bool,
    seed: int | None,
    slurm_args: list[str],
    log: Callable[[NotebookScore], None] | None = None,
) -> list[Any]:
    """Grade ``submissions`` as one array job; the students' reports (``report.StudentReport``), written
    under ``out`` with the gradebook, as ``report.grade_folder`` does. Raises ``SlurmError`` when the
    array cannot be submitted (nothing is written then)."""
    from labkit.grading.collect import collect
    from labkit.grading.report import StudentReport, report_lang, student_folder, write_gradebook, write_student

    out.mkdir(parents=True, exist_ok=True)
    found = collect(submissions, skip=out)
    names = sorted({*found.notebooks, *found.refused})
    tasks = [
        Task(
            str(path.resolve()),
            str((out / student_folder(s) / (os.path.splitext(n)[0] + ".executed.ipynb")).resolve()),
            n,
            s,
        )
        for s in names
        for path, n in found.notebooks.get(s, [])
    ]
    folder = (out / FOLDER).resolve()
    env = {k: v for k, v in os.environ.items() if k.startswith("LABKIT_")}
    settings = {"timeout": timeout, "home": home, "no_sandbox": no_sandbox, "seed": seed, "env": env}
    write_tasks(folder, tasks, settings)
    scores: dict[int, NotebookScore] = {}
    if tasks:
        job = submit(folder, len(tasks), timeout, slurm_args, {**os.environ, "PYTHONPATH": _pythonpath()})
        print(t("grading.slurm.submitted", job=job, n=len(tasks), folder=folder), file=sys.stderr, flush=True)

        def seen() -> None:
            for i in range(len(tasks)):
                if i not in scores and (got := read_result(folder, i)) is not None:
                    scores[i] = got
                    if log:
                        log(got)

        try:
            wait(job, os.environ.copy(), seen)
        except BaseException:  # the grader stopped (Ctrl-C): the array goes with it
            subprocess.run(["scancel", job], capture_output=True, timeout=60)
            raise
        seen()
        states = task_states(job, os.environ.copy()) if len(scores) < len(tasks) else {}
        for i, task in enumerate(tasks):
            scores.setdefault(i, missing(task, i, states.get(i), folder))
    students, i = [], 0
    for student in names:
        mine = []
        for _ in found.notebooks.get(student, []):
            mine.append(scores[i])
            i += 1
        mine += [
            NotebookScore(n, None, NotebookStatus.REFUSED, message=why) for n, why in found.refused.get(student, [])
        ]
        rep = StudentReport(student, mine, report_lang(mine, lang))
        try:
            write_student(rep, out / student_folder(student))
        except OSError as e:  # one student's report folder: said, and the class's gradebook still written
            print(f"labkit grade: the report of {student!r} could not be written ({type(e).__name__})", file=sys.stderr)
        students.append(rep)
    write_gradebook(students, out, lang)
    return students


def _pythonpath() -> str:
    """The grader's labkit first, for the tasks' Python: the same code grades on every node."""
    from labkit.grading.grade import labkit_home

    return os.pathsep.join(p for p in (labkit_home(), os.environ.get("PYTHONPATH", "")) if p)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "task" or not args[2].isdigit():
        print("usage: python -m labkit.grading.slurm task TASKS_JSON INDEX", file=sys.stderr)
        return 2
    return run_task(Path(args[1]), int(args[2]))


if __name__ == "__main__":
    sys.exit(main())
