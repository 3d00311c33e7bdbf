"""Self-study (labkit.grading.selfstudy): the learner's workspace, ``labkit.progress()``,
``labkit.solution(qid)``, the self-study build and ``labkit grade --self``'s submission.

The notebooks are small solution notebooks of lesson 0's real questions, so the registry's points and
ids are the course's; the check records in their outputs are the ones ``labkit.check`` writes.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import nbformat
import pytest

import labkit
from labkit.grading import cli, registry, selfstudy
from labkit.grading.checks import CheckResult
from labkit.i18n import set_lang

SUM = "return world_size * (world_size + 1) / 2  # ranks 1..n, summed"
PEAK = "return world_size"


def solution_nb(lang: str = "en", extra: str = "") -> nbformat.NotebookNode:
    """A lesson-0-like solution notebook: a function question, a multiple-choice one, a hidden test."""
    cells = [
        nbformat.v4.new_markdown_cell(f"# Lesson 0 ({lang}){extra}"),
        nbformat.v4.new_code_cell(
            f"def allreduce_total(world_size):\n    ### BEGIN SOLUTION\n    {SUM}\n    ### END SOLUTION"
        ),
        nbformat.v4.new_code_cell('labkit.check("lesson0.allreduce_sum", allreduce_total)'),
        nbformat.v4.new_code_cell(
            f"def peak_ratio(world_size):\n    ### BEGIN SOLUTION\n    {PEAK}\n    ### END SOLUTION\n"
            "### BEGIN HIDDEN TESTS\nassert peak_ratio(4) == 4\n### END HIDDEN TESTS"
        ),
        nbformat.v4.new_code_cell('labkit.check("lesson0.peak_ratio", peak_ratio, run=dash)'),
        nbformat.v4.new_code_cell('answer = "b"  # SOLUTION\nlabkit.check("lesson0.step_gradient", answer)'),
    ]
    return nbformat.v4.new_notebook(cells=cells, metadata={"labkit": {"lang": lang, "lesson": "lesson0"}})


def course(root: Path, extra: str = "") -> Path:
    for lang in ("en", "ro"):
        (root / lang).mkdir(parents=True, exist_ok=True)
        nbformat.write(solution_nb(lang, extra), root / lang / "00_setup.ipynb")
    return root


def record_output(qid: str, status: str) -> nbformat.NotebookNode:
    """The output ``labkit.check`` leaves for one check."""
    q = registry.get(qid)
    points = q.points if status == "correct" else 0
    result = CheckResult(qid, status, points, q.points, lang="en", value="b" if status == "recorded" else None)
    return nbformat.v4.new_output("display_data", data=result.bundle())


def answer(path: Path, checks: dict[int, tuple[str, str]]) -> None:
    """The learner's notebook at ``path`` with check outputs put in (cell index -> (id, status)), saved."""
    nb = nbformat.read(path, as_version=4)
    for i, (qid, status) in checks.items():
        nb.cells[i].outputs = [record_output(qid, status)]
    nbformat.write(nb, path)


@pytest.fixture
def ws(tmp_path, monkeypatch) -> Path:
    """A fresh workspace made from the small course, nothing tried in this kernel."""
    monkeypatch.setattr(selfstudy, "_kernel", {})
    monkeypatch.setenv("LABKIT_WORKSPACE", str(tmp_path / "work"))
    set_lang("en")
    assert "workspace is" in selfstudy.prepare(course(tmp_path / "course"), tmp_path / "work")
    return tmp_path / "work"


# -- the self-study build and the class's --------------------------------------------------------------


def test_solution_text_takes_regions_and_one_liners_never_hidden_tests():
    nb = solution_nb()
    found = selfstudy.solutions_of(nb)
    assert found == {"lesson0.allreduce_sum": SUM, "lesson0.peak_ratio": PEAK, "lesson0.step_gradient": 'answer = "b"'}
    assert "assert" not in json.dumps(found)


def all_text(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file() and p.suffix != ".pyc")


def test_class_build_holds_no_solution_and_the_self_study_build_does(tmp_path, capsys):
    src = course(tmp_path / "course")
    assert cli.main(["build-student", str(src), "--out", str(tmp_path / "class")]) == 0
    assert cli.main(["build-student", str(src), "--out", str(tmp_path / "self"), "--self-study"]) == 0
    class_text = all_text(tmp_path / "class")
    assert (tmp_path / "class" / "install" / "labkit" / "grading" / "catalog.json").is_file()
    assert SUM not in class_text and "world_size * (world_size + 1)" not in class_text
    assert not list((tmp_path / "class").rglob("solutions.json"))
    # the self-study build: the same student notebooks, the solutions beside them and beside the catalog
    assert SUM not in all_text(tmp_path / "self" / "en")
    for path in (tmp_path / "self" / "solutions.json", tmp_path / "self/install/labkit/grading/solutions.json"):
        questions = json.loads(path.read_text())["questions"]
        assert questions["lesson0.allreduce_sum"] == {"en": SUM, "ro": SUM}


# -- the workspace -------------------------------------------------------------------------------------


def test_workspace_is_made_once_and_an_update_goes_beside_it(ws, tmp_path):
    mine = ws / "en" / "00_setup.ipynb"
    assert nbformat.read(mine, as_version=4).metadata["labkit"]["edition"] == "student"
    nb = nbformat.read(mine, as_version=4)
    nb.cells[1].source = "def allreduce_total(world_size):\n    return 42  # my own try"
    nbformat.write(nb, mine)
    before = mine.read_bytes()
    assert selfstudy.prepare(tmp_path / "course", ws) is None  # the same course: nothing to say, nothing written
    assert mine.read_bytes() == before and not (ws / "updates").exists()

    course(tmp_path / "course", extra=" (revised)")  # the course changes
    message = selfstudy.prepare(tmp_path / "course", ws)
    updates = list((ws / "updates").iterdir())
    assert len(updates) == 1 and str(updates[0]) in message and "newer edition" in message
    assert "(revised)" in (updates[0] / "en" / "00_setup.ipynb").read_text()
    assert mine.read_bytes() == before  # the learner's work is left as it is
    assert selfstudy.prepare(tmp_path / "course", ws) == message and len(list((ws / "updates").iterdir())) == 1


