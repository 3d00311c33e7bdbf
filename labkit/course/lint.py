"""The lessons' code cells through ruff's pyflakes rules (F) and syntax checks (E9), straight from their sources.

A lesson holds two kinds of code: the kernel's cells, which share one namespace and run in order,
and the ``%%torchrun`` cells, whose body runs on every rank in a namespace of its own that holds
only the ``--vars`` names. So the kernel's cells are checked together as one script, and each
``%%torchrun`` body on its own with its ``--vars`` names given; a rank cell that uses a kernel
name it was not sent is an error here, as it would be on the ranks. Magic and shell lines
(``%load_ext``, ``!ls``) are not Python: they become blank lines, so every finding keeps its line
in the lesson's MyST file.

The course build runs this before it writes any notebook (``python -m labkit.course.build``), and
``tests/test_lint.py`` on every lesson. ruff comes with the test extras; without it the build says
so and writes the notebooks unlinted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.course.comments import python_only
from labkit.course.source import Code, Lesson

RULES = "F,E9"
BUILTINS = '["display", "get_ipython"]'  # what IPython gives every kernel cell
CELL_MAGIC = "%%torchrun"
VARS = re.compile(r"--vars[ =](\S+)")


@dataclass
class Script:
    """Python text made of a lesson's code cells, and the source line each of its lines came from."""

    lesson: Lesson
    lines: list[str] = field(default_factory=list)
    origin: list[int] = field(default_factory=list)  # line in the lesson's source file (from 1)

    def add(self, text: str, first_line: int) -> None:
        for i, line in enumerate(text.split("\n")):
            self.lines.append(line)
            self.origin.append(first_line + i)


def scripts(lesson: Lesson) -> list[Script]:
    """The kernel's cells of ``lesson`` as one script, then each ``%%torchrun`` body on its own."""
    kernel, ranks = Script(lesson), []
    for cell in lesson.cells:
        if not isinstance(cell, Code):
            continue
        first, _, body = cell.source.partition("\n")
        if first.startswith(CELL_MAGIC):
            found = VARS.search(first)
            names = [n for n in found.group(1).split(",") if n] if found else []
            script = Script(lesson)
            # the notebook sends these: a rank's namespace starts with them (on the magic's line)
            script.add(f"{' = '.join(names)} = None" if names else "", cell.line)
            script.add(python_only(body), cell.line + 1)
            ranks.append(script)
        elif first.startswith("%%"):
            continue  # another cell magic (%%capture, %%bash ...): its body is not checked here
        else:
            kernel.add(python_only(cell.source), cell.line)
    return [kernel, *ranks]


def available() -> bool:
    return importlib.util.find_spec("ruff") is not None


def ruff(paths: list[Path]) -> list[dict[str, Any]]:
    """ruff's findings (its JSON records) for these files, with the rules above and nothing else."""
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", RULES, "--output-format", "json"]
        + ["--config", f"builtins = {BUILTINS}", "--no-fix", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode not in (0, 1):  # 1: it found something
        raise RuntimeError(f"ruff failed: {out.stderr.strip()}")
    return json.loads(out.stdout or "[]")


def problems(lessons: list[Lesson]) -> list[str]:
    """One line per finding: the lesson's source file, the line in it, ruff's code and message."""
    with tempfile.TemporaryDirectory(prefix="labkit-lint-") as folder:
        files: dict[Path, Script] = {}
        for lesson in lessons:
            for script in scripts(lesson):
                path = (Path(folder) / f"src{len(files)}.py").resolve()
                path.write_text("\n".join(script.lines) + "\n", encoding="utf-8")
                files[path] = script
        found = []
        for d in ruff(list(files)):
            script = files[Path(d["filename"]).resolve()]
            line = script.origin[min(d["location"]["row"], len(script.origin)) - 1]
            found.append(f"{shown(script.lesson)}:{line}: {d['code']} {d['message']}")
        return found


def shown(lesson: Lesson) -> str:
    """The lesson's source as a path to open: relative to the current folder when it is under it."""
    if lesson.path is None:
        return lesson.file
    relative = os.path.relpath(lesson.path)
    return relative if not relative.startswith("..") else str(lesson.path)
