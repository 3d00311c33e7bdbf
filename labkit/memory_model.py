"""Memory per rank, from arithmetic: what sharding saves, and what it does not.

    from labkit import memory_model as mm
    mm.model_states(7.5e9, "DDP", 64)                  # 120 GB per GPU (ZeRO paper, Fig. 1)
    mm.model_states(7.5e9, "ZERO3", 64)                # 1.9 GB
    b = mm.peak_memory("llama-7b", "FULL_SHARD", 8, micro_batch=1, checkpointing=True)
    print(b.table())                                   # per category, device and host
    mm.fits("llama-70b", "H100-80GB", strategy="DDP")  # no: it needs 1120 GB
    mm.min_world_size("llama-70b", "FULL_SHARD", "H100-80GB", checkpointing=True)

Units. Everything is computed in bytes. Tables print GB = 10^9 bytes, the unit of the
ZeRO paper, and GPU presets are the number on the box read the same way ("80GB" = 80e9
bytes). The real card holds a little more (an "80 GB" A100 has 80 GiB = 85.9e9 bytes),
and some of that goes to the CUDA context and allocator fragmentation, so the presets
are slightly conservative on purpose.

Model states (ZeRO paper, Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models", Sec. 3.1): with Ψ parameters and mixed-precision
Adam, a rank holds 2Ψ bytes of bf16/fp16 weights, 2Ψ of gradients and KΨ = 12Ψ of
optimizer state (an fp32 master copy and two fp32 moments): 16Ψ, three quarters of it
optimizer state. Data parallelism replicates all of it; ZeRO stage 1 (P_os) shards the
optimizer state over N ranks, stage 2 (P_os+g) the gradients too, stage 3 (P_os+g+p,
FSDP's FULL_SHARD) the parameters too: 16Ψ/N.

Three bookkeeping conventions give the same or nearly the same total, but put the bytes in
different places, so measured categories are compared with the one that matches:

* ``"zero"``: the ZeRO paper's 2 + 2 + 12 = 16 bytes (DeepSpeed, Megatron).
* ``"deepspeed"``: 2 + 4 + 12 = 18 bytes: DeepSpeed's memory estimators keep gradients
  in fp32 (``estimate_zero3_model_states_mem_needs``).
* ``"torch"``: 4 + 4 + 8 = 16 bytes: FSDP's ``MixedPrecision`` / FSDP2's
  ``MixedPrecisionPolicy`` and ``torch.autocast`` keep the fp32 parameter itself as the
  master copy and its gradient in fp32; the bf16 copies exist only while a unit computes
  (they are counted in ``params_unsharded``).

With fp32 training the three agree: 4 + 4 + 8.

What sharding does not remove (the transient term): to compute, a FULL_SHARD unit is
all-gathered, so its full parameters exist on every rank for a while, and in backward
its full gradients too, until the reduce-scatter. With prefetching (FSDP's default
``BackwardPrefetch.BACKWARD_PRE``, FSDP2's default) the next unit is gathered while the
current one computes, so two units are live. If there is no ``auto_wrap_policy``, the
whole model is one unit: the full parameters are gathered for the whole forward and
backward and the full gradients exist before the one reduce-scatter, so at the peak a
rank holds as many parameter and gradient bytes as under DDP; sharding then saves only
the optimizer state (and, in the "zero" convention, the master copy). ``peak_memory``
shows it with ``wrap="none"``. SHARD_GRAD_OP keeps every unit gathered from its forward
to its backward, so its peak holds all parameters in compute precision.

Activations: see ``activation_memory``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from labkit.errors import OptionError
from labkit.i18n import catalog, t
from labkit.units import markdown_to_html

catalog(
    {
        "mm.unknown": {
            "en": "unknown {what} {name!r}; choose one of {choices}{hint}",
            "ro": "{what} necunoscut(ă) {name!r}; alegeți una dintre {choices}{hint}",
        },
        "mm.did_you_mean": {"en": " (did you mean {guess!r}?)", "ro": " (ați vrut să scrieți {guess!r}?)"},
        "mm.what.strategy": {"en": "strategy", "ro": "strategie"},
        "mm.what.precision": {"en": "precision", "ro": "precizie"},
        "mm.what.optimizer": {"en": "optimizer", "ro": "optimizator"},
        "mm.what.convention": {"en": "convention", "ro": "convenție"},
        "mm.what.offload": {"en": "offload", "ro": "descărcare"},
        "mm.what.gpu": {"en": "GPU", "ro": "GPU"},
        "mm.what.wrap": {"en": "wrap", "ro": "împachetare"},
        "mm.what.formula": {"en": "formula", "ro": "formulă"},
        "mm.bad_world": {
            "en": "world_size must be a positive integer, got {n!r}",
            "ro": "world_size trebuie să fie un întreg pozitiv, primit {n!r}",
        },
        "mm.bad_group": {
            "en": "HYBRID_SHARD needs shard_group_size dividing world_size ({world}); got {group}",
            "ro": "HYBRID_SHARD are nevoie de un shard_group_size care să dividă world_size ({world}); primit {group}",
        },
        "mm.need_cfg": {
            "en": "activations need a transformer config (a preset name or ModelConfig), not a parameter count",
            "ro": "activările au nevoie de o configurație de transformer (nume de preset sau ModelConfig), nu de un număr de parametri",
        },
        "mm.col.category": {"en": "category", "ro": "categorie"},
        "mm.col.device": {"en": "device ({unit})", "ro": "dispozitiv ({unit})"},
        "mm.col.host": {"en": "host ({unit})", "ro": "gazdă ({unit})"},
        "mm.col.share": {"en": "share", "ro": "pondere"},
        "mm.cat.params": {"en": "parameters", "ro": "parametri"},
        "mm.cat.params_unsharded": {"en": "unsharded parameters", "ro": "parametri nefragmentați"},
        "mm.cat.grads": {"en": "gradients", "ro": "gradienți"},
        "mm.cat.optimizer": {"en": "optimizer state", "ro": "starea optimizatorului"},
        "mm.cat.activations": {"en": "activations", "ro": "activări"},
        "mm.cat.other": {"en": "other / temporary", "ro": "altele / temporare"},
        "mm.total": {"en": "total", "ro": "total"},
        "mm.title": {
            "en": "{strategy}, {world} rank(s), {precision}, {optimizer}: per rank",
            "ro": "{strategy}, {world} rang(uri), {precision}, {optimizer}: per rang",
        },
        "mm.fits.yes": {
            "en": "fits: {need} of {have} per GPU ({free} free)",
            "ro": "încape: {need} din {have} per GPU ({free} liberi)",
        },
        "mm.fits.no": {
            "en": "does not fit: {need} needed, {have} per GPU ({over} too much)",
            "ro": "nu încape: necesari {need}, {have} per GPU ({over} în plus)",
        },
        "mm.note.units": {
            "en": "transient: largest {n} unit(s) of {unit_params} parameters gathered ({why})",
            "ro": "tranzitoriu: cele mai mari {n} unități de {unit_params} parametri adunate ({why})",
        },
        "mm.note.prefetch": {"en": "the next unit is prefetched", "ro": "unitatea următoare e preîncărcată"},
        "mm.note.noprefetch": {"en": "no prefetch", "ro": "fără preîncărcare"},
        "mm.note.one_unit": {
            "en": "one FSDP unit (no auto_wrap_policy): the whole model is gathered, so the peak holds DDP's "
            "parameter and gradient bytes; only the optimizer state is sharded",
            "ro": "o singură unitate FSDP (fără auto_wrap_policy): tot modelul e adunat, deci vârful conține "
            "octeții de parametri și gradienți ai DDP; doar starea optimizatorului e fragmentată",
        },
        "mm.note.grad_op": {
            "en": "SHARD_GRAD_OP keeps every unit gathered from its forward to its backward",
            "ro": "SHARD_GRAD_OP păstrează fiecare unitate adunată de la forward până la backward",
        },
        "mm.note.ddp_buckets": {
            "en": "DDP also keeps gradient buckets (another {size}) unless gradient_as_bucket_view=True; not counted",
            "ro": "DDP mai păstrează bucket-uri de gradienți (încă {size}) dacă gradient_as_bucket_view=False; necontorizate",
        },
        "mm.note.compute_copy": {
            "en": "compute-precision copies of the parameters exist while they are used",
            "ro": "copiile în precizia de calcul ale parametrilor există cât timp sunt folosite",
        },
        "mm.note.offload": {
            "en": "offloaded to host memory: {what}",
            "ro": "mutate în memoria gazdei: {what}",
        },
        "mm.note.activations": {
            "en": "activations: {formula}, micro-batch {b}, sequence {s}{ac}",
            "ro": "activări: {formula}, micro-lot {b}, secvență {s}{ac}",
        },
        "mm.note.ac": {"en": ", activation checkpointing", "ro": ", cu recalcularea activărilor"},
        "mm.strategy_table": {
            "en": "{n} parameters on {world} rank(s), per rank ({unit})",
            "ro": "{n} parametri pe {world} rang(uri), per rang ({unit})",
        },
        "mm.plot.ylabel": {"en": "memory per GPU ({unit})", "ro": "memorie per GPU ({unit})"},
        "mm.plot.xlabel": {"en": "number of GPUs", "ro": "număr de GPU-uri"},
        "mm.plot.capacity": {"en": "{gpu} capacity", "ro": "capacitatea {gpu}"},
        "mm.plot.title": {
            "en": "{model}: model states per GPU, {precision} {optimizer}",
            "ro": "{model}: stările modelului per GPU, {precision} {optimizer}",
        },
        "mm.plot.title_peak": {
            "en": "{model}: peak memory per GPU, {precision} {optimizer}",
            "ro": "{model}: memoria de vârf per GPU, {precision} {optimizer}",
        },
        "mm.plot.max_title": {
            "en": "largest model whose states fit one {gpu}, {precision} {optimizer}",
            "ro": "cel mai mare model ale cărui stări încap pe un {gpu}, {precision} {optimizer}",
        },
        "mm.plot.max_ylabel": {"en": "parameters (billions)", "ro": "parametri (miliarde)"},
    }
)

GB = 10**9
GiB = 2**30
CATEGORIES = ("params", "params_unsharded", "grads", "optimizer", "activations", "other")

# Number on the box, in GB = 1e9 bytes (see the module docstring).
GPUS: dict[str, int] = {
    "A100-40GB": 40 * GB,
    "A100-80GB": 80 * GB,
    "H100-80GB": 80 * GB,
    "H200-141GB": 141 * GB,
    "40GB": 40 * GB,
    "80GB": 80 * GB,
    "141GB": 141 * GB,
}


# ---------------------------------------------------------------------------------------
# Names: strategies, precisions, optimizers
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Strategy:
    name: str  # canonical: DDP, ZERO1, ZERO2, ZERO3, HYBRID_SHARD
    shard_optimizer: bool
    shard_grads: bool
    shard_params: bool  # ZeRO-3: the persistent parameters are sharded
    gathers_units: bool  # parameters are all-gathered unit by unit to compute (ZeRO-3, FULL/HYBRID_SHARD)


STRATEGIES = {
    "DDP": Strategy("DDP", False, False, False, False),
    "ZERO1": Strategy("ZERO1", True, False, False, False),
    "ZERO2": Strategy("ZERO2", True, True, False, False),
    "ZERO3": Strategy("ZERO3", True, True, True, True),
    "HYBRID_SHARD": Strategy("HYBRID_SHARD", True, True, True, True),
}
STRATEGY_ALIASES = {
    "DDP": "DDP",
    "NO_SHARD": "DDP",
    "ZERO0": "DDP",
    "ZERO1": "ZERO1",
    "ZERO2": "ZERO2",
    "SHARD_GRAD_OP": "ZERO2",
    "ZERO3": "ZERO3",
    "FULL_SHARD": "ZERO3",
    "FSDP": "ZERO3",
    "HYBRID_SHARD": "HYBRID_SHARD",
    "HSDP": "HYBRID_SHARD",
}
PRECISIONS = {"fp32": 4, "bf16": 2, "fp16": 2}  # bytes of the compute dtype
PRECISION_ALIASES = {"fp32": "fp32", "float32": "fp32", "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16"}
PRECISION_ALIASES |= {"float16": "fp16", "half": "fp16"}
# bytes of optimizer state per parameter kept in fp32, not counting a master copy
OPTIMIZERS = {"sgd": 0, "sgd_momentum": 4, "adam": 8, "adamw": 8}
CONVENTIONS = ("zero", "deepspeed", "torch")


def _key(name: str) -> str:
    return str(name).strip().upper().replace("-", "").replace(" ", "").replace("_", "")


def _choose(what: str, name: Any, options: dict[str, str]) -> str:
    """Resolve ``name`` among ``options`` (alias -> canonical), loosely; else a helpful error."""
    loose = {_key(k): v for k, v in options.items()}
    if _key(name) in loose:
        return loose[_key(name)]
    guess = difflib.get_close_matches(_key(name), list(loose), n=1, cutoff=0.5)
    spelled = {_key(k): k for k in options}
    hint = t("mm.did_you_mean", guess=spelled[guess[0]]) if guess else ""
    choices = ", ".join(dict.fromkeys(options))
    raise OptionError(t("mm.unknown", what=t(f"mm.what.{what}"), name=name, choices=choices, hint=hint))


def resolve_strategy(name: str) -> Strategy:
    """``"FULL_SHARD"``, ``"zero-3"``, ``"NO_SHARD"``... as a :class:`Strategy`."""
    return STRATEGIES[_choose("strategy", name, STRATEGY_ALIASES)]


def resolve_precision(name: str) -> str:
    return _choose("precision", name, PRECISION_ALIASES)


def resolve_optimizer(name: str) -> str:
    return _choose("optimizer", name, {k: k for k in OPTIMIZERS} | {"momentum": "sgd_momentum"})


def gpu_bytes(gpu: str | float) -> int:
    """A preset name (``"H100-80GB"``), a size string (``"24GB"``, ``"24GiB"``) or bytes."""
    if isinstance(gpu, (int, float)):
        return int(gpu)
    text = str(gpu).strip()
    for suffix, unit in (("GIB", GiB), ("GB", GB)):
        number = text.upper().removesuffix(suffix)
        if text.upper().endswith(suffix):
            try:
                return int(float(number) * unit)
            except ValueError:
                break
    return GPUS[_choose("gpu", text, {k: k for k in GPUS})]


# ---------------------------------------------------------------------------------------
# Bytes per parameter
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PerParam:
    """Bytes per parameter of each kind of state, before any sharding."""

    param: int  # the persistent parameter (compute dtype in "zero"/"deepspeed", fp32 in "torch")
    grad: int
    optimizer: int  # moments, plus the fp32 master copy where the convention keeps one there
    compute: int  # bytes of the dtype forward and backward run in

    @property
    def total(self) -> int:
        return self.param + self.grad + self.optimizer


def bytes_per_param(precision: str = "bf16", optimizer: str = "adamw", convention: str = "zero") -> PerParam:
    """16 for mixed-precision Adam in the ZeRO paper's convention, 18 in DeepSpeed's (see module docstring)."""
    prec, opt = resolve_precision(precision), resolve_optimizer(optimizer)
    conv = _choose("convention", convention, {c: c for c in CONVENTIONS})
    moments, compute = OPTIMIZERS[opt], PRECISIONS[prec]
    if prec == "fp32":
        return PerParam(4, 4, moments, 4)
    if conv == "torch":
        return PerParam(4, 4, moments, compute)
    return PerParam(compute, 4 if conv == "deepspeed" else compute, 4 + moments, compute)


# ---------------------------------------------------------------------------------------
# The result: a breakdown per rank
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per rank, by category, on the device and on the host (CPU offload)."""

    params: float = 0.0
    params_unsharded: float = 0.0  # transient: gathered units, compute-precision copies
    grads: float = 0.0  # at the peak: sharded gradients plus the unit being reduced
    optimizer: float = 0.0
    activations: float = 0.0
    other: float = 0.0
    host_params: float = 0.0
    host_grads: float = 0.0
    host_optimizer: float = 0.0
    num_params: float = 0.0
    strategy: str = "DDP"
    world_size: int = 1
    precision: str = "bf16"
    optimizer_kind: str = "adamw"
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def model_states(self) -> float:
        """Parameters, gradients and optimizer state on the device (the ZeRO paper's figure)."""
        return self.params + self.grads + self.optimizer

    @property
    def total(self) -> float:
        """Everything on the device: the peak when the transient terms are included."""
        return sum(self.device.values())

    @property
    def host_total(self) -> float:
        return self.host_params + self.host_grads + self.host_optimizer

    @property
    def device(self) -> dict[str, float]:
        return {c: getattr(self, c) for c in CATEGORIES}

    @property
    def host(self) -> dict[str, float]:
        return {"params": self.host_params, "grads": self.host_grads, "optimizer": self.host_optimizer}

    def as_dict(self) -> dict[str, Any]:
        return {**self.device, "total": self.total, "host": self.host, "host_total": self.host_total}

    def table(self, units: str = "GB", fmt: str = "markdown") -> str:
        """The breakdown as a markdown table (``fmt="text"`` for aligned plain text)."""
        div = GB if units == "GB" else GiB
        rows = []
        for c in CATEGORIES:
            dev, host = getattr(self, c), self.host.get(c, 0.0)
            if dev or host:
                share = f"{dev / self.total:.0%}" if self.total else ""
                rows.append([t(f"mm.cat.{c}"), f"{dev / div:,.2f}", f"{host / div:,.2f}" if host else "", share])
        rows.append([t("mm.total"), f"{self.total / div:,.2f}", f"{self.host_total / div:,.2f}", ""])
        head = [t("mm.col.category"), t("mm.col.device", unit=units), t("mm.col.host", unit=units), t("mm.col.share")]
        title = t(
            "mm.title",
            strategy=self.strategy,
            world=self.world_size,
            precision=self.precision,
            optimizer=self.optimizer_kind,
        )
        return _render([head, *rows], fmt, title, self.notes)

    def _repr_html_(self) -> str:
        return _markdown_to_html(self.table())

    def __str__(self) -> str:
        return self.table(fmt="text")


