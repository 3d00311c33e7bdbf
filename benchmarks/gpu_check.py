"""The GPU lab check: labkit's NCCL path on this machine's GPUs, in one command.

    python benchmarks/gpu_check.py                 # a CUDA machine: NCCL, one rank per GPU
    python benchmarks/gpu_check.py --dry-run       # the same steps on gloo and the CPU
    python benchmarks/gpu_check.py --out DIR       # keep traces, executed notebooks, audits, summary.json

It prints one line per check, PASS, FAIL or SKIP (could not be checked here, and why), with
the figure it measured, then what it could not check. The exit code is 0 when nothing failed.
The checks, in this order:

1. seed: the course's starting example (lesson 0, Example 1: FSDP FULL_SHARD, size-based wrap
   at 1e6 parameters, AdamW after wrapping) as a ``%%torchrun`` cell, run by papermill in a
   Jupyter kernel, on as many NCCL ranks as there are GPUs. The lesson's cell is taken as it
   is and changed only where the CPU version differs (backend, device).
2. cuda-audit: ``LABKIT_CUDA_AUDIT`` is on for every run below: neither the notebook's kernel,
   nor this process, nor torchrun's agent started CUDA, and every rank forked from a clean agent.
3. memory: per-rank memory by category from ``labkit.memtrack`` (FSDP2 FULL_SHARD, AdamW),
   parameters + gradients + optimizer state within 1% of ``memory_model``, and on CUDA what
   the caching allocator reserves beyond what is allocated, as a category of its own.
4. comm: collective bytes per step, counted by ``labkit.comm`` on the backend, against 2Ψ
   (DDP) and 3Ψ (ZeRO-3) in units of (N-1)/N·Ψ·4 bytes.
5. timeline: the device's kernels per stream from ``torch.profiler`` (a synchronised
   ``labkit.timeline.Recorder`` serialises compute and collectives, so it cannot show overlap):
   NCCL kernels that run while compute kernels run on another stream are overlap.
6. faults: a killed rank (``RankError`` naming it), a hung rank under the run's timeout
   (``RunTimeout`` naming it) and under the collective timeout (``RankError``), each within
   its bound; then no process of any run is left.
7. lessons: every lesson in both languages under papermill with ``backend="nccl"`` and one
   rank per GPU, graded: no cell error, every question correct. They run in worker processes
   from the start, alongside the checks above, and are reported last.

``--dry-run`` runs the same code on gloo and the CPU with 2 ranks, the smallest model and one
lesson in one language (the test suite runs it: ``tests/test_gpu_check.py``). With one GPU,
NCCL gets one rank, and the checks that need two (bytes on a link, prefetch overlap, a peer
blocked on a hung rank) say so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import nbformat

from labkit.wire import devices as gpus
from labkit.wire.protocol import TYPE, Msg
from labkit.wire.setting import Strategy

ROOT = Path(__file__).resolve().parents[1]
PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass
class Plan:
    dry_run: bool
    backend: str
    nproc: int
    devices: list[str]
    model: str
    lessons: list[Path]
    out: Path
    jobs: int
    deadline: float  # time.monotonic() by which the lessons must end
    skipped: list[str] = field(default_factory=list)  # what this plan leaves out, said at the end


@dataclass
class Result:
    name: str
    status: str
    figure: str
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        text = f"{self.status}  {self.name:<11} {self.figure}  [{self.seconds:.1f} s]"
        return "\n".join([text, *(f"      {n}" for n in self.notes)])


def audit_file(plan: Plan, step: str) -> str:
    """Each step's runs write their CUDA audit to a file of their own (the env var is read per write)."""
    path = str(plan.out / f"audit-{step}.jsonl")
    os.environ[gpus.AUDIT_ENV] = path
    return path


# -- 1. the seed example, as a %%torchrun cell under papermill ------------------------------


