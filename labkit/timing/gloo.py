"""What a gloo collective costs between CPU ranks: on one machine's loopback, or across nodes over a link.

    from labkit.timing.gloo import GlooCosts, Topology, collective_time
    topo = Topology(nodes=2, per_node=2, rate=200e6 / 8)           # 200 Mbit/s each direction
    collective_time(costs, topo, "all_gather", 5e6, channel="world")

gloo runs each collective as a ring (all-gather: N-1 steps; all-reduce: a reduce-scatter then an
all-gather, 2(N-1) steps; reduce-scatter: as an all-reduce, see ``steps``): in each step every
rank sends 1/N of the payload to the next rank and receives 1/N from the previous one. A step ends when its
slowest transfer ends, so a step costs

    alpha + max(chunk · beta_kind,  (chunk · flows · hol - refill) / (efficiency · rate) + latency)
            (CPU: copies, the TCP stack   (the link, when the ring crosses nodes)
             and the reduction, per byte)

less, once per all-gather, what the link's bucket lets through at once (``burst``, below);
``refill``: what an emulated link's bucket got back during the step's fixed cost (below).

* ``alpha``: the fixed cost of a step (a message each way, gloo's bookkeeping, waking the
  thread), fitted with ``beta`` on one machine's loopback (``fit``);
* ``beta``: CPU seconds per byte of a chunk, per kind (a reduce-scatter also sums): on
  loopback every byte is copied by the sender's and the receiver's kernel, so the cost is
  CPU time, and it grows when more ranks share the cores (``contention``);
* the link: the ring crosses from one node to the next once per node boundary; each crossing
  is one TCP flow through the sender's uplink and the receiver's downlink, shaped per
  direction, so the two directions do not share anything (a single shared queue, as one
  ``lo`` with a ``tbf``, would halve each). Several groups at once (HSDP's replica groups,
  one per rank of a node, all-reduce together) share a node's uplink: ``flows``. TCP gets
  ``efficiency`` of the shaped rate (measured: 97-98% with tbf at 50-200 Mbit/s);
* ``latency``: the link's one-way latency, paid once per ring step that crosses nodes;
* ``hol``: an all-gather between two ranks over a link takes 3/2 of its bytes' time (``head_of_line``):
  gloo sends each rank's chunk as two halves, and a half may go only once the peer has said it
  is ready to receive it (a 48-byte notification). With two ranks, the peer's notification and
  the peer's own data share one TCP stream, so a rank that arrives after its peer has written
  its first half before its notification, and the peer's first half waits for it: three half
  times instead of two. Measured (docs/netem.md, strace of both ranks): a rank arriving more than
  the link's latency after the other always does this, and then ends one half time after the
  other, so it arrives that much later at the next collective: in FSDP's chain of gathers the
  slow order is the steady state (2.93 half times from the later arrival, 50 Mbit/s). With three
  or more ranks a rank's notifications go to the rank it receives from, on another stream, but
  through the uplink that carries another rank's data: one half time more per all-gather.

* ``burst``: an emulated link is a ``tbf``, a token bucket: an uplink idle long enough sends
  its bucket (``Topology.burst``: a millisecond at the link's rate, see
  ``labkit.launch.linkspec``) at once, and only then at the rate. The bucket refills at the
  rate while the link is idle (between collectives, while the ranks compute), so each
  all-gather gets it once, on the first step, and one right behind another collective gets
  what refilled in between (``idle``). Once, for two ranks too (measured, ``burst_saved``). An
  all-reduce, measured, gets none of an idle link's bucket. At 1 Gbit/s a millisecond is half of
  a 1 MB all-gather's half time; at 50 Mbit/s it is 2% of it. A real link has no bucket: ``burst=0``.
  Within a collective, each ring step's fixed cost (``alpha``, ``cross_alpha``: the message
  handled, no byte on the link) refills the bucket too, up to its size, and the step's first
  bytes go at once (``refill``): where the fixed cost's worth of bytes fits in the bucket, the
  link hides it. Measured (``benchmarks/link_prediction.py``, session 28, issue 50): "tiny" on
  2 nodes x 2 at 620 Mbit/s, reduce-scatters of 262 KB in six steps of 66 KB, 0.41 ms fixed
  each: 19-23 ms a step where fixed plus bytes made 30.8, their bytes alone 20.4 (every FSDP
  configuration +15..+28% without the refill, -5..+5% with it); links of 140 Mbit/s and slower
  keep a bucket of a few KB, and nothing changes there.

The costs of the CPU side and the link side overlap within a step (TCP streams the chunk
while it is copied), hence the max. This is a model of the measurements in
``benchmarks/link_prediction.py`` and ``docs/netem.md``, not of gloo's code line by line.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

KINDS = ("all_gather", "reduce_scatter", "all_reduce")


@dataclass(frozen=True)
class Topology:
    """Where the ranks are: ``nodes`` x ``per_node`` ranks (global ranks numbered node by node),
    the link between nodes (``rate`` in bytes/s each direction, one-way ``latency``), the cores they share."""

    nodes: int = 1
    per_node: int = 2
    rate: float = math.inf
    latency: float = 0.0
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    burst: float = 0.0  # bytes an idle link passes at once (an emulated link's token bucket; 0 for a real one)
    pinned: bool = False  # each rank bound to one core, rank r on core r mod cores (``--pin``)

    def per_core(self) -> int:
        """Ranks bound to one core (``pinned``): the most that share any core."""
        return -(-self.world // max(self.cores, 1))

    @property
    def world(self) -> int:
        return self.nodes * self.per_node

    def node_of(self, rank: int) -> int:
        return rank // self.per_node

    def group(self, channel: str) -> tuple[tuple[int, ...], int]:
        """Rank 0's group on ``channel`` and how many such groups run at once.

        ``world``: every rank. ``shard``: HSDP's shard group, the ranks of one node.
        ``replicate``: HSDP's replica group, one rank per node; every rank of a node is in one,
        so ``per_node`` of them run together.
        """
        if channel == "shard":
            return tuple(range(self.per_node)), self.nodes
        if channel == "replicate":
            return tuple(range(0, self.world, self.per_node)), self.per_node
        return tuple(range(self.world)), 1


@dataclass
class GlooCosts:
    """Per-machine costs of gloo on loopback (fitted by ``fit``) and the link's TCP efficiency."""

    alpha: float  # seconds per ring step
    beta: dict[str, float]  # CPU seconds per chunk byte, per kind
    ranks: int = 2  # ranks that shared the cores while these were measured
    efficiency: float = 0.97
    skew: float = 0.0  # seconds a blocking collective waits for the slowest rank, on average (one node)
    waits: tuple[float, ...] = ()  # that wait's distribution: equally likely values (quantiles), mean skew
    drift: float = 0.0  # the part of skew from the ranks' compute taking different times (see predict)
    # across a namespace boundary (two emulated nodes, no shaping: ``fit_cross``), per ring step that
    # crosses it: the fixed cost beyond ``alpha`` and the link's latency, and CPU seconds per chunk byte
    cross_alpha: float = 0.0
    cross_beta: dict[str, float] = field(default_factory=dict)
    # fits that came out without physical sense (a per-byte or per-message cost of zero or less):
    # (what, the value fitted, what was used instead or "" for nothing); ``failed_fits`` says them
    failed: tuple[tuple[str, float, str], ...] = ()
    # the kernel scheduler's slice on the calibrating machine (``scheduler_slice``): how long a rank
    # woken for its collective's last ring step waits for a core that another rank computes on
    slice: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "slice": self.slice,
            "cross_alpha": self.cross_alpha,
            "cross_beta": dict(self.cross_beta),
            "failed": [list(f) for f in self.failed],
            "alpha": self.alpha,
            "beta": dict(self.beta),
            "ranks": self.ranks,
            "efficiency": self.efficiency,
            "skew": self.skew,
            "waits": list(self.waits),
            "drift": self.drift,
        }


