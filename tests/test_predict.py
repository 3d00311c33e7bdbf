"""The predictor (labkit.timing.predict, labkit.timing.gloo): the cost model by hand, and one
calibration predicting runs it has not seen on emulated nodes (a small matrix, a loose bound:
benchmarks/link_prediction.py holds the targets)."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import pytest

from labkit.timing import gloo, gloolink, predict, ranges, sharing, simulate
from labkit.timing.gloo import GlooCosts, Topology
from labkit.wire.protocol import TYPE, Msg

MS = 1e-3
COSTS = GlooCosts(alpha=0.0, beta={"all_gather": 1e-9, "reduce_scatter": 1e-9, "all_reduce": 1e-9}, ranks=2)


def test_ring_crosses_each_node_boundary_once_each_way():
    four = Topology(nodes=2, per_node=2, rate=1e6)
    assert gloo.crossings(range(4), four) == {0: 1, 1: 1}  # 1 -> 2 and 3 -> 0
    assert gloo.crossings(range(2), Topology(nodes=1, per_node=2)) == {}
    assert four.group("shard") == ((0, 1), 2) and four.group("replicate") == ((0, 2), 2)


def test_link_bound_all_gather_by_hand():
    """2 nodes x 1 rank, 1 MB gathered over 1 MB/s each direction (efficiency 1): one step of 0.5 MB,
    sent as two halves of 0.25 s, the first of which waits one half for the peer's notification
    behind the peer's data (gloo's protocol): 0.75 s, plus the link's latency once; loopback's CPU
    cost (1 ns/B) is hidden under it."""
    costs = GlooCosts(0.0, dict(COSTS.beta), 2, efficiency=1.0)
    topo = Topology(nodes=2, per_node=1, rate=1e6, latency=1 * MS)
    assert gloo.head_of_line("all_gather", 2) == 1.5 and gloo.head_of_line("all_reduce", 2) == 1.0
    assert gloo.collective_time(costs, topo, "all_gather", 1e6) == pytest.approx(0.75 + 1 * MS)
    # per direction: the all-reduce's 2 steps each move 0.5 MB one way, 0.5 MB the other, at full rate;
    # gloo's reduce-scatter is an all-reduce of the whole tensor
    assert gloo.collective_time(costs, topo, "all_reduce", 1e6) == pytest.approx(2 * (0.5 + 1 * MS))
    assert gloo.collective_time(costs, topo, "reduce_scatter", 1e6) == pytest.approx(2 * (0.5 + 1 * MS))
    # 4 ranks on 2 nodes: 3 steps of 0.25 MB, each through one uplink per direction, 6 halves and
    # one more for the first notification, queued behind another rank's first half
    four = Topology(nodes=2, per_node=2, rate=1e6)
    assert gloo.collective_time(costs, four, "all_gather", 1e6) == pytest.approx(3 * 0.25 * 7 / 6)
    # and an all-reduce's 6 steps of 0.25 MB, 12 halves, pay that one half more too
    assert gloo.head_of_line("all_reduce", 4) == gloo.head_of_line("reduce_scatter", 4) == 13 / 12
    assert gloo.collective_time(costs, four, "all_reduce", 1e6) == pytest.approx(6 * 0.25 * 13 / 12)


def test_an_emulated_links_bucket_passes_at_once_after_idle():
    """tbf lets an idle uplink send its bucket (``Topology.burst``) at once; the bucket refills at
    the link's rate while idle. 2 nodes x 1 rank, 1 MB/s, a 0.1 MB bucket: the all-gather saves
    0.1 MB once (its path crosses two idle uplinks, and measured it gets one bucket's worth), the
    all-reduce nothing (measured, ``gloo.burst_saved``); a real link (no bucket) nothing."""
    costs = GlooCosts(0.0, dict(COSTS.beta), 2, efficiency=1.0)
    real = Topology(nodes=2, per_node=1, rate=1e6)
    tbf = Topology(nodes=2, per_node=1, rate=1e6, burst=0.1e6)
    assert gloo.collective_time(costs, real, "all_gather", 1e6) == pytest.approx(0.75)
    assert gloo.collective_time(costs, tbf, "all_gather", 1e6) == pytest.approx(0.75 - 0.1)
    assert gloo.collective_time(costs, tbf, "all_reduce", 1e6) == pytest.approx(1.0)
    assert gloo.collective_time(costs, tbf, "reduce_scatter", 1e6) == gloo.collective_time(
        costs, real, "reduce_scatter", 1e6
    )
    # idle 50 ms: half the bucket back; right after another collective: none of it
    assert gloo.collective_time(costs, tbf, "all_gather", 1e6, idle=0.05) == pytest.approx(0.75 - 0.05)
    assert gloo.collective_time(costs, tbf, "all_gather", 1e6, idle=0.0) == pytest.approx(0.75)
    # a bucket larger than the bytes: they pass at once; the head of line's extra half still takes its time
    big = Topology(nodes=2, per_node=1, rate=1e6, burst=10e6)
    assert gloo.collective_time(costs, big, "all_gather", 1e6) == pytest.approx(0.25)


def test_each_ring_steps_fixed_cost_refills_the_bucket():
    """A ring step's fixed cost (no byte on the link) refills an emulated link's bucket, up to its
    size, and the step's first bytes then go at once: 2 nodes x 1, 1 MB/s, an all-reduce of 1 MB
    in two steps of 0.5 MB. With 0.05 s fixed a step and a 0.1 MB bucket the fixed cost hides under
    the bytes' time (1.0 s, not 1.1); with 0.2 s only the bucket's 0.1 MB of it does (1.2 s, not
    1.4); a real link (no bucket) pays fixed plus bytes."""
    real = Topology(nodes=2, per_node=1, rate=1e6)
    tbf = Topology(nodes=2, per_node=1, rate=1e6, burst=0.1e6)
    for alpha, on_real, on_tbf in ((0.05, 1.1, 1.0), (0.2, 1.4, 1.2)):
        costs = GlooCosts(alpha, dict(COSTS.beta), 2, efficiency=1.0)
        assert gloo.collective_time(costs, real, "all_reduce", 1e6) == pytest.approx(on_real)
        assert gloo.collective_time(costs, tbf, "all_reduce", 1e6) == pytest.approx(on_tbf)
    # an all-gather right after another collective: its one step refills as much; after an idle
    # link, the whole bucket once (not the refill on top of it: the bucket holds 0.1 MB)
    costs = GlooCosts(0.05, dict(COSTS.beta), 2, efficiency=1.0)
    assert gloo.collective_time(costs, tbf, "all_gather", 1e6, idle=0.0) == pytest.approx(0.05 + 0.75 - 0.05)
    assert gloo.collective_time(costs, tbf, "all_gather", 1e6) == pytest.approx(0.05 + 0.75 - 0.1)


def test_the_simulator_refills_the_bucket_only_while_the_link_is_idle():
    """FSDP1's forward gathers each unit after the previous unit's compute (the link idle 1 ms,
    the bucket back in full); the step on a link with a bucket is shorter by what it refilled."""
    prof = hand_profile("fsdp1")
    costs = GlooCosts(0.0, dict(COSTS.beta), 2, efficiency=1.0)
    cal = predict.Calibration({"fsdp1": prof}, costs, ranks=2)
    real = Topology(nodes=2, per_node=1, rate=1e6, cores=2)
    tbf = Topology(nodes=2, per_node=1, rate=1e6, burst=500.0, cores=2)  # refilled in 0.5 ms
    plain = predict.predict(cal, "fsdp1:FULL_SHARD:NONE", real)
    bucket = predict.predict(cal, "fsdp1:FULL_SHARD:NONE", tbf)
    gathers = [s for s in bucket.spans if s["kind"] == "all_gather"]
    assert len(gathers) == 3  # a, b, and a again in backward (b is kept from its forward)
    # each all-gather saves at most the bucket, a reduce-scatter nothing
    assert 0 < plain.step_time - bucket.step_time <= 3 * 500 / 1e6 + 1e-12


def test_a_slow_link_hides_the_wait_for_the_slowest_rank():
    """The calibration's wait per blocking collective (``skew``) is CPU time: it counts where the
    collective is CPU-bound (one node), and a link slower than the CPU work hides it."""
    costs = GlooCosts(0.0, dict(COSTS.beta), 2, efficiency=1.0, skew=2 * MS)
    one = Topology(nodes=1, per_node=2)
    slow = Topology(nodes=2, per_node=1, rate=1e6)
    fast = Topology(nodes=2, per_node=1, rate=1e9)
    assert gloo.link_slack(costs, one, "all_gather", 1e6) == 0.0
    assert gloolink.GlooLink(costs, one, "world", 1.0, costs.skew).time("all_gather", 1e6, 2) == pytest.approx(
        0.5 * MS + 2 * MS
    )
    assert gloolink.GlooLink(costs, slow, "world", 1.0, costs.skew).time("all_gather", 1e6, 2) == pytest.approx(0.75)
    # 1 GB/s: the link's 0.75 ms hides 0.25 ms of the 2 ms wait
    slack = gloo.link_slack(costs, fast, "all_gather", 1e6)
    assert slack == pytest.approx(0.25 * MS)
    assert gloolink.GlooLink(costs, fast, "world", 1.0, costs.skew).time("all_gather", 1e6, 2) == pytest.approx(
        0.75 * MS + 1.75 * MS
    )


def test_hsdp_replica_groups_share_the_uplink():
    """HSDP 2x2: the two replica groups all-reduce at once, two flows through each node's uplink."""
    costs = GlooCosts(0.0, dict(COSTS.beta), 2, efficiency=1.0)
    topo = Topology(nodes=2, per_node=2, rate=1e6)
    assert gloo.collective_time(costs, topo, "all_reduce", 1e6, channel="replicate") == pytest.approx(2 * 0.5 * 2)
    assert gloo.collective_time(costs, topo, "reduce_scatter", 1e6, channel="shard") == pytest.approx(2 * 0.5e6 * 1e-9)


def test_hsdp_on_one_node_still_all_reduces_each_unit_among_one_rank():
    """HSDP on one node: its replica groups have one rank, and torch's FSDP1 still all-reduces each
    unit's shard among it; gloo hands each to its thread: one ring step's fixed cost, no bytes, no
    wait for another rank. The step is FULL_SHARD's plus that, once per unit."""
    costs = GlooCosts(alpha=0.2 * MS, beta=dict(COSTS.beta), ranks=2, skew=1 * MS, waits=(0.0, 2 * MS))
    one = Topology(nodes=1, per_node=4, cores=8)
    assert gloo.collective_time(costs, one, "all_reduce", 1e6, channel="replicate") == pytest.approx(0.2 * MS)
    link = gloolink.GlooLink(costs, one, "replicate", 1.5, costs.skew)
    assert link.time_samples("all_reduce", 1e6, 1) == pytest.approx([0.3 * MS, 0.3 * MS])
    prof = replace(hand_profile("fsdp1"), world_size=2)
    cal = predict.Calibration({"fsdp1": prof}, costs, ranks=2)
    hsdp = predict.predict(cal, "fsdp1:HYBRID_SHARD", one)
    full = predict.predict(cal, "fsdp1:FULL_SHARD", one)
    lone = [s for s in hsdp.spans if s["kind"] == "all_reduce"]
    assert [s["unit"] for s in lone] == ["b", "a"]
    assert [s["end"] - s["start"] for s in lone] == pytest.approx([0.2 * MS, 0.2 * MS])
    assert hsdp.step_time == pytest.approx(full.step_time + 0.4 * MS)
    assert not [s for s in full.spans if s["kind"] == "all_reduce"]
    # a device link prices a group of one at nothing: the simulator draws no span for it
    plain = simulate.simulate(replace(prof, world_size=4), "ib100", strategy="HYBRID_SHARD", shard_size=4)
    assert not [s for s in plain.spans if s["kind"] == "all_reduce"]


def test_loopback_is_cpu_bound_and_contention_scales_it():
    topo = Topology(nodes=1, per_node=2, cores=2)
    base = gloo.collective_time(COSTS, topo, "all_gather", 1e6)
    assert base == pytest.approx(0.5e6 * 1e-9)
    assert gloo.contention(4, 2, 2) == 2.0 and gloo.contention(2, 8, 2) == 1.0
    assert gloo.collective_time(COSTS, topo, "all_gather", 1e6, speed=2.0) == pytest.approx(2 * base)


def test_alpha_is_the_fastest_small_bare_collective_per_ring_step():
    """One bare 4 KB collective is as often 1 ms as 0.4 ms on a busy core: alpha is the fastest per
    ring step of every bare collective whose bytes cost little (up to 256 KB), not the 4 KB one."""
    bare = {
        "all_gather": {"4096": 1.1 * MS, "65536": 2.7 * MS, "262144": 0.66 * MS, "4194304": 7.7 * MS},
        "all_reduce": {"4096": 3.6 * MS, "65536": 0.66 * MS, "262144": 3.5 * MS, "4194304": 11.2 * MS},
    }
    rows = [("all_gather", 2, 1e6, 1.0 * MS, 5 * MS)]
    costs = predict.fit_spans(rows, 2, bare)
    assert costs.alpha == pytest.approx(0.33 * MS)  # the 64 KB all-reduce, in 2 ring steps
    assert costs.beta["all_gather"] == pytest.approx((1.0 - 0.33) * MS / 0.5e6)


def test_configs_parsed_and_refused():
    assert predict.Config.parse("fsdp1:FULL_SHARD:NONE").prefetch is None
    assert predict.Config.parse("fsdp2:explicit").key == "fsdp2" and predict.Config.parse("fsdp2:explicit").explicit
    assert predict.Config.parse("fsdp1:HYBRID_SHARD:bf16").bf16
    with pytest.raises(ValueError, match="unknown configuration"):
        predict.Config.parse("fsdp3:FULL_SHARD")


def hand_profile(flavor: str = "fsdp2", grad: float = 1e6) -> simulate.Profile:
    """Two units, 1 ms forward and 2 ms backward each, 1 MB of parameters, ``grad`` bytes of gradients."""
    return simulate.Profile(
        forward=[("a", 1 * MS), ("b", 1 * MS)],
        backward=[("b", 2 * MS), ("a", 2 * MS)],
        param_bytes={"a": 1e6, "b": 1e6},
        grad_bytes={"a": grad, "b": grad},
        world_size=2,
        flavor=flavor,
    )


def hand_calibration() -> predict.Calibration:
    return predict.Calibration({"fsdp2": hand_profile()}, COSTS, ranks=2, probe=0.01)


def test_explicit_async_prefetch_hides_the_gathers_under_compute():
    """On a slow link the blocking FSDP2 step is compute plus every collective; with asynchronous
    explicit prefetch the next unit's gather runs under the current unit's compute."""
    cal = hand_calibration()
    topo = Topology(nodes=2, per_node=1, rate=0.5e9, cores=2)  # 0.5 GB/s each direction
    blocking = predict.predict(cal, "fsdp2:implicit", topo)
    overlapped = predict.predict(cal, "fsdp2:explicit", topo)
    assert overlapped.step_time < blocking.step_time and overlapped.hidden_comm > 0 and blocking.hidden_comm == 0
    again = predict.Calibration.from_json(cal.to_json())
    assert predict.predict(again, "fsdp2:explicit", topo).step_time == pytest.approx(overlapped.step_time)


def test_async_gathers_take_cpu_from_compute_when_every_core_is_busy():
    """gloo's thread copies the gathered bytes on the ranks' cores: with a core per rank and none
    spare, that CPU work delays the compute it overlaps; with idle cores, it does not."""
    cal = hand_calibration()
    busy = Topology(nodes=2, per_node=1, rate=5e9, cores=2)  # a fast link: the step is compute
    spare = Topology(nodes=2, per_node=1, rate=5e9, cores=8)  # the same contention (none), idle cores
    link = gloolink.GlooLink(cal.gloo, busy, "world", 1.0)
    # beta per chunk byte (alpha is 0 here), twice: one rank on each core (``gather_charges``)
    assert link.cpu_time("all_gather", 1e6, 2) == pytest.approx(2 * 0.5e6 * 1e-9)
    assert gloolink.GlooLink(cal.gloo, spare, "world", 1.0).cpu_time("all_gather", 1e6, 2) == pytest.approx(
        2 * 0.25 * 0.5e6 * 1e-9
    )
    assert (
        predict.predict(cal, "fsdp2:explicit", busy).step_time > predict.predict(cal, "fsdp2:explicit", spare).step_time
    )
    assert (
        predict.predict(cal, "fsdp2:implicit", busy).step_time
        == predict.predict(cal, "fsdp2:implicit", spare).step_time
    )


def test_an_async_gathers_cpu_work_costs_twice_where_each_core_has_one_rank():
    """One rank on a core: gloo's thread slows the compute under it and the gather ends late, twice
    its work; two ranks bound to a core: once (the thread runs while the other rank sleeps in a
    blocking collective); DDP's bucket all-reduce: once (its calibration's compute had it)."""
    one = Topology(nodes=1, per_node=2, cores=2, pinned=True)
    two = Topology(nodes=1, per_node=4, cores=2, pinned=True)
    assert gloolink.gather_charges("all_gather", one) == 2
    assert gloolink.gather_charges("all_gather", two) == 1
    assert gloolink.gather_charges("all_reduce", one) == 1
    costs = GlooCosts(alpha=0.1 * MS, beta=dict(COSTS.beta), ranks=2, efficiency=1.0)
    once = 0.1 * MS + 0.5e6 * COSTS.beta["all_gather"]  # one ring step: alpha and half the bytes
    assert gloolink.GlooLink(costs, one, "world", 1.0).cpu_time("all_gather", 1e6, 2) == pytest.approx(2 * once)


def test_an_async_gather_waits_for_the_slowest_rank_only_past_the_compute_it_runs_under():
    """Issued early, a gather's data still comes when the late rank sends it: the wait is in the
    gather's time, not in the CPU work it takes from the rank, so the next unit waits for it only
    where the compute the gather was issued under is shorter than the wait."""
    costs = GlooCosts(alpha=0.1 * MS, beta=dict(COSTS.beta), ranks=2, efficiency=1.0, skew=1 * MS)
    one = Topology(nodes=1, per_node=2, cores=2)
    link = gloolink.GlooLink(costs, one, "world", 1.0, costs.skew)
    assert link.cpu_time("all_gather", 1e6, 2) == pytest.approx(2 * (0.1 * MS + 0.5 * MS))  # one rank a core: twice
    assert link.time("all_gather", 1e6, 2) == pytest.approx(0.1 * MS + 0.5 * MS + 1 * MS)
    # under compute (2 ranks on 2 cores) its CPU work gets half a core: twice as long; the wait is the same
    assert link.time("all_gather", 1e6, 2, background=True) == pytest.approx(2 * (0.1 + 0.5) * MS + 1 * MS)

    def step(skew: float, spec: str = "fsdp2:explicit") -> float:
        c = GlooCosts(alpha=0.1 * MS, beta=dict(COSTS.beta), ranks=2, efficiency=1.0, skew=skew)
        cal = predict.Calibration({"fsdp2": hand_profile()}, c, ranks=2)
        return predict.predict(cal, spec, one).step_time

    # blocking (implicit): all five collectives wait (the root, "a", gathered once: link_job's root
    # keeps its parameters for backward); explicit: the two blocking reduce-scatters pay it in
    # full, the three gathers only where the compute they run under is shorter
    assert step(0.5 * MS, "fsdp2:implicit") - step(0.0, "fsdp2:implicit") == pytest.approx(5 * 0.5 * MS)
    assert 2 * 0.5 * MS - 1e-12 <= step(0.5 * MS) - step(0.0) < 5 * 0.5 * MS
    # a 20 ms wait outlasts every 1-2 ms unit: the gathers' waits show in the step too
    assert step(20 * MS) - step(0.0) > 2 * 20 * MS + 2 * 20 * MS


def test_more_ranks_than_cores_slow_each_other_relative_to_the_calibrations_own_share():
    """4 ranks on 2 cores: each rank's CPU work takes twice the core time it would alone, but the
    calibration's 2 ranks already waited for a core part of the time (gloo's and labkit's threads
    beside them, or other work on the machine), and that work stays beside the 4: the slowdown is
    (2 + share - 1) over that share."""
    cal = hand_calibration()
    compute = cal.profiles["fsdp2"].compute_time
    four, two = Topology(nodes=1, per_node=4, cores=2), Topology(nodes=1, per_node=2, cores=2)
    assert predict.shared_cpu(cal, four) == 2.0 and predict.shared_cpu(cal, two) == 1.0
    assert predict.predict(cal, "fsdp2:implicit", four).compute_time == pytest.approx(2 * compute)
    cal.share = 1.25  # the calibration's ranks waited a quarter of their running time for a core
    assert predict.shared_cpu(cal, four) == pytest.approx(2.25 / 1.25)
    assert predict.predict(cal, "fsdp2:implicit", four).compute_time == pytest.approx(2.25 / 1.25 * compute)
    cal.share = 2.5  # a loaded machine: more ranks still slow each other, less than on an idle one
    assert predict.shared_cpu(cal, four) == pytest.approx(3.5 / 2.5)
    assert predict.predict(cal, "fsdp2:implicit", two).compute_time == pytest.approx(compute)


def test_ddp_buckets_reduce_in_the_background_but_on_the_same_cores():
    """DDP's bucket all-reduces do not block the rank, yet their copies take CPU from the backward
    they overlap when every core is busy: the step grows with the bytes, not by the collectives."""
    costs = GlooCosts(alpha=0.0, beta={"all_reduce": 1e-9, "reduce_scatter": 1e-9}, ranks=2)
    cal = predict.Calibration({"ddp": hand_profile("ddp", grad=4e6)}, costs, ranks=2)
    busy, spare = Topology(nodes=1, per_node=2, cores=2), Topology(nodes=1, per_node=2, cores=8)
    loaded = predict.predict(cal, "ddp", busy)
    idle = predict.predict(cal, "ddp", spare)
    assert loaded.step_time > idle.step_time
    link = gloolink.GlooLink(costs, busy, "world", 1.0)
    assert link.cpu_time("all_reduce", 4e6, 2) == pytest.approx(2 * 2e6 * 1e-9)  # 2 steps of a 2 MB chunk


def test_bf16_gathers_half_the_bytes():
    cal = hand_calibration()
    topo = Topology(nodes=2, per_node=1, rate=1e6, cores=2)
    full = predict.predict(cal, "fsdp2:implicit", topo)
    half = predict.predict(cal, "fsdp2:implicit:bf16", topo)
    assert half.step_time < full.step_time and not math.isclose(half.comm_time, full.comm_time)


# -- one calibration, a run it has not seen, on emulated nodes ------------------------------------


def job(configs, steps: int = 4) -> str:
    """The small model at micro-batch 2: less compute than the benchmark's, the same bytes."""
    return f"from labkit.testing.link_job import main\nmain('small', {steps}, 2, {list(configs)!r})\n"


@pytest.mark.slow
@pytest.mark.usefixtures("no_orphans")
def test_one_calibration_predicts_a_slow_link_it_has_not_seen():
    """Calibrated on one node with no link, the FULL_SHARD and SHARD_GRAD_OP steps of 2 nodes over
    50 Mbit/s come out within 35% (a loose bound: the benchmark has the targets), in the right order."""
    import labkit
    from labkit.launch import netem
    from labkit.timing.calibrate import spans_messages

    if netem.probe().error is not None:
        pytest.skip(f"no network namespaces here: {netem.probe().error}")
    quiet = {"backend": "gloo", "display": "none", "quiet": True}
    cal = predict.calibrate(labkit.torchrun(job(predict.CALIBRATION_CONFIGS), nproc=2, **quiet))
    specs = ("fsdp1:FULL_SHARD:BACKWARD_PRE", "fsdp1:SHARD_GRAD_OP")
    run = labkit.torchrun(job(specs, steps=3), nproc=1, nodes=2, link="50mbit", **quiet)
    link = netem.parse_link("50mbit")
    topo = Topology(nodes=2, per_node=1, rate=link.bytes_per_s, latency=run.emulation.latency_s, burst=link.burst())
    measured, predicted = {}, {}
    for spec in specs:
        msgs = spans_messages(run, 0, spec)
        measured[spec] = predict.measured_step(msgs)
        share = predict.cpu_share(msgs)
        speed = share / cal.share if share and cal.share else None
        predicted[spec] = predict.predict(cal, spec, topo, speed=speed).step_time
        assert abs(predicted[spec] / measured[spec] - 1) < 0.35, (spec, predicted, measured)
    assert (
        measured["fsdp1:SHARD_GRAD_OP"] < measured[specs[0]] and predicted["fsdp1:SHARD_GRAD_OP"] < predicted[specs[0]]
    )


def test_the_calibration_keeps_the_waits_distribution_not_only_its_mean():
    """fit_spans keeps the wait for the slowest rank as equally likely values whose mean is the skew."""
    rows = [("all_gather", 2, 1e6, 0.6 * MS + w * MS, 1.0 * MS) for w in (0, 0, 0, 0, 1, 1, 2, 3, 5, 8) * 30]
    costs = predict.fit_spans(rows, 2)
    assert 0 < len(costs.waits) <= predict.WAIT_QUANTILES
    assert list(costs.waits) == sorted(costs.waits) and costs.waits[0] >= 0.0
    assert sum(costs.waits) / len(costs.waits) == pytest.approx(costs.skew)
    assert costs.waits[-1] > 2 * costs.skew  # the tail is kept


def test_a_link_hides_each_wait_not_their_mean():
    """A link that takes 0.25 ms longer than the CPU work hides up to 0.25 ms of each wait: waits of
    0, 0, 2 and 6 ms (mean 2) show 0, 0, 1.75 and 5.75, more than the 2 - 0.25 of the mean alone."""
    costs = GlooCosts(0.0, dict(COSTS.beta), 2, efficiency=1.0, skew=2 * MS, waits=(0.0, 0.0, 2 * MS, 6 * MS))
    fast = Topology(nodes=2, per_node=1, rate=1e9)
    assert gloo.link_slack(costs, fast, "all_gather", 1e6) == pytest.approx(0.25 * MS)
    link = gloolink.GlooLink(costs, fast, "world", 1.0, costs.skew)
    samples = link.time_samples("all_gather", 1e6, 2)
    assert samples == pytest.approx([0.75 * MS, 0.75 * MS, 2.5 * MS, 6.5 * MS])
    assert link.time("all_gather", 1e6, 2) == pytest.approx(0.75 * MS + (1.75 + 5.75) / 4 * MS)
    # on one node nothing hides it: the mean is the skew, as before
    one = gloolink.GlooLink(costs, Topology(nodes=1, per_node=2), "world", 1.0, costs.skew)
    assert one.time("all_gather", 1e6, 2) == pytest.approx(0.5 * MS + 2 * MS)


def test_an_async_unshard_copies_out_once_done_and_only_then_prefetches_the_next():
    """FSDP2's ``wait_for_unshard`` on CPU blocks the rank until the unit's gather is done, then
    copies the gathered bytes into the parameters (the gather's host work), and only then issues
    the next unit's prefetch: the gathers do not queue back to back, and the copy-out runs under
    no gather. A blocking gather's host work is charged before it, as the calibration measured."""
    prof = replace(hand_profile(), hook={"all_gather": 0.4 * MS})
    fast = simulate.link(1e9, 0.0)
    res = simulate.simulate(prof, fast, cpu_bound=True, sync_comm=True, async_gather=True, forward_prefetch=True)
    gathers = sorted((s for s in res.spans if s["kind"] == "all_gather"), key=lambda s: s["start"])
    hosts = sorted((s for s in res.spans if s["stream"] == "host"), key=lambda s: s["start"])
    a, b = gathers[0], gathers[1]
    assert (a["unit"], b["unit"]) == ("a", "b")
    assert b["start"] == pytest.approx(a["end"] + 0.4 * MS)  # a's copy-out, then b's prefetch
    assert hosts[0]["start"] == pytest.approx(a["end"]) and hosts[0]["unit"] == "a"
    forward_a = next(s for s in res.spans if s["kind"] == "forward" and s["unit"] == "a")
    assert forward_a["start"] >= b["start"]  # a computes while b is gathered
    blocking = simulate.simulate(prof, fast, cpu_bound=True, sync_comm=True)
    first = min((s for s in blocking.spans if s["kind"] == "all_gather"), key=lambda s: s["start"])
    assert first["start"] == pytest.approx(0.4 * MS)  # its host work first


def test_an_async_gather_is_slowed_only_while_the_rank_computes_beside_it():
    """gloo's thread shares the core with the rank's work only while there is some: 2 ms alone,
    4 ms beside compute. Nothing beside: 2 ms; compute all along: 4; compute for its first 2 ms
    (half its work done at half speed): 2 + 1 = 3 ms."""
    assert simulate._stretched(2 * MS, 4 * MS, 0.0, []) == pytest.approx(2 * MS)
    assert simulate._stretched(2 * MS, 4 * MS, 0.0, [(0.0, 10 * MS)]) == pytest.approx(4 * MS)
    assert simulate._stretched(2 * MS, 4 * MS, 0.0, [(0.0, 2 * MS)]) == pytest.approx(3 * MS)
    assert simulate._stretched(2 * MS, 4 * MS, 1 * MS, [(0.0, 2 * MS), (2.5 * MS, 3 * MS)]) == pytest.approx(
        # from 1 ms: 1 ms beside (a quarter done), 0.5 alone (a half), 0.5 beside (five eighths),
        # then 0.75 ms alone: it ends at 3.75 ms
        3.75 * MS - 1 * MS
    )
    # in a step: the root-less first gather (nothing computed beside it) at its own speed, a
    # prefetched one under its unit's compute slowed (one rank on each of two cores: half speed)
    cal = hand_calibration()
    topo = Topology(nodes=1, per_node=2, cores=2)
    res = predict.predict(cal, "fsdp2:explicit", topo)
    link = gloolink.GlooLink(cal.gloo, topo, "world", 1.0)
    gathers = sorted((s for s in res.spans if s["kind"] == "all_gather"), key=lambda s: s["start"])
    assert gathers[0]["end"] - gathers[0]["start"] == pytest.approx(link.time("all_gather", 1e6, 2))
    assert gathers[1]["end"] - gathers[1]["start"] > gathers[0]["end"] - gathers[0]["start"]


def test_an_async_gather_that_sometimes_outlasts_its_compute_costs_its_expected_wait():
    """The same mean wait, spread (mostly none, sometimes long) or not: a blocking step pays the mean
    either way; an asynchronous gather's rank waits only for the long ones past the compute it runs
    under, which the mean alone (under the compute) never shows."""
    one = Topology(nodes=1, per_node=2, cores=2)
    prof = hand_profile()
    prof.forward = [("a", 4 * MS), ("b", 4 * MS)]  # a gather (1.2 ms of CPU under compute) + 2 ms fits
    prof.backward = [("b", 8 * MS), ("a", 8 * MS)]

    def step(waits: tuple[float, ...], spec: str) -> float:
        c = GlooCosts(alpha=0.1 * MS, beta=dict(COSTS.beta), ranks=2, efficiency=1.0, skew=2 * MS, waits=waits)
        cal = predict.Calibration({"fsdp2": prof}, c, ranks=2)
        return predict.predict(cal, spec, one).step_time

    even, spread = (2 * MS,) * 4, (0.0, 0.0, 0.0, 8 * MS)
    assert step(spread, "fsdp2:implicit") == pytest.approx(step(even, "fsdp2:implicit"))
    # forward: b's gather runs under a's 4 ms and the 1.2 ms of CPU it takes from them; one time
    # in four it takes 9.2 ms beside them (8.6 alone): 5.2/9.2 of it done when they end, the rest
    # at its own speed, 3.74 ms late
    late = 8.6 * (1 - 5.2 / 9.2) * MS
    assert step(spread, "fsdp2:explicit") - step(even, "fsdp2:explicit") == pytest.approx(late / 4)


def test_a_group_waits_for_the_last_of_its_ranks():
    """The expected largest of g normal draws: 0, 1/sqrt(pi), 1.03 for 1, 2, 4. The part of a wait
    calibrated on 2 ranks that their compute adds (``drift``) is 1.83 times as long for a group of
    4; the rest (leaving the last collective at different times) is not (``group_wait``)."""
    assert gloo.slowest(1) == 0.0
    assert gloo.slowest(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-4)
    assert gloo.slowest(4) == pytest.approx(1.0294, rel=1e-3)
    ratio = gloo.slowest(4) / gloo.slowest(2)
    costs = GlooCosts(0.0, dict(COSTS.beta), 2, efficiency=1.0, skew=2 * MS, drift=0.5 * MS)
    two = gloolink.GlooLink(costs, Topology(nodes=1, per_node=2), "world", 1.0, costs.skew)
    four = gloolink.GlooLink(costs, Topology(nodes=1, per_node=4), "world", 1.0, costs.skew)
    assert two.time("all_gather", 1e6, 2) - 0.5 * MS == pytest.approx(2 * MS)
    assert four.time("all_gather", 1e6, 4) - 3 * 0.25 * MS == pytest.approx(1.5 * MS + 0.5 * MS * ratio)
    assert gloolink.group_wait(replace(costs, drift=2 * MS), 4) == pytest.approx(ratio)  # all from compute
    assert gloolink.group_wait(replace(costs, drift=0.0), 4) == 1.0  # none from compute
    assert gloolink.group_wait(costs, 2) == 1.0


def test_drift_is_the_wait_that_compute_before_a_collective_adds():
    """Collectives right after another one wait for the other rank to leave it (1.5 ms here);
    after compute they wait more (2.2 ms): the 0.7 ms is the ranks' compute taking different times."""
    waits = [(1.5 * MS, 0.1 * MS)] * 10 + [(2.2 * MS, 5 * MS)] * 10
    assert predict.drift(waits) == pytest.approx(0.7 * MS)
    rows = [("all_gather", 2, 1e6, 0.6 * MS + w, c) for w, c in waits]  # the same bytes: alpha, beta cancel
    assert predict.fit_spans(rows, 2).drift == pytest.approx(0.7 * MS)
    assert predict.drift([(1 * MS, 5 * MS)]) == 0.0  # nothing right after another: no baseline


def test_ranks_asleep_in_a_wait_leave_their_cores_to_the_others():
    """4 ranks on 2 cores: with no drift every rank is busy and the CPU work runs at half speed; a
    rank that waits, asleep, for one still computing gives its core away, so blocking FSDP runs
    its compute faster than that, and DDP, whose buckets block nothing, does not."""
    four = Topology(nodes=1, per_node=4, cores=2)
    prof = hand_profile()
    ddp = hand_profile("ddp")

    def compute(spec: str, drift: float) -> float:
        c = GlooCosts(alpha=0.1 * MS, beta=dict(COSTS.beta), ranks=2, skew=1 * MS, drift=drift)
        cal = predict.Calibration({"fsdp2": prof, "ddp": ddp}, c, ranks=2)
        return predict.predict(cal, spec, four).compute_time

    assert compute("fsdp2:implicit", 0.0) == pytest.approx(2 * prof.compute_time)
    assert prof.compute_time < compute("fsdp2:implicit", 0.5 * MS) < 2 * prof.compute_time
    assert compute("ddp", 0.5 * MS) == pytest.approx(2 * ddp.compute_time)
    # asleep at most as long as the compute before the wait: a drift longer than every unit leaves
    # each rank only the compute after its last blocking collective, and itself
    assert compute("fsdp2:implicit", 1.0) == pytest.approx(prof.compute_time)


def test_ranks_bound_to_cores_share_a_core_only_with_their_own():
    """4 ranks bound to 2 cores, two on each: a rank asleep in a wait leaves its core to the one
    rank bound beside it, not to all three others, and with no drift the work still runs at half speed."""
    four, bound = Topology(nodes=1, per_node=4, cores=2), Topology(nodes=1, per_node=4, cores=2, pinned=True)
    assert bound.per_core() == 2 and Topology(nodes=1, per_node=3, cores=2, pinned=True).per_core() == 2
    c = GlooCosts(alpha=0.1 * MS, beta=dict(COSTS.beta), ranks=2, skew=1 * MS, drift=0.0)
    cal = predict.Calibration({"fsdp2": hand_profile()}, c, ranks=2)
    res = predict.predict(cal, "fsdp2:implicit", bound)
    assert predict.runnable(res, c, bound, 1.0) == pytest.approx(2.0) and predict.runnable(res, c, four, 1.0) == 4.0
    cal.gloo = GlooCosts(alpha=0.1 * MS, beta=dict(COSTS.beta), ranks=2, skew=1 * MS, drift=0.5 * MS)
    res = predict.predict(cal, "fsdp2:implicit", bound)
    asleep = 1 - (predict.runnable(res, cal.gloo, bound, 1.0) - 1)  # the share of the work the mate sleeps
    assert 0 < asleep < 1
    assert predict.runnable(res, cal.gloo, four, 1.0) == pytest.approx(1 + 3 * (1 - asleep))


def test_bound_the_last_rank_makes_up_its_lag_at_its_own_speed():
    """Bound to cores, the rank that reaches a blocking collective last has its core to itself (the
    rank bound beside it already waits in the same collective): its wait is the calibration's at
    the run's pace, not slowed by the sharing. Not where the core-mate is in another group (HSDP's
    shard group on 2 nodes x 2), nor for a collective that runs under compute."""
    costs = GlooCosts(0.0, dict(COSTS.beta), 2, efficiency=1.0, skew=2 * MS, drift=2 * MS)
    bound = Topology(nodes=1, per_node=4, cores=2, pinned=True)
    shared = gloolink.GlooLink(costs, bound, "world", 2.0, costs.skew)
    alone = gloolink.GlooLink(costs, bound, "world", 2.0, costs.skew, catch_up=1.0)
    wait = 2 * MS * gloo.slowest(4) / gloo.slowest(2)  # all of it from compute: the last of four
    work = 2.0 * 3 * 0.25 * MS  # 3 ring steps of a quarter of 1 MB, at half speed
    assert shared.time("all_gather", 1e6, 4) == pytest.approx(work + 2.0 * wait)
    assert alone.time("all_gather", 1e6, 4) == pytest.approx(work + 1.0 * wait)
    assert alone.time("all_gather", 1e6, 4, background=True) > alone.time("all_gather", 1e6, 4)
    hsdp = Topology(nodes=2, per_node=2, cores=2, pinned=True)
    assert sharing.mates_wait(hsdp, "replicate") and not sharing.mates_wait(hsdp, "shard")
    unbound = Topology(nodes=1, per_node=4, cores=2)
    assert sharing.mates_wait(bound, "world") and not sharing.mates_wait(unbound, "world")


def test_the_pace_of_a_run_is_the_probes_cpu_time_against_the_calibrations():
    """A core 20% slower during a run than during the calibration: the compute and host work of the
    prediction 20% longer, gloo's CPU work less, whatever number of ranks share the cores; the probe's
    wall time, which a rank waiting for a core stretches, does not enter it. Every rank's probe
    counts (one core can run slower than the other for a whole launch), one configuration's alone."""

    def msgs(cpu: float, wall: float, config: str = "ddp") -> list[dict]:
        step = {TYPE: Msg.SPANS, "config": config, "start": 0.0, "end": 0.1, "spans": [], "probe": wall}
        return [{**step, "probe_cpu": cpu} for _ in range(5)]

    cal = hand_calibration()
    cal.probe_cpu = 0.010
    assert predict.pace_of(cal, {0: msgs(0.012, 0.030)}) == pytest.approx(1.2)
    both = {0: msgs(0.012, 0.030) + msgs(0.5, 0.5, "fsdp2:implicit"), 1: msgs(0.014, 0.030)}
    assert predict.pace_of(cal, both, "ddp") == pytest.approx(1.3)
    no_cpu = [{TYPE: Msg.SPANS, "start": 0.0, "end": 0.1, "spans": [], "probe": 0.01}] * 3
    assert predict.pace_of(cal, {0: no_cpu}) is None
    assert predict.pace_of(hand_calibration(), {0: msgs(0.012, 0.030)}) is None  # a calibration without it
    assert predict.Calibration.from_json(cal.to_json()).probe_cpu == pytest.approx(0.010)
    cal.gloo = GlooCosts(alpha=0.1 * MS, beta=dict(COSTS.beta), ranks=2)  # no wait: every cost is CPU work
    two = Topology(nodes=1, per_node=2, cores=2)
    base = predict.predict(cal, "fsdp2:implicit", two)
    paced = predict.predict(cal, "fsdp2:implicit", two, pace=1.2)
    # the compute and host work 20% longer; gloo's copies by GLOO_PACE of that (the probe's arithmetic
    # moves them less: memory and kernel work); the step in between
    assert paced.compute_time == pytest.approx(1.2 * base.compute_time)
    assert paced.host_time == pytest.approx(1.2 * base.host_time)
    assert paced.comm_time == pytest.approx(1.2**predict.GLOO_PACE * base.comm_time)
    assert 1.2**predict.GLOO_PACE * base.step_time < paced.step_time < 1.2 * base.step_time
    four = Topology(nodes=1, per_node=4, cores=2)  # the ranks' share of the cores is the model's, then the pace
    slow = predict.predict(cal, "fsdp2:implicit", four, pace=1.2)
    assert slow.compute_time == pytest.approx(1.2 * predict.predict(cal, "fsdp2:implicit", four).compute_time, rel=0.02)


def benchmark():
    import importlib.util
    import os
    import sys

    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "link_prediction.py")
    spec = importlib.util.spec_from_file_location("link_prediction", path)
    lp = importlib.util.module_from_spec(spec)
    sys.modules["link_prediction"] = lp  # its dataclasses look their module up there
    spec.loader.exec_module(lp)
    return lp


