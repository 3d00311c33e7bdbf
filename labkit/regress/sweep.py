"""``labkit sweep``: run notebooks with papermill over a grid of parameters, and keep what they measured.

    labkit sweep notebooks/en/01_ddp_memory_wall.ipynb notebooks/en/03_wrap_policies.ipynb \\
        -p nproc 2,4 -p backend gloo --out runs/torch-2.15 --jobs 2

For each notebook and each point of the grid (every combination of the ``-p`` values), the
notebook runs top to bottom in a fresh kernel (``labkit.grading.runner.execute``: outputs cleared
first, the parameters injected after its ``parameters`` cell, a time limit for the whole
notebook), and the sweep writes, under ``OUT/<edition>/<notebook>/``:

- ``<point>.ipynb``: the executed notebook (each run's record is one of its outputs);
- ``<point>.record.json``: the notebook's record beside it (``labkit.regress.record``): its runs
  with their cells, its checks' statuses, its errors, and where it ran;
- ``<point>.runs/``: each run's record as the kernel wrote it (kept if the kernel dies);

then ``OUT/sweep.json`` (the grid and each job's outcome) and ``OUT/summary.md`` (one table).
``labkit regress compare`` reads such a folder.
"""

from __future__ import annotations

import ast
import glob
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from labkit.fmt import fmt_number
from labkit.i18n import t
from labkit.regress import messages  # noqa: F401  (registers the regress.* messages)

INDEX = "sweep.json"
SUMMARY = "summary.md"
RECORD_SUFFIX = ".record.json"


# -- the grid ----------------------------------------------------------------------------


def parse_value(text: str) -> Any:
    """``"2"`` -> 2, ``"0.5"`` -> 0.5, ``"True"`` -> True, ``"gloo"`` -> "gloo" (papermill injects Python literals)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_params(pairs: Iterable[tuple[str, str]]) -> dict[str, list[Any]]:
    """``[("nproc", "2,4"), ("backend", "gloo")]`` -> ``{"nproc": [2, 4], "backend": ["gloo"]}``."""
    grid: dict[str, list[Any]] = {}
    for name, values in pairs:
        if not name.isidentifier():
            raise ValueError(t("regress.sweep.bad_name", name=name))
        grid.setdefault(name, []).extend(parse_value(v.strip()) for v in values.split(",") if v.strip())
    return grid


def points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in the order given (one empty point for no grid)."""
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


def slug(point: dict[str, Any]) -> str:
    """A file name for a grid point: ``nproc-2_backend-gloo`` (``default`` for no parameters)."""
    if not point:
        return "default"
    return "_".join(re.sub(r"[^A-Za-z0-9.+-]+", "-", f"{k}-{v}") for k, v in point.items())


def notebook_name(path: Path) -> str:
    """``notebooks/en/01_x.ipynb`` -> ``en/01_x``: the edition and the lesson, where the sweep ran or not."""
    return f"{path.parent.name}/{path.stem}" if path.parent.name else path.stem


def find_notebooks(args: Iterable[str]) -> list[Path]:
    found: list[Path] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            found += sorted(p.glob("*.ipynb"))
        elif p.is_file():
            found.append(p)
        else:
            matches = sorted(Path(m) for m in glob.glob(arg)) if any(c in arg for c in "*?[") else []
            if not matches:
                raise FileNotFoundError(t("regress.sweep.no_notebook", path=arg))
            found += matches
    return [p for p in found if not p.name.endswith(".executed.ipynb")]


# -- one job -----------------------------------------------------------------------------


@dataclass
class Job:
    notebook: str  # the source notebook's path
    name: str  # en/01_ddp_memory_wall
    point: dict[str, Any]
    out: str  # the executed notebook's path
    timeout: float


@dataclass
class Outcome:
    name: str
    point: dict[str, Any]
    status: str  # ok | errors | timeout | died | failed
    message: str
    seconds: float
    executed: str
    record: str
    runs: int = 0
    runs_ok: int = 0
    checks: int = 0
    checks_correct: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)


def run_job(job: Job) -> Outcome:
    """Execute one notebook at one point; write the executed notebook and its record beside it."""
    import nbformat

    from labkit.grading.runner import cleared, execute  # the grader's papermill run, without its sandbox
    from labkit.regress.record import notebook_record

    out = Path(job.out)
    runs_dir = out.with_suffix(".runs")
    nb = nbformat.read(job.notebook, as_version=4)
    t0 = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    status, message = execute(
        nb,
        out,
        job.timeout,
        env={"LABKIT_RECORD_DIR": str(runs_dir.resolve())},
        parameters=job.point or None,
        name=os.path.basename(
            job.notebook
        ),  # the kernel's folder holds the notebook, as Jupyter's does (lesson 7 exports itself)
    )
    seconds = time.monotonic() - t0
    try:
        executed = nbformat.read(out, as_version=4)
    except (OSError, ValueError):  # the kernel did not start, or died before papermill saved it
        executed = cleared(nb)
    rec = notebook_record(executed, job.name, job.point, status, seconds)
    if not rec["runs"] and runs_dir.is_dir():  # the kernel died before the notebook was saved: its files
        rec["runs"] = [
            {"cell": None, "source": "", "index": i, "record": json.loads(p.read_text())}
            for i, p in enumerate(sorted(runs_dir.glob("*.json"), key=lambda p: p.stat().st_mtime))
        ]
    record_path = out.with_name(out.stem + RECORD_SUFFIX)
    record_path.write_text(json.dumps(rec, indent=1, default=repr))
    return Outcome(
        name=job.name,
        point=job.point,
        status=status,
        message=message,
        seconds=round(seconds, 1),
        executed=str(out),
        record=str(record_path),
        runs=len(rec["runs"]),
        runs_ok=sum(1 for r in rec["runs"] if r["record"].get("ok")),
        checks=len(rec["checks"]),
        checks_correct=sum(1 for c in rec["checks"] if c["status"] in ("correct", "recorded")),
        errors=rec["errors"],
    )


