"""Train a few steps under several wrappings, in labkit's ranks: the link-prediction benchmark's job.

In a ``%%torchrun`` cell or ``labkit.torchrun(code)`` (any nodes, any link):

    from labkit.testing.link_job import main
    main("small", steps=4, batch=8, configs=["ddp", "fsdp1:FULL_SHARD:BACKWARD_PRE", "fsdp2:explicit"])

Configurations (``wrap``): ``ddp``; ``fsdp1:STRATEGY[:PREFETCH]`` with STRATEGY one of
FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD (sharded within a node, replicated across: the mesh is
nodes x ranks per node) and PREFETCH one of BACKWARD_PRE (default), BACKWARD_POST, NONE;
``fsdp2:implicit`` (``fully_shard`` per block, each resharded after forward, and on the root with
torch's default ``reshard_after_forward``, None: False for the root, which backward needs first,
so it is not gathered again; FSDP2's own prefetching) and ``fsdp2:explicit`` (explicit forward and backward prefetch of the next
block, every unshard asynchronous, and the root's issued before the forward: on CPU the
all-gathers then run on gloo's threads while the rank computes). A ``:bf16`` suffix gathers
the parameters in bf16 (FSDP1 ``MixedPrecision``, FSDP2 ``MixedPrecisionPolicy``; gradients
reduced in fp32).

Each configuration builds a fresh model (seed 0) and records every step with
``labkit.timeline.Recorder``; its messages carry ``config``, the speed probe timed before the
step (``probe``, wall seconds, and ``probe_cpu``, the CPU seconds it got) and how long the rank's thread ran on a CPU and waited for one during it
(``sched``, from the kernel's scheduler statistics). ``gloo_costs`` times bare collectives at a
few sizes (the calibration's per-message costs).

The model: a preset's name (``labkit.models.config.PRESETS``) or its dimensions as a dict of
``ModelConfig`` fields (``{"dim": 256, "n_layers": 2, ...}``); ``seq_len`` overrides its
sequence length. ``suffix`` is appended to every step's ``config`` label, so that one launch can
train the same configuration at two micro-batches (the benchmark's calibration: ``"ddp@16"``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any

import torch
import torch.distributed as dist

from labkit.models.config import ModelConfig, get_config
from labkit.models.transformer import TransformerBlock, TransformerLM, synthetic_batch
from labkit.ranks import rank, timeline
from labkit.wire.setting import Flavor, Setting, Strategy


def mesh_shape() -> tuple[int, int]:
    """(nodes, ranks per node) of this run: HSDP shards within a node and replicates across."""
    world = dist.get_world_size()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    return world // local, local


def wrap(spec: str, model: torch.nn.Module) -> torch.nn.Module:
    setting = Setting.parse(spec)
    bf16 = setting.bf16
    world = dist.get_world_size()
    if setting.flavor is Flavor.DDP:
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    if setting.flavor is Flavor.FSDP2:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mesh = init_device_mesh("cpu", (world,))
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else None
        kw: dict[str, Any] = {"mesh": mesh}
        if mp is not None:
            kw["mp_policy"] = mp
        blocks = list(model.layers)
        for block in blocks:
            fully_shard(block, reshard_after_forward=True, **kw)
        # the root with torch's default (None: False for the root): resharding it after forward only
        # to gather it again at once for backward is what the course advises against
        fully_shard(model, **kw)
        if setting.explicit:
            explicit_prefetch(model, blocks)
        return model
    from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    strategy, prefetch = setting.strategy, setting.backward_prefetch
    extra: dict[str, Any] = {}
    if strategy is Strategy.HYBRID_SHARD:
        from torch.distributed.device_mesh import init_device_mesh

        extra["device_mesh"] = init_device_mesh("cpu", mesh_shape(), mesh_dim_names=("replicate", "shard"))
    if bf16:
        extra["mixed_precision"] = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return FullyShardedDataParallel(
        model,
        auto_wrap_policy=ModuleWrapPolicy({TransformerBlock}),
        sharding_strategy=ShardingStrategy[strategy.value],  # type: ignore[union-attr]
        backward_prefetch=prefetch.torch_name and BackwardPrefetch[prefetch.torch_name],  # type: ignore[union-attr]
        device_id=torch.device("cpu"),
        **extra,
    )


def explicit_prefetch(model: Any, blocks: list[Any]) -> None:
    """FSDP2's explicit prefetching with asynchronous unshards (``_set_unshard_async_op``: private in torch 2.13)."""
    model.set_modules_to_forward_prefetch([blocks[0]])
    model.set_modules_to_backward_prefetch([blocks[-1]])
    for i, block in enumerate(blocks):
        if i + 1 < len(blocks):
            block.set_modules_to_forward_prefetch([blocks[i + 1]])
        if i > 0:
            block.set_modules_to_backward_prefetch([blocks[i - 1]])
    for module in [model, *blocks]:
        module._set_unshard_async_op(True)
    model._labkit_unshard_first = True


