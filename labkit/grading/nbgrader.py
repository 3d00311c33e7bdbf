"""nbgrader's cell metadata on the graded cells, so that formgrader can be used beside ``labkit grade``.

``labkit build-student`` marks, in the student edition (and in the source edition it writes for
nbgrader's ``source/`` folder with ``--nbgrader-source``):

- each cell of ``labkit.check`` calls as an autograder test cell: ``grade``, ``locked``, its
  ``points`` (the questions' it checks), a ``grade_id`` made of their ids;
- each cell that held a solution as a solution cell (``solution``, not locked);

with ``schema_version`` 3 and the ``checksum`` nbgrader 0.9 computes (``compute_checksum`` in
``nbgrader/utils.py``: MD5 of the source, the cell type, the three flags, the grade id and the
points), so that ``nbgrader validate`` and ``autograde`` accept the cells as their own. A cell that
already has nbgrader metadata (marked with nbgrader's toolbar, or by the course's build, which marks
the solution notebooks in notebooks/) keeps it, with its checksum made again for its source.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

SCHEMA_VERSION = 3
CHECK_CALL = re.compile(r"""check\(\s*(['"])([\w.\-]+)\1""")


def checksum(cell: Any) -> str:
    """nbgrader 0.9's ``compute_checksum`` of a cell with nbgrader metadata."""
    meta = cell["metadata"]["nbgrader"]
    m = hashlib.md5()
    for part in (
        cell["source"],
        cell["cell_type"],
        str(bool(meta.get("grade", False))),
        str(bool(meta.get("solution", False))),
        str(bool(meta.get("locked", False))),
        meta["grade_id"],
    ):
        m.update(part.encode("utf-8"))
    if meta.get("grade"):
        m.update(str(float(meta["points"])).encode("utf-8"))
    return m.hexdigest()


def _mark(cell: Any, meta: dict[str, Any]) -> None:
    cell["metadata"]["nbgrader"] = {"schema_version": SCHEMA_VERSION, "cell_type": cell["cell_type"], **meta}
    cell["metadata"]["nbgrader"]["checksum"] = checksum(cell)


def grade_id(text: str) -> str:
    return re.sub(r"[^\w-]+", "-", text).strip("-")[:80] or "cell"


def annotate(nb: Any, solution_cells: set[int], points: Callable[[str], float]) -> Any:
    """Mark ``nb``'s check cells as graded tests and the cells in ``solution_cells`` (indices) as
    solutions, in place; ``points(qid)`` is a question's points. Returns ``nb``."""
    lesson = str((nb.get("metadata", {}).get("labkit") or {}).get("lesson") or "notebook")
    seen: set[str] = set()
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] not in ("code", "markdown"):
            continue
        if "nbgrader" in cell.get("metadata", {}):  # marked already (nbgrader's toolbar, or the course's build)
            if "grade_id" in cell["metadata"]["nbgrader"]:
                seen.add(cell["metadata"]["nbgrader"]["grade_id"])
                cell["metadata"]["nbgrader"]["checksum"] = checksum(cell)  # its source may have changed (a stub)
            continue
        if i in solution_cells:  # nbgrader wants a markdown answer graded by hand: grade and solution, 0 points here
            gid = _unique(f"{lesson}-answer-{i}", seen)
            meta = {"grade": False, "solution": True, "locked": False, "grade_id": gid}
            if cell["cell_type"] == "markdown":
                meta.update(grade=True, points=0.0)
            _mark(cell, meta)
            continue
        qids = (
            list(dict.fromkeys(m.group(2) for m in CHECK_CALL.finditer(cell["source"])))
            if cell["cell_type"] == "code"
            else []
        )
        if qids:
            total = float(sum(points(q) for q in qids))
            gid = _unique(grade_id("+".join(qids)), seen)
            _mark(cell, {"grade": True, "solution": False, "locked": True, "points": total, "grade_id": gid})
    return nb


def _unique(gid: str, seen: set[str]) -> str:
    base, n = gid, 2
    while gid in seen:
        gid, n = f"{base}-{n}", n + 1
    seen.add(gid)
    return gid
