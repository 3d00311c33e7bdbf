"""Lesson 1's questions: DDP's memory wall.

``lesson1.bytes_per_param``, ``lesson1.optimizer_share`` and ``lesson1.sharded_bytes_per_rank``
live in ``labkit/grading/questions.py``: they were the grading module's examples, and the
lesson uses them as they are.
"""

from __future__ import annotations

from typing import Any

from labkit.grading.registry import question


@question(
    "lesson1.ddp_rank_bytes",
    points=2,
    rel=1e-3,  # AdamW's step counters (one 4-byte scalar per parameter tensor) are in the measurement
    hint={
        "en": "In fp32 training, count the bytes of every copy a parameter has on one rank: the weight, "
        "its gradient and Adam's two moments. Multiply by the number of parameters.",
        "ro": "În antrenarea fp32, numărați octeții fiecărei copii pe care o are un parametru pe un rang: "
        "ponderea, gradientul ei și cele două momente Adam. Înmulțiți cu numărul de parametri.",
    },
)
def _ddp_rank_bytes(run: Any) -> float:
    v = run.values[0]
    return v["param_bytes"] + v["grad_bytes"] + v["optim_bytes"]


@question(
    "lesson1.ddp_max_params",
    hint={
        "en": "Under DDP one GPU must hold the whole model state: divide the GPU's bytes by the bytes "
        "each parameter costs in mixed-precision AdamW.",
        "ro": "Sub DDP un GPU trebuie să țină toată starea modelului: împărțiți octeții GPU-ului la octeții "
        "pe care îi costă fiecare parametru cu AdamW în precizie mixtă.",
    },
    mistakes={
        2e10: {
            "en": "That counts only the bf16 weights and gradients; the optimizer's copies are on the GPU too.",
            "ro": "Așa numărați doar ponderile și gradienții bf16; copiile optimizatorului sunt și ele pe GPU.",
        },
    },
)
def _ddp_max_params(gpu_bytes: float) -> float:
    return gpu_bytes / 16