def _render(rows: list[list[str]], fmt: str, title: str = "", notes: Sequence[str] = ()) -> str:
    if fmt == "text":
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
    else:
        lines = ["| " + " | ".join(r) + " |" for r in rows]
        lines.insert(1, "|" + "|".join("---" if i == 0 else "---:" for i in range(len(rows[0]))) + "|")
    out = ([title, ""] if title else []) + lines
    if notes:
        out += [""] + [f"- {n}" for n in notes]
    return "\n".join(out)


def _markdown_to_html(md: str) -> str:
    return markdown_to_html(md)


# ---------------------------------------------------------------------------------------
# Model states
# ---------------------------------------------------------------------------------------


def _group(strat: Strategy, world_size: int, shard_group_size: int | None) -> int:
    """How many ranks one copy of the states is sharded over."""
    if not isinstance(world_size, int) or world_size < 1:
        raise OptionError(t("mm.bad_world", n=world_size))
    if strat.name != "HYBRID_SHARD":
        return world_size
    group = shard_group_size or min(world_size, 8)  # one node of 8 GPUs, the usual choice
    if group < 1 or world_size % group:
        raise OptionError(t("mm.bad_group", world=world_size, group=group))
    return group


def model_states(
    num_params: float,
    strategy: str = "DDP",
    world_size: int = 1,
    precision: str = "bf16",
    optimizer: str = "adamw",
    *,
    offload: str | None = None,
    shard_group_size: int | None = None,
    convention: str = "zero",
) -> MemoryBreakdown:
    """Per-rank parameters, gradients and optimizer state: the ZeRO paper's "model states".

    ``offload="optimizer"`` (ZeRO-Offload) moves the optimizer state and the gradients it
    reads to host memory; ``offload="params"`` (FSDP ``CPUOffload(offload_params=True)``,
    ZeRO-Infinity) moves the sharded parameters, gradients and optimizer state there, the
    device keeping only what is gathered to compute. Host bytes are per rank: a node
    with 8 ranks needs 8 times as much.
    """
    strat = resolve_strategy(strategy)
    n = _group(strat, world_size, shard_group_size)
    per = bytes_per_param(precision, optimizer, convention)
    torch_layout = _choose("convention", convention, {c: c for c in CONVENTIONS}) == "torch"
    # FSDP's SHARD_GRAD_OP shards the persistent fp32 parameter too; ZeRO-2 keeps its fp16 copy whole.
    params_sharded = strat.shard_params or (torch_layout and strat.shard_grads)
    params = per.param * num_params / (n if params_sharded else 1)
    grads = per.grad * num_params / (n if strat.shard_grads else 1)
    opt = per.optimizer * num_params / (n if strat.shard_optimizer else 1)
    where = None if offload is None else _choose("offload", offload, {"optimizer": "optimizer", "params": "params"})
    host = {"params": 0.0, "grads": 0.0, "optimizer": 0.0}
    if where in ("optimizer", "params"):
        host["optimizer"], host["grads"], opt, grads = opt, grads, 0.0, 0.0
    if where == "params":
        host["params"], params = params, 0.0
    notes = (t("mm.note.offload", what=", ".join(k for k, v in host.items() if v)),) if where else ()
    return MemoryBreakdown(
        params=params,
        grads=grads,
        optimizer=opt,
        host_params=host["params"],
        host_grads=host["grads"],
        host_optimizer=host["optimizer"],
        num_params=num_params,
        strategy=str(strategy).upper(),  # as the student wrote it: FULL_SHARD stays FULL_SHARD
        world_size=world_size,
        precision=resolve_precision(precision),
        optimizer_kind=resolve_optimizer(optimizer),
        notes=notes,
    )


