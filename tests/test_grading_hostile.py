"""A class with hostile and careless students, graded through the sandbox: every row of the grading
issue's table of what a submission did, with canaries planted where a leak would show.

Two folders are graded, each once (``labkit grade``'s own code, bubblewrap, ``--jobs 2``):

- *the table*: one submission per thing a student tried on what comes out of the sandbox (a link in its
  output folder to a host file or another student's work, a FIFO there, a gigabyte written there, the
  submission itself a link or a FIFO, a judge patched or read from inside a formula
  function, a forged metadata type or value); each scores 0 on what it forged and leaks nothing;
- *a batch of 30*: 22 honest correct submissions of the fixture lesson (English and Romanian, in both
  layouts), 3 honest but broken ones (bad metadata, a check missing its context, a crashing cell) and
  5 hostile ones; the gradebook has 30 rows and every honest correct one has full marks.

The canaries: a root-only file on this machine, a variable in the grader's own environment, the
questions' source, and the grader's own points. None may appear in anything the grader wrote.

    .venv/bin/pytest tests/test_grading_hostile.py -q      (root, bubblewrap; about 3 minutes)
"""

from __future__ import annotations

import csv
import json
import os
import stat
import textwrap
import uuid
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from labkit.grading.points import GRADER_UNSEEN

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "grading"
TIMEOUT = 300

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def fixture_solution(lang: str = "en") -> nbformat.NotebookNode:
    nb = nbformat.read(FIXTURE / "memory_solution.ipynb", as_version=4)
    nb.metadata["labkit"]["lang"] = lang
    return nb


def notebook(lesson: str | None, *cells: str, meta: object = None) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["labkit"] = meta if meta is not None else {"lesson": lesson, "lang": "en"}
    nb.cells = [new_code_cell("import labkit"), *(new_code_cell(textwrap.dedent(c)) for c in cells)]
    return nb


@pytest.fixture(scope="module")
def canaries(tmp_path_factory):
    """A root-only host file and a grader's environment variable, each holding a marker no report may hold."""
    folder = tmp_path_factory.mktemp("canary")
    marker = f"canary-{uuid.uuid4().hex}"
    secret = folder / "secret.txt"
    secret.write_text(f"{marker}-file\n")
    os.chmod(secret, 0o600)
    old = os.environ.get("FSDP_GRADER_CANARY")
    os.environ["FSDP_GRADER_CANARY"] = f"{marker}-env"
    yield SimpleNamespace(marker=marker, file=secret)
    if old is None:
        os.environ.pop("FSDP_GRADER_CANARY", None)
    else:
        os.environ["FSDP_GRADER_CANARY"] = old


def out_folder_attacks(canaries: SimpleNamespace, other: Path) -> dict[str, nbformat.NotebookNode]:
    """What a kernel can do to the folder its sandbox hands back from."""
    questions = ROOT / "labkit" / "course" / "questions" / "lesson1.py"
    return {
        "log_link": notebook(
            "fixture",
            f"""
            import os
            out = "/submission/out"
            for name, target in [("executed.kernel.log", {str(canaries.file)!r}), ("model-x.pt", "/proc/self/environ"),
                                 ("model-y.pt", {str(questions)!r})]:
                try:
                    os.remove(os.path.join(out, name))
                except OSError:
                    pass
                os.symlink(target, os.path.join(out, name))
            print("linked")
            """,
        ),
        "notebook_link": notebook(
            "fixture",
            f"""
            import os, threading, time
            out = "/submission/out"
            def swap():  # after papermill wrote it: a link to another student's work
                while True:
                    try:
                        os.remove(os.path.join(out, "executed.ipynb"))
                        os.symlink({str(other)!r}, os.path.join(out, "executed.ipynb"))
                    except OSError:
                        pass
                    time.sleep(0.01)
            threading.Thread(target=swap, daemon=True).start()
            time.sleep(1)
            """,
        ),
        "log_fifo": notebook(
            "fixture",
            """
            import os
            out = "/submission/out"
            log = os.path.join(out, "executed.kernel.log")
            os.remove(log)
            os.mkfifo(log)
            os.mkfifo(os.path.join(out, "model-fifo.pt"))
            print("fifo")
            """,
        ),
        "fills_out": notebook(
            "fixture",
            """
            import os
            out = "/submission/out"
            written = 0
            try:
                with open(os.path.join(out, "model-big.pt"), "wb") as f:
                    for _ in range(1024):
                        f.write(b"x" * (1 << 20))
                        written += 1
            except OSError as e:
                print("stopped at", written, "MiB:", type(e).__name__)
            """,
        ),
    }


