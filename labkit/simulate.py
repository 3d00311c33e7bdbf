"""What a step would take on another interconnect: a schedule simulator (its output is *simulated*).

    from labkit import simulate
    prof = simulate.profile_from_run(run)                 # measured per-unit compute and bytes
    simulate.simulate(prof, "pcie4", backward_prefetch=None)
    print(simulate.table(simulate.sweep(prof, links=["nvlink4", "ib100"])))

It replays one measured step: each unit's forward and backward compute time and the
bytes of its gathered parameters and gradients, as recorded by ``labkit.timeline``.
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
  CPU-bound runs (``cpu_bound=True``).

``cpu_bound=True, sync_comm=True`` is what a CPU/gloo run does (compute and every FSDP
collective block the one thread; DDP's bucket all-reduces run in the background); with the link fitted to that run (``fit_link``) the
simulator should land near the measured step: ``compare_to_measured`` says how near.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from labkit.i18n import catalog, t

catalog(
    {
        "simulate.unknown_link": {
            "en": "unknown link {name!r}; choose one of {choices}, or give a bandwidth in bytes/s",
            "ro": "legătură necunoscută {name!r}; alegeți una dintre {choices} sau dați o lățime de bandă în octeți/s",
        },
        "simulate.unknown_prefetch": {
            "en": "unknown backward_prefetch {name!r}; choose BACKWARD_PRE, BACKWARD_POST or None",
            "ro": "backward_prefetch necunoscut {name!r}; alegeți BACKWARD_PRE, BACKWARD_POST sau None",
        },
        "simulate.no_profile": {
            "en": "no timeline in this run to simulate from: record steps with labkit.timeline.Recorder",
            "ro": "rularea nu are o cronologie din care să se simuleze: înregistrați pașii cu labkit.timeline.Recorder",
        },
        "simulate.label": {"en": "simulated", "ro": "simulat"},
        "simulate.repr": {
            "en": "SIMULATED {strategy} {prefetch} on {link}: step {step:.2f} ms (compute {compute:.2f} ms, "
            "comm {comm:.2f} ms of which exposed {exposed:.2f} ms), peak {peak} units held",
            "ro": "SIMULAT {strategy} {prefetch} pe {link}: pas {step:.2f} ms (calcul {compute:.2f} ms, "
            "comunicare {comm:.2f} ms din care expusă {exposed:.2f} ms), maxim {peak} unități ținute",
        },
        "simulate.col.strategy": {"en": "strategy", "ro": "strategie"},
        "simulate.col.prefetch": {"en": "prefetch", "ro": "preîncărcare"},
        "simulate.col.link": {"en": "link", "ro": "legătură"},
        "simulate.col.step": {"en": "step ms (sim.)", "ro": "pas ms (sim.)"},
        "simulate.col.compute": {"en": "compute ms", "ro": "calcul ms"},
        "simulate.col.exposed": {"en": "exposed comm ms (sim.)", "ro": "comunicare expusă ms (sim.)"},
        "simulate.col.peak": {"en": "peak units", "ro": "unități maxim"},
        "simulate.table.note": {
            "en": "simulated: measured compute and bytes of {source}, re-timed on each link",
            "ro": "simulat: calcul și octeți măsurați în {source}, recronometrați pe fiecare legătură",
        },
    }
)

# -- links -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """A link between ranks: bandwidth each rank gets per direction (bytes/s), latency per ring step (s)."""

    name: str
    bandwidth: float
    latency: float = 0.0

    def time(self, kind: str, payload: float, group_size: int) -> float:
        """Ring algorithm: (N-1) steps (2(N-1) for an all-reduce), each moving payload/N."""
        from labkit.comm import ring_factor

        if group_size <= 1 or payload <= 0:
            return 0.0
        steps = 2 * (group_size - 1) if kind == "all_reduce" else group_size - 1
        wire = payload * ring_factor(kind, group_size)
        return steps * self.latency + (0.0 if math.isinf(self.bandwidth) else wire / self.bandwidth)


# Bandwidths: per GPU and direction, what NCCL typically reaches (not the marketing peak).
# Latencies per ring step are assumptions of the right order; pass your own with link(bw, latency).
LINKS: dict[str, Link] = {
    "nvlink4": Link("NVLink 4 (H100, 450 GB/s)", 450e9, 3e-6),
    "pcie4": Link("PCIe 4.0 x16 (25 GB/s)", 25e9, 8e-6),
    "pcie5": Link("PCIe 5.0 x16 (50 GB/s)", 50e9, 8e-6),
    "ib100": Link("100 Gb/s network (12.5 GB/s)", 12.5e9, 10e-6),
    "ib400": Link("400 Gb/s network (50 GB/s)", 50e9, 10e-6),
    "infinite": Link("infinitely fast", math.inf, 0.0),
}


def link(spec: str | float | Link, latency: float = 0.0) -> Link:
    """A preset by name, or any bandwidth in bytes/s (with a latency in seconds)."""
    if isinstance(spec, Link):
        return spec
    if isinstance(spec, str):
        if spec not in LINKS:
            raise ValueError(t("simulate.unknown_link", name=spec, choices=", ".join(LINKS)))
        return LINKS[spec]
    return Link(f"{spec / 1e9:g} GB/s, {latency * 1e6:g} µs", float(spec), latency)


# -- what is replayed --------------------------------------------------------------------


@dataclass
class Profile:
    """One measured step: compute segments in execution order, and each unit's bytes."""

    forward: list[tuple[str, float]]  # (unit, seconds), in the order they ran
    backward: list[tuple[str, float]]
    param_bytes: dict[str, float]  # what a unit's all-gather returns
    grad_bytes: dict[str, float]  # what its reduce-scatter takes in
    world_size: int
    optimizer: float = 0.0
    flavor: str = "fsdp1"  # fsdp1 keeps the root gathered for backward; fsdp2 frees it
    measured: dict[str, Any] = field(default_factory=dict)  # the run's own setup and step time
    source: str = "a run"

    @property
    def compute_time(self) -> float:
        return math.fsum(d for _, d in self.forward) + math.fsum(d for _, d in self.backward) + self.optimizer

    @property
    def root(self) -> str:
        return self.forward[0][0] if self.forward else ""


