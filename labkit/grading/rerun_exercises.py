"""The exercises on the ranks as the grader re-runs them (``labkit.grading.rerun``): each one's functions, world
size, inputs from a seed (values, and where it can, sizes unlike the notebook's), what a grader's rank does
with them, and the verdict, from what the grader computes here from the seed (never in the ranks)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from labkit.grading import rerun_lesson8 as _l8
from labkit.grading import rerun_lesson9 as _l9
from labkit.grading.compare import Verdict
from labkit.grading.rerun_values import as_list as _list
from labkit.grading.rerun_values import failed_first as _failed_first
from labkit.grading.rerun_values import floats as _floats
from labkit.grading.rerun_values import grads as _grads
from labkit.grading.rerun_values import mlp as _mlp
from labkit.grading.rerun_values import near as _near
from labkit.grading.rerun_values import needs as _needs
from labkit.grading.rerun_values import rank_of as _rank
from labkit.grading.rerun_values import tensor as _tensor
from labkit.wire.setting import Flavor


def _fail(key: str, **fields: Any) -> Verdict:
    return Verdict(False, f"grading.exercise.{key}", fields)


@dataclass(frozen=True)
class Exercise:
    """One exercise's re-run: the student's functions it calls, on how many ranks, with what."""

    functions: tuple[str, ...]
    world: int
    inputs: Callable[[random.Random, int], tuple[dict[str, Any], list[dict[str, Any]]]]  # -> (shared, per rank)
    on_rank: Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], dict[str, Any]]  # (ns, shared, mine) -> out
    judge: Callable[[dict[str, Any], list[dict[str, Any]], dict[str, Any]], Verdict]  # (shared, inputs, result)
    given: Callable[[dict[str, Any]], dict[str, Any]] = lambda shared: {}  # names the cell defines, as it does
    fsdp: bool = False  # FSDP's ranks: forked from labkit's prefork server, which has FSDP imported already


# -- lesson 0: a mean over the ranks ------------------------------------------------------------------------


def _mean_inputs(rng: random.Random, world: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    n = rng.randint(5, 13)
    return {"n": n}, [{"mine": _floats(rng, n)} for _ in range(world)]


def _mean_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    return {"mean": _list(ns["mean_of"](_tensor(mine["mine"])))}


def _mean_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    world = len(inputs)
    bad = _needs(result["calls"], world, "mean_of", {"all_reduce", "all_gather", "reduce_scatter"}, "all_reduce")
    if bad:
        return bad
    total = [sum(col) for col in zip(*(i["mine"] for i in inputs))]
    for r in range(world):
        got = (_rank(result["outputs"], r) or {}).get("mean")
        if _near(got, [x / world for x in total]):
            continue
        return _fail("not_mean" if _near(got, total) else "wrong_values", rank=r, name="mean_of(mine)")
    return Verdict(True)


# -- lesson 1: DDP's averaging, by hand -----------------------------------------------------------------


def _ddp_inputs(rng: random.Random, world: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    widths = [rng.randint(4, 12) for _ in range(rng.randint(3, 4))]
    batch = rng.randint(3, 6)
    shared = {"widths": widths, "model_seed": rng.randint(0, 2**31 - 1)}
    per_rank = [
        {
            "x": [_floats(rng, widths[0]) for _ in range(batch)],
            "y": [_floats(rng, widths[-1]) for _ in range(batch)],
        }
        for _ in range(world)
    ]
    return shared, per_rank


def _ddp_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    import torch

    model = _mlp(shared["widths"], shared["model_seed"])
    torch.nn.functional.mse_loss(model(_tensor(mine["x"])), _tensor(mine["y"])).backward()
    ns["average_gradients"](model)
    return {"grads": [_list(p.grad) if p.grad is not None else None for p in model.parameters()]}


def _ddp_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    world = len(inputs)
    bad = _needs(result["calls"], world, "average_gradients", {"all_reduce", "all_gather", "reduce_scatter"}, "all_reduce")  # fmt: skip
    if bad:
        return bad
    model = _mlp(shared["widths"], shared["model_seed"])
    per_rank = [_grads(model, i["x"], i["y"]) for i in inputs]
    names = [name for name, _ in model.named_parameters()]
    for r in range(world):
        got = (_rank(result["outputs"], r) or {}).get("grads") or []
        for k, name in enumerate(names):
            total = [sum(col) for col in zip(*(g[k] for g in per_rank))]
            mine = got[k] if k < len(got) else None
            if _near(mine, [x / world for x in total]):
                continue
            if _near(mine, total):
                return _fail("not_mean", rank=r, name=f"{name}.grad")
            return _fail("grads_differ", rank=r, param=name)
    return Verdict(True)


# -- lesson 2: ZeRO-3's two collectives -------------------------------------------------------------


def _zero3_inputs(rng: random.Random, world: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    n = rng.randint(6, 40)
    return {"n": n, "world": world}, [
        {"shard": _floats(rng, n), "flat_grad": _floats(rng, world * n)} for _ in range(world)
    ]


def _zero3_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    full = ns["gather_params"](_tensor(mine["shard"]))
    grad_shard = ns["reduce_scatter_grads"](_tensor(mine["flat_grad"]))
    return {"full": _list(full), "grad_shard": _list(grad_shard)}


def _zero3_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    world, n = len(inputs), shared["n"]
    for fn, op in (("gather_params", "all_gather"), ("reduce_scatter_grads", "reduce_scatter")):
        bad = _needs(result["calls"], world, fn, {op}, op)
        if bad:
            return bad
    whole = [x for i in inputs for x in i["shard"]]
    summed = [sum(col) for col in zip(*(i["flat_grad"] for i in inputs))]
    for r in range(world):
        out = _rank(result["outputs"], r) or {}
        if not _near(out.get("full"), whole):
            return _fail("wrong_values", rank=r, name="gather_params(shard)")
        mine = summed[r * n : (r + 1) * n]
        if _near(out.get("grad_shard"), [x / world for x in mine]):
            continue
        name = "reduce_scatter_grads(flat_grad)"
        return _fail("not_mean" if _near(out.get("grad_shard"), mine) else "wrong_values", rank=r, name=name)
    return Verdict(True)


# -- the course's model, for lessons 3 to 7 ---------------------------------------------------------------


def _config(rng: random.Random, layers: tuple[int, int], seq_len: int = 16) -> dict[str, Any]:
    dim = rng.choice([32, 48, 64])
    return {"vocab_size": rng.choice([256, 320, 384]), "dim": dim, "n_layers": rng.randint(*layers), "n_heads": 4,
            "seq_len": seq_len}  # fmt: skip


def _cfg(shared: dict[str, Any]) -> Any:
    from labkit.models import ModelConfig

    return ModelConfig(**shared["cfg"])


def _tokens(rng: random.Random, cfg: dict[str, Any], batch: int) -> list[list[int]]:
    return [[rng.randrange(cfg["vocab_size"]) for _ in range(cfg["seq_len"] + 1)] for _ in range(batch)]


def _batch(tokens: list[list[int]]) -> tuple[Any, Any]:
    import torch

    seq = torch.tensor(tokens, dtype=torch.long)
    return seq[:, :-1], seq[:, 1:]


def _model(shared: dict[str, Any]) -> Any:
    import torch

    from labkit.models import TransformerLM

    torch.manual_seed(shared["model_seed"])
    return TransformerLM(_cfg(shared))


def _fsdp2(model: Any, prepare: Callable[[Any], None] = lambda m: None, **root: Any) -> Any:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from labkit.ranks import rank

    mesh = init_device_mesh(rank.device().type, (rank.world_size(),))
    for block in model.layers:
        prepare(block)
        fully_shard(block, mesh=mesh, **{k: v for k, v in root.items() if k != "reshard_after_forward"})
    fully_shard(model, mesh=mesh, **root)
    return model


def _given_world(shared: dict[str, Any]) -> dict[str, Any]:
    return {"world": shared["world"]}


def _given_cfg(shared: dict[str, Any]) -> dict[str, Any]:
    return {"cfg": _cfg(shared)}


def _model_inputs(layers: tuple[int, int], batch: int = 0, micro: tuple[int, int] = (0, 0)) -> Callable[..., Any]:
    def inputs(rng: random.Random, world: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        cfg = _config(rng, layers)
        shared = {"cfg": cfg, "model_seed": rng.randint(0, 2**31 - 1), "micro": rng.randint(*micro) if micro[1] else 0}
        per_rank = []
        for _ in range(world):
            mine: dict[str, Any] = {"batch": _tokens(rng, cfg, batch)} if batch else {}
            if shared["micro"]:
                mine["micro"] = [_tokens(rng, cfg, 2) for _ in range(shared["micro"])]
                mine["probe"] = _tokens(rng, cfg, 2)
            per_rank.append(mine)
        return shared, per_rank

    return inputs


# -- lesson 3: units, two ways ---------------------------------------------------------------------------


def _units_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FullyShardedDataParallel

    from labkit.ranks import rank
    from labkit.ranks.fingerprint import module

    fsdp1 = FullyShardedDataParallel(_model(shared), auto_wrap_policy=ns["my_policy"], device_id=rank.device())
    fsdp2 = _model(shared).to(rank.device())
    ns["shard_per_block"](fsdp2, init_device_mesh(rank.device().type, (rank.world_size(),)))
    keep = ("flavor", "units", "param_bytes", "blocks", "fsdp_modules")
    pairs = ((Flavor.FSDP1, fsdp1), (Flavor.FSDP2, fsdp2))
    return {str(name): {k: v for k, v in module(m).items() if k in keep} for name, m in pairs}


def _units_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    world = len(inputs)
    failed = _failed_first(result, world)
    if failed:
        return failed
    blocks = [f"layers.{i}" for i in range(shared["cfg"]["n_layers"])]
    want = {"root", *blocks}
    for r in range(world):
        out = _rank(result["outputs"], r)
        for api, name in (("FSDP1", Flavor.FSDP1), ("FSDP2", Flavor.FSDP2)):
            m = out.get(name) or {}
            if m.get("flavor") != name:
                return _fail("missing", rank=r, what=api, name=name)
            units = m.get("units") or {}
            if set(units) != want:
                return _fail("units", rank=r, api=api, got=", ".join(sorted(units)) or "-")
            if m.get("param_bytes") != 4 * sum(units.values()) // world:
                return _fail("not_sharded", rank=r, api=api, got=m.get("param_bytes"), n=world)
        got = set(out[Flavor.FSDP2].get("fsdp_modules") or [])
        if got != want:
            return _fail("units", rank=r, api="FSDP2", got=", ".join(sorted(got)) or "-")
    return Verdict(True)


# -- lesson 4: forward prefetch ------------------------------------------------------------------------


def _prefetch_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    from labkit.ranks.fingerprint import fsdp2_prefetch

    model = _fsdp2(_model(shared))
    ns["set_forward_prefetch"](model)
    model(*_batch(mine["batch"])).backward()
    return {"prefetch": fsdp2_prefetch(model)}


def _prefetch_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    from labkit.grading.exercises import gathered_at_block_start, prefetch_verdict

    world = len(inputs)
    failed = _failed_first(result, world)
    if failed:
        return failed
    blocks = [f"layers.{i}" for i in range(shared["cfg"]["n_layers"])]
    for r in range(world):
        trace = _rank(result["calls"], r) or []
        counts = gathered_at_block_start(trace)
        bad = prefetch_verdict(r, blocks, _rank(result["outputs"], r).get("prefetch") or {}, counts)
        if bad:
            return bad
    return Verdict(True)


# -- lesson 5: a precision policy -------------------------------------------------------------------------


def _precision_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    model = _fsdp2(_model(shared), mp_policy=ns["my_policy"]())
    model(*_batch(mine["batch"])).backward()
    return {"done": True}


def _precision_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    from labkit.i18n import t

    world = len(inputs)
    failed = _failed_first(result, world)
    if failed:
        return failed
    for r in range(world):
        calls = [c for c in _rank(result["calls"], r) or [] if c.get("k") == "call"]
        gathers = {c.get("dtype", "") for c in calls if c.get("op") == "all_gather"}
        scatters = {c.get("dtype", "") for c in calls if c.get("op") == "reduce_scatter"}
        wanted = (
            ("all_gather", bool(gathers) and gathers <= {"bfloat16", "float16"}, gathers, "grading.exercise.dtype.half"),
            ("reduce_scatter", scatters == {"float32"}, scatters, "grading.exercise.dtype.fp32"),
        )  # fmt: skip
        for op, ok, dtypes, want in wanted:
            if not ok:
                return _fail("dtype", rank=r, op=op, dtype=", ".join(sorted(dtypes)) or "-", want=t(want))
    return Verdict(True)


# -- lesson 6: accumulation without syncing ---------------------------------------------------------------


LR = 0.5


def _accumulate_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    import torch

    from labkit.ranks import comm

    model = _fsdp2(_model(shared))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    with comm.count(send=False) as counted:
        ns["accumulate"](model, [_batch(b) for b in mine["micro"]])
    optimizer.step()
    with torch.no_grad():
        loss = float(model(*_batch(mine["probe"])))
    return {"reduce_scatters": counted.totals().get("reduce_scatter", {}).get("calls", 0), "loss": loss}


def _accumulate_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    import torch

    world, micro = len(inputs), shared["micro"]
    failed = _failed_first(result, world)
    if failed:
        return failed
    units = shared["cfg"]["n_layers"] + 1
    model = _model(shared)
    # FSDP2 averages over the ranks what each rank's backward summed over its micro-batches
    total = sum(model(*_batch(b)) / micro for i in inputs for b in i["micro"]) / world
    total.backward()
    torch.optim.SGD(model.parameters(), lr=LR).step()
    for r in range(world):
        out = _rank(result["outputs"], r)
        if out.get("reduce_scatters") != units:
            return _fail("accumulate_sync", rank=r, got=out.get("reduce_scatters"), want=units)
        with torch.no_grad():
            every = float(model(*_batch(inputs[r]["probe"])))
        yours = out.get("loss")
        if not isinstance(yours, float) or abs(yours - every) > 1e-4 * abs(every):
            return _fail("accumulated_grads", rank=r, every=f"{every:.6f}", yours=yours)
    return Verdict(True)


# -- lesson 7: a memory budget ----------------------------------------------------------------------------


BUDGET = 0.6  # of the activations at the peak without checkpointing: the lesson's budget


def _budget_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    from labkit.ranks import memtrack

    def at_peak(prepare: Callable[[Any], None]) -> dict[str, Any]:
        model = _model(shared)
        prepare(model)
        model = _fsdp2(model, reshard_after_forward=False)
        tracker = memtrack.track(model, steps=[0], send=False)
        with tracker.step(0):
            loss = model(*_batch(mine["batch"]))
            loss.backward()
        peak = next(m for m in tracker.results if m["phase"] == "peak")
        return {"loss": float(loss), "activations": peak["categories"]["activations"]}

    return {"plain": at_peak(lambda model: None), "yours": at_peak(ns["fit_in_budget"])}


def _budget_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    import torch

    world = len(inputs)
    failed = _failed_first(result, world)
    if failed:
        return failed
    model = _model(shared)
    for r in range(world):
        out = _rank(result["outputs"], r)
        with torch.no_grad():
            want = float(model(*_batch(inputs[r]["batch"])))
        yours = (out.get("yours") or {}).get("loss")
        if not isinstance(yours, float) or abs(yours - want) > 1e-5 * abs(want):
            return _fail("loss_changed", rank=r, plain=f"{want:.6f}", yours=yours)
        counts: dict[Any, int] = {}
        for e in _rank(result["calls"], r) or []:
            if e.get("k") == "fwd" and e.get("m") == "TransformerBlock":
                counts[e.get("id")] = counts.get(e.get("id"), 0) + 1
        if max(counts.values(), default=0) < 2:  # no block computed again in backward: nothing was dropped
            return _fail("no_recompute", rank=r, got=1)
        plain, got = out["plain"]["activations"], out["yours"]["activations"]
        if got > BUDGET * plain:
            return _fail("over_budget", rank=r, got=got, budget=int(BUDGET * plain))
    return Verdict(True)


# fmt: off
EXERCISES: dict[str, Exercise] = {  # a table: one exercise a line
    "lesson0.mean_on_ranks": Exercise(("mean_of",), 3, _mean_inputs, _mean_on_rank, _mean_judge),
    "lesson1.ddp_by_hand": Exercise(("average_gradients",), 3, _ddp_inputs, _ddp_on_rank, _ddp_judge),
    "lesson2.mini_zero3": Exercise(("gather_params", "reduce_scatter_grads"), 3, _zero3_inputs, _zero3_on_rank, _zero3_judge, _given_world),
    "lesson3.wrap_units": Exercise(("my_policy", "shard_per_block"), 2, _model_inputs((2, 4)), _units_on_rank, _units_judge, _given_cfg, fsdp=True),
    "lesson4.forward_prefetch": Exercise(("set_forward_prefetch",), 2, _model_inputs((3, 4), batch=2), _prefetch_on_rank, _prefetch_judge, _given_cfg, fsdp=True),
    "lesson5.mixed_precision": Exercise(("my_policy",), 2, _model_inputs((2, 3), batch=2), _precision_on_rank, _precision_judge, _given_cfg, fsdp=True),
    "lesson6.accumulation": Exercise(("accumulate",), 2, _model_inputs((2, 3), micro=(2, 4)), _accumulate_on_rank, _accumulate_judge, _given_cfg, fsdp=True),
    "lesson7.checkpoint_budget": Exercise(("fit_in_budget",), 2, _model_inputs((5, 6), batch=4), _budget_on_rank, _budget_judge, _given_cfg, fsdp=True),
    "lesson8.overlap_hooks": Exercise(("overlap_gradients",), 3, _l8.hooks_inputs, _l8.hooks_on_rank, _l8.hooks_judge),
    "lesson8.bucketed": Exercise(("bucketed_gradients",), 3, _l8.hooks_inputs, _l8.buckets_on_rank, _l8.buckets_judge),
    "lesson8.zero1_by_hand": Exercise(("flat_shard", "zero1_step"), 3, _l8.zero1_inputs, _l8.zero1_on_rank, _l8.zero1_judge),
    "lesson9.compose": Exercise(*_l9.ARGS, fsdp=True),
}
# fmt: on
