"""Lesson 2's questions: ZeRO-3 sharding."""

from __future__ import annotations

from typing import Any

from labkit.grading import exercises
from labkit.grading.registry import Asks, question
from labkit.wire.records import RunRecord
from labkit.wire.setting import Strategy


@question(
    "lesson2.zero1_bytes",
    asks=Asks.REASONING,
    formula=True,
    hint={
        "en": "Stage 1 shards only the optimizer state over the GPUs; the weights and gradients stay whole on "
        "every GPU. In plain fp32 AdamW, which bytes per parameter are the optimizer's, and which the model's?",
        "ro": "Etapa 1 fragmentează doar stările optimizatorului pe GPU-uri; ponderile și gradienții rămân "
        "întregi pe fiecare GPU. În AdamW fp32 simplu, care octeți pe parametru sunt ai optimizatorului și care "
        "ai modelului?",
    },
    mistakes={
        lambda n_params, world_size: 4 * n_params + 12 * n_params / world_size: {
            "en": "That is the table's mixed-precision row: in plain fp32 the weights and gradients take 4 bytes "
            "each, and there is no fp32 master copy beside the weights.",
            "ro": "Acesta este rândul în precizie mixtă al tabelului: în fp32 simplu ponderile și gradienții iau câte "
            "4 octeți, iar lângă ponderi nu există o copie master fp32.",
        },
        lambda n_params, world_size: 16 * n_params / world_size: {
            "en": "That shards everything: stage 3. Stage 1 leaves the weights and gradients whole.",
            "ro": "Așa fragmentați totul: etapa 3. Etapa 1 lasă ponderile și gradienții întregi.",
        },
    },
)
def _zero1_bytes(n_params: float, world_size: int) -> float:
    return 8 * n_params + 8 * n_params / world_size


@question(
    "lesson2.hsdp_rank_bytes",
    asks=Asks.REASONING,
    points=2,
    formula=True,
    hint={
        "en": "HYBRID_SHARD shards over the GPUs of one node only; every node holds a whole copy of the state. "
        "By how many GPUs is the optimizer state divided, then? It is K = 12 bytes per parameter.",
        "ro": "HYBRID_SHARD fragmentează doar pe GPU-urile unui nod; fiecare nod ține o copie întreagă a stării. "
        "La câte GPU-uri se împart atunci stările optimizatorului? Sunt K = 12 octeți pe parametru.",
    },
    mistakes={
        lambda n_params, world_size, gpus_per_node: 12 * n_params / world_size: {
            "en": "That is FULL_SHARD over every GPU. HYBRID_SHARD keeps one copy per node, sharded only within it.",
            "ro": "Acesta este FULL_SHARD pe toate GPU-urile. HYBRID_SHARD ține câte o copie pe nod, fragmentată "
            "doar în interiorul lui.",
        },
        lambda n_params, world_size, gpus_per_node: 16 * n_params / gpus_per_node: {
            "en": "That is the whole model state, weights and gradients included; the question asks for the "
            "optimizer's part.",
            "ro": "Aceasta este toată starea modelului, cu ponderi și gradienți; întrebarea cere partea "
            "optimizatorului.",
        },
        lambda n_params, world_size, gpus_per_node: 12 * n_params * gpus_per_node / world_size: {
            "en": "That divides by the number of nodes; the shards are spread over the GPUs of a node.",
            "ro": "Așa împărțiți la numărul de noduri; fragmentele sunt împărțite între GPU-urile unui nod.",
        },
    },
)
def _hsdp_rank_bytes(n_params: float, world_size: int, gpus_per_node: int) -> float:
    return 12 * n_params / gpus_per_node  # the optimizer state: 16 would equal n_params at 16 GPUs per node


def _sgo_measured(run: RunRecord) -> tuple[dict[str, Any], float]:
    v = run.values[0][Strategy.SHARD_GRAD_OP]
    units = dict(v["units"])  # padded elements per unit, as gathered
    root = units.pop("root")
    return {"root_params": root, "block_params": max(units.values()), "n_blocks": len(units)}, v["peak"]


@question(
    "lesson2.sgo_peak",
    asks=Asks.PREDICTION,
    points=2,
    formula=True,
    at_run=_sgo_measured,
    hint={
        "en": "Under SHARD_GRAD_OP a unit gathered for its forward stays gathered until its backward. Walk one "
        "step: which units are gathered at the moment forward ends and backward begins? Count fp32 bytes.",
        "ro": "Cu SHARD_GRAD_OP, o unitate colectată pentru trecerea directă rămâne colectată până la trecerea "
        "ei inversă. Parcurgeți un pas: ce unități sunt colectate în clipa în care se termină trecerea directă "
        "și începe cea inversă? Numărați octeți fp32.",
    },
    mistakes={
        lambda root_params, block_params, n_blocks: 4 * (root_params + block_params): {
            "en": "Root plus one block is FULL_SHARD's peak without prefetch: it frees each block after its "
            "forward. SHARD_GRAD_OP does not.",
            "ro": "Rădăcina plus un bloc este vârful lui FULL_SHARD fără preîncărcare: acesta eliberează fiecare "
            "bloc după trecerea lui directă. SHARD_GRAD_OP nu face asta.",
        },
        lambda root_params, block_params, n_blocks: 4 * (root_params + 2 * block_params): {
            "en": "Root plus two blocks is FULL_SHARD's peak with prefetch. SHARD_GRAD_OP keeps every block it "
            "has gathered until that block's backward.",
            "ro": "Rădăcina plus două blocuri este vârful lui FULL_SHARD cu preîncărcare. SHARD_GRAD_OP păstrează "
            "fiecare bloc colectat până la trecerea lui inversă.",
        },
        lambda root_params, block_params, n_blocks: 4 * n_blocks * block_params: {
            "en": "The root is a unit too (embeddings, final norm, output), and it is gathered first.",
            "ro": "Și rădăcina este o unitate (încorporările, normalizarea finală, ieșirea) și este colectată prima.",
        },
        lambda root_params, block_params, n_blocks: 2 * (root_params + n_blocks * block_params): {
            "en": "2 bytes per element is bf16; these runs gather fp32 parameters.",
            "ro": "2 octeți pe element înseamnă bf16; aceste rulări colectează parametri fp32.",
        },
    },
)
def _sgo_peak(root_params: int, block_params: int, n_blocks: int) -> float:
    return 4 * (root_params + n_blocks * block_params)


