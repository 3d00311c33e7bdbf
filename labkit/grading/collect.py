"""A folder of submissions, collected as an instructor hands it to ``labkit grade``: with ``lstat``.

    submissions/ana/lesson1.ipynb           one folder per student, searched recursively
    submissions/ana/lesson2/whatever.ipynb  (nbgrader's submitted/<student>/<assignment>/ works as is)
    submissions/bob_lesson1.ipynb           or <student>_<anything>.ipynb

Students own their submission folders (on the one-server hub, ``~/submit``), so nothing there is
followed: a notebook that is a symbolic link (to the solution, to another student's work, to a file of
the machine), a linked folder, a FIFO or a device is refused and reported in the student's report,
never opened. The notebook itself is opened later without following a link and without blocking
(``labkit.grading.grade``), since the folder may change in between.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 8  # folders below a student's own


@dataclass
class Found:
    """A folder of submissions, collected with ``lstat``: what will be graded, and what was refused."""

    notebooks: dict[str, list[tuple[Path, str]]] = field(default_factory=dict)
    refused: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # student -> [(name, why)]


def find_submissions(root: Path, skip: Path | None = None) -> dict[str, list[tuple[Path, str]]]:
    """{student: [(notebook, name relative to the student)]} (see ``collect``, which also says what it refused)."""
    return collect(root, skip).notebooks


def collect(root: Path, skip: Path | None = None) -> Found:
    """A folder per student (searched recursively, as nbgrader's ``submitted/<student>/<assignment>/``),
    or files named ``<student>_<anything>.ipynb`` directly in ``root``. Nothing is followed through a
    link: a linked file or folder, and anything not a regular file, is refused and reported."""
    found = Found()
    skip_real = os.path.realpath(skip) if skip else None
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith(".") or (skip_real and os.path.realpath(entry.path) == skip_real):
            continue
        if entry.is_dir(follow_symlinks=False):
            _walk(Path(entry.path), entry.name, Path(), found)
        elif entry.name.endswith(".ipynb"):
            student = entry.name[: -len(".ipynb")].split("_", 1)[0]
            _take(Path(entry.path), student, entry.name, entry, found)
    return found


def _walk(folder: Path, student: str, rel: Path, found: Found, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        return
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") and entry.name != ".":
            if entry.name == ".ipynb_checkpoints":
                continue
        name = str(rel / entry.name)
        if entry.is_symlink():
            if entry.name.endswith(".ipynb") or os.path.isdir(entry.path):
                found.refused.setdefault(student, []).append((name, "a symbolic link"))
            continue
        if entry.is_dir(follow_symlinks=False):
            if entry.name != ".ipynb_checkpoints":
                _walk(Path(entry.path), student, rel / entry.name, found, depth + 1)
        elif entry.name.endswith(".ipynb"):
            _take(Path(entry.path), student, name, entry, found)


def _take(path: Path, student: str, name: str, entry: os.DirEntry, found: Found) -> None:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode):
        found.refused.setdefault(student, []).append((name, "a symbolic link"))
    elif not stat.S_ISREG(info.st_mode):
        found.refused.setdefault(student, []).append((name, "not a regular file"))
    else:  # a hard link is a file of the folder's own: the submissions folder is the instructor's copy
        found.notebooks.setdefault(student, []).append((path, name))
