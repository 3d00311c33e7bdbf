"""Lesson 3's questions: wrap policies."""

from __future__ import annotations

from typing import Any

from labkit.grading import exercises
from labkit.grading.registry import Asks, question
from labkit.wire.records import RunRecord

# Models the notebook never builds: in one of them attention outweighs the feed-forward.
UNSEEN_CONFIGS = (
    {"vocab_size": 300, "dim": 96, "n_layers": 3, "n_heads": 4},
    {"vocab_size": 500, "dim": 160, "n_layers": 2, "n_heads": 5, "ffn_dim": 160},
    {"vocab_size": 256, "dim": 64, "n_layers": 5, "n_heads": 4, "n_kv_heads": 1, "ffn_dim": 96},
    # a large vocabulary (Llama 3's shape): the embedding and the head outgrow a block and get units of their own
    {"vocab_size": 8192, "dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_dim": 128},
)


# Models only the grader builds: the student's install does not have them.
GRADER_CONFIGS = (
    {"vocab_size": 1000, "dim": 128, "n_layers": 4, "n_heads": 8, "ffn_dim": 512},
    {"vocab_size": 320, "dim": 48, "n_layers": 6, "n_heads": 3, "n_kv_heads": 1},
    {"vocab_size": 128, "dim": 200, "n_layers": 2, "n_heads": 5, "ffn_dim": 64},
    {"vocab_size": 12000, "dim": 48, "n_layers": 3, "n_heads": 3, "ffn_dim": 96},  # embedding and head > a block
)

question(
    "lesson3.min_num_params",
    asks=Asks.REASONING,
    points=2,
    probes=[{"model": {"$model": config}} for config in UNSEEN_CONFIGS],
    grader_probes=[{"model": {"$model": config}} for config in GRADER_CONFIGS],
    output_check=exercises.policy_units,
    hint={
        "en": "The policy wraps a child first when the child reaches min_num_params, then the parent with what "
        "is left. Which parts of a block must all stay below it, and what must reach it? Compute it from the "
        "model you are given: other models have other sizes, and not always the same largest part.",
        "ro": "Politica împachetează întâi un copil care ajunge la min_num_params, apoi părintele cu ce a rămas. "
        "Ce părți ale unui bloc trebuie să rămână toate sub valoare și ce trebuie s-o atingă? Calculați-o din "
        "modelul primit: alte modele au alte dimensiuni și nu mereu aceeași parte cea mai mare.",
    },
)

_BF16 = {
    "en": "2 bytes per element is bf16; these runs gather fp32 parameters.",
    "ro": "2 octeți pe element înseamnă bf16; aceste rulări colectează parametri fp32.",
}


def _none_measured(run: RunRecord) -> tuple[dict[str, Any], float]:
    v = run.values[0]["none"]
    return {"n_params": sum(v["units"].values())}, v["most_gathered"]  # the padded flat parameter


@question(
    "lesson3.none_gathered",
    asks=Asks.ARITHMETIC,
    formula=True,
    at_run=_none_measured,
    hint={
        "en": "With one unit, what part of the model is gathered while it computes? Count it in fp32 bytes.",
        "ro": "Cu o singură unitate, ce parte a modelului este colectată cât timp calculează? Numărați-o în octeți fp32.",
    },
    mistakes={lambda n_params: 2 * n_params: _BF16},
)
def _none_gathered(n_params: int) -> float:
    return 4 * n_params


question(
    "lesson3.wrap_units",
    asks=Asks.MECHANISM,
    points=3,
    takes="run",
    observe=exercises.wrap_units,
    hint={
        "en": "A unit is what FSDP gathers at once. The exercise wants one unit per TransformerBlock, and the "
        "embeddings, the final norm and the output left in the root.",
        "ro": "O unitate este ce colectează FSDP deodată. Exercițiul cere câte o unitate pentru fiecare "
        "TransformerBlock, iar încorporările, normalizarea finală și ieșirea lăsate în rădăcină.",
    },
    hints=[
        {
            "en": "FSDP1 asks your policy two questions: with recurse=True, whether to look inside a module (always "
            "yes), and with recurse=False, whether to wrap this module (only a TransformerBlock). FSDP2 has no "
            "policy: fully_shard each block, then the root.",
            "ro": "FSDP1 pune politicii voastre două întrebări: cu recurse=True, dacă să intre într-un modul (mereu "
            "da), și cu recurse=False, dacă să împacheteze acest modul (doar un TransformerBlock). FSDP2 nu are "
            "politică: aplicați fully_shard fiecărui bloc, apoi rădăcinii.",
        },
        {
            "en": "FSDP2: fully_shard must reach every block of model.layers first, with the mesh, and the root "
            "model last; a root sharded first takes the blocks' parameters into its own unit.",
            "ro": "FSDP2: fully_shard trebuie să ajungă întâi la fiecare bloc din model.layers, cu mesh-ul, și la "
            "modelul rădăcină la urmă; o rădăcină fragmentată prima ia parametrii blocurilor în propria unitate.",
        },
    ],
)
