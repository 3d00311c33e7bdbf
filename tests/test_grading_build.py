"""The student edition: nbgrader's markers, cleared outputs, errors at build time.

.venv/bin/pytest tests/test_grading_build.py -q
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from labkit.grading.build import (
    BuildError,
    MarkerError,
    build_student,
    check_ids,
    source_notebook,
    strip_solutions,
    student_notebook,
)
from labkit.grading.cli import main

SOLUTION = Path(__file__).parent / "fixtures" / "grading" / "memory_solution.ipynb"


def strip(source: str, cell_type: str = "code", lang: str = "en") -> str:
    return strip_solutions(source, cell_type, ("nb.ipynb", 3), lang)[0]


def test_solution_region_becomes_an_indented_stub():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    y = x * 2\n    return y\n    ### END SOLUTION\n\nprint(f(2))"
    assert strip(src) == "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\nprint(f(2))"
    assert strip_solutions("x = 1", "code", ("nb", 0), "en") == ("x = 1", False)


def test_romanian_stub_and_markdown_answer():
    assert strip("### BEGIN SOLUTION\nx = 1\n### END SOLUTION", lang="ro").startswith("# SCRIEȚI CODUL AICI\n")
    md = "Why?\n\n### BEGIN SOLUTION\nBecause the optimizer keeps fp32 copies.\n### END SOLUTION"
    assert strip(md, "markdown") == "Why?\n\nYOUR ANSWER HERE"


def test_nbgrader_marker_spellings():
    src = "a = 1\n  # BEGIN SOLUTION\n  b = 2\n  #END SOLUTION\n# BEGIN HIDDEN TESTS  \nassert b\n## END HIDDEN TESTS"
    assert strip(src) == "a = 1\n  # YOUR CODE HERE\n  raise NotImplementedError()"


def test_hidden_tests_are_removed():
    src = "check(x)\n### BEGIN HIDDEN TESTS\nassert x == 16\n### END HIDDEN TESTS\ndone()"
    assert strip(src) == "check(x)\ndone()"


def test_one_line_solution_becomes_ellipsis():
    assert strip("total = 16 * n  # SOLUTION") == "total = ..."
    assert strip("    share: float = 0.75 # SOLUTION") == "    share: float = ..."
    assert strip("d['k'] = 3  # SOLUTION") == "d['k'] = ..."
    with pytest.raises(MarkerError, match="only on an assignment"):
        strip("x += 1  # SOLUTION")
    with pytest.raises(MarkerError, match="only on an assignment"):
        strip("print(x)  # SOLUTION")


@pytest.mark.parametrize(
    "src, what, line",
    [
        ("a\n### BEGIN SOLUTION\nx = 1", "is never closed", 2),
        ("x = 1\n### END SOLUTION", "without a matching BEGIN", 2),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n### END SOLUTION", "still open", 2),
        ("### BEGIN SOLUTION\nx = 1\n### END HIDDEN TESTS", "closes a region opened by '### BEGIN SOLUTION'", 3),
        ("### BEGIN HIDDEN TESTS\n### BEGIN SOLUTION", "still open", 2),
        ("x = 1\ny = 2  ### BEGIN SOLUTION\n### END SOLUTION", "a comment line of its own", 2),
    ],
)
def test_marker_errors_name_notebook_cell_and_line(src, what, line):
    with pytest.raises(MarkerError) as e:
        strip(src)
    assert what in str(e.value)
    assert f"nb.ipynb, cell 3, line {line}" in str(e.value)


def _notebook() -> nbformat.NotebookNode:
    solved = new_code_cell("### BEGIN SOLUTION\nx = 16\n### END SOLUTION", execution_count=3)
    solved.outputs = [new_output("stream", name="stdout", text="16\n")]
    solved.metadata["nbgrader"] = {"grade_id": "q1-answer", "solution": True}
    solved.metadata["execution"] = {"iopub.status.idle": "2026-01-01"}
    whole = new_code_cell("y = 2 * x", metadata={"nbgrader": {"solution": True, "grade_id": "q2"}})
    checked = new_code_cell('labkit.check("lesson9.q1", x)', execution_count=4, metadata={"tags": ["graded"]})
    nb = new_notebook(cells=[new_markdown_cell("# Lesson 9"), solved, whole, checked])
    nb.metadata["papermill"] = {"duration": 1.0}
    return nb


def test_student_notebook_clears_outputs_and_keeps_metadata():
    nb = _notebook()
    student = student_notebook(nb, "lesson9.ipynb")
    cells = student.cells
    assert cells[1].source == "# YOUR CODE HERE\nraise NotImplementedError()"
    assert cells[1].outputs == [] and cells[1].execution_count is None
    assert cells[1].metadata["nbgrader"]["grade_id"] == "q1-answer" and "execution" not in cells[1].metadata
    assert cells[2].source == "# YOUR CODE HERE\nraise NotImplementedError()"  # nbgrader's whole-cell solution
    assert cells[3].source == 'labkit.check("lesson9.q1", x)' and cells[3].metadata["tags"] == ["graded"]
    assert [c.get("id") for c in cells] == [c.get("id") for c in nb.cells]
    assert student.metadata["labkit"] == {"lesson": "lesson9", "edition": "student"}  # lesson from the check ids
    assert "papermill" not in student.metadata
    assert nb.cells[1].outputs, "the solution notebook itself is not changed"


def test_metadata_lesson_wins_and_a_check_inside_a_solution_is_an_error():
    nb = _notebook()
    nb.metadata["labkit"] = {"lesson": "memory", "lang": "ro"}
    student = student_notebook(nb, "x.ipynb")
    assert student.metadata["labkit"] == {"lesson": "memory", "lang": "ro", "edition": "student"}
    assert student.cells[1].source.startswith("# SCRIEȚI CODUL AICI")  # the notebook's own language
    nb.cells.append(new_code_cell('### BEGIN SOLUTION\nlabkit.check("memory.q2", 1)\n### END SOLUTION'))
    with pytest.raises(MarkerError, match="'memory.q2' is inside a solution region"):
        student_notebook(nb, "x.ipynb")


def test_fixture_solution_builds_with_every_check_kept():
    solution = nbformat.read(SOLUTION, as_version=4)
    student = student_notebook(solution, SOLUTION.name)
    assert len(student.cells) == len(solution.cells)
    text = "\n".join(c.source for c in student.cells)
    assert "SOLUTION" not in text and "16 * n_params" not in text and "2 + 2 + 4" not in text
    assert (
        check_ids(student)
        == check_ids(solution)
        == [
            "fixture.bytes_per_param",
            "fixture.total_bytes",
            "fixture.per_rank_bytes",
        ]
    )
    for a, b in zip(solution.cells, student.cells, strict=True):
        if "check(" in a.source and "SOLUTION" not in a.source:
            assert a.source == b.source
        assert a.get("metadata", {}).get("tags") == b.get("metadata", {}).get("tags")
    assert all(not c.get("outputs") for c in student.cells)


def test_build_folder_keeps_layout_and_writes_nothing_on_error(tmp_path, capsys):
    src = tmp_path / "src"
    (src / "en").mkdir(parents=True)
    (src / ".ipynb_checkpoints").mkdir()
    nbformat.write(_notebook(), src / "en" / "lesson9.ipynb")
    nbformat.write(_notebook(), src / ".ipynb_checkpoints" / "lesson9-checkpoint.ipynb")
    out = tmp_path / "out"
    assert main(["build-student", str(src), "--out", str(out), "--no-install"]) == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.ipynb")) == ["en/lesson9.ipynb"]
    assert "1 notebook written" in capsys.readouterr().out

    bad = _notebook()
    bad.cells[1].source = "### BEGIN SOLUTION\nx = 16"
    nbformat.write(bad, src / "en" / "lesson10.ipynb")
    out2 = tmp_path / "out2"
    assert main(["build-student", str(src), "--out", str(out2), "--no-install"]) == 1
    err = capsys.readouterr().err
    assert "was not written" in err and "lesson10.ipynb, cell 1, line 1" in err and "is never closed" in err
    assert not out2.exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(BuildError, match="no notebooks found"):
        build_student([tmp_path / "empty"], tmp_path / "out3")
    with pytest.raises(BuildError, match="nothing.ipynb: not a readable notebook"):
        build_student([tmp_path / "nothing.ipynb"], tmp_path / "out3")
    (tmp_path / "broken.ipynb").write_text("{not json")
    with pytest.raises(BuildError, match="broken.ipynb: not a readable notebook"):
        build_student([tmp_path / "broken.ipynb"], tmp_path / "out3")


def test_nbgrader_metadata_on_the_check_and_solution_cells():
    """formgrader beside labkit grade: the check cells are nbgrader test cells with the questions' points,
    the cells a student writes in are solution cells, with nbgrader 0.9's checksum, in both editions: in the
    solution notebooks the course's build writes (notebooks/), in the student edition and in nbgrader's source."""
    import hashlib

    from labkit.grading import registry
    from labkit.grading.nbgrader import checksum

    registry.load_questions()
    root = Path(__file__).resolve().parents[1]
    for lang in ("en", "ro"):
        path = root / "notebooks" / lang / "01_ddp_memory_wall.ipynb"
        solution = nbformat.read(path, as_version=4)
        for nb in (solution, student_notebook(solution, path.name), source_notebook(solution)):
            marked = [c for c in nb.cells if "nbgrader" in c.metadata]
            ids = [c.metadata.nbgrader.grade_id for c in marked]
            assert ids and len(ids) == len(set(ids)) and all(ids)
            checks = [c for c in nb.cells if "labkit.check(" in c.source]
            assert checks and all(c.metadata.nbgrader.grade and c.metadata.nbgrader.locked for c in checks)
            points = sum(c.metadata.nbgrader.points for c in checks)
            assert points == sum(q.points for q in registry.lesson_questions("lesson1"))
            answers = [c for c in marked if c.metadata.nbgrader.solution]
            assert len(answers) >= 4 and all(not c.metadata.nbgrader.locked for c in answers)
            for c in marked:
                meta = c.metadata.nbgrader
                assert meta.schema_version == 3 and meta.cell_type == c.cell_type and meta.checksum == checksum(c)
                assert c.cell_type != "markdown" or (meta.grade and meta.solution)  # as nbgrader's validator wants
        solved = [c for c in solution.cells if "### BEGIN SOLUTION" in c.source]
        assert solved and all(c.metadata.nbgrader.solution for c in solved)
        stubs = [c for c in student_notebook(solution, path.name).cells if "raise NotImplementedError()" in c.source]
        assert stubs and all(c.metadata.nbgrader.solution for c in stubs)
    cell = new_code_cell('labkit.check("x.y", 1)')
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "x-y", "points": 1}
    recipe = 'labkit.check("x.y", 1)' + "code" + "True" + "False" + "True" + "x-y" + "1.0"
    assert checksum(cell) == hashlib.md5(recipe.encode()).hexdigest()  # nbgrader.utils.compute_checksum, 0.9


def test_the_student_catalog_gives_multiple_choice_no_mistake_hints():
    """Which options of a multiple-choice question have a known mistake's hint rules them out: the students'
    install carries none (neither the keys nor their texts); the grader's report still shows them."""
    from labkit.grading import registry, student

    registry.load_questions()
    sealed = [q for q in registry.all_questions() if q.sealed]
    assert any(q.mistakes for q in sealed), "no multiple-choice question with a known mistake to test"
    for entry in student.catalog()["questions"]:
        q = registry.get(entry["id"])
        if q.sealed:
            assert entry["mistakes"] == [] and not any(".mistake" in k for k in entry["texts"]), q.id
        else:
            assert entry["mistakes"] == [k for _, k in q.mistakes]
