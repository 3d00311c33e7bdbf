"""Lesson 8's exercises on the ranks (overlap by hand), judged twice, as every exercise on the ranks is.

In the notebook (``observe=``), from what labkit observed the cell's ranks do: the gradients of the
student's model against DDP's, ZeRO-1's parameters against ``ZeroRedundancyOptimizer``'s, and where in the
trace the student's all-reduces were issued (before the mark the cell makes when ``backward()`` has
returned, or after it).

By the grader (``labkit.grading.rerun``, one line each in ``rerun_exercises.EXERCISES``), on ranks of its
own: a model and batches from a seed, two or three steps, and the collectives of each step counted by the
harness around ``backward()`` and around the student's ``finish()``: an all-reduce launched from a hook is
counted inside ``backward()``, asynchronous; one launched after it, in ``finish()``. The reference gradients
and parameters are computed here, in the grader's process, from the seed alone.

``rerun_exercises`` imports this module for its table; the values both share are in ``rerun_values``.
"""

from __future__ import annotations

import math
import random
from typing import Any

from labkit.grading import rerun_values as rv
from labkit.grading.compare import Verdict
from labkit.grading.exercises import each_rank
from labkit.ranks.fingerprint import close

STEPS = 2  # backward passes per rank in the hook exercises: the second finds what the first left behind
ZERO_STEPS = 3  # optimizer steps in the ZeRO-1 exercise: the momentum matters from the second on
# the grader's optimizer, the same on its ranks and in its reference: SGD with momentum, whose step scales with
# the gradient (Adam's does not: m / sqrt(v) is the same for a sum as for a mean, so a sum would pass unseen)
LR, MOMENTUM = 0.05, 0.9
REL = 1e-4


_fail = rv.fail


def _global(obs: dict[str, Any], name: str, kind: str) -> dict[str, Any] | None:
    """What labkit's summary says the cell's variable ``name`` held at its end (a "module" or a "tensor")."""
    entry = obs.get("globals", {}).get(name)
    return entry.get(kind) if isinstance(entry, dict) else None


# -- the grader's inputs ------------------------------------------------------------------------------------


