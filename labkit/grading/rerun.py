"""The grader runs each exercise on the ranks again, on ranks of its own: the evidence the student cannot write.

The notebook's own check judges what labkit observed on the student's ranks (``labkit.grading.exercises``);
those ranks ran the student's code, so what they said is the student's to forge. Here the grader takes
the student's functions out of the submission (``functions_of``: the exercise cell's imports, defs and
classes, nothing else), launches ranks of its own with labkit's launcher inside the judge's sandbox
(``run_task``), gives each rank inputs made from a seed the report records (different values and sizes
from the notebook's, and from one grading to the next), calls the student's functions through the
exercise's harness, and judges, in its own process (``verdict``), what they returned against what it
computes itself from the seed: a mean that needs every rank's values, a shard that needs every rank's
gradient. The collectives labkit observed the functions issue are a second signal, which names a
right answer got the wrong way (an all-reduce where the exercise asks for a reduce-scatter).

A rank's inputs reach it alone: the judge writes one file per rank, and the harness in rank ``r`` reads
and removes its own, makes its process non-dumpable (no other rank can read its memory), and waits
for every rank to have done the same before any of the student's code runs, even a decorator.

    task = rerun.task("lesson0.mean_on_ranks", rerun.functions_of(cells, qid), seed)   # the grader
    result = rerun.run_task(task, timeout=120)                                         # the judge's child
    rerun.verdict("lesson0.mean_on_ranks", seed, result)                               # the grader

Adding an exercise: an ``Exercise`` in ``labkit.grading.rerun_exercises.EXERCISES`` (its functions, its
world size, its inputs from a seed, what a rank does with them, the verdict), and its right and wrong
answers in ``tests/test_grading_fairness.py``.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from labkit.grading.compare import Verdict
from labkit.grading.rerun_exercises import EXERCISES

if TYPE_CHECKING:
    from labkit.launch.run import Run

INPUT = "in.{rank}.json"  # a rank's inputs, in the task's folder, read and removed by that rank alone
TASK = "task.json"  # what every rank may know: the exercise, the world size, the shared parameters
CODE = "functions.py"  # the student's functions, as functions_of found them
PR_SET_DUMPABLE = 4
OUTPUT = "rerun"  # the key of the harness's rank.report


# -- the student's functions, from the notebook ----------------------------------------------------------

_MAGIC = re.compile(r"^\s*[%!]")


def _parse(source: str) -> ast.Module | None:
    """The cell as Python, its IPython magic lines blanked (line numbers kept); None if it is not Python."""
    lines = ["" if _MAGIC.match(line) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return None


def _kept(tree: ast.Module, source: str) -> tuple[set[str], str]:
    """(the functions the cell defines at its top level, its top-level imports, defs and classes as code)."""
    lines = ["" if _MAGIC.match(line) else line for line in source.splitlines()]
    defined, parts = set(), []
    for node in tree.body:
        if not isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        parts.append("\n".join(lines[first - 1 : node.end_lineno]))
    return defined, "\n".join(parts) + "\n"


def functions_of(cells: list[str], qid: str, before: int | None = None) -> str | None:
    """From the notebook's code cell sources (as the grader reads them, data only; `before`: only cells
    with index < before), the code of the exercise's functions: the LAST code cell before `before` that
    defines every function the exercise needs (its %%torchrun line and any IPython magic lines dropped),
    reduced to that cell's top-level imports, defs and classes (no other statement runs). None if absent."""
    exercise = EXERCISES.get(qid)
    if exercise is None:
        return None
    end = len(cells) if before is None else max(0, min(before, len(cells)))
    for source in reversed(cells[:end]):
        if not isinstance(source, str):
            continue
        tree = _parse(source)
        if tree is None:
            continue
        defined, code = _kept(tree, source)
        if set(exercise.functions) <= defined:
            return code
    return None


def no_functions(qid: str) -> Verdict:
    """The verdict when ``functions_of`` found no cell that defines the exercise's functions."""
    return Verdict(False, "grading.exercise.rerun.no_functions", {"names": ", ".join(EXERCISES[qid].functions)})


# -- the tasks -------------------------------------------------------------------------------------------


def rerun_questions() -> set[str]:
    """The qids that have a grader re-run."""
    return set(EXERCISES)


