"""What the simulator replays, read off a measured step: ``Profile`` and ``profile_from_run``.

    from labkit.timing import calibrate
    prof = calibrate.profile_from_run(run, config="fsdp1:FULL_SHARD:BACKWARD_PRE")

Calibrated from the run (``labkit.timeline`` spans of rank 0, the mean over its typical steps:
the first step and any step over 1.5 times the median step are left out, and the measured
step time is the mean over the same steps, so that what is replayed and what it is compared
with are the same steps):

* **compute**: each unit's forward and backward time, as the spans measure it, in the
  order the units ran; the optimizer step.
* **host overhead**: the step time that no span covers is CPU work between the ops
  (FSDP's hooks, autograd's bookkeeping, the loss, Python). Each gap on the rank's thread
  is charged to what follows it: a gap before or right after a collective to that
  collective's kind (``hook``: seconds per call, FSDP's flat-buffer copies around it);
  a gap before a compute span to that unit's forward or backward (``forward_host``,
  ``backward_host``); the gap between the gradients being ready and the optimizer to the
  optimizer (``optimizer_host``); what follows the optimizer to the step (``step_host``).
* **bytes**: each unit's gathered parameters and gradients, as its collectives moved them.

Not calibrated (assumed by the simulator): the link (given, or fitted by
``simulate.fit_link``), that host overhead does not depend on the link, and that the
hook cost of a collective kind is the same for every unit.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from labkit.i18n import t
from labkit.timing.links import Link
from labkit.timing.spans import intersect, length, union
from labkit.wire.protocol import Msg
from labkit.wire.records import Source, Span, Stream, given, messages, on
from labkit.wire.setting import Flavor, Strategy


@dataclass
class Profile:
    """One measured step: compute segments in execution order, host overhead, and each unit's bytes."""

    forward: list[tuple[str, float]]  # (unit, seconds), in the order they ran
    backward: list[tuple[str, float]]
    param_bytes: dict[str, float]  # what a unit's all-gather returns
    grad_bytes: dict[str, float]  # what its reduce-scatter takes in
    world_size: int
    optimizer: float = 0.0
    flavor: str = Flavor.FSDP1  # fsdp1 keeps the root gathered for backward; fsdp2 frees it
    measured: dict[str, Any] = field(default_factory=dict)  # the run's own setup and step time
    source: str = "a run"
    forward_host: list[float] = field(default_factory=list)  # CPU seconds before each forward segment
    backward_host: list[float] = field(default_factory=list)
    hook: dict[str, float] = field(default_factory=dict)  # CPU seconds per collective, by kind
    optimizer_host: float = 0.0
    step_host: float = 0.0  # after the optimizer: zero_grad, the loop

    @property
    def compute_time(self) -> float:
        return math.fsum(d for _, d in self.forward) + math.fsum(d for _, d in self.backward) + self.optimizer

    @property
    def host_time(self) -> float:
        """Host overhead outside the collectives' hooks (those depend on how many are issued)."""
        parts = [*self.forward_host, *self.backward_host, self.optimizer_host, self.step_host]
        return math.fsum(parts)

    @property
    def root(self) -> str:
        return self.forward[0][0] if self.forward else ""

    def host_before(self, phase: str, i: int) -> float:
        hosts = self.forward_host if phase == "forward" else self.backward_host
        return hosts[i] if i < len(hosts) else 0.0

    def scaled(self, factor: float) -> Profile:
        """Compute divided by ``factor`` (a faster device); host overhead and bytes unchanged."""
        return Profile(
            [(u, d / factor) for u, d in self.forward],
            [(u, d / factor) for u, d in self.backward],
            self.param_bytes,
            self.grad_bytes,
            self.world_size,
            self.optimizer / factor,
            self.flavor,
            self.measured,
            self.source,
            self.forward_host,
            self.backward_host,
            self.hook,
            self.optimizer_host,
            self.step_host,
        )