def test_the_benchmark_interleaves_every_calibration_with_the_matrix():
    """benchmarks/link_prediction.py's order of launches: each round two of every model's
    calibration, one across the namespace boundary and one of every fast row; a slow row once,
    in a round of its own turn. The default matrix: three shapes, micro-batches 1 to 32, links
    not only on round numbers, 2 and 4 ranks on 1 and 2 nodes, at least 60 configurations."""
    lp = benchmark()
    models = ["tiny", "small", "wide"]
    order = lp.schedule(lp.MATRIX, models, 4)
    assert len(set(order)) == len(order)
    assert sum(1 for w, _ in order if isinstance(w, tuple)) == 3 * 8 and sum(w == "cross" for w, _ in order) == 4
    for r in lp.MATRIX:
        launches = [k for k, (w, _) in enumerate(order) if w == r]
        assert len(launches) == (4 if r.fast else 1), r
    first_round = order[: order.index(("cross", 1))]
    assert {w for w, _ in first_round if isinstance(w, tuple)} == {("cal", m) for m in models}
    assert {r.model for r in lp.MATRIX} == set(models) and set(lp.MODELS) >= set(models)
    assert min(r.batch for r in lp.MATRIX) == 1 and max(r.batch for r in lp.MATRIX) == 32
    assert {(r.world, r.nodes) for r in lp.MATRIX} == {(2, 2), (4, 2), (4, 1)}
    assert {r.link for r in lp.MATRIX} >= {"37mbit", "140mbit", "620mbit", "2300mbit"}
    assert sum(len(lp.configs_for(r.world)) for r in lp.MATRIX) >= 60
    # the small matrix's two rounds: two cross-boundary launches each (``gloo.fit_cross``'s median
    # needs more than two), its slow rows once
    quick = lp.schedule(lp.QUICK, ["tiny"], 2)
    assert [i for w, i in quick if w == "cross"] == [0, 1, 2, 3]
    assert sum(1 for w, _ in quick if isinstance(w, tuple)) == 4
    assert all(sum(1 for w, _ in quick if w == r) == 1 for r in lp.QUICK) and not any(r.fast for r in lp.QUICK)


