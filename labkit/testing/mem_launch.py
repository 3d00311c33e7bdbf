"""Run ``mem_job.py`` under torchrun for the tests and the benchmark, once per set of arguments.

A torchrun launch costs seconds, so each distinct job runs once per session and the tests
share its messages, as ``Run.events`` would hold them.
"""

from __future__ import annotations

import functools
from typing import Any

from labkit.testing.jobs import of_config, run_script
from labkit.wire.protocol import TYPE, Msg
from labkit.wire.records import first_message
from labkit.wire.setting import Flavor, Fsdp2, Setting, Strategy

__all__ = [
    "MATRIX", "ODD_WORLD_JOBS", "REF_CONFIGS", "STEPS", "TEST_JOBS", "model_args", "odd_world_job", "of_config",
    "phase", "run_job", "test_job", "torch_peak",
]  # fmt: skip

STEPS = 2  # step 1 is measured: AdamW makes its state during step 0
# The jobs the tests read (tests/test_memtrack.py, tests/test_estimate.py), by number of ranks.
# At one rank FSDP1 runs every strategy as NO_SHARD, so one FSDP1 configuration covers them;
# SHARD_GRAD_OP and NO_SHARD hold the same terms at 2 and 4 ranks, so they run at 2 only, and
# HYBRID_SHARD (shard groups of 2) differs from FULL_SHARD only at 4 (the benchmark runs all).
TEST_JOBS = {
    1: ("fsdp1:FULL_SHARD", "fsdp2:reshard", "fsdp2:keep", Flavor.DDP),
    2: (
        "fsdp1:FULL_SHARD",
        "fsdp2:reshard",
        "fsdp1:NO_SHARD",
        "fsdp1:SHARD_GRAD_OP",
        "fsdp1:FULL_SHARD:nowrap",
        "fsdp2:keep",
        "fsdp2:replicate",
        "fsdp1:FULL_SHARD:post",
        "fsdp1:FULL_SHARD:fwd",
        "fsdp1:FULL_SHARD:bf16",
        "fsdp2:reshard:bf16",
        Flavor.DDP,
    ),
    4: (
        "fsdp1:FULL_SHARD",
        "fsdp2:reshard",
        "fsdp1:FULL_SHARD@odd",
        "fsdp2:reshard@odd",
        "fsdp1:HYBRID_SHARD",
        "fsdp2:hsdp",
        "fsdp1:FULL_SHARD:ac",
        "fsdp2:reshard:ac",
    ),
}
# Shapes the presets never had, at odd numbers of ranks where no unit divides evenly: each
# flavor and strategy measured by torch's own trackers too (``:ref``), one job per N.
# 3 ranks: grouped-query attention; 5 ranks: tied embeddings (labkit.testing.mem_job.SHAPES).
REF_CONFIGS = ("ddp:ref", "fsdp1:FULL_SHARD:ref", "fsdp1:SHARD_GRAD_OP:ref", "fsdp2:reshard:ref", "fsdp2:keep:ref")
ODD_WORLD_JOBS = {3: "gqa", 5: "tied"}
# The benchmark's matrix: (flavor, strategy) -> the mem_job configuration that runs it.
MATRIX = {
    (s.flavor, s.strategy): str(s)
    for s in (
        *(
            Setting(Flavor.FSDP1, st)
            for st in (Strategy.FULL_SHARD, Strategy.SHARD_GRAD_OP, Strategy.NO_SHARD, Strategy.HYBRID_SHARD)
        ),
        *(Setting(Flavor.FSDP2, fsdp2=w) for w in (Fsdp2.RESHARD, Fsdp2.KEEP, Fsdp2.REPLICATE, Fsdp2.HSDP)),
        Setting(Flavor.DDP),
    )
}


def model_args(config: str, world_size: int) -> tuple[str, dict[str, Any]]:
    """The ``memory_model.peak_memory`` strategy and options for a mem_job configuration
    (AdamW, micro-batch ``mem_job.BATCH``, FSDP's "torch" convention, fp32 unless ``:bf16``)."""
    from labkit.testing.mem_job import BATCH, HSDP_SHARD

    setting = Setting.parse(config)
    kw: dict[str, Any] = {"micro_batch": BATCH, "convention": "torch", "checkpointing": setting.checkpointing}
    kw["precision"] = "bf16" if setting.bf16 else "fp32"
    if not setting.wrap:
        kw["wrap"] = "none"
    if setting.flavor in (Flavor.DDP, Flavor.PLAIN):
        return Strategy.DDP, kw
    strategy = setting.strategy
    kw["flavor"] = setting.flavor
    if strategy is Strategy.HYBRID_SHARD:
        kw["shard_group_size"] = min(HSDP_SHARD, world_size)
    if setting.flavor is Flavor.FSDP1:
        kw["backward_prefetch"] = setting.backward_prefetch.torch_name  # type: ignore[union-attr]
        kw["forward_prefetch"] = setting.forward_prefetch
        kw["limit_all_gathers"] = setting.limit_all_gathers
    return strategy, kw  # type: ignore[return-value]


@functools.cache
def run_job(nproc: int, model: str, steps: int, *configs: str, timeout: float = 300) -> dict[int, list[dict[str, Any]]]:
    """Every message of every rank, in order, each with its ``rank``."""
    return run_script("mem_job.py", nproc, [model, str(steps), *configs], timeout)


def test_job(nproc: int) -> dict[int, list[dict[str, Any]]]:
    """The tests' job at ``nproc`` ranks on the "tiny" model (run once per session)."""
    return run_job(nproc, "tiny", STEPS, *TEST_JOBS[nproc])


test_job.__test__ = False  # a helper, not a test, even when pytest imports it


def odd_world_job(nproc: int) -> dict[int, list[dict[str, Any]]]:
    """The job of ``ODD_WORLD_JOBS`` at ``nproc`` ranks (run once per session)."""
    return run_job(nproc, ODD_WORLD_JOBS[nproc], STEPS, *REF_CONFIGS)


def torch_peak(events: dict[int, list[dict[str, Any]]], config: str, rank: int) -> int:
    """The step's peak, in bytes, that torch's tracker measured on ``rank`` (a ``:ref`` configuration)."""
    ref = first_message(events, rank, Msg.FSDPMEMTRACKER, config=config)
    assert ref is not None, (config, rank)
    return ref["peak"]["Total"]


def phase(events: dict[int, list[dict[str, Any]]], config: str, rank: int, name: str) -> dict[str, int]:
    """Bytes by category that ``rank`` measured at ``name`` (forward, backward, optimizer, peak)."""
    for m in events[rank]:
        if m.get(TYPE) == Msg.MEMCAT and m.get("config") == config and m.get("phase") == name:
            return m["categories"]
    raise KeyError((config, rank, name))
