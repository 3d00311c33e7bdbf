"""Train a few steps under several wrappings in one torchrun job; measure memory by category.

    LABKIT_REPORT_DIR=/tmp/out python -m torch.distributed.run --nproc-per-node 2 \
        labkit/testing/mem_job.py small 2 fsdp1:FULL_SHARD fsdp2:reshard fsdp1:NO_SHARD

Arguments: model preset (or one of ``SHAPES``: ``odd``, a shape that FSDP must pad; ``gqa``,
grouped-query attention; ``tied``, tied embeddings), steps per configuration, then
configurations (each may end with ``@PRESET`` or ``@SHAPE`` to use another model):
``ddp``, ``plain``, ``fsdp2:reshard`` / ``fsdp2:keep`` (reshard_after_forward),
``fsdp2:hsdp`` (a 2-D mesh, shards of 2 ranks), ``fsdp2:replicate`` (a 2-D mesh with shards
of one rank: FSDP2's NO_SHARD), or ``fsdp1:STRATEGY`` (HYBRID_SHARD on a 2-D mesh, shards of
2 ranks). Options: ``:nowrap`` leaves out the auto_wrap_policy (FSDP1) or the per-block
``fully_shard`` calls (FSDP2), ``:ac`` adds activation checkpointing per block, ``:bf16``
mixed precision (FSDP1 MixedPrecision / FSDP2 MixedPrecisionPolicy); FSDP1 only:
``:post`` (BACKWARD_POST) or ``:noprefetch`` (no backward prefetch) instead of BACKWARD_PRE,
``:fwd`` (forward_prefetch=True), ``:nolimit`` (limit_all_gathers=False).
Step 1 is measured by ``labkit.memtrack``; for ``fsdp2:reshard``, and for any configuration with
the option ``:ref``, one more step is measured by torch's own tracker ("fsdpmemtracker"
messages): ``FSDPMemTracker`` for FSDP2, ``MemTracker`` for FSDP1, DDP and the plain model.
"""

from __future__ import annotations

import gc
import importlib
import sys
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from labkit.models.config import ModelConfig, get_config
from labkit.models.transformer import TransformerBlock, TransformerLM, synthetic_batch
from labkit.ranks import memtrack
from labkit.ranks.rank import send as rank_send
from labkit.wire.protocol import Msg
from labkit.wire.setting import Flavor, Fsdp2, Option, Setting, Strategy

# Every dimension odd enough that neither FSDP1's flat parameters nor FSDP2's dim-0 shards
# divide evenly at 4 ranks: both must pad.
ODD = ModelConfig(vocab_size=1001, dim=33, n_layers=2, n_heads=3, ffn_dim=97, seq_len=16)
# Shapes the presets do not have, small enough for 5 ranks on 2 cores. No unit's numel and no
# parameter's rows divide by 3 or 5, so at those world sizes FSDP1 pads every FlatParameter
# and FSDP2 every dim-0 shard; short sequences make the blocks' parameters outweigh their
# activations. gqa: 2 KV heads for 4 query heads (k and v projections half of q's rows).
GQA = ModelConfig(vocab_size=389, dim=56, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=151, seq_len=16)
# tied: the output projection is the embedding (one parameter in the root unit, counted once).
TIED = ModelConfig(vocab_size=421, dim=44, n_layers=2, n_heads=4, ffn_dim=107, seq_len=16, tied_embeddings=True)
SHAPES = {"odd": ODD, "gqa": GQA, "tied": TIED}
BATCH = 2
HSDP_SHARD = 2  # ranks per shard group in the HYBRID_SHARD configurations


