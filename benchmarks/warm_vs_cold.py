"""Warm ranks against a cold launch: the round trip of one trivial cell.

Warm: ``Session.run(cell)`` on ranks already up, from the call to the returned ``Run``
with the dashboard final (display "text": the summary is printed, into a buffer here).
Cold: ``labkit.torchrun(cell)`` of the same cell with the same display, which starts
torchrun, imports torch in every rank, runs the cell and tears everything down.
Medians of N round trips each, at 2 and 4 ranks. Targets: a warm cell under 20 ms,
and at least 100x faster than cold.

With ``--kernel`` the same comparison also runs through a real Jupyter kernel:
``%%ranks`` against ``%%torchrun``, timed from sending the cell to its reply with
every output delivered (live widgets and the final static figure included).

    .venv/bin/python benchmarks/warm_vs_cold.py [--runs 10] [--warm-runs 50] [--nproc 2 4] [--kernel]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import time
from collections.abc import Callable

import labkit
from labkit.warm import Session

TRIVIAL = "from labkit import rank\nrank.report(r=rank.rank())"


def timed(fn: Callable[[], labkit.Run], n: int, nproc: int) -> list[float]:
    times = []
    for _ in range(n):
        with contextlib.redirect_stdout(io.StringIO()):
            t0 = time.perf_counter()
            run = fn()
            times.append(time.perf_counter() - t0)
        assert run.ok and run.values == {r: {"r": r} for r in range(nproc)}, run.summary()
    return times


def in_process(nproc: int, runs: int, warm_runs: int) -> dict[str, float]:
    cold = timed(lambda: labkit.torchrun(TRIVIAL, nproc=nproc, backend="gloo", display="text"), runs, nproc)
    t0 = time.perf_counter()
    with Session(nproc=nproc, backend="gloo", display="text") as session:
        start = time.perf_counter() - t0
        session.run("pass")  # the first cell pays for importing labkit.rank on the ranks
        warm = timed(lambda: session.run(TRIVIAL), warm_runs, nproc)
    return {
        "cold": statistics.median(cold),
        "warm": statistics.median(warm),
        "warm_p90": sorted(warm)[int(0.9 * len(warm))],
        "start": start,
    }


def in_kernel(nproc: int, runs: int, warm_runs: int) -> dict[str, float]:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")

    def cell(code: str) -> float:
        t0 = time.perf_counter()
        reply = kc.execute_interactive(code, timeout=300, output_hook=lambda msg: None)
        assert reply["content"]["status"] == "ok", reply["content"]
        return time.perf_counter() - t0

    try:
        cell("%load_ext labkit")
        cold = [cell(f"%%torchrun -n {nproc} --backend gloo\n{TRIVIAL}") for _ in range(runs)]
        cell(f"%torchrun_start -n {nproc} --backend gloo")
        cell("%%ranks\npass")
        warm = [cell(f"%%ranks\n{TRIVIAL}") for _ in range(warm_runs)]
        cell("%torchrun_stop")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
    return {
        "cold": statistics.median(cold),
        "warm": statistics.median(warm),
        "warm_p90": sorted(warm)[int(0.9 * len(warm))],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10, help="cold launches per rank count")
    p.add_argument("--warm-runs", type=int, default=50, help="warm cells per rank count")
    p.add_argument("--nproc", type=int, nargs="+", default=[2, 4])
    p.add_argument("--kernel", action="store_true", help="also through a real Jupyter kernel (%%ranks vs %%torchrun)")
    args = p.parse_args()

    rows = []
    for nproc in args.nproc:
        rows.append(("python", nproc, in_process(nproc, args.runs, args.warm_runs)))
        if args.kernel:
            rows.append(("kernel", nproc, in_kernel(nproc, args.runs, args.warm_runs)))

    print(f"trivial cell round trip, medians: {args.runs} cold launches, {args.warm_runs} warm cells")
    print(f"{'where':8}{'ranks':>6}{'cold (s)':>10}{'warm (ms)':>11}{'warm p90':>10}{'speed-up':>10}{'start (s)':>11}")
    for where, nproc, m in rows:
        start = f"{m['start']:.2f}" if "start" in m else "-"
        print(
            f"{where:8}{nproc:>6}{m['cold']:>10.2f}{m['warm'] * 1000:>11.2f}{m['warm_p90'] * 1000:>10.2f}"
            f"{m['cold'] / m['warm']:>9.0f}x{start:>11}"
        )


if __name__ == "__main__":
    main()
