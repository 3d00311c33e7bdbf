"""The subprocess's side of ``labkit.estimate``: one FSDP2 training step under fake tensors.

    python -m labkit.memory.faketrace '[{"model": "llama-7b", "world_size": 8, ...}]'   # one JSON line per spec

It joins a fake process group as rank 0, builds ``TransformerLM`` under ``FakeTensorMode``,
wraps it with FSDP2 as the lessons do, and runs one step under ``labkit.memtrack``'s tracker
(see ``labkit.estimate`` for what is measured and why). ``Spec.layers`` traces the model at
another depth than its preset's: what ``estimate`` extrapolates from.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any

from labkit.memory import model as mm
from labkit.wire.errors import OptionError
from labkit.wire.setting import Strategy


@dataclasses.dataclass(frozen=True)
class Spec:
    """One estimate to run. ``layers``: trace this many transformer blocks instead of the preset's."""

    model: str
    world_size: int
    precision: str = "bf16"
    checkpointing: bool = True
    micro_batch: int = 1
    seq_len: int | None = None
    strategy: str = Strategy.FULL_SHARD
    shard_group_size: int | None = None
    layers: int | None = None


def config_of(spec: Spec) -> Any:
    """The model's config as traced: the preset, with the spec's sequence length and depth."""
    from labkit.models.config import get_config

    try:
        cfg = get_config(spec.model)
    except ValueError as err:  # an unknown preset: say so before any subprocess starts
        raise OptionError(str(err)) from None
    if spec.seq_len:
        cfg = dataclasses.replace(cfg, seq_len=spec.seq_len)
    if spec.layers:
        cfg = dataclasses.replace(cfg, n_layers=spec.layers)
    return cfg


def shard_group(spec: Spec) -> int:
    """How many ranks one copy of the states is sharded over (HYBRID_SHARD: one node of 8 by default)."""
    return mm.shard_group(mm.resolve_strategy(spec.strategy), spec.world_size, spec.shard_group_size)


class Chunks:
    """``torch.chunk(x, n, dim)`` padded with empty chunks to n, as FSDP2's ``_chunk_with_empty``
    returns it, but made one chunk at a time when asked for. FSDP2 reads two of the n chunks
    (its own and chunk 0); under fake tensors, making all n costs about a millisecond each,
    which for 70B on 1024 ranks is 740,000 chunks and most of a quarter of an hour."""

    def __init__(self, x: Any, n: int, dim: int) -> None:
        self.x, self.n, self.dim = x, n, dim
        self.size = -(-x.size(dim) // n) if x.size(dim) else 0  # torch.chunk's chunk size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        i = i + self.n if i < 0 else i
        if not 0 <= i < self.n:
            raise IndexError(i)
        rows, start = self.x.size(self.dim), i * self.size
        if rows == 0:  # torch.chunk gives n empty views of an empty tensor
            return self.x.narrow(self.dim, 0, 0)
        if start >= rows:  # torch.chunk made fewer than n chunks; FSDP2 pads with empty ones
            return self.x.new_empty(0)
        return self.x.narrow(self.dim, start, min(self.size, rows - start))

    def __iter__(self) -> Any:
        return (self[i] for i in range(self.n))


def measure(spec: Spec) -> dict[str, Any]:
    """One step of ``spec`` under fake tensors and a fake process group; rank 0's memcat results."""
    from unittest import mock

    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.fsdp._fully_shard import _fsdp_param
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from labkit.models.transformer import TransformerLM
    from labkit.ranks import memtrack

    cfg = config_of(spec)
    strat = mm.resolve_strategy(spec.strategy)
    n = spec.world_size
    t0, cpu0 = time.perf_counter(), time.process_time()
    dist.init_process_group("fake", rank=0, world_size=n, store=FakeStore())
    try:
        if strat.name == Strategy.HYBRID_SHARD:
            group = shard_group(spec)
            mesh = init_device_mesh("cpu", (n // group, group), mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh("cpu", (n,))  # outside fake mode: the mesh holds real rank lists
        dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[mm.resolve_precision(spec.precision)]
        mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32 if dtype else None)
        reshard = strat.name != "ZERO2"  # SHARD_GRAD_OP keeps units gathered until backward
        # Initial values do not exist under fake tensors: skip the init kernels, keep the shapes;
        # and let FSDP2 cut only the chunks it reads (see Chunks).
        with (
            FakeTensorMode(),
            mock.patch.object(TransformerLM, "reset_parameters", lambda self: None),
            mock.patch.object(_fsdp_param, "_chunk_with_empty", Chunks),
        ):
            model = TransformerLM(cfg)
            if spec.checkpointing:
                for i, block in enumerate(model.layers):
                    model.layers[i] = checkpoint_wrapper(block)
            for block in model.layers:
                fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
            fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
            # The state AdamW makes on its first step, made directly: a real first step on fake
            # gradients would cost as much as the measured one and make the same tensors.
            for p in model.parameters():
                opt.state[p] = {
                    "step": torch.tensor(0.0),
                    "exp_avg": torch.zeros_like(p),
                    "exp_avg_sq": torch.zeros_like(p),
                }
            x = torch.randint(0, cfg.vocab_size, (spec.micro_batch, cfg.seq_len))
            y = torch.randint(0, cfg.vocab_size, (spec.micro_batch, cfg.seq_len))
            tracker = memtrack.track(model, opt, send=False)
            with tracker.step(1):
                model(x, y).backward()
                opt.step()
                opt.zero_grad()
    finally:
        dist.destroy_process_group()
    by_phase = {m["phase"]: m for m in tracker.results}
    return {
        "peak": by_phase["peak"]["categories"],
        "phases": {p: m["categories"] for p, m in by_phase.items() if p != "peak"},
        "stage": by_phase["peak"].get("stage", ""),
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - cpu0,
    }


def worker(payload: str) -> None:
    import gc
    import importlib

    import torch

    torch.set_num_threads(1)
    for name in ("torch._dynamo", "torch.distributed.fsdp", "torch._subclasses.fake_tensor"):
        importlib.import_module(name)  # what measure() needs, imported before the freeze
    # the imports live as long as the process: memtrack's gc.collect() at each phase then walks only
    # what a trace made, not torch's few hundred thousand objects (0.15 s or more a call)
    gc.freeze()
    for spec in json.loads(payload):
        print(json.dumps(measure(Spec(**spec))), flush=True)


if __name__ == "__main__":
    worker(sys.argv[1])