def scheduler_slice(cpus: int | None = None) -> float:
    """Seconds a task computing on a core keeps it before a task woken on that core runs: Linux's
    base slice (EEVDF, 6.6 and later: ``/sys/kernel/debug/sched/base_slice_ns``, readable by root
    alone; before 6.6 ``sched_min_granularity_ns``), else the kernel's default for this many online
    CPUs: 0.75 ms times ``1 + log2(min(cpus, 8))`` (``get_update_sysctl_factor``, logarithmic
    scaling): 1.5 ms on this machine's 2 cores, 3 ms from 8 on."""
    for path in ("/sys/kernel/debug/sched/base_slice_ns", "/proc/sys/kernel/sched_min_granularity_ns"):
        try:
            with open(path) as f:
                ns = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if ns > 0:
            return ns / 1e9
    n = min(max(cpus or os.cpu_count() or 1, 1), 8)
    return 0.75e-3 * (1 + int(math.log2(n)))


def steps(kind: str, g: int) -> int:
    """Ring steps of a gloo collective over ``g`` ranks. gloo runs a reduce-scatter as an all-reduce
    of the whole tensor and keeps its own shard (measured, 2 MB between 2 nodes over 50 Mbit/s:
    all-gather 190 ms, reduce-scatter 347 ms, all-reduce 339 ms), so it takes an all-reduce's steps."""
    return 2 * (g - 1) if kind in ("all_reduce", "reduce_scatter") else g - 1