# ---------------------------------------------------------------------------------------
# Transformer shapes, FSDP units and padding
# ---------------------------------------------------------------------------------------


def _config(model: Any) -> Any:
    if isinstance(model, str):
        from labkit.models import get_config  # imports torch; only when a preset is named

        return get_config(model)
    return model


def transformer_units(cfg: Any) -> list[tuple[str, list[tuple[int, ...]]]]:
    """``labkit.models.TransformerLM``'s parameter shapes, grouped into FSDP units as the
    lessons wrap it (one unit per ``TransformerBlock``, the rest in the root unit).

    Pure arithmetic on the config; a test checks it against ``named_parameters()``.
    """
    cfg = _config(cfg)
    d, f, kv, v = cfg.dim, cfg.hidden_ffn, cfg.kv_dim, cfg.vocab_size
    block = [(d,), (d, d), (kv, d), (kv, d), (d, d), (d,), (f, d), (f, d), (d, f)]
    root = [(v, d), (d,)] + ([] if cfg.tied_embeddings else [(v, d)])
    return [("root", root)] + [(f"layers.{i}", list(block)) for i in range(cfg.n_layers)]


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def unit_sizes(model: Any, wrap: str | Sequence[int] = "block") -> list[int]:
    """Parameters per FSDP unit: ``"block"`` (per TransformerBlock + root), ``"none"`` (one unit)."""
    if not isinstance(wrap, str):
        return [int(u) for u in wrap]
    units = [sum(_numel(s) for s in shapes) for _, shapes in transformer_units(model)]
    how = _choose("wrap", wrap, {"block": "block", "none": "none"})
    return units if how == "block" else [sum(units)]


