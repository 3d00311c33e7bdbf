"""Traces users can open (labkit.timing.trace): nothing Perfetto would drop, written beside the
notebook; ``--profile``'s torch.profiler traces."""

from __future__ import annotations

import json

import pytest

from labkit.timing import trace
from labkit.timing.spans import span


def overlapping() -> dict[int, list[dict]]:
    """What a DDP or FSDP2-async step records: collectives that overlap each other and compute,
    and units held at once."""
    return {
        0: [
            span("a", "forward", 0.000, 0.010, "compute"),
            span("b", "forward", 0.010, 0.020, "compute"),
            span("a", "all_gather", 0.000, 0.004, "comm", bytes=10),
            span("b", "all_gather", 0.003, 0.012, "comm", bytes=10),  # starts before a's ends
            span("", "all_reduce", 0.011, 0.030, "comm", bytes=10),
            span("a", "held", 0.000, 0.015, "memory"),
            span("b", "held", 0.003, 0.025, "memory"),
            span("c", "held", 0.012, 0.0151, "memory"),
        ]
    }


def test_overlaps_get_tracks_of_their_own():
    t = trace.to_chrome_trace(overlapping())
    assert trace.misnested(t) == []
    xs = [e for e in t["traceEvents"] if e["ph"] == "X"]
    names = {e["tid"]: e for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(n["args"]["name"] for n in names.values()) == ["comm", "comm 2", "compute"]
    assert len(xs) == 5  # every slice kept
    counter = [(e["ts"], e["args"]["units"]) for e in t["traceEvents"] if e["ph"] == "C"]
    assert max(n for _, n in counter) == 3 and counter[-1][1] == 0
    held = [e for e in t["traceEvents"] if e.get("cat") == "held"]
    assert len(held) == 6 and len({e["id"] for e in held}) == 3


def test_the_old_layout_would_have_dropped_slices():
    """One track per stream, as before: the checker sees what Perfetto dropped."""
    t = trace.to_chrome_trace(overlapping())
    for e in t["traceEvents"]:
        if e["ph"] == "X" and e["cat"] in ("all_gather", "all_reduce"):
            e["tid"] = 1
    assert trace.misnested(t)


def test_saved_beside_the_notebook(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = trace.save(overlapping(), name="step 3: FSDP2")
    assert path == str(tmp_path / "labkit-traces" / "step_3_FSDP2.json")
    assert json.load(open(path))["traceEvents"]


@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_profile_writes_each_ranks_torch_profiler_trace(tmp_path, monkeypatch):
    import labkit

    monkeypatch.chdir(tmp_path)
    code = "import torch, torch.distributed as dist\nx = torch.ones(64, 64)\ny = x @ x\ndist.all_reduce(y)\n"
    run = labkit.torchrun(code, nproc=2, backend="gloo", display="none", quiet=True, profile=True)
    folder = tmp_path / "labkit-traces" / run.run_id
    assert run.profiles == [str(folder / "rank0.json"), str(folder / "rank1.json")]
    for path in run.profiles:
        events = json.load(open(path))["traceEvents"]
        names = {e.get("name", "") for e in events}
        assert any("mm" in n for n in names) and any("allreduce" in n.lower() for n in names), sorted(names)[:40]
