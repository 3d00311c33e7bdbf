"""Predicted against measured step time, per configuration, from ONE calibration (emulated nodes and links).

    .venv/bin/python benchmarks/link_prediction.py                 # the whole matrix (10-20 min, 2 loaded cores)
    .venv/bin/python benchmarks/link_prediction.py --quick         # 2 nodes x 1 rank, 2 links
    .venv/bin/python benchmarks/link_prediction.py --save DIR      # keep every run's messages
    .venv/bin/python benchmarks/link_prediction.py --load DIR      # predict again from kept runs

First one calibration run: 2 ranks on one node, no link, each of ``predict.CALIBRATION_CONFIGS``
(DDP, FSDP1 FULL_SHARD BACKWARD_PRE, FSDP2 with implicit prefetch) trained a few steps, and
bare collectives timed (``labkit.testing.link_job``). Then,
for each topology of the matrix (2 and 4 ranks on 1 and 2 emulated nodes, links from 50 Mbit/s
to 5 Gbit/s, ``labkit.launch.netem``; ``MATRIX``), one run of every configuration: DDP, FSDP1 FULL_SHARD
with each backward prefetch, SHARD_GRAD_OP, HYBRID_SHARD (4 ranks: sharded within a node,
replicated across), FSDP2 implicit and explicit. Each configuration is predicted *before* its
run starts, from the calibration alone (``labkit.timing.predict``), then measured.

Two predictions per row:

* ``predicted``: the calibration alone. More ranks than cores slow every rank's CPU work by
  ``gloo.contention`` (as on a machine that runs nothing else);
* ``at run's CPU``: the same, with the share of the CPU the ranks got during the run instead of
  that assumption: the kernel's scheduler counts, for the rank's thread, the time it ran and the
  time it waited for a core (``/proc/thread-self/schedstat``); compute, host work and gloo's CPU
  costs are scaled by (ran + waited) / ran, against the calibration's. On a machine shared with
  other work, that share changes two- or threefold from one minute to the next; it says how
  busy the machine was, not how long the configuration's steps took (a rank that waits in a
  collective neither runs nor waits for a core). Runs without it fall back to the speed probe,
  a fixed matrix computation every rank times before each step.

Targets (issue 23): mean |error| at most 5%, max at most 10%. docs/netem.md has the numbers of
the last runs, which do not meet them on a 2-core machine shared with other work.

The measured step is the mean of a configuration's typical steps (the first, and any over 1.5
times the median, left out), as the calibration's. On this 2-core machine, idle, one step of the
same configuration varies by 20% from the next (100-165 ms at 5 Gbit/s): 12 steps put the mean
within about 3%, and the calibration, which every prediction inherits, runs twice as many.
Rows of the calibration's own configurations on its own topology are replays, marked
``(cal.)`` and left out of the error summary. The 1-node, 2-rank run trains them again minutes
later; a line after the table says how far those steps moved from the calibration's (the same
configuration, the same topology: the floor under any prediction's error on this machine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from typing import Any

from labkit.fmt import render_table
from labkit.timing import predict
from labkit.timing.calibrate import spans_messages
from labkit.timing.gloo import Topology
from labkit.wire.protocol import TYPE, Msg

CONFIGS = (
    "ddp",
    "fsdp1:FULL_SHARD:BACKWARD_PRE",
    "fsdp1:FULL_SHARD:BACKWARD_POST",
    "fsdp1:FULL_SHARD:NONE",
    "fsdp1:SHARD_GRAD_OP",
    "fsdp2:implicit",
    "fsdp2:explicit",
)
LINKS = ("50mbit", "200mbit", "1gbit", "5gbit")
MATRIX = [(2, 1, None), (4, 1, None)] + [(2, 2, ln) for ln in LINKS] + [(4, 2, "50mbit"), (4, 2, "1gbit")]
QUICK = [(2, 2, "200mbit"), (2, 2, "1gbit")]


def rate_of(link: str | None) -> float:
    """Bytes/s each direction of a ``--link`` rate (inf: no link)."""
    if link is None:
        return math.inf
    from labkit.launch.netem import parse_link

    return parse_link(link).bytes_per_s


def job(configs: tuple[str, ...], steps: int, costs: bool = False) -> str:
    return f"from labkit.testing.link_job import main\nmain('small', {steps}, 8, {list(configs)!r}, costs={costs})\n"


def launch(world: int, nodes: int, link: str | None, configs: tuple[str, ...], steps: int, costs: bool = False) -> dict:
    """One run; what the benchmark keeps of it (JSON-able)."""
    import labkit

    run = labkit.torchrun(
        job(configs, steps, costs),
        nproc=world // nodes,
        nodes=nodes,
        link=link,
        backend="gloo",
        timeout=1800,
        display="none",
        quiet=True,
    )
    latency = run.emulation.latency_s if getattr(run, "emulation", None) else 0.0
    return {
        "world": world,
        "nodes": nodes,
        "link": link,
        "latency": latency,
        "load": os.getloadavg()[0],
        "values": {str(r): v for r, v in run.values.items()},
        "events": {str(r): [m for m in ev if m.get(TYPE) == Msg.SPANS] for r, ev in run.events.items()},
    }


class Kept:
    """A kept run, as ``predict.calibrate`` and ``spans_messages`` read a ``Run``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.events = {int(r): ev for r, ev in data["events"].items()}
        self.values = {int(r): v for r, v in data["values"].items()}


def configs_for(world: int) -> tuple[str, ...]:
    return CONFIGS + (("fsdp1:HYBRID_SHARD",) if world == 4 else ())


