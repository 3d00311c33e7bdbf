"""Memory per rank from arithmetic (model states, activations, the step's peak, whether it fits):
``labkit.memory.model``, which puts together ``labkit.memory.states``, ``labkit.memory.shapes`` and
``labkit.memory.peak``, under the name a notebook types. Formulas only: importing it imports no torch.

    from labkit import memory_model as mm
    mm.model_states(7.5e9, "ZERO3", 64)
    mm.peak_memory("llama-7b", "FULL_SHARD", 8, micro_batch=1, checkpointing=True)
"""

from __future__ import annotations

from labkit.memory.model import (
    CATEGORIES,
    CONVENTIONS,
    GB,
    GPUS,
    OPTIMIZERS,
    PRECISIONS,
    STRATEGIES,
    Activations,
    Fit,
    GiB,
    MemoryBreakdown,
    PerParam,
    Strategy,
    activation_memory,
    bytes_per_param,
    fits,
    gpu_bytes,
    korthikanti_per_layer,
    labkit_outside_layers,
    labkit_per_layer,
    local_numel,
    max_params_that_fit,
    min_world_size,
    model_states,
    peak_memory,
    resolve_optimizer,
    resolve_precision,
    resolve_strategy,
    shard_group,
    strategy_table,
    transformer_units,
    unit_sizes,
)
from labkit.memory.peak import Phase, StepShape, Term, peak_phase, phases

__all__ = [
    "CATEGORIES", "CONVENTIONS", "GB", "GPUS", "OPTIMIZERS", "PRECISIONS", "STRATEGIES", "Activations", "Fit",
    "GiB", "MemoryBreakdown", "PerParam", "Phase", "StepShape", "Strategy", "Term", "activation_memory",
    "bytes_per_param", "fits", "gpu_bytes", "korthikanti_per_layer", "labkit_outside_layers", "labkit_per_layer",
    "local_numel", "max_params_that_fit", "min_world_size", "model_states", "peak_memory", "peak_phase", "phases",
    "resolve_optimizer", "resolve_precision", "resolve_strategy", "shard_group", "strategy_table",
    "transformer_units", "unit_sizes",
]  # fmt: skip