def test_the_benchmark_pools_small_bare_collectives_from_their_fastest_launch():
    """Up to 256 KB a bare collective is gloo's fixed cost, and its launches' medians are bimodal
    on a VM (the scheduler's tick in one of two): ``alpha`` comes from the fast mode, the fastest
    launch; above, the bytes count and the median of the launches stays (``pooled_bare``)."""
    lp = benchmark()
    small = str(predict.SMALL)
    assert lp.pooled_bare([3.5e-3, 0.4e-3, 3.6e-3, 0.5e-3, 3.4e-3], small) == pytest.approx(0.4e-3)
    assert lp.pooled_bare([3.5e-3, 0.4e-3, 3.6e-3], str(2**20)) == pytest.approx(3.5e-3)

    def launch(seconds: float) -> dict:
        gloo = {"all_gather": {small: seconds, str(2**20): 10 * seconds}}
        return {"events": {"0": []}, "values": {"0": {"gloo": gloo}}}

    pooled = lp.pool([launch(3e-3), launch(1e-3), launch(2e-3)])["values"]["0"]["gloo"]["all_gather"]
    assert pooled == {small: pytest.approx(1e-3), str(2**20): pytest.approx(20e-3)}


def test_the_benchmark_takes_the_model_micro_batch_and_links_as_options():
    """--model (a preset, a name of MODELS, or NAME:field=value,...), --micro-batch, --links (Mbit/s)
    and --topology make the matrix their product; a link only between nodes."""
    import argparse

    lp = benchmark()
    assert lp.model_arg("wide") == ("wide", lp.MODELS["wide"])
    assert lp.model_arg("mine:dim=96,n_layers=3") == ("mine", {"dim": 96, "n_layers": 3})
    args = argparse.Namespace(
        quick=False, model=["tiny", "mine:dim=96"], micro_batch="1,32", links="37,2300", topology="1x4,2x2"
    )
    matrix = lp.matrix_of(args)
    assert len(matrix) == 2 * 2 * (1 + 2)
    assert lp.row("tiny", 1, "2x2", "37mbit") in matrix and lp.row("mine", 32, "1x4") in matrix
    assert all(r.link is None for r in matrix if r.nodes == 1)
    assert lp.row("tiny", 1, "2x1", "2300mbit").fast and not lp.row("tiny", 1, "2x1", "140mbit").fast
    assert "seq_len=16" in lp.job({"dim": 96}, ("ddp",), 3, 4, 16)


