"""The verifiers of the exercises on the ranks: they read what labkit observed, not what the cell said.

Each takes the observations of one run (``{rank: observation}``, see ``labkit.ranks.observe``)
and returns a ``Verdict``: correct, or the first thing that is wrong, as a message that names
the mechanism (which collective, issued from which of your functions, on which tensor) and
never the code that fixes it. The notebook calls them on the observations its ``Run``
received, for immediate feedback; ``labkit grade`` calls them on the observations that reached
its own sink from the ranks, so a ``Run`` made up in the notebook, or values a cell reported
with ``rank.report``, change nothing.

The names they read (``mean``, ``mine``, ``gather_params``, ...) are those of the exercise
cells in the lessons, which the student edition keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from labkit.grading.registry import Verdict
from labkit.ranks.fingerprint import close, scaled
from labkit.wire.setting import Flavor

Observations = dict[int, dict[str, Any]]


def _fail(key: str, **fields: Any) -> Verdict:
    return Verdict(False, f"grading.exercise.{key}", fields)


def _calls(obs: dict[str, Any], fn: str | None = None, direct: bool | None = None) -> list[dict[str, Any]]:
    return [
        e
        for e in obs.get("trace", [])
        if e.get("k") == "call" and (fn is None or e.get("fn") == fn) and (direct is None or e.get("direct") == direct)
    ]


def _global(obs: dict[str, Any], name: str, kind: str) -> dict[str, Any] | None:
    entry = obs.get("globals", {}).get(name)
    return entry.get(kind) if isinstance(entry, dict) else None


def _ops(calls: list[dict[str, Any]]) -> str:
    return ", ".join(c.get("op", "?") for c in calls) or "-"


def _where(fn: str) -> dict[str, Any]:
    from labkit.i18n import t

    return {
        "where": t("grading.exercise.where.module") if fn == "<module>" else t("grading.exercise.where.function", fn=fn)
    }


def each_rank(check: Callable[[int, int, dict[str, Any]], Verdict | None]) -> Callable[[Observations], Verdict]:
    """A verifier that runs ``check(rank, world, observation)`` on every rank; the first failure wins."""

    def verify(observations: Observations) -> Verdict:
        if not observations:
            return _fail("no_observation", rank=0)
        world = len(observations)
        for r in range(world):
            obs = observations.get(r)
            if obs is None:
                return _fail("no_observation", rank=r)
            if not obs.get("ok"):
                return _fail("cell_failed", rank=r)
            verdict = check(r, world, obs)
            if verdict is not None:
                return verdict
        return Verdict(True)

    verify.__name__ = check.__name__
    verify.__qualname__ = check.__name__
    return verify


def _one(r: int, calls: list[dict[str, Any]], fn: str, op: str) -> tuple[dict[str, Any] | None, Verdict | None]:
    """The one call of ``op`` issued from ``fn``, or the verdict that says what was issued instead."""
    from labkit.i18n import t

    if len(calls) == 1 and calls[0].get("op") == op:
        return calls[0], None
    got = _ops(calls) if calls else t("grading.exercise.nothing")
    return None, _fail("calls", rank=r, got=got, want=op, **_where(fn))


# -- lesson 0: a mean with one all-reduce --------------------------------------------------------


@each_rank
def mean_on_ranks(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
    """``mean = mean_of(mine)``: ``mean_of`` issued a collective (an all-reduce, or an all-gather: both are
    right), and ``mean`` is the mean of every rank's ``mine`` (rank ``r`` holds ``[0, 1, 2, 3] * (r + 1)``)."""
    from labkit.i18n import t

    calls = _calls(obs, "mean_of")
    if not calls or any(c.get("op") not in MEAN_OPS for c in calls):
        got = _ops(calls) if calls else t("grading.exercise.nothing")
        return _fail("calls", rank=r, got=got, want="all_reduce", **_where("mean_of"))
    mean = _global(obs, "mean", "tensor")
    if mean is None or mean.get("n") != 4 or "values" not in mean:
        return _fail("missing", rank=r, what="tensor", name="mean")
    want = [i * (world + 1) / 2 for i in range(4)]
    if all(abs(a - b) <= 1e-6 for a, b in zip(mean["values"], want)):
        return None
    total = [i * world * (world + 1) / 2 for i in range(4)]
    if all(abs(a - b) <= 1e-6 for a, b in zip(mean["values"], total)):
        return _fail("not_mean", rank=r, name="mean")
    return _fail("wrong_values", rank=r, name="mean")


MEAN_OPS = ("all_reduce", "all_gather", "reduce_scatter")  # the collectives a mean can be made from


# -- lesson 1: DDP's averaging, by hand --------------------------------------------------------