def profile_from_run(run: Any, rank: int = 0, skip_first: bool = True, config: str | None = None) -> Profile:
    """The median step of one rank's recorded timeline (``labkit.timeline``).

    The median over steps, not one step: on a shared CPU a single step can be twice as
    slow as its neighbours. The first step (lazy initialisation, DDP's bucket rebuild)
    is left out when there are others.
    """
    events = getattr(run, "events", run)
    msgs = [m for m in events.get(rank, []) if m.get("t") == "spans" and (config is None or m.get("config") == config)]
    if skip_first and len(msgs) > 1:
        msgs = msgs[1:]
    if not msgs:
        raise ValueError(t("simulate.no_profile"))
    steps = [_segments(m["spans"]) for m in msgs]
    fwd = _median_segments([s[0] for s in steps])
    bwd = _median_segments([s[1] for s in steps])
    opt = statistics.median(s[2] for s in steps)
    last = msgs[-1]
    units = last.get("unit_bytes", {})
    params, grads = dict(units), dict(units)
    for s in last["spans"]:  # measured payloads, where the run had them
        if s["kind"] == "all_gather" and s.get("unit"):
            params[s["unit"]] = s["bytes"]
        elif s["kind"] == "reduce_scatter" and s.get("unit"):
            grads[s["unit"]] = s["bytes"]
    measured = {k: last.get(k) for k in ("strategy", "backward_prefetch", "forward_prefetch", "limit_all_gathers")}
    measured["step_s"] = statistics.median(m["end"] - m["start"] for m in msgs)
    measured["comm_s"] = statistics.median(_comm_seconds(m["spans"]) for m in msgs)
    measured["unattributed_s"] = statistics.median(_unattributed(m) for m in msgs)
    return Profile(
        forward=fwd,
        backward=bwd,
        param_bytes=params,
        grad_bytes=grads,
        world_size=int(last.get("world_size", 1)),
        optimizer=opt,
        flavor=last.get("flavor", "fsdp1"),
        measured=measured,
        source=f"rank {rank}, {len(msgs)} step(s)" + (f", {config}" if config else ""),
    )


