"""The per-unit timeline of a step: each FSDP unit's all-gather, forward, backward and
reduce-scatter, from timestamps taken in the ranks, drawn as a Gantt chart.

In the rank:

    from labkit import timeline
    rec = timeline.Recorder(model, optimizer=opt)       # after wrapping with FSDP / DDP
    for i in rank.steps(3):
        with rec.step(i):                                # sends "spans" (and "comm") at the end
            model(x, y).backward(); opt.step(); opt.zero_grad()

In the notebook:

    timeline.plot_timeline(run)                          # one Gantt chart, a row per rank and stream
    timeline.plot_timelines({"BACKWARD_PRE": run_a, "None": run_b})   # side by side
    timeline.to_chrome_trace(run, "step.json")           # open in ui.perfetto.dev or chrome://tracing

Where the times come from (all ``time.time()`` on the rank):

* forward: forward pre/post hooks on the modules that do the unit's compute (the
  block itself, or for the root the embedding, final norm and head), so the span
  starts after FSDP's pre-forward has gathered the parameters.
* backward: from the moment the gradient of the unit's output is ready (a tensor
  hook registered after FSDP's own pre-backward hook, so again after the gather) to
  the moment the gradient of its input is ready. A module whose inputs need no
  gradient (the token embedding) ends when its output's grad_fn has run: exact for
  a single-op module like ``nn.Embedding``.
* collectives: issued and completed, from ``labkit.comm`` (completion from the
  backend's own callback). Each is named after the unit FSDP was gathering or
  reducing when it issued it, by wrapping that unit's ``unshard`` / ``post_backward``
  (FSDP2 ``FSDPParamGroup``, FSDP1 ``FlatParamHandle``; private APIs, checked on
  torch 2.13). A prefetched all-gather is therefore drawn under the unit it
  gathers, not the unit whose hook issued it.
* held: from a unit's all-gather until FSDP frees its gathered parameters; the count
  of units held at once is what prefetching costs in memory.

On CPU/gloo, FSDP issues collectives synchronously: compute waits for each one, so
the chart shows no overlap whatever the prefetch setting. The order still changes.
On GPUs the collectives run on their own stream; ``labkit.simulate`` shows that case.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from labkit import rank as _rank
from labkit.i18n import catalog, t

catalog(
    {
        "timeline.no_spans": {
            "en": "no timeline in this run: record a step with labkit.timeline.Recorder(model).step(i)",
            "ro": "această rulare nu are cronologie: înregistrați un pas cu labkit.timeline.Recorder(model).step(i)",
        },
        "timeline.no_step": {
            "en": "step {step} was not recorded; recorded steps: {steps}",
            "ro": "pasul {step} nu a fost înregistrat; pași înregistrați: {steps}",
        },
        "timeline.no_units": {
            "en": "no FSDP unit and no module of the given types found in the model",
            "ro": "nu s-a găsit nicio unitate FSDP și niciun modul de tipurile date în model",
        },
        "timeline.title": {"en": "Step {step}, per rank (measured)", "ro": "Pasul {step}, pe rang (măsurat)"},
        "timeline.title.simulated": {"en": "{title} (simulated)", "ro": "{title} (simulat)"},
        "timeline.xlabel": {"en": "time since step start (ms)", "ro": "timp de la începutul pasului (ms)"},
        "timeline.lane.compute": {"en": "rank {rank} compute", "ro": "rang {rank} calcul"},
        "timeline.lane.comm": {"en": "rank {rank} comm", "ro": "rang {rank} comunicare"},
        "timeline.lane.held": {"en": "rank {rank} units held", "ro": "rang {rank} unități ținute"},
        "timeline.legend.forward": {"en": "forward", "ro": "înainte (forward)"},
        "timeline.legend.backward": {"en": "backward", "ro": "înapoi (backward)"},
        "timeline.legend.optimizer": {"en": "optimizer", "ro": "optimizator"},
        "timeline.legend.all_gather": {"en": "all-gather", "ro": "all-gather"},
        "timeline.legend.reduce_scatter": {"en": "reduce-scatter", "ro": "reduce-scatter"},
        "timeline.legend.all_reduce": {"en": "all-reduce", "ro": "all-reduce"},
        "timeline.legend.broadcast": {"en": "broadcast", "ro": "broadcast"},
        "timeline.legend.held": {"en": "gathered (in memory)", "ro": "adunat (în memorie)"},
        "timeline.peak": {"en": "peak {n} units held", "ro": "maxim {n} unități ținute"},
    }
)

COMPUTE_KINDS = ("forward", "backward", "optimizer")
COLORS = {
    "forward": "#4c72b0",
    "backward": "#dd8452",
    "optimizer": "#8c8c8c",
    "all_gather": "#55a868",
    "reduce_scatter": "#c44e52",
    "all_reduce": "#8172b3",
    "broadcast": "#937860",
    "held": "#ccb974",
}


def span(unit: str, kind: str, start: float, end: float, stream: str, **extra: Any) -> dict[str, Any]:
    return {"unit": unit, "kind": kind, "start": start, "end": end, "stream": stream, **extra}


# -- in the rank -------------------------------------------------------------------


class _Call:
    """One forward call of one compute module: its forward span and, later, its backward."""

    __slots__ = ("unit", "fwd_start", "fwd_end", "bwd_start", "bwd_end", "now")

    def __init__(self, unit: str, fwd_start: float, now: Any) -> None:
        self.unit = unit
        self.now = now
        self.fwd_start = fwd_start
        self.fwd_end: float | None = None
        self.bwd_start: float | None = None
        self.bwd_end: float | None = None

    def output_grad_ready(self, _grad: Any = None) -> None:
        if self.bwd_start is None:
            self.bwd_start = self.now()

    def input_grad_ready(self, *_: Any) -> None:
        self.bwd_end = self.now()  # the last input's gradient marks the end


def _tensors(x: Any) -> Iterator[Any]:
    import torch

    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


class Recorder:
    """Hooks on a wrapped model that time each unit's work in the steps run under ``step()``.

    ``units``: module types to treat as units when the model is not FSDP-wrapped (DDP or a
    plain model); by default labkit's ``TransformerBlock``. The root is always a unit.

    ``synchronize`` (default: when the model is on a GPU): wait for the device at every
    timestamp, so that a span is the device's time and not the CPU's launch time. That
    serializes compute and collectives, so such a timeline measures per-unit compute (what
    ``labkit.simulate`` replays) but shows no overlap; see the GPU's own overlap with
    ``torch.profiler`` and Perfetto.
    """

    def __init__(
        self, model: Any, optimizer: Any = None, units: Sequence[type] | None = None, synchronize: bool | None = None
    ) -> None:
        self.model = model
        if synchronize is None:
            synchronize = self._device() == "cuda"
        self._sync = _cuda_synchronize if synchronize else None
        self.now = _synced_clock if synchronize else time.time
        self.flavor, self.units = find_units(model, units)
        if not self.units:
            raise ValueError(t("timeline.no_units"))
        self.active = False
        self._calls: list[_Call] = []
        self._extra: list[dict[str, Any]] = []  # optimizer and held spans
        self._held_since: dict[str, float] = {}
        self._current: list[str] = []  # units whose unshard / post_backward is running
        self._last_post_backward: str | None = None
        self._hooks: list[Any] = []
        self._patched: list[tuple[Any, str]] = []
        for name, unit, compute, outer in self.units:
            for module in compute:
                self._hook_compute(name, module, outer if len(compute) == 1 and outer is not module else None)
            self._wrap_fsdp(name, unit)
        if optimizer is not None:
            self._hook_optimizer(optimizer)

    # hooks --------------------------------------------------------------

    def _hook_compute(self, name: str, module: Any, outer: Any) -> None:
        """Forward hooks on ``module``; backward-start hooks on ``outer``'s output when given.

        FSDP1 registers its pre-backward hook on the wrapper's output, after the inner
        module returns: hooking the wrapper's output puts ours after it.
        """
        pending: list[_Call] = []

        def pre(mod: Any, args: Any) -> None:
            if not self.active:
                return
            call = _Call(name, self.now(), self.now)
            pending.append(call)
            self._calls.append(call)
            needs_grad = [x for x in _tensors(args) if x.requires_grad]
            for x in needs_grad:
                x.register_hook(call.input_grad_ready)
            call.bwd_end = None if needs_grad else -1.0  # -1: end from the grad_fn instead

        def post(mod: Any, args: Any, out: Any) -> None:
            if not self.active or not pending:
                return
            call = pending[-1] if outer is not None else pending.pop()
            call.fwd_end = self.now()
            if call.bwd_end == -1.0:
                call.bwd_end = None
                for y in _tensors(out):
                    if y.grad_fn is not None:
                        y.grad_fn.register_hook(call.input_grad_ready)
            if outer is None:
                self._hook_outputs(call, out)

        def outer_post(mod: Any, args: Any, out: Any) -> None:
            if self.active and pending:
                self._hook_outputs(pending.pop(), out)

        self._hooks.append(module.register_forward_pre_hook(pre))
        self._hooks.append(module.register_forward_hook(post))
        if outer is not None:
            self._hooks.append(outer.register_forward_hook(outer_post))

    @staticmethod
    def _hook_outputs(call: _Call, out: Any) -> None:
        for y in _tensors(out):
            if y.requires_grad:
                y.register_hook(call.output_grad_ready)

    def _hook_optimizer(self, optimizer: Any) -> None:
        started: list[float] = []

        def pre(*_: Any) -> None:
            if self.active:
                started.append(self.now())

        def post(*_: Any) -> None:
            if self.active and started:
                self._extra.append(span("optimizer", "optimizer", started.pop(), self.now(), "compute"))

        self._hooks.append(optimizer.register_step_pre_hook(pre))
        self._hooks.append(optimizer.register_step_post_hook(post))

    def _wrap_fsdp(self, name: str, unit: Any) -> None:
        """Name the collectives after the unit they serve, and note when its parameters are freed."""
        handle = getattr(unit, "_handle", None)  # FSDP1: FlatParamHandle
        get_state = getattr(unit, "_get_fsdp_state", None)  # FSDP2
        group = getattr(get_state(), "_fsdp_param_group", None) if callable(get_state) else None
        if handle is not None:
            self._patch(handle, "unshard", self._in_unit(name, handle.unshard, sticky=False))
            self._patch(handle, "reshard", self._on_reshard_fsdp1(name, handle.reshard))
        elif group is not None:
            self._patch(group, "unshard", self._in_unit(name, group.unshard, sticky=False))
            self._patch(group, "post_backward", self._in_unit(name, group.post_backward, sticky=True))
            self._patch(group, "reshard", self._on_reshard_fsdp2(name, group))

    def _patch(self, obj: Any, attr: str, fn: Any) -> None:
        setattr(obj, attr, fn)  # an instance attribute shadows the class's method
        self._patched.append((obj, attr))

    def _in_unit(self, name: str, fn: Any, sticky: bool) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self._current.append(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self._current.pop()
                if sticky:
                    self._last_post_backward = name

        return wrapped

    def _on_reshard_fsdp1(self, name: str, fn: Any) -> Any:
        def wrapped(free_unsharded_flat_param: bool, *args: Any, **kwargs: Any) -> Any:
            out = fn(free_unsharded_flat_param, *args, **kwargs)
            self._last_post_backward = name  # FSDP1 reduce-scatters right after this reshard
            if free_unsharded_flat_param:
                self._freed(name)
            return out

        return wrapped

    def _on_reshard_fsdp2(self, name: str, group: Any) -> Any:
        fn = group.reshard

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            was_unsharded = group.is_unsharded
            out = fn(*args, **kwargs)
            if was_unsharded and not group.is_unsharded:
                self._freed(name)
            return out

        return wrapped

    def _freed(self, name: str) -> None:
        start = self._held_since.pop(name, None)
        if self.active and start is not None:
            self._extra.append(span(name, "held", start, self.now(), "memory"))

    def _unit_of(self, kind: str) -> str | None:
        """Called by the comm counter for each collective: which unit is it for?"""
        if self._current:
            name = self._current[-1]
        elif kind in ("reduce_scatter", "all_reduce") and self._last_post_backward is not None:
            name = self._last_post_backward  # FSDP1 reduces outside any wrapped method
        else:
            return None
        if kind == "all_gather":
            self._held_since.setdefault(name, self.now())
        return name

    # the step -----------------------------------------------------------

    @contextlib.contextmanager
    def step(self, i: int | None = None, send: bool = True, comm: bool = True, **fields: Any) -> Iterator[Recorder]:
        """Record one step; at its end send ``spans`` (and the ``comm`` counts, unless ``comm=False``)."""
        from labkit import comm as _comm

        self._calls, self._extra = [], []
        self._last_post_backward = None
        t0 = self.now()
        with _comm.count(step=i, send=send and comm, **fields) as counter:
            counter.unit_of = self._unit_of
            counter.synchronize = self._sync
            self.active = True
            try:
                yield self
            finally:
                self.active = False
        t1 = self.now()
        for name, start in self._held_since.items():  # e.g. SHARD_GRAD_OP keeps units until the end
            self._extra.append(span(name, "held", start, t1, "memory"))
        self._held_since = {}
        if not self._shards():  # DDP, NO_SHARD: every unit's parameters are there all step
            self._extra += [span(name, "held", t0, t1, "memory") for name, *_ in self.units]
        compute = self._compute_spans()
        if self._device() == "cpu":  # one thread: it was not computing while it waited in a collective
            compute = _cut(compute, [(c.issued, c.done or c.returned) for c in counter.calls if c.blocking])
            compute = _one_thread(compute)
        self.spans = compute + self._extra + [_comm_span(c) for c in counter.calls]
        self.spans.sort(key=lambda s: s["start"])
        if send:
            _rank.send("spans", step=i, start=t0, end=t1, spans=self.spans, **self.describe(), **fields)

    def _compute_spans(self) -> list[dict[str, Any]]:
        out = []
        for c in self._calls:
            if c.fwd_end is not None:
                out.append(span(c.unit, "forward", c.fwd_start, c.fwd_end, "compute"))
            if c.bwd_start is not None and c.bwd_end is not None and c.bwd_end >= c.bwd_start:
                out.append(span(c.unit, "backward", c.bwd_start, c.bwd_end, "compute"))
        return out

    def _device(self) -> str:
        p = next(iter(self.model.parameters()), None)
        return p.device.type if p is not None else "cpu"

    def _shards(self) -> bool:
        if self.flavor == "fsdp1":
            return self.units[0][1].sharding_strategy.name != "NO_SHARD"
        return self.flavor == "fsdp2"

    def describe(self) -> dict[str, Any]:
        """The run's setup as the simulator needs it: flavor, options, unit order and sizes."""
        from labkit import comm as _comm

        info: dict[str, Any] = {"flavor": self.flavor, "world_size": _rank.world_size(), "device": self._device()}
        info["unit_bytes"] = unit_bytes(self.model, self.units)
        info["units"] = [name for name, *_ in self.units]
        if self.flavor == "fsdp1":
            root = self.units[0][1]
            info["strategy"] = root.sharding_strategy.name
            info["backward_prefetch"] = root.backward_prefetch.name if root.backward_prefetch else None
            info["forward_prefetch"] = bool(root.forward_prefetch)
            info["limit_all_gathers"] = bool(root.limit_all_gathers)
        elif self.flavor == "fsdp2":
            groups = [_fsdp2_group(u) for _, u, *_ in self.units]
            reshard = any(g is not None and g.post_forward_mesh_info is not None for g in groups)
            info["strategy"] = "FULL_SHARD" if reshard else "SHARD_GRAD_OP"
            info["backward_prefetch"] = "BACKWARD_PRE"  # FSDP2's only kind
        else:
            info["strategy"] = "DDP" if self.flavor == "ddp" else None
        info["padded_units"] = _comm.padded_units(self.model) if self.flavor.startswith("fsdp") else {}
        return info

    def close(self) -> None:
        """Remove every hook and restore FSDP's own methods."""
        for h in self._hooks:
            h.remove()
        for obj, attr in self._patched:
            obj.__dict__.pop(attr, None)
        self._hooks, self._patched = [], []


