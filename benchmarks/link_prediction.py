"""Predicted against measured step time, per configuration, from ONE calibration (emulated nodes and links).

    .venv/bin/python benchmarks/link_prediction.py                 # the whole matrix (about 15 min, idle)
    .venv/bin/python benchmarks/link_prediction.py --quick         # 2 nodes x 1 rank, 2 links
    .venv/bin/python benchmarks/link_prediction.py --save DIR      # keep every run's messages
    .venv/bin/python benchmarks/link_prediction.py --load DIR      # predict again from kept runs

The calibration: 2 ranks on one node, no link, each of ``predict.CALIBRATION_CONFIGS``
(DDP, FSDP1 FULL_SHARD BACKWARD_PRE, FSDP2 with implicit prefetch) trained a few steps, and
bare collectives timed (``labkit.testing.link_job``), in twenty-four launches pooled. The matrix:
for each topology (2 and 4 ranks on 1 and 2 emulated nodes, links from 50 Mbit/s to 5 Gbit/s,
``labkit.launch.netem``; ``MATRIX``), runs (twelve over 1 Gbit/s and faster, one over slower links)
of every configuration: DDP, FSDP1 FULL_SHARD with each backward prefetch, SHARD_GRAD_OP,
HYBRID_SHARD (4 ranks: sharded within a node, replicated across), FSDP2 implicit and explicit.
The calibration's launches are interleaved with the matrix's (``schedule``; ``--sequential``: the
calibration first), so that the machine's drift falls on both alike. Each configuration is
predicted from the calibration alone (``labkit.timing.predict``): no measurement of the matrix
enters it.

Two predictions per row:

* ``predicted``: the calibration alone. More ranks than cores slow every rank's CPU work by
  what they make of each other (``predict.runnable``), as on a machine that runs nothing else;
* ``at run's pace``: the same, told how fast a core ran during the run against the calibration
  (``predict.pace_of``: the CPU time the speed probe, a fixed matrix computation every rank
  times before each step, got, the mean over the ranks; not its wall time, which four ranks on
  two cores double). On
  this virtual machine a core's speed moves by 10% within a minute with nothing else running,
  and a new process lands on faster or slower memory (the same block's forward, in six fresh
  processes one after the other: 3.97-4.42 ms; in one process over 30 s: 4.21-4.59 ms); the
  calibration's steps carry the speed of its minute, every row its own. This column says what
  the model gets wrong once that is known; the first says what a prediction made ahead gets.
  Runs kept before the probe's CPU time was recorded use its wall time, 2 ranks only.

A third line says what the runs themselves allow (``noise_floor``): the mean and max |error| that
a model with no error of its own would show, from how far each row's launches (or, run once, its
steps) and the calibration's put their measured steps (``spreads``). It leaves out the drift
between the calibration and a row, which the second column takes out.

Every rank is bound to a core (``pin=True``, ``--no-pin`` to leave them to the scheduler): with
4 ranks on 2 cores the scheduler places them differently in each launch, and the same
configuration's step moved with it by up to 17% from one matrix to the next; bound, the 4 ranks
run 15% faster and the model knows how they share a core (``Topology.pinned``).

Targets (issue 23): mean |error| at most 5%, max at most 10%. docs/netem.md has the numbers of
the last runs on this 2-core virtual machine, idle.

The measured step is the mean of a configuration's typical steps (the first, and any over 1.5
times the median, left out), as the calibration's. On this 2-core machine, idle, one step of the
same configuration varies by 20% from the next (100-165 ms at 5 Gbit/s), and a new process moves
it again: the same configuration on one node came out 114, 135 and 130 ms in three launches a
minute apart, each within 2% over its own steps; over nine kept matrices, a row's launches
spread by 3.5% (standard deviation, median over rows; up to 19%). More steps in one process do
not average that out; more processes do. So every topology whose link is 1 Gbit/s or faster runs
``--launches`` times (12) with ``--steps`` steps each (7, the first not counted), pooled (``pool``):
72 steps from twelve processes, where three launches of 13 steps gave 36 from three. The calibration
runs twice as many launches of twice as many steps: every row inherits its error, one flavor's
rows all the same way, and a launch's speed is most of what a prediction from the calibration
alone misses (docs/netem.md, "History", has how six launches and twelve compared). Over a slower
link a step is the link's and moves 1% from one launch to the next: one launch.
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
import random
import statistics
import time
from typing import Any

from labkit.fmt import render_table
from labkit.timing import predict
from labkit.timing.calibrate import spans_messages, typical
from labkit.timing.gloo import Topology
from labkit.wire.protocol import TYPE, Msg
from labkit.wire.setting import Flavor

CONFIGS = (
    str(Flavor.DDP),
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


def burst_of(link: str | None) -> float:
    """Bytes the emulated link's token bucket passes at once after idle (``LinkSpec.burst``)."""
    if link is None:
        return 0.0
    from labkit.launch.netem import parse_link

    return float(parse_link(link).burst())


