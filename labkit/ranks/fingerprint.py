"""Small, comparable summaries of tensors and modules: what the grader's verifiers read.

A fingerprint of a tensor is its size, dtype, the sum, the sum of squares and one fixed
random projection of its values (all in float64), and the values themselves when it has
at most ``SMALL`` of them. Two tensors whose fingerprints agree to 1e-6 are equal for any
purpose an exercise has: a gradient that differs from DDP's in one element changes the
projection. Sums and projections are additive over the ranks' shards, but only the sum and
the sum of squares are over concatenation, so verifiers compare whole tensors.

A module's summary says what it is (plain, DDP, FSDP1, FSDP2), which units FSDP made and
their padded sizes, the parameter bytes this rank holds, its blocks, FSDP2's forward
prefetch settings, and for small unwrapped models each parameter's gradient fingerprint.
"""

from __future__ import annotations

from typing import Any

from labkit.wire.setting import Flavor

SMALL = 16  # tensors with at most this many elements are recorded value by value
LARGEST = 50_000_000  # larger tensors get their size only: a fingerprint would cost a pass over them
MAX_PARAMS = 400  # parameters listed one by one in a module's summary
_signs: dict[int, Any] = {}  # numel -> the ±1 projection vector (cached: the same sizes recur)


def _projection(n: int) -> Any:
    """A fixed ±1 vector of length ``n``: bit 7 of i·2654435761 (Knuth's multiplicative hash)."""
    import torch

    v = _signs.get(n)
    if v is None:
        i = torch.arange(n, dtype=torch.int64)
        v = (((i * 2654435761) >> 7) & 1).to(torch.float64) * 2 - 1
        if len(_signs) > 64:
            _signs.clear()
        _signs[n] = v
    return v


def local(t: Any) -> Any:
    """A DTensor's local shard; any other tensor itself."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def ptr(t: Any) -> int | None:
    try:
        return int(local(t).data_ptr())
    except (RuntimeError, AttributeError):
        return None


def tensor(t: Any) -> dict[str, Any]:
    """``{"n", "dtype", "shape", "ptr", "sum", "sumsq", "proj", ["values"]}`` of one tensor."""
    import torch

    t = local(t)
    out: dict[str, Any] = {
        "n": int(t.numel()),
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        "ptr": ptr(t),
    }
    if t.is_meta or t.numel() > LARGEST or t.is_complex():
        return out
    with torch.no_grad():
        x = t.detach().reshape(-1).to("cpu", torch.float64)
        out["sum"] = float(x.sum())
        out["sumsq"] = float((x * x).sum())
        out["proj"] = float((x * _projection(x.numel())).sum()) if x.numel() else 0.0
        if x.numel() <= SMALL:
            out["values"] = x.tolist()
    return out


def tensors(x: Any) -> list[Any]:
    """The tensors in a collective's argument: a tensor, a list of them, or a list of lists."""
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors(v)]
    return []


def of_args(x: Any) -> dict[str, Any] | None:
    """The fingerprint of one collective argument (several tensors: the first, with the total size)."""
    found = tensors(x)
    if not found:
        return None
    fp = tensor(found[0])
    if len(found) > 1:
        fp["count"], fp["total"] = len(found), sum(int(t.numel()) for t in found)
    return fp


def close(a: dict[str, Any] | None, b: dict[str, Any] | None, rel: float = 1e-5, abs_: float = 1e-6) -> bool:
    """Do two fingerprints describe the same values (to ``rel``, or ``abs_`` per element)?"""
    if not a or not b or a.get("n") != b.get("n") or "sum" not in a or "sum" not in b:
        return False
    n = max(int(a["n"]), 1)
    squares = max(float(a["sumsq"]), float(b["sumsq"]))
    # elements within abs_ of each other move the sum and the projection by at most n·abs_, and the
    # sum of squares by at most abs_·Σ(|a|+|b|) ≤ 2·abs_·sqrt(n·Σx²) (Cauchy-Schwarz), plus n·abs_²
    slack = {"sum": n * abs_, "proj": n * abs_, "sumsq": 2 * abs_ * (n * squares) ** 0.5 + n * abs_ * abs_}
    for key, extra in slack.items():
        x, y = float(a[key]), float(b[key])
        if abs(x - y) > rel * max(abs(x), abs(y)) + extra:
            return False
    if "values" in a and "values" in b:
        return all(abs(x - y) <= rel * max(abs(x), abs(y)) + abs_ for x, y in zip(a["values"], b["values"]))
    return True


