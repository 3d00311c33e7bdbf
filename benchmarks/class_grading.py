"""What grading a class costs here: one student's lessons (the course's 10), and 5 students' lessons, graded locally.

    .venv/bin/python benchmarks/class_grading.py                     # the course's solution notebooks
    .venv/bin/python benchmarks/class_grading.py --fixture           # the tests' fixture lesson: seconds, not minutes

Each measure is ``labkit grade``'s own path (``labkit.grading.report.grade_folder`` through bubblewrap,
``--jobs``), then the same class graded again through the cache (``labkit.classroom.cache``), which must run
no notebook. The class is 5 students' lessons (50 submissions; with ``--fixture``, 40 students' fixture
lesson). Every notebook must come out at full marks, or the figures mean nothing and it stops.

``grade_local(submissions, out, jobs, timeout)`` is the one measure, by itself: ``labkit grade --slurm``'s
counterpart (one array job) takes the same arguments and returns the same ``Graded``, so that the two can
be printed side by side.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "grading"


@dataclass
class Graded:
    seconds: float
    notebooks: int
    full: int  # notebooks at full marks
    ran: int  # notebooks that really ran (the rest: kept scores)

    @property
    def per_submission(self) -> float:
        return self.seconds / max(1, self.notebooks)


def grade_local(submissions: Path, out: Path, jobs: int = 2, timeout: float = 900, cached: bool = False) -> Graded:
    """Grade ``submissions`` into ``out`` on this machine, as ``labkit grade`` does; ``cached``: through the
    cache in ``out`` (what a regrade of the class costs)."""
    from labkit.classroom.cache import Cache, Filters, grader_version
    from labkit.classroom.cache import cached as behind_cache
    from labkit.grading import sandbox
    from labkit.grading.grade import grade_all
    from labkit.grading.report import grade_folder
    from labkit.grading.student import cached_install

    env = {"LABKIT_HOME": str(cached_install())}  # built before the clock starts
    box = sandbox.find()
    ran: list[int] = []
    cache = Cache(out, grader_version(), None, timeout) if cached else None
    start = time.perf_counter()
    students = grade_folder(submissions, out, timeout, jobs=jobs, box=box, env=env,
                            grade=behind_cache(grade_all, cache, Filters(), ran))  # fmt: skip
    seconds = time.perf_counter() - start
    scores = [nb for s in students for nb in s.notebooks]
    full = sum(nb.points == nb.max_points > 0 for nb in scores)
    return Graded(seconds, len(scores), full, ran[0] if ran else len(scores))


def class_folder(folder: Path, students: int, notebooks: list[Path]) -> Path:
    subs = folder / "submissions"
    for i in range(students):
        (subs / f"student{i:02d}").mkdir(parents=True)
        for nb in notebooks:
            shutil.copyfile(nb, subs / f"student{i:02d}" / nb.name)
    return subs


def measure(name: str, subs: Path, out: Path, jobs: int, timeout: float) -> Graded:
    first = grade_local(subs, out, jobs, timeout, cached=True)
    print(f"{name}: {first.seconds:.1f} s for {first.notebooks} notebooks ({first.per_submission:.1f} s each), "
          f"{first.full}/{first.notebooks} at full marks", flush=True)  # fmt: skip
    if first.full != first.notebooks:
        sys.exit("not every notebook at full marks: the figures would mean nothing")
    again = grade_local(subs, out, jobs, timeout, cached=True)
    print(f"{name}, regraded unchanged: {again.seconds:.2f} s, {again.ran} notebooks ran", flush=True)
    return first


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fixture", action="store_true", help="the tests' fixture lesson instead of the course")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=900)
    args = p.parse_args()
    if args.fixture:
        os.environ["LABKIT_QUESTIONS"] = str(FIXTURE / "fixture_questions.py")
        lessons = [FIXTURE / "memory_solution.ipynb"]
        shapes = {"one student's lesson": (1, lessons), "40 lesson submissions": (40, lessons)}
    else:
        lessons = sorted((ROOT / "notebooks" / "en").glob("0*.ipynb"))
        n = len(lessons)  # 10 since lessons 8 and 9
        shapes = {f"one student's {n} lessons": (1, lessons), f"{5 * n} lesson submissions (5 students)": (5, lessons)}
    print(f"--jobs {args.jobs}, {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="labkit-class-bench-") as tmp:
        for i, (name, (students, notebooks)) in enumerate(shapes.items()):
            where = Path(tmp) / str(i)
            measure(name, class_folder(where, students, notebooks), where / "out", args.jobs, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
