"""Lesson 5's questions: CPU offload and mixed precision.

The measured answers come from the ``run=`` of the lesson's five settings (rank 0's report);
the offload plan from ``labkit.memory_model``.
"""

from __future__ import annotations

from typing import Any

from labkit.grading.registry import question


@question(
    "lesson5.bf16_gathered",
    points=2,
    hint={
        "en": "param_dtype is the dtype a unit is all-gathered and computes in: the same number of "
        "elements, each in fewer bytes. Scale the fp32 bytes by the ratio of the two element sizes.",
        "ro": "param_dtype este tipul în care o unitate este adunată și calculează: același număr de "
        "elemente, fiecare în mai puțini octeți. Scalați octeții fp32 cu raportul celor două dimensiuni.",
    },
)
def _bf16_gathered(run: Any) -> float:
    return run.values[0]["bf16"]["memory"]["params_unsharded"]


def _halved(run: Any) -> set[str]:
    """The collectives whose bytes the bf16 setting (param_dtype bf16, reduce_dtype fp32) reduced."""
    fp32, bf16 = run.values[0]["fp32"]["comm"], run.values[0]["bf16"]["comm"]
    return {op for op in ("all_gather", "reduce_scatter") if bf16.get(op, 0) < fp32.get(op, 0)}


question(
    "lesson5.halved_collectives",
    verify=lambda value, run: _as_set(value) == _halved(run),
    hint={
        "en": "Compare the bf16 row of the collectives' table with the fp32 row, column by column. "
        "Which dtype does each collective move: param_dtype or reduce_dtype?",
        "ro": "Comparați rândul bf16 al tabelului operațiilor colective cu rândul fp32, coloană cu coloană. "
        "Ce tip mută fiecare operație colectivă: param_dtype sau reduce_dtype?",
    },
)


def _as_set(value: Any) -> set[str] | None:
    if isinstance(value, str) or not hasattr(value, "__iter__"):
        return None
    return {str(v).strip() for v in value}


@question(
    "lesson5.host_per_node",
    hint={
        "en": "Each rank keeps its shard (1/world_size) of the fp32 parameters, their fp32 gradients and "
        "Adam's two moments in host memory; a node holds that for each of its GPUs.",
        "ro": "Fiecare rang își ține în memoria gazdei fragmentul (1/world_size) din parametrii fp32, "
        "gradienții lor fp32 și cele două momente Adam; un nod ține asta pentru fiecare GPU al său.",
    },
)
def _host_per_node(n_params: int, world_size: int, gpus_per_node: int) -> float:
    from labkit import memory_model

    states = memory_model.model_states(n_params, "FULL_SHARD", world_size, "bf16", convention="torch", offload="params")
    return states.host_total * gpus_per_node