def local_numel(model: Any, world_size: int, flavor: str = "fsdp2", rank: int = 0) -> dict[str, int]:
    """Elements one rank holds under FULL_SHARD, padding included, per kind of tensor.

    FSDP1 flattens each unit into one FlatParameter and pads it to a multiple of N
    elements, so every rank holds ceil(numel/N) per unit, for parameters, gradients and
    optimizer state alike. FSDP2 shards each parameter on dim 0: every rank allocates
    ceil(rows/N) rows (the padded shard that parameters and gradients live in), but the
    tensor it exposes, and so the optimizer state made with ``zeros_like``, has only the
    rows that rank owns, fewer on the last ranks when rows do not divide evenly.
    """
    units = transformer_units(model)
    if flavor == "fsdp1":
        n = sum(math.ceil(sum(_numel(s) for s in shapes) / world_size) for _, shapes in units)
        return {"params": n, "grads": n, "optimizer": n}
    padded = owned = 0
    for _, shapes in units:
        for shape in shapes:
            rows, rest = shape[0], _numel(shape[1:])
            chunk = math.ceil(rows / world_size)
            padded += chunk * rest
            owned += max(0, min(chunk, rows - rank * chunk)) * rest
    return {"params": padded, "grads": padded, "optimizer": owned}


# ---------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Activations:
    """Bytes of activations per rank: stored for backward, and the peak while recomputing."""

    per_layer: float  # everything a layer saves for backward
    stored: float  # what lives at the end of the forward pass
    peak: float  # the most alive at once (with checkpointing: stored + one layer recomputed)
    formula: str