def _cuda_synchronize() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _synced_clock() -> float:
    _cuda_synchronize()
    return time.time()


def _comm_span(c: Any) -> dict[str, Any]:
    done = c.done if c.done is not None else c.returned
    extra = {"bytes": c.bytes, "wire_bytes": c.wire_bytes, "group_size": c.group_size, "blocking": c.blocking}
    return span(c.unit or "", c.op, c.issued, done, "comm", **extra)


def _one_thread(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One thread runs one span at a time. Where two touch (one module's input gradient is the
    next module's output gradient: two hooks on one tensor, a few µs apart), end the first
    where the second begins."""
    spans = sorted(spans, key=lambda s: s["start"])
    for a, b in zip(spans, spans[1:]):
        if 0 < a["end"] - b["start"] < 1e-3:  # a larger overlap would be a bug in the hooks: keep it visible
            a["end"] = max(b["start"], a["start"])
    return [s for s in spans if s["end"] > s["start"]]


def _cut(spans: list[dict[str, Any]], holes: Sequence[tuple[float, float]]) -> list[dict[str, Any]]:
    """The spans with the holes taken out (a span may become several)."""
    holes = _union(holes)
    out = []
    for s in spans:
        pieces = [(s["start"], s["end"])]
        for a, b in holes:
            if a >= s["end"] or b <= s["start"]:
                continue
            pieces = [p for x, y in pieces for p in ((x, min(y, a)), (max(x, b), y)) if p[1] > p[0]]
        out += [{**s, "start": x, "end": y} for x, y in pieces]
    return out


def _fsdp2_group(module: Any) -> Any:
    get_state = getattr(module, "_get_fsdp_state", None)
    return getattr(get_state(), "_fsdp_param_group", None) if callable(get_state) else None


def find_units(
    model: Any, unit_types: Sequence[type] | None = None
) -> tuple[str, list[tuple[str, Any, list[Any], Any]]]:
    """(flavor, [(name, unit module, compute modules, outer module)]) in module order, root first.

    flavor: "fsdp1", "fsdp2", "ddp" or "plain". The compute modules of a unit are the unit
    itself if it holds no other unit, else its own submodules that hold no unit.
    """
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    from labkit.comm import unit_name

    if any(isinstance(m, FullyShardedDataParallel) for m in model.modules()):
        flavor, is_unit = "fsdp1", lambda m: isinstance(m, FullyShardedDataParallel)
    elif any(isinstance(m, FSDPModule) for m in model.modules()):
        flavor, is_unit = "fsdp2", lambda m: isinstance(m, FSDPModule)
    else:
        from labkit.models import TransformerBlock

        types = tuple(unit_types or (TransformerBlock,))
        flavor = "ddp" if hasattr(model, "module") and type(model).__name__ == "DistributedDataParallel" else "plain"
        root = model.module if flavor == "ddp" else model
        return flavor, _units(root, lambda m: m is root or isinstance(m, types), unit_name)
    return flavor, _units(model, is_unit, unit_name)


def _units(model: Any, is_unit: Any, unit_name: Any) -> list[tuple[str, Any, list[Any], Any]]:
    out = []
    for fqn, module in model.named_modules():
        if not is_unit(module) and module is not model:
            continue
        inner = getattr(module, "_fsdp_wrapped_module", module)
        nested = [m for m in inner.modules() if m is not inner and is_unit(m)]
        compute = [inner] if not nested else list(_own_modules(inner, is_unit))
        out.append((unit_name(fqn), module, compute, module))
    return out


def _own_modules(module: Any, is_unit: Any) -> Iterator[Any]:
    for child in module.children():
        if is_unit(child):
            continue
        if any(is_unit(m) for m in child.modules()):
            yield from _own_modules(child, is_unit)
        else:
            yield child


def unit_bytes(model: Any, units: Sequence[tuple[str, Any, list[Any], Any]]) -> dict[str, int]:
    """Bytes of each unit's unsharded parameters (FSDP padding included, see ``comm.padded_units``)."""
    from labkit.comm import padded_units

    padded = padded_units(model)
    out = {}
    for name, unit, compute, _ in units:
        params = [p for m in compute for p in m.parameters()]
        size = params[0].element_size() if params else 4
        handle = getattr(unit, "_handle", None)
        if handle is not None:
            size = handle.flat_param.element_size()
        out[name] = padded[name] * size if name in padded else sum(p.numel() * p.element_size() for p in params)
    return out


# -- in the notebook -----------------------------------------------------------------


def spans_by_rank(run: Any, step: int | None = None) -> dict[int, dict[str, Any]]:
    """Per rank, the ``spans`` message of ``step`` (default: the last one recorded).

    ``run``: a ``Run`` (reads ``run.events``), a dict {rank: [events]}, or a dict
    {rank: [spans]} of plain span dicts (tests, the simulator).
    """
    events = getattr(run, "events", run)
    out: dict[int, dict[str, Any]] = {}
    for r, evs in dict(events).items():
        evs = list(evs)
        if evs and "t" not in evs[0] and "kind" in evs[0]:  # plain spans
            out[int(r)] = {"step": step, "spans": evs}
            continue
        msgs = [m for m in evs if m.get("t") == "spans"]
        if not msgs:
            continue
        chosen = msgs[-1] if step is None else next((m for m in msgs if m.get("step") == step), None)
        if chosen is None:
            raise KeyError(t("timeline.no_step", step=step, steps=[m.get("step") for m in msgs]))
        out[int(r)] = chosen
    if not out:
        raise ValueError(t("timeline.no_spans"))
    return out


def _origin(by_rank: Mapping[int, dict[str, Any]]) -> float:
    starts = [s["start"] for m in by_rank.values() for s in m["spans"]]
    starts += [m["start"] for m in by_rank.values() if isinstance(m.get("start"), (int, float))]
    return min(starts) if starts else 0.0


def held_curve(spans: Sequence[dict[str, Any]]) -> list[tuple[float, int]]:
    """(time, number of units held) at each change, from the ``held`` spans."""
    edges = sorted(
        [(s["start"], 1) for s in spans if s["kind"] == "held"] + [(s["end"], -1) for s in spans if s["kind"] == "held"]
    )
    out, n = [], 0
    for when, d in edges:
        n += d
        out.append((when, n))
    return out


def peak_held(spans: Sequence[dict[str, Any]]) -> int:
    return max((n for _, n in held_curve(spans)), default=0)


LANES = ("compute", "comm", "held")


def plot_timeline(
    run: Any,
    ax: Any = None,
    step: int | None = None,
    title: str | None = None,
    simulated: bool = False,
    legend: bool = True,
) -> Any:
    """A Gantt chart of one step: per rank, a compute row, a comm row, and the number of units held."""
    import matplotlib.pyplot as plt

    by_rank = spans_by_rank(run, step)
    simulated = simulated or any(m.get("simulated") for m in by_rank.values())
    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 1.2 + 0.55 * len(LANES) * len(by_rank)), constrained_layout=True)
        plt.close(fig)  # returned, not shown twice by the inline backend
    t0 = _origin(by_rank)
    width = max((s["end"] - t0 for m in by_rank.values() for s in m["spans"]), default=0.0) * 1e3
    ticks, labels = [], []
    for i, r in enumerate(sorted(by_rank)):
        spans = by_rank[r]["spans"]
        for j, lane in enumerate(LANES):
            y = i * (len(LANES) + 0.5) + j
            if lane == "held":
                _draw_held(ax, spans, t0, y)
            for s in spans:
                if _lane(s) == lane and lane != "held":
                    _bar(ax, s, t0, y, label_if_wider=width / 25)
            ticks.append(y)
            labels.append(t(f"timeline.lane.{lane}", rank=r))
    ax.set_yticks(ticks, labels, fontsize="small")
    ax.set_ylim(max(ticks) + 0.6, -0.6)
    ax.set_xlabel(t("timeline.xlabel"))
    step_shown = next(iter(by_rank.values())).get("step")
    head = title or t("timeline.title", step=step_shown if step_shown is not None else "")
    ax.set_title(t("timeline.title.simulated", title=head) if simulated else head, fontsize="medium")
    if legend:
        ax.legend(
            handles=_legend_handles(by_rank),
            fontsize="x-small",
            ncols=4,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.18),
        )
    return ax.figure


