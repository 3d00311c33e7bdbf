"""How long a fake-tensor estimate takes, and what extrapolating in depth costs in accuracy.

    .venv/bin/python benchmarks/estimate_speed.py                 # 70B and 7B, and the checks below
    .venv/bin/python benchmarks/estimate_speed.py --whole-70b     # also trace 70B whole (about 85 s)

Each estimate is one call of ``labkit.estimate.estimate_many``, as a lesson cell or
``labkit estimate`` makes it: a fresh subprocess (torch imported in it), then the traces.
Printed per estimate: wall time of the call, CPU time of its subprocess (what a busy machine
does not stretch), the layer counts traced, and the total at the peak. Where the model is also
traced whole, the largest difference of any category (at the peak and after each phase)
between the extrapolated and the whole trace. Target: the 70B estimate under 30 s wall at low
load, within 1% of a whole trace.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from labkit.fmt import fmt_bytes, render_table
from labkit.memory import estimate


def timed(spec: estimate.Spec, extrapolate: bool) -> tuple[estimate.Estimate, float, float]:
    """The estimate, the call's wall seconds and its subprocess's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    (e,) = estimate.estimate_many([spec], timeout=1800, extrapolate=extrapolate)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return e, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def largest_difference(a: estimate.Estimate, b: estimate.Estimate) -> float:
    """The largest |a - b| / total of b over every category, at the peak and after each phase."""
    pairs = [(a.peak, b.peak)] + [(a.phases[p], b.phases[p]) for p in b.phases]
    return max(abs(x.get(c, 0) - y[c]) / max(sum(y.values()), 1) for x, y in pairs for c in y)


def label(spec: estimate.Spec) -> str:
    return f"{spec.model}, {spec.world_size} ranks, {spec.precision}" + (", AC" if spec.checkpointing else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--whole-70b", action="store_true", help="also trace llama-70b whole (the old way, ~85 s)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    rows = [["estimate", "method", "traced layers", "wall s", "CPU s", "peak total", "vs whole trace"]]
    cases = [
        (estimate.Spec("llama-70b", 8), args.whole_70b),
        (estimate.Spec("llama-7b", 8), True),
        (estimate.Spec("llama-1b", 8), True),
        (estimate.Spec("llama-1b", 8, checkpointing=False, seq_len=1024), True),
    ]
    for spec, compare in cases:
        fast, wall, cpu = timed(spec, extrapolate=True)
        whole = None
        if compare:
            whole, wall_w, cpu_w = timed(spec, extrapolate=False)
        traced = ", ".join(str(d) for d in fast.traced_layers) or "all"
        diff = f"{largest_difference(fast, whole):.4%}" if whole else "not traced"
        rows.append(
            [label(spec), "extrapolated", traced, f"{wall:.1f}", f"{cpu:.1f}", fmt_bytes(fast.total, "GB"), diff]
        )
        if whole:
            rows.append(
                [label(spec), "whole", "all", f"{wall_w:.1f}", f"{cpu_w:.1f}", fmt_bytes(whole.total, "GB"), ""]
            )
    print(render_table(rows, align="lll" + "r" * 4))


if __name__ == "__main__":
    main()