def korthikanti_per_layer(seq_len: int, micro_batch: int, hidden: int, heads: int) -> float:
    """Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models" (arXiv:2205.05198), Eq. 1: bytes one GPT layer stores for backward, with
    16-bit activations, dropout masks of one byte, no tensor or sequence parallelism:

        s·b·h·(34 + 5·a·s/h)

    34·s·b·h from the linear inputs, layer norms, GeLU and dropout masks; 5·a·s²·b from
    the attention scores, their softmax and its dropout mask (absent with a fused,
    flash-style attention kernel). With full activation recomputation a layer keeps only
    its 16-bit input: 2·s·b·h (Sec. 4.1)."""
    s, b, h, a = seq_len, micro_batch, hidden, heads
    return s * b * h * (34 + 5 * a * s / h)


def labkit_per_layer(cfg: Any, micro_batch: int, seq_len: int, elem: int) -> float:
    """The same count as Korthikanti et al. (every tensor autograd saves), done for
    ``labkit.models.TransformerBlock``: RMSNorm, grouped-query attention through
    ``scaled_dot_product_attention`` (fused: no s² term), SwiGLU, no dropout.

    Per layer, in elements of the compute dtype (``elem`` bytes):
      8·s·b·d: the block input and the attention residual (each read by an RMSNorm),
               each norm's x·rsqrt and output, q, and the attention output (the fused
               kernel returns it in (b, s, heads, d_head) layout, so the reshape that
               feeds wo is a view, not a copy);
      2·s·b·d_kv: k and v (repeated to d when the heads are grouped);
      4·s·b·f: the SwiGLU gate, its SiLU, the up projection and their product;
      2·s·b: the two norms' rsqrt;
    plus the attention's log-sum-exp, b·a·s in fp32.
    """
    cfg = _config(cfg)
    b, s, d, f, a = micro_batch, seq_len, cfg.dim, cfg.hidden_ffn, cfg.n_heads
    kv = cfg.kv_dim if (cfg.n_kv_heads or cfg.n_heads) == cfg.n_heads else d
    return (8 * s * b * d + 2 * s * b * kv + 4 * s * b * f + 2 * s * b) * elem + b * a * s * 4


