"""The link simulator: its invariants, a schedule worked by hand, and a replay of measured CPU runs.

.venv/bin/pytest tests/test_simulate.py -q
"""

from __future__ import annotations

import itertools
import random

import pytest

from labkit import comm, timeline
from labkit.testing.comm_launch import CONFIGS_2, of_config, run_job
from labkit.timing import calibrate, simulate

MS = 1e-3


def random_profile(rng: random.Random) -> simulate.Profile:
    blocks = [f"layers.{i}" for i in range(rng.randint(1, 5))]
    fwd = [("root", rng.uniform(0.1, 5) * MS)] + [(b, rng.uniform(0.1, 20) * MS) for b in blocks]
    fwd.append(("root", rng.uniform(0.1, 5) * MS))
    bwd = [("root", rng.uniform(0.1, 10) * MS)] + [(b, rng.uniform(0.1, 40) * MS) for b in reversed(blocks)]
    bwd.append(("root", rng.uniform(0.01, 1) * MS))
    sizes = {u: rng.uniform(1e5, 5e8) for u in ["root", *blocks]}
    grads = {u: v * rng.choice([1, 2]) for u, v in sizes.items()}
    flavor = rng.choice(["fsdp1", "fsdp2"])
    return simulate.Profile(fwd, bwd, sizes, grads, rng.choice([2, 4, 8]), rng.uniform(0, 5) * MS, flavor)


PROFILES = [random_profile(random.Random(seed)) for seed in range(24)]
OPTIONS = [
    {"forward_prefetch": fp, "limit_all_gathers": lim, "cpu_bound": cpu}
    for fp, lim, cpu in itertools.product([False, True], [True, False], [False, True])
]


# -- invariants ----------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD", "DDP"])
def test_infinite_link_gives_the_compute_time(strategy):
    for prof, opts, pf in itertools.product(PROFILES, OPTIONS, simulate.PREFETCH):
        r = simulate.simulate(prof, "infinite", strategy=strategy, backward_prefetch=pf, **opts)
        assert r.step_time == pytest.approx(prof.compute_time, rel=1e-12, abs=1e-15)
        assert r.exposed_comm == pytest.approx(0.0, abs=1e-12)


def test_exposed_comm_is_never_negative_nor_more_than_comm():
    for prof, link, strategy in itertools.product(PROFILES, ["nvlink4", "pcie4", "ib100"], ["FULL_SHARD", "DDP"]):
        for pf in simulate.PREFETCH:
            r = simulate.simulate(prof, link, strategy=strategy, backward_prefetch=pf)
            assert 0.0 <= r.exposed_comm <= r.comm_time + 1e-12
            assert r.step_time == pytest.approx(r.compute_time + r.exposed_comm)
            assert r.hidden_comm <= r.comm_time + 1e-12


@pytest.mark.parametrize("strategy", ["FULL_SHARD", "SHARD_GRAD_OP"])
def test_prefetch_is_never_slower_than_none(strategy):
    """Over random profiles, links and options. Not claimed for HYBRID_SHARD: see the next test."""
    for prof, link, opts in itertools.product(PROFILES, ["pcie4", "ib100", simulate.link(1e9, 50e-6)], OPTIONS):
        none = simulate.simulate(prof, link, strategy=strategy, backward_prefetch=None, **opts).step_time
        for pf in ("BACKWARD_PRE", "BACKWARD_POST"):
            assert (
                simulate.simulate(prof, link, strategy=strategy, backward_prefetch=pf, **opts).step_time <= none + 1e-12
            )


def with_host(prof: simulate.Profile, rng: random.Random) -> simulate.Profile:
    """The same profile with random host overhead (CPU time between ops) everywhere it can be."""
    prof.forward_host = [rng.uniform(0, 3) * MS for _ in prof.forward]
    prof.backward_host = [rng.uniform(0, 3) * MS for _ in prof.backward]
    prof.hook = {k: rng.uniform(0, 2) * MS for k in ("all_gather", "reduce_scatter", "all_reduce")}
    prof.optimizer_host, prof.step_host = rng.uniform(0, 2) * MS, rng.uniform(0, 2) * MS
    return prof