def test_fsdp1s_optimizer_steps_its_shard_fsdp2s_and_ddps_do_not_shrink():
    """FSDP1's optimizer steps one flat shard per unit, whose bytes halve from 2 ranks to 4; FSDP2's
    per-parameter work and DDP's whole model do not (``optimizer_share``); HSDP shards within a node."""
    fsdp1 = predict.Config.parse("fsdp1:FULL_SHARD")
    assert predict.optimizer_share(fsdp1, 2, 4) == pytest.approx(0.5)
    assert predict.optimizer_share(predict.Config.parse("fsdp1:HYBRID_SHARD"), 2, 2) == 1.0
    assert predict.optimizer_share(predict.Config.parse("fsdp2:implicit"), 2, 4) == 1.0
    assert predict.optimizer_share(predict.Config.parse("ddp"), 2, 4) == 1.0


def test_ddps_last_bucket_waits_for_the_last_ranks_backward():
    """Nothing holds DDP's ranks together from the step's barrier to its last bucket, so that bucket
    waits for the last rank's backward: the calibration measures how much later than the ranks'
    mean it ends (``ddp_lag``), and the prediction starts the last bucket that share of the step
    later, for the last of its own group (``gloo.slowest``); FSDP's blocking collectives carry
    their own wait and are not moved."""

    def step(end_of_backward: float) -> dict:
        spans = [
            {"unit": "a", "kind": "forward", "stream": "compute", "start": 0.0, "end": 0.02},
            {"unit": "a", "kind": "backward", "stream": "compute", "start": 0.02, "end": end_of_backward},
        ]
        return {TYPE: Msg.SPANS, "config": "ddp", "start": 0.0, "end": 0.08, "spans": spans}

    run = {0: [step(0.05) for _ in range(5)], 1: [step(0.07) for _ in range(5)]}
    assert predict.ddp_lag(run) == pytest.approx((0.07 - 0.06) / 0.06)
    assert predict.ddp_lag({0: run[0]}) == 0.0  # one rank waits for no one

    cal = predict.Calibration({"ddp": hand_profile("ddp"), "fsdp2": hand_profile()}, COSTS, ranks=2)
    assert predict.Calibration.from_json(cal.to_json()).lag == 0.0
    two, four = Topology(nodes=1, per_node=2, cores=8), Topology(nodes=1, per_node=4, cores=8)
    topos = {"two": two, "four": four}
    before = {(spec, n): predict.predict(cal, spec, t) for spec in ("ddp", "fsdp2:implicit") for n, t in topos.items()}
    cal.lag = 0.1
    assert predict.Calibration.from_json(cal.to_json()).lag == pytest.approx(0.1)
    backward_end = max(s["end"] for s in before[("ddp", "two")].spans if s["kind"] == "backward")
    after = predict.predict(cal, "ddp", two)
    assert after.step_time - before[("ddp", "two")].step_time == pytest.approx(0.1 * backward_end)
    four_end = max(s["end"] for s in before[("ddp", "four")].spans if s["kind"] == "backward")
    grown = predict.predict(cal, "ddp", four).step_time - before[("ddp", "four")].step_time
    assert grown == pytest.approx(0.1 * four_end * gloo.slowest(4) / gloo.slowest(2))
    for n, t in topos.items():
        assert predict.predict(cal, "fsdp2:implicit", t).step_time == before[("fsdp2:implicit", n)].step_time