def seed_cell(backend: str) -> str:
    """Lesson 0's Example 1 cell with the CPU-only parts made device-neutral; fails if they moved."""
    from labkit.course import source

    lesson = source.read(source.LESSONS / "00_setup.md")
    cell = next(c for c in lesson.cells if getattr(c, "source", "").startswith("%%torchrun -n 2 --backend gloo"))
    code = cell.source.split("\n", 1)[1]
    changes = {
        'dist.init_process_group("gloo"': f'dist.init_process_group("{backend}"',
        'device_id=torch.device("cpu")': "device_id=rank.device()",
        "synthetic_batch(cfg, 8, step, rank.rank())": "synthetic_batch(cfg, 8, step, rank.rank(), device=rank.device())",
    }
    for old, new in changes.items():
        if old not in code:
            raise RuntimeError(f"lesson 0's Example 1 changed: {old!r} is gone; update gpu_check.seed_cell")
        code = code.replace(old, new)
    for needed in ("ShardingStrategy.FULL_SHARD", "min_num_params=1e6", "AdamW(fsdp_model.parameters()"):
        assert needed in code, needed
    return code


def seed_notebook(plan: Plan, result_path: Path) -> nbformat.NotebookNode:
    cell = f"%%torchrun -n {plan.nproc} --backend {plan.backend} --vars model_size,steps --timeout 240\n"
    cells = [
        'from labkit.wire import devices as gpus\ngpus.audit_cuda("kernel")  # before labkit\'s magics are imported',
        "%load_ext labkit",
        f"model_size = {plan.model!r}\nsteps = 3",
        cell + seed_cell(plan.backend),
        "import json, torch, labkit\n"
        "run = labkit.last_run\n"
        "out = {'values': run.values, 'steps': run.step_times, 'kernel_cuda': torch.cuda.is_initialized()}\n"
        f"json.dump(out, open({str(result_path)!r}, 'w'))",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def check_seed(plan: Plan) -> Result:
    from labkit.grading.runner import execute  # papermill, as the grader runs a notebook, without its sandbox

    audit_file(plan, "seed")
    result_path = plan.out / "seed.json"
    status, message = execute(seed_notebook(plan, result_path), plan.out / "seed.ipynb", 300)
    if status != "ok" or not result_path.exists():
        return Result(
            "seed", FAIL, f"the notebook ended {status} {message}".strip(), notes=[str(plan.out / "seed.ipynb")]
        )
    out = json.loads(result_path.read_text())
    losses = [out["values"][str(r)]["loss"] for r in range(plan.nproc)]
    step = max(sum(t[1:]) / max(1, len(t) - 1) for t in out["steps"].values())
    ok = all(math.isfinite(x) and 0 < x < 20 for x in losses) and out["kernel_cuda"] is False
    figure = f"{plan.nproc} {plan.backend} ranks, losses {', '.join(f'{x:.3f}' for x in losses)}, "
    figure += f"{step * 1000:.0f} ms/step, CUDA in the kernel: {out['kernel_cuda']}"
    return Result("seed", PASS if ok else FAIL, figure)


def check_audit(plan: Plan) -> Result:
    records = []
    for path in sorted(plan.out.glob("audit-*.jsonl")):
        records += gpus.read_audit(str(path))
    findings = gpus.audit_findings(records)
    starts = [r for r in records if r["event"] == "rank_start"]
    roles = sorted({r["role"] for r in records if r["event"] == "audit"})
    figure = f"{len(starts)} rank starts, all from a CUDA-free parent; watched: {', '.join(roles)}"
    if findings:
        return Result("cuda-audit", FAIL, f"{len(findings)} problem(s)", notes=findings[:10])
    if not starts or "agent" not in roles:
        return Result("cuda-audit", FAIL, "nothing was audited: " + figure)
    return Result("cuda-audit", PASS, figure)


# -- 3-5. one run for memory, collectives and the profiler trace ---------------------------

RANK_JOB = """
import contextlib
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile

from labkit import comm, memtrack, rank, timeline
from labkit.models.transformer import TransformerLM, synthetic_batch
from labkit.models.config import get_config
from labkit.wire.protocol import Msg

dev = rank.device()
cuda = dev.type == "cuda"
world = dist.get_world_size()
cfg = get_config(model_size)


def train(model, opt, i):
    x, y = synthetic_batch(cfg, 4, i, rank.rank(), device=dev)
    model(x, y).backward()
    opt.step()
    opt.zero_grad()


def fsdp2():
    torch.manual_seed(0)
    model = TransformerLM(cfg).to(dev)
    mesh = init_device_mesh(dev.type, (world,))
    for block in model.layers:
        fully_shard(block, mesh=mesh, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, reshard_after_forward=True)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


# memory by category: step 1 (in step 0 AdamW makes its state)
model, opt = fsdp2()
tracker = memtrack.track(model, opt, steps=[1])
for i in range(2):
    with tracker.step(i):
        train(model, opt, i)
if cuda:
    torch.cuda.synchronize()
    rank.send(Msg.ALLOCATOR, allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
              max_allocated=torch.cuda.max_memory_allocated(), max_reserved=torch.cuda.max_memory_reserved())

# collective bytes of one step: ZeRO-3 (FSDP2 FULL_SHARD), then DDP
with comm.count(step=2, config="zero3", padded=sum(comm.padded_units(model).values())):
    train(model, opt, 2)
ddp = DistributedDataParallel(TransformerLM(cfg).to(dev), device_ids=[dev.index] if cuda else None)
ddp_opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
train(ddp, ddp_opt, 0)
with comm.count(step=1, config="ddp"):
    train(ddp, ddp_opt, 1)

# the device's own timeline: FSDP2 prefetches; at one rank only DDP communicates at all
target, target_opt = (ddp, ddp_opt) if world == 1 else (model, opt)
train(target, target_opt, 3)
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
with profile(activities=activities) as prof:
    train(target, target_opt, 4)
    if cuda:
        torch.cuda.synchronize()
path = os.path.join(out_dir, f"trace-rank{rank.rank()}.json")
prof.export_chrome_trace(path)

# labkit.timeline on the same model: on CUDA it synchronises at every timestamp (per-unit
# device time, no overlap by design); what that costs against unrecorded steps
def timed(i, rec=None):
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with rec.step(i, config="recorded") if rec else contextlib.nullcontext():
        train(target, target_opt, i)
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - t0

plain = [timed(5 + i) for i in range(2)]
rec = timeline.Recorder(target, optimizer=target_opt)
synced = [timed(7 + i, rec) for i in range(2)]
rec.close()
rank.send(Msg.GPU_TIMING, plain=plain, synced=synced, synchronize=cuda)
rank.report(trace=path, profiled="DDP" if world == 1 else "FSDP2", num_params=cfg.num_params())
"""


def run_rank_job(plan: Plan) -> Any:
    import labkit

    audit_file(plan, "job")
    return labkit.torchrun(
        RANK_JOB,
        nproc=plan.nproc,
        backend=plan.backend,
        timeout=300,
        vars={"model_size": plan.model, "out_dir": str(plan.out)},
        quiet=True,
        display="none",
    )


def check_memory(plan: Plan, run: Any) -> Result:
    from labkit.fmt import fmt_bytes
    from labkit.memory import model as mm

    psi = run.values[0]["num_params"]
    predicted = mm.model_states(psi, Strategy.FULL_SHARD, plan.nproc, "fp32", "adamw").model_states
    worst, notes = 0.0, []
    for r in range(plan.nproc):
        cats = next(
            m["categories"]
            for m in run.events[r]
            if m.get(TYPE) == Msg.MEMCAT and m.get("step") == 1 and m.get("phase") == "optimizer"
        )
        states = cats["params"] + cats["grads"] + cats["optimizer"]
        worst = max(worst, abs(states - predicted) / predicted)
        shown = {k: fmt_bytes(v) for k, v in cats.items() if v}
        alloc = next((m for m in run.events[r] if m.get(TYPE) == Msg.ALLOCATOR), None)
        if alloc:  # the caching allocator's own category: reserved, never handed to a tensor
            shown["allocator cache"] = fmt_bytes(alloc["reserved"] - alloc["allocated"])
            shown["peak reserved"] = fmt_bytes(alloc["max_reserved"])
        notes.append(f"rank {r}: " + ", ".join(f"{k} {v}" for k, v in shown.items()))
    if plan.backend != "nccl":
        notes.append("allocator cache: no caching allocator on the CPU (checked on CUDA only)")
    figure = f"model states {fmt_bytes(states)} vs memory_model {fmt_bytes(predicted)} (worst rank {worst:.2%})"
    return Result("memory", PASS if worst <= 0.01 else FAIL, figure, notes=notes)


def check_comm(plan: Plan, run: Any) -> Result:
    from labkit import comm

    n, psi = plan.nproc, run.values[0]["num_params"]
    msgs = {m["config"]: m for m in run.events[0] if m.get(TYPE) == Msg.COMM and m.get("config")}
    zero3, ddp = msgs["zero3"], msgs["ddp"]
    if n == 1:
        payload = comm.total(ddp["counts"], "bytes") / (4 * psi)
        figure = f"1 rank: nothing crosses a link; DDP all-reduce payload {payload:.2f}Ψ on {plan.backend}"
        return Result("comm", SKIP, figure, notes=["2Ψ and 3Ψ on a link need 2 or more GPUs"])
    unit = (n - 1) / n * 4  # wire bytes per parameter of "1Ψ"
    got = {"DDP": comm.total(ddp["counts"]) / (unit * psi), "ZeRO-3": comm.total(zero3["counts"]) / (unit * psi)}
    theory = {
        "DDP": comm.total(comm.theory_bytes(psi, Strategy.DDP, n)) / (unit * psi),
        "ZeRO-3": comm.total(comm.theory_bytes(zero3["padded"], Strategy.FULL_SHARD, n)) / (unit * psi),
    }
    ok = all(abs(got[k] - theory[k]) <= 0.02 * theory[k] for k in got)
    figure = ", ".join(f"{k} {got[k]:.3f}Ψ (theory {theory[k]:.3f}Ψ)" for k in got) + f" at N={n}"
    return Result("comm", PASS if ok else FAIL, figure, notes=["Ψ = (N-1)/N·params·4 bytes sent per rank"])


def intervals_union(xs: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(xs):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def overlap_us(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> float:
    """Time covered by both sets of intervals."""
    xs, ys = intervals_union(xs), intervals_union(ys)
    total, i, j = 0.0, 0, 0
    while i < len(xs) and j < len(ys):
        total += max(0.0, min(xs[i][1], ys[j][1]) - max(xs[i][0], ys[j][0]))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return total


def trace_streams(trace: dict[str, Any]) -> dict[str, Any]:
    """From a chrome trace of torch.profiler: device kernels split into NCCL and compute, and
    on the CPU the collectives and the operators (there are no kernels without a GPU)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    span = lambda e: (float(e["ts"]), float(e["ts"]) + float(e["dur"]))  # noqa: E731
    nccl = [e for e in kernels if "nccl" in e["name"].lower()]
    compute = [e for e in kernels if "nccl" not in e["name"].lower()]
    cpu_comm = [e for e in events if e.get("cat") == "cpu_op" and e["name"].startswith(("c10d::", "gloo:", "nccl:"))]
    return {
        "nccl": [span(e) for e in nccl],
        "compute": [span(e) for e in compute],
        "nccl_streams": sorted({e.get("args", {}).get("stream") for e in nccl}, key=str),
        "compute_streams": sorted({e.get("args", {}).get("stream") for e in compute}, key=str),
        "cpu_collectives": len(cpu_comm),
        "cpu_ops": sum(e.get("cat") == "cpu_op" for e in events),
    }


def recorder_note(run: Any, r: int) -> tuple[bool, str]:
    """labkit.timeline's own spans of the recorded steps, and what recording cost."""
    spans = [m for m in run.events[r] if m.get(TYPE) == Msg.SPANS and m.get("config") == "recorded"]
    timing = next((m for m in run.events[r] if m.get(TYPE) == Msg.GPU_TIMING), None)
    kinds = {s["kind"] for m in spans for s in m["spans"]}
    ok = bool(spans) and {"forward", "backward"} <= kinds and timing is not None
    if not ok:
        return False, f"rank {r}: labkit.timeline sent no forward/backward spans ({len(spans)} messages)"
    plain, synced = min(timing["plain"]), min(timing["synced"])
    return True, (
        f"rank {r}: labkit.timeline.Recorder(synchronize={timing['synchronize']}): "
        f"{len(spans[-1]['spans'])} spans, step {plain * 1000:.1f} ms unrecorded, {synced * 1000:.1f} ms recorded"
    )


def check_timeline(plan: Plan, run: Any) -> Result:
    found = {r: trace_streams(json.loads(Path(run.values[r]["trace"]).read_text())) for r in range(plan.nproc)}
    what = run.values[0]["profiled"]
    recorded = [recorder_note(run, r) for r in range(plan.nproc)]
    if plan.backend != "nccl":
        ok = all(f["cpu_collectives"] > 0 and f["cpu_ops"] > 0 for f in found.values())
        ok = ok and all(good for good, _ in recorded)
        figure = f"{what} trace per rank: {found[0]['cpu_collectives']} collectives among {found[0]['cpu_ops']} CPU ops"
        note = "overlap: none on the CPU (gloo collectives block the thread that computes); a GPU property"
        return Result("timeline", PASS if ok else FAIL, figure, notes=[note, *(n for _, n in recorded)])
    notes, ok = [n for _, n in recorded], all(good for good, _ in recorded)
    if plan.nproc == 1 and not any(f["nccl"] for f in found.values()):
        notes.append("one rank: NCCL ran no kernel (an all-reduce over one rank is a copy, or nothing)")
        notes.append("NCCL/compute overlap, and FSDP's prefetch, need 2 or more GPUs")
        return Result("timeline", SKIP if ok else FAIL, f"{what}: no NCCL kernel to overlap", notes=notes)
    for r, f in found.items():
        both = overlap_us(f["nccl"], f["compute"])
        nccl = sum(b - a for a, b in intervals_union(f["nccl"]))
        ok = ok and both > 0 and set(f["nccl_streams"]).isdisjoint(f["compute_streams"])
        notes.append(
            f"rank {r}: NCCL kernels {nccl / 1000:.2f} ms on streams {f['nccl_streams']}, "
            f"{both / 1000:.2f} ms of it under compute on streams {f['compute_streams']}"
        )
    figure = f"{what}: overlap of NCCL and compute kernels on every rank: {ok}"
    if plan.nproc == 1:
        notes.append("FSDP prefetch overlap needs 2 or more GPUs (one rank gathers nothing); DDP's was checked")
    return Result("timeline", PASS if ok else FAIL, figure, notes=notes)


# -- 6. faults ----------------------------------------------------------------------------

FAULT = """
import os, signal, time
import torch, torch.distributed as dist
from labkit import rank
x = torch.ones(1, device=rank.device())
dist.all_reduce(x)
x.item()  # NCCL returns before the collective ends; wait for it, so every rank is past it
if rank.rank() == victim:
    if fault == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(3600)  # hung: never enters the next collective
dist.all_reduce(x)
x.item()  # blocks here on NCCL (in the collective itself on gloo) until the timeout or the end
"""


def one_fault(plan: Plan, fault: str, expect: type, timeout: float | None, pg_timeout: float) -> tuple[bool, str]:
    import labkit

    victim = plan.nproc - 1
    t0 = time.monotonic()
    try:
        labkit.torchrun(
            FAULT,
            nproc=plan.nproc,
            backend=plan.backend,
            timeout=timeout,
            pg_timeout=pg_timeout,
            vars={"victim": victim, "fault": fault},
            quiet=True,
            display="none",
        )
        err: BaseException | None = None
    except Exception as e:
        err = e
    took = time.monotonic() - t0
    bound = min(timeout or math.inf, pg_timeout) + 30  # + the ranks' start, and the grace before SIGKILL
    named = getattr(err, "alive", None) if isinstance(err, labkit.RunTimeout) else [getattr(err, "rank", None)]
    ok = isinstance(err, expect) and took < bound
    if fault != "hang-pg":  # the killed or hung rank itself must be named
        ok = ok and victim in (named or [])
    how = f", {err.signal}" if getattr(err, "signal", None) else ""  # NCCL's watchdog may abort a rank
    if err is not None and not isinstance(err, expect):  # not the fault's error: say what it was, and where
        how += f": {err!r} at " + " < ".join(
            f"{f.name}:{f.lineno}" for f in traceback.extract_tb(err.__traceback__)[::-1][:4]
        )
    return ok, f"{fault}: {type(err).__name__} naming rank(s) {named}{how} in {took:.1f} s (bound {bound:.0f} s)"


def check_faults(plan: Plan) -> Result:
    import labkit
    from labkit.testing.processes import leftover_ranks

    audit_file(plan, "faults")
    run_timeout, pg_timeout = (12, 5.0) if plan.dry_run else (30, 15.0)  # NCCL's start is slower
    cases = [("kill", labkit.RankError, 60, 60.0), ("hang-run", labkit.RunTimeout, run_timeout, 120.0)]
    if plan.nproc > 1:  # the peer's collective times out: gloo raises, NCCL's watchdog aborts the rank
        cases.append(("hang-pg", labkit.RankError, 120, pg_timeout))
    ok, notes = True, []
    for fault, expect, timeout, pg in cases:
        good, text = one_fault(plan, fault, expect, timeout, pg)
        ok, notes = ok and good, [*notes, ("ok   " if good else "FAIL ") + text]
    left = leftover_ranks(timeout=10)
    ok = ok and not left
    if plan.nproc == 1:
        notes.append("a peer blocked on a hung rank (the collective timeout) needs 2 or more GPUs")
    return Result("faults", PASS if ok else FAIL, f"{len(cases)} faults, processes left: {len(left)}", notes=notes)


# -- 7. the lessons ------------------------------------------------------------------------


def grade_one(path: str, out: str, timeout: float, parameters: dict[str, Any]) -> dict[str, Any]:
    """In a worker process: run and grade one lesson notebook."""
    from labkit.grading.grade import grade_notebook

    r = grade_notebook(Path(path), Path(out), timeout, parameters=parameters)
    return {"status": r.status, "points": r.points, "max": r.max_points, "errors": r.errors, "seconds": r.seconds}


def start_lessons(plan: Plan, pool: ProcessPoolExecutor) -> dict[Path, Future]:
    audit_file(plan, "lessons")  # the workers inherit it; their agents and ranks write there
    params = {"backend": plan.backend, "nproc": plan.nproc}
    timeout = max(60.0, plan.deadline - time.monotonic())
    return {
        p: pool.submit(grade_one, str(p), str(plan.out / "lessons" / p.parent.name / p.name), timeout, params)
        for p in plan.lessons
    }


def check_lessons(plan: Plan, futures: dict[Path, Future]) -> Result:
    notes, passed = [], 0
    for path, fut in futures.items():
        name = f"{path.parent.name}/{path.stem}"
        left = plan.deadline - time.monotonic() + 60  # a notebook's own timeout ends at the deadline
        if left <= 0 and fut.cancel():
            notes.append(f"FAIL {name}: not run, the time budget (--budget) was spent")
            continue
        try:
            r = fut.result(timeout=max(1.0, left))
        except Exception as e:
            notes.append(f"FAIL {name}: {type(e).__name__} {e}")
            continue
        good = r["status"] == "ok" and not r["errors"] and r["points"] == r["max"] > 0
        passed += good
        errors = "; ".join(f"{e['ename']}: {e['evalue'][:120]}" for e in r["errors"][:2])
        line = f"{name}: {r['status']}, {r['points']:g}/{r['max']:g} points, {r['seconds']:.0f} s {errors}"
        notes.append(("ok   " if good else "FAIL ") + line)
    figure = f"{passed}/{len(futures)} notebooks on {plan.nproc} {plan.backend} rank(s), full marks"
    return Result("lessons", PASS if passed == len(futures) else FAIL, figure, notes=notes)


# -- the plan and the report ---------------------------------------------------------------


def gpu_names() -> list[str]:
    """From nvidia-smi, which reads NVML and starts no CUDA in this process."""
    if not shutil.which("nvidia-smi"):
        return []
    cmd = ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return []


def make_plan(args: argparse.Namespace) -> Plan:
    devices = [] if args.dry_run else gpus.visible_gpus()
    if not args.dry_run and not devices:  # refused before anything is written
        raise SystemExit("gpu_check: no GPU is visible here (CUDA_VISIBLE_DEVICES, torch); use --dry-run")
    out = Path(args.out or tempfile.mkdtemp(prefix="gpu-check-"))
    out.mkdir(parents=True, exist_ok=True)
    lessons = sorted(ROOT.glob("notebooks/en/*.ipynb")) + sorted(ROOT.glob("notebooks/ro/*.ipynb"))
    deadline = time.monotonic() + args.budget
    if args.dry_run:
        skipped = [
            "NCCL, CUDA memory and the caching allocator, CUDA streams: dry run on gloo and the CPU",
            f"lessons: only {lessons[0].parent.name}/{lessons[0].name} of {len(lessons)} notebooks",
            "models: only 'tiny'",
        ]
        return Plan(True, "gloo", 2, [], "tiny", lessons[:1], out, 1, deadline, skipped)
    skipped = (
        ["2 or more GPUs: bytes on a link, FSDP prefetch overlap, a peer hung on a rank"] if len(devices) == 1 else []
    )
    jobs = max(1, min(args.jobs, len(lessons)))
    return Plan(False, "nccl", len(devices), devices, args.model, lessons, out, jobs, deadline, skipped)


def main(argv: list[str] | None = None) -> int:
    from labkit.testing.processes import MARK_VAR, leftover_ranks, mark_session

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="gloo on the CPU, 2 ranks, one lesson")
    parser.add_argument("--out", help="folder for traces, notebooks, audits and summary.json")
    parser.add_argument("--model", default="medium", help="model preset on GPUs (dry run: tiny)")
    parser.add_argument("--jobs", type=int, default=4, help="lesson notebooks run at once")
    parser.add_argument("--budget", type=float, default=420, help="seconds the lessons may take in all")
    args = parser.parse_args(argv)
    os.environ.pop(MARK_VAR, None)  # a mark of our own, not the one of a test session that started us
    mark_session()  # every process started from here carries it: the leftover check sees only ours
    started = time.monotonic()
    plan = make_plan(args)
    gpus.audit_cuda("kernel")  # this process starts runs as a notebook's kernel does: no CUDA here either
    where = ", ".join(gpu_names()) or ("the CPU" if plan.dry_run else ", ".join(plan.devices))
    print(f"gpu_check: {plan.nproc} {plan.backend} rank(s) on {where}; model {plan.model}; out {plan.out}", flush=True)

    results: list[Result] = []

    def step(name: str, fn: Any, *a: Any) -> Any:
        t0 = time.monotonic()
        try:
            res = fn(*a)
        except Exception as e:
            res = Result(name, FAIL, f"{type(e).__name__}: {str(e)[:300]}")
        if not isinstance(res, Result):  # a run that the checks after it read
            return res
        res.seconds = time.monotonic() - t0
        results.append(res)
        print(res.line(), flush=True)
        return res

    with ProcessPoolExecutor(plan.jobs, mp_context=get_context("spawn")) as pool:
        lessons = start_lessons(plan, pool)
        step("seed", check_seed, plan)
        t0 = time.monotonic()
        run = step("rank-job", run_rank_job, plan)
        if not isinstance(run, Result):
            print(f"      (memory, comm and timeline from one run of {time.monotonic() - t0:.1f} s)", flush=True)
            step("memory", check_memory, plan, run)
            step("comm", check_comm, plan, run)
            step("timeline", check_timeline, plan, run)
        step("faults", check_faults, plan)
        step("lessons", check_lessons, plan, lessons)
    step("cuda-audit", check_audit, plan)
    left = leftover_ranks(timeout=10)
    step("cleanup", lambda: Result("cleanup", FAIL if left else PASS, f"processes left running: {len(left)}"))

    could_not = [f"{r.name}: {n}" for r in results if r.status == SKIP for n in r.notes] + plan.skipped
    print("could not check here:" if could_not else "everything was checked here", flush=True)
    for line in could_not:
        print(f"  - {line}", flush=True)
    failed = [r.name for r in results if r.status == FAIL]
    total = time.monotonic() - started
    print(f"gpu_check: {'FAILED: ' + ', '.join(failed) if failed else 'all passed'} in {total:.0f} s", flush=True)
    summary = {"plan": {**asdict(plan), "out": str(plan.out), "lessons": [str(p) for p in plan.lessons]}}
    summary.update(results=[asdict(r) for r in results], could_not=could_not, seconds=total)
    (plan.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
