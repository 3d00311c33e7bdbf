"""Grading real kernels: the fixture lesson's solution, its student build, and broken variants.

    .venv/bin/pytest tests/test_grading_grade.py -q        (about 35 s on an idle machine: nine kernels, one 10 s timeout)

One folder of submissions is graded once (module fixture); each test reads its
own student's report. The submissions are made from the fixture solution the
way students change notebooks: a renamed copy without metadata, an untouched student build, a
wrong answer, a crashing cell added in the middle, a Romanian session, a cell
that never ends, a kernel that dies, a file that is not JSON.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

from labkit.grading import registry
from labkit.grading.build import student_notebook
from labkit.grading.checks import MIME
from labkit.grading.cli import main
from labkit.grading.grade import grade_all, grade_notebook
from labkit.grading.judge import student_cells
from labkit.grading.readback import check_records
from labkit.i18n import t

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures" / "grading"
SOLUTION = FIXTURES / "memory_solution.ipynb"
QUESTIONS = FIXTURES / "fixture_questions.py"
TIMEOUT = 10  # seconds of cells per notebook; the fixture needs well under 1


def solution() -> nbformat.NotebookNode:
    return nbformat.read(SOLUTION, as_version=4)


def cell_index(nb: nbformat.NotebookNode, text: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if text in c.source)


def make_submissions(root: Path) -> None:
    def save(nb: nbformat.NotebookNode, rel: str) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, root / rel)

    renamed = solution()
    del renamed.metadata["labkit"]
    save(renamed, "ana/my work (copy).ipynb")  # renamed, no metadata: the lesson comes from the check ids
    save(student_notebook(solution(), "student"), "bob/memory_solution.ipynb")  # untouched

    wrong = solution()
    i = cell_index(wrong, "bytes_per_param = 2 + 2")
    wrong.cells[i].source = "bytes_per_param = 2 + 4 + 4 + 4 + 1"
    save(wrong, "cid_memory.ipynb")  # the <student>_<anything>.ipynb layout

    crash = solution()
    i = cell_index(crash, 'labkit.check("fixture.bytes_per_param"')
    crash.cells.insert(i + 1, new_markdown_cell("my notes"))
    crash.cells.insert(i + 2, new_code_cell('raise RuntimeError("boom")'))
    crash.cells.insert(i + 3, new_code_cell('r = labkit.check("fixture.bytes_per_param", 15)'))  # a second try
    crash.cells.insert(i + 4, new_code_cell('labkit.check("fixture.bytes_per_param", 16)'))  # and a third
    crash.cells.insert(i + 5, new_code_cell("r"))  # showing an old result again is not an attempt
    save(crash, "dan/lesson.ipynb")

    ro = solution()
    ro.cells.insert(cell_index(ro, "import labkit") + 1, new_code_cell('labkit.set_lang("ro")'))
    ro.cells[cell_index(ro, "bytes_per_param = 2 + 2")].source = "bytes_per_param = 15"
    save(ro, "eve/lectia.ipynb")

    slow = solution()
    slow.cells.insert(cell_index(slow, "per_rank_bytes ="), new_code_cell("import time\ntime.sleep(600)"))
    save(slow, "fay/memory.ipynb")

    dies = solution()
    dies.cells.insert(cell_index(dies, "per_rank_bytes ="), new_code_cell("import os\nos._exit(1)"))
    save(dies, "gus/memory.ipynb")

    (root / "ivy").mkdir()
    (root / "ivy" / "memory.ipynb").write_text("{this is not a notebook")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("grading")
    subs, out = root / "submissions", root / "reports"
    make_submissions(subs)
    env = os.environ.copy()
    os.environ["LABKIT_LANG"] = "en"
    os.environ.pop("LABKIT_QUESTIONS", None)
    args = ["grade", str(subs), "--out", str(out), "--timeout", str(TIMEOUT), "--questions", str(QUESTIONS)]
    try:
        code = main(args)
    finally:
        os.environ.clear()
        os.environ.update(env)
    assert code == 0
    return out


def report(out: Path, student: str) -> dict:
    return json.loads((out / student / "report.json").read_text())


def questions(rep: dict, i: int = 0) -> dict[str, dict]:
    return {q["id"]: q for q in rep["notebooks"][i]["questions"]}


@pytest.mark.slow
def test_gradebook(graded):
    with open(graded / "gradebook.csv") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert list(rows) == ["ana", "bob", "cid", "dan", "eve", "fay", "gus", "ivy"]
    assert {s: rows[s]["fixture"] for s in rows} == {
        "ana": "4",
        "bob": "0",
        "cid": "3",
        "dan": "4",
        "eve": "3",
        "fay": "2",
        "gus": "2",
        "ivy": "0",
    }
    assert all(r["max_points"] == "4" for r in rows.values())
    assert rows["ana"]["percent"] == "100%" and rows["fay"]["percent"] == "50%"
    table = (graded / "gradebook.md").read_text()
    assert "| student | fixture (/4) | total | % |" in table and "| ana | 4 | 4/4 | 100% |" in table


@pytest.mark.slow
def test_solution_scores_100_percent_under_a_new_name(graded):
    # also the solution's papermill run with its default parameters: status "ok" is no error output
    rep = report(graded, "ana")
    nb = rep["notebooks"][0]
    assert nb["file"] == "my work (copy).ipynb" and nb["lesson"] == "fixture" and nb["status"] == "ok"
    assert (rep["points"], rep["max_points"]) == (4, 4)
    assert all(q["status"] == "correct" and q["attempts"] == 1 for q in nb["questions"])
    executed = nbformat.read(nb["executed"], as_version=4)
    assert len(check_records(executed)) == 3
    for cell in executed.cells:  # check() shows its box once, even as the cell's last expression
        if cell.source.startswith("labkit.check("):
            assert [o["output_type"] for o in cell.outputs] == ["display_data"]
            assert set(cell.outputs[0]["data"]) == {"text/plain", "text/html", "application/vnd.labkit.check+json"}


@pytest.mark.slow
def test_untouched_student_build_scores_zero(graded):
    rep = report(graded, "bob")
    nb = rep["notebooks"][0]
    assert nb["status"] == "errors" and rep["points"] == 0 and rep["max_points"] == 4
    qs = questions(rep)
    assert qs["fixture.bytes_per_param"]["status"] == "missing"
    assert qs["fixture.total_bytes"]["status"] == "missing"
    assert qs["fixture.per_rank_bytes"]["status"] == "unanswered"  # the one-line "= ..." stub
    assert {e["ename"] for e in nb["errors"]} == {"NotImplementedError", "NameError"}
    assert "did not run" in (graded / "bob" / "report.md").read_text()


@pytest.mark.slow
def test_planted_wrong_answer_gets_its_hint(graded):
    rep = report(graded, "cid")
    q = questions(rep)["fixture.bytes_per_param"]
    hint = t("grading.q.fixture.bytes_per_param.hint", "en")
    assert q["status"] == "wrong" and q["points"] == 0 and q["feedback"] == hint
    md = (graded / "cid" / "report.md").read_text()
    assert hint in md and "✗ wrong" in md and "3/4 (75%)" in md


@pytest.mark.slow
def test_crashing_cell_does_not_stop_later_checks(graded):
    rep = report(graded, "dan")
    nb = rep["notebooks"][0]
    assert nb["status"] == "errors" and rep["points"] == 4
    sub = nbformat.read(graded.parent / "submissions" / "dan" / "lesson.ipynb", as_version=4)
    assert nb["errors"] == [{"cell": cell_index(sub, "boom"), "ename": "RuntimeError", "evalue": "boom"}]
    q = questions(rep)["fixture.bytes_per_param"]
    assert q["attempts"] == 3 and q["status"] == "correct"  # the last attempt counts
    assert q["cell"] == cell_index(sub, 'labkit.check("fixture.bytes_per_param", 16)')
    executed = nbformat.read(nb["executed"], as_version=4)
    cells = dict(student_cells(executed))  # the executed notebook also has papermill's error banners
    shown_again = cells[next(i for i, c in enumerate(sub.cells) if c.source == "r")].outputs
    assert len(shown_again) == 1 and MIME not in shown_again[0]["data"]
    assert shown_again[0]["data"]["text/plain"].startswith("✗ fixture.bytes_per_param")


@pytest.mark.slow
def test_romanian_submission_gets_romanian_feedback(graded):
    rep = report(graded, "eve")
    assert rep["lang"] == "ro" and rep["points"] == 3
    hint_ro = t("grading.q.fixture.bytes_per_param.hint", "ro")
    assert questions(rep)["fixture.bytes_per_param"]["feedback"] == hint_ro
    md = (graded / "eve" / "report.md").read_text()
    assert md.startswith("# Raport de punctaj: eve") and hint_ro in md and "✗ greșit" in md
    executed = nbformat.read(rep["notebooks"][0]["executed"], as_version=4)
    lines = [o["data"]["text/plain"] for c in executed.cells for o in c.get("outputs", []) if "data" in o]
    assert f"✗ fixture.bytes_per_param: încă nu (0/1). Indiciu: {hint_ro}" in lines


@pytest.mark.slow
def test_timeout_keeps_the_checks_before_it(graded):
    rep = report(graded, "fay")
    nb = rep["notebooks"][0]
    assert nb["status"] == "timeout" and rep["points"] == 2
    qs = questions(rep)
    assert qs["fixture.total_bytes"]["status"] == "correct" and qs["fixture.per_rank_bytes"]["status"] == "missing"
    assert "stopped at the time limit" in (graded / "fay" / "report.md").read_text()


@pytest.mark.slow
def test_kernel_death_keeps_the_checks_before_it(graded):
    rep = report(graded, "gus")
    assert rep["notebooks"][0]["status"] == "died" and rep["points"] == 2
    assert questions(rep)["fixture.per_rank_bytes"]["status"] == "missing"
    assert "the kernel died" in (graded / "gus" / "report.md").read_text()


@pytest.mark.slow
def test_unreadable_file_is_reported_not_fatal(graded):
    rep = report(graded, "ivy")
    assert rep["notebooks"][0]["status"] == "unreadable" and rep["points"] == 0 and rep["max_points"] == 0
    assert "is not a readable notebook" in (graded / "ivy" / "report.md").read_text()


def test_grade_a_missing_folder_is_a_usage_error(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == 2
    assert "no such folder" in capsys.readouterr().err


@pytest.mark.slow
def test_solution_runs_clean_under_papermill_with_4_ranks(tmp_path, monkeypatch):
    # the default parameters are ana's run above
    monkeypatch.setenv("LABKIT_QUESTIONS", str(QUESTIONS))
    params = {"world_size": 4, "n_params": 3_000_000}
    nbformat.write(solution(), tmp_path / "solution.ipynb")
    result = grade_notebook(tmp_path / "solution.ipynb", tmp_path / "out.ipynb", timeout=60, parameters=params)
    assert (result.status, result.message, result.points) == ("ok", "", 4)
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert [r["status"] for _, r in check_records(executed)] == ["correct", "deferred", "deferred"]
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "world_size = 4" in injected[0].source


@pytest.mark.slow
def test_parallel_grading_keeps_the_order(tmp_path):
    # cheap: unreadable files start no kernel, but they do go through the process pool
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.ipynb").write_text("{" + name)
    tasks = [(tmp_path / f"{n}.ipynb", tmp_path / f"{n}.out.ipynb", n) for n in ("a", "b", "c")]
    scores = grade_all(tasks, timeout=10, jobs=2, log=None)
    assert [(s.file, s.status) for s in scores] == [("a", "unreadable"), ("b", "unreadable"), ("c", "unreadable")]


@pytest.mark.slow
def test_nbval_lax_passes_on_the_solution(tmp_path):
    # a copy with one checked output changed must fail: the comparison is really on
    tampered = solution()
    out = tampered.cells[cell_index(tampered, "total_bytes = 16 * n_params")].outputs[0]
    out.text = out.text.replace("15.3 MiB", "15.4 MiB")
    nbformat.write(tampered, tmp_path / "tampered.ipynb")
    path = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))  # ipc_kernels
    env = {**os.environ, "LABKIT_QUESTIONS": str(QUESTIONS), "LABKIT_LANG": "en", "PYTHONPATH": path}
    cmd = [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-p", "ipc_kernels", "--nbval-lax"]
    cmd += ["--nbval-current-env"]
    proc = subprocess.run(
        [*cmd, str(SOLUTION), str(tmp_path / "tampered.ipynb")], env=env, capture_output=True, text=True, timeout=120
    )
    summary = proc.stdout.strip().splitlines()[-1]
    assert "1 failed, 13 passed" in summary, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Cell outputs differ" in proc.stdout and "15.4 MiB of training state" in proc.stdout


def test_report_rendering_without_kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_QUESTIONS", str(QUESTIONS))  # the fixture lesson's 4 points
    from labkit.grading.grade import NotebookScore, QuestionScore, StudentReport
    from labkit.grading.report import student_markdown, write_gradebook

    crash = {"cell": 2, "ename": "ValueError", "evalue": "<img src=x onerror=alert(1)> | \x1b[31mred\x1b[0m"}
    first = NotebookScore(
        "a.ipynb", "fixture", "errors", [QuestionScore("fixture.total_bytes", "wrong", 0, 1)], [crash]
    )
    second = NotebookScore("a (copy).ipynb", "fixture", "ok", [QuestionScore("fixture.total_bytes", "correct", 1, 1)])
    md = student_markdown(StudentReport("zoe", [first, second], "en"))
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt; \\| red" in md
    assert md.count("another submission of this lesson scored higher") == 1  # the first copy, not the second
    assert "Total: 1/1 (100%)" in md

    other = NotebookScore("b.ipynb", "lesson1", "ok", [QuestionScore("lesson1.bytes_per_param", "correct", 1, 1)])
    write_gradebook([StudentReport("zoe", [first, second], "en"), StudentReport("yan", [other], "en")], tmp_path)
    rows = list(csv.reader((tmp_path / "gradebook.csv").read_text().splitlines()))
    # lesson1's maximum comes from the registry (all its questions), not from yan's one check
    lesson1_max = sum(q.points for q in registry.lesson_questions("lesson1"))
    assert rows[0] == ["student", "fixture", "lesson1", "total", "max_points", "percent"]
    assert rows[1][:3] == ["zoe", "1", "0"] and rows[2][:3] == ["yan", "0", "1"]
    assert rows[1][4] == rows[2][4] == str(4 + lesson1_max)
