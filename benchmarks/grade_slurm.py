"""What ``labkit grade --slurm`` costs over grading on one machine: N submissions of one lesson, both ways.

The same folder (N students, each handing in a lesson's solution) is graded by ``labkit grade --jobs J``
and by ``labkit grade --slurm`` on a local live Slurm (labkit.testing.slurm: two nodes of this machine, J
CPUs between them, so both ways run J notebooks at once), alternating for ``--rounds``. On one machine
this measures the array's overhead (sbatch, each task's start, its own judge, the polls, the collection),
not scaling: a cluster of K such slots grades the class K/J times faster, less that overhead per task.
Needs root and Slurm (installed from Debian's packages when missing), as tests/test_slurm_live.py does.

    sudo .venv/bin/python benchmarks/grade_slurm.py                        # lesson 0 (English), 40 copies
    sudo .venv/bin/python benchmarks/grade_slurm.py -n 8 --notebook tests/fixtures/grading/memory_solution.ipynb \\
        --questions tests/fixtures/grading/fixture_questions.py            # the tests' lesson: no ranks
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copies(notebook: Path, n: int, folder: Path) -> Path:
    subs = folder / "submissions"
    for i in range(n):
        (subs / f"student{i:02d}").mkdir(parents=True)
        shutil.copyfile(notebook, subs / f"student{i:02d}" / notebook.name)
    return subs


def grade(subs: Path, out: Path, extra: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """``labkit grade`` in a process of its own: (seconds, notebooks at full marks, notebooks)."""
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "labkit.cli", "grade", str(subs), "--out", str(out), "--timeout", "600", *extra]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    with open(out / "gradebook.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return seconds, sum(r["percent"] == "100%" for r in rows), len(rows)


def empty_array(cluster, n: int, folder: Path) -> float:
    """Seconds from sbatch to the end of an array of ``n`` tasks that do nothing: Slurm's own share."""
    start = time.perf_counter()
    done = cluster.run(["sbatch", "--parsable", f"--array=0-{n - 1}", "--cpus-per-task=1",
                        f"--output={folder}/empty-%a.log", "--wrap", "true"])  # fmt: skip
    job = done.stdout.strip().split(";")[0]
    while cluster.active_jobs():
        time.sleep(0.1)
    if not job:
        sys.exit(f"sbatch failed: {done.stderr}")
    return time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=40, help="submissions (one student each)")
    p.add_argument("--notebook", default=str(ROOT / "notebooks" / "en" / "00_setup.ipynb"))
    p.add_argument("--questions", default="", help="a questions module (the fixture lesson's)")
    p.add_argument("--jobs", type=int, default=2, help="notebooks at once, both ways")
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args()
    from labkit.grading.student import cached_install
    from labkit.testing import slurm

    slurm.install()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stopped: the cluster below is still stopped
    folder = Path(tempfile.mkdtemp(prefix="labkit-gbench-"))
    os.chmod(folder, 0o755)
    cluster = slurm.start_cluster(str(folder / "slurm"), nodes=2, cpus=max(1, args.jobs // 2))
    try:
        subs = copies(Path(args.notebook), args.n, folder)
        env = {**cluster.env, "PYTHONPATH": str(ROOT), "LABKIT_LANG": "en", "OMP_NUM_THREADS": "1"}
        if args.questions:
            env["LABKIT_QUESTIONS"] = str(Path(args.questions).resolve())
        cached_install()  # the students' install, built before either clock starts
        ways = {"local": ["--jobs", str(args.jobs)], "slurm": ["--slurm"]}
        times: dict[str, list[float]] = {w: [] for w in ways}
        for r in range(args.rounds):
            for way in list(ways) if r % 2 == 0 else list(ways)[::-1]:
                seconds, full, n = grade(subs, folder / f"out-{way}", ways[way], env)
                times[way].append(seconds)
                print(f"round {r + 1} {way:5}: {seconds:7.1f} s, {full}/{n} at full marks", flush=True)
        empty = empty_array(cluster, args.n, folder)
        local, on_slurm = min(times["local"]), min(times["slurm"])
        print(f"\n{args.n} submissions of {Path(args.notebook).name}, {args.jobs} at once, best of {args.rounds}:")
        print(f"  local --jobs {args.jobs}: {local:.1f} s ({local / args.n:.2f} s a submission)")
        print(f"  --slurm array     : {on_slurm:.1f} s ({on_slurm / args.n:.2f} s a submission)")
        per_task = (on_slurm - local) / args.n * args.jobs
        print(f"  the array's overhead: {on_slurm - local:+.1f} s, {per_task:+.2f} s a task")
        print(f"  of which Slurm's own (an array of {args.n} empty tasks): {empty:.1f} s")
        print(f"  load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
