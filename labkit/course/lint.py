"""The lessons' code cells through ruff's pyflakes rules (F) and syntax checks (E9), without running them.

A lesson's notebook holds two kinds of code: the kernel's cells, which share one namespace and run
in order, and the ``%%torchrun`` cells, whose body runs on every rank in a namespace of its own that
holds only the ``--vars`` names. So the kernel's cells are checked together as one script, and each
``%%torchrun`` body on its own with its ``--vars`` names given. Magic and shell lines (``%load_ext``,
``!ls``) are not Python: they become blank lines, so that the line numbers stay the cell's.

The course build runs this on every lesson it writes (``python -m labkit.course.build``), and
``tests/test_lint.py`` on the committed notebooks. ruff comes with the test extras; without it the
build says so and writes the notebooks unlinted.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def sources(nb: Any, name: str) -> list[Source]:
    """The kernel's cells of notebook ``nb`` as one script, then each ``%%torchrun`` body on its own."""
    kernel = Source(f"{name}:kernel")
    ranks = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        first, _, body = cell.source.lstrip("\n").partition("\n")
        if first.startswith(CELL_MAGIC):
            found = VARS.search(first)
            names = [n for n in found.group(1).split(",") if n] if found else []
            source = Source(f"{name}:cell{index}")
            if names:  # the notebook sends these: a rank's namespace starts with them (on the magic's line)
                source.add(index, f"{' = '.join(names)} = None")
            source.add(index, python_only(body), start=2)
            ranks.append(source)
        elif first.startswith("%%"):
            continue  # another cell magic (%%capture, %%bash ...): its body is not checked here
        else:
            kernel.add(index, python_only(cell.source))
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


def problems(notebooks: dict[str, Any]) -> list[str]:
    """``{name: notebook}`` -> one line per finding: the notebook, the cell, the line in it, ruff's code."""
    with tempfile.TemporaryDirectory(prefix="labkit-lint-") as folder:
        files: dict[Path, tuple[str, Source]] = {}
        for name, nb in notebooks.items():
            for source in sources(nb, name):
                path = (Path(folder) / f"src{len(files)}.py").resolve()
                path.write_text("\n".join(source.lines) + "\n")
                files[path] = (name, source)
        found = []
        for d in ruff(list(files)):
            name, source = files[Path(d["filename"]).resolve()]
            cell, line = source.origin[d["location"]["row"] - 1]
            found.append(f"{name} cell {cell} line {line}: {d['code']} {d['message']}")
        return found
