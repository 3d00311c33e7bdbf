"""Lesson 3's questions: wrap policies."""

from __future__ import annotations

from typing import Any

from labkit.grading.registry import question


def _same_units_as_transformer(value: Any, run: Any) -> bool:
    """The run wrapped the model with ``value`` and FSDP made the transformer policy's units."""
    v = run.values[0]
    return int(value) == v["my_min_num_params"] and v["size_yours"]["units"] == v["transformer"]["units"]


question(
    "lesson3.min_num_params",
    points=2,
    verify=_same_units_as_transformer,
    hint={
        "en": "Compare the table's numbers: the policy wraps a child first when the child reaches min_num_params, "
        "then the parent with what is left. Which part of a block must stay below it, and what must reach it?",
        "ro": "Comparați numerele din tabel: politica împachetează întâi un copil care ajunge la min_num_params, "
        "apoi părintele cu ce a rămas. Ce parte a unui bloc trebuie să rămână sub valoare și ce trebuie s-o atingă?",
    },
)


@question(
    "lesson3.none_gathered",
    rel=1e-3,  # FSDP pads the one flat parameter to a multiple of the ranks
    hint={
        "en": "With one unit, what part of the model is gathered while it computes? Count it in fp32 bytes.",
        "ro": "Cu o singură unitate, ce parte a modelului este adunată cât timp calculează? Numărați-o în octeți fp32.",
    },
)
def _none_gathered(run: Any) -> float:
    return run.values[0]["none"]["most_gathered"]


@question(
    "lesson3.block_gathered",
    points=2,
    hint={
        "en": "In backward, which unit does FSDP keep from the end of forward, which block is computing, and "
        "which one has it gathered ahead? Each element is an fp32 number.",
        "ro": "În trecerea inversă, ce unitate păstrează FSDP de la sfârșitul trecerii directe, ce bloc calculează "
        "și pe care l-a adunat dinainte? Fiecare element este un număr fp32.",
    },
)
def _block_gathered(run: Any) -> float:
    return run.values[0]["transformer"]["most_gathered"]
