"""The course's questions, one ``question(...)`` per ``labkit.check(id, ...)`` in a lesson.

Ids are ``"<lesson>.<name>"``, where ``<lesson>`` is the notebook's
``metadata.labkit.lesson``: the grader sums the points of every question of a
lesson, so a question registered here and missing from the notebook costs the
student its points. Hints say where to look, never what the answer is.

Three forms (see labkit/grading/registry.py):

    question(id, answer=16, hint=...)                  # a constant
    @question(id, hint=...)                            # a function of what the check is given:
    def _(n_params, world_size): return ...            #   labkit.check(id, v, n_params=..., world_size=...)
    question(id, verify=lambda value, run: ..., hint=...)   # a test, e.g. on the student's Run
"""

from __future__ import annotations

from labkit.grading.registry import question

# -- lesson 1: where the memory of training goes ---------------------------------------

# Mixed-precision AdamW keeps, per parameter: bf16 weights (2) and gradients (2) for
# forward and backward, and an fp32 master copy (4) plus Adam's two moments (4 + 4).
question(
    "lesson1.bytes_per_param",
    answer=16,
    hint={
        "en": "Count every copy a parameter has during a step: the ones forward and backward use, "
        "and the ones the optimizer keeps. Which of them are bf16 and which fp32?",
        "ro": "Numărați fiecare copie a unui parametru în timpul unui pas: cele folosite de forward și backward, "
        "și cele păstrate de optimizator. Care sunt bf16 și care fp32?",
    },
    mistakes={
        12: {
            "en": "That is what the optimizer keeps. The model itself also holds weights and gradients.",
            "ro": "Asta păstrează optimizatorul. Modelul însuși mai ține ponderile și gradienții.",
        },
        8: {
            "en": "Adam's moments are only part of it: who else keeps a copy of the parameter?",
            "ro": "Momentele Adam sunt doar o parte: cine mai păstrează o copie a parametrului?",
        },
    },
)

question(
    "lesson1.optimizer_share",
    answer=0.75,
    rel=1e-3,
    hint={
        "en": "Of the bytes per parameter you counted, add up those that only the optimizer needs, "
        "then divide by the total.",
        "ro": "Din octeții pe parametru pe care i-ați numărat, adunați-i pe cei de care are nevoie doar "
        "optimizatorul, apoi împărțiți la total.",
    },
    mistakes={
        75: {
            "en": "Give a fraction between 0 and 1, not a percentage.",
            "ro": "Dați o fracție între 0 și 1, nu un procent.",
        },
        0.5: {
            "en": "The fp32 master copy of the weights belongs to the optimizer too.",
            "ro": "Și copia master fp32 a ponderilor ține de optimizator.",
        },
    },
)


@question(
    "lesson1.sharded_bytes_per_rank",
    points=2,
    hint={
        "en": "Fully sharded, each rank keeps an equal slice of every per-parameter copy. "
        "Start from the bytes per parameter and the model size.",
        "ro": "Complet partajat, fiecare rang păstrează o felie egală din fiecare copie per parametru. "
        "Porniți de la octeții pe parametru și dimensiunea modelului.",
    },
)
def _sharded_bytes_per_rank(n_params: int, world_size: int) -> float:
    return 16 * n_params / world_size
