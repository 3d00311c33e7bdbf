"""What grading costs: one student's whole course, and 20 submissions of one lesson, ``--jobs 2``.

Three measures, each graded by ``labkit grade``'s own code through bubblewrap:

- ``--course``: one student's solution notebooks (``notebooks/en``), every one at full marks (with
  ``--against``, the lessons both revisions have);
- ``--phases``: each lesson graded alone, the notebook's sandbox and the judge timed apart: the
  evidence path's share of each lesson, whatever the lessons came to hold since;
- the default: 20 copies of one notebook (a lesson's solution, or the tests' fixture lesson), with
  and without the sandbox, alternating (``--rounds`` pairs, the order swapped each round, so that a
  machine whose load drifts is not read as the sandbox's cost). Target: the sandbox at most 10%.

``--against REV`` grades the same way with labkit as it was at git revision ``REV`` too (a worktree of
it, its own notebooks and its own students' install), interleaved with this checkout, and prints the
ratio: what the grader's evidence path (the exercises re-run on the grader's own ranks, the judge's
children, the pipes) costs over that revision's. Target: at most 25%.

    .venv/bin/python benchmarks/grade_sandbox.py                        # lesson 0 (English), 20 copies
    .venv/bin/python benchmarks/grade_sandbox.py --course --against 5f731ad --rounds 2
    .venv/bin/python benchmarks/grade_sandbox.py --phases                # the judge's share, lesson by lesson
    .venv/bin/python benchmarks/grade_sandbox.py --notebook tests/fixtures/grading/memory_solution.ipynb \\
        --questions tests/fixtures/grading/fixture_questions.py        # a lesson without ranks: the worst case
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# run in a process of its own, with PYTHONPATH at the checkout measured: only what every revision has
GRADE = """
import json, sys, time
from pathlib import Path
from labkit.grading import sandbox
from labkit.grading.report import grade_folder
from labkit.grading.student import cached_install
subs, out, jobs, timeout, plain = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1"
env = {"LABKIT_HOME": str(cached_install())}  # built before the clock starts
box = sandbox.find(no_sandbox=plain)
start = time.perf_counter()
students = grade_folder(subs, out, timeout, jobs=jobs, box=box, env=env)
seconds = time.perf_counter() - start
scores = [nb for s in students for nb in s.notebooks]
print(json.dumps({"seconds": seconds, "full": sum(nb.points == nb.max_points > 0 for nb in scores),
                  "total": len(scores), "bad": [(nb.file, str(nb.status), nb.points, nb.max_points)
                                                for nb in scores if nb.points != nb.max_points][:5]}))
"""


def grade_once(checkout: Path, subs: Path, out: Path, jobs: int, timeout: float, plain: bool, env: dict) -> dict:
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-c", GRADE, str(subs), str(out), str(jobs), str(timeout), "1" if plain else "0"]
    done = subprocess.run(cmd, env={**env, "PYTHONPATH": str(checkout)}, capture_output=True, text=True, cwd=checkout)
    if done.returncode != 0:
        sys.exit(f"grading with {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def lessons(checkout: Path) -> list[Path]:
    return sorted((checkout / "notebooks" / "en").glob("0*.ipynb"))


def course(checkout: Path, folder: Path, names: set[str] | None = None) -> Path:
    """One student's lessons, from ``checkout``'s own solution notebooks (those named in ``names`` only:
    the lessons both revisions have, when one is compared with another)."""
    subs = folder / "submissions"
    (subs / "ana").mkdir(parents=True)
    for path in lessons(checkout):
        if names is None or path.name in names:
            shutil.copyfile(path, subs / "ana" / path.name)
    return subs


PHASES = """
import json, sys, time
from pathlib import Path
from labkit.grading import grade, sandbox
from labkit.grading.student import cached_install
env = grade._with_install({"LABKIT_HOME": str(cached_install())})  # built before the clock starts
box, out = sandbox.find(), Path(sys.argv[1])
for i, path in enumerate(sys.argv[2:]):
    start = time.perf_counter()
    ran = grade.run_notebook(Path(path), out / f"{i}.ipynb", 900, None, None, box, env, None)
    ran_s = time.perf_counter() - start
    score = ran if isinstance(ran, grade.NotebookScore) else grade.judge_together(box, [ran], env)[0]
    judge_s = time.perf_counter() - start - ran_s
    print(json.dumps({"lesson": Path(path).name, "notebook": ran_s, "judge": judge_s,
                      "full": score.points == score.max_points > 0}), flush=True)
