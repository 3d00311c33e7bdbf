"""What a cell running in a rank calls: who am I, report values, count steps. The code lives in
``labkit.ranks.rank``; this is the name a notebook types.

    from labkit import rank
    for i in rank.steps(3):
        ...
    rank.report(loss=loss.item())    # ends up in run.values[rank]
"""

from __future__ import annotations

from labkit.ranks.rank import (
    connected,
    current_step,
    device,
    local_rank,
    log,
    on_phase,
    on_step,
    phase,
    rank,
    report,
    reset_steps,
    send,
    step,
    steps,
    to_jsonable,
    use_channel,
    values,
    world_size,
)

__all__ = [
    "connected", "current_step", "device", "local_rank", "log", "on_phase", "on_step", "phase", "rank",
    "report", "reset_steps", "send", "step", "steps", "to_jsonable", "use_channel", "values", "world_size",
]  # fmt: skip
