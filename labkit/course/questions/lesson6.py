"""Lesson 6's questions: FSDP2 and scaling to 70B.

Measured answers come from the ``run=`` of the lesson's FSDP2 cell (rank 0's report); the
70B plan from ``labkit.memory_model``, with the lesson's plan (FULL_SHARD, bf16 with fp32
shards, activation checkpointing, one sequence per GPU).
"""

from __future__ import annotations

from typing import Any

from labkit.grading.registry import question

PLAN = {"precision": "bf16", "convention": "torch", "checkpointing": True, "micro_batch": 1}

question(
    "lesson6.reshard_after_forward",
    answer={"FULL_SHARD": True, "SHARD_GRAD_OP": False},
    hint={
        "en": "FULL_SHARD frees each unit's gathered parameters after its forward and gathers them again "
        "for backward; SHARD_GRAD_OP keeps them until backward. Which of the two reshards after forward?",
        "ro": "FULL_SHARD eliberează parametrii adunați ai fiecărei unități după trecerea ei directă și îi "
        "adună din nou pentru cea inversă; SHARD_GRAD_OP îi păstrează până la trecerea inversă. Care dintre "
        "ele refragmentează după trecerea directă?",
    },
)


@question(
    "lesson6.rank_bytes",
    points=2,
    rel=1e-3,  # FSDP2 pads each parameter's rows up to a multiple of the ranks
    hint={
        "en": "Each parameter is split by rows over the ranks: one rank allocates its share of the "
        "fp32 parameters, 4 bytes each.",
        "ro": "Fiecare parametru este împărțit pe rânduri între ranguri: un rang alocă partea lui din "
        "parametrii fp32, câte 4 octeți fiecare.",
    },
)
def _rank_bytes(run: Any) -> float:
    return run.values[0]["allocated"]


@question(
    "lesson6.local_rank",
    hint={
        "en": "Ranks 0 to gpus_per_node - 1 are on node 0, the next gpus_per_node on node 1, and so on; "
        "on each node the GPUs are numbered again from 0. What is left of global_rank once the whole "
        "nodes before it are taken away?",
        "ro": "Rangurile de la 0 la gpus_per_node - 1 sunt pe nodul 0, următoarele gpus_per_node pe nodul 1 "
        "și așa mai departe; pe fiecare nod GPU-urile se numerotează din nou de la 0. Ce rămâne din "
        "global_rank după ce scoateți nodurile întregi dinaintea lui?",
    },
)
def _local_rank(global_rank: int, gpus_per_node: int) -> int:
    return global_rank % gpus_per_node


@question(
    "lesson6.reloaded_loss",
    points=2,
    rel=1e-5,  # the same weights and batch; only the order of a few sums may differ
    hint={
        "en": "Give dcp.load the nested dict {{'train': {{'model': plain.state_dict()}}}} and no_dist=True, "
        "then load_state_dict the inner 'model' dict into plain, and evaluate it on the probe batch under "
        "torch.no_grad().",
        "ro": "Dați lui dcp.load dicționarul imbricat {{'train': {{'model': plain.state_dict()}}}} și no_dist=True, "
        "apoi încărcați cu load_state_dict dicționarul interior 'model' în plain și evaluați-l pe lotul de "
        "probă sub torch.no_grad().",
    },
)
def _reloaded_loss(run: Any) -> float:
    return run.values[0]["saved_loss"]


@question(
    "lesson6.min_gpus",
    points=2,
    hint={
        "en": "Try the numbers of GPUs in increasing order with memory_model.fits(plan_model, 'H100-80GB', "
        "'FULL_SHARD', n, **PLAN) and keep the first that fits; it is at most the first row of the table that fits.",
        "ro": "Încercați numerele de GPU-uri în ordine crescătoare cu memory_model.fits(plan_model, 'H100-80GB', "
        "'FULL_SHARD', n, **PLAN) și păstrați-l pe primul care încape; este cel mult primul rând al tabelului "
        "care încape.",
    },
)
def _min_gpus(model: str) -> int:
    from labkit import memory_model

    n = memory_model.min_world_size(model, "FULL_SHARD", "H100-80GB", **PLAN)
    if n is None:
        raise ValueError(f"{model} does not fit on any number of 80 GB GPUs with this plan")
    return n