def profile_from_run(run: Source, rank: int = 0, skip_first: bool = True, config: str | None = None) -> Profile:
    """The typical step of one rank's recorded timeline (``labkit.timeline``).

    The mean over typical steps, not one step: on a shared CPU a single step can be twice
    as slow as its neighbours, so such a step is left out, and so is the first (lazy
    initialisation, DDP's bucket rebuild) when there are others.
    """
    msgs = spans_messages(run, rank, config)
    if skip_first and len(msgs) > 1:
        msgs = msgs[1:]
    if not msgs:
        raise ValueError(t("timing.simulate.no_profile"))
    msgs, steps = typical(msgs)
    fwd, fwd_host = _mean_segments([s["forward"] for s in steps])
    bwd, bwd_host = _mean_segments([s["backward"] for s in steps])
    last = msgs[-1]
    units = last.get("unit_bytes", {})
    params, grads = dict(units), dict(units)
    for s in last["spans"]:  # measured payloads, where the run had them
        if s["kind"] == "all_gather" and s.get("unit"):
            params[s["unit"]] = s["bytes"]
        elif s["kind"] == "reduce_scatter" and s.get("unit"):
            grads[s["unit"]] = s["bytes"]
    kinds = {k for s in steps for k in s["hook"]}
    measured = {k: last.get(k) for k in ("strategy", "backward_prefetch", "forward_prefetch", "limit_all_gathers")}
    measured["step_s"] = statistics.fmean(m["end"] - m["start"] for m in msgs)
    measured["comm_s"] = statistics.fmean(comm_seconds(m["spans"]) for m in msgs)
    measured["unattributed_s"] = statistics.fmean(unattributed(m) for m in msgs)
    measured["steps"] = len(msgs)
    measured["link"] = link_of(msgs)  # the same steps' collectives
    return Profile(
        forward=fwd,
        backward=bwd,
        param_bytes=params,
        grad_bytes=grads,
        world_size=int(last.get("world_size", 1)),
        optimizer=statistics.fmean(s["optimizer"] for s in steps),
        flavor=last.get("flavor", Flavor.FSDP1),
        measured=measured,
        source=f"rank {rank}, {len(msgs)} step(s)" + (f", {config}" if config else ""),
        forward_host=fwd_host,
        backward_host=bwd_host,
        hook={k: statistics.fmean(s["hook"].get(k, 0.0) for s in steps) for k in sorted(kinds)},
        optimizer_host=statistics.fmean(s["optimizer_host"] for s in steps),
        step_host=statistics.fmean(s["step_host"] for s in steps),
    )


def typical(msgs: list[dict[str, Any]], slack: float = 1.5) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The steps no slower than ``slack`` times the median step and shaped like the last of them
    (the same units in the same order), with their segments."""
    median = statistics.median(m["end"] - m["start"] for m in msgs)
    kept = [m for m in msgs if m["end"] - m["start"] <= slack * median]
    segments = [step_segments(m) for m in kept]

    def shape(s: dict[str, Any]) -> list[Any]:
        return [u for u, *_ in s["forward"]] + [u for u, *_ in s["backward"]]

    same = [i for i, s in enumerate(segments) if shape(s) == shape(segments[-1])]
    return [kept[i] for i in same], [segments[i] for i in same]


def spans_messages(run: Source, rank: int = 0, config: str | None = None) -> list[dict[str, Any]]:
    """Rank ``rank``'s ``spans`` messages (of one setting: ``config``), in the order they came."""
    return messages(run, Msg.SPANS, **given(config=config)).get(rank, [])


def step_segments(msg: dict[str, Any]) -> dict[str, Any]:
    """One step's compute segments (unit, seconds, host seconds before) and its host overhead.

    Walks the rank's thread: compute spans and the collectives that blocked it. DDP's
    all-reduces run in the background: only their issue is on the thread (the time since the
    last span before it is the reducer's, charged to the collective as the simulator charges
    it); the optimizer waits for them, so its gap counts from the last one's end.
    """
    spans = msg["spans"]
    ddp = msg.get("strategy") == Strategy.DDP  # its reducer issues each bucket from an autograd hook, on this thread

    def on_thread(s: Span) -> bool:
        if s["stream"] == Stream.COMPUTE or (s["stream"] == Stream.COMM and s.get("blocking")):
            return True
        return ddp and s["stream"] == Stream.COMM and s["kind"] in REPLAYED  # only the bucket's issue, not its run

    thread = sorted((s for s in spans if on_thread(s)), key=lambda s: s["start"])
    background = [s["end"] for s in on(spans, Stream.COMM) if not s.get("blocking")]
    fwd: list[list[Any]] = []
    bwd: list[list[Any]] = []
    hook_total: dict[str, float] = {}
    hook_calls: dict[str, int] = {}
    opt = opt_host = 0.0
    prev_end, prev = msg["start"], None
    for s in thread:
        if s["stream"] == Stream.COMM and not s.get("blocking"):  # a DDP bucket: the reducer's work before it is sent
            hook_total[s["kind"]] = hook_total.get(s["kind"], 0.0) + max(s["start"] - prev_end, 0.0)
            hook_calls[s["kind"]] = hook_calls.get(s["kind"], 0) + 1
            prev_end = max(prev_end, s["start"])
            continue
        ready = prev_end
        if s["kind"] == "optimizer":
            ready = max([ready, *(e for e in background if e <= s["start"])])
        gap = max(s["start"] - ready, 0.0)
        if s["stream"] == Stream.COMM:
            hook_total[s["kind"]] = hook_total.get(s["kind"], 0.0) + gap
            hook_calls[s["kind"]] = hook_calls.get(s["kind"], 0) + 1
        elif prev is not None and prev["stream"] == Stream.COMM:  # the collective's copy-out
            hook_total[prev["kind"]] = hook_total.get(prev["kind"], 0.0) + gap
            gap = 0.0
        if s["kind"] == "optimizer":
            opt += s["end"] - s["start"]
            opt_host += gap
        elif s["stream"] == Stream.COMPUTE:
            segments = fwd if s["kind"] == "forward" else bwd
            _add(segments, s["unit"], s["end"] - s["start"], gap)
        prev_end, prev = max(prev_end, s["end"]), s
    return {
        "forward": [tuple(x) for x in fwd],
        "backward": [tuple(x) for x in bwd],
        "optimizer": opt,
        "optimizer_host": opt_host,
        "hook": {k: hook_total[k] / hook_calls[k] for k in hook_calls},
        "step_host": max(msg["end"] - prev_end, 0.0),
    }


