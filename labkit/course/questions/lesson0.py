"""Lesson 0's questions: setup and check."""

from __future__ import annotations

from typing import Any

from labkit.grading.registry import question


@question(
    "lesson0.allreduce_sum",
    hint={
        "en": "Rank r contributes r + 1, and all_reduce adds up every rank's value. "
        "Write the sum for world_size ranks as a formula of world_size.",
        "ro": "Rangul r contribuie cu r + 1, iar all_reduce adună valorile tuturor rangurilor. "
        "Scrieți suma pentru world_size ranguri ca formulă de world_size.",
    },
)
def _allreduce_sum(world_size: int) -> float:
    return world_size * (world_size + 1) / 2


@question(
    "lesson0.peak_ratio",
    hint={
        "en": "Use run.main_peak(r): the peak of the last rank divided by the peak of rank 0, "
        "both from the run the check is given.",
        "ro": "Folosiți run.main_peak(r): vârful ultimului rang împărțit la vârful rangului 0, "
        "ambele din rularea dată verificării.",
    },
)
def _peak_ratio(run: Any) -> float:
    return run.main_peak(run.nproc - 1) / run.main_peak(0)


question(
    "lesson0.why_losses_differ",
    answer="b",
    hint={
        "en": "All ranks start from the same seed, so the same weights. What does "
        "synthetic_batch(cfg, batch, step, rank) depend on?",
        "ro": "Toate rangurile pornesc de la aceeași sămânță, deci de la aceleași ponderi. "
        "De ce depinde synthetic_batch(cfg, batch, step, rank)?",
    },
)