def test_prefetch_is_never_slower_with_host_overhead():
    """Host overhead moves with the collectives' issue points; prefetching still never costs time."""
    for seed in range(8):
        rng = random.Random(100 + seed)
        prof = with_host(random_profile(rng), rng)
        for link, opts in itertools.product(["pcie4", simulate.link(1e9, 50e-6)], OPTIONS):
            none = simulate.simulate(prof, link, backward_prefetch=None, **opts).step_time
            for pf in ("BACKWARD_PRE", "BACKWARD_POST"):
                assert simulate.simulate(prof, link, backward_prefetch=pf, **opts).step_time <= none + 1e-12
        free = simulate.simulate(prof, "infinite", cpu_bound=True, sync_comm=True)
        hooks = sum(prof.hook[s["kind"]] for s in free.spans if s["stream"] == "comm")
        assert free.step_time == pytest.approx(prof.compute_time + prof.host_time + hooks)


def test_hybrid_prefetch_can_delay_the_cross_replica_all_reduce():
    """A gather put ahead of a reduce-scatter delays the all-reduce queued behind it; when the
    all-reduce chain across replicas is the critical path, prefetching costs time.
    This profile (8 ranks, shards of 2) came out of a random search over PROFILES' generator."""
    prof = random_profile(random.Random(59))
    pre, post, none = (
        simulate.simulate(prof, "ib100", strategy="HYBRID_SHARD", backward_prefetch=pf) for pf in simulate.PREFETCH
    )
    assert prof.world_size == 8
    assert pre.step_time > none.step_time * 1.03 and post.step_time > none.step_time
    assert pre.hidden_comm > none.hidden_comm  # more is hidden, yet the step is longer


def test_slower_link_never_faster():
    bandwidths = [1e12, 1e11, 1e10, 1e9, 1e8]
    for prof, pf, strategy in itertools.product(
        PROFILES[:20], simulate.PREFETCH, ["FULL_SHARD", "HYBRID_SHARD", "DDP"]
    ):
        for latency in (0.0, 20e-6):
            steps = [
                simulate.simulate(prof, simulate.link(bw, latency), strategy=strategy, backward_prefetch=pf).step_time
                for bw in bandwidths
            ]
            assert steps == sorted(steps), (pf, strategy, steps)
        assert (
            simulate.simulate(prof, simulate.link(1e9, 1e-3), backward_prefetch=pf).step_time
            >= simulate.simulate(prof, simulate.link(1e9, 0.0), backward_prefetch=pf).step_time
        )


def test_memory_price_of_prefetch():
    """Units held at once, counted as the allocator sees them (FSDP1 keeps its root)."""
    prof = PROFILES[3]
    n_blocks = len(prof.param_bytes) - 1
    held = {pf: simulate.simulate(prof, "pcie4", backward_prefetch=pf).peak_units for pf in simulate.PREFETCH}
    root = 0 if prof.flavor == "fsdp2" else 1
    assert held["BACKWARD_PRE"] == root + min(2, n_blocks) or n_blocks == 1
    assert held["BACKWARD_POST"] == held[None] == root + 1
    assert simulate.simulate(prof, "pcie4", limit_all_gathers=False).peak_units == len(prof.param_bytes)
    assert simulate.simulate(prof, "pcie4", strategy="SHARD_GRAD_OP").peak_units == len(prof.param_bytes)
    assert simulate.simulate(prof, "pcie4", strategy="DDP").peak_units == len(prof.param_bytes)


# -- a schedule worked by hand -------------------------------------------------------


def hand_profile() -> simulate.Profile:
    """Two blocks, 1 ms forward, 2 ms backward each; every gather and reduce-scatter 1 ms on the 'slow' link."""
    return simulate.Profile(
        forward=[("a", 1 * MS), ("b", 1 * MS)],
        backward=[("b", 2 * MS), ("a", 2 * MS)],
        param_bytes={"a": 1e6, "b": 1e6},
        grad_bytes={"a": 1e6, "b": 1e6},
        world_size=2,
        flavor="fsdp2",  # both units are gathered again in backward
    )


SLOW = simulate.Link("slow", 0.5e9, 0.0)  # (2-1)/2 * 1 MB / 0.5 GB/s = 1 ms


def comm_spans(r: simulate.Result) -> list[tuple[str, str, float, float]]:
    return [
        (s["kind"], s["unit"], round(s["start"] / MS, 6), round(s["end"] / MS, 6))
        for s in r.spans
        if s["stream"] == "comm"
    ]


