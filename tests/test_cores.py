"""Ranks bound to cores (``pin``, labkit.ranks.cores): which core each rank takes, and that every
thread of a rank stays on it."""

from __future__ import annotations

import os

import pytest

from labkit.launch.options import RunConfig, resolve
from labkit.ranks import cores
from labkit.wire.errors import OptionError

CORES = """
import os
from labkit.ranks import rank
import torch, torch.distributed as dist
dist.all_reduce(torch.ones(8))  # gloo's threads exist by now
seen = set()
for tid in os.listdir("/proc/self/task"):
    try:
        seen |= os.sched_getaffinity(int(tid))
    except OSError:  # ended since the listing
        pass
rank.report(cores=sorted(seen), pinned=os.environ.get("LABKIT_PIN"))
"""


def test_round_robin_over_the_cores_the_rank_may_use():
    assert [cores.core_for(i, [3, 1]) for i in range(5)] == [1, 3, 1, 3, 1]  # a cpuset of cores 1 and 3
    assert cores.core_for(6, [0]) == 0


def test_unset_leaves_the_rank_alone(monkeypatch):
    monkeypatch.delenv("LABKIT_PIN", raising=False)
    before = os.sched_getaffinity(0)
    assert cores.pin() is None and os.sched_getaffinity(0) == before


def test_refused_where_there_is_no_affinity_call(monkeypatch):
    monkeypatch.delattr(os, "sched_setaffinity")
    with pytest.raises(OptionError, match="sched_setaffinity"):
        resolve(RunConfig(nproc=2, backend="gloo", pin=True))


@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_each_rank_and_all_its_threads_on_one_core():
    """3 ranks on this machine's cores, by local rank; unpinned, a rank may use them all."""
    import labkit

    allowed = sorted(os.sched_getaffinity(0))
    run = labkit.torchrun(CORES, nproc=3, backend="gloo", display="none", quiet=True, pin=True)
    assert {r: (v["cores"], v["pinned"]) for r, v in run.values.items()} == {
        r: ([allowed[r % len(allowed)]], "local") for r in range(3)
    }
    run = labkit.torchrun(CORES, nproc=2, backend="gloo", display="none", quiet=True)
    assert {r: (v["cores"], v["pinned"]) for r, v in run.values.items()} == {r: (allowed, None) for r in range(2)}


@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_warm_ranks_bound_too():
    """``%torchrun_start --pin``: the warm ranks are bound from their start, every cell after."""
    from labkit.launch import magic
    from labkit.launch.warm import Session

    assert magic.parse_line("-n 2 --pin", magic.start_parser()).pin is True
    allowed = sorted(os.sched_getaffinity(0))
    with Session(nproc=2, backend="gloo", display="none", quiet=True, pin=True) as session:
        run = session.run(CORES)
    assert {r: v["cores"] for r, v in run.values.items()} == {r: [allowed[r % len(allowed)]] for r in range(2)}