@each_rank
def ddp_by_hand(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
    mine, ddp = _global(obs, "mine", "module"), _global(obs, "ddp", "module")
    if mine is None or not mine.get("params"):
        return _fail("missing", rank=r, what="model", name="mine")
    if ddp is None or ddp.get("flavor") != Flavor.DDP:
        return _fail("missing", rank=r, what="DistributedDataParallel", name="ddp")
    calls = _calls(obs, "average_gradients")
    if not calls or any(c.get("op") not in MEAN_OPS for c in calls):
        from labkit.i18n import t

        got = _ops(calls) if calls else t("grading.exercise.nothing")
        return _fail("calls", rank=r, got=got, want="all_reduce", **_where("average_gradients"))
    # one all-reduce per gradient, one of them all flattened, or buckets (as DDP): the gradients decide
    if len(mine["params"]) != len(ddp.get("params", [])):
        return _fail("missing", rank=r, what="DistributedDataParallel", name="ddp")
    for p, q in zip(mine["params"], ddp.get("params", [])):
        if not close(p["grad"], q.get("grad"), rel=1e-5, abs_=1e-6):
            return _fail("grads_differ", rank=r, param=p["name"])
    return None


# -- lesson 2: ZeRO-3 from an all-gather and a reduce-scatter --------------------------------------


@each_rank
def mini_zero3(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
    shard, grad_shard = _global(obs, "shard", "tensor"), _global(obs, "grad_shard", "tensor")
    flat_grad = _global(obs, "flat_grad", "tensor")
    for name, value in (("shard", shard), ("grad_shard", grad_shard), ("flat_grad", flat_grad)):
        if value is None:
            return _fail("missing", rank=r, what="tensor", name=name)
    n = shard["n"]
    gather, bad = _one(r, _calls(obs, "gather_params"), "gather_params", "all_gather")
    if bad:
        return bad
    if gather["n_in"] != n or gather["n_out"] != world * n:
        return _fail(
            "wrong_size",
            rank=r,
            op="all_gather",
            got_in=gather["n_in"],
            got_out=gather["n_out"],
            want_in=n,
            want_out=world * n,
        )
    if not close(gather.get("fi"), shard):
        return _fail("wrong_input", rank=r, op="all_gather", what="shard")
    scatter, bad = _one(r, _calls(obs, "reduce_scatter_grads"), "reduce_scatter_grads", "reduce_scatter")
    if bad:
        return bad
    if scatter["n_in"] != world * n or scatter["n_out"] != n:
        return _fail(
            "wrong_size",
            rank=r,
            op="reduce_scatter",
            got_in=scatter["n_in"],
            got_out=scatter["n_out"],
            want_in=world * n,
            want_out=n,
        )
    if not close(scatter.get("fi"), flat_grad):
        return _fail("wrong_input", rank=r, op="reduce_scatter", what="flat_grad")
    out = scatter.get("fo")
    if out is None or grad_shard.get("n") != n:
        return _fail("wrong_values", rank=r, name="grad_shard")
    mean = out if scatter.get("red") == "AVG" else scaled(out, 1 / world)
    if close(grad_shard, mean):
        return None
    if close(grad_shard, out):
        return _fail("not_mean", rank=r, name="grad_shard")
    return _fail("wrong_values", rank=r, name="grad_shard")


# -- lesson 3: units, two ways ---------------------------------------------------------------


@each_rank
def wrap_units(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
    for api, name in (("FSDP1", Flavor.FSDP1), ("FSDP2", Flavor.FSDP2)):  # the variables are named as the flavors
        m = _global(obs, name, "module")
        if m is None or m.get("flavor") != name:
            return _fail("missing", rank=r, what=api, name=name)
        units = m.get("units", {})
        want = {"root", *m.get("blocks", [])}
        if set(units) != want or len(want) < 2:
            return _fail("units", rank=r, api=api, got=", ".join(sorted(units)) or "-")
        if m.get("param_bytes") != 4 * sum(units.values()) // world:
            return _fail("not_sharded", rank=r, api=api, got=m.get("param_bytes"), n=world)
    fsdp2 = _global(obs, "fsdp2", "module") or {}
    if set(fsdp2.get("fsdp_modules", [])) != {"root", *fsdp2.get("blocks", [])}:
        return _fail("units", rank=r, api="FSDP2", got=", ".join(sorted(fsdp2.get("fsdp_modules", []))) or "-")
    return None


# -- lesson 4: forward prefetch in FSDP2 ---------------------------------------------------------


def gathered_at_block_start(trace: list[dict[str, Any]]) -> list[int]:
    """How many all-gathers had been issued when each block first started computing, in order."""
    gathered, counts, seen = 0, [], set()
    for e in trace:
        if e.get("k") == "call" and e.get("op") == "all_gather":
            gathered += 1
        elif e.get("k") == "fwd" and e.get("m") == "TransformerBlock" and e.get("id") not in seen:
            seen.add(e.get("id"))
            counts.append(gathered)
    return counts


def prefetch_verdict(r: int, blocks: list[str], prefetch: dict[str, list[str]], counts: list[int]) -> Verdict | None:
    """Forward prefetch done right: each unit prefetches only blocks after it, and when block ``i`` (past
    the first) starts computing, its all-gather was issued already, while an earlier one computed.

    labkit sees a block start before FSDP2's own hook gathers it: without prefetch the root's all-gather
    and blocks 0..i-1's were issued by then (``i + 1``); prefetching one block ahead (or two, or more)
    makes it at least ``i + 2``. The root's unit is gathered before block 0, so block 0 is not counted."""
    order = {"root": -1, **{b: i for i, b in enumerate(blocks)}}
    later = all(
        unit in order and all(order.get(x, -2) > order[unit] for x in ahead) for unit, ahead in prefetch.items()
    )
    if not later or not prefetch:
        return _fail(
            "prefetch_config",
            rank=r,
            got="; ".join(f"{k} -> {', '.join(v)}" for k, v in sorted(prefetch.items())) or "-",
        )
    last = len(blocks) + 1  # the root's unit and every block's
    if len(counts) != len(blocks) or any(n < min(i + 2, last) for i, n in enumerate(counts) if i > 0):
        return _fail("prefetch_order", rank=r, got=", ".join(map(str, counts)) or "-")
    return None


@each_rank
def forward_prefetch(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
    model = _global(obs, "model", "module")
    if model is None or model.get("flavor") != Flavor.FSDP2:
        return _fail("missing", rank=r, what="FSDP2 model", name="model")
    return prefetch_verdict(
        r, model.get("blocks", []), model.get("prefetch", {}), gathered_at_block_start(obs.get("trace", []))
    )


# -- lessons 5 and 7: one step per model, told apart by the model that ran forward -----------------------


def steps_by_model(obs: dict[str, Any]) -> list[dict[str, Any]]:
    """The trace cut at each new ``TransformerLM``'s first forward: per model, its collectives, the
    forwards of its blocks and the losses it returned, in order.

    FSDP1 wraps the model, so it gathers the root's parameters before labkit sees the model start:
    the all-gathers that end the trace before a new model's first forward are that model's (the
    previous model's backward ended with a reduce-scatter, and its optimizer issues none).
    """
    steps: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    models: dict[Any, dict[str, Any]] = {}
    tail: list[dict[str, Any]] = []  # collectives since the last model event, not yet given to a model

    def flush(keep: int | None = None) -> list[dict[str, Any]]:
        keep = len(tail) if keep is None else keep
        if current is not None:
            current["calls"].extend(tail[:keep])
        moved_on = tail[keep:]
        tail.clear()
        return moved_on

    for e in obs.get("trace", []):
        kind = e.get("k")
        if kind == "call":
            tail.append(e)
            continue
        if kind == "fwd" and e.get("m") == "TransformerLM" and e.get("id") not in models:
            keep = len(tail)
            while keep and tail[keep - 1].get("op") == "all_gather":
                keep -= 1
            carried = flush(keep)
            current = models[e.get("id")] = {"calls": carried, "blocks": {}, "losses": []}
            steps.append(current)
            continue
        flush()
        if current is None:
            continue
        if kind == "fwd" and e.get("m") == "TransformerLM":
            current = models[e.get("id")]
        elif kind == "fwd" and e.get("m") == "TransformerBlock":
            current["blocks"][e.get("id")] = current["blocks"].get(e.get("id"), 0) + 1
        elif kind == "out":
            current["losses"].append(e.get("loss"))
    flush()
    return steps


def moved(step: dict[str, Any], op: str) -> tuple[int, set[str]]:
    """(bytes, dtypes) the step's ``op`` calls moved: an all-gather's output, a reduce-scatter's input."""
    size = {"float32": 4, "float64": 8, "bfloat16": 2, "float16": 2}
    calls = [c for c in step["calls"] if c.get("op") == op]
    key = "n_out" if op == "all_gather" else "n_in"
    return sum(c[key] * size.get(c.get("dtype", ""), 4) for c in calls), {c.get("dtype", "") for c in calls}


@each_rank
def mixed_precision(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
    from labkit.i18n import t

    steps = steps_by_model(obs)
    if len(steps) != 2:
        return _fail("steps", rank=r, got=len(steps), want=2)
    fp32, yours = steps
    (g32, _), (r32, _) = moved(fp32, "all_gather"), moved(fp32, "reduce_scatter")
    (g, gtypes), (rs, rtypes) = moved(yours, "all_gather"), moved(yours, "reduce_scatter")
    # the all-gathers move half the fp32 run's bytes (a 2-byte dtype); the reduce-scatters stay fp32
    wanted = (
        ("all_gather", bool(g32) and 2 * g == g32, gtypes, "grading.exercise.dtype.half"),
        ("reduce_scatter", rs == r32 and rtypes == {"float32"}, rtypes, "grading.exercise.dtype.fp32"),
    )
    for op, ok, dtypes, want in wanted:
        if not ok:
            return _fail("dtype", rank=r, op=op, dtype=", ".join(sorted(dtypes)) or "-", want=t(want))
    return None


@each_rank
def checkpoint_budget(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
    steps = steps_by_model(obs)
    if len(steps) != 2:
        return _fail("steps", rank=r, got=len(steps), want=2)
    plain, yours = steps
    # some blocks computed again in backward: which ones, and whether that meets the budget, is the
    # grader's to measure (labkit.grading.rerun); every block, or every other one, can be right
    if max(yours["blocks"].values(), default=0) < 2:
        return _fail("no_recompute", rank=r, got=max(yours["blocks"].values(), default=0))
    a, b = (plain["losses"] or [None])[0], (yours["losses"] or [None])[0]
    if a is None or b is None or abs(a - b) > 1e-6 * abs(a):
        return _fail("loss_changed", rank=r, plain=a, yours=b)
    return None


@each_rank
def accumulation(r: int, world: int, obs: dict[str, Any]) -> Verdict | None:
    """Lesson 6: the same micro-batches as syncing every one, one round of reduce-scatters instead of one per
    micro-batch, and after the optimizer step the same loss on a probe batch (the same summed gradient)."""
    steps = steps_by_model(obs)
    if len(steps) != 2:
        return _fail("steps", rank=r, got=len(steps), want=2)
    every, yours = steps
    micro_batches = len(every["losses"]) - 1  # the last forward is the probe, after the optimizer step
    if micro_batches < 1 or len(yours["losses"]) != len(every["losses"]):
        return _fail("micro_batches", rank=r, got=max(len(yours["losses"]) - 1, 0), want=micro_batches)
    rounds = [sum(1 for c in step["calls"] if c.get("op") == "reduce_scatter") for step in (every, yours)]
    if rounds[1] * micro_batches != rounds[0]:
        return _fail("accumulate_sync", rank=r, got=rounds[1], want=rounds[0] // micro_batches)
    a, b = every["losses"][-1], yours["losses"][-1]
    if a is None or b is None or abs(a - b) > 1e-5 * abs(a):
        return _fail("accumulated_grads", rank=r, every=a, yours=b)
    return None


# -- lesson 7: a model loaded from the ranks' checkpoint ------------------------------------------


def saved_loss(observations: Observations) -> float | None:
    """The loss rank 0's model gave on the probe batch first, with gradients off (right after saving)."""
    for e in observations.get(0, {}).get("trace", []):
        if e.get("k") == "out" and e.get("grad") is False and e.get("loss") is not None:
            return float(e["loss"])
    return None


def reloaded_loss(loss: float, observations: Observations) -> Verdict:
    want = saved_loss(observations)
    if want is None:
        return _fail("no_observation", rank=0)
    if abs(loss - want) <= 1e-5 * abs(want):
        return Verdict(True)
    return _fail("reloaded", got=f"{loss:.6f}", want=f"{want:.6f}")


# -- lesson 3: a min_num_params for any model -------------------------------------------------------


def policy_units(probe: dict[str, Any], value: Any) -> Verdict:
    """On the probe's model (``{"model": {"$model": config}}``), FSDP1's size policy at ``value`` makes the
    root and one unit per block, and a unit of their own for the embedding and the head where they are
    larger than a block (a large vocabulary: no threshold can keep them out and the blocks in)."""
    from labkit.grading.wrap import meta_model, size_policy_units

    config = probe["model"]["$model"]
    model = meta_model(config)
    blocks = [f"layers.{i}" for i in range(len(model.layers))]
    block = sum(p.numel() for p in model.layers[0].parameters())
    own = [n for n in ("tok_embeddings", "output") if sum(p.numel() for p in getattr(model, n).parameters()) > block]
    try:
        got = size_policy_units(model, int(value))
    except (TypeError, ValueError, OverflowError):
        got = []
    if got == sorted(["root", *blocks, *own]):
        return Verdict(True)
    return _fail("policy_units", dim=config["dim"], blocks=len(blocks), value=value, got=", ".join(got) or "-")