# -- progress ------------------------------------------------------------------------------------------


def test_progress_counts_the_checks_recorded_in_the_workspace(ws):
    answer(ws / "en" / "00_setup.ipynb", {2: ("lesson0.allreduce_sum", "correct"), 4: ("lesson0.peak_ratio", "wrong")})
    answer(ws / "ro" / "00_setup.ipynb", {5: ("lesson0.step_gradient", "unanswered")})
    got = labkit.progress()
    row = next(r for r in got.lessons if r.lesson == "lesson0")
    n = len(registry.lesson_questions("lesson0"))
    points = registry.get("lesson0.allreduce_sum").points
    assert (row.correct, row.attempted, row.not_yet, row.points) == (1, 1, n - 2, points)
    assert got.total.points == points and got.total.max_points == sum(q.points for q in registry.all_questions())
    text = str(got)
    assert text.splitlines()[0].split() == ["lesson", "correct", "attempted", "not", "yet", "points"]
    assert next(line.split() for line in text.splitlines() if line.startswith("lesson0 "))[1:4] == [
        "1",
        "1",
        str(n - 2),
    ]
    bundle = got._repr_mimebundle_()
    assert (
        bundle["text/plain"] == text and "<table" in bundle["text/html"] and "<td>lesson0</td>" in bundle["text/html"]
    )
    assert row.released is None  # the class workflow's released grade: not there yet


def test_progress_speaks_romanian(ws):
    set_lang("ro")
    try:
        text = str(labkit.progress())
    finally:
        set_lang("en")
    assert text.splitlines()[0].split()[:3] == ["lecția", "corecte", "încercate"] and "curs" in text


# -- solutions -----------------------------------------------------------------------------------------


def test_solution_is_refused_before_a_try_and_shown_after(ws, capsys):
    assert labkit.solution("lesson0.allreduce_sum") is None
    out = capsys.readouterr().out
    assert "Try lesson0.allreduce_sum first" in out and SUM not in out
    # the stub's "not answered yet" is no try
    answer(ws / "en" / "00_setup.ipynb", {2: ("lesson0.allreduce_sum", "unanswered")})
    assert labkit.solution("lesson0.allreduce_sum") is None
    answer(ws / "en" / "00_setup.ipynb", {2: ("lesson0.allreduce_sum", "wrong")})
    shown = labkit.solution("lesson0.allreduce_sum")
    assert shown is not None and shown.code == SUM and SUM in shown._repr_mimebundle_()["text/markdown"]
    assert labkit.solution("lesson0.peak_ratio") is None  # another question, still untried
    with pytest.raises(Exception, match="lesson0.nope"):
        labkit.solution("lesson0.nope")


def test_a_check_run_in_this_kernel_counts_before_the_notebook_is_saved(ws):
    shown: list[dict] = []
    ip = types.SimpleNamespace(display_pub=types.SimpleNamespace(publish=lambda data, **kw: shown.append(data)))
    selfstudy.watch(ip)
    selfstudy.watch(ip)  # %load_ext twice: still one note per check
    assert labkit.solution("lesson0.peak_ratio") is None
    ip.display_pub.publish(record_output("lesson0.peak_ratio", "wrong").data, metadata={})
    assert len(shown) == 1 and selfstudy._kernel == {"lesson0.peak_ratio": ["wrong"]}
    assert labkit.solution("lesson0.peak_ratio").code == PEAK
    row = next(r for r in labkit.progress().lessons if r.lesson == "lesson0")
    assert row.attempted == 1


def test_without_a_self_study_build_the_solution_notebooks_of_a_checkout_answer(ws, monkeypatch):
    (ws / ".labkit" / "solutions.json").unlink()
    answer(ws / "en" / "00_setup.ipynb", {2: ("lesson0.allreduce_sum", "correct")})
    # this checkout's notebooks/ (the instructor's): the real lesson 0's solution
    assert "world_size" in labkit.solution("lesson0.allreduce_sum").code
    monkeypatch.setattr(selfstudy, "_solution_notebooks", lambda: [])  # a student install: nothing to show
    assert labkit.solution("lesson0.allreduce_sum") is None


# -- labkit grade --self -------------------------------------------------------------------------------


def test_grade_self_submits_per_lesson_the_notebook_worked_in_most(ws, tmp_path):
    answer(ws / "ro" / "00_setup.ipynb", {2: ("lesson0.allreduce_sum", "correct"), 4: ("lesson0.peak_ratio", "wrong")})
    answer(ws / "en" / "00_setup.ipynb", {2: ("lesson0.allreduce_sum", "wrong")})
    got = selfstudy.submission(ws, tmp_path / "subs")
    assert [p.relative_to(tmp_path / "subs").as_posix() for p in got] == ["self/lesson0_ro_00_setup.ipynb"]
    assert got[0].read_bytes() == (ws / "ro" / "00_setup.ipynb").read_bytes()


def test_grade_self_on_an_empty_workspace_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LABKIT_WORKSPACE", str(tmp_path / "none"))
    assert cli.main(["grade", "--self"]) == 2
    assert "no notebooks in" in capsys.readouterr().err
    assert cli.main(["grade"]) == 2  # neither a folder nor --self