def plain_model(preset: str, dtype: str = "fp32", checkpointing: bool = False) -> TransformerLM:
    """The seeded model, unwrapped, in fp32 or bf16, every block checkpointed if asked: the activation tests' model."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    torch.manual_seed(0)
    model = TransformerLM(get_config(preset))
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
    if checkpointing:
        for i, block in enumerate(model.layers):
            model.layers[i] = checkpoint_wrapper(block)
    return model


def mesh_2d(world: int, shard: int):
    """(replicate, shard) mesh: ``shard`` ranks hold one copy of the sharded states."""
    from torch.distributed.device_mesh import init_device_mesh

    shard = min(shard, world)
    return init_device_mesh("cpu", (world // shard, shard), mesh_dim_names=("replicate", "shard"))


def wrap(spec: str, model: torch.nn.Module, world: int) -> torch.nn.Module:
    setting = Setting.parse(spec)
    if setting.checkpointing:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

        for i, block in enumerate(model.layers):
            model.layers[i] = checkpoint_wrapper(block)
    if setting.flavor is Flavor.PLAIN:
        return model
    if setting.flavor is Flavor.DDP:
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    if setting.flavor is Flavor.FSDP2:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if setting.fsdp2 is Fsdp2.HSDP:
            mesh = mesh_2d(world, HSDP_SHARD)
        elif setting.fsdp2 is Fsdp2.REPLICATE:
            mesh = mesh_2d(world, 1)
        else:
            mesh = init_device_mesh("cpu", (world,))
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if setting.bf16 else None
        extra = {"mp_policy": mp} if mp else {}
        reshard = bool(setting.reshard_after_forward)
        if setting.wrap:
            for block in model.layers:
                fully_shard(block, mesh=mesh, reshard_after_forward=reshard, **extra)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard, **extra)
        return model
    from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    blocks = {TransformerBlock}
    if setting.checkpointing:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

        blocks = {CheckpointWrapper}
    mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16) if setting.bf16 else None
    prefetch = setting.backward_prefetch.torch_name  # type: ignore[union-attr]
    backward_prefetch = prefetch and BackwardPrefetch[prefetch]
    hybrid = setting.strategy is Strategy.HYBRID_SHARD  # without a mesh it silently becomes NO_SHARD on CPU
    return FullyShardedDataParallel(
        model,
        auto_wrap_policy=ModuleWrapPolicy(blocks) if setting.wrap else None,
        sharding_strategy=ShardingStrategy[setting.strategy.value],  # type: ignore[union-attr]
        mixed_precision=mp,
        device_id=torch.device("cpu"),
        backward_prefetch=backward_prefetch,
        forward_prefetch=setting.forward_prefetch,
        limit_all_gathers=setting.limit_all_gathers,
        device_mesh=mesh_2d(world, HSDP_SHARD) if hybrid else None,
    )


def model_config(name: str) -> ModelConfig:
    """A preset, or one of the test shapes (``SHAPES``)."""
    return SHAPES[name] if name in SHAPES else get_config(name)


def torch_tracker(model: torch.nn.Module, opt: torch.optim.Optimizer) -> Any:
    """torch's own tracker: ``FSDPMemTracker`` for an FSDP2 module (it takes no other),
    ``MemTracker`` for the rest, told of the model's and optimizer's tensors made before it."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed.fsdp import FSDPModule

    if isinstance(model, FSDPModule):
        return FSDPMemTracker(model, opt)
    mt = MemTracker()
    mt.track_external(model, opt)
    return mt


def reference(
    model: torch.nn.Module, opt: torch.optim.Optimizer, cfg: ModelConfig, rank: int, spec: str, i: int
) -> None:
    """One more step measured by torch's tracker: after backward, and the step's peak."""
    x, y = synthetic_batch(cfg, BATCH, i, rank)
    mt = torch_tracker(model, opt)
    with mt:
        model(x, y).backward()
        after_backward = mt.get_tracker_snapshot("current")
        opt.step()
        opt.zero_grad()
    peak = mt.get_tracker_snapshot("peak")

    def by_name(s: dict) -> dict[str, int]:
        return {str(k.value if hasattr(k, "value") else k): v for k, v in s[torch.device("cpu")].items()}

    rank_send(Msg.FSDPMEMTRACKER, config=spec, after_backward=by_name(after_backward), peak=by_name(peak))


def main() -> None:
    torch.set_num_threads(1)  # ranks share 2 cores
    importlib.import_module("torch._dynamo")  # the first optimizer imports it

    gc.freeze()  # as labkit's fork server does: memtrack's gc.collect() then walks only this job's objects
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    steps = int(sys.argv[2])
    for spec in sys.argv[3:]:
        name = Setting.parse(spec).model or sys.argv[1]
        cfg = model_config(name)
        torch.manual_seed(0)
        model = wrap(spec, TransformerLM(cfg), world)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
        tracker = memtrack.track(model, opt, steps=[1], send=False)
        for i in range(steps):
            x, y = synthetic_batch(cfg, BATCH, i, rank)
            with tracker.step(i):
                model(x, y).backward()
                opt.step()
                opt.zero_grad()
        for msg in tracker.results:
            rank_send(Msg.MEMCAT, config=spec, model=name, world_size=world, **msg)
        reference_step = (
            spec == str(Setting(Flavor.FSDP2, fsdp2=Fsdp2.RESHARD)) or Option.REF in Setting.parse(spec).options
        )
        if reference_step:  # the step torch's own tracker measures too (an extra, slower step)
            reference(model, opt, cfg, rank, spec, steps)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