def labkit_outside_layers(cfg: Any, micro_batch: int, seq_len: int, elem: int) -> float:
    """What the model stores outside its blocks: the final RMSNorm (input, x·rsqrt,
    output and rsqrt) and the fp32 log-softmax of the logits that cross-entropy keeps."""
    cfg = _config(cfg)
    b, s = micro_batch, seq_len
    return (3 * s * b * cfg.dim + s * b) * elem + b * s * cfg.vocab_size * 4


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
    cfg = _config(model)
    s = seq_len or cfg.seq_len
    elem = PRECISIONS[resolve_precision(precision)]
    how = _choose("formula", formula, {"labkit": "labkit", "korthikanti": "korthikanti"})
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
# Peak memory: states + what is gathered + activations
# ---------------------------------------------------------------------------------------


def peak_memory(
    model: Any,
    strategy: str = "DDP",
    world_size: int = 1,
    precision: str = "bf16",
    optimizer: str = "adamw",
    *,
    micro_batch: int = 1,
    seq_len: int | None = None,
    checkpointing: bool = False,
    offload: str | None = None,
    shard_group_size: int | None = None,
    wrap: str | Sequence[int] = "block",
    prefetch: bool = True,
    convention: str = "zero",
    largest_unit: float | None = None,
) -> MemoryBreakdown:
    """Per-rank peak: model states, the gathered units, and activations.

    ``model`` is a preset name, a ``ModelConfig``, or a parameter count (then there are
    no activations, and each gathered unit is ``largest_unit`` parameters, 0 if not given;
    ``wrap="none"`` makes the whole model one unit).
    """
    is_count = isinstance(model, (int, float))
    num_params = float(model) if is_count else float(_config(model).num_params())
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
    strat = resolve_strategy(strategy)
    per = bytes_per_param(precision, optimizer, convention)
    torch_layout = _choose("convention", convention, {c: c for c in CONVENTIONS}) == "torch"
    if not isinstance(wrap, str):
        units = [float(u) for u in wrap]
    elif is_count:  # the other units are taken to be as large as the largest
        units = [num_params] if wrap == "none" else [float(largest_unit or 0.0)] * 2
    else:
        units = unit_sizes(model, wrap)
    units = sorted(units, reverse=True)
    notes = list(states.notes)
    gathered = grads_extra = 0.0
    if strat.gathers_units:
        live = units[:2] if prefetch and len(units) > 1 else units[:1]
        gathered = per.compute * sum(live)
        grads_extra = per.compute * units[0]  # the unit whose gradients wait for the reduce-scatter
        why = t("mm.note.prefetch") if len(live) > 1 else t("mm.note.noprefetch")
        notes.append(t("mm.note.units", n=len(live), unit_params=_count(units[0]), why=why))
        if len(units) == 1:
            notes.append(t("mm.note.one_unit"))
    elif strat.shard_grads and torch_layout:  # FSDP SHARD_GRAD_OP: all units stay gathered
        gathered = per.compute * num_params
        grads_extra = per.compute * units[0]
        notes.append(t("mm.note.grad_op"))
    elif torch_layout and per.compute != per.param:  # autocast / NO_SHARD mixed precision
        gathered = per.compute * num_params
        notes.append(t("mm.note.compute_copy"))
    if strat.name == "DDP":
        notes.append(t("mm.note.ddp_buckets", size=_fmt(per.grad * num_params)))
    acts = 0.0
    if not is_count:
        a = activation_memory(model, micro_batch, seq_len, checkpointing, precision)
        acts = a.peak
        s = seq_len or _config(model).seq_len
        notes.append(
            t("mm.note.activations", formula=a.formula, b=micro_batch, s=s, ac=t("mm.note.ac") if checkpointing else "")
        )
    return replace(
        states,
        params_unsharded=gathered,
        grads=states.grads + grads_extra,
        activations=acts,
        notes=tuple(notes),
    )


