"""Lesson 9's exercise on the ranks, ``parallelize(model, mesh)``: tensor parallelism over ``mesh["tp"]`` in
every block's MLP, FSDP2 over ``mesh["dp"]``. Two judges, as for the other lessons' exercises:

- ``compose`` (the notebook's ``labkit.check``): what labkit observed on the student's ranks, the composed
  model's summary and the two losses the cell computed before training, for immediate feedback;
- ``EXERCISE`` (``labkit.grading.rerun``): the grader's own 2 × 2 mesh, a model of another shape, each rank's
  shards and the weights after one SGD step, against a plain model the grader trains here on the same batches.

Its own helpers (the model, its batches) are written here rather than imported from the table's module,
``labkit.grading.rerun_exercises``, which imports this one to build its line.
"""

from __future__ import annotations

import random
from typing import Any

from labkit.grading.compare import Verdict
from labkit.grading.exercises import each_rank
from labkit.wire.setting import Flavor

TP = 2  # the lesson's rows: two tensor-parallel ranks
DP = 2  # the grader's columns: 4 ranks, the lesson's default mesh
LR = 0.5
MLP = ("ffn.w1.weight", "ffn.w2.weight", "ffn.w3.weight")  # the layers tensor parallelism must split
REL = 1e-4


def _fail(key: str, **fields: Any) -> Verdict:
    return Verdict(False, f"grading.exercise.{key}", fields)


