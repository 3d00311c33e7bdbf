"""The lessons' code cells pass ruff's pyflakes rules (F) and syntax checks (E9), without running them
(``labkit.course.lint``, which the course build also runs before it writes a notebook).

    .venv/bin/python -m pytest tests/test_lint.py -q
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from labkit.course import build, lint

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks" / "en").glob("*.ipynb"))


def test_there_are_lessons_to_check():
    assert NOTEBOOKS, "no notebooks/en/*.ipynb: build them with python -m labkit.course.build"
    total = [s for nb in NOTEBOOKS for s in lint.sources(nbformat.read(nb, as_version=4), nb.stem)]
    assert sum(len(s.lines) for s in total) > 100 and any(":cell" in s.name for s in total)


def a_notebook_with_a_typo() -> nbformat.NotebookNode:
    # an undefined name in a rank cell, a --vars name that is defined there
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext labkit\nsteps = 3"),
        nbformat.v4.new_code_cell("%%torchrun -n 2 --vars steps\nfor i in range(steps):\n    print(stpes)"),
    ]
    return nb


def test_the_lint_sees_a_mistake_and_names_its_cell_and_line():
    assert lint.problems({"lesson": a_notebook_with_a_typo()}) == ["lesson cell 1 line 3: F821 Undefined name `stpes`"]


def test_the_build_refuses_a_lesson_that_fails_the_lint():
    with pytest.raises(build.CourseBuildError, match="cell 1 line 3: F821"):
        build.lint_code_cells({"en/lesson": a_notebook_with_a_typo()})


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_lesson_code_cells_pass_ruff(notebook):
    found = lint.problems({notebook.name: nbformat.read(notebook, as_version=4)})
    assert not found, "fix these in labkit/course/lessons and rebuild:\n" + "\n".join(found)
