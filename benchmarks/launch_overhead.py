"""What labkit costs on top of torchrun.

1. A trivial ``%%torchrun -n 2`` cell, as labkit runs it (torchrun's agent forked from the
   process that imported torch when the extension loaded, ``labkit.launch.prefork``) and as it
   runs it without that process (``LABKIT_PREFORK=0``: a new interpreter per cell), against the
   same script under the bare torchrun command, both as ``torchrun script.py`` starts it (a new
   interpreter per rank) and with ranks forked from the agent (``--start-method=fork
   --run-path``, what labkit does inside). Medians of N runs each, interleaved, and the ratios
   (targets: the cell under 0.5 s, well under the forked torchrun).
2. A training loop with labkit's memory sampling on against off: median step time
   (target: at most 3% slower).

    .venv/bin/python benchmarks/launch_overhead.py [--runs 5] [--steps 30] [--no-train]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import labkit
from labkit.launch import prefork
from labkit.launch.magic import run_cell

TRIVIAL = """
import torch.distributed as dist
x = dist.get_rank()
"""

BARE = """
import datetime
import torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
x = dist.get_rank()
dist.destroy_process_group()
"""

TRAIN = """
import functools, time, torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from labkit import rank
from labkit.models.transformer import TransformerLM, TransformerBlock, synthetic_batch

torch.manual_seed(0)
model = FSDP(
    TransformerLM("small"),
    auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={TransformerBlock}),
    device_id=torch.device("cpu"),
)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
times = []
for step in range(STEPS):
    x, y = synthetic_batch(model.module.cfg, 8, step, rank.rank())
    t0 = time.perf_counter()
    loss = model(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    times.append(time.perf_counter() - t0)
rank.report(step_times=times[3:])  # the first steps warm up allocators and caches
"""


def time_cell(runs: int, prefork_on: bool = True) -> list[float]:
    os.environ[prefork.SWITCH] = "1" if prefork_on else "0"
    try:
        out = []
        for _ in range(runs):
            t0 = time.perf_counter()
            run_cell("-n 2 --backend gloo --quiet", TRIVIAL, {})
            out.append(time.perf_counter() - t0)
        return out
    finally:
        os.environ.pop(prefork.SWITCH, None)


def time_bare(runs: int, fork: bool = False) -> list[float]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(BARE)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc-per-node=2",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=127.0.0.1:0",
        *(["--start-method=fork", "--run-path"] if fork else []),
        f.name,
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = []
    failed = 0
    while len(out) < runs:
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if done.returncode != 0:  # on a loaded machine a bare launch can fail its rendezvous: try again, untimed
            failed += 1
            if failed > runs:
                done.check_returncode()
            continue
        out.append(time.perf_counter() - t0)
    os.unlink(f.name)
    return out


def step_times(steps: int, sample_interval: float) -> list[float]:
    code = textwrap.dedent(TRAIN).replace("STEPS", str(steps))
    run = labkit.torchrun(code, nproc=2, backend="gloo", quiet=True, sample_interval=sample_interval)
    return [dt for r in run.values for dt in run.values[r]["step_times"]]


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--no-train", action="store_true", help="only the launch, not the training step")
    args = ap.parse_args()

    print(f"load average at the start: {load()} on {os.cpu_count()} CPUs")
    server = prefork.start()  # as %load_ext labkit does; the first cell waits for its import if needed
    t0 = time.perf_counter()
    ready = server is not None and server.wait_ready(prefork.READY_WAIT)
    print(f"torch imported ahead of time: {'yes' if ready else 'no'} ({time.perf_counter() - t0:.2f} s waited)")
    time_cell(1), time_cell(1, False), time_bare(1), time_bare(1, fork=True)  # warm the file cache for all
    cell, fresh, bare, forked = [], [], [], []
    for _ in range(args.runs):  # interleaved, so machine load affects all alike
        cell += time_cell(1)
        fresh += time_cell(1, False)
        bare += time_bare(1)
        forked += time_bare(1, fork=True)
    mc, mn, mb, mf = (statistics.median(x) for x in (cell, fresh, bare, forked))

    def row(label: str, m: float, xs: list[float]) -> str:
        return f"  {label:34} {m:6.2f} s   ({', '.join(f'{x:.2f}' for x in xs)})"

    print(f"launch, 2 ranks, median of {args.runs}:")
    print(row("%%torchrun cell", mc, cell) + "   (target < 0.5 s)")
    print(row("%%torchrun cell, LABKIT_PREFORK=0", mn, fresh))
    print(row("bare torchrun script.py", mb, bare))
    print(row("bare torchrun, forked ranks", mf, forked))
    print(f"  ratio to the same torchrun           {mc / mf:6.3f}x   (LABKIT_PREFORK=0: {mn / mf:.3f}x)")
    print(f"  ratio to torchrun script.py          {mc / mb:6.3f}x   (LABKIT_PREFORK=0: {mn / mb:.3f}x)")
    print(f"load average after the launches: {load()}")
    if args.no_train:
        return

    on, off = [], []
    for _ in range(2):  # alternate, twice
        on += step_times(args.steps, 0.2)
        off += step_times(args.steps, 0.0)
    son, soff = statistics.median(on), statistics.median(off)
    print(f"training step (FSDP FULL_SHARD, 'small' model, 2 ranks), median of {len(on)} steps:")
    print(f"  sampling on  (every 0.2 s)  {son * 1000:7.2f} ms")
    print(f"  sampling off                {soff * 1000:7.2f} ms")
    print(f"  slowdown                    {100 * (son / soff - 1):+6.2f} %   (target <= 3%)")
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