def _lane(s: dict[str, Any]) -> str:
    return "held" if s["stream"] == "memory" else "comm" if s["stream"] == "comm" else "compute"


def _bar(ax: Any, s: dict[str, Any], t0: float, y: float, label_if_wider: float) -> None:
    x, w = (s["start"] - t0) * 1e3, max((s["end"] - s["start"]) * 1e3, 1e-3)
    color = COLORS.get(s["kind"], "#999999")
    ax.broken_barh([(x, w)], (y - 0.4, 0.8), facecolors=color, edgecolor="white", linewidth=0.3)
    if s.get("unit") and s["unit"] != s["kind"] and w >= label_if_wider:
        ax.text(x + w / 2, y, _short(s["unit"]), ha="center", va="center", fontsize=6, color="white", clip_on=True)


def _draw_held(ax: Any, spans: Sequence[dict[str, Any]], t0: float, y: float) -> None:
    """The number of units whose gathered parameters are in memory, as a filled step curve."""
    curve = held_curve(spans)
    if not curve:
        return
    peak = max(n for _, n in curve)
    xs = [(w - t0) * 1e3 for w, _ in curve]
    ys = [y + 0.4 - 0.8 * n / max(peak, 1) for _, n in curve]
    ax.fill_between(xs, ys, y + 0.4, step="post", color=COLORS["held"], alpha=0.6, linewidth=0)
    ax.text(xs[-1], y, " " + t("timeline.peak", n=peak), fontsize=6, va="center")


