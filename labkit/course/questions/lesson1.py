"""Lesson 1's questions: where the memory of training goes, and DDP's memory wall.

Formulas are handed in as functions and checked at sizes the notebook never shows
(``registry.UNSEEN``); the DDP exercise is graded from what its ranks measured.
"""

from __future__ import annotations

from labkit.grading import exercises
from labkit.grading.registry import Asks, question


# Mixed-precision AdamW keeps, per parameter: bf16 weights (2) and gradients (2) for
# forward and backward, and an fp32 master copy (4) plus Adam's two moments (4 + 4).
@question(
    "lesson1.bytes_per_param",
    asks=Asks.ARITHMETIC,
    formula=True,
    hint={
        "en": "Count every copy a parameter has during a step: the ones forward and backward use, "
        "and the ones the optimizer keeps. Which of them are bf16 and which fp32?",
        "ro": "Numărați fiecare copie a unui parametru în timpul unui pas: cele folosite de trecerea directă și "
        "de cea inversă, și cele păstrate de optimizator. Care sunt bf16 și care fp32?",
    },
    mistakes={
        lambda n_params: 12 * n_params: {
            "en": "That is what the optimizer keeps. The model itself also holds weights and gradients.",
            "ro": "Asta păstrează optimizatorul. Modelul însuși mai ține ponderile și gradienții.",
        },
        lambda n_params: 8 * n_params: {
            "en": "Adam's moments are only part of it: who else keeps a copy of the parameter?",
            "ro": "Momentele Adam sunt doar o parte: cine mai păstrează o copie a parametrului?",
        },
    },
)
def _mixed_state_bytes(n_params: int) -> float:
    return 16 * n_params


@question(
    "lesson1.optimizer_share",
    asks=Asks.ARITHMETIC,
    formula=True,
    hint={
        "en": "Of the bytes per parameter in the table's column for that precision, add up those that only the "
        "optimizer needs, then divide by the column's total. bf16 and fp16 train in mixed precision (right "
        "column), fp32 in plain fp32 (left column).",
        "ro": "Din octeții pe parametru din coloana tabelului pentru acea precizie, însumați-i pe cei de care are "
        "nevoie doar optimizatorul, apoi împărțiți la totalul coloanei. bf16 și fp16 antrenează în precizie "
        "mixtă (coloana din dreapta), fp32 în fp32 simplu (coloana din stânga).",
    },
    mistakes={
        lambda precision: 100 * _optimizer_share(precision): {
            "en": "Give a fraction between 0 and 1, not a percentage.",
            "ro": "Dați o fracție între 0 și 1, nu un procent.",
        },
        lambda precision: 0.5: {
            "en": "In mixed precision the fp32 master copy of the weights belongs to the optimizer too.",
            "ro": "În precizie mixtă și copia master fp32 a ponderilor ține de optimizator.",
        },
        lambda precision: 0.75: {
            "en": "Plain fp32 training keeps no master copy: the fp32 weights are the ones the optimizer updates.",
            "ro": "Antrenarea în fp32 simplu nu ține o copie master: ponderile fp32 sunt chiar cele actualizate de "
            "optimizator.",
        },
    },
)
def _optimizer_share(precision: str) -> float:
    if precision == "fp32":  # weights 4, gradients 4, Adam's m and v 4 + 4: the optimizer's are the moments
        return 8 / 16
    return 12 / 16  # bf16/fp16 weights and gradients 2 + 2; master, m and v in fp32: 4 + 4 + 4


@question(
    "lesson1.ddp_max_params",
    asks=Asks.ARITHMETIC,
    formula=True,
    hint={
        "en": "Under DDP one GPU must hold the whole model state: divide the GPU's bytes by the bytes "
        "each parameter costs in mixed-precision AdamW.",
        "ro": "Sub DDP un GPU trebuie să țină toată starea modelului: împărțiți octeții GPU-ului la octeții "
        "pe care îi costă fiecare parametru cu AdamW în precizie mixtă.",
    },
    mistakes={
        lambda gpu_bytes: gpu_bytes / 4: {
            "en": "That counts only the bf16 weights and gradients; the optimizer's copies are on the GPU too.",
            "ro": "Așa numărați doar ponderile și gradienții bf16; copiile optimizatorului sunt și ele pe GPU.",
        },
    },
)
def _ddp_max_params(gpu_bytes: float) -> float:
    return gpu_bytes / 16


question(
    "lesson1.ddp_by_hand",
    asks=Asks.MECHANISM,
    points=3,
    takes="run",
    observe=exercises.ddp_by_hand,
    hint={
        "en": "After backward each rank holds the gradients of its own batch. DDP makes every rank's gradient the "
        "mean over the ranks, parameter by parameter, with one collective per gradient.",
        "ro": "După trecerea inversă fiecare rang are gradienții propriului lot. DDP face din gradientul fiecărui "
        "rang media pe ranguri, parametru cu parametru, cu o operație colectivă pentru fiecare gradient.",
    },
    hints=[
        {
            "en": "In average_gradients, for every parameter of the model, all-reduce its .grad in place (the sum "
            "over the ranks lands in the same tensor), then scale it to a mean.",
            "ro": "În average_gradients, pentru fiecare parametru al modelului, reduceți global (all-reduce) pe loc "
            "gradientul lui .grad (suma pe ranguri ajunge în același tensor), apoi scalați-l la o medie.",
        },
        {
            "en": "The check wants each parameter's own .grad reduced in place, once each, and the result equal to "
            "DDP's: the sum over the ranks divided by their number. Copying DDP's gradients does not count: no "
            "collective of yours would run.",
            "ro": "Verificarea cere ca fiecare .grad al unui parametru să fie redus pe loc, o singură dată, iar "
            "rezultatul să fie egal cu al DDP: suma pe ranguri împărțită la numărul lor. Copierea gradienților DDP "
            "nu contează: nu ar rula nicio operație colectivă a voastră.",
        },
    ],
)
