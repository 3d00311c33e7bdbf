"""Warm ranks against a cold launch: the round trip of one trivial cell.

Warm: ``Session.run(cell)`` on ranks already up, from the call to the returned ``Run``
with the dashboard final (display "text": the summary is printed, into a buffer here).
Cold: ``labkit.torchrun(cell)`` of the same cell with the same display, which starts
torchrun, imports torch in every rank, runs the cell and tears everything down.
Medians of N round trips each, at 2 and 4 ranks. Targets: a warm cell under 20 ms,
and at least 100x faster than cold.

With ``--kernel`` the same comparison also runs through a real Jupyter kernel:
``%%ranks`` against ``%%torchrun``, timed from sending the cell to its reply with
every output delivered: once with the dashboard (a cold cell's live widgets, summary and
static figure; a warm cell shorter than the dashboard's ``SHOW_AFTER`` gets its final
dashboard as one output instead of widgets), once with ``--quiet`` (no dashboard), to show what the dashboard costs, and an
empty cell (``pass``): what the kernel and the client cost with no labkit at all.
Targets through the kernel: a warm cell with the dashboard under 10 ms.

    .venv/bin/python benchmarks/warm_vs_cold.py [--runs 10] [--warm-runs 50] [--nproc 2 4] [--kernel]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import time
from collections.abc import Callable

import labkit
from labkit.launch.warm import Session

TRIVIAL = "from labkit import rank\nrank.report(r=rank.rank())"


def timed(
    fn: Callable[[], labkit.Run], n: int, nproc: int, before: Callable[[], None] = lambda: None
) -> tuple[list[float], int]:
    """``n`` timed round trips that succeeded, and how many failed on the way (they are retried).

    On a machine shared with other test runs a launch can be killed from outside (a leak
    check's ``labkit.cleanup()`` ends every labkit process of the user); ``before`` runs
    untimed ahead of each try, e.g. to restart a session that was killed.
    """
    times, failed = [], 0
    while len(times) < n:
        before()
        with contextlib.redirect_stdout(io.StringIO()):
            t0 = time.perf_counter()
            try:
                run = fn()
            except labkit.RunError as exc:
                failed += 1
                print(f"failed ({failed}): {str(exc).splitlines()[0]}", file=sys.stderr)
                if failed > n:
                    raise
                continue
            times.append(time.perf_counter() - t0)
        assert run.ok and run.values == {r: {"r": r} for r in range(nproc)}, run.summary()
    return times, failed


def in_process(nproc: int, runs: int, warm_runs: int) -> dict[str, float]:
    cold, cold_failed = timed(
        lambda: labkit.torchrun(TRIVIAL, nproc=nproc, backend="gloo", display="text"), runs, nproc
    )
    session = Session(nproc=nproc, backend="gloo", display="text", start=False)
    starts: list[float] = []

    def up() -> None:
        while not session.alive:
            t0 = time.perf_counter()
            try:
                session.restart()
            except labkit.RunError as exc:
                print(f"start failed: {str(exc).splitlines()[0]}", file=sys.stderr)
                continue
            starts.append(time.perf_counter() - t0)
            with contextlib.redirect_stdout(io.StringIO()):
                session.run("pass")  # the first cell pays for importing labkit.rank on the ranks

    try:
        warm, warm_failed = timed(lambda: session.run(TRIVIAL), warm_runs, nproc, before=up)
    finally:
        session.stop()
    return {
        "failed": cold_failed + warm_failed,
        "cold": statistics.median(cold),
        "warm": statistics.median(warm),
        "warm_p90": sorted(warm)[int(0.9 * len(warm))],
        "start": statistics.median(starts),
    }


def in_kernel(nproc: int, runs: int, warm_runs: int, quiet: bool) -> dict[str, float]:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    flag = " --quiet" if quiet else ""

    def cell(code: str) -> float | None:
        """Seconds from sending ``code`` to its reply with every output delivered; None if it failed."""
        t0 = time.perf_counter()
        reply = kc.execute_interactive(code, timeout=300, output_hook=lambda msg: None)
        return time.perf_counter() - t0 if reply["content"]["status"] == "ok" else None

    def repeat(code: str, n: int) -> tuple[list[float], int]:
        times, failed = [], 0
        while len(times) < n and failed <= n:
            dt = cell(code)
            times += [dt] if dt is not None else []
            failed += dt is None
        assert len(times) == n, f"{failed} failures of {code!r}"
        return times, failed

    try:
        cell("%load_ext labkit")
        cold, cold_failed = repeat(f"%%torchrun -n {nproc} --backend gloo{flag}\n{TRIVIAL}", runs)
        assert cell(f"%torchrun_start -n {nproc} --backend gloo") is not None
        cell("%%ranks\npass")
        warm, warm_failed = repeat(f"%%ranks{flag}\n{TRIVIAL}", warm_runs)
        empty, _ = repeat("pass", warm_runs)
        cell("%torchrun_stop")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
    return {
        "failed": cold_failed + warm_failed,
        "cold": statistics.median(cold),
        "warm": statistics.median(warm),
        "warm_p90": sorted(warm)[int(0.9 * len(warm))],
        "empty": statistics.median(empty),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10, help="cold launches per rank count")
    p.add_argument("--warm-runs", type=int, default=50, help="warm cells per rank count")
    p.add_argument("--nproc", type=int, nargs="+", default=[2, 4])
    p.add_argument("--kernel", action="store_true", help="also through a real Jupyter kernel (%%ranks vs %%torchrun)")
    args = p.parse_args()

    print(f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    rows = []
    for nproc in args.nproc:
        rows.append(("python", nproc, in_process(nproc, args.runs, args.warm_runs)))
        if args.kernel:
            rows.append(("kernel", nproc, in_kernel(nproc, args.runs, args.warm_runs, quiet=False)))
            rows.append(("--quiet", nproc, in_kernel(nproc, args.runs, args.warm_runs, quiet=True)))

    print(f"trivial cell round trip, medians: {args.runs} cold launches, {args.warm_runs} warm cells")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    head = f"{'where':8}{'ranks':>6}{'cold (s)':>10}{'warm (ms)':>11}{'warm p90':>10}{'speed-up':>10}{'start (s)':>11}"
    print(head + f"{'failed':>8}{'empty cell (ms)':>17}")
    for where, nproc, m in rows:
        start = f"{m['start']:.2f}" if "start" in m else "-"
        empty = f"{m['empty'] * 1000:.2f}" if "empty" in m else "-"
        print(
            f"{where:8}{nproc:>6}{m['cold']:>10.2f}{m['warm'] * 1000:>11.2f}{m['warm_p90'] * 1000:>10.2f}"
            f"{m['cold'] / m['warm']:>9.0f}x{start:>11}{m.get('failed', 0):>8}{empty:>17}"
        )


if __name__ == "__main__":
    main()