def job(configs: tuple[str, ...], steps: int, costs: bool = False) -> str:
    return f"from labkit.testing.link_job import main\nmain('small', {steps}, 8, {list(configs)!r}, costs={costs})\n"


def launch(
    world: int,
    nodes: int,
    link: str | None,
    configs: tuple[str, ...],
    steps: int,
    costs: bool = False,
    pin: bool = True,
) -> dict:
    """One run, each rank bound to a core (``pin``); what the benchmark keeps of it (JSON-able)."""
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
        pin=pin,
        # labkit's grading observer fingerprints every collective a job issues itself (sums of the
        # tensor in float64, before and after): the bare collectives timed here came out 1-1.5 ms
        # slower per 1 MB (the calibration's alpha with them), and every step 2-4% slower
        env={"LABKIT_OBSERVE": "0"},
    )
    latency = run.emulation.latency_s if getattr(run, "emulation", None) else 0.0
    return {
        "world": world,
        "nodes": nodes,
        "link": link,
        "pinned": pin,
        "latency": latency,
        "load": os.getloadavg()[0],
        "values": {str(r): v for r, v in run.values.items()},
        "events": {str(r): [m for m in ev if m.get(TYPE) == Msg.SPANS] for r, ev in run.events.items()},
    }


def pool(launches: list[dict]) -> dict:
    """Several launches of one topology as one run: every launch's steps (each launch's first step
    of each configuration left out, as ``measured_step`` leaves out the run's first), and the bare
    collectives' times as the median per size over the launches.

    Why launches and not only steps: on this VM the same configuration on the same topology, in a
    new process, comes out 3-5% faster or slower than in the last (four launches of the
    calibration back to back, idle: FSDP1 120-130 ms, FSDP2 124-137 ms, each within +-2% over
    its own 26 steps); more steps in one process do not average that out."""
    if len(launches) == 1:
        return launches[0]
    events: dict[str, list] = {}
    for i, data in enumerate(launches):
        for rank, msgs in data["events"].items():
            seen: set = set()
            for m in msgs:
                if i and m.get("config") not in seen:  # this launch's first step of the configuration
                    seen.add(m.get("config"))
                    continue
                events.setdefault(rank, []).append(m)
    values = {r: dict(v) for r, v in launches[0]["values"].items()}
    bare = [d["values"].get("0", {}).get("gloo") for d in launches]
    if all(bare):
        values["0"]["gloo"] = {
            kind: {size: statistics.median(b[kind][size] for b in bare) for size in sizes}
            for kind, sizes in bare[0].items()
        }
    return {**launches[0], "events": events, "values": values, "launches": len(launches)}


def launch_probe(data: dict) -> float | None:
    """The speed probe's CPU time in one launch (every rank's, the mean over its configurations)."""
    kept = Kept(data)
    probes = [predict.group_probe(kept, spec) for spec in predict.CALIBRATION_CONFIGS]
    probes = [p for p in probes if p]
    return statistics.fmean(probes) if probes else None


