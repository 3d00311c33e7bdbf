"""Grading at class scale: a regrade runs only what changed, and ``--student`` / ``--lesson`` pick what runs.

    labkit grade submissions/ --out reports/                      # the second time: no notebook runs
    labkit grade submissions/ --out reports/ --student ana --lesson lesson2

Each notebook's score is kept in the output folder (``<out>/.labkit-cache/<key>.json``, with its executed
notebook), under a key made of

- the sha256 of the submission's bytes (as read for grading: without following a link);
- the grader's version: labkit's version, the fingerprint of the students' install (every file of
  labkit and of the questions, ``labkit.grading.student.fingerprint``) and the checkout's git commit;
- the seed of the re-runs on the ranks (``--seed``; none given: any seed graded it) and the time limit.

So an unchanged class is read back and runs no sandbox; a changed notebook, a changed question or a new
labkit grades again. A grader error is never kept. This wraps ``labkit.grading.grade.grade_all`` from the
outside: the notebooks to run are the ones neither filtered out nor kept, and ``grade_all`` runs them as
ever (a student's notebooks before one judge).

The filters choose what *runs*: a notebook they leave out still counts with its kept score, when there
is one, so the gradebook stays the class's; one never graded is left out of this grading.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.classroom.exchange import lesson_of

CACHE = ".labkit-cache"
MAX_BYTES = 64 << 20  # labkit.grading.grade.MAX_SUBMISSION: a bigger file is refused, never kept


def _git_rev() -> str:
    import labkit

    root = Path(labkit.__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return ""
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def grader_version() -> str:
    """What a kept score was graded by: labkit's version, its install's fingerprint, the git commit."""
    import labkit
    from labkit.grading.student import fingerprint

    return f"{labkit.__version__}|{fingerprint()}|{_git_rev()}"


def read_plain(path: Path) -> bytes | None:
    """The file's bytes, opened without following a link; None for anything the grader would refuse."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return None
        return f.read(MAX_BYTES + 1)


class Cache:
    """Scores kept in ``out/.labkit-cache``, by submission content and grader version."""

    def __init__(self, out: str | Path, version: str, seed: int | None, timeout: float) -> None:
        self.folder = Path(out) / CACHE
        self.salt = f"{version}|seed={seed}|timeout={timeout:g}"

    def key(self, data: bytes) -> str:
        return hashlib.sha256(hashlib.sha256(data).digest() + self.salt.encode()).hexdigest()

    def get(self, key: str, name: str, executed: Path) -> Any:
        from labkit.grading.grade import NotebookScore, QuestionScore

        try:
            data = json.loads((self.folder / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None
        try:
            data["questions"] = [QuestionScore(**q) for q in data["questions"]]
            score = NotebookScore(**data)
        except (KeyError, TypeError):
            return None
        kept = self.folder / f"{key}.executed.ipynb"
        if kept.is_file():
            executed.parent.mkdir(parents=True, exist_ok=True)
            if executed.resolve() != kept.resolve():
                shutil.copyfile(kept, executed)
        score.file, score.executed = name, str(executed)  # the same bytes under another name keep its name
        return score

    def put(self, key: str, score: Any) -> None:
        from labkit.wire.grading import NotebookStatus

        if score.status == NotebookStatus.GRADER_ERROR:
            return  # the grader's own failure: graded again next time
        self.folder.mkdir(parents=True, exist_ok=True)
        if score.executed and os.path.isfile(score.executed):
            shutil.copyfile(score.executed, self.folder / f"{key}.executed.ipynb")
        tmp = self.folder / f".{key}.{os.getpid()}"
        tmp.write_text(json.dumps(dataclasses.asdict(score), ensure_ascii=False))
        tmp.replace(self.folder / f"{key}.json")


class Filters:
    """``--student`` and ``--lesson``: which notebooks may run (empty: all)."""

    def __init__(self, students: list[str] | None = None, lessons: list[str] | None = None) -> None:
        self.students, self.lessons = set(students or ()), set(lessons or ())

    def __bool__(self) -> bool:
        return bool(self.students or self.lessons)

    def wants(self, student: str, data: bytes | None) -> bool:
        if self.students and student not in self.students:
            return False
        if not self.lessons:
            return True
        try:
            return data is not None and lesson_of(data) in self.lessons
        except (ValueError, UnicodeDecodeError):
            return False


def cached(grade_all: Callable[..., list[Any]], cache: Cache | None, filters: Filters,
           ran: list[int] | None = None) -> Callable[..., list[Any]]:  # fmt: skip
    """``grade_all`` with the cache and the filters in front: same arguments, same result, except that a
    notebook filtered out and never kept is None (``grade_folder`` leaves it out). ``ran`` (a list) gets
    the number of notebooks that really ran."""

    def grade(tasks: list[tuple[Path, Path, str]], timeout: float, jobs: int, log: Any, box: Any = None,
              env: dict[str, str] | None = None, seed: int | None = None,
              groups: list[str] | None = None) -> list[Any]:  # fmt: skip
        groups = groups if groups is not None else [str(i) for i in range(len(tasks))]
        results: list[Any] = [None] * len(tasks)
        keys: dict[int, str] = {}
        todo = []
        for i, (path, executed, name) in enumerate(tasks):
            data = read_plain(path)
            if cache is not None and data is not None:
                keys[i] = cache.key(data)
                results[i] = cache.get(keys[i], name, executed)
                if results[i] is not None:
                    if log:
                        log(results[i])
                    continue
            if filters.wants(groups[i], data):
                todo.append(i)
        scores = grade_all([tasks[i] for i in todo], timeout, jobs, log, box, env, seed, [groups[i] for i in todo])
        for i, score in zip(todo, scores):
            results[i] = score
            if cache is not None and i in keys:
                cache.put(keys[i], score)
        if ran is not None:
            ran.append(len(todo))
        return results

    return grade
