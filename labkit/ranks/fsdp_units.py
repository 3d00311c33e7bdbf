"""The FSDP units of a wrapped model: their names, their modules and their padded sizes.

    from labkit.ranks.fsdp_units import find_units, padded_units
    flavor, units = find_units(model)      # "fsdp1" / "fsdp2" / "ddp" / "plain", [(name, unit, compute, outer)]
    padded_units(model)                    # {"root": 65600, "layers.0": 65664, ...} elements gathered

Shared by ``labkit.comm`` (theory against measured bytes) and ``labkit.timeline`` (which
unit each span belongs to). Reads FSDP's own metadata: FSDP1's ``FlatParamHandle`` and
FSDP2's ``FSDPParamGroup`` (private torch APIs, checked on torch 2.13).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from labkit.ranks.torch_hooks import fsdp1_handle, fsdp2_group
from labkit.wire.setting import Flavor

__all__ = ["find_units", "fsdp1_handle", "fsdp2_group", "padded_numel", "padded_units", "unit_bytes", "unit_name"]


def padded_numel(numel: int, world_size: int) -> int:
    """A flat parameter padded so that it splits evenly (FSDP1's FlatParameter)."""
    return math.ceil(numel / world_size) * world_size


def padded_units(model: Any) -> dict[str, int]:
    """Per FSDP unit of a wrapped model, the number of elements its all-gather returns.

    FSDP1 pads each unit's FlatParameter to a multiple of the shard count; FSDP2 pads
    each parameter's first dimension. Read from FSDP's own sharding metadata.
    """
    units: dict[str, int] = {}
    for fqn, module in model.named_modules():
        fqn = unit_name(fqn)
        handle = fsdp1_handle(module)  # warns, rather than skipping the unit, where this torch moved it
        if handle is not None:
            fp = handle.flat_param
            sharded = handle.uses_sharded_strategy
            units[fqn] = (
                fp._sharded_size.numel() * handle.world_size if sharded else fp._unpadded_unsharded_size.numel()
            )
            continue
        group = fsdp2_group(module)
        if group is not None:
            units[fqn] = sum(_fsdp2_padded(p) for p in group.fsdp_params)
    return units


def unit_name(fqn: str) -> str:
    """A module's name without FSDP1's wrapper segments; the root is called "root"."""
    for wrapper in ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod."):
        fqn = fqn.replace(wrapper, "")
    return fqn.removesuffix("_fsdp_wrapped_module").rstrip(".") or "root"


def _fsdp2_padded(fsdp_param: Any) -> int:
    shard = fsdp_param.padded_sharded_param_size  # one rank's padded shard, dim 0 padded
    return math.prod(shard) * fsdp_param.mesh_info.shard_mesh_size


def find_units(
    model: Any, unit_types: Sequence[type] | None = None
) -> tuple[str, list[tuple[str, Any, list[Any], Any]]]:
    """(flavor, [(name, unit module, compute modules, outer module)]) in module order, root first.

    flavor: "fsdp1", "fsdp2", "ddp" or "plain". The compute modules of a unit are the unit
    itself if it holds no other unit, else its own submodules that hold no unit.
    """
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    if any(isinstance(m, FullyShardedDataParallel) for m in model.modules()):
        flavor, is_unit = Flavor.FSDP1, lambda m: isinstance(m, FullyShardedDataParallel)
    elif any(isinstance(m, FSDPModule) for m in model.modules()):
        flavor, is_unit = Flavor.FSDP2, lambda m: isinstance(m, FSDPModule)
    else:
        from labkit.models.transformer import TransformerBlock

        types = tuple(unit_types or (TransformerBlock,))
        flavor = (
            Flavor.DDP
            if hasattr(model, "module") and type(model).__name__ == "DistributedDataParallel"
            else Flavor.PLAIN
        )
        root = model.module if flavor is Flavor.DDP else model
        return flavor, _units(root, lambda m: m is root or isinstance(m, types), unit_name)
    return flavor, _units(model, is_unit, unit_name)


def _units(model: Any, is_unit: Any, unit_name: Any) -> list[tuple[str, Any, list[Any], Any]]:
    out = []
    for fqn, module in model.named_modules():
        if not is_unit(module) and module is not model:
            continue
        inner = getattr(module, "_fsdp_wrapped_module", module)
        nested = [m for m in inner.modules() if m is not inner and is_unit(m)]
        compute = [inner] if not nested else list(_own_modules(inner, is_unit))
        out.append((unit_name(fqn), module, compute, module))
    return out


def _own_modules(module: Any, is_unit: Any) -> Iterator[Any]:
    for child in module.children():
        if is_unit(child):
            continue
        if any(is_unit(m) for m in child.modules()):
            yield from _own_modules(child, is_unit)
        else:
            yield child


def unit_bytes(model: Any, units: Sequence[tuple[str, Any, list[Any], Any]]) -> dict[str, int]:
    """Bytes of each unit's unsharded parameters (FSDP padding included, see ``padded_units``)."""
    padded = padded_units(model)
    out = {}
    for name, unit, compute, _ in units:
        params = [p for m in compute for p in m.parameters()]
        size = params[0].element_size() if params else 4
        handle = fsdp1_handle(unit)
        if handle is not None:
            size = handle.flat_param.element_size()
        out[name] = padded[name] * size if name in padded else sum(p.numel() * p.element_size() for p in params)
    return out