def _legend_handles(by_rank: Mapping[int, dict[str, Any]]) -> list[Any]:
    from matplotlib.patches import Patch

    kinds = {s["kind"] for m in by_rank.values() for s in m["spans"]}
    return [Patch(color=c, label=t(f"timeline.legend.{k}")) for k, c in COLORS.items() if k in kinds]


def _short(unit: str) -> str:
    return unit.replace("layers.", "L")


def plot_timelines(runs: Mapping[str, Any], step: int | None = None, sharex: bool = True) -> Any:
    """One chart per setting ({label: run}), side by side, on a common time axis."""
    import matplotlib.pyplot as plt

    n = len(runs)
    all_ranks = {label: spans_by_rank(r, step) for label, r in runs.items()}
    nranks = max(len(b) for b in all_ranks.values())
    fig, axes = plt.subplots(
        1,
        n,
        figsize=(4.6 * n + 1.2, 1.4 + 0.55 * len(LANES) * nranks),
        sharex=sharex,
        sharey=True,
        constrained_layout=True,
    )
    axes = [axes] if n == 1 else list(axes)
    for ax, (label, run) in zip(axes, runs.items()):
        plot_timeline(run, ax=ax, step=step, title=label, legend=False)
    merged = {i: {"spans": [s for b in all_ranks.values() for m in b.values() for s in m["spans"]]} for i in (0,)}
    fig.legend(handles=_legend_handles(merged), fontsize="x-small", ncols=7, loc="outside lower center")
    plt.close(fig)
    return fig


