"""The per-unit timeline: real timestamps from the ranks, the prefetch order FSDP documents, the plots.

.venv/bin/pytest tests/test_timeline.py -q
"""

from __future__ import annotations

import json

import pytest

from labkit import timeline
from labkit.testing.comm_launch import CONFIGS_2, of_config, run_job

PRE, POST, NONE = (f"fsdp1:FULL_SHARD:{p}" for p in ("BACKWARD_PRE", "BACKWARD_POST", "NONE"))


def run(config):
    return of_config(run_job(2, "tiny", 3, *CONFIGS_2), config)


def spans(config, rank=0):
    return timeline.spans_by_rank(run(config))[rank]["spans"]


def comm_order(config, rank=0):
    return [(s["kind"], s["unit"]) for s in spans(config, rank) if s["stream"] == "comm"]


# -- what the ranks recorded ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("config", [PRE, "fsdp2:reshard", "ddp"])
def test_every_unit_has_forward_and_backward(config):
    for r in (0, 1):
        ss = spans(config, r)
        for unit in ("root", "layers.0", "layers.1"):
            kinds = {s["kind"] for s in ss if s["unit"] == unit}
            assert {"forward", "backward"} <= kinds, (config, unit, kinds)
        assert [s["kind"] for s in ss if s["unit"] == "optimizer"] == ["optimizer"]


@pytest.mark.slow
def test_timestamps_are_real_and_consistent():
    """Inside the step, in order, and on CPU the one thread never computes while it waits in a collective."""
    for config in (PRE, POST, NONE, "fsdp2:reshard"):
        msg = timeline.spans_by_rank(run(config))[0]
        ss = msg["spans"]
        assert all(msg["start"] <= s["start"] <= s["end"] <= msg["end"] for s in ss)
        compute = sorted((s["start"], s["end"]) for s in ss if s["stream"] == "compute")
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(compute, compute[1:])), "compute spans overlap"
        blocking = [(s["start"], s["end"]) for s in ss if s["stream"] == "comm" and s["blocking"]]
        assert timeline.intersect(timeline.union(compute), timeline.union(blocking)) == []
        assert timeline.summary(run(config))[0]["compute_s"] > 0


@pytest.mark.slow
def test_forward_order_and_units():
    """Forward gathers root, then each block, each right before its compute; the root gathers first."""
    ss = [s for s in spans(PRE) if s["kind"] in ("all_gather", "forward")]
    first = [(s["kind"], s["unit"]) for s in ss][:6]
    assert first == [
        ("all_gather", "root"),
        ("forward", "root"),
        ("all_gather", "layers.0"),
        ("forward", "layers.0"),
        ("all_gather", "layers.1"),
        ("forward", "layers.1"),
    ]


@pytest.mark.slow
def test_backward_prefetch_order_as_documented():
    """BACKWARD_PRE gathers the next unit before the current reduce-scatter; None after it.

    FSDP1 keeps its root gathered, so backward gathers the two blocks only. With PRE, L0 is
    gathered before L1's backward even starts (in L1's pre-backward hook).
    """
    bwd = slice(3, None)  # after the three forward all-gathers
    assert comm_order(PRE)[bwd] == [
        ("all_gather", "layers.1"),
        ("all_gather", "layers.0"),  # prefetched
        ("reduce_scatter", "layers.1"),
        ("reduce_scatter", "layers.0"),
        ("reduce_scatter", "root"),
    ]
    assert comm_order(POST)[bwd] == comm_order(PRE)[bwd]  # same order, issued later:
    assert comm_order(NONE)[bwd] == [
        ("all_gather", "layers.1"),
        ("reduce_scatter", "layers.1"),
        ("all_gather", "layers.0"),  # only when L0's backward needs it
        ("reduce_scatter", "layers.0"),
        ("reduce_scatter", "root"),
    ]
    pre, post = spans(PRE), spans(POST)
    l1_bwd_start = {
        c: min(s["start"] for s in ss if s["unit"] == "layers.1" and s["kind"] == "backward")
        for c, ss in (("pre", pre), ("post", post))
    }
    l0_gather = {
        c: [s for s in ss if s["kind"] == "all_gather" and s["unit"] == "layers.0"][-1]["start"]
        for c, ss in (("pre", pre), ("post", post))
    }
    assert l0_gather["pre"] < l1_bwd_start["pre"]  # PRE: before the current unit's backward
    assert l0_gather["post"] > l1_bwd_start["post"]  # POST: after it


@pytest.mark.slow
def test_prefetch_holds_one_more_unit():
    """The memory price of BACKWARD_PRE, measured: root + 2 blocks held at once, against root + 1."""
    for r in (0, 1):
        assert timeline.peak_held(spans(PRE, r)) == 3
        assert timeline.peak_held(spans(POST, r)) == 2
        assert timeline.peak_held(spans(NONE, r)) == 2
        assert timeline.peak_held(spans("ddp", r)) == 3  # unsharded: everything, all the time


