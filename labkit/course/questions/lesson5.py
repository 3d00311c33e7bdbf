"""Lesson 5's questions: mixed precision and CPU offload.

The measured answers come from the ``run=`` of the lesson's five settings (rank 0's report);
the offload plan from ``labkit.memory_model``.
"""

from __future__ import annotations

from typing import Any

from labkit.grading import exercises
from labkit.grading.registry import Asks, question
from labkit.wire.records import RunRecord
from labkit.wire.setting import Strategy


def _bf16_measured(run: RunRecord) -> tuple[dict[str, Any], float]:
    v = run.values[0]
    return {"fp32_gathered": v["fp32"]["memory"]["params_unsharded"]}, v["bf16"]["memory"]["params_unsharded"]


@question(
    "lesson5.bf16_gathered",
    asks=Asks.PREDICTION,
    formula=True,
    at_run=_bf16_measured,
    hint={
        "en": "param_dtype is the dtype a unit is all-gathered and computes in: the same number of "
        "elements, each in fewer bytes. Scale the fp32 bytes by the ratio of the two element sizes.",
        "ro": "param_dtype este tipul în care o unitate este colectată și calculează: același număr de "
        "elemente, fiecare în mai puțini octeți. Scalați octeții fp32 cu raportul celor două dimensiuni.",
    },
    mistakes={
        lambda fp32_gathered: fp32_gathered: {
            "en": "That is the fp32 figure unchanged: with param_dtype=bf16 each gathered element takes 2 bytes, not 4.",
            "ro": "Aceasta este cifra fp32 neschimbată: cu param_dtype=bf16 fiecare element colectat ia 2 octeți, nu 4.",
        },
        lambda fp32_gathered: 2 * fp32_gathered: {
            "en": "The ratio goes the other way: a bf16 element is smaller than an fp32 one.",
            "ro": "Raportul este invers: un element bf16 este mai mic decât unul fp32.",
        },
    },
)
def _bf16_gathered(fp32_gathered: float) -> float:
    return fp32_gathered / 2


def _halved(value: Any, observations: dict[int, dict[str, Any]]) -> bool:
    """The collectives whose bytes the bf16 setting (param_dtype bf16, reduce_dtype fp32) moved fewer of than
    fp32, read from what labkit observed rank 0 do (the settings told apart by the model each one trained)."""
    steps = exercises.steps_by_model(observations.get(0, {}))
    ops = ("all_gather", "reduce_scatter")

    def dtypes(step: dict[str, Any]) -> list[set[str]]:
        return [exercises.moved(step, op)[1] for op in ops]

    fp32 = next((s for s in steps if dtypes(s) == [{"float32"}, {"float32"}]), None)
    bf16 = next((s for s in steps if dtypes(s) == [{"bfloat16"}, {"float32"}]), None)
    if fp32 is None or bf16 is None:
        return False
    return _as_set(value) == {op for op in ops if exercises.moved(bf16, op)[0] < exercises.moved(fp32, op)[0]}


question(
    "lesson5.halved_collectives",
    asks=Asks.PREDICTION,
    observe=_halved,
    # the grader's: what FSDP does with param_dtype=bf16, reduce_dtype=fp32 (the lesson's own run measures it)
    reference=lambda value: _as_set(value) == {"all_gather"},
    hint={
        "en": "Compare the bf16 row of the collectives' table with the fp32 row, column by column. "
        "Which dtype does each collective move: param_dtype or reduce_dtype?",
        "ro": "Comparați rândul bf16 al tabelului operațiilor colective cu rândul fp32, coloană cu coloană. "
        "Ce tip mută fiecare operație colectivă: param_dtype sau reduce_dtype?",
    },
)


def _as_set(value: Any) -> set[str] | None:
    if isinstance(value, str) or not hasattr(value, "__iter__"):
        return None
    return {str(v).strip() for v in value}


@question(
    "lesson5.host_per_node",
    asks=Asks.ARITHMETIC,
    formula=True,
    mistakes={
        lambda n_params, world_size, gpus_per_node: 16 * n_params / world_size: {
            "en": "That is one rank's host memory; a node hosts one rank per GPU.",
            "ro": "Aceasta este memoria gazdei pentru un rang; un nod găzduiește câte un rang pentru fiecare GPU.",
        },
        lambda n_params, world_size, gpus_per_node: 4 * n_params / world_size * gpus_per_node: {
            "en": "4 bytes per parameter is the fp32 parameter shard alone; its gradient and Adam's moments "
            "are offloaded with it.",
            "ro": "4 octeți pe parametru înseamnă doar fragmentul fp32 al parametrului; gradientul lui și "
            "momentele Adam sunt mutate pe CPU împreună cu el.",
        },
    },
    hint={
        "en": "Each rank keeps its shard (1/world_size) of the fp32 parameters, their fp32 gradients and "
        "Adam's two moments in host memory; a node holds that for each of its GPUs.",
        "ro": "Fiecare rang își ține în memoria gazdei fragmentul (1/world_size) din parametrii fp32, "
        "gradienții lor fp32 și cele două momente Adam; un nod ține asta pentru fiecare GPU al său.",
    },
)
def _host_per_node(n_params: int, world_size: int, gpus_per_node: int) -> float:
    from labkit.memory import model as memory_model

    states = memory_model.model_states(
        n_params, Strategy.FULL_SHARD, world_size, "bf16", convention="torch", offload="params"
    )
    return states.host_total * gpus_per_node


question(
    "lesson5.mixed_precision",
    asks=Asks.TOOL,
    points=2,
    takes="run",
    observe=exercises.mixed_precision,
    hint={
        "en": "FSDP2's MixedPrecisionPolicy has one dtype for what the all-gathers move and the blocks compute in, "
        "and one for what the reduce-scatters move. Half the bytes of fp32 is a 2-byte dtype.",
        "ro": "MixedPrecisionPolicy din FSDP2 are un tip pentru ce mută colectările și în care calculează "
        "blocurile, și unul pentru ce mută reducerile cu distribuire. Jumătate din octeții fp32 înseamnă un tip "
        "de 2 octeți.",
    },
    hints=[
        {
            "en": "param_dtype is the one the all-gathers move: make it a 2-byte floating dtype. reduce_dtype is "
            "the one the gradients are summed in: keep it fp32.",
            "ro": "param_dtype este cel mutat de colectări: faceți-l un tip în virgulă mobilă de 2 octeți. "
            "reduce_dtype este cel în care se însumează gradienții: păstrați-l fp32.",
        },
        {
            "en": "The check compares the two steps: your all-gathers must move half the bytes of the fp32 step's, "
            "in a 16-bit dtype, and your reduce-scatters as many bytes as the fp32 step's, in fp32.",
            "ro": "Verificarea compară cei doi pași: colectările voastre trebuie să mute jumătate din octeții "
            "pasului fp32, într-un tip de 16 biți, iar reducerile cu distribuire tot atâția octeți cât ale pasului "
            "fp32, în fp32.",
        },
    ],
)
