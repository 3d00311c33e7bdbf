"""The lessons' code cells pass ruff's pyflakes rules (F) and syntax checks (E9), read from their MyST
sources and not run (``labkit.course.lint``, which the course build also runs before it writes a notebook).

    .venv/bin/python -m pytest tests/test_lint.py -q
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest

from labkit.course import build, lint, source

LESSONS = build.lessons()


def test_there_are_lessons_to_check():
    assert LESSONS, "no labkit/course/lessons/NN_name.md"
    scripts = [s for lesson in LESSONS for s in lint.scripts(lesson)]
    assert sum(len(s.lines) for s in scripts) > 100 and len(scripts) > len(LESSONS)  # each rank body on its own


def a_source_with_a_typo(tmp_path: Path) -> Path:
    """An undefined name in a rank cell, whose --vars name is defined there; a kernel name it was not sent."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["labkit"] = {"terms": []}
    nb.metadata["jupytext"] = {"notebook_metadata_filter": "labkit"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Lesson 9", metadata={"tags": ["lang-en"]}),
        nbformat.v4.new_markdown_cell("# Lecția 9", metadata={"tags": ["lang-ro"]}),
        nbformat.v4.new_code_cell("%load_ext labkit\nsteps = 3\nlr = 0.1"),
        nbformat.v4.new_code_cell("%%torchrun -n 2 --vars steps\nfor i in range(steps):\n    print(stpes, lr)"),
    ]
    path = tmp_path / "09_typo.md"
    path.write_text(jupytext.writes(nb, fmt=source.FORMAT), encoding="utf-8")
    return path


def test_the_lint_sees_a_mistake_and_names_its_line_in_the_source(tmp_path, monkeypatch):
    path = a_source_with_a_typo(tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    monkeypatch.chdir(tmp_path)
    found = lint.problems([source.read(path)])
    line = lines.index("    print(stpes, lr)") + 1
    assert found == [f"09_typo.md:{line}: F821 Undefined name `stpes`", f"09_typo.md:{line}: F821 Undefined name `lr`"]


def test_the_build_refuses_a_lesson_that_fails_the_lint(tmp_path):
    with pytest.raises(build.CourseBuildError, match="F821 Undefined name `stpes`"):
        build.lint_code_cells([source.read(a_source_with_a_typo(tmp_path))])


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.file for lesson in LESSONS])
def test_lesson_code_cells_pass_ruff(lesson):
    found = lint.problems([lesson])
    assert not found, "fix these in the lesson's source and rebuild:\n" + "\n".join(found)
