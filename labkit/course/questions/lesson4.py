"""Lesson 4's questions: prefetch and overlap.

Answers from the student's own run (``run=``) or simulator profile (``profile=``, ``link=``).
"""

from __future__ import annotations

from typing import Any

from labkit.grading import exercises
from labkit.grading.registry import DTYPE_BYTES, Asks, question
from labkit.wire.protocol import Msg
from labkit.wire.records import RunRecord, last_message
from labkit.wire.setting import Prefetch


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
    "lesson4.prefetched_unit",
    asks=Asks.REASONING,
    answer="L1",
    sealed=True,
    hint={
        "en": "Backward runs the blocks in the reverse of forward's order, and FSDP1 keeps the root gathered from "
        "the end of forward. BACKWARD_PRE issues the all-gather of the unit backward needs next before the current "
        "unit computes.",
        "ro": "Trecerea inversă rulează blocurile în ordinea inversă celei directe, iar FSDP1 păstrează rădăcina "
        "colectată de la sfârșitul trecerii directe. BACKWARD_PRE lansează colectarea unității de care trecerea "
        "inversă are nevoie în continuare înainte ca unitatea curentă să calculeze.",
    },
)


def _pre_measured(run: RunRecord) -> tuple[dict[str, Any], float]:
    msg = last_spans(run, Prefetch.BACKWARD_PRE)
    units = dict(msg["unit_bytes"])
    root = units.pop("root") // 4  # fp32 bytes -> elements
    return {"root_params": root, "block_params": max(units.values()) // 4, "precision": "fp32"}, peak_gathered_bytes(
        msg
    )


@question(
    "lesson4.peak_gathered_pre",
    asks=Asks.PREDICTION,
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
    asks=Asks.TOOL,
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
    with_pre = simulate.simulate(profile, link, backward_prefetch=Prefetch.BACKWARD_PRE)
    return (without.step_time - with_pre.step_time) * 1e3


question(
    "lesson4.forward_prefetch",
    asks=Asks.TOOL,
    points=2,
    takes="run",
    observe=exercises.forward_prefetch,
    hint={
        "en": "FSDP2 gathers a block's parameters just before the block computes, unless it is told earlier. Tell "
        "each block which block to start gathering while it computes.",
        "ro": "FSDP2 colectează parametrii unui bloc chiar înainte ca blocul să calculeze, dacă nu i se spune mai "
        "devreme. Spuneți fiecărui bloc ce bloc să înceapă să colecteze cât timp calculează.",
    },
    hints=[
        {
            "en": "Every block but the last names the block after it as the one to prefetch in forward; an FSDP2 "
            "module has a setter for the modules to prefetch in forward, which takes a list.",
            "ro": "Fiecare bloc în afară de ultimul numește blocul de după el ca pe cel de preîncărcat în trecerea "
            "directă; un modul FSDP2 are o metodă care fixează modulele de preîncărcat în trecerea directă, care "
            "primește o listă.",
        },
        {
            "en": "The check reads the forward prefetch setting of each block (block i names block i + 1, "
            "and may name the blocks after it too) "
            "and counts the all-gathers issued before each block computes: block i's must already have been "
            "issued while block i - 1 computed.",
            "ro": "Verificarea citește setarea de preîncărcare în trecerea directă a fiecărui bloc (blocul i îl "
            "numește pe blocul i + 1 și îi poate numi și pe cei de după el) și numără colectările pornite înainte să calculeze fiecare bloc: a "
            "blocului i trebuie să fi fost deja pornită cât timp calcula blocul i - 1.",
        },
    ],
)


question(
    "lesson4.slow_link_order",
    asks=Asks.PREDICTION,
    answer="c",
    sealed=True,
    hint={
        "en": "Count what each strategy sends across the slow link, not what each rank holds: which collectives "
        "does HSDP keep inside a node, and which all-gathers does SHARD_GRAD_OP not run in backward?",
        "ro": "Numărați ce trimite fiecare strategie peste legătura lentă, nu ce ține fiecare rang: ce operații "
        "colective păstrează HSDP în interiorul unui nod și ce colectări nu mai rulează SHARD_GRAD_OP în "
        "trecerea inversă?",
    },
    mistakes={
        "a": {
            "en": "FULL_SHARD holds the least per rank, but every one of its collectives runs on a ring that "
            "crosses the link, and it gathers each block twice.",
            "ro": "FULL_SHARD ține cel mai puțin pe rang, dar fiecare operație colectivă a lui rulează pe un inel "
            "care traversează legătura, iar fiecare bloc este colectat de două ori.",
        },
        "d": {
            "en": "On CPU every FSDP1 collective blocks the rank, so each one's time adds to the step: the "
            "strategies differ in how many bytes those collectives send across the link.",
            "ro": "Pe procesor fiecare operație colectivă FSDP1 blochează rangul, așa că durata fiecăreia se "
            "adaugă la pas: strategiile diferă prin câți octeți trimit acele operații peste legătură.",
        },
    },
)
