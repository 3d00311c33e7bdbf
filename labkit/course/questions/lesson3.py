"""Lesson 3's questions: wrap policies."""

from __future__ import annotations

from typing import Any

from labkit.grading.registry import question
from labkit.wire.records import RunRecord

# Models the notebook never builds: in one of them attention outweighs the feed-forward.
UNSEEN_CONFIGS = (
    {"vocab_size": 300, "dim": 96, "n_layers": 3, "n_heads": 4},
    {"vocab_size": 500, "dim": 160, "n_layers": 2, "n_heads": 5, "ffn_dim": 160},
    {"vocab_size": 256, "dim": 64, "n_layers": 5, "n_heads": 4, "n_kv_heads": 1, "ffn_dim": 96},
    # a large vocabulary (Llama 3's shape): the embedding and the head outgrow a block and get units of their own
    {"vocab_size": 8192, "dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_dim": 128},
)


def size_policy_units(model: Any, min_num_params: int) -> list[str]:
    """The units FSDP1's ``size_based_auto_wrap_policy`` makes of ``model``, found offline with
    the recursion of FSDP's ``_recursive_wrap`` (the root is always a unit)."""
    from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy

    units = ["root"]

    def policy(module: Any, recurse: bool, numel: int) -> bool:
        return size_based_auto_wrap_policy(module, recurse, numel, min_num_params=int(min_num_params))

    def wrap(name: str, module: Any, root: bool = False) -> int:
        numel = sum(p.numel() for p in module.parameters())
        if not policy(module, True, numel):
            return 0
        wrapped = sum(wrap(f"{name}.{child}".lstrip("."), m) for child, m in module.named_children())
        if not root and policy(module, False, numel - wrapped):
            units.append(name)
            return numel
        return wrapped

    wrap("", model, root=True)
    return sorted(units)


def _meta_model(config: dict[str, Any]) -> Any:
    import torch

    from labkit.models.config import ModelConfig
    from labkit.models.transformer import TransformerLM

    with torch.device("meta"):  # only the shapes: nothing is allocated
        return TransformerLM(ModelConfig(**config))


def _same_units_as_transformer(value: Any, run: RunRecord) -> bool:
    """On unseen models, the function's value makes one unit per block; and on the lesson's model,
    the run wrapped with it and FSDP made the transformer policy's units."""
    if not callable(value):
        return False
    for config in UNSEEN_CONFIGS:
        model = _meta_model(config)
        blocks = [f"layers.{i}" for i in range(len(model.layers))]
        block = sum(p.numel() for p in model.layers[0].parameters())
        own = [
            n for n in ("tok_embeddings", "output") if sum(p.numel() for p in getattr(model, n).parameters()) > block
        ]
        if size_policy_units(model, int(value(model))) != sorted(["root", *blocks, *own]):
            return False
    v = run.values[0]
    return v["size_yours"]["units"] == v["transformer"]["units"]


question(
    "lesson3.min_num_params",
    points=2,
    verify=_same_units_as_transformer,
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


def _block_measured(run: RunRecord) -> tuple[dict[str, Any], float]:
    v = run.values[0]["transformer"]
    units = dict(v["units"])
    root = units.pop("root")
    return {"root_params": root, "block_params": max(units.values())}, v["most_gathered"]


@question(
    "lesson3.block_gathered",
    points=2,
    formula=True,
    at_run=_block_measured,
    hint={
        "en": "In backward, which unit does FSDP keep from the end of forward, which block is computing, and "
        "which one has it gathered ahead? Each element is an fp32 number.",
        "ro": "În trecerea inversă, ce unitate păstrează FSDP de la sfârșitul trecerii directe, ce bloc calculează "
        "și pe care l-a colectat dinainte? Fiecare element este un număr fp32.",
    },
    mistakes={
        lambda root_params, block_params: 4 * (root_params + block_params): {
            "en": "The root and the block that computes are there, but FSDP has already gathered the next "
            "block of backward while this one computes.",
            "ro": "Rădăcina și blocul care calculează sunt acolo, dar FSDP a colectat deja următorul bloc al "
            "trecerii inverse cât timp acesta calculează.",
        },
        lambda root_params, block_params: 2 * (root_params + 2 * block_params): _BF16,
    },
)
def _block_gathered(root_params: int, block_params: int) -> float:
    return 4 * (root_params + 2 * block_params)


def _wrap_units(value: Any) -> bool:
    """Both wrappings made one unit per block plus the root, and a rank holds 1/N of the padded units."""
    n = value.nproc
    for r in range(n):
        v = value.values.get(r, {})
        if not {"blocks", "fsdp1_units", "fsdp2_units", "fsdp1_bytes", "fsdp2_bytes"} <= set(v):
            return False
        expected = {"root", *v["blocks"]}
        for api in ("fsdp1", "fsdp2"):
            units = v[f"{api}_units"]
            if set(units) != expected or v[f"{api}_bytes"] != 4 * sum(units.values()) // n:
                return False
    return True


question(
    "lesson3.wrap_units",
    points=3,
    takes="run",
    verify=_wrap_units,
    hint={
        "en": "FSDP1 calls your policy with recurse=True to ask whether to look inside a module (always), and with "
        "recurse=False to ask whether to wrap it (a TransformerBlock). FSDP2: fully_shard(block, mesh=mesh) for "
        "each block of model.layers, then fully_shard(model, mesh=mesh) for the root.",
        "ro": "FSDP1 apelează politica voastră cu recurse=True ca să afle dacă intră într-un modul (mereu) și cu "
        "recurse=False ca să afle dacă îl împachetează (un TransformerBlock). FSDP2: fully_shard(block, mesh=mesh) "
        "pentru fiecare bloc din model.layers, apoi fully_shard(model, mesh=mesh) pentru rădăcină.",
    },
)