def gloo_costs(sizes: tuple[int, ...] = (2**12, 2**16, 2**18, 2**20, 2**22), reps: int = 5) -> dict[str, Any]:
    """Seconds per collective on the world group, by kind and payload bytes (the median of ``reps``)."""
    world = dist.get_world_size()
    out: dict[str, dict[str, float]] = {}
    for kind in ("all_gather", "reduce_scatter", "all_reduce"):
        out[kind] = {}
        for size in sizes:
            numel = max(world, size // 4 // world * world)
            full = torch.ones(numel)
            shard = torch.ones(numel // world)
            times = []
            for _ in range(reps + 1):
                dist.barrier()
                t0 = time.perf_counter()
                if kind == "all_gather":
                    dist.all_gather_into_tensor(full, shard)
                elif kind == "reduce_scatter":
                    dist.reduce_scatter_tensor(shard, full)
                else:
                    dist.all_reduce(full)
                times.append(time.perf_counter() - t0)
            times = sorted(times[1:])
            out[kind][str(numel * 4)] = times[len(times) // 2]
    return out


_PROBE = None


def speed_probe(reps: int = 100) -> tuple[float, float]:
    """Seconds for a fixed amount of matrix work on this rank's thread, every rank at once (after a
    barrier): how fast the shared CPU is for this run's ranks right now (``labkit.timing.predict``).
    Two numbers: the wall time, and the CPU time the thread got for it (``time.thread_time``). The
    second leaves out the waits for a core, which four ranks on two cores add to the first: it is
    how fast a core runs now (on a virtual machine it moves by 10% within a minute, and a new
    process lands on faster or slower memory), whatever number of ranks share it."""
    global _PROBE
    if _PROBE is None:
        g = torch.Generator().manual_seed(0)
        _PROBE = torch.randn(160, 160, generator=g)
    dist.barrier()
    a = _PROBE
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(reps):
        a = torch.tanh(a @ _PROBE)
    return time.perf_counter() - t0, time.thread_time() - c0


def scheduled() -> tuple[float, float]:
    """Seconds this thread has run on a CPU, and waited for one (``/proc/thread-self/schedstat``)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            ran, waited, _ = f.read().split()
        return int(ran) / 1e9, int(waited) / 1e9
    except (OSError, ValueError):
        return 0.0, 0.0


def model_config(model: str | dict[str, Any], seq_len: int | None = None) -> ModelConfig:
    """The model a job trains: a preset's name or a dict of ``ModelConfig`` fields, at ``seq_len``."""
    cfg = get_config(model) if isinstance(model, str) else ModelConfig(**model)
    return dataclasses.replace(cfg, seq_len=seq_len) if seq_len else cfg


def steps_for(seconds: float, steps: int, min_seconds: float, max_steps: int) -> int:
    """How many steps (the first not counted) make ``min_seconds`` of steps of ``seconds`` each, the
    slowest rank's (every rank must run as many: each step's collectives pair up across them);
    at least ``steps``, at most ``max_steps``."""
    slowest = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    wanted = 1 + math.ceil(min_seconds / max(float(slowest.item()), 1e-6))
    return max(steps, min(wanted, max_steps))


def main(
    model_name: str | dict[str, Any] = "small",
    steps: int = 4,
    batch: int = 8,
    configs: list[str] | None = None,
    costs: bool = False,
    probe: bool = True,
    seq_len: int | None = None,
    suffix: str = "",
    min_seconds: float = 0.0,
    max_steps: int | None = None,
) -> None:
    """Train ``steps`` steps of each configuration. ``probe=False`` skips the speed probe before each
    step (the benchmark's "at run's pace" column needs it; a lesson does not, and it costs CPU time).

    ``min_seconds``: more steps where a step is short, until the counted steps (all but the first)
    add up to about that long, at most ``max_steps`` (default 6 x ``steps``). A step of 10-30 ms
    (issue 50's "tiny") is mostly fixed costs and waits that vary from one step to the next by
    the scheduler's 4 ms tick; seven of them measure it no better than 8%. Decided once per
    configuration from its second step, the slowest rank's, so that every rank runs as many."""
    torch.set_num_threads(1)  # ranks share the cores: one intra-op thread each
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    r = dist.get_rank()
    cfg = model_config(model_name, seq_len)
    if costs:
        rank.report(gloo=gloo_costs())
    for spec in configs or []:
        torch.manual_seed(0)
        model = wrap(spec, TransformerLM(cfg))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        rec = timeline.Recorder(model, optimizer=opt)
        first = getattr(model, "_labkit_unshard_first", False)
        total, i = steps, 0
        while i < total:
            x, y = synthetic_batch(cfg, batch, i, r)
            probed, probed_cpu = speed_probe() if probe else (None, None)
            sched: dict[str, float] = {}  # filled at the step's end, sent with it
            step = {"config": spec + suffix, "num_params": cfg.num_params(), "batch": batch, "sched": sched}
            step["seq_len"] = cfg.seq_len
            began = time.perf_counter()
            with rec.step(i, **step, probe=probed, probe_cpu=probed_cpu):
                ran0, waited0 = scheduled()
                if first:
                    model.unshard(async_op=True)  # the root's all-gather under nothing: it starts the step
                model(x, y).backward()
                opt.step()
                opt.zero_grad()
                ran1, waited1 = scheduled()
                sched.update(ran=ran1 - ran0, waited=waited1 - waited0)
            i += 1
            if i == 2 and min_seconds > 0:
                total = steps_for(time.perf_counter() - began, steps, min_seconds, max_steps or 6 * steps)
        rec.close()
        del model, opt
        dist.barrier()
