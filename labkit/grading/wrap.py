"""FSDP1's size-based wrap, found offline: the units ``size_based_auto_wrap_policy`` makes of a model.

Used to check a student's ``min_num_params`` on models the notebook never builds (lesson 3),
on the meta device, so nothing is allocated.
"""

from __future__ import annotations

from typing import Any


def size_policy_units(model: Any, min_num_params: int) -> list[str]:
    """The units FSDP1's ``size_based_auto_wrap_policy`` makes of ``model``, found offline with
    the recursion of FSDP's ``_recursive_wrap`` (the root is always a unit)."""
    from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy

    units = ["root"]

    def policy(module: Any, recurse: bool, numel: int) -> bool:
        return size_based_auto_wrap_policy(module, recurse, numel, min_num_params=int(min_num_params))

    def wrap(name: str, module: Any, root: bool = False) -> int:
        numel = sum(p.numel() for p in module.parameters())
        if not policy(module, True, numel):
            return 0
        wrapped = sum(wrap(f"{name}.{child}".lstrip("."), m) for child, m in module.named_children())
        if not root and policy(module, False, numel - wrapped):
            units.append(name)
            return numel
        return wrapped

    wrap("", model, root=True)
    return sorted(units)


def meta_model(config: dict[str, Any]) -> Any:
    """A ``TransformerLM`` of this configuration with only its shapes (the meta device)."""
    import torch

    from labkit.models.config import ModelConfig
    from labkit.models.transformer import TransformerLM

    with torch.device("meta"):
        return TransformerLM(ModelConfig(**config))
