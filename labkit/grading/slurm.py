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
    wrap: Callable[[Any], Any] | None = None,
) -> list[Any]:
    """Grade ``submissions`` as one array job; the students' reports (``report.StudentReport``), written
    under ``out`` with the gradebook by ``report.grade_folder``, as local grading does (the same
    collection, reports and gradebook; ``wrap``: the class's cache and filters, ``labkit.classroom``,
    around the array as around ``grade_all``). Raises ``SlurmError`` when the array cannot be submitted."""
    from labkit.grading.report import grade_folder

    grade = array_grader(out, home, no_sandbox, slurm_args)
    return grade_folder(submissions, out, timeout, lang, log=log, seed=seed, grade=wrap(grade) if wrap else grade)


def array_grader(out: Path, home: str, no_sandbox: bool, slurm_args: list[str]) -> Callable[..., list[NotebookScore]]:
    """``grade.grade_all``'s stand-in that grades its notebooks as one array job: same arguments, the
    scores in the order given (``box`` and ``jobs`` are each task's own on its node)."""

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
        names = groups if groups is not None else [str(i) for i in range(len(tasks))]
        array = [Task(str(Path(p).resolve()), str(Path(e).resolve()), n, g) for (p, e, n), g in zip(tasks, names)]
        return run_array(out, array, timeout, home, no_sandbox, seed, slurm_args, log)

    return grade_all


def run_array(
    out: Path,
    tasks: list[Task],
    timeout: float,
    home: str,
    no_sandbox: bool,
    seed: int | None,
    slurm_args: list[str],
    log: Callable[[NotebookScore], None] | None = None,
) -> list[NotebookScore]:
    """Submit ``tasks`` as one array, wait for it, and read each task's score (a missing one: its grader error)."""
    folder = (out / FOLDER).resolve()
    env = {k: v for k, v in os.environ.items() if k.startswith("LABKIT_")}
    settings = {"timeout": timeout, "home": home, "no_sandbox": no_sandbox, "seed": seed, "env": env}
    write_tasks(folder, tasks, settings)
    scores: dict[int, NotebookScore] = {}
    if not tasks:
        return []
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
    return [scores.get(i) or missing(task, i, states.get(i), folder) for i, task in enumerate(tasks)]


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
