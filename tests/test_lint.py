"""The lessons' code cells pass ruff's pyflakes rules (F) and syntax checks (E9), without running them.

A lesson's notebook holds two kinds of code: the kernel's cells, which share one namespace and run
in order, and the ``%%torchrun`` cells, whose body runs on every rank in a namespace of its own that
holds only the ``--vars`` names. So the kernel's cells are checked together as one script, and each
``%%torchrun`` body on its own with its ``--vars`` names given. Magic and shell lines (``%load_ext``,
``!ls``) are not Python: they become blank lines, so that the line numbers stay the cell's.

    .venv/bin/python -m pytest tests/test_lint.py -q
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks" / "en").glob("*.ipynb"))
RULES = "F,E9"
BUILTINS = '["display", "get_ipython"]'  # what IPython gives every kernel cell
CELL_MAGIC = "%%torchrun"
VARS = re.compile(r"--vars[ =](\S+)")


@dataclass
class Source:
    """Python text made of notebook cells, and where each of its lines came from."""

    name: str
    lines: list[str] = field(default_factory=list)
    origin: list[tuple[int, int]] = field(default_factory=list)  # (cell index, line in the cell, from 1)

    def add(self, cell: int, text: str, start: int = 1) -> None:
        for i, line in enumerate(text.split("\n"), start):
            self.lines.append(line)
            self.origin.append((cell, i))


def python_only(text: str) -> str:
    """The cell with its magic and shell lines blanked (``%load_ext labkit``, ``!nvidia-smi``)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in text.split("\n"))


def sources(notebook: Path) -> list[Source]:
    """The kernel's cells as one script, then each ``%%torchrun`` body on its own."""
    nb = nbformat.read(notebook, as_version=4)
    kernel = Source(f"{notebook.stem}:kernel")
    ranks = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        first, _, body = cell.source.lstrip("\n").partition("\n")
        if first.startswith(CELL_MAGIC):
            found = VARS.search(first)
            names = [n for n in found.group(1).split(",") if n] if found else []
            source = Source(f"{notebook.stem}:cell{index}")
            if names:  # the notebook sends these: a rank's namespace starts with them (on the magic's line)
                source.add(index, f"{' = '.join(names)} = None")
            source.add(index, python_only(body), start=2)
            ranks.append(source)
        elif first.startswith("%%"):
            continue  # another cell magic (%%capture, %%bash ...): its body is not checked here
        else:
            kernel.add(index, python_only(cell.source))
    return [kernel, *ranks]


def ruff(files: dict[Path, Source]) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", RULES, "--output-format", "json"]
        + ["--config", f"builtins = {BUILTINS}", "--no-fix", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode in (0, 1), out.stderr  # 1: it found something
    return json.loads(out.stdout or "[]")


def test_there_are_lessons_to_check():
    assert NOTEBOOKS, "no notebooks/en/*.ipynb: build them with python -m labkit.course.build"
    total = [s for nb in NOTEBOOKS for s in sources(nb)]
    assert sum(len(s.lines) for s in total) > 100 and any(":cell" in s.name for s in total)


def test_the_lint_sees_a_mistake(tmp_path):
    # the same path as the lessons: an undefined name in a rank cell, a --vars name that is defined
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext labkit\nsteps = 3"),
        nbformat.v4.new_code_cell("%%torchrun -n 2 --vars steps\nfor i in range(steps):\n    print(stpes)"),
    ]
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nb, path)
    files = write(sources(path), tmp_path)
    found = [(files[Path(d["filename"])].origin[d["location"]["row"] - 1], d["code"]) for d in ruff(files)]
    assert found == [((1, 3), "F821")]


def write(found: list[Source], folder: Path) -> dict[Path, Source]:
    files = {}
    for i, source in enumerate(found):
        path = folder / f"src{i}.py"
        path.write_text("\n".join(source.lines) + "\n")
        files[path.resolve()] = source
    return files


@pytest.mark.parametrize(
    "notebook",
    NOTEBOOKS,
    ids=[nb.stem for nb in NOTEBOOKS],
)
def test_lesson_code_cells_pass_ruff(notebook, tmp_path):
    files = write(sources(notebook), tmp_path)
    problems = []
    for d in ruff(files):
        source = files[Path(d["filename"]).resolve()]
        cell, line = source.origin[d["location"]["row"] - 1]
        problems.append(f"{notebook.name} cell {cell} line {line}: {d['code']} {d['message']}")
    assert not problems, "fix these in labkit/course/lessons and rebuild:\n" + "\n".join(problems)
