"""Run ``mem_job.py`` under torchrun for the tests and the benchmark, once per set of arguments.

A torchrun launch costs seconds, so each distinct job runs once per session and the tests
share its messages, as ``Run.events`` would hold them.
"""

from __future__ import annotations

import functools
from typing import Any

from labkit.testing.jobs import of_config, run_script

__all__ = ["STEPS", "TEST_JOBS", "of_config", "phase", "run_job", "test_job"]

STEPS = 2  # step 1 is measured: AdamW makes its state during step 0
# The jobs the tests read (tests/test_memtrack.py, tests/test_estimate.py), by number of ranks.
TEST_JOBS = {
    1: ("fsdp1:FULL_SHARD", "fsdp2:reshard"),
    2: (
        "fsdp1:FULL_SHARD",
        "fsdp2:reshard",
        "fsdp1:NO_SHARD",
        "fsdp1:SHARD_GRAD_OP",
        "fsdp1:FULL_SHARD:nowrap",
        "fsdp2:keep",
    ),
    4: ("fsdp1:FULL_SHARD", "fsdp2:reshard", "fsdp1:FULL_SHARD@odd", "fsdp2:reshard@odd"),
}


@functools.cache
def run_job(nproc: int, model: str, steps: int, *configs: str, timeout: float = 300) -> dict[int, list[dict[str, Any]]]:
    """Every message of every rank, in order, each with its ``rank``."""
    return run_script("mem_job.py", nproc, [model, str(steps), *configs], timeout)


def test_job(nproc: int) -> dict[int, list[dict[str, Any]]]:
    """The tests' job at ``nproc`` ranks on the "tiny" model (run once per session)."""
    return run_job(nproc, "tiny", STEPS, *TEST_JOBS[nproc])


test_job.__test__ = False  # a helper, not a test, even when pytest imports it


def phase(events: dict[int, list[dict[str, Any]]], config: str, rank: int, name: str) -> dict[str, int]:
    """Bytes by category that ``rank`` measured at ``name`` (forward, backward, optimizer, peak)."""
    for m in events[rank]:
        if m.get("t") == "memcat" and m.get("config") == config and m.get("phase") == name:
            return m["categories"]
    raise KeyError((config, rank, name))
