"""The student edition: solutions out, outputs cleared, everything else kept.

    labkit build-student notebooks/en --out dist/student/en

The markers are nbgrader's, so a notebook works with nbgrader as well:

    ### BEGIN SOLUTION            ->   # YOUR CODE HERE
    total = 16 * n_params              raise NotImplementedError()
    ### END SOLUTION

``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` regions are removed, a cell
whose ``metadata.nbgrader.solution`` is true and that has no markers is replaced
whole (as nbgrader does), and the otter-style one-liner ``x = 16  # SOLUTION``
becomes ``x = ...`` (which ``labkit.check`` reports as "not answered yet").
Unclosed, stray, nested or mismatched markers are errors that name the notebook,
the cell and the line; nothing is written while any notebook has one.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from pathlib import Path

import nbformat

from labkit.grading import nbgrader
from labkit.i18n import get_lang, t
from labkit.wire.errors import LabkitError

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
_OPENS = {BEGIN_SOLUTION: END_SOLUTION, BEGIN_HIDDEN: END_HIDDEN}
_CLOSES = {END_SOLUTION: BEGIN_SOLUTION, END_HIDDEN: BEGIN_HIDDEN}
_ONE_LINE = re.compile(r"#\s*SOLUTION\s*$")
_ASSIGNMENT = re.compile(r"^(\s*[^=#<>!+\-*/%&|^@]+?)\s*=(?!=)")  # "x = ", "x: int = ", not "x == " or "x += "
CHECK_CALL = re.compile(r"""check\(\s*(['"])([\w.\-]+)\1""")
_DROPPED_CELL_META = ("execution", "papermill", "ExecuteTime")
_DROPPED_NB_META = ("papermill", "widgets")


class BuildError(LabkitError, ValueError):
    """The student edition cannot be built; the message says which notebooks and why."""


class MarkerError(BuildError):
    """Solution markers that do not pair up; the message names notebook, cell and line."""


# a marker is a comment line of its own; any number of '#', as nbgrader accepts "# BEGIN SOLUTION" too
_MARKER = re.compile(r"^\s*#+\s*((?:BEGIN|END) (?:SOLUTION|HIDDEN TESTS))\s*$")
_ANY_MARKER = re.compile(r"(?:BEGIN|END) (?:SOLUTION|HIDDEN TESTS)")
_ONE_LINE_ANY = re.compile(r"#\s*SOLUTION\s*$", re.M)


def _marker(line: str) -> str | None:
    m = _MARKER.match(line)
    return "### " + m.group(1) if m else None


def _stub(cell_type: str, lang: str) -> list[str]:
    if cell_type == "code":
        return [t("grading.build.stub.code", lang), "raise NotImplementedError()"]
    return [t("grading.build.stub.text", lang)]


def strip_solutions(source: str, cell_type: str, where: tuple[str, int], lang: str) -> tuple[str, bool]:
    """The source with solution regions replaced by a stub and hidden tests removed.

    Returns the new source and whether anything was replaced. ``where`` is
    (notebook name, cell index), for the error messages.
    """
    stub = _stub(cell_type, lang)
    out: list[str] = []
    opened: tuple[str, int] | None = None  # (marker, line number) of the region we are in
    replaced = False

    def here(line: int) -> str:
        return t("grading.build.where", nb=where[0], cell=where[1], line=line)

    for n, line in enumerate(source.split("\n"), 1):
        marker = _marker(line)
        if marker in _OPENS:
            if opened:
                raise MarkerError(t("grading.build.nested", where=here(n), marker=marker, opened=opened[1]))
            opened = (marker, n)
            if marker == BEGIN_SOLUTION:  # the stub takes the marker's indentation, as in nbgrader
                indent = line[: len(line) - len(line.lstrip())]
                out += [indent + s for s in stub]
            replaced = True
        elif marker in _CLOSES:
            if not opened:
                raise MarkerError(t("grading.build.stray_end", where=here(n), marker=marker))
            if _CLOSES[marker] != opened[0]:
                raise MarkerError(t("grading.build.mismatched", where=here(n), marker=marker, opener=opened[0]))
            opened = None
        elif opened:
            continue
        elif _ANY_MARKER.search(line):  # "x = 1  ### BEGIN SOLUTION" would leak into the student edition
            raise MarkerError(t("grading.build.not_alone", where=here(n)))
        elif cell_type == "code" and _ONE_LINE.search(line):
            m = _ASSIGNMENT.match(line)
            if not m:
                raise MarkerError(t("grading.build.one_line", where=here(n)))
            out.append(m.group(1) + " = ...")
            replaced = True
        else:
            out.append(line)
    if opened:
        raise MarkerError(t("grading.build.unclosed", where=here(opened[1]), marker=opened[0]))
    return "\n".join(out), replaced


def check_ids(nb: nbformat.NotebookNode) -> list[str]:
    """The question ids of every ``check("...")`` call in the notebook's code, in order."""
    return [m.group(2) for c in nb.cells if c.cell_type == "code" for m in CHECK_CALL.finditer(c.source)]


def lesson_from_ids(ids: list[str]) -> str | None:
    lessons = Counter(i.split(".", 1)[0] for i in ids if "." in i)
    return lessons.most_common(1)[0][0] if lessons else None


def student_notebook(
    nb: nbformat.NotebookNode, name: str = "notebook", lang: str | None = None
) -> nbformat.NotebookNode:
    """The student edition of one solution notebook (a new object; ``nb`` is not changed)."""
    nb = copy.deepcopy(nb)
    meta = dict(nb.metadata.get("labkit") or {})
    lang = lang or meta.get("lang") or get_lang()
    before = check_ids(nb)
    answers: set[int] = set()  # the cells a student writes in: nbgrader's solution cells
    for i, cell in enumerate(nb.cells):
        if cell.cell_type not in ("code", "markdown"):
            continue
        cell.source, replaced = strip_solutions(cell.source, cell.cell_type, (name, i), lang)
        if replaced:
            answers.add(i)
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution") and not replaced:
            cell.source = "\n".join(_stub(cell.cell_type, lang))  # a whole-cell solution, as in nbgrader
        for key in _DROPPED_CELL_META:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    lost = [qid for qid in dict.fromkeys(before) if qid not in check_ids(nb)]
    if lost:
        raise MarkerError(t("grading.build.lost_check", nb=name, qid=lost[0]))
    for key in _DROPPED_NB_META:
        nb.metadata.pop(key, None)
    meta.setdefault("lesson", lesson_from_ids(before))
    if meta["lesson"] is None:
        del meta["lesson"]
    meta["edition"] = "student"
    nb.metadata["labkit"] = meta
    return nbgrader.annotate(nb, answers, _points)


def solution_cells(nb: nbformat.NotebookNode) -> set[int]:
    """The cells of a solution notebook that hold a solution (a marked region or a one-line answer)."""
    return {
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type in ("code", "markdown")
        and (_ANY_MARKER.search(cell.source) or _ONE_LINE_ANY.search(cell.source))
    }


def mark_for_nbgrader(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """nbgrader's cell metadata on a solution notebook, in place, its outputs kept: what the course's
    build writes into notebooks/en and notebooks/ro (``labkit.course.build``)."""
    return nbgrader.annotate(nb, solution_cells(nb), _points)


def source_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The solution notebook as nbgrader's ``source/`` folder wants it: outputs cleared, solution and
    check cells marked (``labkit.grading.nbgrader``); the solutions stay, between their markers."""
    nb = copy.deepcopy(nb)
    answers = solution_cells(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        for key in _DROPPED_CELL_META:
            cell.metadata.pop(key, None)
    for key in _DROPPED_NB_META:
        nb.metadata.pop(key, None)
    return nbgrader.annotate(nb, answers, _points)


def _points(qid: str) -> float:
    from labkit.grading import registry

    q = registry.find(qid)
    return q.points if q is not None else 0.0


def _notebooks(paths: list[Path], out_dir: Path) -> list[tuple[Path, Path]]:
    """(source, destination) pairs; a folder keeps its layout under ``out_dir``."""
    pairs = []
    for p in paths:
        if p.is_dir():
            for f in sorted(p.rglob("*.ipynb")):
                skip = ".ipynb_checkpoints" in f.parts or out_dir.resolve() in f.resolve().parents
                if not skip:
                    pairs.append((f, out_dir / f.relative_to(p)))
        else:
            pairs.append((p, out_dir / p.name))
    return pairs


def build_student(
    paths: list[str | Path], out_dir: str | Path, lang: str | None = None, nbgrader_source: str | Path | None = None
) -> list[Path]:
    """Write the student edition of every notebook in ``paths`` (files or folders) under ``out_dir``;
    with ``nbgrader_source``, the source edition for nbgrader there too, in the same layout.

    Every notebook is checked before any is written, and all the problems are reported at once.
    """
    out_dir = Path(out_dir)
    pairs = _notebooks([Path(p) for p in paths], out_dir)
    if not pairs:
        raise BuildError(t("grading.build.no_notebooks", paths=", ".join(map(str, paths))))
    built, errors = [], []
    for src, dst in pairs:
        try:
            nb = nbformat.read(src, as_version=4)
        except (OSError, ValueError) as e:  # missing, not JSON, not a notebook
            errors.append(t("grading.build.unreadable", path=src, error=f"{type(e).__name__}: {e}"))
            continue
        try:
            built.append((student_notebook(nb, str(src), lang), dst))
        except MarkerError as e:
            errors.append(str(e))
    if errors:
        raise BuildError(t("grading.build.failed", errors="\n".join(f"  - {e}" for e in errors)))
    for nb, dst in built:
        dst.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dst)
    if nbgrader_source is not None:
        for (src, dst), _ in zip(pairs, built):
            target = Path(nbgrader_source) / dst.relative_to(out_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(source_notebook(nbformat.read(src, as_version=4)), target)
    return [dst for _, dst in built]