def _held(obs: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The summary of the module the cell's variable ``name`` held at its end (``labkit.ranks.observe``)."""
    entry = obs.get("globals", {}).get(name)
    return entry.get("module") if isinstance(entry, dict) else None


# -- the notebook's check: what labkit observed on the student's ranks ---------------------------------


@each_rank
def compose(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
    """The cell's ``model`` is FSDP2 and holds less than a ``1/dp`` share of the plain ``reference`` (something is
    split over ``tp`` too), and the first two losses computed without gradients (the cell's: the reference's,
    then the composed model's, on the same batch) are equal."""
    model, reference = _held(obs, "model"), _held(obs, "reference")
    if model is None or reference is None:
        return _fail("missing", rank=r, what="module", name="model, reference")
    if model.get("flavor") != Flavor.FSDP2:
        return _fail("compose.not_fsdp2", rank=r)
    dp = max(world // TP, 1)
    if model.get("numel", 0) * dp >= reference.get("numel", 0):
        return _fail("compose.no_tp", rank=r, got=model.get("numel"), dp=dp, total=reference.get("numel"))
    losses = [e.get("loss") for e in obs.get("trace", []) if e.get("k") == "out" and e.get("grad") is False]
    if len(losses) < 2 or None in losses[:2]:
        return _fail("compose.losses", rank=r, got=len(losses))
    plain, yours = losses[0], losses[1]
    if abs(plain - yours) > 1e-5 * abs(plain):
        return _fail("loss_changed", rank=r, plain=f"{plain:.6f}", yours=yours)
    return None


# -- the grader's re-run ----------------------------------------------------------------------------------


def _config(rng: random.Random) -> dict[str, Any]:
    """The course's model, 1 or 2 blocks, widths that split evenly over a 2 × 2 mesh (unlike the notebook's)."""
    dim = rng.choice([32, 48, 64])
    return {"vocab_size": rng.choice([256, 320, 384]), "dim": dim, "n_layers": rng.randint(1, 2), "n_heads": 4,
            "seq_len": 16}  # fmt: skip


def _tokens(rng: random.Random, cfg: dict[str, Any], batch: int) -> list[list[int]]:
    return [[rng.randrange(cfg["vocab_size"]) for _ in range(cfg["seq_len"] + 1)] for _ in range(batch)]


def _batch(tokens: list[list[int]]) -> tuple[Any, Any]:
    import torch

    seq = torch.tensor(tokens, dtype=torch.long)
    return seq[:, :-1], seq[:, 1:]


def _model(shared: dict[str, Any]) -> Any:
    import torch

    from labkit.models import ModelConfig, TransformerLM

    torch.manual_seed(shared["model_seed"])
    return TransformerLM(ModelConfig(**shared["cfg"]))


def _mine(outputs: Any, r: int) -> Any:
    """Rank ``r``'s output, whether the keys are ints or (after JSON) strings."""
    return outputs.get(r, outputs.get(str(r))) if isinstance(outputs, dict) else None


def _inputs(rng: random.Random, world: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A model of 1 to 2 blocks whose widths split evenly over the mesh; one batch per row of the mesh, given to
    both of its ranks (tensor parallelism needs the same input on the ranks of a row)."""
    cfg = _config(rng)
    shared = {"cfg": cfg, "model_seed": rng.randint(0, 2**31 - 1), "dp": world // TP, "tp": TP}
    rows = [_tokens(rng, cfg, rng.randint(2, 3)) for _ in range(world // TP)]
    return shared, [{"batch": rows[r // TP]} for r in range(world)]


def _fingerprint(values: Any) -> list[float]:
    """Two numbers that change with any element of a tensor: its sum, and its sum weighted by position."""
    import torch

    flat = values.detach().to(torch.float64).reshape(-1)
    weights = torch.cos(torch.arange(flat.numel(), dtype=torch.float64))
    return [float(flat.sum()), float((flat * weights).sum())]


def _on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    from labkit.ranks import rank

    mesh = init_device_mesh(rank.device().type, (shared["dp"], shared["tp"]), mesh_dim_names=("dp", "tp"))
    model = _model(shared).to(rank.device())
    returned = ns["parallelize"](model, mesh)
    model = returned if isinstance(returned, torch.nn.Module) else model
    loss = model(*_batch(mine["batch"]))
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=LR).step()
    local, after = {}, {}
    for name, p in model.named_parameters():  # the same order on every rank: full_tensor() is a collective
        local[name] = int(p.to_local().numel()) if isinstance(p, DTensor) else int(p.numel())
        after[name] = _fingerprint(p.full_tensor() if isinstance(p, DTensor) else p)
    return {"loss": float(loss), "local": local, "after": after}


def _judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    import torch

    world = len(inputs)
    for r in range(world):
        if not isinstance(_mine(result["outputs"], r), dict):
            return _fail("rerun.no_output", rank=r)
    dp, tp = shared["dp"], shared["tp"]
    model = _model(shared)
    rows = [inputs[i * tp]["batch"] for i in range(dp)]
    losses = [model(*_batch(b)) for b in rows]
    (sum(losses) / dp).backward()  # FSDP averages over the rows; the ranks of a row hold one gradient between them
    torch.optim.SGD(model.parameters(), lr=LR).step()
    sizes = {name: p.numel() for name, p in model.named_parameters()}
    want_after = {name: _fingerprint(p) for name, p in model.named_parameters()}
    for r in range(world):
        out = _mine(result["outputs"], r)
        bad = _shards(r, out.get("local") or {}, sizes, dp, tp)
        if bad:
            return bad
        want = float(losses[r // tp].detach())
        yours = out.get("loss")
        if not isinstance(yours, float) or abs(yours - want) > 1e-5 * abs(want):
            return _fail("loss_changed", rank=r, plain=f"{want:.6f}", yours=yours)
        for name, fingerprint in want_after.items():
            got = (out.get("after") or {}).get(name)
            scale = max(abs(x) for x in fingerprint) or 1.0
            if not isinstance(got, list) or any(abs(a - b) > REL * scale for a, b in zip(got, fingerprint)):
                return _fail("compose.step", rank=r, name=name)
    return Verdict(True)


def _shards(r: int, local: dict[str, int], sizes: dict[str, int], dp: int, tp: int) -> Verdict | None:
    """Each parameter split over ``dp`` (FSDP), the MLP's three over ``tp`` too; others may be, or not."""
    for name, total in sizes.items():
        got = local.get(name)
        split = total // (dp * tp)
        if name.endswith(MLP) and got != split:
            return _fail("compose.tp_missing", rank=r, got=got, total=total, name=name, want=split)
        if got not in (total // dp, split):
            return _fail("compose.dp_missing", rank=r, got=got, total=total, name=name, want=total // dp)
    return None


def _given(shared: dict[str, Any]) -> dict[str, Any]:
    """What the exercise cell defines before the student's function: its ``cfg``."""
    from labkit.models import ModelConfig

    return {"cfg": ModelConfig(**shared["cfg"])}


# the table's line: Exercise(*ARGS, fsdp=True) (its functions, world size, inputs, rank's part, verdict, names given)
ARGS = (("parallelize",), DP * TP, _inputs, _on_rank, _judge, _given)
