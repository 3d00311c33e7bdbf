"""Predict the measured step of a configuration not yet run, from one calibration (its output is *predicted*).

    from labkit.timing import predict
    cal = predict.calibrate(run)                 # one unthrottled run of labkit.testing.link_job, 1 node
    topo = predict.Topology(nodes=2, per_node=2, rate=200e6 / 8)
    predict.predict(cal, "fsdp1:HYBRID_SHARD", topo).step_time

What is calibrated, once per machine, from one run on one node with no link (``calibrate``):

* per flavor (DDP, FSDP1, FSDP2), the per-unit compute, the optimizer and the host overhead
  (``labkit.timing.calibrate``): the calibration run trains each flavor a few steps
  (``CALIBRATION_CONFIGS``: DDP, FSDP1 FULL_SHARD BACKWARD_PRE, FSDP2 with implicit prefetch);
* gloo's per-message and per-byte costs on loopback (``labkit.timing.gloo``), fitted to that
  run's own collectives (hundreds of them, at the sizes training uses);
* how busy the shared CPU was while it ran (``share``: from the scheduler's statistics, the time
  the rank's thread waited for a core against the time it ran; ``probe``: a fixed amount of
  matrix work every rank times before each step);
* ``skew``: how long a blocking collective waits for the slowest rank, on average, on one node,
  ``waits``: that wait's distribution, and ``drift``: the part of it that the compute before the
  collective adds (``fit_spans``);
* ``lag``: how much later than the ranks' mean the last one ends DDP's backward, as a share of
  it (``ddp_lag``): DDP's last bucket waits for it;
* ``tail``: how long DDP's last bucket took after the rank's backward, measured (``ddp_tail``);
  what the model gives there less than that is waited on every topology (``_ddp_extra``).

What a prediction assumes: the ring algorithm over the topology, with gloo's protocol where it
costs time (``gloo.collective_time``: a two-rank all-gather over a link takes 3/2 of its bytes'
time); per-direction links, an emulated link's token bucket (``Topology.burst``: an idle
uplink sends it at once); FSDP's order of collectives (``labkit.timing.simulate``), blocking
on CPU except DDP's buckets and FSDP2's asynchronous unshards, whose CPU work is taken from the
compute (an unshard's copy-out once the rank has waited for it, and only then the next prefetch;
slowed by the compute only while there is some: ``simulate``); each collective's wait for the slowest rank where a link slower than the CPU work does
not hide it (``gloo.link_slack``; an asynchronous unshard's under the compute it was issued
under, as far as that compute lasts; each of the measured waits, not their mean; a group of g
ranks waits for the last of g, ``gloo.slowest``, for the part of the wait the ranks' compute
adds: ``gloolink.group_wait``); compute and host overhead the calibration's,
slowed, when more ranks than cores share the machine, by the ranks that have CPU work while one
has (``runnable``: all but for what each sleeps waiting for one still computing) or, given
``speed``, by how much busier the CPU was; and, given ``pace`` (``pace_of``: the speed probe's
CPU time during a run against the calibration's), by how much slower each core ran (gloo's copies
by ``GLOO_PACE`` of it); an asynchronous unshard's CPU work taken twice where each core has one
rank (``gloolink.gather_charges``); FSDP1's optimizer on its shard (``optimizer_share``); DDP's last
bucket after the last rank's backward (``lag``, for the last of the group: ``lag_share``), on
cores that nothing else needs then.

A configuration is a string, as ``labkit.testing.link_job`` takes it: ``ddp``,
``fsdp1:FULL_SHARD[:BACKWARD_PRE|BACKWARD_POST|NONE]``, ``fsdp1:SHARD_GRAD_OP``,
``fsdp1:HYBRID_SHARD``, ``fsdp2:implicit``, ``fsdp2:explicit``; ``:bf16`` halves the bytes
gathered (compute assumed unchanged: on CPU, bf16 matmuls may be slower or faster).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any

from labkit.i18n import t
from labkit.timing.calibrate import Profile, profile_from_run, spans_messages, typical
from labkit.timing.gloo import GlooCosts, Topology, link_slack, scheduler_slice, slowest, steps
from labkit.timing.gloolink import GlooLink
from labkit.timing.sharing import beside, runnable, shared_cpu
from labkit.timing.simulate import Result, simulate
from labkit.wire.protocol import Msg
from labkit.wire.records import Source, given, messages
from labkit.wire.setting import Flavor, Fsdp2, Option, Prefetch, Setting, SettingError, Strategy

__all__ = ["CALIBRATION_CONFIGS", "Calibration", "Topology", "calibrate", "failed_fits", "measured_step", "predict"]


# the calibration run's configurations: one per flavor, each the flavor's plainest (FSDP1's
# other prefetch modes and strategies, HSDP and FSDP2's explicit prefetch are predicted)
CALIBRATION_CONFIGS = tuple(
    str(s)
    for s in (
        Setting(Flavor.DDP),
        Setting(Flavor.FSDP1, Strategy.FULL_SHARD, Prefetch.BACKWARD_PRE),
        Setting(Flavor.FSDP2, fsdp2=Fsdp2.IMPLICIT),
    )
)
SMALL = 2**18  # bytes: a bare collective this small times gloo's fixed cost, not its copies
# How much of a run's pace (``pace_of``: the speed probe, matrix work) gloo's CPU work follows, as
# an exponent: copies and the TCP stack are memory and kernel work, not the probe's arithmetic, and
# bare collectives follow about half the probe's change, weakly (docs/netem.md, "History").
GLOO_PACE = 0.5
STRATEGIES = (Strategy.FULL_SHARD, Strategy.SHARD_GRAD_OP, Strategy.HYBRID_SHARD)
PREFETCHES = tuple(Prefetch)
FSDP2_PREDICTED = (Fsdp2.IMPLICIT, Fsdp2.EXPLICIT)


@dataclass(frozen=True)
class Config:
    """A ``Setting`` the predictor can predict: ddp, fsdp1:STRATEGY[:PREFETCH], fsdp2:implicit|explicit, each
    with ``:bf16`` or not."""

    setting: Setting

    @property
    def flavor(self) -> Flavor:
        return self.setting.flavor

    @property
    def strategy(self) -> Strategy:
        return self.setting.strategy  # type: ignore[return-value]

    @property
    def prefetch(self) -> str | None:
        """torch's ``BackwardPrefetch`` name or None: FSDP2 prefetches before backward, DDP does not gather."""
        if self.flavor is Flavor.FSDP2:
            return Prefetch.BACKWARD_PRE
        pf = self.setting.backward_prefetch
        return pf.torch_name if pf is not None else None

    @property
    def explicit(self) -> bool:
        return self.setting.explicit

    @property
    def bf16(self) -> bool:
        return self.setting.bf16

    @property
    def key(self) -> str:
        """The calibration profile it runs on: its flavor's. FSDP2's explicit asynchronous prefetch
        runs on the implicit run's profile (the same hooks and compute), its gathers moved off the
        rank's thread: calibrated on its own, on one node, its compute carries the contention of
        gathers that are all CPU there, which a slow link does not have."""
        return self.flavor

    @classmethod
    def parse(cls, spec: str) -> Config:
        try:
            setting = Setting.parse(spec)
        except SettingError as err:
            raise ValueError(t("timing.predict.unknown", spec=spec)) from err
        if not predictable(setting):
            raise ValueError(t("timing.predict.unknown", spec=spec))
        return cls(setting)


