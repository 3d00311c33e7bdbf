"""Lesson 7's questions: FSDP2 and scaling to 70B.

Measured answers come from the ``run=`` of the lesson's FSDP2 cell (rank 0's report); the
70B plan from ``labkit.memory_model``, with the lesson's plan (FULL_SHARD, bf16 with fp32
shards, activation checkpointing, one sequence per GPU).
"""

from __future__ import annotations

from typing import Any

from labkit.grading import exercises
from labkit.grading.registry import Asks, question
from labkit.wire.records import RunRecord
from labkit.wire.setting import Strategy

PLAN = {"precision": "bf16", "convention": "torch", "checkpointing": True, "micro_batch": 1}


@question(
    "lesson7.hpz_bytes",
    asks=Asks.REASONING,
    points=2,
    formula=True,
    hint={
        "en": "Between forward and backward a unit with an int reshard_after_forward is neither whole nor back to "
        "its 1/world_size shard: it keeps a shard over a group of that many ranks, beside the shard every rank "
        "always keeps. Add the two, 4 bytes per fp32 element.",
        "ro": "Între trecerea directă și cea inversă, o unitate cu reshard_after_forward întreg nu este nici "
        "întreagă, nici înapoi la fragmentul ei de 1/world_size: păstrează un fragment pe un grup de atâtea "
        "ranguri, alături de fragmentul pe care fiecare rang îl ține mereu. Însumați-le, 4 octeți pe element fp32.",
    },
    mistakes={
        lambda n_params, world_size, gpus_per_node: 4 * n_params / world_size: {
            "en": "That is reshard_after_forward=True: the int form keeps more than the rank's own shard.",
            "ro": "Acesta este reshard_after_forward=True: forma întreagă păstrează mai mult decât fragmentul "
            "propriu al rangului.",
        },
        lambda n_params, world_size, gpus_per_node: 4 * n_params / gpus_per_node: {
            "en": "The post-forward shard comes in addition to the rank's own 1/world_size shard, which FSDP2 never "
            "frees.",
            "ro": "Fragmentul de după trecerea directă vine în plus față de fragmentul propriu de 1/world_size al "
            "rangului, pe care FSDP2 nu îl eliberează niciodată.",
        },
        lambda n_params, world_size, gpus_per_node: 4 * n_params + 4 * n_params / world_size: {
            "en": "That keeps every unit whole, as reshard_after_forward=False does.",
            "ro": "Așa păstrați fiecare unitate întreagă, cum face reshard_after_forward=False.",
        },
    },
)
def _hpz_bytes(n_params: float, world_size: int, gpus_per_node: int) -> float:
    return 4 * n_params / world_size + 4 * n_params / gpus_per_node


def _rank_measured(run: RunRecord, n_params: int) -> tuple[dict[str, Any], float]:
    """What one rank allocated, on average over the ranks: a rank holds whole rows (torch gives each up to
    ceil(rows / world_size), the last what is left), so where ``world_size`` does not divide a parameter's rows
    the shares differ (rank 0 is 1.4% over 4 n_params / 3 for the lesson's model at 3 ranks); the mean is exact."""
    allocated = [run.values[r]["allocated"] for r in range(run.nproc)]
    return {"n_params": n_params, "world_size": run.nproc}, sum(allocated) / len(allocated)


@question(
    "lesson7.rank_bytes",
    asks=Asks.PREDICTION,
    formula=True,
    at_run=_rank_measured,
    hint={
        "en": "Each parameter is split by rows over the ranks: one rank allocates its share of the "
        "fp32 parameters, 4 bytes each.",
        "ro": "Fiecare parametru este împărțit pe rânduri între ranguri: un rang alocă partea lui din "
        "parametrii fp32, câte 4 octeți fiecare.",
    },
    mistakes={
        lambda n_params, world_size: 16 * n_params / world_size: {
            "en": "16 bytes per parameter is the whole training state; the cell allocated the parameters only, "
            "before any gradient or optimizer.",
            "ro": "16 octeți pe parametru înseamnă toată starea antrenării; celula a alocat doar parametrii, "
            "înainte de orice gradient sau optimizator.",
        },
        lambda n_params, world_size: 4 * n_params: {
            "en": "That is the whole model: each rank allocates only its rows.",
            "ro": "Acesta este întregul model: fiecare rang alocă doar rândurile sale.",
        },
    },
)
def _rank_bytes(n_params: int, world_size: int) -> float:
    return 4 * n_params / world_size


