"""Lesson 2's questions: ZeRO-3 sharding."""

from __future__ import annotations

from typing import Any

from labkit.grading.registry import question


@question(
    "lesson2.zero1_bytes",
    hint={
        "en": "Stage 1 shards only the optimizer state (K bytes per parameter) over the GPUs; the bf16 weights "
        "and gradients stay whole on every GPU.",
        "ro": "Etapa 1 fragmentează doar stările optimizatorului (K octeți pe parametru) pe GPU-uri; ponderile și "
        "gradienții bf16 rămân întregi pe fiecare GPU.",
    },
)
def _zero1_bytes(n_params: float, world_size: int) -> float:
    return 4 * n_params + 12 * n_params / world_size


@question(
    "lesson2.zero3_bytes",
    hint={
        "en": "Stage 3 shards all three kinds of state: add up the bytes per parameter, multiply by the "
        "parameters, and divide by the GPUs.",
        "ro": "Etapa 3 fragmentează toate cele trei feluri de stări: adunați octeții pe parametru, înmulțiți cu "
        "numărul de parametri și împărțiți la numărul de GPU-uri.",
    },
)
def _zero3_bytes(n_params: float, world_size: int) -> float:
    return 16 * n_params / world_size


@question(
    "lesson2.full_shard_rank_bytes",
    points=2,
    rel=1e-3,  # FSDP's padding and AdamW's step counters are in the measurement
    hint={
        "en": "These runs train in fp32: how many bytes per parameter do weights, gradients and Adam's two "
        "moments take together? FULL_SHARD divides all of it by the number of ranks.",
        "ro": "Aceste rulări antrenează în fp32: câți octeți pe parametru iau împreună ponderile, gradienții și "
        "cele două momente Adam? FULL_SHARD le împarte pe toate la numărul de ranguri.",
    },
)
def _full_shard_rank_bytes(run: Any) -> float:
    v = run.values[0]["FULL_SHARD"]
    return v["params"] + v["grads"] + v["optim"]


question(
    "lesson2.same_rest_full_peak",
    answer="SHARD_GRAD_OP",
    hint={
        "en": "Look in the table for a strategy whose state column matches FULL_SHARD's while its peak column "
        "matches NO_SHARD's.",
        "ro": "Căutați în tabel o strategie a cărei coloană de stare este egală cu a lui FULL_SHARD, în timp ce "
        "coloana ei de vârf este egală cu a lui NO_SHARD.",
    },
    mistakes={
        "NO_SHARD": {
            "en": "NO_SHARD holds the whole model at the peak, but also between steps.",
            "ro": "NO_SHARD ține întregul model la vârf, dar și între pași.",
        },
        "FULL_SHARD": {
            "en": "FULL_SHARD frees each unit after using it, so its peak is a few units, not the model.",
            "ro": "FULL_SHARD eliberează fiecare unitate după folosire, deci vârful lui înseamnă câteva unități, nu modelul.",
        },
    },
)


@question(
    "lesson2.reduce_scatter_rank0",
    hint={
        "en": "Element i of the sum is the sum over every rank q of (i + q). Rank 0 keeps elements 0 and 1.",
        "ro": "Elementul i al sumei este suma, pe toate rangurile q, a lui (i + q). Rangul 0 păstrează elementele 0 și 1.",
    },
)
def _reduce_scatter_rank0(world_size: int) -> list[float]:
    offset = world_size * (world_size - 1) / 2
    return [offset, world_size + offset]


question(
    "lesson2.traffic_ratio",
    answer=1.5,
    hint={
        "en": "Count the passes over the parameters each strategy makes per step, each costing (N-1)/N of them: "
        "an all-reduce counts as two, an all-gather or a reduce-scatter as one.",
        "ro": "Numărați câte treceri peste parametri face fiecare strategie la un pas, fiecare costând (N-1)/N din "
        "ei: o reducere globală contează cât două, o colectare completă sau o reducere cu distribuire cât una.",
    },
    mistakes={
        3: {
            "en": "That is FULL_SHARD's count alone; divide by DDP's.",
            "ro": "Acesta este doar numărul pentru FULL_SHARD; împărțiți-l la cel al DDP.",
        },
    },
)