def test_hand_schedule_without_prefetch():
    """Forward: AG a [0,1], fwd a [1,2]; AG b [1,2] (the CPU runs ahead), fwd b [2,3].
    Backward: AG b [2,3] (nothing depends on b's forward: it was freed), bwd b [3,5], RS b [5,6];
    AG a only in a's pre-backward, queued behind RS b: [6,7]; bwd a [7,9]; RS a [9,10]."""
    r = simulate.simulate(hand_profile(), SLOW, backward_prefetch=None)
    assert comm_spans(r) == [
        ("all_gather", "a", 0, 1),
        ("all_gather", "b", 1, 2),
        ("all_gather", "b", 2, 3),
        ("reduce_scatter", "b", 5, 6),
        ("all_gather", "a", 6, 7),
        ("reduce_scatter", "a", 9, 10),
    ]
    assert r.step_time == pytest.approx(10 * MS)
    assert r.compute_time == pytest.approx(6 * MS) and r.exposed_comm == pytest.approx(4 * MS)
    assert r.peak_units == 1


def test_hand_schedule_backward_pre():
    """AG a is issued in b's pre-backward, right after AG b: [3,4], under bwd b [3,5];
    RS b [5,6] under bwd a [5,7]; RS a [7,8]. Two units held while b computes."""
    r = simulate.simulate(hand_profile(), SLOW, backward_prefetch="BACKWARD_PRE")
    assert comm_spans(r)[2:] == [
        ("all_gather", "b", 2, 3),
        ("all_gather", "a", 3, 4),
        ("reduce_scatter", "b", 5, 6),
        ("reduce_scatter", "a", 7, 8),
    ]
    assert r.step_time == pytest.approx(8 * MS)
    assert r.hidden_comm == pytest.approx(4 * MS)
    assert r.peak_units == 2


def test_hand_schedule_backward_post():
    """AG a is issued in b's post-backward, after b is freed, so it waits for bwd b: [5,6];
    RS b [6,7] runs under bwd a [6,8]; RS a [8,9]. One unit held at a time."""
    r = simulate.simulate(hand_profile(), SLOW, backward_prefetch="BACKWARD_POST")
    assert comm_spans(r)[3:] == [
        ("all_gather", "a", 5, 6),
        ("reduce_scatter", "b", 6, 7),
        ("reduce_scatter", "a", 8, 9),
    ]
    assert r.step_time == pytest.approx(9 * MS)
    assert r.peak_units == 1


def test_hand_schedule_on_cpu():
    """CPU/gloo: everything blocks the one thread, so the step is compute plus every collective."""
    for pf in simulate.PREFETCH:
        r = simulate.simulate(hand_profile(), SLOW, backward_prefetch=pf, cpu_bound=True, sync_comm=True)
        assert r.step_time == pytest.approx(12 * MS) and r.hidden_comm == pytest.approx(0.0)


def test_shard_grad_op_pays_the_pre_backward_hook_without_the_gather():
    """FSDP1 SHARD_GRAD_OP keeps each unit gathered from forward to backward: no gather in
    backward, but the pre-backward hook's host work (charged to the gather's hook by a FULL_SHARD
    calibration) still runs, once per unit that FULL_SHARD would have gathered again."""
    prof = hand_profile()
    prof.flavor, prof.hook = "fsdp1", {"all_gather": 0.5 * MS}
    fs = simulate.simulate(prof, SLOW, strategy="FULL_SHARD", backward_prefetch=None, cpu_bound=True, sync_comm=True)
    sgo = simulate.simulate(
        prof, SLOW, strategy="SHARD_GRAD_OP", backward_prefetch=None, cpu_bound=True, sync_comm=True
    )

    def host(r: simulate.Result) -> list[tuple[str, float]]:
        return sorted((s["unit"], round((s["end"] - s["start"]) / MS, 6)) for s in r.spans if s["stream"] == "host")

    # FULL_SHARD: forward gathers a and b, backward gathers b again (a, the root, stays gathered)
    assert host(fs) == [("all_gather", 0.5)] * 3
    # SHARD_GRAD_OP: the two forward gathers, and b's pre-backward hook without its gather
    assert host(sgo) == [("all_gather", 0.5), ("all_gather", 0.5), ("b", 0.5)]
    assert [k for k, *_ in comm_spans(sgo)].count("all_gather") == 2
    # the gather's 1 ms is saved, its hook is not
    assert fs.step_time - sgo.step_time == pytest.approx(1 * MS)