def predictable(s: Setting) -> bool:
    """Whether the predictor models ``s``: its flavor's head, bf16 the only option."""
    if any(o is not Option.BF16 for o in s.options) or s.model is not None:
        return False
    if s.flavor is Flavor.FSDP1:
        return s.strategy in STRATEGIES
    return s.flavor is Flavor.DDP or (s.flavor is Flavor.FSDP2 and s.fsdp2 in FSDP2_PREDICTED)


@dataclass
class Calibration:
    """What one unthrottled run measured: a profile per flavor, gloo's costs, the CPU's speed."""

    profiles: dict[str, Profile]
    gloo: GlooCosts
    ranks: int  # ranks of the calibration run (all on one node)
    probe: float | None = None  # seconds of the speed probe, mean over the run's typical steps
    measured: dict[str, float] | None = None  # config -> measured step (its own steps)
    share: float | None = None  # cpu_share of the calibration's steps
    probe_cpu: float | None = None  # CPU seconds the probe got: how fast a core ran (``pace_of``)
    lag: float = 0.0  # DDP: how much later than the ranks' mean the last one ends backward (``ddp_lag``)
    tokens: float | None = None  # tokens per micro-batch of its steps (batch x sequence length)
    tail: float = 0.0  # DDP: seconds from the rank's backward's end to its last bucket's (``ddp_tail``)

    def to_json(self) -> str:
        profiles = {}
        for k, p in self.profiles.items():
            d = asdict(p)
            d["measured"] = {m: v for m, v in d["measured"].items() if m != "link"}
            profiles[k] = d
        return json.dumps(
            {
                "profiles": profiles,
                "gloo": self.gloo.to_dict(),
                "ranks": self.ranks,
                "probe": self.probe,
                "measured": self.measured,
                "share": self.share,
                "probe_cpu": self.probe_cpu,
                "lag": self.lag,
                "tokens": self.tokens,
                "tail": self.tail,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        d = json.loads(text)
        profiles = {}
        for k, p in d["profiles"].items():
            p["forward"] = [tuple(x) for x in p["forward"]]
            p["backward"] = [tuple(x) for x in p["backward"]]
            profiles[k] = Profile(**p)
        return cls(
            profiles,
            GlooCosts(**d["gloo"]),
            d["ranks"],
            d.get("probe"),
            d.get("measured"),
            d.get("share"),
            d.get("probe_cpu"),
            d.get("lag", 0.0),
            d.get("tokens"),
            d.get("tail", 0.0),
        )


def measured_step(msgs: list[dict[str, Any]]) -> float:
    """The step a run measured: the mean of its typical steps (``calibrate.typical``: the first and
    any over 1.5 times the median left out; a loaded CPU makes single steps two or three times slower)."""
    kept, _ = typical(msgs[1:] or msgs)
    return statistics.fmean(m["end"] - m["start"] for m in kept)


def probe_of(msgs: list[dict[str, Any]], field: str = "probe") -> float | None:
    """The speed probe's mean over the same typical steps (None: the run had no probe). ``field``:
    ``probe`` (its wall time) or ``probe_cpu`` (the CPU time it got)."""
    kept, _ = typical(msgs[1:] or msgs)
    probes = [m[field] for m in kept if isinstance(m.get(field), (int, float))]
    return statistics.fmean(probes) if probes else None


def group_probe(run: Source, label: str | None = None) -> float | None:
    """The CPU time the speed probe got in ``run``: each rank's mean over its typical steps, then
    the mean over the ranks (None: no rank recorded it). Every rank's, not rank 0's alone: on this
    2-core virtual machine one core can run slower than the other for a whole launch (a rank's
    forward 32 ms a step where its peer's took 18), and the group's step waits for it."""
    per_rank = messages(run, Msg.SPANS, **given(config=label))
    probes = [probe_of(msgs, "probe_cpu") for msgs in per_rank.values() if msgs]
    probes = [p for p in probes if p]
    return statistics.fmean(probes) if probes else None


def pace_of(cal: Calibration, run: Source, label: str | None = None) -> float | None:
    """How much slower a core ran during ``run``'s steps (of ``label``) than during the calibration:
    the CPU time the speed probe got before each step, against the calibration's, both over every
    rank (``group_probe``; None: either has none).

    Not how busy the machine was (the waits for a core are left out, and the model has them):
    how fast the core itself was. On this 2-core virtual machine that moves by 10% within a
    minute with nothing else running (other guests share the host's caches and memory), and a new
    process can land on 5-10% faster or slower memory; the calibration's steps inherit whichever
    it got. The probe and the training's own compute move together (correlation 0.8-0.9)."""
    run_probe = group_probe(run, label)
    return run_probe / cal.probe_cpu if run_probe and cal.probe_cpu else None


def cpu_share(msgs: list[dict[str, Any]]) -> float | None:
    """How long the rank's CPU work took for each second of CPU it got, over the typical steps:
    (ran + waited for a CPU) / ran, from the scheduler's statistics (None: not recorded).
    1 on an idle machine; 2 where two threads share each core all the time."""
    kept, _ = typical(msgs[1:] or msgs)
    ran = math.fsum(m["sched"]["ran"] for m in kept if (m.get("sched") or {}).get("ran"))
    waited = math.fsum(m["sched"]["waited"] for m in kept if (m.get("sched") or {}).get("ran"))
    return (ran + waited) / ran if ran > 0 else None


def calibrate(
    run: Source, configs: tuple[str, ...] = CALIBRATION_CONFIGS, labels: dict[str, str] | None = None
) -> Calibration:
    """A ``Calibration`` from one run of ``labkit.testing.link_job`` with ``configs``, one node, no
    link: a ``Run``, or its ``events`` (then without the bare collectives' timings).

    ``labels``: the ``config`` label each configuration's steps carry in ``run``, where it is not
    the configuration's own string (e.g. lesson 4's own run, ``{"fsdp1:FULL_SHARD:BACKWARD_PRE":
    "BACKWARD_PRE"}``): any run recorded with ``timeline.Recorder`` calibrates its flavor."""
    profiles, probes, cpus, shares, measured, rows = {}, [], [], [], {}, []
    ranks = 1
    for spec in configs:
        label = (labels or {}).get(spec, spec)
        msgs = spans_messages(run, 0, label)
        prof = profile_from_run(run, config=label)
        profiles[Config.parse(spec).key] = prof
        ranks = prof.world_size
        measured[spec] = measured_step(msgs)
        probe = probe_of(msgs)
        if probe is not None:
            probes.append(probe)
        cpu = group_probe(run, label)
        if cpu is not None:
            cpus.append(cpu)
        share = cpu_share(msgs)
        if share is not None:
            shares.append(share)
        rows += _collectives(typical(msgs[1:] or msgs)[0])
    values = run.values if hasattr(run, "events") else {}
    gloo = fit_spans(rows, ranks, (values.get(0) or {}).get("gloo"))
    ddp = (labels or {}).get(Flavor.DDP, Flavor.DDP)
    lag = ddp_lag(run, ddp) if Flavor.DDP in configs else 0.0
    tail = ddp_tail(run, ddp) if Flavor.DDP in configs else 0.0
    last = spans_messages(run, 0, (labels or {}).get(configs[0], configs[0]))[-1:] if configs else []
    tokens = last[0]["batch"] * last[0]["seq_len"] if last and last[0].get("seq_len") and last[0].get("batch") else None
    return Calibration(profiles, gloo, ranks, _mean(probes), measured, _mean(shares), _mean(cpus), lag, tokens, tail)


def ddp_tail(run: Source, label: str = Flavor.DDP) -> float:
    """Seconds from the end of rank 0's backward to the end of DDP's last bucket all-reduce, the mean
    over its typical steps: what the rank waits for its gradients after computing them.

    The model's own account of that wait (``lag``, the bucket's ring steps) came out short on
    the calibration itself: "tiny"'s one bucket of 787 KB takes 4.2-4.4 ms on loopback where the
    ring steps give 2.5 (bare all-reduces of 1 MB take 3.6 ms as a median here, their fastest
    0.6-2.8: the scheduler's 4 ms tick falls in one of two), and its DDP steps came out 7-14% low
    (``_ddp_extra`` carries the difference)."""
    msgs = spans_messages(run, 0, label)
    if not msgs:
        return 0.0
    kept, _ = typical(msgs[1:] or msgs)
    tails = []
    for m in kept:
        ends = [s["end"] for s in m["spans"] if s.get("kind") == "backward"]
        buckets = [s["end"] for s in m["spans"] if s.get("kind") == "all_reduce"]
        if ends and buckets and max(buckets) >= max(ends):
            tails.append(max(buckets) - max(ends))
    return statistics.fmean(tails) if tails else 0.0


def ddp_lag(run: Source, label: str = Flavor.DDP) -> float:
    """How much later than the ranks' mean the last rank ends its backward, as a share of that
    time, in DDP's typical steps: DDP's last bucket waits for it. Nothing holds the ranks together
    from the step's start (a barrier) to that bucket (the others run in the background), so the
    ranks' different speeds add up over the whole step; FSDP's blocking collectives wait for the
    last rank every few milliseconds instead (``GlooCosts.skew``). On 1 node x 2 the last rank ends
    DDP's backward 4.8-5.8 ms (7.5-8.6% of the step to it) after the mean, where FSDP1's last
    reduce-scatter waits 0.0-0.1 ms; without it DDP is predicted low wherever its last bucket is not
    queued behind the others on a slow link."""
    per_rank = [m for m in messages(run, Msg.SPANS, **given(config=label)).values() if m]
    if len(per_rank) < 2:
        return 0.0
    kept = {id(m) for m in typical(per_rank[0][1:] or per_rank[0])[0]}
    lags = []
    for i in range(1, min(len(m) for m in per_rank)):
        if id(per_rank[0][i]) not in kept:
            continue
        start = max(m[i]["start"] for m in per_rank)
        ends = [max((s["end"] for s in m[i]["spans"] if s["kind"] == "backward"), default=None) for m in per_rank]
        if None in ends:
            continue
        ends = [e - start for e in ends]
        mean = statistics.fmean(ends)
        if mean > 0:
            lags.append((max(ends) - mean) / mean)
    # the median: one step in which a rank lost its core for a scheduler tick (4 ms) makes a lag of
    # 40% of a 10 ms backward, and small steps would inherit it whole
    return statistics.median(lags) if lags else 0.0


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _collectives(msgs: list[dict[str, Any]]) -> list[tuple[str, int, float, float, float]]:
    """(kind, group size, payload bytes, seconds, compute before it) of each blocking collective the
    rank waited for; the compute is the rank's since the previous blocking collective."""
    rows = []
    for m in msgs:
        on_thread = [s for s in m["spans"] if s["stream"] == "compute" or (s["stream"] == "comm" and s.get("blocking"))]
        computed = 0.0
        for s in sorted(on_thread, key=lambda s: s["start"]):
            if s["stream"] == "compute":
                computed += s["end"] - s["start"]
                continue
            if s["kind"] in ("all_gather", "reduce_scatter", "all_reduce"):
                bytes_ = float(s.get("bytes") or 0.0)
                rows.append((s["kind"], int(s.get("group_size") or 2), bytes_, s["end"] - s["start"], computed))
            computed = 0.0
    return rows


def fit_spans(
    rows: list[tuple[str, int, float, float, float]], ranks: int, bare: dict[str, dict[str, float]] | None = None
) -> GlooCosts:
    """gloo's costs from a run's own collectives.

    * ``alpha``, the fixed cost of a ring step: the fastest per step of the bare collectives up to
      256 KB (``bare``: ``link_job.gloo_costs``; else 50 µs);
    * ``beta`` per kind, seconds per chunk byte: the fastest fifth of the run's collectives, those
      that waited least for the other ranks (one model's units are all about the same size, so
      size against time cannot separate alpha from beta);
    * ``skew``: what a blocking collective took beyond that, on average: the wait for the slowest
      rank. A collective starts when the slowest rank arrives; on a shared CPU the ranks' compute
      and gloo's threads differ from one collective to the next, so every collective waits some.
      On loopback that wait is most of a collective's time; a slow link hides it
      (``gloo.link_slack``).
    """
    alpha = 50e-6
    if bare:
        # every bare collective whose bytes cost little next to it (up to 256 KB: under 0.1 ms of
        # copies here), the fastest per step: one of them alone is as often 1 ms as 0.4 on a busy
        # core, and a 1 ms alpha makes every ring step of 4 ranks too slow
        small = [(k, size) for k, sizes in bare.items() for size in sizes if float(size) <= SMALL]
        per_step = [bare[k][size] / steps(k, ranks) for k, size in small]
        alpha = min(per_step) if per_step else alpha
    failed: list[tuple[str, float, str]] = [] if alpha > 0 else [("alpha µs", alpha * 1e6, "")]
    beta = {}
    for kind in sorted({r[0] for r in rows}):
        per = sorted((s / steps(k, g) - alpha) / (b / g) for k, g, b, s, _ in rows if k == kind and b > 0)
        beta[kind] = per[len(per) // 5] if per else 0.0
        if beta[kind] <= 0:  # no fit: the units too small for their bytes to show (issue 50's "tiny")
            fallback = bare_beta(bare, kind, ranks, alpha)
            failed.append((f"{kind} ns/B", beta[kind] * 1e9, "bare collectives'" if fallback > 0 else ""))
            beta[kind] = max(fallback, 0.0)
    wait = [(max(s - steps(k, g) * (alpha + b / g * beta.get(k, 0.0)), 0.0), c) for k, g, b, s, c in rows]
    waited = sorted(w for w, _ in wait)
    skew = math.fsum(waited) / len(waited) if waited else 0.0
    return GlooCosts(
        alpha,
        beta,
        ranks,
        skew=skew,
        waits=quantiles(waited, WAIT_QUANTILES, skew),
        drift=drift(wait),
        failed=tuple(failed),
        slice=scheduler_slice(),
    )


def bare_beta(bare: dict[str, dict[str, float]] | None, kind: str, ranks: int, alpha: float) -> float:
    """Seconds per chunk byte of ``kind`` from the bare collectives of 1 MB and more (``fit_spans``'
    fallback where the run's own collectives are too small to show it): the median per size; 0
    where there are none."""
    sizes = (bare or {}).get(kind, {})
    per = [
        (sec / steps(kind, ranks) - alpha) / (float(size) / ranks)
        for size, sec in sizes.items()
        if float(size) >= 2**20
    ]
    return statistics.median(per) if per else 0.0


def failed_fits(cal: Calibration) -> list[str]:
    """The calibration's fits without physical sense (a cost of zero or less), each with what was
    used instead: empty when every fitted cost is positive. A prediction from a calibration with
    one is not silent about it: ``benchmarks/link_prediction.py`` prints these."""
    return [
        t("timing.predict.failed_fit", what=what, value=f"{value:.3g}", used=used or t("timing.predict.nothing"))
        for what, value, used in cal.gloo.failed
    ]


SETTLED = 0.5e-3  # seconds: a collective issued this soon after the last one had no compute before it


def drift(waits: list[tuple[float, float]]) -> float:
    """The part of the wait for the slowest rank that comes from the ranks' compute taking different
    times: the mean wait of collectives after compute, less that of collectives right after
    another one (``waits``: (wait, compute before it) per collective). The rest is the ranks
    leaving the last collective at different times (gloo's protocol: a two-rank all-gather's late
    rank ends half a chunk after the other), and then the other rank is still at work in it.
    Measured: 1.5 ms right after another collective, 2.1-2.3 ms after 4-9 ms of compute."""
    after = [w for w, c in waits if c >= SETTLED]
    right = [w for w, c in waits if c < SETTLED]
    if not after or not right:
        return 0.0
    return max(0.0, math.fsum(after) / len(after) - math.fsum(right) / len(right))


WAIT_QUANTILES = 40  # values kept of the wait's distribution (the calibration times 2000 or so)


def quantiles(values: list[float], n: int, mean: float) -> tuple[float, ...]:
    """``n`` equally likely values standing for sorted ``values``: the mean of each n-th, scaled to
    keep their mean ``mean`` exactly."""
    if not values:
        return ()
    n = min(n, len(values))
    parts = [values[len(values) * i // n : len(values) * (i + 1) // n] for i in range(n)]
    out = [math.fsum(p) / len(p) for p in parts]
    total = math.fsum(out) / n
    return tuple(x * mean / total for x in out) if total > 0 else tuple(out)


def optimizer_share(cfg: Config, ranks: int, shard: int) -> float:
    """The optimizer step's work on ``shard`` ranks against the calibration's ``ranks``: FSDP1 steps
    its flat parameters' shard, one tensor per unit, whose bytes are the work: ``ranks / shard``
    (measured, FSDP1 FULL_SHARD on 1 node: 3.3-4.1 ms on 2 ranks, 2.4-3.2 ms on 4 ranks at twice
    the sharing). FSDP2 steps each parameter's shard on its own, and the
    per-tensor work is most of it (15.8-17.1 ms on 2 ranks, 22-31 ms on 4: about the sharing
    alone); DDP does not shard: unchanged."""
    if cfg.flavor is not Flavor.FSDP1 or cfg.strategy not in STRATEGIES or shard <= 0:
        return 1.0
    return ranks / shard


def slowed(prof: Profile, factor: float) -> Profile:
    """Compute and host overhead ``factor`` times slower (a busier CPU); bytes unchanged."""
    out = prof.scaled(1 / factor)
    out.forward_host = [h * factor for h in prof.forward_host]
    out.backward_host = [h * factor for h in prof.backward_host]
    out.hook = {k: v * factor for k, v in prof.hook.items()}
    out.optimizer_host = prof.optimizer_host * factor
    out.step_host = prof.step_host * factor
    return out


def halved_params(prof: Profile) -> Profile:
    """bf16 all-gathers: half the bytes gathered; reduce-scatters stay fp32."""
    out = replace(prof)
    out.param_bytes = {u: b / 2 for u, b in prof.param_bytes.items()}
    return out


def predict(cal: Calibration, spec: str, topo: Topology, speed: float | None = None, pace: float = 1.0) -> Result:
    """The step of ``spec`` on ``topo``, predicted from ``cal`` (the result is labelled simulated).

    ``speed``: how much slower the CPU is than during the calibration (a probe's ratio); default
    ``shared_cpu``: what ``topo.world`` ranks on ``topo.cores`` cores make of each other, on a
    machine that runs nothing else. ``pace``: how much slower each core runs than during the
    calibration (``pace_of``), on top of what the ranks make of each other.
    """
    cfg = Config.parse(spec)
    if cfg.key not in cal.profiles:
        raise ValueError(t("timing.predict.no_flavor", flavor=cfg.key, have=", ".join(cal.profiles)))
    if speed is not None or topo.world <= topo.cores:
        return _simulate(cal, cfg, topo, pace * (speed if speed is not None else shared_cpu(cal, topo)), pace=pace)
    return _settled(cal, cfg, topo, pace)


def _settled(cal: Calibration, cfg: Config, topo: Topology, pace: float = 1.0) -> Result:
    """More ranks than cores: the step at the CPU speed its own schedule gives (``runnable``),
    found by iterating from ``shared_cpu`` (every rank busy all the step).

    Ranks bound to cores (``Topology.pinned``) share a core with the ranks bound to it alone, and
    the last rank to reach a blocking collective makes up its lag at its own speed (``pace``), not
    the shared one: the rank it shares a core with is by then most often asleep in the collective.
    Unbound, the scheduler spreads the busy ranks over every core, and the last one's lag runs at
    the speed they all share (measured, 1 node x 4, FSDP1: blocking collectives 100 ms a step bound,
    135 ms unbound, compute 115 and 100 ms; the model without the wait 54 ms)."""
    factor = shared_cpu(cal, topo)
    catch_up = pace if topo.pinned else None
    res = _simulate(cal, cfg, topo, factor * pace, catch_up, pace)
    for _ in range(8):
        busy_here = runnable(res, cal.gloo, topo, factor * pace)
        settled = beside(cal, busy_here if topo.pinned else busy_here / max(topo.cores, 1))
        if abs(settled - factor) < 1e-3:
            break
        factor = settled
        res = _simulate(cal, cfg, topo, factor * pace, catch_up, pace)
    return res


def _simulate(
    cal: Calibration,
    cfg: Config,
    topo: Topology,
    factor: float,
    catch_up: float | None = None,
    pace: float = 1.0,
    tail: float | None = None,
) -> Result:
    """The step with compute ``factor`` times slower than the calibration's; gloo's CPU work (its
    copies, the TCP stack) as much slower for the ranks' sharing and ``GLOO_PACE`` of the pace."""
    prof = replace(slowed(cal.profiles[cfg.key], factor), world_size=topo.world)
    hybrid = cfg.strategy is Strategy.HYBRID_SHARD
    prof.optimizer *= optimizer_share(cfg, cal.ranks, topo.per_node if hybrid else topo.world)
    gloo_speed = factor * pace ** (GLOO_PACE - 1.0)
    catch_up = factor if catch_up is None else catch_up  # the slowest rank's lag is compute
    if cfg.bf16:
        prof = halved_params(prof)
    wait = (
        0.0 if cfg.flavor is Flavor.DDP else cal.gloo.skew
    )  # DDP's buckets wait for the slowest rank in the background
    main = GlooLink(cal.gloo, topo, "shard" if hybrid else "world", gloo_speed, wait, catch_up)
    inter = GlooLink(cal.gloo, topo, "replicate", gloo_speed, wait, catch_up)
    lag = cal.lag * lag_share(topo, cal.ranks) if cfg.flavor is Flavor.DDP else 0.0
    tail = _ddp_extra(cal, cfg, topo) if cfg.flavor is Flavor.DDP and tail is None else (tail or 0.0)
    return simulate(
        prof,
        main,
        strategy=cfg.strategy,
        backward_prefetch=cfg.prefetch,
        forward_prefetch=cfg.explicit,
        shard_size=topo.per_node if hybrid else None,
        inter_link=inter,
        cpu_bound=True,
        sync_comm=True,
        async_gather=cfg.explicit,
        lag=lag,
        tail=tail,
        # labkit.testing.link_job leaves FSDP2's root at torch's default reshard_after_forward (None:
        # False for the root), so backward does not gather it again, as FSDP1 does not
        regather_root=False,
    )


def _ddp_extra(cal: Calibration, cfg: Config, topo: Topology) -> float:
    """Seconds DDP's last bucket waits beyond the model's account of it: the calibration's measured
    ``tail`` less the tail this schedule gives on the calibration's own topology (its ranks on one
    node, as many cores as ``topo``'s, bound as ``topo``'s are), at its own speed. Not CPU work
    (the ranks are done computing), so no rank sharing a core slows it."""
    if cal.tail <= 0:
        return 0.0
    own = Topology(1, cal.ranks, cores=topo.cores, pinned=topo.pinned)
    res = _simulate(cal, cfg, own, shared_cpu(cal, own), tail=0.0)
    ends = [s["end"] for s in res.spans if s.get("kind") == "backward"]
    buckets = [s for s in res.spans if s.get("kind") == "all_reduce"]
    if not ends or not buckets:
        return 0.0
    last = max(buckets, key=lambda s: s["end"])
    extra = max(0.0, cal.tail - (last["end"] - max(ends)))
    # a wait, not bytes: where the link makes the last bucket longer than its CPU work, the wait
    # falls in that time, as a blocking collective's wait does (``gloo.link_slack``)
    return max(0.0, extra - link_slack(cal.gloo, topo, "all_reduce", float(last.get("bytes") or 0.0)))


def lag_share(topo: Topology, ranks: int) -> float:
    """DDP's lag on ``topo`` against the calibration's ``ranks``: the last of the group against the
    last of the calibration's (``gloo.slowest``, as for a blocking collective's wait). Measured on
    4 ranks bound to 2 cores: 7-16% (mean 11%) where this makes 15%, the cores' speeds shared by
    their two ranks."""
    return slowest(topo.world) / slowest(ranks) if ranks > 1 else 0.0