def slowest(g: int) -> float:
    """The expected largest of ``g`` independent standard normal draws: 0 for one, 1/sqrt(pi) for
    two, 1.03 for four. How far past the mean the last of ``g`` ranks arrives, in units of the
    spread of one rank's arrival: a blocking collective waits for the last, so the part of a wait
    measured with 2 ranks that their arrival makes (``gloolink.group_wait``) is
    ``slowest(4) / slowest(2)``, 1.83 times as long with 4."""
    if g <= 1:
        return 0.0
    # E[max] = integral of x * g * pdf(x) * cdf(x)^(g-1) dx, on a grid fine enough for 4 digits
    n, lo, hi = 2000, -9.0, 9.0
    dx = (hi - lo) / n
    total = 0.0
    for i in range(n + 1):
        x = lo + i * dx
        pdf = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + math.erf(x / math.sqrt(2)))
        total += x * g * pdf * cdf ** (g - 1) * (0.5 if i in (0, n) else 1.0)
    return total * dx


def crossings(group: Sequence[int], topo: Topology) -> dict[int, int]:
    """Per node, the ring edges of ``group`` that leave it for another node."""
    out: dict[int, int] = {}
    for a, b in zip(group, list(group[1:]) + [group[0]]):
        if topo.node_of(a) != topo.node_of(b):
            out[topo.node_of(a)] = out.get(topo.node_of(a), 0) + 1
    return out


def collective_time(
    costs: GlooCosts,
    topo: Topology,
    kind: str,
    payload: float,
    channel: str = "world",
    speed: float = 1.0,
    idle: float = math.inf,
) -> float:
    """Seconds for one collective of ``payload`` bytes (the full tensor) on rank 0's group of ``channel``.

    ``speed``: how much slower the CPU is than when ``costs`` were measured (contention from more
    ranks on the cores, or from other work: ``contention``); it scales ``alpha`` and ``beta``, not the link.
    ``idle``: seconds the link has been idle before it (an emulated link's bucket refills meanwhile).
    """
    group, concurrent = topo.group(channel)
    g = len(group)
    if payload <= 0:
        return 0.0
    if g == 1:
        # a collective among one rank (HSDP's replica group on one node): no ring step, but the
        # process group still hands it to gloo's thread and waits for it, one step's fixed cost
        # (measured, 1 node x 4: 0.11-0.15 ms each, the median; 0.28-0.36 the mean, with the
        # waits for a core two ranks share; alpha there 0.18-0.22 ms, 0.33-0.40 at their speed)
        return costs.alpha * speed
    chunk = payload / g
    fallback = "reduce_scatter" if kind == "all_reduce" else "all_gather"  # gloo's reduce-scatter is an all-reduce
    beta = costs.beta.get(kind) or costs.beta.get(fallback, 0.0)
    cpu = chunk * beta * speed
    cross = crossings(group, topo)
    link = 0.0
    n = steps(kind, g)
    if cross:
        # a step that crosses a namespace boundary: TCP through veth and the bridge, not loopback
        # (``fit_cross``); its fixed cost outside the max (the message is sent, then the bytes flow)
        fixed = n * (costs.alpha + costs.cross_alpha) * speed
        cpu = chunk * max(beta, costs.cross_beta.get(kind) or costs.cross_beta.get(fallback, 0.0)) * speed
        if not math.isfinite(topo.rate):
            return fixed + n * cpu
    if cross and math.isfinite(topo.rate):
        flows = max(cross.values()) * concurrent  # TCP flows through the busiest uplink in one step
        rate = costs.efficiency * topo.rate
        step_bytes = chunk * flows * head_of_line(kind, g)
        # the link's bucket refills during each step's fixed cost (the message is being handled,
        # no byte flows), up to its size: the step's first bytes go through at once
        refill = min(topo.burst, fixed / n * topo.rate, step_bytes)
        link = (step_bytes - refill) / rate + topo.latency
        # the link's bucket: bytes an idle uplink passes at once, once per all-gather (the link is
        # idle between collectives, while the ranks compute; busy from one ring step to the next)
        bucket = max(min(topo.burst, idle * topo.rate) - refill, 0.0)  # tbf's bucket refills at the link's rate
        saved = burst_saved(bucket, chunk * flows, kind, n) / rate
        return fixed + max(n * cpu, n * link - saved)
    return n * (costs.alpha * speed + cpu)


