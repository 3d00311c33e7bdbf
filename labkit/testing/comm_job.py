"""Train a few steps under several wrappings in one torchrun job; count and time each step.

    LABKIT_REPORT_DIR=/tmp/out python -m torch.distributed.run --nproc-per-node 2 \
        labkit/testing/comm_job.py tiny 3 ddp fsdp1:FULL_SHARD:BACKWARD_PRE fsdp2:reshard

Arguments: model preset, steps per configuration, then configurations:
``ddp``, ``fsdp2:reshard`` / ``fsdp2:keep`` (reshard_after_forward), or
``fsdp1:STRATEGY[:PREFETCH][:fwd][:nolimit]`` with PREFETCH one of BACKWARD_PRE,
BACKWARD_POST, NONE (default BACKWARD_PRE), ``fwd`` for forward_prefetch and
``nolimit`` for limit_all_gathers=False; a trailing ``:sync`` records with
``synchronize=True`` (the GPU mode; a no-op wait on CPU). Each configuration builds a fresh model and
records every step with ``labkit.timeline.Recorder`` (which also sends the ``comm``
counts); messages carry ``config``. Then one more step is counted by torch's CommDebugMode
too (``COMM_JOB_CROSS_CHECK=0`` skips it). One job for all, because a torchrun launch costs seconds.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from labkit.models.config import get_config
from labkit.models.transformer import TransformerBlock, TransformerLM, synthetic_batch
from labkit.ranks import comm, timeline
from labkit.ranks.rank import send as rank_send
from labkit.wire.protocol import Msg
from labkit.wire.setting import Flavor, Setting


def wrap(spec: str, model: torch.nn.Module, world: int) -> torch.nn.Module:
    setting = Setting.parse(spec)
    if setting.flavor is Flavor.DDP:
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    if setting.flavor is Flavor.FSDP2:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (world,))
        reshard = bool(setting.reshard_after_forward)
        for block in model.layers:
            fully_shard(block, mesh=mesh, reshard_after_forward=reshard)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        return model
    from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    strategy, prefetch = setting.strategy, setting.backward_prefetch
    extra = {}
    if strategy.hybrid:  # type: ignore[union-attr]
        from torch.distributed.device_mesh import init_device_mesh

        extra["device_mesh"] = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("replicate", "shard"))
    return FullyShardedDataParallel(
        model,
        auto_wrap_policy=ModuleWrapPolicy({TransformerBlock}),
        sharding_strategy=ShardingStrategy[strategy.value],  # type: ignore[union-attr]
        backward_prefetch=prefetch.torch_name and BackwardPrefetch[prefetch.torch_name],  # type: ignore[union-attr]
        forward_prefetch=setting.forward_prefetch,
        limit_all_gathers=setting.limit_all_gathers,
        device_id=torch.device("cpu"),
        **extra,
    )


def cross_check(model: torch.nn.Module, opt: torch.optim.Optimizer, cfg, rank: int, spec: str, i: int) -> None:
    """One more step counted twice: by labkit.comm and by torch's own CommDebugMode."""
    from torch.distributed.tensor.debug import CommDebugMode

    x, y = synthetic_batch(cfg, 2, i, rank)
    with CommDebugMode() as debug, comm.count(send=False) as ours:
        model(x, y).backward()
        opt.step()
        opt.zero_grad()
    theirs = {str(op).split(".")[-1]: n for op, n in debug.get_comm_counts().items()}
    mine: dict[str, int] = {}
    for c in ours.calls:
        name = c.c10d.split("::")[-1]
        mine[name] = mine.get(name, 0) + 1
    rank_send(Msg.COMMDEBUG, config=spec, commdebugmode=theirs, labkit=mine)


def main() -> None:
    torch.set_num_threads(1)  # ranks share 2 cores
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = get_config(sys.argv[1])
    steps = int(sys.argv[2])
    for spec in sys.argv[3:]:
        torch.manual_seed(0)
        model = wrap(spec, TransformerLM(cfg), world)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        rec = timeline.Recorder(model, optimizer=opt, synchronize=Setting.parse(spec).sync)
        for i in range(steps):
            x, y = synthetic_batch(cfg, 2, i, rank)
            with rec.step(i, config=spec, num_params=cfg.num_params()):
                model(x, y).backward()
                opt.step()
                opt.zero_grad()
        rec.close()
        if os.environ.get("COMM_JOB_CROSS_CHECK", "1") == "1":
            cross_check(model, opt, cfg, rank, spec, steps)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