def inputs_of(qid: str, seed: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(what every rank may know, each rank's own inputs) of one grading: a function of the seed alone."""
    exercise = EXERCISES[qid]
    return exercise.inputs(random.Random(f"{qid}|{seed}"), exercise.world)


def task(qid: str, code: str, seed: int) -> dict:
    """What the judge's child gets: the exercise, the student's functions, the inputs of this grading."""
    shared, per_rank = inputs_of(qid, seed)
    return {"qid": qid, "seed": seed, "world": EXERCISES[qid].world, "code": code, "shared": shared, "ranks": per_rank}


@contextlib.contextmanager
def _prefork(on: bool, fsdp: bool = True) -> Iterator[None]:
    """Launches through labkit's prefork server (``on``) or torchrun started anew. The server imports torch
    (and FSDP and dynamo, where ``fsdp``) once and freezes them out of the collector's sight; the ranks it
    forks pay neither. Measured on the loaded development machine, CPU seconds of lesson 0's exercise at
    3 ranks (the launching process importing no torch): 3.0 through a server without FSDP, 3.4-3.8 with
    torchrun started anew, 4.2-4.4 through a server with FSDP; for FSDP's ranks the server is quicker
    still (lesson 3 in 17-19 s against 25-32 s, lesson 7 in 22-24 s against 25-42 s), and for several
    launches (``run_tasks``) by far (about 1-2 s an exercise after the first)."""
    from labkit.launch import prefork

    old, old_light = os.environ.get(prefork.SWITCH), prefork.light
    os.environ[prefork.SWITCH] = "1" if on else "0"
    prefork.light = not fsdp
    try:
        yield
    finally:
        if on:
            prefork.stop()
        prefork.light = old_light
        if old is None:
            os.environ.pop(prefork.SWITCH, None)
        else:
            os.environ[prefork.SWITCH] = old


def _fsdp(task: dict) -> bool:
    exercise = EXERCISES.get(str(task.get("qid")))
    return exercise is not None and exercise.fsdp


def run_task(task: dict, timeout: float) -> dict:
    """In the judge's child (inside the sandbox): launch the grader's own ranks with labkit's launcher
    (gloo, the exercise's world size), give each rank its inputs, call the student's functions through
    the exercise's harness. Returns ``{"ok", "error", "outputs": {rank: ...}, "calls": {rank: [...]},
    "seconds"}``; never raises for anything the student's code does."""
    return run_tasks([task], timeout)[0]


def run_tasks(tasks: list[dict], timeout: float) -> list[dict]:
    """``run_task`` for several tasks (a student's exercises), each its own launch and its own ranks. Where
    one server pays (several launches, or ranks with FSDP) they are all forked from it, its torch
    imported once, not once per exercise; a server without FSDP where none of them uses it."""
    with _prefork(True, any(_fsdp(task) for task in tasks)):
        return [_one(task, timeout) for task in tasks]


def _not_dumpable() -> None:
    """No process of the same user reads this one's memory (``/proc/PID/mem``) or environment: the judge's
    child holds every rank's inputs, a grader's rank its own, and the student's code runs beside them."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _one(task: dict, timeout: float) -> dict:
    _not_dumpable()
    started = time.perf_counter()
    result: dict[str, Any] = {"qid": task.get("qid"), "seed": task.get("seed"), "ok": False, "error": None}
    try:
        compile(task["code"], "<cell>", "exec")
    except (SyntaxError, ValueError, TypeError, KeyError) as e:
        return {**result, "error": {"kind": "syntax", "message": f"{type(e).__name__}: {e}"[:300]}}
    folder = tempfile.mkdtemp(prefix="labkit-rerun-")
    try:
        _write(folder, task)
        result.update(_launch(folder, task, timeout))
    except Exception as e:  # the launcher itself failed: the verdict says so, the grade goes on
        result["error"] = {"kind": "launch", "message": f"{type(e).__name__}: {e}"[:300]}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


def _write(folder: str, task: dict) -> None:
    with open(os.path.join(folder, TASK), "w") as f:
        json.dump({"qid": task["qid"], "world": task["world"], "shared": task["shared"]}, f)
    with open(os.path.join(folder, CODE), "w") as f:
        f.write(task["code"])
    for r, mine in enumerate(task["ranks"]):
        fd = os.open(os.path.join(folder, INPUT.format(rank=r)), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(mine, f)


def _launch(folder: str, task: dict, timeout: float) -> dict[str, Any]:
    import labkit
    from labkit.grading.observed import observations_of

    harness = f"from labkit.grading import rerun as _rerun\n_rerun.on_rank({folder!r})\n"
    run = labkit.torchrun(
        harness, nproc=task["world"], backend="gloo", timeout=timeout, quiet=True, raise_on_error=False
    )
    outputs = {r: v.get(OUTPUT) for r, v in run.values.items() if isinstance(v, dict) and OUTPUT in v}
    observed = observations_of(run)
    calls = {r: _calls(obs) for r, obs in observed.items()}
    out: dict[str, Any] = {"outputs": outputs, "calls": calls, "ok": bool(run.ok) and len(outputs) == task["world"]}
    out["rank_seconds"] = max(
        (v.get("rerun_seconds", 0) for v in run.values.values() if isinstance(v, dict)), default=0
    )
    if not out["ok"]:
        out["error"] = _how_it_ended(run, outputs, task["world"], timeout)
    return out


def _calls(obs: dict[str, Any]) -> list[dict[str, Any]]:
    """The observed collectives and block forwards, in order, without their fingerprints (JSON, small)."""
    keep = ("k", "fn", "op", "dtype", "n_in", "n_out", "red", "direct", "m", "id")
    return [{k: e[k] for k in keep if k in e} for e in obs.get("trace", []) if e.get("k") in ("call", "fwd")]


def _how_it_ended(run: Run, outputs: dict[int, Any], world: int, timeout: float) -> dict[str, Any]:
    from labkit.wire.errors import RunTimeout

    if isinstance(run.error, RunTimeout):
        return {"kind": "timeout", "seconds": timeout}
    for r, state in sorted(run.ranks.items()):
        e = state.error if isinstance(state.error, dict) else None
        if e is None:
            continue
        if e.get("type") == "NotImplementedError":  # the student edition's stub: not answered yet
            return {"kind": "unanswered"}
        return {"kind": "crashed", "rank": r, "message": f"{e.get('type')}: {e.get('message')}"[:300]}
    missing = [r for r in range(world) if r not in outputs]
    how = f"{type(run.error).__name__}: {run.error}" if run.error is not None else f"exit codes {run.exit_codes}"
    return {"kind": "crashed", "rank": missing[0] if missing else 0, "message": how[:300]}


# -- in each of the grader's ranks -------------------------------------------------------------------------


def on_rank(folder: str) -> None:
    """The harness (the launched cell): this rank's inputs, then the student's functions, then its report."""
    import torch.distributed as dist

    from labkit.ranks import rank

    r = dist.get_rank()
    with open(os.path.join(folder, TASK)) as f:
        spec = json.load(f)
    path = os.path.join(folder, INPUT.format(rank=r))
    with open(path) as f:
        mine = json.load(f)
    os.unlink(path)
    _not_dumpable()
    dist.barrier()  # every rank has its own inputs and nobody else's file is left: now the student's code
    with open(os.path.join(folder, CODE)) as f:
        code = f.read()
    started = time.perf_counter()
    exercise = EXERCISES[spec["qid"]]
    namespace: dict[str, Any] = {"__name__": "__main__", **exercise.given(spec["shared"])}
    # "<cell>": labkit's observer attributes the collectives to the student's functions by this name
    exec(compile(code, "<cell>", "exec"), namespace)
    out = exercise.on_rank(namespace, spec["shared"], mine)
    rank.report(**{OUTPUT: out, "rerun_seconds": round(time.perf_counter() - started, 3)})


def verdict(qid: str, seed: int, result: dict) -> Verdict:
    """In the grader's process: the re-run's outputs against what the grader computes from the seed,
    then the collectives labkit observed the student's functions issue."""
    error = result.get("error") if isinstance(result, dict) else {"kind": "crashed", "message": "?"}
    if error:
        kind = error.get("kind")
        if kind == "unanswered":
            return Verdict(False, "grading.check.unanswered")
        if kind == "timeout":
            return Verdict(False, "grading.exercise.rerun.timeout", {"seconds": error.get("seconds")})
        if kind == "syntax":
            return Verdict(False, "grading.exercise.rerun.crashed", {"rank": 0, "error": error.get("message", "")})
        return Verdict(False, "grading.exercise.rerun.crashed",
                       {"rank": error.get("rank", 0), "error": error.get("message", "")})  # fmt: skip
    shared, inputs = inputs_of(qid, seed)
    outcome = {"outputs": result.get("outputs") or {}, "calls": result.get("calls") or {}}
    try:
        return EXERCISES[qid].judge(shared, inputs, outcome)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:  # outputs of the wrong shape
        return Verdict(False, "grading.exercise.rerun.malformed", {"error": f"{type(e).__name__}: {e}"[:200]})