def test_labelled_simulated():
    r = simulate.simulate(hand_profile(), "pcie4")
    assert r.simulated and repr(r).startswith("SIMULATED")
    text = simulate.table(simulate.sweep(hand_profile(), links=["nvlink4", "ib100"]), source="hand")
    lines = text.splitlines()
    assert lines[0].startswith("simulated") and "sim." in lines[2]
    assert len(lines) == 4 + 2 * 3  # title, blank, header, rule, a row per link and prefetch
    fig = timeline.plot_timeline(r)
    assert "simulated" in fig.axes[0].get_title()
    assert timeline.to_chrome_trace(r)["otherData"]["simulated"] is True


def test_links():
    assert simulate.link("nvlink4").bandwidth == 450e9 and simulate.link("ib100").bandwidth == 12.5e9
    custom = simulate.link(10e9, 5e-6)
    assert custom.time("all_gather", 8e6, 4) == pytest.approx(3 * 5e-6 + 0.75 * 8e6 / 10e9)
    assert custom.time("all_reduce", 8e6, 4) == pytest.approx(6 * 5e-6 + 1.5 * 8e6 / 10e9)
    assert custom.time("all_gather", 8e6, 1) == 0.0
    with pytest.raises(ValueError, match="unknown link"):
        simulate.link("carrier-pigeon")
    with pytest.raises(ValueError, match="backward_prefetch"):
        simulate.simulate(hand_profile(), "pcie4", backward_prefetch="SOMETIMES")


# -- replaying measured CPU runs -----------------------------------------------------------


def run(config):
    return of_config(run_job(2, "tiny", 3, *CONFIGS_2), config)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS_2)
def test_replay_of_a_measured_run(config, capsys):
    """Replayed as it ran on CPU (everything blocks the one thread), the simulator issues the same
    collectives in the same order as FSDP did, holds the same number of units, and with an
    infinitely fast link computes exactly the measured compute time. With the host overhead
    calibrated from the same run, the replayed step lands within 10% of the measured one
    (benchmarks/comm_overlap.py prints the same on more steps); pytest -s prints it."""
    prof = simulate.profile_from_run(run(config))
    measured = timeline.spans_by_rank(run(config))[0]
    m = prof.measured
    opts = {"backward_prefetch": m["backward_prefetch"], "cpu_bound": True, "sync_comm": True}
    sim = simulate.simulate(prof, simulate.fit_link(run(config)), **opts)
    order = [(s["kind"], s["unit"]) for s in sim.spans if s["stream"] == "comm"]
    if m["strategy"] != "DDP":  # DDP's buffer broadcasts are not replayed
        assert order == [(s["kind"], s["unit"]) for s in measured["spans"] if s["stream"] == "comm"]
    assert sim.peak_units == timeline.peak_held(measured["spans"])
    cmp = simulate.compare_to_measured(prof)
    assert cmp["simulated_compute_s"] == pytest.approx(cmp["measured_compute_s"], rel=1e-9)
    assert abs(cmp["relative_difference"]) <= 0.10
    with capsys.disabled():
        print(
            f"\n  {config}: measured {cmp['measured_step_s'] * 1e3:.1f} ms, simulated {cmp['simulated_step_s'] * 1e3:.1f} ms"
            f" ({cmp['relative_difference']:+.1%}), host overhead replayed {cmp['host_s'] * 1e3:.1f} ms"
        )


