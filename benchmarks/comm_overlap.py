"""Communication per step, measured against theory, and what prefetch buys on other links (simulated).

    .venv/bin/python benchmarks/comm_overlap.py                        # small model, 2 and 4 ranks
    .venv/bin/python benchmarks/comm_overlap.py --model tiny --ranks 2 --links pcie4 ib100

For each world size it launches one torchrun job (gloo, CPU) that trains the model a few
steps under DDP, FSDP1 FULL_SHARD with each backward prefetch, FSDP1 SHARD_GRAD_OP and
FSDP2, counting every collective in the ranks and recording the per-unit timeline
(labkit/testing/comm_job.py, the job the tests run). It prints:

1. measured bytes per step and rank against ``labkit.comm.theory_bytes``, in MiB and in
   units of (N-1)/N·Ψ·4 bytes, where DDP should read 2 and FULL_SHARD 3;
2. the FULL_SHARD run replayed by ``labkit.simulate`` on two links for each prefetch
   option (the CPU's measured compute and bytes, re-timed: SIMULATED, not measured);
   ``--compute-scale 100`` adds the same with compute 100 times faster, a stand-in for a
   GPU (an assumption, labelled as such: the CPU's compute hides any link's traffic);
3. the replay of each CPU run as it ran, against its measured step time: compute, the
   optimizer and the host overhead (hooks, Python between ops) calibrated from that run
   (``labkit.timing.calibrate``), the link fitted to it; target every |error| <= 10%. With the
   host overhead calibrated on the same steps this checks that the schedule reproduces the
   run (order, blocking, DDP's background all-reduces). The last column is the stronger
   test: FULL_SHARD's prefetch modes predicted from the BACKWARD_PRE run's calibration. It
   also carries the run-to-run variation of a loaded CPU (separate runs of one config can
   differ by tens of percent), so it has no target.
"""

from __future__ import annotations

import argparse

from labkit import comm
from labkit.fmt import render_table
from labkit.models.config import get_config
from labkit.testing.comm_launch import of_config, run_job
from labkit.timing import simulate
from labkit.wire.protocol import TYPE, Msg
from labkit.wire.setting import Flavor, Prefetch, Setting, Strategy

BASE = "fsdp1:FULL_SHARD:BACKWARD_PRE"  # the run the simulations start from
# each configuration and the strategy its collectives follow in theory
CONFIGS = {
    spec: Setting.parse(spec).strategy
    for spec in (
        str(Flavor.DDP),
        BASE,
        "fsdp1:FULL_SHARD:BACKWARD_POST",
        "fsdp1:FULL_SHARD:NONE",
        "fsdp1:SHARD_GRAD_OP",
        "fsdp2:reshard",
    )
}


def measured_vs_theory(events: dict, n: int, psi: int) -> list[list[str]]:
    rows = [["config", "calls AG/RS/AR", "measured MiB", "theory MiB", "meas./theory", "in (N-1)/N·Ψ"]]
    unit = (n - 1) / n * psi * 4
    for config, strategy in CONFIGS.items():
        ev = of_config(events, config)[0]
        counts = [m for m in ev if m[TYPE] == Msg.COMM][-1]["counts"]
        spans = [m for m in ev if m[TYPE] == Msg.SPANS][-1]
        padded = spans["padded_units"]
        num = sum(padded.values()) or psi
        root = padded.get("root", 0) if spans["flavor"] == Flavor.FSDP1 and strategy is Strategy.FULL_SHARD else 0
        theory = comm.total(comm.theory_bytes(num, strategy, n, unsharded_root_params=root))
        got = comm.total(counts)
        calls = "/".join(
            str(int(counts.get(k, {}).get("calls", 0))) for k in ("all_gather", "reduce_scatter", "all_reduce")
        )
        rows.append(
            [config, calls, f"{got / 2**20:.3f}", f"{theory / 2**20:.3f}", f"{got / theory:.4f}", f"{got / unit:.3f}"]
        )
    return rows