def test_ddps_last_bucket_waits_as_long_as_the_calibration_measured_after_its_backward():
    """The calibration measures how long DDP's last bucket ends after the rank's backward
    (``ddp_tail``: 4.2-4.4 ms for "tiny"'s one bucket on loopback, where its ring steps give 2.5);
    what the model gives there less than that (``_ddp_extra``, on the calibration's own topology)
    the last bucket waits on every topology: on its own, the tail comes out as measured."""

    def step(backward_end: float, bucket_end: float) -> dict:
        spans = [
            {"unit": "a", "kind": "backward", "stream": "compute", "start": 0.0, "end": backward_end},
            {"unit": "", "kind": "all_reduce", "stream": "comm", "start": backward_end, "end": bucket_end},
        ]
        return {TYPE: Msg.SPANS, "config": "ddp", "start": 0.0, "end": bucket_end + 0.001, "spans": spans}

    run = {0: [step(0.010, 0.014), step(0.010, 0.016), step(0.011, 0.015)]}
    assert predict.ddp_tail(run) == pytest.approx(0.005)  # the first step left out: (0.006 + 0.004) / 2

    cal = predict.Calibration({"ddp": hand_profile("ddp"), "fsdp2": hand_profile()}, COSTS, ranks=2)
    two = Topology(nodes=1, per_node=2, cores=8)
    link = Topology(nodes=2, per_node=1, rate=6e8, cores=8)

    def tail(res) -> float:
        ends = [s["end"] for s in res.spans if s["kind"] == "backward"]
        return max(s["end"] for s in res.spans if s["kind"] == "all_reduce") - max(ends)

    before = {n: predict.predict(cal, spec, t) for n, t in (("two", two), ("link", link)) for spec in ("ddp",)}
    cal.tail = tail(before["two"]) + 3 * MS
    assert predict.Calibration.from_json(cal.to_json()).tail == pytest.approx(cal.tail)
    assert tail(predict.predict(cal, "ddp", two)) == pytest.approx(cal.tail)
    # elsewhere the same 3 ms more, less what the link makes the bucket longer than its CPU work
    # (a wait falls in the link's time); nothing where the model already gives as long; FSDP never
    last = max((s for s in before["two"].spans if s["kind"] == "all_reduce"), key=lambda s: s["end"])
    slack = gloo.link_slack(COSTS, link, "all_reduce", last["bytes"])
    assert 0 < slack < 3 * MS
    assert predict.predict(cal, "ddp", link).step_time == pytest.approx(before["link"].step_time + 3 * MS - slack)
    slow = Topology(nodes=2, per_node=1, rate=1e8, cores=8)  # the link 18 ms over the CPU work: all of it hidden
    assert predict.predict(cal, "ddp", slow).step_time == pytest.approx(
        predict.predict(replace(cal, tail=0.0), "ddp", slow).step_time
    )
    cal.tail = tail(before["two"]) / 2
    assert predict.predict(cal, "ddp", two).step_time == pytest.approx(before["two"].step_time)
    assert (
        predict.predict(cal, "fsdp2:implicit", two).step_time
        == predict.predict(replace(cal, tail=0.0), "fsdp2:implicit", two).step_time
    )


