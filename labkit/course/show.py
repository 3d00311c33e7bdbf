"""Small text tables for the lessons, with column names in the edition's language.

Text, not HTML, so the same table reads well in JupyterLab, in papermill's executed
notebook and in nbval's comparison, and a deterministic one can be checked by nbval.

    from labkit.course import show
    show.table([{"rank": 0, "params": 1024}], units={"params": "MiB"})
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from labkit.fmt import fmt_number
from labkit.i18n import catalog, t

catalog(
    {
        "course.col.rank": {"en": "rank", "ro": "rang"},
        "course.col.ranks": {"en": "ranks", "ro": "ranguri"},
        "course.col.world_size": {"en": "world size", "ro": "ranguri"},
        "course.col.backend": {"en": "backend", "ro": "backend"},
        "course.col.device": {"en": "device", "ro": "dispozitiv"},
        "course.col.pid": {"en": "process id", "ro": "id proces"},
        "course.col.total": {"en": "all-reduce result", "ro": "rezultat all-reduce"},
        "course.col.loss": {"en": "loss", "ro": "pierdere"},
        "course.col.peak": {"en": "peak", "ro": "vârf"},
        "course.col.strategy": {"en": "strategy", "ro": "strategie"},
        "course.col.policy": {"en": "wrap policy", "ro": "politică"},
        "course.col.units": {"en": "units", "ro": "unități"},
        "course.col.unit": {"en": "unit", "ro": "unitate"},
        "course.col.params": {"en": "parameters", "ro": "parametri"},
        "course.col.grads": {"en": "gradients", "ro": "gradienți"},
        "course.col.optim": {"en": "optimizer", "ro": "optimizator"},
        "course.col.state": {"en": "params+grads+optim", "ro": "param.+grad.+optim."},
        "course.col.formula": {"en": "formula", "ro": "formulă"},
        "course.col.measured": {"en": "measured", "ro": "măsurat"},
        "course.col.ratio": {"en": "measured / formula", "ro": "măsurat / formulă"},
        "course.col.model": {"en": "model", "ro": "model"},
        "course.col.n_params": {"en": "parameters", "ro": "parametri"},
        "course.col.per_gpu": {"en": "per GPU", "ro": "pe GPU"},
        "course.col.fits": {"en": "fits in {gpu}", "ro": "încape în {gpu}"},
        "course.col.bytes_per_param": {"en": "bytes/param", "ro": "octeți/param."},
        "course.col.what": {"en": "what", "ro": "ce"},
        "course.col.dtype": {"en": "dtype", "ro": "tip"},
        "course.col.stage": {"en": "ZeRO stage", "ro": "etapa ZeRO"},
        "course.col.fsdp": {"en": "FSDP", "ro": "FSDP"},
        "course.col.collective": {"en": "collective", "ro": "colectivă"},
        "course.col.calls": {"en": "calls", "ro": "apeluri"},
        "course.col.sent": {"en": "sent per rank", "ro": "trimis per rang"},
        "course.col.theory": {"en": "theory", "ro": "teorie"},
        "course.col.before": {"en": "before", "ro": "înainte"},
        "course.col.after": {"en": "after", "ro": "după"},
        "course.col.peak_unsharded": {"en": "peak gathered", "ro": "vârf colectat"},
        "course.col.largest_unit": {"en": "largest unit", "ro": "cea mai mare unitate"},
        "course.col.min_num_params": {"en": "min_num_params", "ro": "min_num_params"},
        "course.col.weights": {"en": "weights", "ro": "ponderi"},
        "course.col.gradients": {"en": "gradients", "ro": "gradienți"},
        "course.col.master": {"en": "fp32 master weights", "ro": "copia master fp32"},
        "course.col.adam_m": {"en": "Adam m", "ro": "Adam m"},
        "course.col.adam_v": {"en": "Adam v", "ro": "Adam v"},
        "course.col.fp32_bytes": {"en": "fp32 (bytes)", "ro": "fp32 (octeți)"},
        "course.col.mixed_bytes": {"en": "mixed precision (bytes)", "ro": "precizie mixtă (octeți)"},
        "course.col.shard": {"en": "shard", "ro": "fragment"},
        "course.col.gathered": {"en": "after all_gather", "ro": "după all_gather"},
        "course.col.full": {"en": "full-size tensor", "ro": "tensor complet"},
        "course.col.mine": {"en": "after reduce_scatter", "ro": "după reduce_scatter"},
        "course.col.mm_params": {"en": "shards", "ro": "fragmente"},
        "course.col.mm_params_unsharded": {"en": "whole params", "ro": "parametri întregi"},
        "course.col.mm_grads": {"en": "gradients", "ro": "gradienți"},
        "course.col.mm_optimizer": {"en": "optimizer", "ro": "optimizator"},
        "course.col.mm_activations": {"en": "activations", "ro": "activări"},
        "course.col.mm_other": {"en": "other", "ro": "altele"},
        "course.col.formula_unsharded": {"en": "formula (whole params)", "ro": "formulă (parametri întregi)"},
        "course.yes": {"en": "yes", "ro": "da"},
        "course.no": {"en": "no", "ro": "nu"},
        "course.machine.torch": {"en": "torch", "ro": "torch"},
        "course.machine.cores": {"en": "CPU cores", "ro": "nuclee CPU"},
        "course.machine.gpus": {"en": "GPUs visible to this kernel", "ro": "GPU-uri vizibile acestui kernel"},
        "course.machine.gloo": {"en": "gloo available", "ro": "gloo disponibil"},
        "course.machine.nccl": {"en": "NCCL available", "ro": "NCCL disponibil"},
        "course.machine.backend": {"en": "backend for these lessons", "ro": "backend pentru aceste lecții"},
        "course.machine.ranks": {"en": "most ranks this machine allows", "ro": "cele mai multe ranguri permise aici"},
    }
)

catalog(
    {
        "course.say.ddp_head": {
            "en": "model {model}: {n} parameters, {nproc} DDP ranks",
            "ro": "modelul {model}: {n} parametri, {nproc} ranguri DDP",
        },
        "course.say.ran": {"en": "{nproc} rank(s): {seconds} s", "ro": "{nproc} rang(uri): {seconds} s"},
        "course.say.n_params": {"en": "model {model}: {n} parameters", "ro": "modelul {model}: {n} parametri"},
        "course.say.convention": {
            "en": "convention {name}: {b} bytes per parameter, at most {n} parameters on one GPU under DDP",
            "ro": "convenția {name}: {b} octeți pe parametru, cel mult {n} parametri pe un GPU sub DDP",
        },
        "course.say.weights_wall": {
            "en": "bf16 weights and gradients only: {b} bytes per parameter, at most {n} parameters on one GPU",
            "ro": "doar ponderi și gradienți bf16: {b} octeți pe parametru, cel mult {n} parametri pe un GPU",
        },
        "course.say.checksums": {"en": "weight checksums: {values}", "ro": "sume de control ale ponderilor: {values}"},
        "course.fig.unit_bytes": {
            "en": "each FSDP unit, gathered (fp32)",
            "ro": "fiecare unitate FSDP, colectată (fp32)",
        },
        "course.fig.peak_by_category": {
            "en": "peak of rank {rank}, by category",
            "ro": "vârful rangului {rank}, pe categorii",
        },
        "course.fig.params_b": {"en": "parameters (billions)", "ro": "parametri (miliarde)"},
        "course.fig.gb_per_gpu": {"en": "GB per GPU", "ro": "GB pe GPU"},
        "course.fig.ddp_full": {
            "en": "DDP, mixed-precision AdamW ({b} B/param)",
            "ro": "DDP, AdamW în precizie mixtă ({b} B/param.)",
        },
        "course.fig.weights_grads": {
            "en": "bf16 weights and gradients only ({b} B/param)",
            "ro": "doar ponderi și gradienți bf16 ({b} B/param.)",
        },
    }
)

catalog(  # lessons 4 to 6
    {
        "course.col.setting": {"en": "setting", "ro": "setare"},
        "course.col.step_ms": {"en": "step (ms)", "ro": "pas (ms)"},
        "course.col.units_held": {"en": "peak units held", "ro": "maxim unități ținute"},
        "course.col.order": {"en": "collectives, in the order issued", "ro": "operații colective, în ordinea lansării"},
        "course.col.forward_order": {
            "en": "forward: gathers (AG) and compute (F), in order",
            "ro": "trecerea directă: colectări (AG) și calcul (F), în ordine",
        },
        "course.col.block_params": {"en": "parameters per block", "ro": "parametri pe bloc"},
        "course.col.prefetch_extra": {"en": "one block in bf16", "ro": "un bloc în bf16"},
        "course.col.params_unsharded": {"en": "gathered", "ro": "colectați"},
        "course.col.optimizer": {"en": "optimizer", "ro": "optimizator"},
        "course.col.activations": {"en": "activations", "ro": "activări"},
        "course.col.other": {"en": "other", "ro": "altele"},
        "course.col.all_gather": {"en": "all-gather", "ro": "all-gather"},
        "course.col.reduce_scatter": {"en": "reduce-scatter", "ro": "reduce-scatter"},
        "course.col.device_mem": {"en": "GPU memory per GPU", "ro": "memorie GPU pe GPU"},
        "course.col.host_mem": {"en": "host memory per rank", "ro": "memoria gazdei pe rang"},
        "course.col.host_per_node": {"en": "host memory per node", "ro": "memoria gazdei pe nod"},
        "course.col.on_meta": {"en": "on the meta device", "ro": "pe dispozitivul meta"},
        "course.col.allocated": {"en": "after to_empty()", "ro": "după to_empty()"},
        "course.col.file": {"en": "file", "ro": "fișier"},
        "course.col.seq_len": {"en": "sequence length", "ro": "lungimea secvenței"},
        "course.col.micro_batch": {"en": "micro-batch", "ro": "micro-lot"},
        "course.col.gap": {"en": "measured - formula (B)", "ro": "măsurat - formulă (B)"},
        "course.col.checkpointed": {"en": "recomputed", "ro": "recalculat"},
        "course.col.stored": {"en": "activations after forward", "ro": "activări după trecerea directă"},
        "course.col.peak_activations": {"en": "activations at the peak", "ro": "activări la vârf"},
        "course.col.grads_held": {"en": "gradients held", "ro": "gradienți ținuți"},
        "course.col.grad_diff": {"en": "max |grad difference|", "ro": "max |diferența gradienților|"},
        "course.col.bytes": {"en": "size", "ro": "dimensiune"},
        "course.col.fix": {"en": "setting", "ro": "setare"},
        "course.col.sim_step_ms": {"en": "step ms (sim.)", "ro": "pas ms (sim.)"},
        "course.col.sim_exposed_ms": {"en": "exposed comm ms (sim.)", "ro": "comunicare expusă ms (sim.)"},
        "course.col.sim_ms_per_batch": {"en": "ms per micro-batch (sim.)", "ro": "ms pe micro-lot (sim.)"},
        "course.col.slow_bytes": {"en": "over the network, per rank", "ro": "prin rețea, pe rang"},
        "course.col.gpus_gb": {"en": "GPUs of 80 GB", "ro": "GPU-uri de 80 GB"},
        "course.col.gpus_gib": {"en": "GPUs of 80 GiB", "ro": "GPU-uri de 80 GiB"},
        "course.col.nodes": {"en": "nodes of 8", "ro": "noduri de câte 8"},
        "course.col.deployable": {"en": "GPUs to deploy", "ro": "GPU-uri de alocat"},
    }
)

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "GB": 10**9, "TB": 10**12}


def label(key: str, **fields: Any) -> str:
    """The column name for ``key`` in the current language (the key itself if it has none)."""
    try:
        return t(f"course.col.{key}", **fields)
    except KeyError:
        return key


def text(key: str, **fields: Any) -> str:
    """A sentence or figure label of the lessons (``course.say.*``, ``course.fig.*``) in the current language."""
    return t(f"course.{key}", **fields)


def say(key: str, **fields: Any) -> None:
    """Print the sentence ``course.say.<key>``, its numbers in the edition's format (1.103,6 in Romanian)."""
    print(text(f"say.{key}", **{name: fmt(value) for name, value in fields.items()}))


