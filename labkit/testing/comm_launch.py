"""Run ``comm_job.py`` under torchrun for the tests, once per set of arguments per session.

The tests of comm, timeline and simulate read the same few jobs: a launch costs seconds,
so each distinct job runs once and its messages are shared.
"""

from __future__ import annotations

import functools
from typing import Any

from labkit.testing.jobs import of_config, run_script
from labkit.wire.setting import Flavor

__all__ = ["CONFIGS_2", "of_config", "run_job"]

# The 2-rank job that the tests of comm, timeline and simulate share.
CONFIGS_2 = (
    Flavor.DDP,
    "fsdp1:FULL_SHARD:BACKWARD_PRE",
    "fsdp1:FULL_SHARD:BACKWARD_POST",
    "fsdp1:FULL_SHARD:NONE",
    "fsdp1:SHARD_GRAD_OP",
    "fsdp1:NO_SHARD",
    "fsdp2:reshard",
    "fsdp2:keep",
    "fsdp2:reshard:sync",
)


@functools.cache
def run_job(
    nproc: int, model: str, steps: int, *configs: str, timeout: float = 240, cross_check: bool = True
) -> dict[int, list[dict[str, Any]]]:
    """Every message of every rank, in order, as ``Run.events`` holds them."""
    env = {"COMM_JOB_CROSS_CHECK": "1" if cross_check else "0"}
    return run_script("comm_job.py", nproc, [model, str(steps), *configs], timeout, env)
