"""Every ``labkit.x.y`` the docs and docstrings name is a real module, or a module and its attributes.

The code moved from flat modules (the old ``agent``, ``diagnose``, ...) into packages; a name in a
doc that no longer imports sends the reader nowhere. This test finds each dotted name that starts with
``labkit.`` in docs/*.md, README.md and the docstrings of labkit/ and resolves it: the longest prefix
that imports as a module, then each further part as an attribute (``labkit.last_run`` is the package's
attribute; ``labkit.timing.predict.Calibration.share`` a class's field). An attribute that is a runtime
value (``labkit.last_run`` is None until a run) ends the check: what it holds is not known here.

The lessons' code is checked the other way round: every name a lesson takes from a facade
(``from labkit import comm`` then ``comm.count``, or ``from labkit.units import fmt_number``) exists.

A history section keeps the names as they were: a heading with the line
``<!-- history: names as they were -->`` right under it exempts everything up to the next heading of
the same or a higher level (docs/netem.md's session notes).

    .venv/bin/python -m pytest tests/test_dotted_names.py -q
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import types
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HISTORY = "<!-- history: names as they were -->"
# a dotted name, not a path's part (labkit/x.py), a MIME type's (vnd.labkit.run) or a longer word's
DOTTED = re.compile(r"(?<![\w./-])labkit(?:\.[A-Za-z_]\w*)+(?![\w/])")  # not a schema string: labkit.run/1
HEADING = re.compile(r"^(#{1,6})\s")
# Files that other branches are editing at the same time, with the old names they still have: their
# owners rename them (tests/test_dotted_names.py's own check says when an entry is no longer needed).
PENDING: dict[str, set[str]] = {}


def markdown_names(path: Path) -> list[tuple[int, str]]:
    """(line, name) of each dotted name in a Markdown file, history sections left out."""
    out, lines, skip_level = [], path.read_text().splitlines(), None
    for i, line in enumerate(lines):
        heading = HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            if skip_level is not None and level <= skip_level:
                skip_level = None
            if i + 1 < len(lines) and lines[i + 1].strip() == HISTORY:
                skip_level = level if skip_level is None else skip_level
        if skip_level is None:
            out += [(i + 1, m.group(0)) for m in DOTTED.finditer(line)]
    return out


def docstring_names(path: Path) -> list[tuple[int, str]]:
    """(line, name) of each dotted name in the docstrings of a Python file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                line = node.body[0].lineno
                out += [(line + doc[: m.start()].count("\n"), m.group(0)) for m in DOTTED.finditer(doc)]
    return out


@cache
def importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def has_attribute(owner: object, attr: str) -> bool:
    if hasattr(owner, attr):
        return True
    if inspect.isclass(owner):  # a field without a default: annotated, and a dataclass field
        fields = {f.name for f in dataclasses.fields(owner)} if dataclasses.is_dataclass(owner) else set()
        notes = {name for cls in owner.__mro__ for name in getattr(cls, "__annotations__", {})}
        return attr in fields | notes
    return False


def resolves(name: str) -> bool:
    parts = name.split(".")
    n = next((k for k in range(len(parts), 0, -1) if importable(".".join(parts[:k]))), 0)
    if n == 0:
        return False
    owner: object = importlib.import_module(".".join(parts[:n]))
    for attr in parts[n:]:
        if not (isinstance(owner, types.ModuleType) or inspect.isclass(owner)):
            return True  # a runtime value's attributes are not known here
        if not has_attribute(owner, attr):
            return False
        try:
            owner = getattr(owner, attr)
        except AttributeError:
            return True  # an annotated field without a class-level value
    return True


def sources() -> dict[str, list[tuple[int, str]]]:
    found = {}
    for path in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        found[str(path.relative_to(ROOT))] = markdown_names(path)
    for path in sorted((ROOT / "labkit").rglob("*.py")):
        found[str(path.relative_to(ROOT))] = docstring_names(path)
    return found


@cache
def unresolved() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for where, names in sources().items():
        for line, name in names:
            if not resolves(name):
                out.setdefault(where, []).append(f"{where}:{line} {name}")
    return out


def test_the_finder_sees_names_and_skips_history(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text(
        "# A\nSee `labkit.launch.agent` and vnd.labkit.run, labkit/launch/agent.py.\n"
        f"## Old\n{HISTORY}\n`labkit.agent` was here.\n### Older\n`labkit.nodes`\n"
        "## New\n`labkit.launch.diagnose` again.\n"
    )
    assert [n for _, n in markdown_names(doc)] == ["labkit.launch.agent", "labkit.launch.diagnose"]
    assert resolves("labkit.launch.agent") and resolves("labkit.last_run") and resolves("labkit.timeline.Recorder")
    assert resolves("labkit.timing.predict.Calibration.share") and resolves("labkit.last_run.values")
    assert not resolves("labkit.agent") and not resolves("labkit.timing.predict.nothing_here")
    assert sum(len(v) for v in sources().values()) > 300  # it reads the real docs


def test_every_dotted_name_resolves() -> None:
    bad = [
        b
        for where, found in sorted(unresolved().items())
        for b in found
        if b.rsplit(" ", 1)[1] not in PENDING.get(where, set())
    ]
    assert not bad, "names that do not import (the module moved? see docs/architecture.md):\n" + "\n".join(bad)


def test_pending_entries_are_still_needed() -> None:
    for where, names in PENDING.items():
        still = {b.rsplit(" ", 1)[1] for b in unresolved().get(where, [])}
        assert names <= still, f"{where} no longer names {sorted(names - still)}: drop them from PENDING"


FACADE_USE = re.compile(r"from labkit import ([\w ,]+)")


def facade_uses(text: str) -> set[tuple[str, str]]:
    """(facade, name) for each ``facade.name`` and ``from labkit.facade import name`` in ``text``."""
    import labkit

    local = {}
    for m in FACADE_USE.finditer(text):
        for part in m.group(1).split(","):
            words = part.split()
            if words and words[0] in labkit.FACADES:
                local[words[2] if words[1:2] == ["as"] else words[0]] = words[0]
    uses = {(f, m.group(1)) for name, f in local.items() for m in re.finditer(rf"(?<![\w.]){name}\.(\w+)", text)}
    for m in re.finditer(r"from labkit\.(\w+) import ([\w ,]+)", text):
        if m.group(1) in labkit.FACADES:
            uses |= {(m.group(1), n.split()[0]) for n in m.group(2).split(",") if n.strip()}
    return uses


def test_every_name_a_lesson_takes_from_a_facade_exists() -> None:
    assert ("comm", "count") in facade_uses("from labkit import comm, rank\nwith comm.count(step=i):")
    lessons = sorted((ROOT / "labkit" / "course" / "lessons").glob("*.md"))
    uses = {(lesson.name, *use) for lesson in lessons for use in facade_uses(lesson.read_text())}
    assert len(uses) > 40, uses  # it reads the real lessons
    missing = sorted(
        f"{lesson}: labkit.{f}.{n}" for lesson, f, n in uses if not hasattr(importlib.import_module(f"labkit.{f}"), n)
    )
    assert not missing, "names the lessons use that the facades lack (add them to labkit/<facade>.py):\n" + "\n".join(
        missing
    )
