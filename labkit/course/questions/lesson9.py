"""Lesson 9's questions: composing tensor parallelism and FSDP2 on a 2-D mesh.

The two predictions are formulas, asked before the lesson's main cell runs and checked against what its ranks
measured (the ``run=`` of that cell): each rank's bytes by role (``labkit.memtrack.split_by_role``) and the bytes
of tensor parallelism's all-reduces in one step. The exercise on the ranks, ``parallelize``, is judged by what
labkit observed there, and by the grader's own re-run (``labkit.grading.rerun_lesson9``).

Kinds (issue 49's classification): ``rank_bytes`` and ``tp_bytes`` are predictions, ``compose`` a mechanism.
"""

from __future__ import annotations

from typing import Any

from labkit.grading import rerun_lesson9
from labkit.grading.registry import Asks, question
from labkit.wire.records import RunRecord

TP = rerun_lesson9.TP


question(
    "lesson9.compose",
    asks=Asks.MECHANISM,
    points=3,
    takes="run",
    observe=rerun_lesson9.compose,
    hint={
        "en": "Each dimension of the mesh has one job: mesh['tp'] splits the MLP's weights inside a block, "
        "mesh['dp'] shards the parameters across the data-parallel ranks. Which must come first, so that FSDP "
        "shards tensors that are already split?",
        "ro": "Fiecare dimensiune a grilei (mesh) are o singură sarcină: mesh['tp'] împarte ponderile MLP-ului în "
        "interiorul unui bloc, mesh['dp'] fragmentează parametrii între rangurile paralele pe date. Care trebuie "
        "să vină prima, astfel încât FSDP să fragmenteze tensori deja împărțiți?",
    },
    hints=[
        {
            "en": "Two steps, in this order: parallelize_module on each block with mesh['tp'] and a plan that names the "
            "MLP's three layers, then fully_shard on each block and on the root with mesh['dp'].",
            "ro": "Doi pași, în această ordine: parallelize_module pe fiecare bloc cu mesh['tp'] și un plan care "
            "numește cele trei straturi ale MLP-ului, apoi fully_shard pe fiecare bloc și pe rădăcină cu mesh['dp'].",
        },
        {
            "en": "The plan maps a layer's name inside the block to its style: the two layers that read x split their "
            "output columns, the one that writes the block's output splits its input rows (section 2).",
            "ro": "Planul asociază numelui unui strat din bloc stilul lui: cele două straturi care citesc x își "
            "împart coloanele de ieșire, cel care scrie ieșirea blocului își împarte rândurile de intrare "
            "(secțiunea 2).",
        },
    ],
)