def _segments(spans: Sequence[dict[str, Any]]) -> tuple[list[tuple[str, float]], list[tuple[str, float]], float]:
    compute = sorted((s for s in spans if s["stream"] == "compute"), key=lambda s: s["start"])
    fwd = _merge([(s["unit"], s["end"] - s["start"]) for s in compute if s["kind"] == "forward"])
    bwd = _merge([(s["unit"], s["end"] - s["start"]) for s in compute if s["kind"] == "backward"])
    opt = math.fsum(s["end"] - s["start"] for s in compute if s["kind"] == "optimizer")
    return fwd, bwd, opt


def _merge(segments: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Back-to-back segments of one unit as one: the root's final norm and head, or a span
    that a blocking collective cut in two (the simulator places the collective itself)."""
    out: list[tuple[str, float]] = []
    for unit, seconds in segments:
        if out and out[-1][0] == unit:
            out[-1] = (unit, out[-1][1] + seconds)
        else:
            out.append((unit, seconds))
    return out


def _median_segments(steps: list[list[tuple[str, float]]]) -> list[tuple[str, float]]:
    shape = [u for u, _ in steps[-1]]
    same = [s for s in steps if [u for u, _ in s] == shape]  # a step with another structure is left out
    return [(u, statistics.median(s[i][1] for s in same)) for i, u in enumerate(shape)]


def _comm_seconds(spans: Sequence[dict[str, Any]]) -> float:
    return math.fsum(s["end"] - s["start"] for s in spans if s["stream"] == "comm")


def _unattributed(msg: dict[str, Any]) -> float:
    """Step time in no span: the loss, FSDP's own copies and bookkeeping, Python between ops."""
    from labkit.timeline import _length, _union

    busy = _union([(s["start"], s["end"]) for s in msg["spans"] if s["stream"] in ("compute", "comm")])
    return msg["end"] - msg["start"] - _length(busy)


def fit_link(run: Any, rank: int = 0, config: str | None = None) -> Link:
    """The link a run actually had: its effective bandwidth, total wire bytes over total comm time.

    Latency is left at zero: the lessons' collectives are all of similar size, so a
    fit of latency and bandwidth separately would be noise.
    """
    events = getattr(run, "events", run)
    wire = seconds = 0.0
    for m in events.get(rank, []):
        if m.get("t") == "spans" and (config is None or m.get("config") == config):
            for s in m["spans"]:
                if s["stream"] == "comm" and s.get("wire_bytes"):
                    wire += s["wire_bytes"]
                    seconds += s["end"] - s["start"]
    bw = wire / seconds if seconds > 0 else math.inf
    return Link(f"measured ({bw / 1e6:.0f} MB/s)", bw, 0.0)


# -- the schedule ------------------------------------------------------------------------

PREFETCH = ("BACKWARD_PRE", "BACKWARD_POST", None)
SHARDED = ("FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2")


@dataclass
class Result:
    """A simulated step. Times in seconds; ``spans`` in ``labkit.timeline``'s format."""

    step_time: float
    compute_time: float
    comm_time: float  # summed collective durations
    exposed_comm: float  # time the compute stream sat waiting for collectives
    peak_units: int  # most units holding gathered parameters at once
    peak_bytes: float
    spans: list[dict[str, Any]]
    options: dict[str, Any]
    link: Link
    simulated: bool = True

    @property
    def hidden_comm(self) -> float:
        """Collective time that ran under compute."""
        from labkit.timeline import _intersect, _length, _union

        comm = _union([(s["start"], s["end"]) for s in self.spans if s["stream"] == "comm"])
        compute = _union([(s["start"], s["end"]) for s in self.spans if s["stream"] == "compute"])
        return _length(_intersect(comm, compute))

    @property
    def events(self) -> dict[int, list[dict[str, Any]]]:
        """So that ``timeline.plot_timeline(result)`` and ``to_chrome_trace`` draw it, labelled simulated."""
        msg = {"t": "spans", "step": None, "start": 0.0, "end": self.step_time, "spans": self.spans, "simulated": True}
        return {0: [msg]}

    def __repr__(self) -> str:
        o = self.options
        return t(
            "simulate.repr",
            strategy=o["strategy"],
            prefetch=_prefetch_label(o),
            link=self.link.name,
            step=self.step_time * 1e3,
            compute=self.compute_time * 1e3,
            comm=self.comm_time * 1e3,
            exposed=self.exposed_comm * 1e3,
            peak=self.peak_units,
        )


def _prefetch_label(o: Mapping[str, Any]) -> str:
    if o["strategy"] not in SHARDED:
        return "-"
    label = str(o["backward_prefetch"])
    if o.get("forward_prefetch"):
        label += "+fwd"
    if not o.get("limit_all_gathers", True):
        label += " nolimit"
    return label


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
        self.spans: list[dict[str, Any]] = []
        n = prof.world_size
        self.shard = o.get("shard_size") or (
            n if o["strategy"] not in ("HYBRID_SHARD", "_HYBRID_SHARD_ZERO2") else min(n, 2)
        )

    def comm(
        self, kind: str, unit: str, payload: float, group: int, channel: str = "shard", ready: float = 0.0
    ) -> float:
        ln = self.inter if channel == "replicate" else self.link
        start = max(self.cpu, self.comm_free.get(channel, 0.0), ready)
        end = start + ln.time(kind, payload, group)
        self.comm_free[channel] = end
        self.spans.append(_span(unit, kind, start, end, "comm", bytes=payload))
        if self.o["sync_comm"] and self.o["strategy"] != "DDP":  # DDP's reducer never waits for a bucket
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

    def hold(self, unit: str, at: float) -> None:
        """The unit's gathered parameters are allocated. Counted in program order, as the
        caching allocator sees it: a unit freed before the next is gathered is not counted twice."""
        self.held[unit] = at
        self.peak_units = max(self.peak_units, len(self.held))
        self.peak_bytes = max(self.peak_bytes, math.fsum(self.prof.param_bytes.get(u, 0.0) for u in self.held))

    def compute(self, unit: str, kind: str, seconds: float, ready: float = 0.0) -> float:
        start = max(self.compute_free, self.gathered.get(unit, 0.0), self.cpu, ready)
        end = start + seconds
        self.compute_free = end
        if self.o["cpu_bound"]:
            self.cpu = end
        self.spans.append(_span(unit, kind, start, end, "compute"))
        return end

    def free(self, unit: str, at: float) -> None:
        if unit in self.held:
            self.held_spans.append((unit, self.held.pop(unit), at))
        self.gathered.pop(unit, None)
        if self.o["limit_all_gathers"]:
            self.free_events.append(at)

    def reduce(self, unit: str, ready: float, grad: float | None = None) -> None:
        grad = self.prof.grad_bytes.get(unit, 0.0) if grad is None else grad
        s, n = self.shard, self.prof.world_size
        if self.o["strategy"] in SHARDED:
            end = self.comm("reduce_scatter", unit, grad, s, ready=ready)
            if n // s > 1:  # HYBRID: each shard all-reduced across the replicas
                end = self.comm("all_reduce", unit, grad / s, n // s, channel="replicate", ready=end)
        else:
            end = self.comm("all_reduce", unit, grad, n, ready=ready)
        self.reduce_done = max(self.reduce_done, end)


def simulate(
    prof: Profile,
    link_spec: str | float | Link = "infinite",
    strategy: str | None = None,
    backward_prefetch: str | None = "BACKWARD_PRE",
    forward_prefetch: bool = False,
    limit_all_gathers: bool = True,
    regather_root: bool | None = None,
    shard_size: int | None = None,
    inter_link: str | float | Link | None = None,
    cpu_bound: bool = False,
    sync_comm: bool = False,
    bucket_bytes: float = 25 * 2**20,
    first_bucket_bytes: float = 2**20,
    compute_scale: float = 1.0,
) -> Result:
    """Simulate one step of ``prof`` on ``link_spec``. The result is labelled simulated.

    strategy: FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD, NO_SHARD or DDP (default: the run's).
    regather_root: whether backward gathers the root unit again (default: FSDP2 yes, FSDP1 no).
    DDP all-reduces buckets of ``bucket_bytes`` (the first one ``first_bucket_bytes``) as the
    units' gradients complete, at unit granularity.
    compute_scale: divide every measured compute time by this, to ask "and on a device this
    many times faster?" (an assumption, kept in ``result.options``).
    """
    if compute_scale != 1.0:
        prof = _scaled(prof, compute_scale)
    if backward_prefetch not in PREFETCH:
        raise ValueError(t("simulate.unknown_prefetch", name=backward_prefetch))
    ln = link(link_spec)
    strategy = (strategy or prof.measured.get("strategy") or "FULL_SHARD").upper()
    if regather_root is None:
        regather_root = prof.flavor == "fsdp2"
    o = {
        "strategy": strategy,
        "backward_prefetch": backward_prefetch,
        "forward_prefetch": forward_prefetch,
        "limit_all_gathers": limit_all_gathers,
        "regather_root": regather_root,
        "shard_size": shard_size,
        "cpu_bound": cpu_bound,
        "sync_comm": sync_comm,
        "compute_scale": compute_scale,
    }
    sch = _Schedule(prof, ln, o, link(inter_link) if inter_link is not None else ln)
    sharded = strategy in SHARDED
    _forward(sch, prof, sharded)
    _backward(sch, prof, sharded, bucket_bytes, first_bucket_bytes)
    end = sch.compute("optimizer", "optimizer", prof.optimizer, ready=sch.reduce_done) if prof.optimizer else 0.0
    step = max([end, sch.compute_free, sch.reduce_done] + list(sch.comm_free.values()))
    for unit, start in list(sch.held.items()):  # never freed within the step (e.g. DDP: always held)
        sch.held_spans.append((unit, start, step))
    spans = sch.spans + [_span(u, "held", a, b, "memory") for u, a, b in sch.held_spans]
    comm = math.fsum(s["end"] - s["start"] for s in sch.spans if s["stream"] == "comm")
    exposed = max(step - prof.compute_time, 0.0)
    return Result(step, prof.compute_time, comm, exposed, sch.peak_units, sch.peak_bytes, spans, o, ln)


def _scaled(prof: Profile, factor: float) -> Profile:
    fwd = [(u, d / factor) for u, d in prof.forward]
    bwd = [(u, d / factor) for u, d in prof.backward]
    return Profile(
        fwd,
        bwd,
        prof.param_bytes,
        prof.grad_bytes,
        prof.world_size,
        prof.optimizer / factor,
        prof.flavor,
        prof.measured,
        prof.source,
    )


def _forward(sch: _Schedule, prof: Profile, sharded: bool) -> None:
    order = _first_seen(prof.forward)
    last = {u: i for i, (u, _) in enumerate(prof.forward)}
    keeps_root = sch.o["strategy"] in ("FULL_SHARD", "HYBRID_SHARD") and not sch.o["regather_root"]
    started: set[str] = set()
    for i, (unit, seconds) in enumerate(prof.forward):
        if sharded and unit not in started:  # pre-forward
            started.add(unit)
            sch.all_gather(unit)
            if sch.o["forward_prefetch"]:
                sch.all_gather(_next(order, started))
        if not sharded and unit not in sch.held:
            sch.hold(unit, 0.0)  # unsharded: every unit's parameters are always there
        end = sch.compute(unit, "forward", seconds)
        reshards = sch.o["strategy"] in ("FULL_SHARD", "HYBRID_SHARD") and not (keeps_root and unit == prof.root)
        if sharded and i == last[unit] and reshards:
            sch.free(unit, end)


def _backward(sch: _Schedule, prof: Profile, sharded: bool, bucket_bytes: float, first_bucket: float) -> None:
    order = _first_seen(prof.backward)
    last = {u: i for i, (u, _) in enumerate(prof.backward)}
    prefetch = sch.o["backward_prefetch"] if sharded else None
    bucket, cap = 0.0, first_bucket
    started: set[str] = set()
    for i, (unit, seconds) in enumerate(prof.backward):
        if sharded and unit not in started:  # pre-backward
            started.add(unit)
            sch.all_gather(unit)
            if prefetch == "BACKWARD_PRE":
                sch.all_gather(_next(order, started))
        end = sch.compute(unit, "backward", seconds)
        if i != last[unit]:
            continue
        # post-backward: free the unit, maybe prefetch the next, reduce its gradients
        if sharded:
            sch.free(unit, end)
            if prefetch == "BACKWARD_POST":
                sch.all_gather(_next(order, started), ready=end)
        if sch.o["strategy"] == "DDP":
            bucket += prof.grad_bytes.get(unit, 0.0)
            if bucket >= cap or i == len(prof.backward) - 1:
                sch.reduce("", ready=end, grad=bucket)  # a bucket, not a unit: unnamed, as measured
                bucket, cap = 0.0, bucket_bytes
        else:
            sch.reduce(unit, ready=end)


def _first_seen(segments: Sequence[tuple[str, float]]) -> list[str]:
    return list(dict.fromkeys(u for u, _ in segments))


def _next(order: Sequence[str], started: set[str]) -> str | None:
    """The unit whose pass comes next: the one FSDP prefetches."""
    return next((u for u in order if u not in started), None)


def _span(unit: str, kind: str, start: float, end: float, stream: str, **extra: Any) -> dict[str, Any]:
    return {"unit": unit, "kind": kind, "start": start, "end": end, "stream": stream, **extra}


# -- many at once ------------------------------------------------------------------------


def sweep(
    prof: Profile,
    links: Iterable[str | float | Link] = ("nvlink4", "pcie4", "ib100"),
    strategies: Iterable[str] = ("FULL_SHARD",),
    prefetch: Iterable[str | None] = PREFETCH,
    **options: Any,
) -> list[Result]:
    """Every combination of link, strategy and backward prefetch (sharded strategies only)."""
    out = []
    for ln in links:
        for strategy in strategies:
            for pf in prefetch if strategy.upper() in SHARDED else ["BACKWARD_PRE"]:
                out.append(simulate(prof, ln, strategy=strategy, backward_prefetch=pf, **options))
    return out


def table(results: Sequence[Result], source: str | None = None) -> str:
    """The results as a text table; its first line says they are simulated."""
    cols = ["strategy", "prefetch", "link", "step", "compute", "exposed", "peak"]
    rows = [[t(f"simulate.col.{c}") for c in cols]]
    for r in results:
        rows.append(
            [
                r.options["strategy"],
                _prefetch_label(r.options),
                r.link.name,
                f"{r.step_time * 1e3:.2f}",
                f"{r.compute_time * 1e3:.2f}",
                f"{r.exposed_comm * 1e3:.2f}",
                str(r.peak_units),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    lines = [t("simulate.table.note", source=source or "the run")]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def compare_to_measured(prof: Profile, measured_link: Link | None = None) -> dict[str, float]:
    """The CPU/gloo run replayed as it ran (compute and collectives blocking the thread).

    Returns the simulated and measured step (medians) and their difference; the time
    of the measured step that no span covers (``unattributed_s``: the loss, FSDP's own
    copies, Python), which the simulator cannot replay; and the simulated step with an
    infinitely fast link, which must equal the measured compute.
    """
    m = prof.measured
    ln = measured_link or Link("measured", _effective_bandwidth(prof), 0.0)
    opts = {
        "strategy": m.get("strategy") or "FULL_SHARD",
        "backward_prefetch": m.get("backward_prefetch") if m.get("backward_prefetch") != "NONE" else None,
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
        "simulated_compute_s": free.step_time,
        "measured_compute_s": prof.compute_time,
    }


def _effective_bandwidth(prof: Profile) -> float:
    """Bandwidth that makes the profile's own collectives take the measured comm time."""
    comm_s = prof.measured.get("comm_s") or 0.0
    if comm_s <= 0:
        return math.inf
    probe = simulate(prof, Link("unit", 1.0, 0.0), cpu_bound=True, sync_comm=True, limit_all_gathers=False)
    return probe.comm_time / comm_s  # comm time at 1 B/s is the wire byte count