"""


def phases(folder: Path) -> int:
    """Each of this checkout's lessons graded alone, one after the other: the notebook's sandbox, then the
    judge (the formulas called again, the exercises re-run on the grader's own ranks): the evidence
    path's share of each lesson's grading, apart from what the lessons themselves came to hold."""
    out = folder / "phases"
    out.mkdir()
    cmd = [sys.executable, "-c", PHASES, str(out), *map(str, lessons(ROOT))]
    done = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"grading failed:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    print(f"{'lesson':28s} {'notebook s':>10s} {'judge s':>8s} {'judge share':>11s}")
    for r in rows:
        print(f"{r['lesson']:28s} {r['notebook']:10.1f} {r['judge']:8.1f} {r['judge'] / r['notebook']:11.1%}"
              + ("" if r["full"] else "  (not at full marks)"))  # fmt: skip
    nb, judge = sum(r["notebook"] for r in rows), sum(r["judge"] for r in rows)
    print(f"{'the course':28s} {nb:10.1f} {judge:8.1f} {judge / nb:11.1%}")
    return 0 if all(r["full"] for r in rows) else 1


def copies(notebook: Path, n: int, folder: Path) -> Path:
    subs = folder / "submissions"
    for i in range(n):
        (subs / f"student{i:02d}").mkdir(parents=True)
        shutil.copyfile(notebook, subs / f"student{i:02d}" / notebook.name)
    return subs


def worktree(rev: str, folder: Path) -> Path:
    path = folder / f"labkit-{rev}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev], check=True,
                   capture_output=True)  # fmt: skip
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--course", action="store_true", help="one student's eight lessons instead of copies of one")
    p.add_argument("--notebook", default="notebooks/en/00_setup.ipynb", help="relative to the checkout measured")
    p.add_argument("--questions", default=None, help="a questions file the notebook needs (LABKIT_QUESTIONS)")
    p.add_argument("--submissions", type=int, default=20)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1, help="pairs of runs, the order swapped each round")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--against", metavar="REV", help="also grade with labkit at git revision REV; print the ratio")
    p.add_argument(
        "--phases",
        action="store_true",
        help="each lesson alone, one after the other: the notebook's sandbox and the judge timed apart",
    )
    args = p.parse_args()
    if args.phases:
        with tempfile.TemporaryDirectory(prefix="labkit-bench-") as tmp:
            return phases(Path(tmp))
    env = dict(os.environ)
    if args.questions:
        env["LABKIT_QUESTIONS"] = os.path.abspath(args.questions)
    with tempfile.TemporaryDirectory(prefix="labkit-bench-") as tmp:
        folder = Path(tmp)
        runs = {"this checkout": (ROOT, False)}
        if args.against:
            runs[args.against] = (worktree(args.against, folder), False)
        elif not args.course:
            runs["no sandbox"] = (ROOT, True)
        try:
            subs = {}
            # against another revision, the lessons both have: a lesson added since is not the grader's cost
            common = set.intersection(*({p.name for p in lessons(c)} for c, _ in runs.values()))
            for name, (checkout, _) in runs.items():
                where = folder / name.replace(" ", "_")
                subs[name] = (course(checkout, where, common) if args.course
                              else copies(checkout / args.notebook, args.submissions, where))  # fmt: skip
            what = (f"one student's {len(common)} lessons ({', '.join(sorted(n[:2] for n in common))})" if args.course
                    else f"{args.submissions} copies of {args.notebook}")  # fmt: skip
            print(f"{what}, --jobs {args.jobs}", flush=True)
            times: dict[str, list[float]] = {name: [] for name in runs}
            for r in range(args.rounds):
                for name in list(runs) if r % 2 == 0 else list(reversed(runs)):
                    checkout, plain = runs[name]
                    got = grade_once(checkout, subs[name], folder / "out", args.jobs, args.timeout, plain, env)
                    print(f"round {r + 1}, {name:>14}: {got['seconds']:7.1f} s  ({got['full']}/{got['total']} "
                          f"at full marks)", flush=True)  # fmt: skip
                    if got["full"] != got["total"]:
                        print(f"  not at full marks: {got['bad']}", file=sys.stderr)
                        return 1
                    times[name].append(got["seconds"])
        finally:
            for checkout, _ in runs.values():
                if checkout != ROOT:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)],
                                   capture_output=True)  # fmt: skip
    medians = {name: statistics.median(t) for name, t in times.items()}
    mine, other = medians["this checkout"], next((v for k, v in medians.items() if k != "this checkout"), None)
    line = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in medians.items())
    print(f"median: {line}")
    if other is None:
        return 0
    cost = mine / other - 1
    target = 0.25 if args.against else 0.10
    print(f"this checkout costs {100 * cost:+.1f}% over {next(k for k in medians if k != 'this checkout')} "
          f"(target: at most {100 * target:.0f}%)")  # fmt: skip
    return 0 if cost <= target else 2


if __name__ == "__main__":
    sys.exit(main())
