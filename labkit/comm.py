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

from labkit import lazy

HOMES: dict[str, tuple[str, ...]] = {
    "labkit.ranks.comm": ("Call", "CommCounter", "count", "padded_numel", "padded_units", "steps", "unit_name"),
    "labkit.timing.theory": (
        "KINDS", "STRATEGIES", "StepCounts", "from_events", "ring_factor", "table", "theory_bytes", "total",
    ),
}  # fmt: skip
__all__, __getattr__, __dir__ = lazy.names(__name__, HOMES)
