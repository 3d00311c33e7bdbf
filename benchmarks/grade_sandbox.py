"""What the sandbox costs: ``labkit grade`` of 20 submissions of one lesson, ``--jobs 2``, with and without it.

The same folder (copies of one notebook: a lesson's solution, or the tests' fixture lesson) is
graded by ``labkit grade``'s own code, once through bubblewrap and once with ``--no-sandbox``,
alternating (``--rounds`` pairs, the order swapped each round, so that a machine whose load drifts
is not read as the sandbox's cost). Both modes run the same programs (the notebook under papermill
in a process of its own, the grader's judge in another), so the difference is the sandbox's: the
namespaces, the mounts, the user switch. Every graded notebook must score full marks in both.
Prints the wall time of each run and the cost: sandbox / no sandbox - 1. Target: at most 10%.

    .venv/bin/python benchmarks/grade_sandbox.py                        # lesson 0 (English), 20 copies
    .venv/bin/python benchmarks/grade_sandbox.py --notebook tests/fixtures/grading/memory_solution.ipynb \\
        --questions tests/fixtures/grading/fixture_questions.py        # a lesson without ranks: the worst case
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def grade_once(subs: Path, out: Path, box, jobs: int, timeout: float, env: dict[str, str]) -> tuple[float, list]:
    from labkit.grading.report import grade_folder

    if out.exists():
        shutil.rmtree(out)
    start = time.perf_counter()
    students = grade_folder(subs, out, timeout, jobs=jobs, box=box, env=env)
    return time.perf_counter() - start, students


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--notebook", default=str(ROOT / "notebooks" / "en" / "00_setup.ipynb"))
    p.add_argument("--questions", default=None, help="a questions file the notebook needs (LABKIT_QUESTIONS)")
    p.add_argument("--submissions", type=int, default=20)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1, help="pairs of runs, the order swapped each round")
    p.add_argument("--timeout", type=float, default=900)
    args = p.parse_args()
    if args.questions:
        os.environ["LABKIT_QUESTIONS"] = os.path.abspath(args.questions)

    from labkit.grading import sandbox
    from labkit.grading.student import cached_install

    env = {"LABKIT_HOME": str(cached_install())}  # built once, outside the timing
    boxes = {"sandbox": sandbox.find(), "no sandbox": sandbox.find(no_sandbox=True)}
    times: dict[str, list[float]] = {name: [] for name in boxes}
    with tempfile.TemporaryDirectory(prefix="labkit-bench-") as tmp:
        subs = Path(tmp) / "submissions"
        for i in range(args.submissions):
            (subs / f"student{i:02d}").mkdir(parents=True)
            shutil.copyfile(args.notebook, subs / f"student{i:02d}" / Path(args.notebook).name)
        print(f"{args.submissions} copies of {args.notebook}, --jobs {args.jobs}", flush=True)
        for r in range(args.rounds):
            order = list(boxes) if r % 2 == 0 else list(reversed(boxes))
            for name in order:
                seconds, students = grade_once(subs, Path(tmp) / "out", boxes[name], args.jobs, args.timeout, env)
                scores = [nb for s in students for nb in s.notebooks]
                full = sum(nb.points == nb.max_points > 0 for nb in scores)
                print(f"round {r + 1}, {name:>10}: {seconds:7.1f} s  ({full}/{len(scores)} at full marks)", flush=True)
                if full != len(scores):
                    bad = [(nb.file, nb.status, nb.message) for nb in scores if nb.points != nb.max_points]
                    print(f"  not at full marks: {bad[:3]}", file=sys.stderr)
                    return 1
                times[name].append(seconds)
    with_box, without = statistics.median(times["sandbox"]), statistics.median(times["no sandbox"])
    cost = with_box / without - 1
    print(f"median: sandbox {with_box:.1f} s, no sandbox {without:.1f} s: the sandbox costs {100 * cost:+.1f}%")
    print(f"per submission: {with_box / args.submissions:.2f} s and {without / args.submissions:.2f} s")
    return 0 if cost <= 0.10 else 2


if __name__ == "__main__":
    sys.exit(main())