def scaled(fp: dict[str, Any], k: float) -> dict[str, Any]:
    """The fingerprint of ``k`` times the tensor."""
    out = dict(fp)
    for key in ("sum", "proj"):
        if key in out:
            out[key] = out[key] * k
    if "sumsq" in out:
        out["sumsq"] = out["sumsq"] * k * k
    if "values" in out:
        out["values"] = [v * k for v in out["values"]]
    return out


# -- modules ---------------------------------------------------------------------------------


def flavor(module: Any) -> str:
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    if isinstance(module, FullyShardedDataParallel) or any(
        isinstance(m, FullyShardedDataParallel) for m in module.modules()
    ):
        return Flavor.FSDP1
    if any(isinstance(m, FSDPModule) for m in module.modules()):
        return Flavor.FSDP2
    if type(module).__name__ == "DistributedDataParallel" and hasattr(module, "module"):
        return Flavor.DDP
    return Flavor.PLAIN


def module(m: Any) -> dict[str, Any]:
    """What a module is and holds on this rank (see the module docstring)."""
    from labkit.ranks.fsdp_units import padded_units, unit_name
    from labkit.ranks.memtrack import split_by_role

    kind = flavor(m)
    out: dict[str, Any] = {"type": type(m).__name__, "flavor": kind}
    out["numel"] = int(sum(local(p).numel() for p in m.parameters()))
    out["blocks"] = [unit_name(n) for n, sub in m.named_modules() if _is_block(sub)]
    if kind in (Flavor.FSDP1, Flavor.FSDP2):
        out["units"] = padded_units(m)
        out["param_bytes"] = int(split_by_role(m)["params"])
    if kind is Flavor.FSDP2:
        out["prefetch"] = fsdp2_prefetch(m)
        out["fsdp_modules"] = [unit_name(n) for n, sub in m.named_modules() if _is_fsdp2(sub)]
    if kind in (Flavor.PLAIN, Flavor.DDP):
        params = list(m.named_parameters())[:MAX_PARAMS]
        out["params"] = [
            {
                "name": name,
                "n": int(p.numel()),
                "ptr": ptr(p),
                "grad": tensor(p.grad) if p.grad is not None else None,
            }
            for name, p in params
        ]
    return out


def _is_block(m: Any) -> bool:
    return any(c.__name__ == "TransformerBlock" and c.__module__.startswith("labkit.models") for c in type(m).__mro__)


def _is_fsdp2(m: Any) -> bool:
    return any(c.__name__ == "FSDPModule" for c in type(m).__mro__)


def fsdp2_prefetch(model: Any) -> dict[str, list[str]]:
    """FSDP2's forward prefetch settings: {unit: [the units it gathers ahead]} (private torch 2.13 state)."""
    from labkit.ranks.fsdp_units import unit_name

    names = {}
    states = {}
    for fqn, m in model.named_modules():
        get_state = getattr(m, "_get_fsdp_state", None)
        if callable(get_state):
            state = get_state()
            names[id(state)] = unit_name(fqn)
            states[unit_name(fqn)] = state
    out = {}
    for name, state in states.items():
        ahead = getattr(state, "_states_to_forward_prefetch", None) or []
        if ahead:
            out[name] = [names.get(id(s), "?") for s in ahead]
    return out