def _add(segments: list[list[Any]], unit: str, seconds: float, host: float) -> None:
    """Back-to-back spans of one unit make one segment: the root's final norm and head, or a
    span that a blocking collective cut in two (the simulator places the collective itself)."""
    if segments and segments[-1][0] == unit:
        segments[-1][1] += seconds
        segments[-1][2] += host
    else:
        segments.append([unit, seconds, host])


def _mean_segments(steps: Sequence[Sequence[tuple[str, float, float]]]) -> tuple[list[tuple[str, float]], list[float]]:
    shape = [u for u, *_ in steps[-1]]
    segments = [(u, statistics.fmean(s[i][1] for s in steps)) for i, u in enumerate(shape)]
    hosts = [statistics.fmean(s[i][2] for s in steps) for i in range(len(shape))]
    return segments, hosts


REPLAYED = ("all_gather", "reduce_scatter", "all_reduce")  # DDP's buffer broadcasts are host time, not replayed


def comm_seconds(spans: Sequence[Span]) -> float:
    """Time in the collectives that the simulator replays."""
    return math.fsum(s["end"] - s["start"] for s in on(spans, Stream.COMM) if s["kind"] in REPLAYED)


def unattributed(msg: dict[str, Any]) -> float:
    """Step time in no span: the host overhead that ``step_segments`` charges to the ops."""
    busy = union([(s["start"], s["end"]) for s in on(msg["spans"], Stream.COMPUTE, Stream.COMM)])
    return msg["end"] - msg["start"] - length(busy)


def fit_link(run: Source, rank: int = 0, config: str | None = None) -> Link:
    """The link a run actually had, fitted to every replayed collective of its steps (see ``link_of``)."""
    return link_of(spans_messages(run, rank, config))


def link_of(msgs: Sequence[dict[str, Any]]) -> Link:
    """Latency and bandwidth that best give the measured collectives' durations (least squares of
    ``seconds = ring steps·latency + wire bytes/bandwidth``, the simulator's own cost).

    Where the sizes do not tell the two apart (a fit with a negative latency or bandwidth), the
    latency is left at zero and the bandwidth is total wire bytes over total collective time.
    Only collectives that ran while the rank computed nothing are fitted, where there are
    any: on a CPU, one that runs beside compute (DDP's early buckets) shares the cores with
    it, and its time says more about the compute than about the link.
    """
    rows = []  # (ring steps, wire bytes, seconds, ran alone)
    for m in msgs:
        compute = union([(s["start"], s["end"]) for s in on(m["spans"], Stream.COMPUTE)])
        for s in m["spans"]:
            if s["stream"] == Stream.COMM and s.get("wire_bytes") and s["kind"] in REPLAYED:
                n = int(s.get("group_size") or 2)
                steps = 2 * (n - 1) if s["kind"] == "all_reduce" else n - 1
                alone = not intersect([(s["start"], s["end"])], compute)
                rows.append((float(steps), float(s["wire_bytes"]), s["end"] - s["start"], alone))
    rows = [r[:3] for r in rows if r[3]] or [r[:3] for r in rows]
    sxx = math.fsum(a * a for a, _, _ in rows)
    sxy = math.fsum(a * b for a, b, _ in rows)
    syy = math.fsum(b * b for _, b, _ in rows)
    sxt = math.fsum(a * c for a, _, c in rows)
    syt = math.fsum(b * c for _, b, c in rows)
    det = sxx * syy - sxy * sxy
    if rows and det > 1e-9 * sxx * syy:
        latency, per_byte = (sxt * syy - syt * sxy) / det, (sxx * syt - sxy * sxt) / det
        if latency >= 0 and per_byte > 0:
            bw = 1 / per_byte
            return Link(f"measured ({bw / 1e6:.0f} MB/s, {latency * 1e6:.0f} µs)", bw, latency)
    wire, seconds = math.fsum(b for _, b, _ in rows), math.fsum(c for _, _, c in rows)
    bw = wire / seconds if seconds > 0 else math.inf
    return Link(f"measured ({bw / 1e6:.0f} MB/s)", bw, 0.0)
