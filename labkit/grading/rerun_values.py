"""The values and small judgements every exercise's re-run shares (``labkit.grading.rerun_exercises`` and each
lesson's own module, ``rerun_lesson8``): inputs exact in float32, tensors as lists, comparisons within a
float32 tolerance, the course's small MLP and its gradients, and the two verdicts every judge starts from.
"""

from __future__ import annotations

import random
from typing import Any

from labkit.grading.compare import Verdict

REL = 1e-4  # float32 sums in another order: ample for a right answer, far from any wrong one


def fail(key: str, **fields: Any) -> Verdict:
    return Verdict(False, f"grading.exercise.{key}", fields)


def floats(rng: random.Random, n: int) -> list[float]:
    """Values exact in float32 (multiples of 1/64), so ranks and grader start from the same numbers."""
    return [rng.randint(-256, 256) / 64 for _ in range(n)]


def tensor(values: Any) -> Any:
    import torch

    return torch.tensor(values, dtype=torch.float32)


def as_list(value: Any) -> Any:
    """A returned tensor as a list of floats; anything else as its type's name (judged wrong)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [float(x) for x in value.detach().to("cpu", torch.float64).reshape(-1)]
    return {"type": type(value).__name__}


def near(got: Any, want: list[float], rel: float = REL) -> bool:
    if not isinstance(got, list) or len(got) != len(want):
        return False
    scale = max((abs(w) for w in want), default=0.0)
    return all(abs(a - b) <= rel * scale + 1e-6 for a, b in zip(got, want))


def rank_of(mapping: Any, r: int) -> Any:
    """``mapping[r]``, whether the keys are ints or (after JSON) strings."""
    if not isinstance(mapping, dict):
        return None
    return mapping.get(r, mapping.get(str(r)))


def needs(calls: dict[Any, list[dict[str, Any]]], world: int, fn: str, allowed: set[str], want: str) -> Verdict | None:
    """The second signal: on every rank the student's ``fn`` issued collectives (itself, or through a
    library it called), only of ``allowed`` kinds."""
    from labkit.i18n import t

    for r in range(world):
        ops = [c.get("op", "?") for c in rank_of(calls, r) or [] if c.get("k") == "call" and c.get("fn") == fn]
        if not ops or not set(ops) <= allowed:
            got = ", ".join(dict.fromkeys(ops)) if ops else t("grading.exercise.nothing")
            where = t("grading.exercise.where.function", fn=fn)
            return fail("calls", rank=r, got=got, want=want, where=where)
    return None


def failed_first(result: dict[str, Any], world: int) -> Verdict | None:
    for r in range(world):
        if not isinstance(rank_of(result["outputs"], r), dict):
            return fail("rerun.no_output", rank=r)
    return None


def mlp(widths: list[int], seed: int) -> Any:
    """A small model whose every parameter has a gradient: the same on the grader's ranks and here."""
    import torch

    torch.manual_seed(seed)
    layers: list[Any] = []
    for a, b in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers[:-1])


def grads(model: Any, x: list[list[float]], y: list[list[float]]) -> list[list[float]]:
    import torch

    model.zero_grad()
    torch.nn.functional.mse_loss(model(tensor(x)), tensor(y)).backward()
    return [as_list(p.grad) for p in model.parameters()]