def _state_measured(run: RunRecord, mlp_params: int, other_params: int) -> tuple[dict[str, Any], float]:
    """Parameters, gradients and AdamW's two moments on one rank, on average over the ranks: what
    ``split_by_role`` measured, less AdamW's ``step`` counters (one scalar per parameter tensor), which the
    question leaves out. The mean is exact where FSDP gives the ranks unequal rows."""
    held = [
        sum(run.values[r]["roles"][k] for k in ("params", "grads", "optimizer")) - run.values[r]["counters"]
        for r in range(run.nproc)
    ]
    context = {"mlp_params": mlp_params, "other_params": other_params, "dp": run.nproc // TP, "tp": TP}
    return context, sum(held) / len(held)


@question(
    "lesson9.rank_bytes",
    asks=Asks.PREDICTION,
    points=2,
    formula=True,
    at_run=_state_measured,
    hint={
        "en": "Each element a rank holds costs 4 bytes of weight, 4 of gradient and 8 of AdamW's two moments. "
        "How many ranks split an MLP matrix, and how many split everything else?",
        "ro": "Fiecare element ținut de un rang costă 4 octeți de pondere, 4 de gradient și 8 pentru cele două "
        "momente AdamW. Câte ranguri împart o matrice a MLP-ului și câte împart tot restul?",
    },
    mistakes={
        lambda mlp_params, other_params, dp, tp: 16 * (mlp_params + other_params) / (dp * tp): {
            "en": "Tensor parallelism splits only the layers it was given: the embedding, attention, norms and "
            "output are split by FSDP alone.",
            "ro": "Paralelismul tensorial împarte doar straturile primite: încorporarea, atenția, normalizările și "
            "ieșirea sunt împărțite doar de FSDP.",
        },
        lambda mlp_params, other_params, dp, tp: 16 * (mlp_params + other_params) / dp: {
            "en": "FSDP shards over mesh['dp'] what each rank of a row holds: for the MLP, that is already a "
            "1/tp slice.",
            "ro": "FSDP fragmentează pe mesh['dp'] ce ține fiecare rang al unui rând: pentru MLP, aceasta este deja "
            "o felie de 1/tp.",
        },
        lambda mlp_params, other_params, dp, tp: 4 * (mlp_params / (dp * tp) + other_params / dp): {
            "en": "That is the weights alone; after a step the rank also holds their gradients and AdamW's state.",
            "ro": "Aceștia sunt doar octeții ponderilor; după un pas rangul ține și gradienții lor și starea AdamW.",
        },
    },
)
def _rank_bytes(mlp_params: float, other_params: float, dp: int, tp: int) -> float:
    return 16 * (mlp_params / (dp * tp) + other_params / dp)


def _tp_measured(run: RunRecord, micro_batch: int, seq_len: int, dim: int, n_blocks: int) -> tuple[dict, float]:
    """The bytes of DTensor's all-reduces in the counted step, on average over the ranks (each rank counts its own:
    the tensor each all-reduce works on, the cell's ``FunctionalCollectives``)."""
    sent = [(run.values[r]["tp_calls"].get("all_reduce") or [0, 0])[1] for r in range(run.nproc)]
    return {"micro_batch": micro_batch, "seq_len": seq_len, "dim": dim, "n_blocks": n_blocks}, sum(sent) / len(sent)


@question(
    "lesson9.tp_bytes",
    asks=Asks.PREDICTION,
    points=2,
    formula=True,
    at_run=_tp_measured,
    hint={
        "en": "Every all-reduce here works on one activation of the block, micro_batch × seq_len × dim floats. "
        "Count them per block: one where the row-wise layer's partial sums are added in forward, and in "
        "backward one for every layer whose input's gradient comes out partial.",
        "ro": "Fiecare all-reduce de aici lucrează pe o activare a blocului, micro_batch × seq_len × dim valori "
        "float. Numărați-le pe bloc: unul unde se însumează sumele parțiale ale stratului împărțit pe rânduri la "
        "trecerea directă și, la trecerea inversă, câte unul pentru fiecare strat al cărui gradient al intrării "
        "iese parțial.",
    },
    mistakes={
        lambda micro_batch, seq_len, dim, n_blocks: 2 * n_blocks * micro_batch * seq_len * dim * 4: {
            "en": "Megatron's paper counts two per MLP; torch's ColwiseParallel converts the input of each layer it "
            "is given on its own, and there are two column-wise layers reading x.",
            "ro": "Articolul Megatron numără două pe MLP; ColwiseParallel din torch convertește separat intrarea "
            "fiecărui strat primit, iar x este citit de două straturi împărțite pe coloane.",
        },
        lambda micro_batch, seq_len, dim, n_blocks: n_blocks * micro_batch * seq_len * dim * 4: {
            "en": "That is the forward's all-reduce only: backward completes partial gradients too.",
            "ro": "Acesta este doar all-reduce-ul trecerii directe: și trecerea inversă completează gradienți "
            "parțiali.",
        },
        lambda micro_batch, seq_len, dim, n_blocks: 6 * n_blocks * micro_batch * seq_len * dim * 4: {
            "en": "Attention is not split by tensor parallelism in this lesson (section 2): only the MLP talks over "
            "mesh['tp'].",
            "ro": "Atenția nu este împărțită de paralelismul tensorial în această lecție (secțiunea 2): doar MLP-ul "
            "comunică pe mesh['tp'].",
        },
    },
)
def _tp_bytes(micro_batch: int, seq_len: int, dim: int, n_blocks: int) -> float:
    return 3 * n_blocks * micro_batch * seq_len * dim * 4
