"""Each rank on a core of its own, opt-in: ``%%torchrun --pin``, ``labkit.torchrun(..., pin=True)``.

Why: with more ranks than cores (4 emulated ranks on a 2-core laptop), Linux moves each rank's
threads from core to core as they sleep in a collective and wake; how it places them changes from
one launch to the next, and with it the step. Bound, the ranks share the cores the same way every
time: two per core, each at half a core while both compute, a whole one while the other waits.
Measured on this project's 2-core machine (4 ranks, FSDP1 FULL_SHARD, twelve launches each):
209-267 ms bound against 246-328 ms unbound; 2 ranks, 109-144 ms against 108-164 ms.

The kernel side asks for it (``LABKIT_PIN``): ``rank`` for emulated nodes, whose ranks all share
this machine's cores (rank r on core r mod cores), ``local`` on real nodes (local rank l on core l
mod cores, per node). Only the cores the rank may already use count (a Slurm job's or a
container's cpuset)."""

from __future__ import annotations

import os

from labkit.wire import env as envvars


def core_for(index: int, allowed: list[int]) -> int:
    """The core of the rank numbered ``index`` (its rank or local rank): round robin over ``allowed``."""
    return sorted(allowed)[index % len(allowed)]


def pin() -> int | None:
    """Bind every thread of this rank to its core (threads started later inherit it); the core, or
    None when ``LABKIT_PIN`` is unset. Call it first: gloo's and torch's threads start later."""
    how = envvars.get("LABKIT_PIN")
    if not how:
        return None
    index = int(os.environ.get("RANK" if how == "rank" else "LOCAL_RANK", "0"))
    core = core_for(index, list(os.sched_getaffinity(0)))
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), {core})
        except OSError:  # a thread that ended since the listing
            pass
    return core