@question(
    "lesson7.local_rank",
    asks=Asks.ARITHMETIC,
    formula=True,
    hint={
        "en": "Ranks 0 to gpus_per_node - 1 are on node 0, the next gpus_per_node on node 1, and so on; "
        "on each node the GPUs are numbered again from 0. What is left of global_rank once the whole "
        "nodes before it are taken away?",
        "ro": "Rangurile de la 0 la gpus_per_node - 1 sunt pe nodul 0, următoarele gpus_per_node pe nodul 1 "
        "și așa mai departe; pe fiecare nod GPU-urile se numerotează din nou de la 0. Ce rămâne din "
        "global_rank după ce scoateți nodurile întregi dinaintea lui?",
    },
    mistakes={
        lambda global_rank, gpus_per_node: global_rank // gpus_per_node: {
            "en": "That is the node's number; the device is numbered within the node.",
            "ro": "Acesta este numărul nodului; dispozitivul este numerotat în interiorul nodului.",
        },
    },
)
def _local_rank(global_rank: int, gpus_per_node: int) -> int:
    return global_rank % gpus_per_node


question(
    "lesson7.reloaded_loss",
    asks=Asks.TOOL,
    takes="model",
    batch=(8, 10_000, 0),  # the ranks' probe batch: synthetic_batch(cfg, 8, 10_000, 0)
    observe=exercises.reloaded_loss,  # against the loss labkit saw rank 0's model give on it, just saved
    hint={
        "en": "Make a TransformerLM of shape cfg, give dcp.load the nested dict {{'train': {{'model': ...}}}} "
        "holding its state dict, with no_dist=True, then load_state_dict the inner 'model' dict into it and "
        "return it. The check evaluates the model your function returns on the probe batch.",
        "ro": "Faceți un TransformerLM de forma cfg, dați lui dcp.load dicționarul imbricat "
        "{{'train': {{'model': ...}}}} cu dicționarul lui de stare, cu no_dist=True, apoi încărcați cu "
        "load_state_dict dicționarul interior 'model' în el și întoarceți-l. Verificarea evaluează pe lotul de "
        "probă modelul întors de funcția voastră.",
    },
)


@question(
    "lesson7.min_gpus",
    asks=Asks.TOOL,
    contexts=[{"model": name} for name in ("llama-7b", "llama-13b", "llama-70b")],  # the lesson's plan_model
    hint={
        "en": "Try the numbers of GPUs in increasing order with memory_model.fits(plan_model, 'H100-80GB', "
        "'FULL_SHARD', n, **PLAN) and keep the first that fits; it is at most the first row of the table that fits.",
        "ro": "Încercați numerele de GPU-uri în ordine crescătoare cu memory_model.fits(plan_model, 'H100-80GB', "
        "'FULL_SHARD', n, **PLAN) și păstrați-l pe primul care încape; este cel mult primul rând al tabelului "
        "care încape.",
    },
)
def _min_gpus(model: str) -> int:
    from labkit.memory import model as memory_model

    n = memory_model.min_world_size(model, Strategy.FULL_SHARD, "H100-80GB", **PLAN)
    if n is None:
        raise ValueError(f"{model} does not fit on any number of 80 GB GPUs with this plan")
    return n


question(
    "lesson7.checkpoint_budget",
    asks=Asks.TOOL,
    points=2,
    takes="run",
    observe=exercises.checkpoint_budget,
    hint={
        "en": "Activations are what forward keeps for backward. Keep fewer of them without changing the step: "
        "compute each block's activations again in backward instead of storing them.",
        "ro": "Activările sunt ce păstrează trecerea directă pentru cea inversă. Păstrați mai puține fără să "
        "schimbați pasul: calculați din nou activările fiecărui bloc în trecerea inversă în loc să le stocați.",
    },
    hints=[
        {
            "en": "That is activation checkpointing, applied to each TransformerBlock: torch.distributed has a "
            "helper that wraps the modules a check_fn picks. Apply it to model; the cell calls your function "
            "before fully_shard.",
            "ro": "Aceasta este recalcularea activărilor (activation checkpointing), aplicată fiecărui "
            "TransformerBlock: torch.distributed are o funcție ajutătoare care împachetează modulele alese de un "
            "check_fn. Aplicați-o pe model; celula vă apelează funcția înainte de fully_shard.",
        },
        {
            "en": "The check watches the blocks compute: a checkpointed block computes twice in the step (once more in "
            "backward), and the loss stays the one without it; the grader measures the activations against the "
            "budget. A smaller batch changes the loss.",
            "ro": "Verificarea urmărește calculul blocurilor: un bloc cu activările recalculate calculează de două ori "
            "în pas (încă o dată în trecerea inversă), iar pierderea rămâne cea de fără recalculare; evaluatorul "
            "măsoară activările față de buget. Un lot mai mic schimbă pierderea.",
        },
    ],
)