def judge_attacks() -> dict[str, nbformat.NotebookNode]:
    """Formula functions that go after the judge process they run in."""
    return {
        "judge_patch": notebook(
            "lesson1",
            """
            def ddp_max_params(gpu_bytes):  # patches the judge for the questions after it
                import __main__, sys
                ev = sys.modules.get("labkit.grading.evaluate")
                if ev is not None:
                    ev.call_task = lambda task: [c.get("gpu_bytes", c.get("n_params", 0)) for c in task.calls]
                    ev.model_loss = lambda task: [0.0]
                    __main__.model_loss = ev.model_loss
                return 0
            labkit.check("lesson1.ddp_max_params", ddp_max_params)
            def bytes_per_param(n_params):  # wrong: must stay wrong
                return n_params
            labkit.check("lesson1.bytes_per_param", bytes_per_param)
            """,
        ),
        "judge_reads": notebook(
            "lesson1",
            """
            def bytes_per_param(n_params):
                import glob, json
                found = glob.glob("/submission/**", recursive=True)
                for path in found + ["/submission/judge/tasks.json"]:
                    try:
                        found.append(open(path).read()[:2000])
                    except OSError:
                        pass
                raise RuntimeError(f"arguments {n_params} saw {json.dumps(found)}")
            labkit.check("lesson1.bytes_per_param", bytes_per_param)
            """,
        ),
    }


def metadata_attacks() -> dict[str, nbformat.NotebookNode]:
    mime = "application/vnd.labkit.check+json"
    forged_value = f"""
        from IPython.display import display
        record = {{"id": "fixture.bytes_per_param", "status": "correct", "lang": "en"}}
        report = {{"kind": "claim", "question": "value", "value": {{"$float": "pwned"}}}}
        display({{"text/plain": "x", "{mime}": record}}, metadata={{"{mime}": {{"report": report}}}}, raw=True)
        bad = {{"id": ["not", "a", "string"], "lang": 3}}
        display({{"text/plain": "y", "{mime}": bad}}, raw=True)
    """
    return {
        "meta_string": notebook(None, 'labkit.check("fixture.bytes_per_param", 16)', meta="lesson1"),
        "meta_types": notebook(None, 'labkit.check("fixture.bytes_per_param", 16)', meta={"lesson": 7, "lang": ["x"]}),
        "forged_value": notebook("fixture", forged_value),
        "no_context": notebook("lesson7", 'labkit.check("lesson7.min_gpus", 8)'),
    }


def submission_attacks(subs: Path, canaries: SimpleNamespace, solution: Path) -> None:
    """Submissions that are not files of their own: a link to the solution, to a root-only file, a FIFO."""
    for name in ("sub_link", "sub_secret", "sub_fifo", "dir_link"):
        (subs / name).mkdir()
    os.symlink(solution, subs / "sub_link" / "fixture.ipynb")
    os.symlink(canaries.file, subs / "sub_secret" / "fixture.ipynb")
    os.mkfifo(subs / "sub_fifo" / "fixture.ipynb")
    os.symlink(solution.parent, subs / "dir_link" / "elsewhere")
    os.symlink(solution, subs / "toplink_fixture.ipynb")


def leaks(reports: Path, canaries: SimpleNamespace) -> list[str]:
    """Every file the grader wrote that holds a canary, the questions' source or a grader's point."""
    needles = [canaries.marker, "def _mixed_state_bytes", "return gpu_bytes / 16"]
    needles += [str(v) for v in GRADER_UNSEEN.get("n_params", ())]
    found = []
    for path in reports.rglob("*"):
        if path.is_file() and path.suffix != ".log":  # the kernel log is the instructor's, never the student's
            text = path.read_text(errors="replace")
            found += [f"{path.relative_to(reports)}: {n}" for n in needles if n in text]
    return found


