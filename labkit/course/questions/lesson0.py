"""Lesson 0's questions: setup and check."""

from __future__ import annotations

from typing import Any

from labkit.grading import exercises
from labkit.grading.registry import Asks, question
from labkit.wire.records import RunRecord


def reported(run: RunRecord, key: str) -> list[Any]:
    """What every rank of ``run`` reported under ``key`` (None where a rank did not)."""
    return [run.values.get(r, {}).get(key) for r in range(run.nproc)]


@question(
    "lesson0.allreduce_sum",
    asks=Asks.PREDICTION,
    formula=True,
    hint={
        "en": "Rank r contributes r + 1, and all_reduce adds up every rank's value: 1 + 2 + ... up to the "
        "last rank's contribution. Write that sum in closed form.",
        "ro": "Rangul r contribuie cu r + 1, iar all_reduce însumează valorile tuturor rangurilor: 1 + 2 + ... "
        "până la contribuția ultimului rang. Scrieți suma în formă închisă.",
    },
    mistakes={
        lambda world_size: world_size * (world_size - 1) / 2: {
            "en": "That sums the rank numbers 0 to world_size - 1; each rank put in its number plus one.",
            "ro": "Așa însumați numerele rangurilor, de la 0 la world_size - 1; fiecare rang a pus numărul lui plus unu.",
        },
    },
)
def _allreduce_sum(world_size: int) -> float:
    return world_size * (world_size + 1) / 2


question(
    "lesson0.mean_on_ranks",
    asks=Asks.MECHANISM,
    points=2,
    takes="run",
    observe=exercises.mean_on_ranks,
    hint={
        "en": "Each rank holds only its own numbers, and the mean needs every rank's. One collective combines a "
        "tensor across all the ranks and leaves the result on every rank: give it a copy of mine, then turn what "
        "it combined into a mean.",
        "ro": "Fiecare rang are doar propriile numere, iar media are nevoie de ale tuturor. O singură operație "
        "colectivă combină un tensor de pe toate rangurile și lasă rezultatul pe fiecare rang: dați-i o copie a "
        "lui mine, apoi transformați ce a combinat într-o medie.",
    },
    hints=[
        {
            "en": "The collective that leaves the sum over the ranks on every rank is torch.distributed's "
            "all-reduce. It works in place, on the tensor it is given: give it a copy of mine, and that copy holds "
            "the sum afterwards.",
            "ro": "Operația colectivă care lasă suma pe ranguri pe fiecare rang este reducerea globală (all-reduce) "
            "din torch.distributed. Lucrează pe loc, pe tensorul primit: dați-i o copie a lui mine, iar după aceea "
            "copia conține suma.",
        },
        {
            "en": "After the all-reduce, the copy holds the sum over the ranks; mean_of returns that sum divided by "
            "the number of ranks (dist.get_world_size gives it), which is right for any number of ranks. Issue "
            "exactly one collective.",
            "ro": "După reducerea globală, copia conține suma pe ranguri; mean_of întoarce suma împărțită la numărul "
            "de ranguri (dist.get_world_size îl dă), ceea ce e corect pentru orice număr de ranguri. Porniți exact "
            "o singură operație colectivă.",
        },
    ],
)


@question(
    "lesson0.peak_ratio",
    asks=Asks.PREDICTION,
    formula=True,
    at_run=lambda run: ({"world_size": run.nproc}, run.main_peak(run.nproc - 1) / run.main_peak(0)),
    hint={
        "en": "In the cell, rank r holds (step + 1) * (r + 1) MiB at a step. Compare the last rank's largest "
        "buffer with rank 0's, as a function of world_size.",
        "ro": "În celulă, rangul r ține (step + 1) * (r + 1) MiB la un pas. Comparați cel mai mare tampon al "
        "ultimului rang cu al rangului 0, ca funcție de world_size.",
    },
    mistakes={
        lambda world_size: world_size - 1: {
            "en": "The last rank's number is world_size - 1, but what it allocates is its number plus one.",
            "ro": "Numărul ultimului rang este world_size - 1, dar ce alocă este numărul lui plus unu.",
        },
    },
)
def _peak_ratio(world_size: int) -> float:
    return world_size


question(
    "lesson0.step_gradient",
    asks=Asks.REASONING,
    answer="b",
    sealed=True,
    hint={
        "en": "The exercise on the ranks (mean_of) made every rank end with the same mean. If each rank applied a different gradient, "
        "could the weights stay one model? And with AdamW, is averaging weights after a step the same as "
        "averaging gradients before it?",
        "ro": "Exercițiul pe ranguri (mean_of) a făcut ca fiecare rang să rămână cu aceeași medie. Dacă fiecare rang ar aplica alt "
        "gradient, ar mai rămâne ponderile un singur model? Și cu AdamW, media ponderilor după pas este totuna "
        "cu media gradienților dinaintea lui?",
    },
)