def test_the_schedulers_slice_is_the_kernels_default_for_the_machines_cpus():
    """Linux's base slice, 0.75 ms scaled by 1 + log2 of the online CPUs up to 8, where the kernel
    does not say its own (``/sys/kernel/debug/sched`` is root's)."""
    assert gloo.scheduler_slice(1) in (0.75e-3, gloo.scheduler_slice())  # the kernel's own, where readable
    readable = gloo.scheduler_slice() != 0.75e-3 * (1 + int(math.log2(min(os.cpu_count() or 1, 8))))
    if not readable:
        assert [gloo.scheduler_slice(n) for n in (1, 2, 3, 4, 8, 64)] == pytest.approx(
            [0.75e-3, 1.5e-3, 1.5e-3, 2.25e-3, 3e-3, 3e-3]
        )
    costs = replace(COSTS, slice=1.5e-3)
    assert GlooCosts(**costs.to_dict()).slice == 1.5e-3  # the calibration's record carries it


def test_ranks_sharing_a_core_wait_one_slice_at_each_blocking_collectives_end():
    """Two ranks bound to each core on one node: the first to leave a blocking collective computes
    on the core its mate needs for its last ring step, and the mate waits the scheduler's slice
    (``sharing.hands_over``). Not with a core each, not over a link, not for HSDP's shard group
    (a core's other rank is in the other node's group), not on gloo's thread (DDP's buckets)."""
    costs = replace(COSTS, slice=1.5e-3)
    shared = Topology(nodes=1, per_node=4, cores=2, pinned=True)
    cases = {
        "shared": (shared, "world"),
        "own cores": (Topology(nodes=1, per_node=4, cores=4, pinned=True), "world"),
        "unbound": (Topology(nodes=1, per_node=4, cores=2), "world"),
        "over a link": (Topology(nodes=2, per_node=2, rate=1e9, cores=2, pinned=True), "world"),
        "shard group": (Topology(nodes=2, per_node=2, rate=1e9, cores=2, pinned=True), "shard"),
    }
    for name, (topo, channel) in cases.items():
        with_slice = gloolink.GlooLink(costs, topo, channel, 1.0).time("all_gather", 1e5, 4)
        without = gloolink.GlooLink(COSTS, topo, channel, 1.0).time("all_gather", 1e5, 4)
        assert with_slice - without == pytest.approx(1.5e-3 if name == "shared" else 0.0), name
    background = [
        gloolink.GlooLink(c, shared, "world", 1.0).time("all_reduce", 1e5, 4, background=True) for c in (costs, COSTS)
    ]
    assert background[0] == background[1]
    cal = predict.Calibration({"fsdp2": hand_profile()}, costs, ranks=2)
    plain = replace(cal, gloo=COSTS)
    gathers = [s for s in predict.predict(cal, "fsdp2:implicit", shared).spans if s["stream"] == "comm"]
    assert (
        predict.predict(cal, "fsdp2:implicit", shared).step_time
        > predict.predict(plain, "fsdp2:implicit", shared).step_time
    )
    assert gathers and min(s["end"] - s["start"] for s in gathers) >= 1.5e-3