def simulated(events: dict, links: list[str], scale: float) -> list[list[str]]:
    prof = simulate.profile_from_run(of_config(events, BASE))
    head = "SIMULATED on" if scale == 1 else f"SIMULATED, compute / {scale:g}, on"
    rows = [[head, "strategy", "prefetch", "step ms", "exposed comm ms", "peak units"]]
    for ln in links:
        for strategy in (Strategy.FULL_SHARD, Strategy.SHARD_GRAD_OP, Strategy.DDP):
            options = [(pf, False) for pf in simulate.PREFETCH] + [(Prefetch.BACKWARD_PRE, True)]
            for pf, fwd in options if strategy is Strategy.FULL_SHARD else [(Prefetch.BACKWARD_PRE, False)]:
                kw = {"strategy": strategy, "backward_prefetch": pf, "forward_prefetch": fwd, "compute_scale": scale}
                r = simulate.simulate(prof, ln, **kw)
                label = (str(pf) + (" +forward_prefetch" if fwd else "")) if strategy is Strategy.FULL_SHARD else "-"
                rows.append(
                    [ln, strategy, label, f"{r.step_time * 1e3:.2f}", f"{r.exposed_comm * 1e3:.2f}", str(r.peak_units)]
                )
    rows.append(["(compute replayed)", "", "", f"{prof.compute_time / scale * 1e3:.2f}", "", ""])
    return rows


def replay(events: dict) -> list[list[str]]:
    """Each CPU run replayed as it ran (compute, host overhead and collectives on the one thread).

    "calibrated on itself": the run's own compute and host overhead, the target |error| <= 10%.
    "from BACKWARD_PRE": FULL_SHARD's other prefetch modes predicted from the BACKWARD_PRE run's
    calibration, the schedule alone deciding the order (a check of the schedule, not a target).
    """
    base = simulate.profile_from_run(of_config(events, BASE))
    head = ["CPU run replayed", "measured step ms", "simulated ms", "error", "host replayed ms", "from BACKWARD_PRE"]
    rows = [head]
    for config in CONFIGS:
        prof = simulate.profile_from_run(of_config(events, config))
        c = simulate.compare_to_measured(prof)
        cross = ""
        setting = Setting.parse(config)
        if setting.flavor is Flavor.FSDP1 and setting.strategy is Strategy.FULL_SHARD and setting.prefetch:
            pf = prof.measured["backward_prefetch"]
            sim = simulate.simulate(
                base, simulate.fit_link(of_config(events, config)), backward_prefetch=pf, cpu_bound=True, sync_comm=True
            )
            cross = f"{(sim.step_time - c['measured_step_s']) / c['measured_step_s']:+.1%}"
        ok = "" if abs(c["relative_difference"]) <= 0.10 else "  (over 10%)"
        rows.append(
            [
                config,
                f"{c['measured_step_s'] * 1e3:.1f}",
                f"{c['simulated_step_s'] * 1e3:.1f}",
                f"{c['relative_difference']:+.1%}{ok}",
                f"{c['host_s'] * 1e3:.1f}",
                cross,
            ]
        )
    return rows


def show(rows: list[list[str]]) -> None:
    print(render_table(rows, align="l" * len(rows[0])))
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="small", help="labkit.models preset (default: small)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4], help="world sizes to run (default: 2 4)")
    ap.add_argument("--steps", type=int, default=4, help="steps per configuration (default: 4)")
    ap.add_argument("--links", nargs="+", default=["nvlink4", "ib100"], help=f"presets: {', '.join(simulate.LINKS)}")
    ap.add_argument(
        "--compute-scale",
        type=float,
        nargs="+",
        default=[1.0],
        help="also simulate with the measured compute divided by these factors (an assumption: a faster device)",
    )
    args = ap.parse_args()
    psi = get_config(args.model).num_params()
    for n in args.ranks:
        print(f"== {args.model} ({psi:,} parameters, fp32), {n} ranks, gloo on CPU ==\n")
        events = run_job(n, args.model, args.steps, *CONFIGS, timeout=900, cross_check=False)
        show(measured_vs_theory(events, n, psi))
        for scale in args.compute_scale:
            show(simulated(events, args.links, scale))
        show(replay(events))


if __name__ == "__main__":
    main()
