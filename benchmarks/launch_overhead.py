"""What labkit costs on top of torchrun.

1. A trivial ``%%torchrun -n 2`` cell against the same script under the bare torchrun
   command, both as ``torchrun script.py`` starts it (a new interpreter per rank) and as
   labkit starts it (``--start-method=fork --run-path``: ranks forked from the agent):
   medians of N runs each, and the ratios (target: at most 1.15x over the same torchrun).
2. A training loop with labkit's memory sampling on against off: median step time
   (target: at most 3% slower).

    .venv/bin/python benchmarks/launch_overhead.py [--runs 5] [--steps 30]
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


def time_cell(runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        run_cell("-n 2 --backend gloo --quiet", TRIVIAL, {})
        out.append(time.perf_counter() - t0)
    return out


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
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    os.unlink(f.name)
    return out


def step_times(steps: int, sample_interval: float) -> list[float]:
    code = textwrap.dedent(TRAIN).replace("STEPS", str(steps))
    run = labkit.torchrun(code, nproc=2, backend="gloo", quiet=True, sample_interval=sample_interval)
    return [dt for r in run.values for dt in run.values[r]["step_times"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()

    time_cell(1), time_bare(1), time_bare(1, fork=True)  # warm the file cache for all three
    cell, bare, forked = [], [], []
    for _ in range(args.runs):  # interleaved, so machine load affects all alike
        cell += time_cell(1)
        bare += time_bare(1)
        forked += time_bare(1, fork=True)
    mc, mb, mf = statistics.median(cell), statistics.median(bare), statistics.median(forked)
    print(f"launch, 2 ranks, median of {args.runs}:")
    print(f"  %%torchrun cell                {mc:6.2f} s   ({', '.join(f'{x:.2f}' for x in cell)})")
    print(f"  bare torchrun script.py        {mb:6.2f} s   ({', '.join(f'{x:.2f}' for x in bare)})")
    print(f"  bare torchrun, forked ranks    {mf:6.2f} s   ({', '.join(f'{x:.2f}' for x in forked)})")
    print(f"  ratio to the same torchrun     {mc / mf:6.3f}x   (target <= 1.15x)")
    print(f"  ratio to torchrun script.py    {mc / mb:6.3f}x")

    on, off = [], []
    for _ in range(2):  # alternate, twice
        on += step_times(args.steps, 0.2)
        off += step_times(args.steps, 0.0)
    son, soff = statistics.median(on), statistics.median(off)
    print(f"training step (FSDP FULL_SHARD, 'small' model, 2 ranks), median of {len(on)} steps:")
    print(f"  sampling on  (every 0.2 s)  {son * 1000:7.2f} ms")
    print(f"  sampling off                {soff * 1000:7.2f} ms")
    print(f"  slowdown                    {100 * (son / soff - 1):+6.2f} %   (target <= 3%)")


if __name__ == "__main__":
    main()
