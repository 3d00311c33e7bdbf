"""Lesson 4's questions: prefetch and overlap.

Answers from the student's own run (``run=``) or simulator profile (``profile=``, ``link=``).
"""

from __future__ import annotations

from typing import Any

from labkit.grading.registry import DTYPE_BYTES, question
from labkit.wire.protocol import Msg
from labkit.wire.records import RunRecord, last_message


def last_spans(run: RunRecord, config: str, rank: int = 0) -> dict[str, Any]:
    """The timeline message of the last step recorded under ``config`` on ``rank``."""
    msg = last_message(run, rank, Msg.SPANS, config=config)
    if msg is None:
        raise ValueError(f"the run has no timeline recorded with config={config!r}")
    return msg


def peak_gathered_bytes(msg: dict[str, Any]) -> int:
    """The most bytes of gathered parameters held at once in one step, from its ``held`` spans."""
    from labkit.course.measure import peak_gathered

    return peak_gathered(msg["spans"], msg["unit_bytes"])


question(
    "lesson4.why_no_overlap",
    answer="b",
    sealed=True,
    hint={
        "en": "Look at the timelines: do the compute row and the collectives' row ever run at the same "
        "moment? What is the rank's thread doing while a gloo collective runs?",
        "ro": "Priviți cronologiile: rulează vreodată rândul de calcul și cel al operațiilor colective în "
        "același moment? Ce face firul rangului cât timp rulează o operație colectivă gloo?",
    },
)


def _pre_measured(run: RunRecord) -> tuple[dict[str, Any], float]:
    msg = last_spans(run, "BACKWARD_PRE")
    units = dict(msg["unit_bytes"])
    root = units.pop("root") // 4  # fp32 bytes -> elements
    return {"root_params": root, "block_params": max(units.values()) // 4, "precision": "fp32"}, peak_gathered_bytes(
        msg
    )


@question(
    "lesson4.peak_gathered_pre",
    points=2,
    formula=True,
    at_run=_pre_measured,
    hint={
        "en": "At the peak of a BACKWARD_PRE step, which units are gathered together? The root is kept "
        "from the end of forward; count the block that computes its gradients and the one prefetched for it, "
        "each element in the bytes of the given precision.",
        "ro": "La vârful unui pas BACKWARD_PRE, ce unități sunt colectate împreună? Rădăcina este păstrată de "
        "la sfârșitul trecerii directe; numărați blocul care își calculează gradienții și pe cel preîncărcat, "
        "fiecare element în octeții preciziei date.",
    },
    mistakes={
        lambda root_params, block_params, precision: DTYPE_BYTES[precision] * (root_params + block_params): {
            "en": "Root plus one block is the peak without prefetch. With BACKWARD_PRE, what else is gathered "
            "while a block computes its gradients?",
            "ro": "Rădăcina plus un bloc este vârful fără preîncărcare. Cu BACKWARD_PRE, ce mai este colectat "
            "cât timp un bloc își calculează gradienții?",
        },
        lambda root_params, block_params, precision: 4 * (root_params + 2 * block_params): {
            "en": "That counts 4 bytes per element whatever the precision: a bf16 or fp16 element takes 2.",
            "ro": "Așa numărați 4 octeți pe element oricare ar fi precizia: un element bf16 sau fp16 ia 2.",
        },
    },
)
def _peak_gathered_pre(root_params: int, block_params: int, precision: str) -> float:
    return DTYPE_BYTES[precision] * (root_params + 2 * block_params)


@question(
    "lesson4.saved_ms",
    points=2,
    hint={
        "en": "Simulate twice on the same link, once per setting, and subtract the step_time with "
        "BACKWARD_PRE from the one without prefetch; step_time is in seconds, the answer in milliseconds.",
        "ro": "Simulați de două ori pe aceeași legătură, câte o dată pentru fiecare setare, și scădeți "
        "step_time cu BACKWARD_PRE din cel fără preîncărcare; step_time este în secunde, răspunsul în milisecunde.",
    },
    mistakes={
        lambda profile, link: _saved_ms(profile, link) / 1e3: {
            "en": "That is the saving in seconds: step_time is in seconds, the answer in milliseconds.",
            "ro": "Aceasta este economia în secunde: step_time este în secunde, răspunsul în milisecunde.",
        },
    },
)
def _saved_ms(profile: Any, link: Any) -> float:
    from labkit.timing import simulate

    without = simulate.simulate(profile, link, backward_prefetch=None)
    with_pre = simulate.simulate(profile, link, backward_prefetch="BACKWARD_PRE")
    return (without.step_time - with_pre.step_time) * 1e3


def _forward_prefetch(value: Any) -> bool:
    """When block i starts computing, the all-gather of block i + 1 has been issued already."""
    for r in range(value.nproc):
        counts = value.values.get(r, {}).get("gathered_at_start")
        if not counts:
            return False
        last = len(counts) + 1  # the root and every block
        if counts != [min(i + 3, last) for i in range(len(counts))]:  # root, blocks 0..i, and block i + 1
            return False
    return True


question(
    "lesson4.forward_prefetch",
    points=2,
    takes="run",
    verify=_forward_prefetch,
    hint={
        "en": "FSDP2 prefetches in forward only when told to: for each block but the last, call "
        "block.set_modules_to_forward_prefetch([the block after it]).",
        "ro": "FSDP2 preîncarcă în trecerea directă doar când i se cere: pentru fiecare bloc în afară de ultimul, "
        "apelați block.set_modules_to_forward_prefetch([blocul de după el]).",
    },
)
