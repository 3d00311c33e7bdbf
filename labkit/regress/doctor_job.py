"""The code ``labkit doctor`` runs on 2 ranks: FSDP1 and FSDP2 trained as the lessons train them,
with the timeline and memtrack on, and what each found reported back.

Kept as source text (``CODE``) because it runs in the ranks (``labkit.torchrun``); it only
imports what any lesson cell imports.
"""

from __future__ import annotations

CODE = r"""
import warnings

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy, fully_shard
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

from labkit.models import TransformerBlock, TransformerLM, get_config, synthetic_batch
from labkit.ranks import memtrack, rank, timeline
from labkit.ranks.torch_hooks import TorchHookWarning
from labkit.wire.setting import Flavor

cfg = get_config("tiny")
device = rank.device()


def fsdp1():
    torch.manual_seed(0)
    return FullyShardedDataParallel(TransformerLM(cfg), auto_wrap_policy=ModuleWrapPolicy({TransformerBlock}),
                                    sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=device)


def fsdp2():
    torch.manual_seed(0)
    model = TransformerLM(cfg).to(device)
    mesh = init_device_mesh(device.type, (rank.world_size(),))
    for block in model.layers:
        fully_shard(block, mesh=mesh, reshard_after_forward=True)
    return fully_shard(model, mesh=mesh, reshard_after_forward=True)


for flavor, make in ((Flavor.FSDP1, fsdp1), (Flavor.FSDP2, fsdp2)):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TorchHookWarning)
        model = make()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        recorder = timeline.Recorder(model, optimizer)
        tracker = memtrack.track(model, optimizer, steps=[1], send=False)
        for step in range(2):
            inputs, targets = synthetic_batch(cfg, 2, step, rank.rank(), device)
            with (recorder.step(step, send=False) if step == 0 else tracker.step(step)):
                model(inputs, targets).backward()
                optimizer.step()
                optimizer.zero_grad()
    collectives = [s for s in recorder.spans if s["kind"] in ("all_gather", "reduce_scatter")]
    most = {}  # each category's largest value over the phases and the peak (gradients show 0 at the peak)
    for m in tracker.results:
        for cat, n in m["categories"].items():
            most[cat] = max(most.get(cat, 0), n)
    rank.report(**{flavor: {
        "flavor": recorder.flavor,
        "units": [name for name, *_ in recorder.units],
        "unit_bytes": recorder.describe()["unit_bytes"],
        "collectives": len(collectives),
        "named": sum(1 for s in collectives if s.get("unit")),
        "held": sum(1 for s in recorder.spans if s["kind"] == "held"),
        "most": most,
        "warnings": [str(w.message) for w in caught if issubclass(w.category, TorchHookWarning)],
    }})
"""