def rows_for(cal: predict.Calibration, data: dict, calibration: bool) -> list[dict[str, Any]]:
    kept = Kept(data)
    topo = Topology(data["nodes"], data["world"] // data["nodes"], rate_of(data["link"]), data.get("latency", 0.0))
    out = []
    for spec in configs_for(data["world"]):
        msgs = spans_messages(kept, 0, spec)
        if not msgs:
            continue
        measured = predict.measured_step(msgs)
        pure = predict.predict(cal, spec, topo).step_time
        share = predict.cpu_share(msgs)
        probe = predict.probe_of(msgs)
        if share and cal.share:
            speed = share / cal.share
        else:
            speed = probe / cal.probe if probe and cal.probe else None
        at_speed = predict.predict(cal, spec, topo, speed=speed).step_time if speed else math.nan
        out.append(
            {
                "topology": f"{data['nodes']} node{'s' if data['nodes'] > 1 else ''} x {topo.per_node}",
                "link": data["link"] or "-",
                "config": spec + (" (cal.)" if calibration and spec in predict.CALIBRATION_CONFIGS else ""),
                "seen": calibration and spec in predict.CALIBRATION_CONFIGS,
                "measured": measured,
                "predicted": pure,
                "at_speed": at_speed,
                "speed": speed,
                "load": data["load"],
            }
        )
    return out


def show(rows: list[dict[str, Any]]) -> None:
    head = [
        "topology",
        "link",
        "configuration",
        "measured s",
        "predicted s",
        "error",
        "at run's CPU s",
        "error",
        "CPU x",
    ]
    table = [head]
    for r in rows:
        err = r["predicted"] / r["measured"] - 1
        err2 = r["at_speed"] / r["measured"] - 1
        table.append(
            [
                r["topology"],
                r["link"],
                r["config"],
                f"{r['measured']:.3f}",
                f"{r['predicted']:.3f}",
                f"{err:+.1%}",
                f"{r['at_speed']:.3f}",
                f"{err2:+.1%}",
                f"{r['speed']:.2f}" if r["speed"] else "-",
            ]
        )
    print(render_table(table, align="lll" + "r" * 6))
    unseen = [r for r in rows if not r["seen"]]
    print()
    for key, label in (("predicted", "calibration alone"), ("at_speed", "at the run's CPU speed")):
        errs = [abs(r[key] / r["measured"] - 1) for r in unseen if not math.isnan(r[key])]
        if errs:
            print(
                f"{label:24s}: mean |error| {statistics.fmean(errs):.1%}, max {max(errs):.1%} "
                f"over {len(errs)} predicted configurations"
            )
    loads = [r["load"] for r in rows]
    print(
        f"load average (1 min) at the end of each run: {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 ranks on 2 nodes, 200mbit and 1gbit only")
    ap.add_argument(
        "--steps",
        type=int,
        default=13,
        help="steps per configuration, the first not counted (default 13; the calibration runs twice as many)",
    )
    ap.add_argument("--save", help="keep every run's messages in this folder")
    ap.add_argument("--load", help="predict again from the runs kept in this folder (no new run)")
    args = ap.parse_args()
    matrix = QUICK if args.quick else MATRIX
    t0 = time.time()
    if args.load:
        runs = [
            json.load(open(os.path.join(args.load, f))) for f in sorted(os.listdir(args.load)) if f.endswith(".json")
        ]
        cal_data = next(r for r in runs if r.get("calibration"))
        targets = [r for r in runs if not r.get("calibration")]
    else:
        print(f"calibration: 2 ranks, 1 node, no link: {', '.join(predict.CALIBRATION_CONFIGS)}", flush=True)
        cal_data = {**launch(2, 1, None, predict.CALIBRATION_CONFIGS, 2 * args.steps, costs=True), "calibration": True}
        targets = []
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            with open(os.path.join(args.save, "calibration.json"), "w") as f:
                json.dump(cal_data, f)
    cal = predict.calibrate(Kept(cal_data), predict.CALIBRATION_CONFIGS)
    print(
        f"  gloo: {cal.gloo.alpha * 1e6:.0f} µs per ring step; "
        + ", ".join(f"{k} {v * 1e9:.2f} ns/B" for k, v in cal.gloo.beta.items())
        + f"; probe {cal.probe * 1e3:.1f} ms",
        flush=True,
    )
    rows = rows_for(cal, cal_data, calibration=True)
    if not args.load:
        for world, nodes, link in matrix:
            print(f"run: {world} ranks on {nodes} node(s), link {link or '-'}", flush=True)
            data = launch(world, nodes, link, configs_for(world), args.steps)
            targets.append(data)
            if args.save:
                os.makedirs(args.save, exist_ok=True)
                with open(os.path.join(args.save, f"n{nodes}x{world}_{link or 'lo'}.json"), "w") as f:
                    json.dump(data, f)
    again: list[str] = []
    for data in targets:
        same_topology = (data["world"], data["nodes"], data["link"]) == (2, 1, None)
        for r in rows_for(cal, data, calibration=False):
            if not (same_topology and r["config"] in predict.CALIBRATION_CONFIGS):  # a second run of a calibrated one
                rows.append(r)
            elif cal.measured:
                again.append(f"{r['config']} {r['measured'] / cal.measured[r['config']] - 1:+.1%}")
    print()
    show(rows)
    if again:
        # the floor under any prediction: the calibration's own configurations, on its own
        # topology, measured again minutes later (not in the summary above)
        print(f"the calibration's configurations measured again on 1 node x 2: {', '.join(again)}")
    print(f"wall time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
