"""Model states per rank: parameters, gradients and optimizer state, and what sharding divides.

    from labkit import memory_model as mm
    mm.model_states(7.5e9, "DDP", 64)                  # 120 GB per GPU (ZeRO paper, Fig. 1)
    mm.model_states(7.5e9, "ZERO3", 64)                # 1.9 GB
    print(mm.model_states(7.5e9, "ZERO3", 64).table())  # per category, device and host

(``labkit.memory_model`` re-exports all of it; import that one.)

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
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from labkit.fmt import fmt_bytes, fmt_number, fmt_spec, markdown_to_html, render_table
from labkit.i18n import t
from labkit.memory.peak import Phase
from labkit.wire.errors import OptionError
from labkit.wire.records import CATEGORIES
from labkit.wire.setting import Strategy as Sharding  # torch's names (Strategy below: the model's)

GB = 10**9
GiB = 2**30
# CATEGORIES (labkit.wire.records): the same names as labkit.memtrack measures, so that the two compare

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


def name_key(name: str) -> str:
    return str(name).strip().upper().replace("-", "").replace(" ", "").replace("_", "")


def choose(what: str, name: Any, options: dict[str, str]) -> str:
    """Resolve ``name`` among ``options`` (alias -> canonical), loosely; else a helpful error."""
    loose = {name_key(k): v for k, v in options.items()}
    if name_key(name) in loose:
        return loose[name_key(name)]
    guess = difflib.get_close_matches(name_key(name), list(loose), n=1, cutoff=0.5)
    spelled = {name_key(k): k for k in options}
    hint = t("memory.did_you_mean", guess=spelled[guess[0]]) if guess else ""
    choices = ", ".join(dict.fromkeys(options))
    raise OptionError(t("memory.unknown", what=t(f"memory.what.{what}"), name=name, choices=choices, hint=hint))


def resolve_strategy(name: str) -> Strategy:
    """``"FULL_SHARD"``, ``"zero-3"``, ``"NO_SHARD"``... as a :class:`Strategy`."""
    return STRATEGIES[choose("strategy", name, STRATEGY_ALIASES)]


def resolve_precision(name: str) -> str:
    return choose("precision", name, PRECISION_ALIASES)


def resolve_optimizer(name: str) -> str:
    return choose("optimizer", name, {k: k for k in OPTIMIZERS} | {"momentum": "sgd_momentum"})


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
    return GPUS[choose("gpu", text, {k: k for k in GPUS})]


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
    conv = choose("convention", convention, {c: c for c in CONVENTIONS})
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
    strategy: str = Sharding.DDP
    flavor: str = ""
    world_size: int = 1
    precision: str = "bf16"
    optimizer_kind: str = "adamw"
    notes: tuple[str, ...] = field(default=(), compare=False)
    # from peak_memory: every candidate moment of the step, and the one that sets the peak
    phases: tuple[Phase, ...] = field(default=(), compare=False)
    peak: Phase | None = field(default=None, compare=False)

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
                share = fmt_spec(dev / self.total, ".0%") if self.total else ""
                rows.append(
                    [t(f"memory.cat.{c}"), fmt_number(dev / div, 2), fmt_number(host / div, 2) if host else "", share]
                )
        rows.append([t("memory.total"), fmt_number(self.total / div, 2), fmt_number(self.host_total / div, 2), ""])
        head = [
            t("memory.col.category"),
            t("memory.col.device", unit=units),
            t("memory.col.host", unit=units),
            t("memory.col.share"),
        ]
        title = t(
            "memory.title",
            strategy=self.strategy,
            world=self.world_size,
            precision=self.precision,
            optimizer=self.optimizer_kind,
        )
        return render_table([head, *rows], fmt, title=title, notes=self.notes)

    def phase(self, key: str, block: int = 0) -> Phase:
        """One of ``phases`` by its key ("forward", "loss", "block", "end", "optimizer")."""
        return next(p for p in self.phases if p.key == key and p.block == block)

    def explain(self, units: str = "MiB", fmt: str = "text") -> str:
        """Each term alive at the peak with its bytes, then every phase's total: which one
        (forward, the loss, a block's backward, the optimizer step) sets the peak."""
        if self.peak is None:
            return self.table(units, fmt)
        rows = [[t("memory.col.term"), t("memory.col.category"), t("memory.col.bytes")]]
        rows += [
            [x.label, t(f"memory.cat.{x.category}"), fmt_bytes(x.bytes, units)] for x in self.peak.terms if x.bytes
        ]
        rows.append([t("memory.total"), "", fmt_bytes(self.peak.total, units)])
        phases = [[t("memory.col.phase"), t("memory.col.bytes"), ""]]
        blocks = max((p.block for p in self.phases), default=0)
        for p in self.phases:  # of the blocks: the first, the one at the peak, the last
            if p.key != "block" or p.block in (1, self.peak.block, blocks):
                phases.append([p.label, fmt_bytes(p.total, units), "◀" if p is self.peak else ""])
        title = t("memory.explain", phase=self.peak.label, flavor=self.flavor or "-")
        return render_table(rows, fmt, "llr", title) + "\n\n" + render_table(phases, fmt, "lrl")

    def _repr_html_(self) -> str:
        return markdown_to_html(self.table())

    def __str__(self) -> str:
        return self.table(fmt="text")


# ---------------------------------------------------------------------------------------
# Model states
# ---------------------------------------------------------------------------------------


def shard_group(strat: Strategy, world_size: int, shard_group_size: int | None = None) -> int:
    """How many ranks one copy of the states is sharded over."""
    if not isinstance(world_size, int) or world_size < 1:
        raise OptionError(t("memory.bad_world", n=world_size))
    if strat.name != Sharding.HYBRID_SHARD:
        return world_size
    group = shard_group_size or min(world_size, 8)  # one node of 8 GPUs, the usual choice
    if group < 1 or world_size % group:
        raise OptionError(t("memory.bad_group", world=world_size, group=group))
    return group


def model_states(
    num_params: float,
    strategy: str = Sharding.DDP,
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
    n = shard_group(strat, world_size, shard_group_size)
    per = bytes_per_param(precision, optimizer, convention)
    torch_layout = choose("convention", convention, {c: c for c in CONVENTIONS}) == "torch"
    # FSDP's SHARD_GRAD_OP shards the persistent fp32 parameter too; ZeRO-2 keeps its fp16 copy whole.
    params_sharded = strat.shard_params or (torch_layout and strat.shard_grads)
    params = per.param * num_params / (n if params_sharded else 1)
    grads = per.grad * num_params / (n if strat.shard_grads else 1)
    opt = per.optimizer * num_params / (n if strat.shard_optimizer else 1)
    where = None if offload is None else choose("offload", offload, {"optimizer": "optimizer", "params": "params"})
    host = {"params": 0.0, "grads": 0.0, "optimizer": 0.0}
    if where in ("optimizer", "params"):
        host["optimizer"], host["grads"], opt, grads = opt, grads, 0.0, 0.0
    if where == "params":
        host["params"], params = params, 0.0
    notes = (
        (t("memory.note.offload", what=", ".join(t(f"memory.cat.{k}") for k, v in host.items() if v)),) if where else ()
    )
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