def test_ddps_last_bucket_has_the_cores_to_itself():
    """DDP's buckets run on gloo's thread beside the backward, which shares their cores; the last
    one runs after it, while the rank waits: at the CPU's speed, with nothing to take from."""
    costs = GlooCosts(alpha=0.0, beta={"reduce_scatter": 1e-9}, ranks=2)
    cal = predict.Calibration({"ddp": hand_profile("ddp", grad=4e6)}, costs, ranks=2)
    busy = Topology(nodes=1, per_node=2, cores=2)
    first, last = [s for s in predict.predict(cal, "ddp", busy).spans if s["kind"] == "all_reduce"]
    link = gloolink.GlooLink(costs, busy, "world", 1.0)
    assert first["end"] - first["start"] == pytest.approx(link.time("all_reduce", 4e6, 2, background=True))
    assert last["end"] - last["start"] == pytest.approx(link.time("all_reduce", 4e6, 2))
    assert link.time("all_reduce", 4e6, 2, background=True) == pytest.approx(2 * link.time("all_reduce", 4e6, 2))


def test_a_calibration_at_two_micro_batches_predicts_any_other_on_the_line_through_them():
    """One calibration per model: each unit's compute, host time and the wait for the slowest rank
    affine in the tokens through the two micro-batches it ran (interpolated and extrapolated,
    never below zero); the bytes and gloo's per-byte costs from the model, not the batch."""
    lo = predict.Calibration({"fsdp2": hand_profile()}, replace(COSTS, skew=1 * MS, waits=(0.0, 2 * MS)), 2, tokens=64)
    doubled = replace(
        hand_profile(),
        forward=[("a", 3 * MS), ("b", 3 * MS)],
        backward=[("b", 6 * MS), ("a", 6 * MS)],
    )
    hi = predict.Calibration({"fsdp2": doubled}, replace(COSTS, skew=3 * MS), 2, tokens=192)
    mid = ranges.at_tokens(lo, hi, 128)
    assert mid.tokens == 128 and mid.profiles["fsdp2"].forward == [
        ("a", pytest.approx(2 * MS)),
        ("b", pytest.approx(2 * MS)),
    ]
    assert mid.gloo.skew == pytest.approx(2 * MS) and mid.gloo.waits == pytest.approx((0.0, 4 * MS))
    assert mid.profiles["fsdp2"].param_bytes == lo.profiles["fsdp2"].param_bytes
    far = ranges.at_tokens(lo, hi, 320)  # beyond the larger: on the same line
    assert far.profiles["fsdp2"].backward[0][1] == pytest.approx(10 * MS)
    assert ranges.at_tokens(lo, hi, 0).profiles["fsdp2"].forward[0][1] == 0.0  # never below zero
    topo = Topology(nodes=1, per_node=2, cores=2)
    steps = [predict.predict(ranges.at_tokens(lo, hi, x), "fsdp2:implicit", topo).step_time for x in (64, 128, 192)]
    assert steps[0] < steps[1] < steps[2]


