"""Lesson 9's exercise on the ranks, ``parallelize(model, mesh)``: tensor parallelism over ``mesh["tp"]`` in
every block's MLP, FSDP2 over ``mesh["dp"]``. Two judges, as for the other lessons' exercises:

- ``compose`` (the notebook's ``labkit.check``): what labkit observed on the student's ranks, the composed
  model's summary and the two losses the cell computed before training, for immediate feedback;
- ``EXERCISE`` (``labkit.grading.rerun``): the grader's own 2 × 2 mesh, a model of another shape, each rank's
  shards and the weights after one SGD step, against a plain model the grader trains here on the same batches.

Its verdicts' messages are registered here (``catalog``), beside the exercise that gives them.
"""

from __future__ import annotations

import random
from typing import Any

from labkit.grading.compare import Verdict
from labkit.grading.exercises import _global, each_rank
from labkit.i18n import catalog
from labkit.wire.setting import Flavor

TP = 2  # the lesson's rows: two tensor-parallel ranks
DP = 2  # the grader's columns: 4 ranks, the lesson's default mesh
LR = 0.5
MLP = ("ffn.w1.weight", "ffn.w2.weight", "ffn.w3.weight")  # the layers tensor parallelism must split
REL = 1e-4

catalog(
    {
        "grading.exercise.compose.not_fsdp2": {
            "en": "rank {rank}: the model your function returned is not sharded by FSDP2 (fully_shard) over mesh['dp']",
            "ro": "rangul {rank}: modelul întors de funcția voastră nu este fragmentat de FSDP2 (fully_shard) pe "
            "mesh['dp']",
        },
        "grading.exercise.compose.tp_missing": {
            "en": "rank {rank} holds {got} of the {total} elements of {name}: tensor parallelism over mesh['tp'] "
            "should leave it {want}",
            "ro": "rangul {rank} ține {got} din cele {total} elemente ale lui {name}: paralelismul tensorial pe "
            "mesh['tp'] ar trebui să-i lase {want}",
        },
        "grading.exercise.compose.dp_missing": {
            "en": "rank {rank} holds {got} of the {total} elements of {name}: FSDP over mesh['dp'] should leave it "
            "{want}",
            "ro": "rangul {rank} ține {got} din cele {total} elemente ale lui {name}: FSDP pe mesh['dp'] ar trebui "
            "să-i lase {want}",
        },
        "grading.exercise.compose.no_tp": {
            "en": "rank {rank}: the composed model holds {got} elements, a 1/{dp} share of the plain model's "
            "{total}: nothing is split over mesh['tp'] on top of FSDP",
            "ro": "rangul {rank}: modelul compus ține {got} elemente, o parte de 1/{dp} din cele {total} ale "
            "modelului obișnuit: nimic nu este împărțit pe mesh['tp'] în plus față de FSDP",
        },
        "grading.exercise.compose.losses": {
            "en": "rank {rank}: labkit saw {got} losses computed without gradients before training; the cell "
            "computes two, the plain model's and yours, on the same batch",
            "ro": "rangul {rank}: labkit a văzut {got} pierderi calculate fără gradienți înainte de antrenare; "
            "celula calculează două, a modelului obișnuit și a voastră, pe același lot",
        },
        "grading.exercise.compose.step": {
            "en": "rank {rank}: after one step, {name} differs from a plain model trained on every replica's batch "
            "(the gradients must be averaged over mesh['dp'] and complete over mesh['tp'])",
            "ro": "rangul {rank}: după un pas, {name} diferă de un model obișnuit antrenat pe loturile tuturor "
            "replicilor (gradienții trebuie mediați pe mesh['dp'] și compleți pe mesh['tp'])",
        },
    }
)


def _table() -> Any:
    """``labkit.grading.rerun_exercises``, whose table holds this exercise: imported when a function runs, not at
    import time (the table imports this module to build its line)."""
    from labkit.grading import rerun_exercises

    return rerun_exercises


def _fail(key: str, **fields: Any) -> Verdict:
    return Verdict(False, f"grading.exercise.compose.{key}", fields)


# -- the notebook's check: what labkit observed on the student's ranks ---------------------------------