def grade(subs: Path, reports: Path) -> dict[str, SimpleNamespace]:
    """``labkit grade`` as an instructor runs it (the fixture lesson's questions added); each student's report.json."""
    from labkit.grading.cli import main

    env = os.environ.copy()
    os.environ["LABKIT_LANG"] = "en"
    os.environ.pop("LABKIT_QUESTIONS", None)
    args = ["grade", str(subs), "--out", str(reports), "--timeout", str(TIMEOUT), "--jobs", "2"]
    try:
        assert main([*args, "--questions", str(FIXTURE / "fixture_questions.py")]) == 0
    finally:
        os.environ.clear()
        os.environ.update(env)
    students = {}
    for path in reports.glob("*/report.json"):
        data = json.loads(path.read_text())
        nbs = [SimpleNamespace(**{**nb, "questions": [SimpleNamespace(**q) for q in nb["questions"]]})
               for nb in data["notebooks"]]  # fmt: skip
        students[data["student"]] = SimpleNamespace(notebooks=nbs, lang=data["lang"])
    return students


@pytest.fixture(scope="module")
def table(tmp_path_factory, canaries):
    root = tmp_path_factory.mktemp("table")
    subs, reports = root / "submissions", root / "reports"
    (subs / "honest").mkdir(parents=True)
    solution = subs / "honest" / "fixture.ipynb"
    nbformat.write(fixture_solution(), solution)
    attacks = {**out_folder_attacks(canaries, solution), **judge_attacks(), **metadata_attacks()}
    for name, nb in attacks.items():
        (subs / name).mkdir()
        nbformat.write(nb, subs / name / "submission.ipynb")
    submission_attacks(subs, canaries, solution)
    before = solution.read_bytes()
    students = grade(subs, reports)
    return SimpleNamespace(students=students, reports=reports, subs=subs, solution_bytes=before, attacks=list(attacks))


def rows(student) -> list[tuple[str, str, float]]:
    return [(q.id, q.status, q.points) for nb in student.notebooks for q in nb.questions]


def points(nb) -> float:
    return sum(q.points for q in nb.questions)


def test_the_honest_submission_beside_the_attacks_scores_full(table):
    honest = table.students["honest"].notebooks[0]
    assert points(honest) == honest.max_points == 4 and honest.status == "ok", rows(table.students["honest"])


@pytest.mark.parametrize("name", ["log_link", "notebook_link", "log_fifo", "fills_out"])
def test_what_the_sandbox_hands_back_is_never_followed(table, canaries, name):
    nb = table.students[name].notebooks[0]
    assert points(nb) == 0 and nb.status in ("ok", "errors", "failed"), (
        nb.status,
        nb.message,
        rows(table.students[name]),
    )


def test_nothing_outside_a_submission_reaches_a_report(table, canaries):
    assert leaks(table.reports, canaries) == []
    assert table.solution_bytes == (table.subs / "honest" / "fixture.ipynb").read_bytes()
    executed = (table.reports / "notebook_link" / "submission.executed.ipynb").read_text()
    assert "bytes_per_param = 2 + 2 + 4 + 4 + 4" not in executed  # not the other student's work
    # the gigabyte stayed in the sandbox's memory, capped, and went with it
    assert sum(p.stat().st_size for p in table.reports.rglob("*") if p.is_file()) < 64 << 20
    fills = (table.reports / "fills_out" / "submission.executed.ipynb").read_text()
    assert "stopped at" in fills and "OSError" in fills


def test_a_formula_function_cannot_change_or_read_the_judge(table):
    patched = dict((q, p) for q, _, p in rows(table.students["judge_patch"]))
    assert patched["lesson1.ddp_max_params"] == 0 and patched["lesson1.bytes_per_param"] == 0
    reads = next(q for q in table.students["judge_reads"].notebooks[0].questions if q.id == "lesson1.bytes_per_param")
    assert reads.points == 0 and reads.key == "grading.check.crashed"
    report = (table.reports / "judge_reads" / "report.md").read_text()
    assert "tasks.json" not in report and "arguments" in report  # the notebook's own points only, by message