def quiet(launches: list[dict], slack: float = 1.05) -> tuple[list[dict], list[str]]:
    """The calibration's launches that ran at the machine's usual speed, and a note on each left out:
    one whose speed probe got more than ``slack`` times the launches' median CPU time ran while
    something else took the machine's memory and caches (in one matrix its first five launches,
    about a minute, got 8-28% more, the seven after them within 3%, and the predictions from all
    twelve came out up to 23% high). The rule looks at the probe alone, never at the steps it predicts; at
    least half the launches stay. Launches kept before the probe's CPU time was recorded all stay.

    For a calibration run first (``--sequential``) only: interleaved with the rows, its slow
    launches are the machine's minutes that the rows beside them ran in too, and leaving them out
    made the calibration faster than every row (docs/netem.md, "History")."""
    probes = [launch_probe(data) for data in launches]
    if any(p is None for p in probes) or len(probes) < 3:
        return launches, []
    median = statistics.median(probes)
    kept = [data for data, p in zip(launches, probes) if p <= slack * median]
    notes = [f"launch {i}: probe {p / median - 1:+.0%}" for i, p in enumerate(probes) if p > slack * median]
    return kept, notes


class Kept:
    """A kept run, as ``predict.calibrate`` and ``spans_messages`` read a ``Run``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.events = {int(r): ev for r, ev in data["events"].items()}
        self.values = {int(r): v for r, v in data["values"].items()}


def group_steps(kept: Kept, spec: str) -> list[dict[str, Any]]:
    """Rank 0's steps of ``spec``, each from the last rank's start to the last rank's end: the step
    as the group takes it, which is what the model predicts. Every step starts after a barrier (the
    speed probe's), so the steps line up rank by rank. Rank 0's own span is not always it: in DDP's
    last all-reduce over nodes rank 0's last send goes across and its last receive comes from its
    own node, so it leaves one chunk's link time before the others (173 ms at 50 Mbit/s, measured)
    and waits for them at the next barrier, outside any step: on 2 nodes x 2 over 50 Mbit/s the
    group's step is 13-14% longer than rank 0's. FSDP's last
    reduce-scatter, an all-reduce on gloo, does the same with a smaller chunk: 1-3% there; on one
    node and over faster links the two agree within 1% (up to 2.7% on 1 node x 4 unbound)."""
    per_rank = [spans_messages(kept, r, spec) for r in sorted(kept.events)]
    per_rank = [msgs for msgs in per_rank if msgs]
    if not per_rank:
        return []
    n = min(len(msgs) for msgs in per_rank)
    return [
        {
            **per_rank[0][i],
            "start": max(msgs[i]["start"] for msgs in per_rank),
            "end": max(msgs[i]["end"] for msgs in per_rank),
        }
        for i in range(n)
    ]


def configs_for(world: int) -> tuple[str, ...]:
    return CONFIGS + (("fsdp1:HYBRID_SHARD",) if world == 4 else ())


def variance(launches: list[dict], spec: str) -> tuple[float, int] | None:
    """How much a row's measured step moves, relative to it: (variance, samples). Several launches:
    their measured steps' variance (what moves from one launch to the next: a process's speed, the
    machine's minute); one launch: its typical steps' (over a slow link a step moves 1-1.5% from
    one launch to the next, measured: the steps' own variance is the larger part)."""
    steps = []
    for data in launches:
        msgs = group_steps(Kept(data), spec)
        if msgs:
            steps.append(predict.measured_step(msgs))
    if len(steps) < 2 and launches:
        msgs = group_steps(Kept(launches[0]), spec)
        kept, _ = typical(msgs[1:] or msgs) if msgs else ([], [])
        steps = [m["end"] - m["start"] for m in kept]
    if len(steps) < 2:
        return None
    return statistics.variance(steps) / statistics.fmean(steps) ** 2, len(steps)


def spreads(rows: list[dict[str, Any]]) -> None:
    """Each row's ``spread``: the relative standard error of its measured step, from the variance
    of its topology's rows pooled (three launches give a row's own a factor of two either way;
    the configurations of one topology run in the same launches)."""
    by_topology: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for r in rows:
        if r["variance"]:
            by_topology.setdefault((r["topology"], r["link"]), []).append(r["variance"])
    for r in rows:
        pooled = by_topology.get((r["topology"], r["link"]))
        r["spread"] = (
            math.sqrt(statistics.fmean(v for v, _ in pooled) / r["variance"][1]) if r["variance"] and pooled else None
        )


def noise_floor(rows: list[dict[str, Any]], calibration: dict[str, float], draws: int = 4000) -> tuple[float, ...]:
    """Mean and max |error| that a model with no error of its own would show on these runs, from
    their repeatability alone: each row's measured step off by a normal draw of its ``spread`` (``spreads``),
    and every row of a flavor by the calibration's draw for that flavor (its profile is in all of
    them). The median over ``draws`` matrices, and the max's 90th percentile. What it leaves out:
    the machine's drift between the calibration and a row (the line of the calibration's
    configurations measured again shows it)."""
    rng = random.Random(0)
    means, maxes = [], []
    for _ in range(draws):
        bias = {flavor: rng.gauss(0.0, se) for flavor, se in calibration.items()}
        errs = [abs(bias.get(r["flavor"], 0.0) + rng.gauss(0.0, r["spread"])) for r in rows]
        means.append(statistics.fmean(errs))
        maxes.append(max(errs))
    means.sort()
    maxes.sort()
    return means[draws // 2], maxes[draws // 2], maxes[int(draws * 0.9)]


def rows_for(
    cal: predict.Calibration, data: dict, calibration: bool, launches: list[dict] | None = None
) -> list[dict[str, Any]]:
    kept = Kept(data)
    topo = Topology(
        data["nodes"],
        data["world"] // data["nodes"],
        rate_of(data["link"]),
        data.get("latency", 0.0),
        burst=burst_of(data["link"]),
        pinned=data.get("pinned", False),  # runs kept before --pin were not
    )
    out = []
    for spec in configs_for(data["world"]):
        msgs = spans_messages(kept, 0, spec)
        if not msgs:
            continue
        measured = predict.measured_step(group_steps(kept, spec))
        pure = predict.predict(cal, spec, topo).step_time
        pace = predict.pace_of(cal, kept, spec)
        probe = predict.probe_of(msgs)
        if pace is None and topo.world <= topo.cores and probe and cal.probe:
            pace = probe / cal.probe  # runs kept before the probe's CPU time was: no wait for a core in it
        at_pace = predict.predict(cal, spec, topo, pace=pace).step_time if pace else math.nan
        out.append(
            {
                "topology": f"{data['nodes']} node{'s' if data['nodes'] > 1 else ''} x {topo.per_node}",
                "link": data["link"] or "-",
                "config": spec + (" (cal.)" if calibration and spec in predict.CALIBRATION_CONFIGS else ""),
                "seen": calibration and spec in predict.CALIBRATION_CONFIGS,
                "measured": measured,
                "predicted": pure,
                "at_pace": at_pace,
                "pace": pace,
                "load": data["load"],
                "flavor": predict.Config.parse(spec).key,
                "variance": variance(launches or [data], spec),
            }
        )
    spreads(out)
    return out


def show(rows: list[dict[str, Any]], calibration: dict[str, float] | None = None) -> None:
    head = [
        "topology",
        "link",
        "configuration",
        "measured s",
        "predicted s",
        "error",
        "at run's pace s",
        "error",
        "pace",
    ]
    table = [head]
    for r in rows:
        err = r["predicted"] / r["measured"] - 1
        err2 = r["at_pace"] / r["measured"] - 1
        table.append(
            [
                r["topology"],
                r["link"],
                r["config"],
                f"{r['measured']:.3f}",
                f"{r['predicted']:.3f}",
                f"{err:+.1%}",
                "-" if math.isnan(err2) else f"{r['at_pace']:.3f}",
                "-" if math.isnan(err2) else f"{err2:+.1%}",
                f"{r['pace']:.2f}" if r["pace"] else "-",
            ]
        )
    print(render_table(table, align="lll" + "r" * 6))
    unseen = [r for r in rows if not r["seen"]]
    print()
    for key, label in (("predicted", "calibration alone"), ("at_pace", "at the run's pace")):
        errs = [abs(r[key] / r["measured"] - 1) for r in unseen if not math.isnan(r[key])]
        if errs:
            print(
                f"{label:24s}: mean |error| {statistics.fmean(errs):.1%}, max {max(errs):.1%} "
                f"over {len(errs)} predicted configurations"
            )
    spread_known = [r for r in unseen if r["spread"] is not None]
    if calibration is not None and spread_known:
        mean, top, top90 = noise_floor(spread_known, calibration)
        print(
            f"{'the runs alone (floor)':24s}: mean |error| {mean:.1%}, max {top:.1%} (one matrix in ten: over "
            f"{top90:.1%}) for a model with no error, from each row's and the calibration's spread"
        )
    loads = [r["load"] for r in rows]
    print(
        f"load average (1 min) at the end of each run: {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores"
    )


def keep(folder: str | None, name: str, data: dict) -> None:
    if folder:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{name}.json"), "w") as f:
            json.dump(data, f)


def schedule(matrix: list, launches: int, interleave: bool = True) -> list[tuple[Any, int]]:
    """The order of the launches, ``(topology or "calibration", index)``.

    Over a slow link a step is the link's, the same from one launch to the next within 1-1.5% (six
    matrices): one launch; a fast one is CPU work, which moves per launch: ``launches`` of it, and
    twice as many of the calibration. Interleaved (the default), they run round by round, two of
    the calibration and one of each fast topology per round, a slow topology's one launch in a
    round of its own turn: the machine's speed drifts by 10-39% over the benchmark's
    minutes, and this way the drift falls on the calibration
    and on every row alike, where in sequence the calibration had the first minutes' speed and
    each row its own minutes'. No row's measurement enters the calibration either way.
    """
    fast = [t for t in matrix if rate_of(t[2]) >= rate_of("1gbit")]
    slow = [t for t in matrix if t not in fast]
    if not interleave:
        order: list[tuple[Any, int]] = [("calibration", i) for i in range(2 * launches)]
        return order + [(t, i) for t in matrix for i in range(launches if t in fast else 1)]
    slots: dict[int, list] = {}  # the slow topologies, spread over the rounds
    for k, t in enumerate(slow):
        slots.setdefault(min(launches - 1, int((k + 0.5) * launches / len(slow))), []).append(t)
    order = []
    for i in range(launches):
        order += [("calibration", 2 * i), ("calibration", 2 * i + 1)] + [(t, i) for t in fast]
        order += [(t, 0) for t in slots.get(i, [])]
    return order


def ran_interleaved(folder: str, cal_launches: list[dict]) -> bool:
    """Whether a kept matrix ran its calibration interleaved with its rows: as each calibration
    launch says, or, kept before they said it, from the files' times (each was written as its
    launch ended: a calibration launch after a row's, interleaved)."""
    said = [d["interleaved"] for d in cal_launches if "interleaved" in d]
    if said:
        return all(said)
    times = {f: os.path.getmtime(os.path.join(folder, f)) for f in os.listdir(folder) if f.endswith(".json")}
    rows = [t for f, t in times.items() if not f.startswith("calibration.")]
    return bool(rows) and max(t for f, t in times.items() if f.startswith("calibration.")) > min(rows)


def run_matrix(matrix: list, args: argparse.Namespace) -> tuple[list[dict], list[tuple[dict, list[dict]]]]:
    """Every launch of the calibration and of the matrix, in ``schedule``'s order; each kept (``--save``)."""
    print(
        f"calibration: 2 ranks, 1 node, no link, {2 * args.launches} launches: {', '.join(predict.CALIBRATION_CONFIGS)}"
        + (", interleaved with the matrix's launches" if args.interleave else ""),
        flush=True,
    )
    runs: dict[Any, list[dict]] = {}
    for what, i in schedule(matrix, args.launches, args.interleave):
        if what == "calibration":
            data = {
                **launch(2, 1, None, predict.CALIBRATION_CONFIGS, 2 * args.steps, costs=True, pin=args.pin),
                "calibration": True,
                "interleaved": args.interleave,
            }
            keep(args.save, f"calibration.r{i}", data)
        else:
            world, nodes, link = what
            print(f"run: {world} ranks on {nodes} node(s), link {link or '-'}, launch {i + 1}", flush=True)
            data = launch(world, nodes, link, configs_for(world), args.steps, pin=args.pin)
            keep(args.save, f"n{nodes}x{world}_{link or 'lo'}.r{i}", data)
        runs.setdefault(what, []).append(data)
    targets = [(pool(runs[t]), runs[t]) for t in matrix]
    return runs["calibration"], targets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 ranks on 2 nodes, 200mbit and 1gbit only")
    ap.add_argument(
        "--steps",
        type=int,
        default=7,
        help="steps per configuration and launch, the first not counted (default 7; the calibration runs twice as many)",
    )
    ap.add_argument(
        "--launches",
        type=int,
        default=12,
        help="launches of each topology whose link is 1 Gbit/s or faster, pooled (default 12; the calibration twice as many)",
    )
    ap.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="leave the ranks unbound (the scheduler places them; by default each is bound to a core)",
    )
    ap.add_argument(
        "--sequential",
        dest="interleave",
        action="store_false",
        help="the calibration's launches first, then each topology's in turn (by default they are interleaved: ``schedule``)",
    )
    ap.add_argument("--save", help="keep every run's messages in this folder")
    ap.add_argument("--load", help="predict again from the runs kept in this folder (no new run)")
    args = ap.parse_args()
    matrix = QUICK if args.quick else MATRIX
    t0 = time.time()
    if args.load:
        kept: dict[str, list[dict]] = {}
        # calibration.r0.json, ...: in the order they ran (r10 after r9)
        for f in sorted(os.listdir(args.load), key=lambda f: (f.split(".")[0], len(f), f)):
            if f.endswith(".json"):
                kept.setdefault(f.split(".")[0], []).append(json.load(open(os.path.join(args.load, f))))
        cal_launches = kept.pop("calibration")
        targets = [(pool(launches), launches) for launches in kept.values()]
        interleaved = ran_interleaved(args.load, cal_launches)
    else:
        cal_launches, targets = run_matrix(matrix, args)
        interleaved = args.interleave
    cal_launches, left_out = quiet(cal_launches) if not interleaved else (cal_launches, [])
    if left_out:
        print(f"  left out of the calibration (the machine was busy): {'; '.join(left_out)}", flush=True)
    cal_data = pool(cal_launches)
    cal = predict.calibrate(Kept(cal_data), predict.CALIBRATION_CONFIGS)
    print(
        f"  gloo: {cal.gloo.alpha * 1e6:.0f} µs per ring step; "
        + ", ".join(f"{k} {v * 1e9:.2f} ns/B" for k, v in cal.gloo.beta.items())
        + f"; probe {cal.probe * 1e3:.1f} ms",
        flush=True,
    )
    rows = rows_for(cal, cal_data, calibration=True, launches=cal_launches)
    # how far the calibration's own steps could be off, per flavor: every prediction inherits it
    cal_spread = {r["flavor"]: r["spread"] for r in rows if r["seen"] and r["spread"] is not None}
    cal_measured = {r["config"].removesuffix(" (cal.)"): r["measured"] for r in rows if r["seen"]}
    again: list[str] = []
    for data, launches in targets:
        same_topology = (data["world"], data["nodes"], data["link"]) == (2, 1, None)
        for r in rows_for(cal, data, calibration=False, launches=launches):
            if not (same_topology and r["config"] in predict.CALIBRATION_CONFIGS):  # a second run of a calibrated one
                rows.append(r)
            elif r["config"] in cal_measured:
                again.append(f"{r['config']} {r['measured'] / cal_measured[r['config']] - 1:+.1%}")
    print()
    show(rows, cal_spread)
    if again:
        # the floor under any prediction: the calibration's own configurations, on its own
        # topology, measured again minutes later (not in the summary above)
        print(f"the calibration's configurations measured again on 1 node x 2: {', '.join(again)}")
    print(f"wall time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