def to_chrome_trace(run: Any, path: str | None = None, step: int | None = None) -> dict[str, Any]:
    """The step as a Chrome/Perfetto trace (``traceEvents``, ``ph: "X"``, pid = rank, tid = stream)."""
    by_rank = spans_by_rank(run, step)
    t0 = _origin(by_rank)
    tids = {"compute": 0, "comm": 1, "memory": 2}
    events: list[dict[str, Any]] = []
    for r, msg in sorted(by_rank.items()):
        events.append({"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}})
        for stream, tid in tids.items():
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "args": {"name": stream}})
        for s in msg["spans"]:
            args = {k: v for k, v in s.items() if k not in ("start", "end", "stream")}
            events.append(
                {
                    "name": f"{s['kind']} {s['unit']}".strip(),
                    "cat": s["kind"],
                    "ph": "X",
                    "pid": r,
                    "tid": tids.get(s["stream"], 3),
                    "ts": round((s["start"] - t0) * 1e6, 3),
                    "dur": round(max(s["end"] - s["start"], 0.0) * 1e6, 3),
                    "args": args,
                }
            )
    simulated = any(m.get("simulated") for m in by_rank.values())
    trace = {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"simulated": simulated}}
    if path is not None:
        with open(path, "w") as f:
            json.dump(trace, f)
    return trace


def summary(run: Any, step: int | None = None) -> dict[int, dict[str, float]]:
    """Per rank: step span, compute time, collective time, and how much collective time no compute hid."""
    out = {}
    for r, msg in spans_by_rank(run, step).items():
        spans = msg["spans"]
        compute = _union([(s["start"], s["end"]) for s in spans if s["stream"] == "compute"])
        comm = _union([(s["start"], s["end"]) for s in spans if s["stream"] == "comm"])
        start = msg.get("start", min(s["start"] for s in spans))
        end = msg.get("end", max(s["end"] for s in spans))
        out[r] = {
            "step_s": end - start,
            "compute_s": _length(compute),
            "comm_s": _length(comm),
            "exposed_comm_s": _length(comm) - _length(_intersect(comm, compute)),
            "peak_units_held": float(peak_held(spans)),
        }
    return out


def _union(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _intersect(xs: Sequence[tuple[float, float]], ys: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if a < b:
            out.append((a, b))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def _length(intervals: Sequence[tuple[float, float]]) -> float:
    return math.fsum(b - a for a, b in intervals)
