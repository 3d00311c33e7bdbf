"""Lesson 0's questions: setup and check."""

from __future__ import annotations

from typing import Any

from labkit.grading.registry import question
from labkit.wire.records import RunRecord


def reported(run: RunRecord, key: str) -> list[Any]:
    """What every rank of ``run`` reported under ``key`` (None where a rank did not)."""
    return [run.values.get(r, {}).get(key) for r in range(run.nproc)]


@question(
    "lesson0.allreduce_sum",
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


def _mean_on_ranks(value: Any) -> bool:
    """Every rank holds the mean of the ranks' tensors, computed with an all-reduce."""
    n = value.nproc
    expected = [i * (n + 1) / 2 for i in range(4)]  # the mean of i * (r + 1) over r = 0..n-1
    means, ops = reported(value, "mean"), reported(value, "collectives")
    return all(
        m is not None and len(m) == 4 and all(abs(a - b) <= 1e-6 for a, b in zip(m, expected)) for m in means
    ) and all(o is not None and "all_reduce" in o for o in ops)


question(
    "lesson0.mean_on_ranks",
    points=2,
    takes="run",
    verify=_mean_on_ranks,
    hint={
        "en": "Start from a copy of mine (all_reduce works in place), sum it over the ranks with "
        "dist.all_reduce, then divide by the number of ranks. Every rank must end up with the same mean.",
        "ro": "Porniți de la o copie a lui mine (all_reduce lucrează pe loc), însumați-o pe ranguri cu "
        "dist.all_reduce, apoi împărțiți la numărul de ranguri. Fiecare rang trebuie să ajungă la aceeași medie.",
    },
)


@question(
    "lesson0.peak_ratio",
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
    "lesson0.why_losses_differ",
    answer="b",
    sealed=True,
    hint={
        "en": "All ranks start from the same seed, so the same weights. What does "
        "synthetic_batch(cfg, batch, step, rank) depend on?",
        "ro": "Toate rangurile pornesc de la aceeași sămânță, deci de la aceleași ponderi. "
        "De ce depinde synthetic_batch(cfg, batch, step, rank)?",
    },
)