@pytest.mark.slow
def test_synchronized_recorder_records_the_same():
    """synchronize=True (the GPU mode) takes its times after waiting for the device; same spans."""

    def shape(config):
        seq = [(s["kind"], s["unit"]) for s in spans(config) if s["stream"] != "memory"]
        return [x for i, x in enumerate(seq) if i == 0 or seq[i - 1] != x]  # a span cut in two is one

    assert shape("fsdp2:reshard:sync") == shape("fsdp2:reshard")
    assert all(s["end"] >= s["start"] for s in spans("fsdp2:reshard:sync"))


@pytest.mark.slow
def test_comm_spans_carry_bytes():
    for s in spans("fsdp2:reshard"):
        if s["stream"] == "comm":
            assert s["bytes"] > 0 and s["group_size"] == 2 and s["unit"] in ("root", "layers.0", "layers.1")


@pytest.mark.slow
def test_describe():
    msg = timeline.spans_by_rank(run(POST))[0]
    assert msg["flavor"] == "fsdp1" and msg["strategy"] == "FULL_SHARD" and msg["backward_prefetch"] == "BACKWARD_POST"
    assert msg["units"] == ["root", "layers.0", "layers.1"] and msg["device"] == "cpu"
    assert msg["unit_bytes"]["layers.0"] == msg["padded_units"]["layers.0"] * 4
    assert timeline.spans_by_rank(run("fsdp2:keep"))[0]["strategy"] == "SHARD_GRAD_OP"


# -- in the notebook ---------------------------------------------------------------------


@pytest.mark.slow
def test_plots_from_a_run():
    fig = timeline.plot_timeline(run(PRE))
    labels = [tick.get_text() for tick in fig.axes[0].get_yticklabels()]
    assert labels[:3] == ["rank 0 compute", "rank 0 comm", "rank 0 units held"] and len(labels) == 6
    assert "measured" in fig.axes[0].get_title()
    side = timeline.plot_timelines({"PRE": run(PRE), "POST": run(POST), "None": run(NONE)})
    assert [ax.get_title() for ax in side.axes] == ["PRE", "POST", "None"]


@pytest.mark.slow
def test_chrome_trace(tmp_path):
    from labkit.timing import trace as chrome

    path = tmp_path / "trace.json"
    timeline.to_chrome_trace(run(PRE), str(path))
    trace = json.loads(path.read_text())
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in xs} == {0, 1}
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in xs)
    names = {e["name"] for e in xs}
    assert {"all_gather layers.0", "backward layers.1", "reduce_scatter root"} <= names
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert {"compute", "comm"} <= {e["args"]["name"] for e in meta}
    held = [e for e in trace["traceEvents"] if e.get("cat") == "held"]
    counter = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "units held"]
    assert held and {e["ph"] for e in held} == {"b", "e"} and max(e["args"]["units"] for e in counter) >= 2
    assert chrome.misnested(trace) == []  # nothing Perfetto would drop


@pytest.mark.slow
def test_plain_spans_and_errors():
    fake = {
        0: [
            timeline.span("a", "forward", 0.0, 0.002, "compute"),
            timeline.span("a", "all_gather", 0.001, 0.003, "comm", bytes=10),
            timeline.span("a", "held", 0.001, 0.004, "memory"),
        ]
    }
    assert timeline.summary(fake)[0]["exposed_comm_s"] == pytest.approx(0.001)
    assert timeline.plot_timeline(fake) is not None
    with pytest.raises(ValueError, match="no timeline"):
        timeline.spans_by_rank({0: [{"t": "step", "i": 0}]})
    with pytest.raises(KeyError, match="not recorded"):
        timeline.spans_by_rank(run(PRE), step=99)


def test_cut():
    s = [timeline.span("a", "backward", 0.0, 10.0, "compute")]
    out = timeline.cut(s, [(2.0, 3.0), (5.0, 6.0), (9.0, 12.0)])
    assert [(x["start"], x["end"]) for x in out] == [(0.0, 2.0), (3.0, 5.0), (6.0, 9.0)]


def test_a_collective_stamped_after_the_optimizer_began_ended_when_it_began():
    """DDP's bucket all-reduce, stamped late by its Python callback, ends where the optimizer
    (which waited for it) begins; one issued after the optimizer began, or a step without an
    optimizer, keeps its stamp."""
    from labkit.ranks.timeline import _waited_for_by_optimizer
    from labkit.timing.spans import span

    optimizer = [span("optimizer", "optimizer", 10.0, 12.0, "compute")]
    late = span("", "all_reduce", 4.0, 13.0, "comm")
    on_time = span("", "all_reduce", 2.0, 3.0, "comm")
    after = span("", "all_gather", 11.0, 14.0, "comm")
    out = _waited_for_by_optimizer([late, on_time, after], optimizer)
    assert [(s["start"], s["end"]) for s in out] == [(4.0, 10.0), (2.0, 3.0), (11.0, 14.0)]
    alone = _waited_for_by_optimizer([span("", "all_reduce", 4.0, 13.0, "comm")], [])
    assert alone[0]["end"] == 13.0
