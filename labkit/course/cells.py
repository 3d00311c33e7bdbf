"""What a lesson is made of: markdown cells in two languages, code cells in one.

A lesson's source (``labkit/course/lessons/lessonN.py``) is a ``Lesson`` whose cells
come from the helpers below; ``labkit.course.build`` turns it into one notebook per
language. A code cell has a single source, so the two editions run the same code by
construction; only the prose is written twice.

    LESSON = Lesson("lesson1", "01_ddp_memory_wall", title={"en": ..., "ro": ...}, cells=[
        md(en="# ...", ro="# ..."),
        parameters(nproc=2, backend="auto", model_size="small", steps=2),
        setup(),
        code("print(16 * n_params)", pure=True),     # deterministic: output checked by nbval
        exercise("bytes_per_param = ...", solution="bytes_per_param = 2 + 2 + 4 + 4 + 4"),
        check('labkit.check("lesson1.bytes_per_param", bytes_per_param)'),
    ])
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from typing import Any

LANGS = ("en", "ro")
CHECK_TAG = "nbval-check-output"  # nbval compares the outputs of cells with this tag, even in lax mode


@dataclass(frozen=True)
class Markdown:
    text: dict[str, str]  # {"en": ..., "ro": ...}


@dataclass(frozen=True)
class Code:
    source: str
    tags: tuple[str, ...] = ()
    pure: bool = False  # deterministic and rank-free: the build runs it and stores its output for nbval
    checks: bool = False  # holds labkit.check() calls: the build stores the correct answer's feedback
    language_line: bool = False  # the setup cell, whose %labkit_lang line names the edition's language


Cell = Markdown | Code


@dataclass(frozen=True)
class Lesson:
    id: str  # "lesson1": metadata.labkit.lesson, and the prefix of its question ids
    file: str  # "01_ddp_memory_wall": the notebook's name in notebooks/en/ and notebooks/ro/
    title: dict[str, str]
    cells: list[Cell] = field(default_factory=list)
    terms: tuple[str, ...] = ()  # glossary keys this lesson introduces (see labkit.course.glossary)


def _clean(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def md(en: str, ro: str) -> Markdown:
    """A markdown cell, written in English and in Romanian."""
    return Markdown({"en": _clean(en), "ro": _clean(ro)})


def code(source: str, *tags: str, pure: bool = False) -> Code:
    """A code cell, the same in both editions. ``pure``: its output is checked by nbval."""
    return Code(_clean(source), tuple(tags) + ((CHECK_TAG,) if pure else ()), pure=pure)


def parameters(**defaults: Any) -> Code:
    """The papermill ``parameters`` cell: one ``name = value`` line per default."""
    lines = [
        f"{name} = {json.dumps(value) if isinstance(value, str) else repr(value)}" for name, value in defaults.items()
    ]
    return Code("\n".join(lines), ("parameters",), pure=True)


def setup(*extra_lines: str) -> Code:
    """The first code cell: the magic, the edition's language, ``import labkit``."""
    lines = ["%load_ext labkit", "%labkit_lang {lang}", "import labkit", *extra_lines]
    return Code("\n".join(lines), language_line=True)


def exercise(*before: str, solution: str, after: str = "", pure: bool = False) -> Code:
    """An exercise: ``before`` lines kept for the student, ``solution`` between nbgrader's markers.

    The student edition (``labkit build-student``) replaces the solution with a stub.
    """
    parts = [_clean(b) for b in before]
    parts += ["### BEGIN SOLUTION", _clean(solution), "### END SOLUTION"]
    if after:
        parts.append(_clean(after))
    return Code("\n".join(parts), (CHECK_TAG,) if pure else (), pure=pure)


def check(source: str) -> Code:
    """A cell of ``labkit.check(...)`` calls, outside any solution region.

    The committed notebook carries the feedback of a correct answer as this cell's
    output, so nbval fails when a solution notebook stops scoring full marks.
    """
    return Code(_clean(source), (CHECK_TAG,), checks=True)