def test_a_step_across_a_namespace_boundary_costs_its_fixed_and_per_byte_part():
    """Bare collectives between two emulated nodes, no shaping (``gloo.fit_cross``): the smallest
    payloads' time per ring step less loopback's alpha and the boundary's latency is the fixed
    part, the large payloads' the per-byte part; both go on every step that crosses."""
    alpha, latency = 0.1 * MS, 0.03 * MS
    per_byte = 4e-9  # veth, the bridge and two TCP stacks: slower than loopback's 1 ns/B
    sizes = (4096, 65536, 2**20, 2**22)
    bare = {
        k: {str(b): gloo.steps(k, 2) * (alpha + 0.2 * MS + latency + b / 2 * per_byte) for b in sizes}
        for k in ("all_gather", "all_reduce")
    }
    fixed, beta, failed = gloo.fit_cross(bare, 2, alpha, latency)
    # the small ones' median per step (4 KB and 64 KB, each steps' worth of an all-gather's or all-reduce's)
    assert fixed == pytest.approx(0.2 * MS + (4096 + 65536) / 4 * per_byte) and not failed
    assert beta["all_gather"] == pytest.approx(per_byte, rel=0.01)
    costs = replace(COSTS, alpha=alpha, cross_alpha=fixed, cross_beta=beta, efficiency=1.0)
    two = Topology(nodes=2, per_node=1, rate=math.inf)
    assert gloo.collective_time(costs, two, "all_gather", 2e6) == pytest.approx(
        alpha + fixed + 1e6 * per_byte, rel=0.01
    )
    one = Topology(nodes=1, per_node=2)  # loopback: nothing of it
    assert gloo.collective_time(costs, one, "all_gather", 2e6) == pytest.approx(alpha + 1e6 * 1e-9)
    # over a slow link the bytes' time hides the per-byte part, not the fixed one
    slow = Topology(nodes=2, per_node=1, rate=1e6)
    assert gloo.collective_time(costs, slow, "all_gather", 2e6) == pytest.approx(alpha + fixed + 1.5)
    # a per-byte cost of zero or less is no fit: named, and loopback's stands
    flat = {"all_gather": {"4096": 1 * MS, str(2**22): 1 * MS}}
    _, beta, failed = gloo.fit_cross(flat, 2, alpha, latency)
    assert "all_gather" not in beta and failed and failed[0][0] == "cross all_gather ns/B"


def test_the_fixed_cost_across_the_boundary_is_its_fast_modes_from_every_launch():
    """Bare collectives across the boundary are bimodal, launch by launch: 0.2-0.7 ms, or 2.3-4.2
    ms where a rank's wake-up waited for the scheduler's tick. The fixed part is the median of the
    fast mode over every launch's small payloads, so three slow launches of four (session 29's
    second run: 1348 µs a step from the medians, 145-301 in other runs) do not make it."""
    alpha, latency = 0.15 * MS, 0.03 * MS
    fast, slow = 0.45 * MS, 3.5 * MS
    launches = {"all_gather": {"4096": [slow, fast, slow, slow], "65536": [slow, slow, fast, slow]}}
    fixed, _, _ = gloo.fit_cross(launches, 2, alpha, latency)
    assert fixed == pytest.approx(fast - alpha - latency)
    # the median per payload, as before, would have taken the slow mode
    medians = {"all_gather": {s: sorted(v)[2] for s, v in launches["all_gather"].items()}}
    assert gloo.fit_cross(medians, 2, alpha, latency)[0] == pytest.approx(slow - alpha - latency)
    # one launch's seconds alone: the same as a one-item list
    assert gloo.fit_cross({"all_gather": {"4096": fast}}, 2, alpha, latency)[0] == pytest.approx(fixed)


def test_a_per_byte_cost_of_zero_is_a_failed_fit_reported_not_used_silently():
    """A model whose collectives are too small for their bytes to show (issue 50: "reduce_scatter
    0.00 ns/B" for "tiny"): the fit from the run's collectives is no fit; the bare collectives'
    per-byte cost is used instead, and the calibration says so."""
    bare = {"reduce_scatter": {"4096": 0.5 * MS, str(2**22): 0.5 * MS + 2 * 2**21 * 1e-9}}
    rows = [("reduce_scatter", 2, 4096.0, 0.1 * MS, 1 * MS)] * 5  # faster than alpha alone
    costs = predict.fit_spans(rows, 2, bare)
    assert costs.beta["reduce_scatter"] == pytest.approx(1e-9 - 0.25 * MS / 2**21 + 0.25 * MS / 2**21, rel=0.3)
    assert costs.failed and costs.failed[0][0] == "reduce_scatter ns/B" and costs.failed[0][2]
    cal = predict.Calibration({"fsdp2": hand_profile()}, costs, 2)
    notes = predict.failed_fits(cal)
    assert len(notes) == 1 and "reduce_scatter ns/B" in notes[0]
    assert predict.failed_fits(hand_calibration()) == []
    again = predict.Calibration.from_json(cal.to_json())
    assert predict.failed_fits(again) == notes


def test_each_prediction_has_a_range_from_the_calibrations_spread():
    """``predict_range``: the step and two jackknife standard errors either side, over
    calibrations each without a part of the steps; no spread, no width."""
    assert ranges.spread([1.0, 1.0, 1.0]) == 0.0
    assert ranges.spread([1.0, 3.0]) == pytest.approx(1.0)  # sqrt(1/2 * (1 + 1))
    with pytest.raises(ValueError):
        ranges.spread([1.0])
    cal = hand_calibration()
    topo = Topology(nodes=2, per_node=1, rate=1e8, cores=2)
    same = ranges.predict_range(cal, [cal, cal], "fsdp2:implicit", topo)
    assert same[0] == same[1] == same[2]
    slower = replace(cal, profiles={"fsdp2": predict.slowed(hand_profile(), 1.2)})
    step, low, high = ranges.predict_range(cal, [cal, slower], "fsdp2:implicit", topo)
    assert low < step < high and high - step == pytest.approx(step - low)
    run = {0: [{"step": i} for i in range(7)], 1: [{"step": i} for i in range(7)]}
    parts = ranges.leave_out(run, 3)
    kept = [sorted(m["step"] for m in p.events[0]) for p in parts]
    assert kept == [[0, 2, 3, 5, 6], [0, 1, 3, 4, 6], [0, 1, 2, 4, 5]]  # the first always stays
    assert len(ranges.leave_out({0: [{"step": 0}, {"step": 1}, {"step": 2}]}, 4)) == 2


def test_fsdp2s_root_keeps_its_parameters_for_backward():
    """labkit.testing.link_job leaves the root at torch's default reshard_after_forward (None:
    False for the root), so the predictor gathers it once a step, as FSDP1 does."""
    import inspect

    from torch.distributed.fsdp import fully_shard

    from labkit.testing import link_job

    assert inspect.signature(fully_shard).parameters["reshard_after_forward"].default is None
    source = inspect.getsource(link_job.wrap)
    assert "fully_shard(model, **kw)" in source and '"reshard_after_forward": True' not in source
    res = predict.predict(hand_calibration(), "fsdp2:implicit", Topology(nodes=2, per_node=1, rate=1e8, cores=2))
    gathers = [s["unit"] for s in res.spans if s["kind"] == "all_gather"]
    assert gathers.count("a") == 1 and gathers.count("b") == 2