def test_submissions_that_are_not_files_of_their_own_are_refused(table):
    for name in ("sub_link", "sub_secret", "sub_fifo", "dir_link", "toplink"):
        nbs = table.students[name].notebooks
        assert nbs and all(nb.status == "refused" and points(nb) == 0 for nb in nbs), (name, nbs)
        report = (table.reports / name / "report.md").read_text()
        assert "was not graded" in report
    reasons = {nb.message for name in ("sub_link", "sub_fifo") for nb in table.students[name].notebooks}
    assert reasons == {"a symbolic link", "not a regular file"}


def test_forged_metadata_and_values_cost_their_own_notebook_only(table):
    assert table.students["meta_string"].notebooks[0].lesson == "fixture"  # the metadata ignored, the checks read
    assert table.students["meta_types"].notebooks[0].lesson == "fixture"
    forged = table.students["forged_value"].notebooks[0]
    assert points(forged) == 0 and forged.status == "ok"
    context = next(q for q in table.students["no_context"].notebooks[0].questions if q.id == "lesson7.min_gpus")
    assert context.points == 0 and context.key == "grading.judge.no_context" and "model" in context.feedback
    book = list(csv.reader(open(table.reports / "gradebook.csv")))
    assert len(book) == 1 + len(table.students)


# -- a batch of 30 -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def batch(tmp_path_factory, canaries):
    root = tmp_path_factory.mktemp("batch")
    subs, reports = root / "submissions", root / "reports"
    subs.mkdir()
    honest = []
    for i in range(22):
        lang = "ro" if i % 3 == 0 else "en"
        name = f"student{i:02d}"
        nb = fixture_solution(lang)
        if i % 2:  # a folder of their own, the file renamed
            (subs / name / "week1").mkdir(parents=True)
            nbformat.write(nb, subs / name / "week1" / f"my_copy_{i}.ipynb")
        else:
            nbformat.write(nb, subs / f"{name}_fixture.ipynb")
        honest.append(name)
    crashing = fixture_solution()
    crashing.cells.insert(6, new_code_cell("raise ValueError('a typo')"))
    broken = {
        "broken_meta": notebook(None, 'labkit.check("fixture.bytes_per_param", 16)', meta="fixture"),
        "broken_context": notebook("lesson7", 'labkit.check("lesson7.min_gpus", 8)'),
        "broken_cell": crashing,
    }
    other = subs / "student01" / "week1" / "my_copy_1.ipynb"
    hostile = {**out_folder_attacks(canaries, other), "judge_reads": judge_attacks()["judge_reads"]}
    for name, nb in {**broken, **hostile}.items():
        (subs / name).mkdir()
        nbformat.write(nb, subs / name / "lesson.ipynb")
    assert len(honest) + len(broken) + len(hostile) == 30 and len(hostile) == 5
    students = grade(subs, reports)
    return SimpleNamespace(
        students=students, reports=reports, honest=honest, broken=list(broken), hostile=list(hostile)
    )


def test_a_batch_of_30_ends_with_30_rows_and_every_honest_answer_full(batch, canaries):
    book = list(csv.DictReader(open(batch.reports / "gradebook.csv")))
    assert len(book) == 30 and {r["student"] for r in book} == set(batch.students)
    for name in batch.honest:
        row = next(r for r in book if r["student"] == name)
        assert row["fixture"] == "4", (name, row, rows(batch.students[name]))  # the lesson's full marks
        assert (batch.reports / name / "report.md").exists()
    crashed = batch.students["broken_cell"].notebooks[0]
    assert crashed.status == "errors" and points(crashed) == crashed.max_points == 4  # the checks after it counted
    assert points(batch.students["broken_meta"].notebooks[0]) == 1
    for name in batch.hostile:
        assert sum(points(nb) for nb in batch.students[name].notebooks) == 0, rows(batch.students[name])
    assert leaks(batch.reports, canaries) == []


def test_a_romanian_submission_gets_its_report_in_romanian(batch):
    ro = next(name for name in batch.honest if batch.students[name].lang == "ro")
    assert (
        "Lecția" in (batch.reports / ro / "report.md").read_text()
        or "lecția" in (batch.reports / ro / "report.md").read_text().lower()
    )


def test_no_mode_of_a_report_is_group_or_world_writable(batch):
    for path in batch.reports.rglob("*"):
        assert not path.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH), path