def run_jobs(jobs: list[Job], workers: int, log: Callable[[int, Job, Outcome], None]) -> list[Outcome]:
    """Run the jobs, ``workers`` at a time, in separate processes; ``log`` after each ends."""
    if workers <= 1:
        results = []
        for i, job in enumerate(jobs):
            results.append(run_job(job))
            log(i, job, results[-1])
        return results
    # processes, not threads: papermill and the zmq channels keep state per process; spawn,
    # not fork, because a process that ran a kernel client already has zmq threads
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    done: dict[int, Outcome] = {}
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(run_job, job): i for i, job in enumerate(jobs)}
        for f in as_completed(futures):
            i = futures[f]
            done[i] = f.result()
            log(i, jobs[i], done[i])
    return [done[i] for i in range(len(jobs))]


# -- the sweep ---------------------------------------------------------------------------


def plan(notebooks: list[Path], grid: dict[str, list[Any]], out: Path, timeout: float) -> list[Job]:
    jobs = []
    for path in notebooks:
        name = notebook_name(path)
        for point in points(grid):
            target = out / name / f"{slug(point)}.ipynb"
            jobs.append(Job(str(path), name, point, str(target), timeout))
    return jobs


def point_text(point: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items()) or "-"


def summary_table(outcomes: list[Outcome]) -> str:
    head = [t(f"regress.sweep.col.{c}") for c in ("notebook", "parameters", "status", "seconds", "runs", "checks")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for o in outcomes:
        status = o.status if not o.errors else f"{o.status} ({len(o.errors)} {t('regress.sweep.cell_errors')})"
        lines.append(
            f"| {o.name} | {point_text(o.point)} | {status} | {fmt_number(o.seconds, 1)} | {o.runs_ok}/{o.runs} "
            f"| {o.checks_correct}/{o.checks} |"
        )
    return "\n".join(lines) + "\n"


def sweep(
    notebooks: list[Path],
    grid: dict[str, list[Any]],
    out: Path,
    workers: int = 1,
    timeout: float = 900.0,
    echo: Callable[[str], None] = print,
) -> list[Outcome]:
    """Run the whole grid; write ``sweep.json`` and ``summary.md`` in ``out``; return each job's outcome."""
    from labkit.regress.fingerprint import fingerprint

    out.mkdir(parents=True, exist_ok=True)
    jobs = plan(notebooks, grid, out, timeout)
    echo(t("regress.sweep.start", jobs=len(jobs), notebooks=len(notebooks), points=len(points(grid)), workers=workers))
    t0 = time.monotonic()
    finished = [0]

    def log(i: int, job: Job, o: Outcome) -> None:
        finished[0] += 1
        echo(
            t(
                "regress.sweep.progress",
                n=finished[0],
                total=len(jobs),
                name=job.name,
                point=point_text(job.point),
                status=o.status,
                seconds=fmt_number(o.seconds, 1),
                runs=o.runs,
                checks=f"{o.checks_correct}/{o.checks}",
            )
        )

    outcomes = run_jobs(jobs, workers, log)
    index = {
        "schema": "labkit.sweep/1",
        "grid": grid,
        "notebooks": [str(p) for p in notebooks],
        "seconds": round(time.monotonic() - t0, 1),
        "fingerprint": fingerprint(),
        "jobs": [
            {**asdict(o), "executed": relative(o.executed, out), "record": relative(o.record, out)} for o in outcomes
        ],
    }
    (out / INDEX).write_text(json.dumps(index, indent=1, default=repr))
    table = summary_table(outcomes)
    (out / SUMMARY).write_text(f"# {t('regress.sweep.title')}\n\n{table}")
    echo(table)
    return outcomes


def relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return path


def cmd_sweep(args: Any) -> int:
    try:
        notebooks = find_notebooks(args.notebooks)
        grid = parse_params(args.param or [])
    except (FileNotFoundError, ValueError) as err:
        print(err, file=sys.stderr)
        return 2
    outcomes = sweep(notebooks, grid, Path(args.out), workers=args.jobs, timeout=args.timeout)
    return 0 if all(o.status == "ok" and not o.errors for o in outcomes) else 1


def add_arguments(p: Any) -> None:
    p.add_argument("notebooks", nargs="+", help=t("regress.sweep.help.notebooks"))
    p.add_argument(
        "-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUES"), help=t("regress.sweep.help.p")
    )
    p.add_argument("--out", required=True, help=t("regress.sweep.help.out"))
    p.add_argument("--jobs", type=int, default=1, help=t("regress.sweep.help.jobs"))
    p.add_argument("--timeout", type=float, default=900.0, help=t("regress.sweep.help.timeout"))
