"""Lesson 4's questions: prefetch and overlap.

Answers from the student's own run (``run=``) or simulator profile (``profile=``, ``link=``).
"""

from __future__ import annotations

from typing import Any

from labkit.grading.registry import question


def last_spans(run: Any, config: str, rank: int = 0) -> dict[str, Any]:
    """The timeline message of the last step recorded under ``config`` on ``rank``."""
    msgs = [m for m in run.events[rank] if m.get("t") == "spans" and m.get("config") == config]
    if not msgs:
        raise ValueError(f"the run has no timeline recorded with config={config!r}")
    return msgs[-1]


def peak_gathered_bytes(msg: dict[str, Any]) -> int:
    """The most bytes of gathered parameters held at once in one step, from its ``held`` spans."""
    from labkit.course.measure import peak_gathered

    return peak_gathered(msg["spans"], msg["unit_bytes"])


question(
    "lesson4.why_no_overlap",
    answer="b",
    hint={
        "en": "Look at the timelines: do the compute row and the collectives' row ever run at the same "
        "moment? What is the rank's thread doing while a gloo collective runs?",
        "ro": "Priviți cronologiile: rulează vreodată rândul de calcul și cel al operațiilor colective în "
        "același moment? Ce face firul rangului cât timp rulează o operație colectivă gloo?",
    },
)


@question(
    "lesson4.peak_gathered_pre",
    points=2,
    hint={
        "en": "At the peak of a BACKWARD_PRE step, which units are gathered together? The root is kept "
        "from the end of forward; count the block that computes its gradients and the one prefetched for it.",
        "ro": "La vârful unui pas BACKWARD_PRE, ce unități sunt adunate împreună? Rădăcina este păstrată de "
        "la sfârșitul trecerii directe; numărați blocul care își calculează gradienții și pe cel preîncărcat.",
    },
)
def _peak_gathered_pre(run: Any) -> float:
    return peak_gathered_bytes(last_spans(run, "BACKWARD_PRE"))


@question(
    "lesson4.saved_ms",
    points=2,
    hint={
        "en": "Simulate twice on the same link, once per setting, and subtract the step_time with "
        "BACKWARD_PRE from the one without prefetch; step_time is in seconds, the answer in milliseconds.",
        "ro": "Simulați de două ori pe aceeași legătură, câte o dată pentru fiecare setare, și scădeți "
        "step_time cu BACKWARD_PRE din cel fără preîncărcare; step_time este în secunde, răspunsul în milisecunde.",
    },
)
def _saved_ms(profile: Any, link: Any) -> float:
    from labkit import simulate

    without = simulate.simulate(profile, link, backward_prefetch=None)
    with_pre = simulate.simulate(profile, link, backward_prefetch="BACKWARD_PRE")
    return (without.step_time - with_pre.step_time) * 1e3
