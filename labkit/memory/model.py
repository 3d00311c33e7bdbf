"""Memory per rank, from arithmetic: what sharding saves, what it does not, and the peak.

    from labkit import memory_model as mm
    mm.model_states(7.5e9, "DDP", 64)                  # 120 GB per GPU (ZeRO paper, Fig. 1)
    mm.model_states(7.5e9, "ZERO3", 64)                # 1.9 GB
    b = mm.peak_memory("llama-7b", "FULL_SHARD", 8, micro_batch=1, checkpointing=True)
    print(b.table())                                   # per category, device and host
    print(b.explain())                                 # every term at the peak, and which phase sets it
    mm.fits("llama-70b", "H100-80GB", strategy="DDP")  # no: it needs 1120 GB
    mm.min_world_size("llama-70b", "FULL_SHARD", "H100-80GB", checkpointing=True)

The model states (parameters, gradients, optimizer state; the ZeRO paper's arithmetic,
units and conventions) are computed in ``labkit.memory.states``; the shapes, padding and
activations of the lessons' transformer in ``labkit.memory.shapes``; the moments of a step
and what each flavor holds at them in ``labkit.memory.peak``. This module puts them
together and answers the questions: how much at the peak, does it fit, how many GPUs.
Plots: ``labkit.memory_view``.

What sharding does not remove: to compute, a FULL_SHARD unit is all-gathered, so its full
parameters exist on every rank for a while, and in backward its full gradients too, until
the reduce-scatter. ``peak_memory`` finds the step's peak moment for a flavor (FSDP1
``FullyShardedDataParallel``, FSDP2 ``fully_shard``) and a strategy, summing what is alive
then: the root unit kept gathered through backward, the current block and the prefetched
one, the unsharded gradients before their reduce-scatter, the temporaries of the block
being differentiated, and the activations. If there is no ``auto_wrap_policy``
(``wrap="none"``), the whole model is one unit: gathered for the whole step, so sharding
saves only the optimizer state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from labkit.fmt import fmt_bytes, fmt_count, fmt_number, render_table
from labkit.i18n import t
from labkit.memory import peak as memory_peak
from labkit.memory.peak import StepShape
from labkit.memory.shapes import (
    Activations,
    block_backward_bytes,
    config,
    head_grad_bytes,
    korthikanti_per_layer,
    labkit_outside_layers,
    labkit_per_layer,
    local_numel,
    logits_bytes,
    transformer_units,
)
from labkit.memory.states import (
    CATEGORIES,
    CONVENTIONS,
    GB,
    GPUS,
    OPTIMIZERS,
    PRECISIONS,
    STRATEGIES,
    GiB,
    MemoryBreakdown,
    PerParam,
    Strategy,
    bytes_per_param,
    choose,
    gpu_bytes,
    model_states,
    name_key,
    resolve_optimizer,
    resolve_precision,
    resolve_strategy,
    shard_group,
)
from labkit.wire.setting import Flavor, Prefetch
from labkit.wire.setting import Strategy as Sharding  # torch's names (memory.states.Strategy: the model's)

__all__ = [
    "CATEGORIES", "CONVENTIONS", "GB", "GPUS", "OPTIMIZERS", "PRECISIONS", "STRATEGIES", "Activations", "Fit",
    "GiB", "MemoryBreakdown", "PerParam", "Strategy", "activation_memory", "bytes_per_param", "fits", "gpu_bytes",
    "korthikanti_per_layer", "labkit_outside_layers", "labkit_per_layer", "local_numel", "max_params_that_fit",
    "min_world_size", "model_states", "peak_memory", "resolve_optimizer", "resolve_precision", "resolve_strategy",
    "shard_group", "strategy_table", "transformer_units", "unit_sizes",
]  # fmt: skip


# ---------------------------------------------------------------------------------------
# Units and activations (the arithmetic is in labkit.memory.shapes)
# ---------------------------------------------------------------------------------------


def unit_sizes(model: Any, wrap: str | Sequence[int] = "block") -> list[int]:
    """Parameters per FSDP unit, the root first: ``"block"`` (per TransformerBlock + root), ``"none"`` (one unit)."""
    if not isinstance(wrap, str):
        return [int(u) for u in wrap]
    units = [sum(math.prod(s) for s in shapes) for _, shapes in transformer_units(model)]
    how = choose("wrap", wrap, {"block": "block", "none": "none"})
    return units if how == "block" else [sum(units)]


def activation_memory(
    model: Any,
    micro_batch: int = 1,
    seq_len: int | None = None,
    checkpointing: bool = False,
    precision: str = "bf16",
    formula: str = "labkit",
) -> Activations:
    """Activation bytes per rank for a transformer config.

    ``formula="korthikanti"``: the paper's GPT layer (see :func:`korthikanti_per_layer`),
    16-bit by definition. ``formula="labkit"`` (default): the same method applied to the
    lessons' own block (:func:`labkit_per_layer`), in the compute precision, checked by
    the tests against activations measured on CPU and in fake-tensor runs.

    With activation checkpointing each layer keeps only its input (s·b·d elements),
    and during backward one layer's activations are rebuilt at a time, so the peak is
    the stored inputs plus one layer.
    """
    cfg = config(model)
    s = seq_len or cfg.seq_len
    elem = PRECISIONS[resolve_precision(precision)]
    how = choose("formula", formula, {"labkit": "labkit", "korthikanti": "korthikanti"})
    if how == "korthikanti":
        layer, kept, outside = (
            korthikanti_per_layer(s, micro_batch, cfg.dim, cfg.n_heads),
            2 * s * micro_batch * cfg.dim,
            0.0,
        )
    else:
        layer = labkit_per_layer(cfg, micro_batch, s, elem)
        kept, outside = s * micro_batch * cfg.dim * elem, labkit_outside_layers(cfg, micro_batch, s, elem)
    if checkpointing:
        stored = cfg.n_layers * kept + outside
        return Activations(layer, stored, stored + layer, how)
    stored = cfg.n_layers * layer + outside
    return Activations(layer, stored, stored, how)


# ---------------------------------------------------------------------------------------
# Peak memory: the largest of the step's moments (labkit.memory.peak)
# ---------------------------------------------------------------------------------------

FLAVORS = (Flavor.FSDP1, Flavor.FSDP2)
# Temporaries as large as the tensor being updated that a single-tensor (foreach=False) step
# keeps at once: Adam(W) makes sqrt(v) and the denominator from it, then updates the parameter
# in place (addcdiv_; measured with torch's MemTracker, torch 2.13); SGD updates in place.
OPTIMIZER_TEMPS = {"adam": 2, "adamw": 2, "sgd": 0, "sgd_momentum": 0}
PREFETCH = {Prefetch.BACKWARD_PRE: "pre", Prefetch.BACKWARD_POST: "post", Prefetch.NONE: None}


def _mode(strategy: str, strat: Strategy, flavor: str, shard: int, per: PerParam, torch_layout: bool) -> str:
    """How the parameters are held while computing: see ``memory_peak.StepShape``."""
    if strat.gathers_units or (strat.shard_grads and torch_layout):  # FULL/HYBRID_SHARD, SHARD_GRAD_OP
        mode = "full" if strat.gathers_units else "grad_op"
        if flavor == Flavor.FSDP1 and shard == 1:
            mode = "whole"  # FSDP1 runs NO_SHARD on one rank
    elif flavor == Flavor.FSDP2 and name_key(strategy) == "NOSHARD":  # fully_shard on a replicate-only mesh
        mode = "full"
    else:
        mode = "whole"
    if mode == "whole" and torch_layout and per.compute != per.param:  # MixedPrecision / autocast copies
        return "grad_op"
    return mode


def peak_memory(
    model: Any,
    strategy: str = Sharding.DDP,
    world_size: int = 1,
    precision: str = "bf16",
    optimizer: str = "adamw",
    *,
    flavor: str = Flavor.FSDP2,
    micro_batch: int = 1,
    seq_len: int | None = None,
    checkpointing: bool = False,
    offload: str | None = None,
    shard_group_size: int | None = None,
    wrap: str | Sequence[int] = "block",
    prefetch: bool = True,
    backward_prefetch: str | None = Prefetch.BACKWARD_PRE,
    forward_prefetch: bool = False,
    limit_all_gathers: bool = True,
    convention: str = "zero",
    largest_unit: float | None = None,
) -> MemoryBreakdown:
    """Per-rank peak of one training step (step 1 or later, gradients set to None between steps).

    ``flavor``: ``"fsdp1"`` (``FullyShardedDataParallel``) or ``"fsdp2"`` (``fully_shard``);
    for ``"DDP"`` it does not matter. FSDP1 options: ``backward_prefetch`` ("BACKWARD_PRE",
    "BACKWARD_POST" or None; ``prefetch=False`` is None), ``forward_prefetch``;
    ``limit_all_gathers`` only bounds the all-gathers in flight on a GPU and changes no
    term here. ``model`` is a preset name, a ``ModelConfig``, or a parameter count (then
    there are no activations nor temporaries, and each unit is ``largest_unit``
    parameters, 0 if not given; ``wrap="none"`` makes the whole model one unit).
    The result's ``explain()`` lists every term alive at the peak and every phase's total.
    """
    how = choose("flavor", flavor, {f: f for f in FLAVORS})
    strat, per = resolve_strategy(strategy), bytes_per_param(precision, optimizer, convention)
    torch_layout = choose("convention", convention, {c: c for c in CONVENTIONS}) == "torch"
    is_count = isinstance(model, (int, float))
    num_params = float(model) if is_count else float(config(model).num_params())
    states = model_states(
        num_params,
        strategy,
        world_size,
        precision,
        optimizer,
        offload=offload,
        shard_group_size=shard_group_size,
        convention=convention,
    )
    shard = shard_group(strat, world_size, shard_group_size) if strat.shard_grads else 1
    mode = _mode(strategy, strat, how, shard, per, torch_layout)
    e = per.compute
    shape_flavor = Flavor.DDP if name_key(strategy) in (Sharding.DDP, "ZERO0") else how
    units = unit_sizes(model, wrap) if not is_count else [num_params] if wrap == "none" else [largest_unit or 0.0] * 3
    flat_grads = tuple(e * u for u in units) if how == Flavor.FSDP1 and shape_flavor != Flavor.DDP else ()
    if how == Flavor.FSDP1 and mode != "whole":  # a FlatParameter is padded to a multiple of the shard group
        units = [math.ceil(u / shard) * shard for u in units]
    elif how == Flavor.FSDP2 and mode != "whole" and not is_count and isinstance(wrap, str):
        units = _fsdp2_gathered(model, wrap, shard)
    one_unit = len(units) == 1
    fields: dict[str, Any] = dict(
        flavor=shape_flavor,
        mode=mode,
        shard=shard,
        params=states.params,
        grads=states.grads,
        optimizer=states.optimizer,
        root=e * units[0],
        root_grad=e * units[0],
        flat_grads=flat_grads,
        one_unit=one_unit,
        blocks=tuple(e * u for u in units[1:]),
        all_units=e * (num_params if is_count else sum(units)),
        # a finished block's gradient shard stays on the device, unless offloaded to the host
        block_grad=bool(states.grads) * per.grad * max(units[1:], default=0.0) / (shard if strat.shard_grads else 1),
        buckets=per.grad * num_params if name_key(strategy) in (Sharding.DDP, "ZERO0") else 0.0,
        prefetch=PREFETCH[name_key(backward_prefetch or Prefetch.NONE).replace("BACKWARD", "BACKWARD_")]
        if prefetch
        else None,
        forward_prefetch=forward_prefetch,
        elem=e,
        reduce_elem=per.grad,  # torch's accounting keeps gradients in fp32: FSDP reduces them in it
    )
    largest = _largest_tensor(
        model, units, how if shape_flavor != Flavor.DDP else Flavor.DDP, shard if mode != "whole" else 1
    )
    temps = OPTIMIZER_TEMPS[resolve_optimizer(optimizer)]
    # measured: FSDP1's step holds one more tensor as large as the FlatParameter (shard) it updates
    temps += bool(temps) and shape_flavor == Flavor.FSDP1
    fields["optimizer_temps"] = temps * 4 * largest
    if not is_count:
        fields |= _step_activations(model, micro_batch, seq_len, checkpointing, e, one_unit)
    shape = StepShape(**fields)
    candidates = memory_peak.phases(shape)
    peak = max(candidates, key=lambda p: p.total)
    notes = list(states.notes) + _notes(strat, mode, one_unit)
    if not is_count:
        s = seq_len or config(model).seq_len
        ac = t("memory.note.ac") if checkpointing else ""
        notes.append(t("memory.note.activations", formula="labkit", b=micro_batch, s=s, ac=ac))
    cats = peak.by_category(CATEGORIES)
    return MemoryBreakdown(
        **cats,
        host_params=states.host_params,
        host_grads=states.host_grads,
        host_optimizer=states.host_optimizer,
        num_params=num_params,
        strategy=states.strategy,
        flavor=how if shape.flavor != Flavor.DDP else Flavor.DDP,
        world_size=world_size,
        precision=states.precision,
        optimizer_kind=states.optimizer_kind,
        notes=tuple(notes),
        phases=tuple(candidates),
        peak=peak,
    )


def _fsdp2_gathered(model: Any, wrap: str, shard: int) -> list[int]:
    """Elements of each unit as FSDP2 gathers it: every parameter's all-gather output has
    ceil(rows/N)·N rows, and its unsharded parameter is a view of that padded buffer."""
    padded = [
        sum(math.ceil(shape[0] / shard) * shard * math.prod(shape[1:]) for shape in shapes)
        for _, shapes in transformer_units(model)
    ]
    return padded if choose("wrap", wrap, {"block": "block", "none": "none"}) == "block" else [sum(padded)]


def _largest_tensor(model: Any, units: list[float], flavor: str, shard: int) -> float:
    """Elements of the largest tensor the optimizer updates on one rank: FSDP1 steps one
    FlatParameter shard per unit, FSDP2 one dim-0 shard per parameter, DDP whole parameters."""
    if isinstance(model, (int, float)) or flavor == Flavor.FSDP1:
        return math.ceil(max(units) / shard)
    shapes = [shape for _, unit in transformer_units(model) for shape in unit]
    return max(math.ceil(shape[0] / shard) * math.prod(shape[1:]) for shape in shapes)


def _step_activations(
    model: Any, micro_batch: int, seq_len: int | None, checkpointing: bool, elem: int, one_unit: bool
) -> dict[str, Any]:
    """The activation and temporary terms of ``StepShape`` for a transformer config."""
    cfg = config(model)
    s = seq_len or cfg.seq_len
    prec = {4: "fp32", 2: "bf16"}[elem]
    acts = activation_memory(cfg, micro_batch, s, checkpointing, prec)
    kept = s * micro_batch * cfg.dim * elem if checkpointing else acts.per_layer
    out = {
        "activations": acts.stored,
        "outside": labkit_outside_layers(cfg, micro_batch, s, elem),
        "per_layer_kept": kept,
        "recomputed": acts.per_layer if checkpointing else 0.0,
        "logits": micro_batch * s * cfg.vocab_size * elem,
        "loss_grads": 2 * logits_bytes(cfg, micro_batch, s),
        "head_grads": head_grad_bytes(cfg, elem),
        "block_temps": sum(block_backward_bytes(cfg, micro_batch, s, elem).values()),
        "grad_in": block_backward_bytes(cfg, micro_batch, s, elem)["grad_in"],
    }
    if one_unit:  # no block units: each block's gradient stays unsharded in the one unit until the end
        block = sum(math.prod(x) for x in transformer_units(cfg)[1][1]) if cfg.n_layers else 0
        out["blocks"] = (0.0,) * cfg.n_layers
        out["block_grad"] = block * elem
    return out


def _notes(strat: Strategy, mode: str, one_unit: bool) -> list[str]:
    if one_unit and strat.gathers_units:
        return [t("memory.note.one_unit")]
    if mode == "grad_op" and strat.shard_grads:
        return [t("memory.note.grad_op")]
    if mode == "grad_op":
        return [t("memory.note.compute_copy")]
    return []


# ---------------------------------------------------------------------------------------
# Questions: does it fit, how large, how many GPUs
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """The answer to "does it fit": truthy when it does."""

    fits: bool
    needed: float
    capacity: float
    breakdown: MemoryBreakdown

    def __bool__(self) -> bool:
        return self.fits

    @property
    def headroom(self) -> float:
        return self.capacity - self.needed

    def __str__(self) -> str:
        need, have = fmt_bytes(self.needed, "GB"), fmt_bytes(self.capacity, "GB")
        if self.fits:
            return t("memory.fits.yes", need=need, have=have, free=fmt_bytes(self.headroom, "GB"))
        return t("memory.fits.no", need=need, have=have, over=fmt_bytes(-self.headroom, "GB"))

    __repr__ = __str__


def fits(
    model: Any, gpu: str | float = "H100-80GB", strategy: str = Sharding.DDP, world_size: int = 1, **kw: Any
) -> Fit:
    """Whether the per-rank peak (see :func:`peak_memory`) fits one GPU's memory.

    ``model`` may also be a :class:`MemoryBreakdown` already computed.
    """
    b = model if isinstance(model, MemoryBreakdown) else peak_memory(model, strategy, world_size, **kw)
    cap = gpu_bytes(gpu)
    return Fit(b.total <= cap, b.total, cap, b)


def max_params_that_fit(
    strategy: str, world_size: int, gpu: str | float = "H100-80GB", *, extra_bytes: float = 0.0, **kw: Any
) -> int:
    """The largest parameter count whose states (plus ``extra_bytes``, e.g. activations) fit.

    Model states grow linearly with Ψ, so this is capacity divided by bytes per
    parameter per rank; ``kw`` are :func:`model_states` options.
    """
    per_param = model_states(1.0, strategy, world_size, **kw).model_states
    free = gpu_bytes(gpu) - extra_bytes
    return max(0, int(free / per_param)) if per_param else 0


def min_world_size(
    model: Any,
    strategy: str = Sharding.FULL_SHARD,
    gpu: str | float = "H100-80GB",
    *,
    max_world_size: int = 65536,
    **kw: Any,
) -> int | None:
    """The fewest ranks on which the per-rank peak fits, or None if none up to ``max_world_size``.

    Memory per rank only falls as ranks are added, so a doubling search followed by a
    bisection finds the smallest; HYBRID_SHARD is searched over multiples of its group.
    """
    step = 1
    if resolve_strategy(strategy).name == Sharding.HYBRID_SHARD:
        step = kw.setdefault("shard_group_size", 8)

    def ok(n: int) -> bool:
        return bool(fits(model, gpu, strategy, n * step, **kw))

    if not ok(max_world_size // step):
        return None
    lo, hi = 0, 1  # ok(hi) is the invariant once found; lo fails (0 ranks never fit)
    while not ok(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi * step


def strategy_table(
    model: Any,
    world_size: int,
    strategies: Sequence[str] = ("DDP", "ZERO1", "ZERO2", "ZERO3"),
    units: str = "GB",
    **kw: Any,
) -> str:
    """One row per strategy: params, grads, optimizer state and total per rank (markdown)."""
    div = GB if units == "GB" else GiB
    num = float(model) if isinstance(model, (int, float)) else float(config(model).num_params())
    head = (
        [t("memory.what.strategy")]
        + [t(f"memory.cat.{c}") for c in ("params", "grads", "optimizer")]
        + [t("memory.total")]
    )
    rows = [head]
    for s in strategies:
        b = model_states(num, s, world_size, **kw)
        rows.append([b.strategy] + [fmt_number(v / div, 2) for v in (b.params, b.grads, b.optimizer, b.model_states)])
    return render_table(
        rows, "markdown", title=t("memory.strategy_table", n=fmt_count(num), world=world_size, unit=units)
    )