def burst_saved(burst: float, step_bytes: float, kind: str, n: int) -> float:
    """Bytes of one all-gather over the link that an idle link's bucket (``Topology.burst``) lets
    through at once: up to ``burst`` of the ``n`` steps of ``step_bytes`` through the busiest uplink.

    Once per all-gather, for two ranks too. Two ranks' path crosses two idle uplinks (the late
    rank's first half, then the early rank's halves, ``head_of_line``), so it could get two; timed
    from the later rank's start it takes 1.22-1.24 times its chunk's time at 1 Gbit/s, where two
    buckets make it 1.09 and one 1.32 (at 200 and 50 Mbit/s the bucket is a few percent and
    either fits).

    An all-reduce (and gloo's reduce-scatter, which is one) gets none of it, measured: 1 MB
    between 2 nodes at 1 Gbit/s took 9.32 ms with the 125 KB bucket and 9.50 ms with a 19 KB one
    (the bucket would save 0.87 ms); in training its median is its bytes' time (0.97-1.03), where
    the bucket would make it 0.88 at 1 Gbit/s."""
    if burst <= 0 or kind != "all_gather":
        return 0.0
    return min(burst, n * step_bytes)


def head_of_line(kind: str, g: int) -> float:
    """How many times its bytes' time a collective over a link takes, from gloo's protocol.

    An all-gather: one half chunk more than its 2(g-1) halves, (2(g-1) + 1) / (2(g-1)): 3/2 for
    two ranks (see the module's docstring); for more, the first notification crosses an uplink
    queue that holds another rank's first half (4 ranks on 2 nodes, 50 Mbit/s: 6.9-7.5 half times
    for 6, measured).

    An all-reduce (and gloo's reduce-scatter, which is one) between two ranks: 1. It moves many
    small pieces, and a notification behind one waits little (bare, measured: x1.02-1.17). With
    three or more ranks its notifications take the same path as an all-gather's, through the
    uplink that carries another rank's data, and it pays the same one half chunk more, over its
    4(g-1) halves: 13/12 for four. Measured, 2 nodes x 2 at 50 Mbit/s: FSDP1's reduce-scatters of
    1 MB took 273-281 ms where its bytes take 262 ms (every rank's typical steps; the one after the
    last unit's backward waits for the others too); bare all-reduces of 1 and 4 MB after a barrier
    x1.04-1.05 at the fastest, x1.18-1.20 the median."""
    if g < 2:
        return 1.0
    if kind == "all_gather":
        halves = 2 * (g - 1)
    elif g >= 3:
        halves = 4 * (g - 1)
    else:
        return 1.0
    return (halves + 1) / halves


def link_slack(
    costs: GlooCosts, topo: Topology, kind: str, payload: float, channel: str = "world", idle: float = math.inf
) -> float:
    """How much longer the link makes this collective than the CPU work alone (0 on one node).

    A blocking collective waits for the slowest rank (``GlooCosts.skew``); that wait is CPU time
    (the other rank still computing, or its copies queued behind compute on the shared cores), so
    it adds to the collective's CPU side, under the same max as its copies: a link that takes
    longer than the CPU work hides it. Measured: over 50 Mbit/s to 1 Gbit/s between two nodes
    the steps show none of the waiting that loopback shows (2.6 ms per collective on this machine)."""
    local = Topology(topo.nodes, topo.per_node, math.inf, 0.0, topo.cores)
    return max(
        0.0,
        collective_time(costs, topo, kind, payload, channel, idle=idle)
        - collective_time(costs, local, kind, payload, channel),
    )


def contention(ranks: int, cores: int, base_ranks: int) -> float:
    """How much slower each rank's CPU work runs with ``ranks`` busy ranks than with ``base_ranks``,
    on ``cores`` cores and nothing else running: ``max(1, ranks/cores) / max(1, base_ranks/cores)``."""
    return max(1.0, ranks / cores) / max(1.0, base_ranks / cores)