@question(
    "lesson2.reduce_scatter_rank0",
    asks=Asks.PREDICTION,
    formula=True,
    hint={
        "en": "Element i of the sum is the sum over every rank q of (i + q). Rank 0 keeps elements 0 and 1.",
        "ro": "Elementul i al sumei este suma, pe toate rangurile q, a lui (i + q). Rangul 0 păstrează elementele 0 și 1.",
    },
)
def _reduce_scatter_rank0(world_size: int) -> list[float]:
    offset = world_size * (world_size - 1) / 2
    return [offset, world_size + offset]


@question(
    "lesson2.full_shard_sent",
    asks=Asks.REASONING,
    points=2,
    formula=True,
    hint={
        "en": "Count the passes over the parameters FULL_SHARD makes in a step, each sending (N-1)/N of what it "
        "moves: all-gathers in forward and in backward, a reduce-scatter. Then take out what the root saves.",
        "ro": "Numărați trecerile peste parametri pe care le face FULL_SHARD într-un pas, fiecare trimițând "
        "(N-1)/N din ce mută: colectări în trecerea directă și în cea inversă, o reducere cu distribuire. "
        "Apoi scădeți ce economisește rădăcina.",
    },
    mistakes={
        lambda n_params, root_params, world_size: 3 * (world_size - 1) / world_size * n_params: {
            "en": "That is the theory without the root: FSDP keeps the root gathered from the end of forward into "
            "backward, so it gathers the root once, not twice.",
            "ro": "Aceasta este teoria fără rădăcină: FSDP păstrează rădăcina colectată de la sfârșitul trecerii "
            "directe până în cea inversă, deci o colectează o dată, nu de două ori.",
        },
        lambda n_params, root_params, world_size: 2 * (world_size - 1) / world_size * n_params: {
            "en": "That is DDP's all-reduce (or SHARD_GRAD_OP): FULL_SHARD gathers again in backward.",
            "ro": "Aceasta este reducerea globală a DDP (sau SHARD_GRAD_OP): FULL_SHARD colectează din nou în "
            "trecerea inversă.",
        },
    },
)
def _full_shard_sent(n_params: float, root_params: float, world_size: int) -> float:
    return (3 * n_params - root_params) * (world_size - 1) / world_size


question(
    "lesson2.mini_zero3",
    asks=Asks.MECHANISM,
    points=3,
    takes="run",
    observe=exercises.mini_zero3,
    hint={
        "en": "Each rank keeps one shard of the flat parameter vector. Before forward every rank needs the whole "
        "vector: a collective that collects every rank's shard into one tensor on every rank. After backward each "
        "rank keeps only its own shard of the mean gradient: a collective that sums across the ranks and hands "
        "each rank one piece.",
        "ro": "Fiecare rang păstrează un fragment din vectorul plat al parametrilor. Înainte de trecerea directă "
        "fiecare rang are nevoie de tot vectorul: o operație colectivă care colectează fragmentele tuturor rangurilor "
        "într-un tensor pe fiecare rang. După trecerea inversă fiecare rang păstrează doar fragmentul lui din "
        "gradientul mediu: o operație colectivă care însumează pe ranguri și dă fiecărui rang o bucată.",
    },
    hints=[
        {
            "en": "gather_params: an all-gather, from shard into a new tensor world times its size. "
            "reduce_scatter_grads: a reduce-scatter, from flat_grad into a new tensor 1/world of its size; it sums, "
            "and DDP's gradient is the mean.",
            "ro": "gather_params: o colectare (all-gather), din shard într-un tensor nou de world ori mărimea lui. "
            "reduce_scatter_grads: o reducere cu distribuire (reduce-scatter), din flat_grad într-un tensor nou cât "
            "1/world din mărimea lui; aceasta însumează, iar gradientul DDP este media.",
        },
        {
            "en": "Exactly one collective in each function, on the tensor the function receives, and nothing else: "
            "an all-reduce of the whole gradient is what ZeRO-3 avoids, even with a reduce-scatter after it. "
            "torch.distributed has versions of both collectives that write into one flat tensor.",
            "ro": "Exact o operație colectivă în fiecare funcție, pe tensorul primit de funcție, și nimic altceva: "
            "o reducere globală a întregului gradient este ce evită ZeRO-3, chiar urmată de o reducere cu "
            "distribuire. torch.distributed are variante ale ambelor operații care scriu într-un singur tensor plat.",
        },
    ],
)