def hooks_inputs(rng: random.Random, world: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An MLP of 5 or 6 layers (10 or 12 parameter tensors) and, per rank, ``STEPS`` batches of its own."""
    widths = [rng.randint(6, 20) for _ in range(rng.randint(6, 7))]
    total = 4 * sum(a * b + b for a, b in zip(widths, widths[1:]))
    shared = {
        "widths": widths,
        "model_seed": rng.randint(0, 2**31 - 1),
        "bucket_bytes": total // 3 + rng.randint(0, 64),
    }
    batch = rng.randint(3, 6)
    per_rank = [{"batches": [_batch(rng, widths, batch) for _ in range(STEPS)]} for _ in range(world)]
    return shared, per_rank


def zero1_inputs(rng: random.Random, world: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An MLP whose parameter count is not a multiple of the world (its shards need padding), ``ZERO_STEPS``
    batches per rank."""
    while True:
        widths = [rng.randint(4, 14) for _ in range(rng.randint(3, 4))]
        if sum(a * b + b for a, b in zip(widths, widths[1:])) % world:
            break
    shared = {"widths": widths, "model_seed": rng.randint(0, 2**31 - 1)}
    batch = rng.randint(3, 6)
    per_rank = [{"batches": [_batch(rng, widths, batch) for _ in range(ZERO_STEPS)]} for _ in range(world)]
    return shared, per_rank


def _batch(rng: random.Random, widths: list[int], batch: int) -> dict[str, Any]:
    return {"x": [rv.floats(rng, widths[0]) for _ in range(batch)], "y": [rv.floats(rng, widths[-1]) for _ in range(batch)]}  # fmt: skip


# -- on the grader's ranks ----------------------------------------------------------------------------------


def _loss(model: Any, batch: dict[str, Any]) -> Any:
    import torch

    return torch.nn.functional.mse_loss(model(rv.tensor(batch["x"])), rv.tensor(batch["y"]))


def _calls(counter: Any) -> list[dict[str, Any]]:
    return [{"op": c.op, "bytes": c.bytes, "blocking": c.blocking} for c in counter.calls]


def _hooked_steps(model: Any, finish: Any, mine: dict[str, Any]) -> dict[str, Any]:
    """Each step: backward with the collectives it issued counted, then ``finish()`` with its own."""
    from labkit.ranks import comm

    steps = []
    for batch in mine["batches"]:
        model.zero_grad(set_to_none=True)
        loss = _loss(model, batch)
        with comm.count(send=False) as during:
            loss.backward()
        with comm.count(send=False) as after:
            finish()
        grads = [rv.as_list(p.grad) if p.grad is not None else None for p in model.parameters()]
        steps.append({"grads": grads, "during": _calls(during), "after": _calls(after)})
    return {"steps": steps}


def hooks_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    model = rv.mlp(shared["widths"], shared["model_seed"])
    return _hooked_steps(model, ns["overlap_gradients"](model), mine)


def buckets_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    model = rv.mlp(shared["widths"], shared["model_seed"])
    return _hooked_steps(model, ns["bucketed_gradients"](model, shared["bucket_bytes"]), mine)


def zero1_on_rank(ns: dict[str, Any], shared: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    import torch

    model = rv.mlp(shared["widths"], shared["model_seed"])
    shard = ns["flat_shard"](model)
    optimizer = torch.optim.SGD([shard], lr=LR, momentum=MOMENTUM)
    for batch in mine["batches"]:
        model.zero_grad(set_to_none=True)
        _loss(model, batch).backward()
        ns["zero1_step"](model, shard, optimizer)
    state = sum(v.numel() for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim())
    return {"params": [rv.as_list(p) for p in model.parameters()], "state": int(state)}


# -- the grader's verdicts ------------------------------------------------------------------------------------


def _mean_grads(shared: dict[str, Any], inputs: list[dict[str, Any]], step: int) -> list[list[float]]:
    model = rv.mlp(shared["widths"], shared["model_seed"])
    per_rank = [rv.grads(model, i["batches"][step]["x"], i["batches"][step]["y"]) for i in inputs]
    return [[sum(col) / len(inputs) for col in zip(*(g[k] for g in per_rank))] for k in range(len(per_rank[0]))]


def _overlapped(r: int, k: int, step: dict[str, Any], total: int) -> Verdict | None:
    """Every gradient's bytes all-reduced inside backward, asynchronously, and nothing left for ``finish()``."""
    during = [c for c in step.get("during") or [] if c.get("op") == "all_reduce"]
    late = [c for c in step.get("after") or [] if c.get("op") == "all_reduce"]
    if not during:
        return _fail("overlap.none", rank=r, step=k + 1)
    if any(c.get("blocking") for c in during):
        return _fail("overlap.blocking", rank=r, step=k + 1)
    inside = sum(int(c.get("bytes") or 0) for c in during)
    if late or inside != total:
        return _fail("overlap.late", rank=r, step=k + 1, inside=inside, total=total)
    return None


def _hooks_common(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any], count: Any) -> Verdict:
    world = len(inputs)
    failed = rv.failed_first(result, world)
    if failed:
        return failed
    model = rv.mlp(shared["widths"], shared["model_seed"])
    names = [name for name, _ in model.named_parameters()]
    total = 4 * sum(p.numel() for p in model.parameters())
    wants = [_mean_grads(shared, inputs, k) for k in range(STEPS)]
    for r in range(world):
        steps = (rv.rank_of(result["outputs"], r) or {}).get("steps") or []
        if len(steps) != STEPS:
            return _fail("rerun.no_output", rank=r)
        for k, step in enumerate(steps):
            bad = _overlapped(r, k, step, total) or count(r, k, step, len(names))
            if bad:
                return bad
            got = step.get("grads") or []
            for i, name in enumerate(names):
                mine = got[i] if i < len(got) else None
                if rv.near(mine, wants[k][i]):
                    continue
                if rv.near(mine, [x * world for x in wants[k][i]]):
                    return _fail("not_mean", rank=r, name=f"{name}.grad")
                return _fail("overlap.grads", rank=r, step=k + 1, param=name)
    return Verdict(True)


def hooks_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    return _hooks_common(shared, inputs, result, lambda r, k, step, n: None)


def buckets_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    """Buckets: fewer all-reduces than gradients, and no more than twice the buckets that bucket_bytes makes
    (a bucket closed before it would overflow, or once it is full: both are buckets)."""
    model = rv.mlp(shared["widths"], shared["model_seed"])
    total = 4 * sum(p.numel() for p in model.parameters())
    most = 2 * math.ceil(total / shared["bucket_bytes"])

    def count(r: int, k: int, step: dict[str, Any], n: int) -> Verdict | None:
        calls = sum(1 for c in step.get("during") or [] if c.get("op") == "all_reduce")
        if calls >= n or calls > most or calls < 2:
            return _fail("overlap.buckets", rank=r, got=calls, n=n, bucket=shared["bucket_bytes"], total=total)
        return None

    return _hooks_common(shared, inputs, result, count)


def zero1_judge(shared: dict[str, Any], inputs: list[dict[str, Any]], result: dict[str, Any]) -> Verdict:
    import torch

    world = len(inputs)
    failed = rv.failed_first(result, world)
    if failed:
        return failed
    bad = rv.needs(result["calls"], world, "zero1_step", {"all_reduce", "all_gather", "reduce_scatter"}, "reduce_scatter, all_gather")  # fmt: skip
    if bad:
        return bad
    model = rv.mlp(shared["widths"], shared["model_seed"])
    n = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    for k in range(ZERO_STEPS):  # the reference: the same optimizer on the whole model, the mean gradient
        model.zero_grad(set_to_none=True)
        (sum(_loss(model, i["batches"][k]) for i in inputs) / world).backward()
        optimizer.step()
    for r in range(world):
        out = rv.rank_of(result["outputs"], r) or {}
        state, most = out.get("state"), math.ceil(n / world)  # one momentum per number of the shard
        if not isinstance(state, int) or state > most:
            return _fail("zero1.state", rank=r, got=state, want=most)
        got = out.get("params") or []
        for i, (name, p) in enumerate(model.named_parameters()):
            mine = got[i] if i < len(got) else None
            if not rv.near(mine, rv.as_list(p), rel=1e-3):
                return _fail("zero1.params", rank=r, param=name, steps=ZERO_STEPS)
    return Verdict(True)


# -- in the notebook: what labkit observed on the student's own ranks ------------------------------------------


def _is_mark(e: dict[str, Any]) -> bool:
    return e.get("k") == "call" and e.get("op") == "barrier" and e.get("fn") == "<module>" and bool(e.get("direct"))


def _inside_backward(trace: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """The all-reduces the cell's own functions issued (not DDP's, not the cell's top level), split by the
    cell's marks: each step calls ``dist.barrier()`` just before the student's ``backward()`` and just after
    it, so an all-reduce between the two marks of a pair was issued while backward ran, any other after
    it (in ``finish()``). Also how many steps (pairs of marks) there were."""
    inside, outside, marks = [], [], 0
    for e in trace:
        if _is_mark(e):
            marks += 1
        elif e.get("k") == "call" and e.get("direct") and e.get("fn") != "<module>" and e.get("op") == "all_reduce":
            (inside if marks % 2 else outside).append(e)
    return inside, outside, marks // 2


def _hooked(r: int, obs: dict[str, Any], buckets: bool) -> Verdict | None:
    from labkit.wire.setting import Flavor

    mine, ddp = _global(obs, "mine", "module"), _global(obs, "ddp", "module")
    if mine is None or not mine.get("params"):
        return _fail("missing", rank=r, what="model", name="mine")
    if ddp is None or ddp.get("flavor") != Flavor.DDP or len(ddp.get("params", [])) != len(mine["params"]):
        return _fail("missing", rank=r, what="DistributedDataParallel", name="ddp")
    inside, outside, steps = _inside_backward(obs.get("trace", []))
    if not steps:
        return _fail("overlap.no_mark", rank=r)
    total = steps * 4 * sum(p["n"] for p in mine["params"])  # fp32 gradients, every step
    step = {"during": [{"op": "all_reduce", "bytes": 4 * e.get("n_in", 0), "blocking": e.get("blocking")} for e in inside],
            "after": [{"op": "all_reduce"} for e in outside]}  # fmt: skip
    bad = _overlapped(r, steps - 1, step, total)
    if bad:
        return bad
    if buckets and not 2 * steps <= len(inside) < steps * len(mine["params"]):
        return _fail("overlap.buckets_seen", rank=r, got=len(inside) // steps, n=len(mine["params"]))
    for p, q in zip(mine["params"], ddp["params"]):
        if not close(p["grad"], q.get("grad"), rel=1e-5, abs_=1e-6):
            return _fail("grads_differ", rank=r, param=p["name"])
    return None


def overlap_hooks(observations: dict[int, dict[str, Any]]) -> Verdict:
    """``overlap_gradients``: every gradient all-reduced from its hook, asynchronously, while backward ran
    (before the cell's mark), nothing all-reduced after it, and the gradients equal to DDP's."""
    return each_rank(lambda r, world, obs: _hooked(r, obs, buckets=False))(observations)


def overlap_buckets(observations: dict[int, dict[str, Any]]) -> Verdict:
    """``bucketed_gradients``: as ``overlap_hooks``, in fewer all-reduces than gradients (at least two)."""
    return each_rank(lambda r, world, obs: _hooked(r, obs, buckets=True))(observations)


def zero1_by_hand(observations: dict[int, dict[str, Any]]) -> Verdict:
    """``zero1_step``: collectives of its own, an all-gather among them (each rank needs every updated shard),
    and the flat parameters after the steps equal to ``ZeroRedundancyOptimizer``'s."""

    def check(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
        from labkit.i18n import t

        calls = [e for e in obs.get("trace", []) if e.get("k") == "call" and e.get("fn") == "zero1_step"]
        ops = {c.get("op") for c in calls}
        if "all_gather" not in ops or not ops <= {"all_gather", "reduce_scatter", "all_reduce"}:
            got = ", ".join(dict.fromkeys(c.get("op", "?") for c in calls)) or t("grading.exercise.nothing")
            where = t("grading.exercise.where.function", fn="zero1_step")
            return _fail("calls", rank=r, got=got, want="reduce_scatter, all_gather", where=where)
        mine, ref = _global(obs, "mine_flat", "tensor"), _global(obs, "ref_flat", "tensor")
        for name, value in (("mine_flat", mine), ("ref_flat", ref)):
            if value is None:
                return _fail("missing", rank=r, what="tensor", name=name)
        if not close(mine, ref, rel=1e-4, abs_=1e-5):
            return _fail("zero1.flat", rank=r)
        return None

    return each_rank(check)(observations)
