"""``labkit grade --slurm``: a class's submissions as one job array on the local live Slurm (two nodes).

    sudo .venv/bin/python -m pytest -q -m slurm tests/test_grading_slurm.py     (about a minute)

Three students of the fixture lesson: ana's solution, bob's wrong answer, and cid's notebook that is a
symbolic link to the solution (refused when collected, never a task). The array has one task per
submission, each grading its notebook in the sandbox as ``labkit grade`` does on one machine; the grader
collects them into one gradebook. The fast tests below need no Slurm: what a task writes and the grader
reads, and a task that died without a result (sbatch, squeue and scontrol stand-ins on PATH).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from labkit.grading import slurm as gslurm
from labkit.grading.cli import main
from labkit.grading.grade import NotebookScore, QuestionScore
from labkit.wire.grading import NotebookStatus, QuestionStatus

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures" / "grading"
SOLUTION = FIXTURES / "memory_solution.ipynb"
QUESTIONS = FIXTURES / "fixture_questions.py"
TIMEOUT = 30


def make_submissions(root: Path) -> None:
    nb = nbformat.read(SOLUTION, as_version=4)
    (root / "ana").mkdir(parents=True)
    nbformat.write(nb, root / "ana" / "memory.ipynb")
    wrong = nbformat.read(SOLUTION, as_version=4)
    i = next(i for i, c in enumerate(wrong.cells) if "bytes_per_param = 2 + 2" in c.source)
    wrong.cells[i].source = "bytes_per_param = 12"
    (root / "bob").mkdir()
    nbformat.write(wrong, root / "bob" / "memory.ipynb")
    (root / "cid").mkdir()
    os.symlink(SOLUTION, root / "cid" / "memory.ipynb")  # another's work, linked: refused, never run


def grade(args: list[str], env: dict[str, str]) -> int:
    saved = os.environ.copy()
    os.environ.update(env)
    os.environ["LABKIT_LANG"] = "en"
    os.environ.pop("LABKIT_QUESTIONS", None)
    try:
        return main(["grade", *args, "--questions", str(QUESTIONS)])
    finally:
        os.environ.clear()
        os.environ.update(saved)


# -- on the live Slurm -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    from labkit.testing import slurm

    try:
        slurm.install()
        folder = tempfile.mkdtemp(prefix="labkit-gslurm-")  # short: munge's socket path must fit in 108 bytes
        running = slurm.start_cluster(folder)
    except slurm.SlurmUnavailable as e:
        pytest.skip(f"no Slurm: {e}")
    yield running
    killed = running.stop()
    shutil.rmtree(folder, ignore_errors=True)
    assert not killed, f"processes outlived the Slurm daemons: {killed}"


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.timeout(400)
def test_one_array_task_per_submission_and_one_gradebook(cluster, tmp_path, capsys):
    subs, out = tmp_path / "submissions", tmp_path / "reports"
    make_submissions(subs)
    os.chmod(tmp_path, 0o755)  # the tasks run as the submitter (root here), on the nodes
    env = {"SLURM_CONF": cluster.env["SLURM_CONF"], "PATH": cluster.env["PATH"], slurm_mark(): cluster.mark}
    started = time.monotonic()
    code = grade([str(subs), "--out", str(out), "--timeout", str(TIMEOUT), "--slurm"], env)
    seconds = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 0, err
    print(f"graded 2 submissions as a Slurm array in {seconds:.1f} s")
    listed = json.loads((out / ".slurm" / "tasks.json").read_text())["tasks"]
    assert [(x["student"], x["name"]) for x in listed] == [("ana", "memory.ipynb"), ("bob", "memory.ipynb")]
    job = next(line for line in err.splitlines() if "Slurm job" in line).split("Slurm job ")[1].split(",")[0]
    assert sorted(os.listdir(out / ".slurm")) == sorted(
        ["tasks.json", "grade.sbatch", "task-0.log", "task-1.log", "result-0.json", "result-1.json"]
    )
    assert cluster.job(f"{job}_0").get("ArrayJobId") == job  # one array, its tasks by index
    rows = {r["student"]: r for r in csv.DictReader(open(out / "gradebook.csv"))}
    assert set(rows) == {"ana", "bob", "cid"}
    assert rows["ana"]["percent"] == "100%", (out / "ana" / "report.md").read_text()
    assert 0 < float(rows["bob"]["total"]) < float(rows["bob"]["max_points"])
    assert float(rows["cid"]["total"]) == 0
    ana = json.loads((out / "ana" / "report.json").read_text())
    assert ana["notebooks"][0]["sandbox"] == "bubblewrap" and ana["notebooks"][0]["status"] == "ok"
    assert (out / "ana" / "memory.executed.ipynb").exists()  # the executed copy, where local grading puts it
    bob = {q["id"]: q for q in json.loads((out / "bob" / "report.json").read_text())["notebooks"][0]["questions"]}
    assert bob["fixture.bytes_per_param"]["status"] == "wrong"
    assert "fixture.bytes_per_param" in (out / "bob" / "report.md").read_text()
    cid = json.loads((out / "cid" / "report.json").read_text())
    assert [n["status"] for n in cid["notebooks"]] == ["refused"]
    assert cluster.leftovers() == []


def slurm_mark() -> str:
    from labkit.testing.slurm import MARK_VAR

    return MARK_VAR


# -- no Slurm needed -------------------------------------------------------------------------------


def test_a_score_survives_its_file():
    score = NotebookScore(
        "lesson.ipynb", "fixture", NotebookStatus.TIMEOUT, message="stopped",
        questions=[QuestionScore("fixture.a", QuestionStatus.WRONG, 0, 2, key="grading.cli.grade.done", fields={"n": 3})],
        errors=[{"cell": 2, "ename": "ValueError", "evalue": "x"}], seconds=1.5, lang="ro", seed=7,
    )  # fmt: skip
    back = gslurm.score_from_json(json.loads(json.dumps(gslurm.score_to_json(score))))
    assert back == score and back.status is NotebookStatus.TIMEOUT
    assert back.questions[0].status is QuestionStatus.WRONG


def test_the_array_script_runs_one_task_by_its_index(tmp_path):
    script = gslurm.batch_script(tmp_path, 40, "/opt/py/bin/python")
    assert "#SBATCH --array=0-39" in script and f"#SBATCH --output={tmp_path}/task-%a.log" in script
    assert script.rstrip().endswith(f'task {tmp_path}/tasks.json "$SLURM_ARRAY_TASK_ID"')
    assert gslurm.task_minutes(600) >= (600 + 300) / 60  # the notebook's limit and the judge's fit in it


def stand_in(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_a_task_that_left_no_result_is_that_submissions_grader_error(tmp_path, capsys):
    """sbatch takes the array, task 0 writes its result, task 1 dies: bob's notebook is a grader error with
    Slurm's word on it, ana's score stands, and the gradebook is written."""
    subs, out, bin_ = tmp_path / "submissions", tmp_path / "reports", tmp_path / "bin"
    make_submissions(subs)
    bin_.mkdir()
    ana = NotebookScore("memory.ipynb", "fixture", NotebookStatus.OK, sandbox="bubblewrap",
                        questions=[QuestionScore("fixture.bytes_per_param", QuestionStatus.CORRECT, 1, 1)])  # fmt: skip
    result = json.dumps(gslurm.score_to_json(ana)).replace("'", "'\\''")
    stand_in(
        bin_, "sbatch", f"echo \"$@\" > {tmp_path}/sbatch.args\necho '{result}' > {out}/.slurm/result-0.json\necho 77\n"
    )
    stand_in(bin_, "squeue", "exit 0\n")  # nothing of job 77 is queued any more
    stand_in(bin_, "scontrol", "echo 'JobId=78 ArrayJobId=77 ArrayTaskId=1 JobState=NODE_FAIL ExitCode=0:9'\n")
    env = {"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}
    code = grade([str(subs), "--out", str(out), "--slurm", "--slurm-args", "-p class --time 5"], env)
    assert code == 0, capsys.readouterr().err
    args = (tmp_path / "sbatch.args").read_text().split()
    assert args[:2] == ["--parsable", f"--time={gslurm.task_minutes(600)}"]
    assert args[-5:-1] == ["-p", "class", "--time", "5"]  # the instructor's options last: they win
    rows = {r["student"]: r for r in csv.DictReader(open(out / "gradebook.csv"))}
    assert rows["ana"]["total"] == "1" and rows["bob"]["total"] == "0"
    bob = json.loads((out / "bob" / "report.json").read_text())["notebooks"][0]
    assert bob["status"] == "grader_error" and "NODE_FAIL (exit 0:9)" in bob["message"]
    assert "task-1.log" in bob["message"]


def test_sbatch_missing_or_refusing_is_said_and_nothing_graded(tmp_path, capsys):
    subs, out, bin_ = tmp_path / "submissions", tmp_path / "reports", tmp_path / "bin"
    make_submissions(subs)
    bin_.mkdir()
    stand_in(bin_, "sbatch", "echo 'sbatch: error: invalid partition specified: class' >&2\nexit 1\n")
    code = grade([str(subs), "--out", str(out), "--slurm"], {"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"})
    err = capsys.readouterr().err
    assert code == 2 and "sbatch refused the array: sbatch: error: invalid partition" in err
    assert not (out / "gradebook.csv").exists()