@each_rank
def compose(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
    """The cell's ``model`` is FSDP2 and holds less than a ``1/dp`` share of the plain ``reference`` (something is
    split over ``tp`` too), and the first two losses computed without gradients (the cell's: the reference's,
    then the composed model's, on the same batch) are equal."""
    model, reference = _global(obs, "model", "module"), _global(obs, "reference", "module")
    if model is None or reference is None:
        return Verdict(False, "grading.exercise.missing", {"rank": r, "what": "module", "name": "model, reference"})
    if model.get("flavor") != Flavor.FSDP2:
        return _fail("not_fsdp2", rank=r)
    dp = max(world // TP, 1)
    if model.get("numel", 0) * dp >= reference.get("numel", 0):
        return _fail("no_tp", rank=r, got=model.get("numel"), dp=dp, total=reference.get("numel"))
    losses = [e.get("loss") for e in obs.get("trace", []) if e.get("k") == "out" and e.get("grad") is False]
    if len(losses) < 2 or None in losses[:2]:
        return _fail("losses", rank=r, got=len(losses))
    plain, yours = losses[0], losses[1]
    if abs(plain - yours) > 1e-5 * abs(plain):
        return Verdict(False, "grading.exercise.loss_changed", {"rank": r, "plain": f"{plain:.6f}", "yours": yours})
    return None


# -- the grader's re-run ----------------------------------------------------------------------------------


def _inputs(rng: random.Random, world: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A model of 1 to 2 blocks whose widths split evenly over the mesh; one batch per row of the mesh, given to
    both of its ranks (tensor parallelism needs the same input on the ranks of a row)."""
    table = _table()
    cfg = table._config(rng, (1, 2))
    shared = {"cfg": cfg, "model_seed": rng.randint(0, 2**31 - 1), "dp": world // TP, "tp": TP}
    rows = [table._tokens(rng, cfg, rng.randint(2, 3)) for _ in range(world // TP)]
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
    table = _table()
    model = table._model(shared).to(rank.device())
    returned = ns["parallelize"](model, mesh)
    model = returned if isinstance(returned, torch.nn.Module) else model
    loss = model(*table._batch(mine["batch"]))
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=LR).step()
    local, after = {}, {}
    for name, p in model.named_parameters():  # the same order on every rank: full_tensor() is a collective
        local[name] = int(p.to_local().numel()) if isinstance(p, DTensor) else int(p.numel())
        after[name] = _fingerprint(p.full_tensor() if isinstance(p, DTensor) else p)
    return {"loss": float(loss), "local": local, "after": after}


def _judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    import torch

    table, world = _table(), len(inputs)
    failed = table._failed_first(result, world)
    if failed:
        return failed
    dp, tp = shared["dp"], shared["tp"]
    model = table._model(shared)
    rows = [inputs[i * tp]["batch"] for i in range(dp)]
    losses = [model(*table._batch(b)) for b in rows]
    (sum(losses) / dp).backward()  # FSDP averages over the rows; the ranks of a row hold one gradient between them
    torch.optim.SGD(model.parameters(), lr=LR).step()
    sizes = {name: p.numel() for name, p in model.named_parameters()}
    want_after = {name: _fingerprint(p) for name, p in model.named_parameters()}
    for r in range(world):
        out = table._rank(result["outputs"], r)
        bad = _shards(r, out.get("local") or {}, sizes, dp, tp)
        if bad:
            return bad
        want = float(losses[r // tp].detach())
        yours = out.get("loss")
        if not isinstance(yours, float) or abs(yours - want) > 1e-5 * abs(want):
            return Verdict(False, "grading.exercise.loss_changed", {"rank": r, "plain": f"{want:.6f}", "yours": yours})
        for name, fingerprint in want_after.items():
            got = (out.get("after") or {}).get(name)
            scale = max(abs(x) for x in fingerprint) or 1.0
            if not isinstance(got, list) or any(abs(a - b) > REL * scale for a, b in zip(got, fingerprint)):
                return _fail("step", rank=r, name=name)
    return Verdict(True)


def _shards(r: int, local: dict[str, int], sizes: dict[str, int], dp: int, tp: int) -> Verdict | None:
    """Each parameter split over ``dp`` (FSDP), the MLP's three over ``tp`` too; others may be, or not."""
    for name, total in sizes.items():
        got = local.get(name)
        split = total // (dp * tp)
        if name.endswith(MLP) and got != split:
            return _fail("tp_missing", rank=r, got=got, total=total, name=name, want=split)
        if got not in (total // dp, split):
            return _fail("dp_missing", rank=r, got=got, total=total, name=name, want=total // dp)
    return None


def _given(shared: dict[str, Any]) -> dict[str, Any]:
    return _table()._given_cfg(shared)


# the table's line: Exercise(*ARGS, fsdp=True) (its functions, world size, inputs, rank's part, verdict, names given)
ARGS = (("parallelize",), DP * TP, _inputs, _on_rank, _judge, _given)