@pytest.mark.slow
def test_what_if_varies_only_the_link():
    """On another link, every compute and host span keeps its measured length; only the collectives change."""
    prof = simulate.profile_from_run(run("fsdp1:FULL_SHARD:BACKWARD_PRE"))
    assert prof.host_time > 0 and prof.hook.get("all_gather", 0) > 0
    fast, slow = (simulate.simulate(prof, simulate.link(bw, 20e-6)) for bw in (1e11, 1e8))

    def lengths(r, streams):
        return [(s["kind"], s["unit"], round(s["end"] - s["start"], 12)) for s in r.spans if s["stream"] in streams]

    assert lengths(fast, ("compute", "host")) == lengths(slow, ("compute", "host"))
    assert fast.host_time == pytest.approx(slow.host_time) and fast.compute_time == slow.compute_time
    assert [k for k, *_ in lengths(fast, ("comm",))] == [k for k, *_ in lengths(slow, ("comm",))]
    assert slow.comm_time > fast.comm_time and slow.step_time > fast.step_time
    # infinitely fast: the CPU-bound step is compute plus every bit of host overhead
    free = simulate.simulate(prof, "infinite", cpu_bound=True, sync_comm=True)
    hooks = sum(prof.hook.get(s["kind"], 0.0) for s in free.spans if s["stream"] == "comm")
    assert free.step_time == pytest.approx(prof.compute_time + prof.host_time + hooks)


@pytest.mark.slow
def test_profile_from_run():
    prof = simulate.profile_from_run(run("fsdp1:FULL_SHARD:BACKWARD_PRE"))
    assert [u for u, _ in prof.forward] == ["root", "layers.0", "layers.1", "root"]
    assert [u for u, _ in prof.backward] == ["root", "layers.1", "layers.0", "root"]
    assert prof.param_bytes == {"root": 65600 * 4, "layers.0": 65664 * 4, "layers.1": 65664 * 4}
    assert prof.world_size == 2 and prof.flavor == "fsdp1" and prof.optimizer > 0
    assert prof.measured["strategy"] == "FULL_SHARD" and prof.measured["step_s"] > prof.compute_time
    on_gpu = simulate.simulate(prof, "nvlink4")
    assert on_gpu.step_time < prof.measured["step_s"]  # a fast link, and compute overlapping it
    with pytest.raises(ValueError, match="no timeline"):
        simulate.profile_from_run({0: []})


# -- calibration on hand-made steps ----------------------------------------------------------


def test_host_overhead_is_charged_to_what_follows_it():
    """Gaps on the rank's thread: before/after a collective -> its kind's hook; before compute -> that
    segment; before the optimizer (after the gradients) -> the optimizer; after it -> the step."""
    S = timeline.span
    spans = [
        S("a", "all_gather", 1.0, 2.0, "comm", blocking=True, bytes=10),  # 1 s gap before: hook
        S("a", "forward", 2.5, 3.0, "compute"),  # 0.5 s after the gather: hook (its copy-out)
        S("a", "backward", 3.25, 4.0, "compute"),  # 0.25 s: a's backward segment
        S("", "all_reduce", 4.0, 6.0, "comm", blocking=False, bytes=10),  # in the background
        S("optimizer", "optimizer", 6.5, 7.0, "compute"),  # 0.5 s after the all-reduce ended
    ]
    seg = calibrate.step_segments({"start": 0.0, "end": 7.125, "spans": spans})
    assert seg["hook"] == {"all_gather": 1.5}
    assert seg["forward"] == [("a", 0.5, 0.0)] and seg["backward"] == [("a", 0.75, 0.25)]
    assert (seg["optimizer"], seg["optimizer_host"], seg["step_host"]) == (0.5, 0.5, 0.125)


def test_link_fit_recovers_latency_and_bandwidth():
    """Durations made with the simulator's own cost; one collective ran beside compute (slower) and is not fitted."""
    ln = simulate.link(2e8, 300e-6)
    spans, t0 = [], 0.0
    for kind, n, payload in [("all_gather", 2, 1e6), ("reduce_scatter", 4, 4e6), ("all_reduce", 4, 8e5)]:
        d = ln.time(kind, payload, n)
        wire = payload * comm.ring_factor(kind, n)
        spans.append(timeline.span("u", kind, t0, t0 + d, "comm", wire_bytes=wire, group_size=n))
        t0 += d
    spans.append(timeline.span("u", "all_reduce", t0, t0 + 1.0, "comm", wire_bytes=1e5, group_size=4))
    spans.append(timeline.span("u", "backward", t0, t0 + 1.0, "compute"))
    fit = calibrate.link_of([{"spans": spans}])
    assert fit.bandwidth == pytest.approx(2e8, rel=1e-6) and fit.latency == pytest.approx(300e-6, rel=1e-6)
