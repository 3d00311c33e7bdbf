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
import time
from collections.abc import Iterator, Sequence
from typing import Any

from labkit.i18n import t
from labkit.ranks import rank as _rank
from labkit.ranks.fsdp_units import find_units, fsdp1_handle, fsdp2_group, unit_bytes
from labkit.timing.spans import union
from labkit.wire.protocol import Msg
from labkit.wire.records import Span, Stream, span
from labkit.wire.setting import Flavor, Prefetch, Strategy

__all__ = ["Recorder", "cut"]

COMPUTE_KINDS = ("forward", "backward", "optimizer")


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
            raise ValueError(t("ranks.timeline.no_units"))
        self.active = False
        self._calls: list[_Call] = []
        self._extra: list[Span] = []  # optimizer and held spans
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
                self._extra.append(span("optimizer", "optimizer", started.pop(), self.now(), Stream.COMPUTE))

        self._hooks.append(optimizer.register_step_pre_hook(pre))
        self._hooks.append(optimizer.register_step_post_hook(post))

    def _wrap_fsdp(self, name: str, unit: Any) -> None:
        """Name the collectives after the unit they serve, and note when its parameters are freed."""
        handle = fsdp1_handle(unit)  # FSDP1: FlatParamHandle (these two warn where this torch moved them)
        group = fsdp2_group(unit)  # FSDP2: FSDPParamGroup
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
            self._extra.append(span(name, "held", start, self.now(), Stream.MEMORY))

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
        from labkit.ranks import comm as _comm

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
            self._extra.append(span(name, "held", start, t1, Stream.MEMORY))
        self._held_since = {}
        if not self._shards():  # DDP, NO_SHARD: every unit's parameters are there all step
            self._extra += [span(name, "held", t0, t1, Stream.MEMORY) for name, *_ in self.units]
        compute = self._compute_spans()
        if self._device() == "cpu":  # one thread: it was not computing while it waited in a collective
            compute = cut(compute, [(c.issued, c.done or c.returned) for c in counter.calls if c.blocking])
            compute = _one_thread(compute)
        comms = _waited_for_by_optimizer([_comm_span(c) for c in counter.calls], self._extra)
        self.spans = compute + self._extra + comms
        self.spans.sort(key=lambda s: s["start"])
        if send:
            _rank.send(Msg.SPANS, step=i, start=t0, end=t1, spans=self.spans, **self.describe(), **fields)

    def _compute_spans(self) -> list[Span]:
        out = []
        for c in self._calls:
            if c.fwd_end is not None:
                out.append(span(c.unit, "forward", c.fwd_start, c.fwd_end, Stream.COMPUTE))
            if c.bwd_start is not None and c.bwd_end is not None and c.bwd_end >= c.bwd_start:
                out.append(span(c.unit, "backward", c.bwd_start, c.bwd_end, Stream.COMPUTE))
        return out

    def _device(self) -> str:
        p = next(iter(self.model.parameters()), None)
        return p.device.type if p is not None else "cpu"

    def _shards(self) -> bool:
        if self.flavor == Flavor.FSDP1:
            return self.units[0][1].sharding_strategy.name != Strategy.NO_SHARD
        return self.flavor == Flavor.FSDP2

    def describe(self) -> dict[str, Any]:
        """The run's setup as the simulator needs it: flavor, options, unit order and sizes."""
        from labkit.ranks import comm as _comm

        info: dict[str, Any] = {"flavor": self.flavor, "world_size": _rank.world_size(), "device": self._device()}
        info["unit_bytes"] = unit_bytes(self.model, self.units)
        info["units"] = [name for name, *_ in self.units]
        if self.flavor == Flavor.FSDP1:
            root = self.units[0][1]
            info["strategy"] = root.sharding_strategy.name
            info["backward_prefetch"] = root.backward_prefetch.name if root.backward_prefetch else None
            info["forward_prefetch"] = bool(root.forward_prefetch)
            info["limit_all_gathers"] = bool(root.limit_all_gathers)
        elif self.flavor == Flavor.FSDP2:
            groups = [fsdp2_group(u) for _, u, *_ in self.units]
            reshard = any(g is not None and g.post_forward_mesh_info is not None for g in groups)
            info["strategy"] = Strategy.FULL_SHARD if reshard else Strategy.SHARD_GRAD_OP
            info["backward_prefetch"] = Prefetch.BACKWARD_PRE  # FSDP2's only kind
        else:
            info["strategy"] = Strategy.DDP if self.flavor == Flavor.DDP else None
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


def _comm_span(c: Any) -> Span:
    done = c.done if c.done is not None else c.returned
    extra = {"bytes": c.bytes, "wire_bytes": c.wire_bytes, "group_size": c.group_size, "blocking": c.blocking}
    return span(c.unit or "", c.op, c.issued, done, Stream.COMM, **extra)


def _waited_for_by_optimizer(comms: list[Span], extra: list[Span]) -> list[Span]:
    """A collective issued before the optimizer began ended, at the latest, when it began.

    The optimizer waits for every gradient's collective (DDP's reducer waits on each bucket's
    work before backward returns). But an async collective's end is stamped by a Python
    callback on the backend's thread, which must first take the GIL from the main thread: on
    a CPU run it was stamped up to several ms late, after the optimizer had started, and the
    replay (labkit.timing.calibrate) then made the optimizer wait for a collective long finished.
    """
    starts = [s["start"] for s in extra if s["kind"] == "optimizer"]
    for c in comms:
        later = [t for t in starts if t >= c["start"]]
        if later and c["end"] > min(later):
            c["end"] = min(later)
    return comms


def _one_thread(spans: list[Span]) -> list[Span]:
    """One thread runs one span at a time. Where two touch (one module's input gradient is the
    next module's output gradient: two hooks on one tensor, a few µs apart), end the first
    where the second begins."""
    spans = sorted(spans, key=lambda s: s["start"])
    for a, b in zip(spans, spans[1:]):
        if 0 < a["end"] - b["start"] < 1e-3:  # a larger overlap would be a bug in the hooks: keep it visible
            a["end"] = max(b["start"], a["start"])
    return [s for s in spans if s["end"] > s["start"]]


def cut(spans: list[Span], holes: Sequence[tuple[float, float]]) -> list[Span]:
    """The spans with the holes taken out (a span may become several)."""
    holes = union(holes)
    out = []
    for s in spans:
        pieces = [(s["start"], s["end"])]
        for a, b in holes:
            if a >= s["end"] or b <= s["start"]:
                continue
            pieces = [p for x, y in pieces for p in ((x, min(y, a)), (max(x, b), y)) if p[1] > p[0]]
        out += [{**s, "start": x, "end": y} for x, y in pieces]
    return out