def _count(n: float) -> str:
    for unit, div in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.0f}"


def _fmt(n: float, units: str = "GB") -> str:
    """Bytes in ``units`` (GB or GiB), or in MB / kB when that would print as 0.00."""
    big, mid, small = (GB, 10**6, 10**3) if units == "GB" else (GiB, 2**20, 2**10)
    names = ("MB", "kB") if units == "GB" else ("MiB", "KiB")
    if abs(n) >= big / 100 or n == 0:
        return f"{n / big:,.2f} {units}"
    return f"{n / mid:.1f} {names[0]}" if abs(n) >= mid / 10 else f"{n / small:.1f} {names[1]}"


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
        need, have = _fmt(self.needed), _fmt(self.capacity)
        if self.fits:
            return t("mm.fits.yes", need=need, have=have, free=_fmt(self.headroom))
        return t("mm.fits.no", need=need, have=have, over=_fmt(-self.headroom))

    __repr__ = __str__


def fits(model: Any, gpu: str | float = "H100-80GB", strategy: str = "DDP", world_size: int = 1, **kw: Any) -> Fit:
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
    strategy: str = "FULL_SHARD",
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
    if resolve_strategy(strategy).name == "HYBRID_SHARD":
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
    num = float(model) if isinstance(model, (int, float)) else float(_config(model).num_params())
    head = [t("mm.what.strategy")] + [t(f"mm.cat.{c}") for c in ("params", "grads", "optimizer")] + [t("mm.total")]
    rows = [head]
    for s in strategies:
        b = model_states(num, s, world_size, **kw)
        rows.append([b.strategy] + [f"{v / div:,.2f}" for v in (b.params, b.grads, b.optimizer, b.model_states)])
    return _render(rows, "markdown", t("mm.strategy_table", n=_count(num), world=world_size, unit=units))


