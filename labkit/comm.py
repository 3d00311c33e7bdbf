"""Collectives, under the name a notebook types: what the ranks count (``labkit.ranks.comm``, torch,
in a rank) and what theory says a step should move (``labkit.timing.theory``, no torch, in the kernel).

    from labkit import comm
    with comm.count(step=i) as c:                             # in a rank
        ...
    comm.theory_bytes(num_params, "FULL_SHARD", world_size=4)  # in the kernel

The two sides run in different processes, so each name is imported from its home on first use: the
kernel's ``comm.theory_bytes`` never loads torch, a rank's ``comm.count`` never loads the kernel's side.
"""

from __future__ import annotations

import importlib
from typing import Any

HOMES: dict[str, tuple[str, ...]] = {
    "labkit.ranks.comm": ("Call", "CommCounter", "count", "padded_numel", "padded_units", "steps", "unit_name"),
    "labkit.timing.theory": (
        "KINDS", "STRATEGIES", "StepCounts", "from_events", "ring_factor", "table", "theory_bytes", "total",
    ),
}  # fmt: skip
__all__ = sorted(name for names in HOMES.values() for name in names)


def __getattr__(name: str) -> Any:
    for home, names in HOMES.items():
        if name in names:
            return getattr(importlib.import_module(home), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
