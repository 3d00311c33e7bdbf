"""What a step would take on another interconnect: a schedule simulator (its output is *simulated*).

    from labkit import simulate
    prof = simulate.profile_from_run(run)     # measured compute, host overhead and bytes
    simulate.simulate(prof, "pcie4", backward_prefetch=None)
    print(simulate.table(simulate.sweep(prof, links=["nvlink4", "ib100"])))

It replays one measured step: each unit's forward and backward compute time, the host
overhead between ops, and the bytes of its gathered parameters and gradients, as recorded
by ``labkit.timeline`` and calibrated by ``labkit.timing.calibrate``.
The collectives are re-timed on the chosen link with the ring algorithm cost,
``(N-1)·latency + (N-1)/N·bytes/bandwidth`` (twice that for an all-reduce), and
scheduled the way FSDP issues them:

* one compute stream, one comm stream per process group (NCCL runs every collective of
  a group on one stream, in the order they were issued, whichever stream issued them);
* a unit computes once its all-gather is done; a reduce-scatter starts once the unit's
  gradients are computed; the optimizer starts once every gradient is reduced;
* the CPU runs ahead of the device (``cpu_bound=False``, a GPU that is the bottleneck),
  except where FSDP makes it wait: ``limit_all_gathers`` blocks the CPU before an
  all-gather while two earlier units are not yet freed (FSDP1's rate limiter);
* prefetch decides *when* an all-gather is issued, hence its place in the comm stream:
  ``BACKWARD_PRE`` before the current unit's backward, ``BACKWARD_POST`` after it
  (FSDP frees the current unit first, so the gather waits for that compute), ``None``
  when the unit's own backward begins, i.e. behind the previous reduce-scatter;
  ``forward_prefetch`` in the current unit's pre-forward instead of the next unit's.
  With the CPU ahead, forward prefetch changes nothing, as FSDP's docs say: it helps
  CPU-bound runs (``cpu_bound=True``);
* FSDP2's asynchronous unshards on CPU (``async_gather``, explicit prefetch over gloo): the rank
  waits for a unit's gather, copies the gathered bytes out (the gather's host work), and only
  then issues the next unit's prefetch (torch 2.13's ``wait_for_unshard`` before
  ``_prefetch_unshard``), so one gather at a time runs under the compute; gloo's thread shares
  the cores with the rank only while the rank has work (``settle``);
* host overhead (``labkit.timing.calibrate``: FSDP's hooks, autograd, the loss, Python: the
  measured step time that no span covers) is CPU time: before each compute segment, each
  collective (per kind) and the optimizer, and after it. With the CPU ahead of a GPU it
  is hidden; on a CPU run it adds up.

``cpu_bound=True, sync_comm=True`` is what a CPU/gloo run does (compute and every FSDP
collective block the one thread; DDP's bucket all-reduces run in the background). With
the link fitted to that run (``fit_link``) the replay lands on the measured step:
``compare_to_measured`` says how near (``benchmarks/comm_overlap.py``: within 10%).

What is calibrated and what is assumed. Calibrated from the measured run: each unit's
forward and backward compute, the optimizer step, the host overhead per segment and per
collective kind, and the bytes of every collective (see ``labkit.timing.calibrate``). Assumed:
the link (a preset, your own ``link(bandwidth, latency)``, or ``fit_link`` for the run's
own), the ring algorithm's cost for each collective, one comm stream per process group,
and that compute and host overhead stay what they were measured whatever the link (a
what-if on another link varies only the link; ``compute_scale`` is a further, explicit
assumption).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from labkit.i18n import t
from labkit.timing.calibrate import Profile, fit_link, profile_from_run
from labkit.timing.links import LINKS, Link, link
from labkit.timing.result import HYBRID, SHARDED, Result, table
from labkit.timing.spans import length, union
from labkit.wire.records import Span, Stream, on, span
from labkit.wire.setting import Flavor, Prefetch, Strategy

RESHARDING = tuple(s for s in Strategy if s.reshards)  # free a unit's parameters after its forward

__all__ = [
    "LINKS",
    "PREFETCH",
    "Link",
    "Profile",
    "Result",
    "compare_to_measured",
    "fit_link",
    "link",
    "profile_from_run",
    "simulate",
    "sweep",
    "table",
]


# -- the schedule ------------------------------------------------------------------------

PREFETCH = (Prefetch.BACKWARD_PRE, Prefetch.BACKWARD_POST, None)


class _Schedule:
    """Walks one step in the CPU's program order, placing each op on its stream."""

    def __init__(self, prof: Profile, ln: Link, o: dict[str, Any], inter: Link) -> None:
        self.prof, self.link, self.inter, self.o = prof, ln, inter, o
        self.cpu = 0.0  # when the CPU reaches the current point of the program
        self.compute_free = 0.0
        self.comm_free: dict[str, float] = {}
        self.gathered: dict[str, float] = {}  # unit -> time its all-gather completes
        self.held: dict[str, float] = {}  # unit -> time its gather began on the device
        self.held_spans: list[tuple[str, float, float]] = []
        self.peak_units, self.peak_bytes = 0, 0.0
        self.free_events: list[float] = []  # FSDP1's rate limiter queue
        self.reduce_done = 0.0
        self.spans: list[Span] = []
        self.finishes: dict[str, list[float]] = {}  # unit -> its asynchronous gather's possible ends
        # unit -> (channel, start, durations alone, durations beside compute, span index) of an
        # asynchronous gather whose end depends on the compute still to come (``settle``)
        self.pending: dict[str, tuple[str, float, list[float], list[float], int]] = {}
        self.charged: list[tuple[float, float]] = []  # CPU time gloo's thread took from the rank
        self.charged_for: dict[str, tuple[float, float]] = {}  # unit -> its gather's charge
        n = prof.world_size
        self.shard = o.get("shard_size") or (n if o["strategy"] not in HYBRID else min(n, 2))

    def comm(
        self,
        kind: str,
        unit: str,
        payload: float,
        group: int,
        channel: str = "shard",
        ready: float = 0.0,
        last: bool = False,
    ) -> float:
        ln = self.inter if channel == "replicate" else self.link
        self.settle()
        ddp = self.o["strategy"] == Strategy.DDP
        unsharding = bool(self.o.get("async_gather") and kind == "all_gather")
        background = unsharding or (ddp and self.o["sync_comm"])
        if not unsharding:  # an asynchronous unshard's work comes once it is done (``wait_gather``)
            self.host(kind, self.prof.hook.get(kind, 0.0))  # FSDP's work around the collective, on the CPU
        start = max(self.cpu, self.comm_free.get(channel, 0.0), ready)
        idle = start - self.comm_free[channel] if channel in self.comm_free else math.inf
        # DDP's last bucket runs after the backward, while the rank waits for it: nothing computes
        # beside it to share the cores with (``last``)
        beside = background and not last
        samples = ln.time_samples(kind, payload, group, idle, background=beside)
        end = start + math.fsum(samples) / len(samples)
        if background and kind == "all_gather":
            # the rank waits for this gather only where it is not done: set each of its equally
            # likely durations against the time the rank needs it (``compute``), not their mean
            self.finishes[unit] = [start + x for x in samples]
            if beside:  # slowed only while the rank computes beside it: known once it has (``settle``)
                alone = ln.time_samples(kind, payload, group, idle, background=False)
                self.pending[unit] = (channel, start, alone, samples, len(self.spans))
        self.comm_free[channel] = end
        self.spans.append(span(unit, kind, start, end, Stream.COMM, bytes=payload, blocking=not background))
        if beside:
            # FSDP2's asynchronous unshard, DDP's bucket all-reduce: gloo's thread moves the bytes
            # while this one goes on, but its copies run on the same cores: a link that knows its
            # CPU cost (gloolink.GlooLink) charges it
            cpu_time = getattr(ln, "cpu_time", None)
            if cpu_time is not None:
                taken = (self.cpu, self.cpu + cpu_time(kind, payload, group, idle))
                self.charged.append(taken)
                self.cpu = taken[1]
                if unsharding:
                    self.charged_for[unit] = taken
        elif self.o["sync_comm"] and not ddp:  # DDP's reducer never waits for a bucket
            self.cpu = end
        return end

    def all_gather(self, unit: str | None, ready: float = 0.0) -> None:
        if unit is None or unit in self.gathered:
            return
        if self.o["limit_all_gathers"] and len(self.free_events) >= 2:
            self.cpu = max(self.cpu, self.free_events.pop(0))  # the CPU waits for an old free
        self.gathered[unit] = self.comm(
            "all_gather", unit, self.prof.param_bytes.get(unit, 0.0), self.shard, ready=ready
        )
        self.hold(unit, self.spans[-1]["start"])

    def settle(self) -> None:
        """End the asynchronous gathers still in flight, now that the compute beside them is known:
        gloo's thread shares the cores with the rank's CPU work (compute and host spans) only while
        there is some. A gather issued with nothing to compute beside it (the root's, at the step's
        start; the first unit's, beside the root's 0.1 ms) runs at its own speed: measured, 1 node x 4,
        2-4 ms alone against 11-15 ms beside a unit's forward."""
        if not self.pending:
            return
        work = [(s["start"], s["end"]) for s in on(self.spans, Stream.COMPUTE, Stream.HOST)]
        busy = sorted(work + self.charged)  # the charged CPU time stands for compute it slowed
        for unit, (channel, start, alone, beside, i) in self.pending.items():
            during = [(a, b) for a, b in busy if b > start]
            ends = [start + _stretched(a, b, start, during) for a, b in zip(alone, beside)]
            end = math.fsum(ends) / len(ends)
            self.spans[i]["end"] = end
            self.comm_free[channel] = end
            if unit in self.gathered:
                self.gathered[unit] = end
            if unit in self.finishes:
                self.finishes[unit] = ends
        self.pending.clear()

    def wait_gather(self, unit: str) -> None:
        """FSDP2's ``wait_for_unshard`` with asynchronous unshards on CPU: the rank blocks until the
        unit's gather is done, then copies the gathered bytes out into the parameters (the gather's
        host work, ``hook``), and only then issues the next unit's prefetch (``FSDPState._pre_forward``,
        ``FSDPParamGroup.pre_backward`` in torch 2.13). So one gather at a time runs under the
        compute, and the copy-out runs under none: measured, 2 nodes over 1 Gbit/s, the next gather
        starts 1.2 ms after the last one ends (the copy-out, 1.4 ms a gather in the calibration)."""
        taken = self.charged_for.pop(unit, None)
        if taken is not None and self.cpu == taken[1]:
            # waited for with nothing computed since it was issued (the root's, at the step's start):
            # the rank sleeps, gloo's thread has the core, and no compute was slowed
            self.charged.remove(taken)
            self.cpu = taken[0]
        self.settle()
        finishes = self.finishes.pop(unit, None)
        if finishes:  # the expected wait over the gather's possible ends
            self.cpu = math.fsum(max(self.cpu, f) for f in finishes) / len(finishes)
        else:
            self.cpu = max(self.cpu, self.gathered.get(unit, 0.0))
        self.host(unit, self.prof.hook.get("all_gather", 0.0))

    def hold(self, unit: str, at: float) -> None:
        """The unit's gathered parameters are allocated. Counted in program order, as the
        caching allocator sees it: a unit freed before the next is gathered is not counted twice."""
        self.held[unit] = at
        self.peak_units = max(self.peak_units, len(self.held))
        self.peak_bytes = max(self.peak_bytes, math.fsum(self.prof.param_bytes.get(u, 0.0) for u in self.held))

    def host(self, unit: str, seconds: float) -> None:
        """CPU work between ops: the CPU is busy, the device is not (unless it is behind)."""
        if seconds > 0:
            self.spans.append(span(unit, "host", self.cpu, self.cpu + seconds, Stream.HOST))
            self.cpu += seconds

    def compute(self, unit: str, kind: str, seconds: float, ready: float = 0.0, host: float = 0.0) -> float:
        self.host(unit, host)
        if unit in self.pending:  # the rank needs this gather now: it ends beside what ran so far
            self.settle()
        start = max(self.compute_free, self.cpu, ready)
        finishes = self.finishes.pop(unit, None)
        if finishes:  # an asynchronous gather: the expected wait over its possible ends
            start = math.fsum(max(start, f) for f in finishes) / len(finishes)
        else:
            start = max(start, self.gathered.get(unit, 0.0))
        end = start + seconds
        self.compute_free = end
        if self.o["cpu_bound"]:
            self.cpu = end
        self.spans.append(span(unit, kind, start, end, Stream.COMPUTE))
        return end

    def free(self, unit: str, at: float) -> None:
        if unit in self.held:
            self.held_spans.append((unit, self.held.pop(unit), at))
        self.gathered.pop(unit, None)
        if self.o["limit_all_gathers"]:
            self.free_events.append(at)

    def reduce(self, unit: str, ready: float, grad: float | None = None, last: bool = False) -> None:
        grad = self.prof.grad_bytes.get(unit, 0.0) if grad is None else grad
        s, n = self.shard, self.prof.world_size
        if self.o["strategy"] in SHARDED:
            end = self.comm("reduce_scatter", unit, grad, s, ready=ready)
            if self.o["strategy"] in HYBRID and (n // s > 1 or self.inter.time("all_reduce", grad / s, 1)):
                # each shard all-reduced across the replicas; torch's FSDP1 calls it for a replica
                # group of one too, and a link that prices that (gloolink.GlooLink) gets it
                end = self.comm("all_reduce", unit, grad / s, n // s, channel="replicate", ready=end)
        else:
            end = self.comm("all_reduce", unit, grad, n, ready=ready, last=last)
        self.reduce_done = max(self.reduce_done, end)


def simulate(
    prof: Profile,
    link_spec: str | float | Link = "infinite",
    strategy: str | None = None,
    backward_prefetch: str | None = Prefetch.BACKWARD_PRE,
    forward_prefetch: bool = False,
    limit_all_gathers: bool = True,
    regather_root: bool | None = None,
    shard_size: int | None = None,
    inter_link: str | float | Link | None = None,
    cpu_bound: bool = False,
    sync_comm: bool = False,
    async_gather: bool = False,
    bucket_bytes: float = 25 * 2**20,
    first_bucket_bytes: float = 2**20,
    compute_scale: float = 1.0,
    lag: float = 0.0,
    tail: float = 0.0,
) -> Result:
    """Simulate one step of ``prof`` on ``link_spec``. The result is labelled simulated.

    strategy: FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD, NO_SHARD or DDP (default: the run's).
    regather_root: whether backward gathers the root unit again (default: FSDP2 yes, FSDP1 no).
    DDP all-reduces buckets of ``bucket_bytes`` (the first one ``first_bucket_bytes``) as the
    units' gradients complete, at unit granularity.
    async_gather: all-gathers do not block the CPU even with ``sync_comm`` (FSDP2's explicit,
    asynchronous prefetch on CPU: they run on gloo's thread; ``labkit.timing.predict``); the
    rank waits for each before its copy-out and the next prefetch.
    lag: DDP's last bucket waits for the last rank's backward, this share of the step so far
    later than this rank's (``labkit.timing.predict.ddp_lag``: nothing holds DDP's ranks together
    before it, so their different speeds add up over the step).
    tail: seconds more DDP's last bucket waits, on top of ``lag`` (``labkit.timing.predict.ddp_tail``:
    what the calibration measured after its backward beyond what this schedule gives there).
    compute_scale: divide every measured compute time by this, to ask "and on a device this
    many times faster?" (an assumption, kept in ``result.options``). Host overhead is not
    scaled: it is CPU time, and a faster device does not shorten it (part of it, FSDP's
    copies, would run on a GPU instead: from a CPU profile, an upper bound).
    """
    if compute_scale != 1.0:
        prof = prof.scaled(compute_scale)
    if backward_prefetch not in PREFETCH:
        raise ValueError(t("timing.simulate.unknown_prefetch", name=backward_prefetch))
    ln = link(link_spec)
    strategy = (strategy or prof.measured.get("strategy") or Strategy.FULL_SHARD).upper()
    if regather_root is None:
        regather_root = prof.flavor == Flavor.FSDP2
    o = {
        "strategy": strategy,
        "backward_prefetch": backward_prefetch,
        "forward_prefetch": forward_prefetch,
        "limit_all_gathers": limit_all_gathers,
        "regather_root": regather_root,
        "shard_size": shard_size,
        "cpu_bound": cpu_bound,
        "sync_comm": sync_comm,
        "async_gather": async_gather,
        "compute_scale": compute_scale,
        "lag": lag,
        "tail": tail,
    }
    sch = _Schedule(prof, ln, o, link(inter_link) if inter_link is not None else ln)
    sharded = strategy in SHARDED
    _forward(sch, prof, sharded)
    _backward(sch, prof, sharded, bucket_bytes, first_bucket_bytes)
    if cpu_bound:  # the CPU waits for the gradients before it steps (DDP: in the reducer's final callback)
        sch.cpu = max(sch.cpu, sch.reduce_done)
    sch.settle()
    end = sch.compute("optimizer", "optimizer", prof.optimizer, ready=sch.reduce_done, host=prof.optimizer_host)
    sch.host("step", prof.step_host)
    step = max([end, sch.compute_free, sch.reduce_done, sch.cpu] + list(sch.comm_free.values()))
    for unit, start in list(sch.held.items()):  # never freed within the step (e.g. DDP: always held)
        sch.held_spans.append((unit, start, step))
    spans = [s for s in sch.spans if s["end"] > s["start"] or s["kind"] != "optimizer"]
    spans += [span(u, "held", a, b, Stream.MEMORY) for u, a, b in sch.held_spans]
    comm = math.fsum(s["end"] - s["start"] for s in on(sch.spans, Stream.COMM))
    host = math.fsum(s["end"] - s["start"] for s in on(sch.spans, Stream.HOST))
    busy = length(union([(s["start"], s["end"]) for s in on(sch.spans, Stream.COMPUTE, Stream.HOST)]))
    exposed = max(step - busy, 0.0)
    return Result(step, prof.compute_time, comm, exposed, sch.peak_units, sch.peak_bytes, spans, o, ln, True, host)


def _forward(sch: _Schedule, prof: Profile, sharded: bool) -> None:
    order = _first_seen(prof.forward)
    last = {u: i for i, (u, _) in enumerate(prof.forward)}
    keeps_root = sch.o["strategy"] in RESHARDING and not sch.o["regather_root"]
    started: set[str] = set()
    for i, (unit, seconds) in enumerate(prof.forward):
        if sharded and unit not in started:  # pre-forward
            started.add(unit)
            sch.all_gather(unit)
            if sch.o["async_gather"]:
                sch.wait_gather(unit)
            if sch.o["forward_prefetch"]:
                sch.all_gather(_next(order, started))
        if not sharded and unit not in sch.held:
            sch.hold(unit, 0.0)  # unsharded: every unit's parameters are always there
        end = sch.compute(unit, "forward", seconds, host=prof.host_before("forward", i))
        reshards = sch.o["strategy"] in RESHARDING and not (keeps_root and unit == prof.root)
        if sharded and i == last[unit] and reshards:
            sch.free(unit, end)


def _backward(sch: _Schedule, prof: Profile, sharded: bool, bucket_bytes: float, first_bucket: float) -> None:
    order = _first_seen(prof.backward)
    last = {u: i for i, (u, _) in enumerate(prof.backward)}
    prefetch = sch.o["backward_prefetch"] if sharded else None
    bucket, cap = 0.0, first_bucket
    started: set[str] = set()
    kept = set(sch.gathered)  # units forward did not free
    for i, (unit, seconds) in enumerate(prof.backward):
        if sharded and unit not in started:  # pre-backward
            started.add(unit)
            if unit in kept and unit != prof.root:
                # kept from forward (SHARD_GRAD_OP): FSDP's pre-backward hook still does the work
                # the calibration's FULL_SHARD charges to the gather it issues there (measured: the
                # step less its spans is the same for both strategies, 7-13 ms, on every topology)
                sch.host(unit, prof.hook.get("all_gather", 0.0))
            sch.all_gather(unit)
            if sch.o["async_gather"] and unit not in kept:
                sch.wait_gather(unit)
            if prefetch == Prefetch.BACKWARD_PRE:
                sch.all_gather(_next(order, started))
        end = sch.compute(unit, "backward", seconds, host=prof.host_before("backward", i))
        if i != last[unit]:
            continue
        # post-backward: free the unit, maybe prefetch the next, reduce its gradients
        if sharded:
            sch.free(unit, end)
            if prefetch == Prefetch.BACKWARD_POST:
                sch.all_gather(_next(order, started), ready=end)
        if sch.o["strategy"] == Strategy.DDP:
            bucket += prof.grad_bytes.get(unit, 0.0)
            final = i == len(prof.backward) - 1
            if bucket >= cap or final:
                # a bucket, not a unit: unnamed, as measured. The last one waits for the last rank's
                # backward: ``lag`` of the step so far later (nothing holds DDP's ranks together
                # from the step's start to it)
                sch.reduce(
                    "", ready=end * (1.0 + sch.o["lag"]) + sch.o["tail"] if final else end, grad=bucket, last=final
                )
                bucket, cap = 0.0, bucket_bytes
        else:
            sch.reduce(unit, ready=end)


def _stretched(alone: float, beside: float, start: float, busy: Sequence[tuple[float, float]]) -> float:
    """How long a collective started at ``start`` takes that would take ``alone`` seconds on its own
    and ``beside`` with the rank computing all along, given the rank's CPU work ``busy`` (sorted
    intervals): it progresses at the one rate or the other."""
    if beside <= alone:
        return alone
    t, done = start, 0.0
    for a, b in busy:
        a = max(a, t)
        if b <= a:
            continue
        if done + (a - t) / alone >= 1.0:  # done before the rank's next work
            return t + (1.0 - done) * alone - start
        done += (a - t) / alone
        if done + (b - a) / beside >= 1.0:
            return a + (1.0 - done) * beside - start
        done += (b - a) / beside
        t = b
    return t + (1.0 - done) * alone - start


def _first_seen(segments: Sequence[tuple[str, float]]) -> list[str]:
    return list(dict.fromkeys(u for u, _ in segments))


def _next(order: Sequence[str], started: set[str]) -> str | None:
    """The unit whose pass comes next: the one FSDP prefetches."""
    return next((u for u in order if u not in started), None)


# -- many at once ------------------------------------------------------------------------


def sweep(
    prof: Profile,
    links: Iterable[str | float | Link] = ("nvlink4", "pcie4", "ib100"),
    strategies: Iterable[str] = (Strategy.FULL_SHARD,),
    prefetch: Iterable[str | None] = PREFETCH,
    **options: Any,
) -> list[Result]:
    """Every combination of link, strategy and backward prefetch (sharded strategies only)."""
    out = []
    for ln in links:
        for strategy in strategies:
            for pf in prefetch if strategy.upper() in SHARDED else [Prefetch.BACKWARD_PRE]:
                out.append(simulate(prof, ln, strategy=strategy, backward_prefetch=pf, **options))
    return out


def compare_to_measured(prof: Profile, measured_link: Link | None = None) -> dict[str, float]:
    """The CPU/gloo run replayed as it ran (compute and collectives blocking the thread).

    Returns the simulated and measured step (means over the same typical steps) and their difference; the time of
    the measured step that no span covers (``unattributed_s``: the loss, FSDP's own copies,
    Python) and the host overhead the replay charged for it (``host_s``, calibrated from
    those gaps); and, on an infinitely fast link, the replay's compute, which must equal
    the measured compute (the schedule adds no idle time of its own).
    """
    m = prof.measured
    ln = measured_link or m.get("link") or Link("measured", math.inf, 0.0)
    opts = {
        "strategy": m.get("strategy") or Strategy.FULL_SHARD,
        "backward_prefetch": m.get("backward_prefetch") if m.get("backward_prefetch") != Prefetch.NONE else None,
        "forward_prefetch": bool(m.get("forward_prefetch")),
        "limit_all_gathers": m.get("limit_all_gathers", True) is not False,
        "cpu_bound": True,
        "sync_comm": True,
    }
    sim = simulate(prof, ln, **opts)
    free = simulate(prof, "infinite", **opts)
    step = m.get("step_s") or float("nan")
    return {
        "simulated_step_s": sim.step_time,
        "measured_step_s": step,
        "difference_s": sim.step_time - step,
        "relative_difference": (sim.step_time - step) / step,
        "unattributed_s": m.get("unattributed_s", float("nan")),
        "host_s": sim.host_time,
        "simulated_compute_s": free.step_time - free.host_time,
        "measured_compute_s": prof.compute_time,
    }