# ---------------------------------------------------------------------------------------
# Plots (matplotlib, imported only here)
# ---------------------------------------------------------------------------------------

DEFAULT_WORLD_SIZES = tuple(2**i for i in range(11))  # 1 .. 1024


def plot_memory_vs_gpus(
    model: Any = "llama-13b",
    gpu: str | float = "H100-80GB",
    strategies: Sequence[str] = ("DDP", "ZERO1", "ZERO2", "ZERO3"),
    world_sizes: Sequence[int] = DEFAULT_WORLD_SIZES,
    *,
    peak: bool = False,
    ax: Any = None,
    **kw: Any,
) -> Any:
    """Per-GPU memory against the number of GPUs, one line per strategy, and the GPU's
    capacity as a horizontal line. ``peak=True`` plots :func:`peak_memory` (activations,
    gathered units) instead of the model states alone. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(7, 4.2))
    num = float(model) if isinstance(model, (int, float)) else float(_config(model).num_params())
    for s in strategies:
        if peak:
            ys = [peak_memory(model, s, n, **kw).total / GB for n in world_sizes]
        else:
            ys = [model_states(num, s, n, **kw).model_states / GB for n in world_sizes]
        ax.plot(world_sizes, ys, marker="o", ms=3, label=resolve_strategy(s).name)
    cap = gpu_bytes(gpu) / GB
    ax.axhline(cap, color="#d62728", ls="--", lw=1.2, label=t("mm.plot.capacity", gpu=gpu))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(t("mm.plot.xlabel"))
    ax.set_ylabel(t("mm.plot.ylabel", unit="GB"))
    name = model if isinstance(model, str) else _count(num)
    key = "mm.plot.title_peak" if peak else "mm.plot.title"
    prec, opt = resolve_precision(kw.get("precision", "bf16")), resolve_optimizer(kw.get("optimizer", "adamw"))
    ax.set_title(t(key, model=name, precision=prec, optimizer=opt))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


def plot_max_model_vs_gpus(
    gpu: str | float = "H100-80GB",
    strategies: Sequence[str] = ("DDP", "ZERO1", "ZERO2", "ZERO3"),
    world_sizes: Sequence[int] = DEFAULT_WORLD_SIZES,
    *,
    ax: Any = None,
    **kw: Any,
) -> Any:
    """The largest model whose states fit one GPU, against the number of GPUs: DDP is a
    flat line (capacity / 16 bytes: 5B parameters on 80 GB), ZeRO-1 and ZeRO-2 level off
    at capacity / 4 and / 2 bytes, ZeRO-3 grows with N. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(7, 4.2))
    for s in strategies:
        ax.plot(
            world_sizes, [max_params_that_fit(s, n, gpu, **kw) / 1e9 for n in world_sizes], marker="o", ms=3, label=s
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(t("mm.plot.xlabel"))
    ax.set_ylabel(t("mm.plot.max_ylabel"))
    prec, opt = resolve_precision(kw.get("precision", "bf16")), resolve_optimizer(kw.get("optimizer", "adamw"))
    ax.set_title(t("mm.plot.max_title", gpu=gpu, precision=prec, optimizer=opt))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig
