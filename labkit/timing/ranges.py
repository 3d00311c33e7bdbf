"""One model's calibration made to fit what it did not run, and how sure a prediction from it is.

    from labkit.timing import predict, ranges
    cal = ranges.at_tokens(cal_mb2, cal_mb16, tokens=8 * 64)       # micro-batch 8 of a 64-token model
    cal = ranges.with_cross(cal, bare_between_nodes, latency)       # a step across a namespace boundary
    parts = [predict.calibrate(p) for p in ranges.leave_out(run)]   # the calibration without some steps
    step, low, high = ranges.predict_range(cal, parts, "fsdp1:SHARD_GRAD_OP", topo)

``benchmarks/link_prediction.py`` calibrates each model at two micro-batches and predicts every
other on the line through them; lesson 4 shows each prediction with its range.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from labkit.i18n import t
from labkit.timing.gloo import Topology, fit_cross
from labkit.timing.predict import Calibration, predict
from labkit.wire.records import Source

__all__ = ["Without", "at_tokens", "leave_out", "predict_range", "spread", "with_cross"]


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def with_cross(
    cal: Calibration, bare: Mapping[str, Mapping[str, float | Sequence[float]]], latency: float
) -> Calibration:
    """``cal`` with what a ring step across a namespace boundary costs (``gloo.fit_cross``): from
    bare collectives timed on two emulated nodes of one rank, no shaping, ``latency`` the
    boundary's own one way (``Emulation.latency_s``). A machine's cost, not a link's: the
    calibration still sees no link."""
    fixed, per_byte, failed = fit_cross(bare, 2, cal.gloo.alpha, latency)
    gloo = replace(cal.gloo, cross_alpha=fixed, cross_beta=per_byte, failed=cal.gloo.failed + tuple(failed))
    return replace(cal, gloo=gloo)


def at_tokens(lo: Calibration, hi: Calibration, tokens: float) -> Calibration:
    """A calibration for ``tokens`` per micro-batch, from two of one model at two micro-batches
    (``Calibration.tokens``): each unit's compute and host time, the optimizer's, the wait for the
    slowest rank, affine in the tokens through the two (interpolated between them, extrapolated
    outside), never below zero; what does not depend on the batch (the bytes, gloo's costs) from
    ``lo``. One calibration per model: the compute comes from the model's own steps, at its own
    shapes, and the micro-batch only moves along that line."""
    if not lo.tokens or not hi.tokens or lo.tokens == hi.tokens:
        return lo
    x = (tokens - lo.tokens) / (hi.tokens - lo.tokens)

    def at(a: float, b: float) -> float:
        return max(a + (b - a) * x, 0.0)

    profiles = {}
    for key, a in lo.profiles.items():
        b = hi.profiles.get(key, a)
        profiles[key] = replace(
            a,
            forward=[(u, at(d, e)) for (u, d), (_, e) in zip(a.forward, b.forward)],
            backward=[(u, at(d, e)) for (u, d), (_, e) in zip(a.backward, b.backward)],
            forward_host=[at(d, e) for d, e in zip(a.forward_host, b.forward_host)],
            backward_host=[at(d, e) for d, e in zip(a.backward_host, b.backward_host)],
            hook={k: at(v, b.hook.get(k, v)) for k, v in a.hook.items()},
            optimizer=at(a.optimizer, b.optimizer),
            optimizer_host=at(a.optimizer_host, b.optimizer_host),
            step_host=at(a.step_host, b.step_host),
        )
    skew = at(lo.gloo.skew, hi.gloo.skew)
    scale = skew / lo.gloo.skew if lo.gloo.skew > 0 else 1.0
    gloo = replace(
        lo.gloo,
        skew=skew,
        waits=tuple(w * scale for w in lo.gloo.waits),
        drift=at(lo.gloo.drift, hi.gloo.drift),
        failed=tuple(dict.fromkeys(lo.gloo.failed + hi.gloo.failed)),
    )
    share = at(lo.share, hi.share) if lo.share and hi.share else lo.share
    # the speed probe is the same work at any micro-batch: both calibrations' launches measured it
    probe_cpu = _mean([p for p in (lo.probe_cpu, hi.probe_cpu) if p])
    return replace(
        lo,
        profiles=profiles,
        gloo=gloo,
        share=share,
        lag=at(lo.lag, hi.lag),
        tail=at(lo.tail, hi.tail),
        tokens=tokens,
        probe_cpu=probe_cpu,
    )


class Without:
    """A run seen without some of its steps (``leave_out``): as ``calibrate`` reads a ``Run``."""

    def __init__(self, run: Source, drop: set[int]) -> None:
        events = run.events if hasattr(run, "events") else run
        self.events = {r: [m for m in ev if m.get("step") not in drop] for r, ev in events.items()}
        self.values = getattr(run, "values", {})


def leave_out(run: Source, parts: int = 4) -> list[Without]:
    """Views of ``run`` for a grouped jackknife over its steps (``spread``): the j-th without every
    ``parts``-th step from the j-th on, the first step (which ``calibrate`` never counts: lazy
    initialisation) always kept. Fewer parts where the run has fewer counted steps."""
    events = run.events if hasattr(run, "events") else run
    found = sorted({m.get("step") for ev in events.values() for m in ev if isinstance(m.get("step"), int)})
    counted = found[1:]
    parts = min(parts, len(counted))
    return [Without(run, set(counted[j::parts])) for j in range(parts)]


def spread(estimates: list[float]) -> float:
    """The standard error of an estimate from its ``k`` leave-one-part-out values (the jackknife:
    sqrt((k-1)/k * sum of squared deviations from their mean))."""
    k = len(estimates)
    if k < 2:
        raise ValueError(t("timing.predict.no_spread", parts=k))
    mean = statistics.fmean(estimates)
    return math.sqrt((k - 1) / k * math.fsum((e - mean) ** 2 for e in estimates))


def predict_range(
    cal: Calibration, parts: list[Calibration], spec: str, topo: Topology, z: float = 2.0, **kw: Any
) -> tuple[float, float, float]:
    """(step, low, high): ``predict``'s step and ``z`` standard errors either side, the error from
    the calibration's spread (``spread`` over ``parts``, each calibrated without one part of its
    steps or launches). Two configurations whose ranges overlap differ within the calibration's
    noise. What it leaves out: how far the run predicted strays on its own (a new process moves
    a step by a few percent on a shared machine)."""
    step = predict(cal, spec, topo, **kw).step_time
    se = spread([predict(p, spec, topo, **kw).step_time for p in parts])
    return step, step - z * se, step + z * se