def fit(samples: Mapping[str, Mapping[str, float]], ranks: int) -> GlooCosts:
    """``alpha`` and ``beta`` from collectives timed on loopback: ``{kind: {payload bytes: seconds}}``.

    Least squares of ``seconds = steps · (alpha + chunk · beta_kind)``, one alpha for all kinds
    (the smallest payloads fix it, the largest each kind's beta). A negative fit (noise) falls
    back to alpha from the smallest payloads and beta from the largest.
    """
    rows = []  # (steps, steps*chunk one-hot per kind, seconds)
    for k, by_size in samples.items():
        for size, seconds in by_size.items():
            n = steps(k, ranks)
            rows.append((k, n, n * float(size) / ranks, float(seconds)))
    kinds = sorted({k for k, *_ in rows})
    alpha = _fit_alpha(rows)
    beta = {}
    for k in kinds:
        mine = [(x, s - n * alpha) for kk, n, x, s in rows if kk == k]
        sxx = math.fsum(x * x for x, _ in mine)
        beta[k] = max(math.fsum(x * y for x, y in mine) / sxx, 0.0) if sxx else 0.0
    return GlooCosts(alpha, beta, ranks)


def fit_cross(
    samples: Mapping[str, Mapping[str, float | Sequence[float]]], ranks: int, alpha: float, latency: float
) -> tuple[float, dict[str, float], list[tuple[str, float, str]]]:
    """What a ring step across a namespace boundary costs beyond loopback's ``alpha``, from bare
    collectives timed between two emulated nodes with no shaping (``{kind: {payload: seconds}}``, or
    each payload's seconds in every launch, every ring step crossing): the fixed part (the median per
    step of the payloads up to 256 KB in their fast mode,
    less ``alpha`` and the boundary's own one-way ``latency``, which a prediction adds as the
    link's) and, per kind, CPU seconds per chunk byte (the largest payload, 1 MB or more: veth, the
    bridge and both TCP stacks copy every byte; loopback copies it too, so this replaces loopback's
    ``beta`` on such a step).

    Returns (fixed, per-byte by kind, failed fits): a per-byte cost of zero or less is no fit, and
    is left out (loopback's then stands) and named."""

    def launches(sec: float | Sequence[float]) -> list[float]:
        return [float(x) for x in sec] if isinstance(sec, Sequence) else [float(sec)]

    rows = [
        (k, steps(k, ranks), float(size) / ranks, statistics.median(launches(sec)))
        for k, by in samples.items()
        for size, sec in by.items()
    ]
    if not rows:
        return 0.0, {}, []
    # every launch's payloads up to 256 KB, whose bytes cost little, per ring step: their times are
    # bimodal (0.1-0.5 ms a step, or the scheduler's tick: one of them alone is as often 3.6 ms as
    # 0.4), and the slow mode is a wait for a core, which the calibration's own waits carry. The
    # fixed part is the fast mode's median (under four times the fastest): its fastest alone is
    # loopback's alpha again (0 left over in seven kept runs), and a median over launches fell in the
    # slow mode where three of four launches did (1348 µs a step, session 29; 145-301 in other runs)
    per_step = [
        x / steps(k, ranks)
        for k, by in samples.items()
        for size, sec in by.items()
        for x in launches(sec)
        if float(size) <= 2**18
    ]
    fast = [x for x in per_step if x < 4 * min(per_step)] if per_step else []
    fixed = max(statistics.median(fast) - alpha - latency, 0.0) if fast else 0.0
    per_byte, failed = {}, []
    for kind in sorted({k for k, *_ in rows}):
        big = [(x, s / n) for k, n, x, s in rows if k == kind and x * ranks >= 2**20]
        if not big:
            continue
        x, per = max(big)  # the largest payload: the fixed part's noise least of it
        value = (per - alpha - fixed - latency) / x
        if value > 0:
            per_byte[kind] = value
        else:
            failed.append((f"cross {kind} ns/B", value * 1e9, "loopback's"))
    return fixed, per_byte, failed


def _fit_alpha(rows: list[tuple[str, int, float, float]]) -> float:
    smallest = min(x for _, _, x, _ in rows)
    per_step = [s / n for _, n, x, s in rows if x <= 4 * smallest]
    return max(statistics.median(per_step), 0.0) if per_step else 0.0