def yes_no(value: bool) -> str:
    return t("course.yes") if value else t("course.no")


def fmt(value: Any, unit: str | None = None) -> str:
    """One table cell or sentence field: numbers in the edition's format (1,103.6 or 1.103,6)."""
    if isinstance(value, bool):
        return yes_no(value)
    if unit is not None and isinstance(value, (int, float)):
        scaled = value / UNITS[unit]
        return f"{fmt_number(scaled, 3 if abs(scaled) < 10 else 1)} {unit}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return fmt_number(value, 0)
        text = f"{value:.4g}"  # four significant digits; swap the decimal point for Romanian
        return text.replace(".", ",") if fmt_number(0.5, 1) == "0,5" else text
    if isinstance(value, int):
        return fmt_number(value, 0)
    return str(value)


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    units: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Print ``rows`` as an aligned table: numbers right-aligned, bytes in ``units``."""
    columns = list(columns or (rows[0].keys() if rows else []))
    units, headers = dict(units or {}), dict(headers or {})
    head = [headers.get(c, label(c)) for c in columns]
    body = [[fmt(row.get(c, ""), units.get(c)) for c in columns] for row in rows]
    numeric = [
        all(isinstance(row.get(c), (int, float)) and not isinstance(row.get(c), bool) for row in rows) for c in columns
    ]
    widths = [max([len(h)] + [len(line[i]) for line in body]) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    print("\n".join([line(head), "  ".join("-" * w for w in widths)] + [line(b) for b in body]))


def machine(backend: str = "auto") -> dict[str, Any]:
    """What this kernel's machine has for the lessons; printed, and returned as a dict."""
    import torch
    import torch.distributed as dist

    from labkit.launch.options import max_cpu_ranks
    from labkit.wire import devices as gpus

    visible = gpus.visible_gpus()
    chosen = backend if backend != "auto" else ("nccl" if visible else "gloo")
    facts = {
        "torch": torch.__version__,
        "cores": os.cpu_count(),
        "gpus": len(visible),
        "gloo": dist.is_gloo_available(),
        "nccl": dist.is_nccl_available(),
        "backend": chosen,
        "ranks": len(visible) if chosen == "nccl" else max_cpu_ranks(),
    }
    width = max(len(t(f"course.machine.{k}")) for k in facts)
    for key, value in facts.items():
        print(f"{t(f'course.machine.{key}').ljust(width)}  {fmt(value)}")
    return facts
